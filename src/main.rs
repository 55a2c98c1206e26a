//! The `wip` command: mount a world, unmount it, call an op.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use wip::daemon::{self, MountOptions};

#[derive(Parser)]
#[command(
    name = "wip",
    version,
    about = "Mount a Worldspace: an issue tracker, files and more as one tree of directories",
    long_about = "Mount a Worldspace: hosts (an issue tracker, a directory, …) projected as one tree. \
Every object is a directory with `description`, `ref` and `ops/`; read `ops/NAME/guard`, \
write arguments into `ops/NAME/call`, read `ops/NAME/result`. See README.md in the mount."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Mount a world at DIR; returns once it is ready and keeps serving in the background.
    Mount {
        /// The mount point (created if missing).
        dir: PathBuf,
        /// World manifest (TOML); without it, the embedded default world
        /// (tracker + files of the current directory).
        #[arg(long, short = 'm', env = "WIP_MANIFEST")]
        manifest: Option<PathBuf>,
        /// State directory (journal and host databases) [default: $XDG_STATE_HOME/wip]
        #[arg(long, env = "WIP_STATE")]
        state: Option<PathBuf>,
        /// Stay in the foreground and log to stderr (stop with Ctrl-C or `wip umount DIR`).
        #[arg(long, short = 'f')]
        foreground: bool,
    },
    /// Unmount DIR (also recovers a mount whose daemon died).
    Umount { dir: PathBuf },
    /// Run an op and print its result: PATH is an op folder (`…/ops/close`) or its `call`.
    ///
    /// ARGS is a JSON object, key=value lines or plain text; without ARGS, standard input
    /// if it is not a terminal, else no arguments. Exits 1 with the error words on failure.
    Call { path: PathBuf, args: Option<String> },
}

fn init_logging(foreground: bool) {
    // fuser warns when the session ends after `wip umount` already unmounted: not news.
    let filter = EnvFilter::try_from_env("WIP_LOG").unwrap_or_else(|_| {
        EnvFilter::new(if foreground {
            "info,fuser::session=error"
        } else {
            "warn,fuser::session=error"
        })
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Cmd::Mount {
            dir,
            manifest,
            state,
            foreground,
        } => {
            init_logging(foreground);
            let opts = MountOptions {
                mount_point: dir,
                manifest,
                state_dir: state.unwrap_or_else(daemon::default_state_dir),
            };
            if foreground {
                daemon::serve_foreground(opts)
            } else {
                daemon::mount_background(opts)
            }
        }
        Cmd::Umount { dir } => {
            init_logging(false);
            daemon::umount(&dir)
        }
        Cmd::Call { path, args } => {
            init_logging(false);
            return run_call(path, args);
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wip: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_call(path: PathBuf, args: Option<String>) -> ExitCode {
    let payload = match args {
        Some(a) => a.into_bytes(),
        None if !std::io::stdin().is_terminal() => {
            let mut buf = Vec::new();
            if let Err(e) = std::io::stdin().read_to_end(&mut buf) {
                eprintln!("wip: cannot read arguments from standard input: {e}");
                return ExitCode::FAILURE;
            }
            buf
        }
        None => Vec::new(),
    };
    match daemon::call(&path, &payload) {
        Ok(out) => match out.error {
            None => {
                print!("{}", out.result);
                ExitCode::SUCCESS
            }
            Some(e) => {
                let words = out.result.trim_end();
                eprintln!(
                    "wip: {e}: {}",
                    words.strip_prefix("error: ").unwrap_or(words)
                );
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("wip: {e:#}");
            ExitCode::FAILURE
        }
    }
}
