//! `wip-fuzz N [TARGET…]`: feed N generated inputs to each fuzz target (all by default) and
//! print, per target, `NAME: N inputs, K crashes`. Exits 1 if any input crashed, printing
//! the first such input of each target. Runs on stable Rust: no instrumentation, inputs
//! mutated from seeds that cover each grammar (see `wip::fuzz`). Each run explores anew
//! (a fresh seed unless `--seed` is given, printed so it can be replayed); the first
//! crashing input of each target is kept in `fuzz/regressions/TARGET.txt`, which the suite
//! replays every time.

use anyhow::{bail, Context, Result};
use clap::Parser;

#[derive(Parser)]
#[command(about = "Fuzz wip's parsers with generated inputs")]
struct Cli {
    /// How many inputs per target.
    n: u64,
    /// Targets to run (default: all).
    targets: Vec<String>,
    /// Seed of the generator (the same seed gives the same inputs); default: a new one.
    #[arg(long)]
    seed: Option<u64>,
    /// Do not add crashing inputs to fuzz/regressions/.
    #[arg(long)]
    no_keep: bool,
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
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!("seed {seed} (replay with --seed {seed})");
    // A crash is reported once per target below, not once per input.
    std::panic::set_hook(Box::new(|_| {}));
    let mut crashed = false;
    for target in chosen {
        let started = std::time::Instant::now();
        let report = wip::fuzz::run(target, cli.n, seed);
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
            if !cli.no_keep {
                let file = keep(target.name, &input)?;
                println!("  kept in {}", file.display());
            }
        }
    }
    if crashed {
        bail!("some inputs crashed");
    }
    Ok(())
}

/// Add `input` to the target's regression file (once), for the suite to replay.
fn keep(target: &str, input: &[u8]) -> Result<std::path::PathBuf> {
    use std::io::Write;
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(format!("{target}.txt"));
    let line = wip::fuzz::regression_line(input);
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    if !old.lines().any(|l| l.trim() == line) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .with_context(|| format!("cannot keep the input in {}", file.display()))?;
        writeln!(f, "{line}")?;
    }
    Ok(file)
}
