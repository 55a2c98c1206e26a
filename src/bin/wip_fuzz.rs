//! `wip-fuzz N [TARGET…]`: feed N generated inputs to each fuzz target (all by default) and
//! print, per target, `NAME: N inputs, K crashes`. Exits 1 if any input crashed, printing
//! the first such input of each target. Runs on stable Rust: no instrumentation, inputs
//! mutated from seeds that cover each grammar (see `wip::fuzz`).

use anyhow::{bail, Context, Result};
use clap::Parser;

#[derive(Parser)]
#[command(about = "Fuzz wip's parsers with generated inputs")]
struct Cli {
    /// How many inputs per target.
    n: u64,
    /// Targets to run (default: all).
    targets: Vec<String>,
    /// Seed of the generator (the same seed gives the same inputs).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let all = wip::fuzz::targets();
    let chosen: Vec<&wip::fuzz::Target> = if cli.targets.is_empty() {
        all.iter().collect()
    } else {
        cli.targets
            .iter()
            .map(|name| {
                all.iter().find(|t| t.name == name).with_context(|| {
                    let names: Vec<&str> = all.iter().map(|t| t.name).collect();
                    format!("no fuzz target {name:?} (targets: {})", names.join(", "))
                })
            })
            .collect::<Result<_>>()?
    };
    // A crash is reported once per target below, not once per input.
    std::panic::set_hook(Box::new(|_| {}));
    let mut crashed = false;
    for target in chosen {
        let started = std::time::Instant::now();
        let report = wip::fuzz::run(target, cli.n, cli.seed);
        println!(
            "{}: {} inputs, {} crashes ({:.1} s)",
            target.name,
            report.inputs,
            report.crashes,
            started.elapsed().as_secs_f64()
        );
        if let Some((input, why)) = report.first {
            crashed = true;
            println!(
                "  first crash: {why}\n  input: {:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }
    if crashed {
        bail!("some inputs crashed");
    }
    Ok(())
}
