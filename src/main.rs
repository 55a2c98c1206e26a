//! The `wip` command: mount a world, unmount it, call an op, decide on a pending run.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use wip::daemon;
use wip::launch::{self, MountOptions};
use wip::world::Verb;

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
        /// Shared state on PostgreSQL (`postgresql://…`): the journal, known world and
        /// pending approvals of every mount naming the same database [default: the
        /// manifest's `[state] url`, else SQLite in the state directory]
        #[arg(long, env = "WIP_STATE_URL", hide_env_values = true)]
        state_url: Option<String>,
        /// Stay in the foreground and log to stderr (stop with Ctrl-C or `wip umount DIR`).
        #[arg(long, short = 'f')]
        foreground: bool,
        /// Titled names, for people: collections list `42 Crash when config is missing`
        /// (the bare `42` still resolves) [default: the manifest's `[world] titled`]
        #[arg(long)]
        titled: bool,
        /// Return as soon as the mount is there, without waiting for hosts that start in
        /// the background (MCP servers, exec hosts) [default: wait up to startup_wait_ms]
        #[arg(long)]
        no_wait: bool,
        /// Mount options as fstab and mount(8) give them, comma-separated:
        /// `manifest=FILE`, `state=DIR`, `titled`, `no_wait`, `foreground`, `allow_other`
        /// (other users may enter; a normal user needs `user_allow_other` in
        /// /etc/fuse.conf); the usual
        /// generic options (rw, defaults, nodev, nosuid, noauto, nofail, _netdev, x-*, …)
        /// are accepted and ignored.
        #[arg(short = 'o', value_name = "OPTIONS")]
        options: Vec<String>,
        /// Mount over NFSv3 instead of FUSE, where FUSE is not to be had: a `wip
        /// serve-nfs` on a free loopback port in the background, mounted with the
        /// platform's NFS client (`wip umount DIR` stops both).
        #[arg(long)]
        nfs: bool,
    },
    /// Serve a world over NFSv3 (and MOUNT, on one port) where FUSE is not to be had;
    /// stays in the foreground. Mount it with the line it prints (macOS: `mount_nfs -o
    /// vers=3,tcp,port=PORT,mountport=PORT,nolocks localhost:/ DIR`).
    ServeNfs {
        /// A directory (the default world: the tracker and that directory's files) or a
        /// world manifest (TOML) [default: the current directory]
        world: Option<PathBuf>,
        /// Where to listen: loopback unless said otherwise (NFSv3's AUTH_SYS trusts
        /// whatever uid a client claims; anything but loopback is reachable by others).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        /// Where clients mount it: printed paths (results, runs) start there [default:
        /// world paths, `/tracker/issues/42`]
        #[arg(long)]
        mount_point: Option<PathBuf>,
        /// State directory [default: $XDG_STATE_HOME/wip]
        #[arg(long, env = "WIP_STATE")]
        state: Option<PathBuf>,
        /// Shared state on PostgreSQL, as for `wip mount`.
        #[arg(long, env = "WIP_STATE_URL", hide_env_values = true)]
        state_url: Option<String>,
        /// Titled names (see `wip mount --titled`).
        #[arg(long)]
        titled: bool,
        /// Serve other users too, each as itself [default: the manifest's `[world]
        /// allow_other`]; without it only this server's user is served (other users'
        /// sockets, other uids and AUTH_NONE get NFS3ERR_ACCES).
        #[arg(long)]
        allow_other: bool,
    },
    /// Unmount DIR (also recovers a mount whose daemon died).
    Umount { dir: PathBuf },
    /// Run an op and print its result: PATH is an op folder (`…/ops/close`) or its `call`.
    ///
    /// ARGS is a JSON object, key=value lines or plain text; without ARGS, standard input
    /// if it is not a terminal, else no arguments. Exits 1 with the error words on failure.
    Call {
        path: PathBuf,
        args: Option<String>,
        /// A call that outlives the mount's call_timeout_ms goes on as a run: wait for it
        /// (through its ops/wait, again and again) and print its result.
        #[arg(long)]
        wait: bool,
    },
    /// Print, as a unified diff, what the changes through the mount did to a working tree
    /// (each path's content before the first of them against now): DIR is a folder of a
    /// files host in a mount (its root, or a folder below it to see that part only).
    Diff {
        dir: PathBuf,
        /// Where to start: a run's folder, an event id of .wip/events, or a time
        /// (2026-12-06T10:00:00Z) [default: every change recorded]
        #[arg(long)]
        since: Option<String>,
        /// Only the changes of this session (its number), or `mine`
        #[arg(long)]
        session: Option<String>,
    },
    /// List runs across the world with their paths: those in flight, then the latest
    /// (the mount's .wip/runs). Wait on one with RUN/ops/wait, stop it with RUN/ops/cancel.
    Runs {
        dir: PathBuf,
        /// Only runs in flight (running, or pending a person's sign-off).
        #[arg(long)]
        running: bool,
    },
    /// Approve a pending run: it is checked again and runs now; prints its result.
    ///
    /// RUN is the run's path in the mount (`…/ops/merge/runs/12`, as its `result` and
    /// `.wip/pending` print it) or its id. Refused from the caller's own terminal session
    /// unless the rule says self_approve = true. Exits 1 if the decision is refused, 2 if
    /// the approved call failed.
    Approve {
        run: String,
        /// The mount's state directory; needed by approvers who cannot read the mount
        /// [default: what the mount's .wip/control says]
        #[arg(long, env = "WIP_STATE")]
        state: Option<PathBuf>,
    },
    /// The state of a mount: its hosts (ready, starting, down), calls in flight, journal.
    Status { dir: PathBuf },
    /// Print a shell completion script: `wip completions bash > /etc/bash_completion.d/wip`.
    Completions { shell: clap_complete::Shell },
    /// Deny a pending run: it never runs; the caller's `result` says who denied it and why.
    Deny {
        run: String,
        /// Words for the caller: why not.
        #[arg(long)]
        reason: Option<String>,
        /// The mount's state directory (see `wip approve --help`).
        #[arg(long, env = "WIP_STATE")]
        state: Option<PathBuf>,
    },
}

/// What the log shows: wip's own events at the level asked (info in the foreground,
/// warn in the background daemon's wip.log), its dependencies' only from warn up (their
/// info is chatter: rmcp logs every progress notification there). A `WIP_LOG` that is a
/// bare level sets wip's own; one with directives (`warn,rmcp=debug`) is taken as it is.
fn log_directives(asked: Option<&str>, foreground: bool) -> String {
    // fuser warns when the session ends after `wip umount` already unmounted: not news.
    const QUIET: &str = "fuser::session=error";
    match asked.map(str::trim).filter(|a| !a.is_empty()) {
        Some(a) if a.contains('=') || a.contains(',') => a.to_string(),
        Some(level) => format!("warn,wip={level},{QUIET}"),
        None if foreground => format!("warn,wip=info,{QUIET}"),
        None => format!("warn,{QUIET}"),
    }
}

fn init_logging(foreground: bool) {
    let filter = EnvFilter::new(log_directives(
        std::env::var("WIP_LOG").ok().as_deref(),
        foreground,
    ));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // A log file (the background daemon's wip.log) gets no colour codes.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(|| ScrubbedStderr)
        .try_init();
}

/// The log's writer: each event is written whole, with the daemon's secrets and every
/// token-shaped word removed (the log of a background daemon is `wip.log`).
struct ScrubbedStderr;

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(wip::secrets::scrub_log(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The subcommands' names: a first argument that is none of them (nor a flag) is the
/// SOURCE of mount.fuse3's calling convention, `wip SOURCE DIR -o OPTIONS`.
fn is_subcommand(arg: &str) -> bool {
    use clap::CommandFactory;
    arg == "help"
        || Cli::command()
            .get_subcommands()
            .any(|c| c.get_name() == arg)
}

/// `wip SOURCE DIR [-o OPTIONS]` (what `mount -t fuse.wip SOURCE DIR -o …` and fstab run)
/// becomes `wip mount DIR -o source=SOURCE,OPTIONS`.
fn fstab_convention(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("-");
    if args.len() < 3 || first.starts_with('-') || is_subcommand(first) {
        return args;
    }
    let mut out: Vec<std::ffi::OsString> = vec![args[0].clone(), "mount".into(), args[2].clone()];
    out.push("-o".into());
    out.push(format!("source={first}").into());
    out.extend(args.into_iter().skip(3));
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(fstab_convention(std::env::args_os().collect()));
    let outcome = match cli.command {
        Cmd::Mount {
            dir,
            manifest,
            state,
            state_url,
            foreground,
            titled,
            no_wait,
            options,
            nfs,
        } => {
            let given = daemon::MountFlags {
                manifest,
                state,
                foreground,
                titled,
                no_wait,
                allow_other: false,
            };
            match daemon::apply_mount_options(given, &options) {
                Err(e) => Err(e),
                Ok(flags) if nfs => {
                    init_logging(false);
                    wip::nfs::serve::mount(
                        &dir,
                        wip::nfs::serve::Options {
                            world: flags.manifest,
                            listen: "127.0.0.1:0".into(),
                            mount_point: Some(dir.clone()),
                            state_dir: flags.state.unwrap_or_else(launch::default_state_dir),
                            state_url,
                            titled: flags.titled,
                            allow_other: flags.allow_other,
                        },
                    )
                }
                Ok(flags) => {
                    init_logging(flags.foreground);
                    let foreground = flags.foreground;
                    let opts = MountOptions {
                        mount_point: dir,
                        manifest: flags.manifest,
                        state_dir: flags.state.unwrap_or_else(launch::default_state_dir),
                        titled: flags.titled,
                        wait: !flags.no_wait,
                        allow_other: flags.allow_other,
                        state_url,
                    };
                    if foreground {
                        daemon::serve_foreground(opts)
                    } else {
                        daemon::mount_background(opts)
                    }
                }
            }
        }
        Cmd::ServeNfs {
            world,
            listen,
            mount_point,
            state,
            state_url,
            titled,
            allow_other,
        } => {
            init_logging(true);
            wip::nfs::serve::run(wip::nfs::serve::Options {
                world,
                listen,
                mount_point,
                state_dir: state.unwrap_or_else(launch::default_state_dir),
                state_url,
                titled,
                allow_other,
            })
        }
        Cmd::Status { dir } => {
            init_logging(false);
            return printed(daemon::status(&dir));
        }
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "wip", &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        Cmd::Umount { dir } => {
            init_logging(false);
            daemon::umount(&dir)
        }
        Cmd::Call { path, args, wait } => {
            init_logging(false);
            return run_call(path, args, wait);
        }
        Cmd::Diff {
            dir,
            since,
            session,
        } => {
            init_logging(false);
            return run_diff(&dir, since, session);
        }
        Cmd::Runs { dir, running } => {
            init_logging(false);
            return printed(daemon::runs(&dir, running));
        }
        Cmd::Approve { run, state } => {
            init_logging(false);
            return run_decision(&run, &Verb::Approve, state.as_deref());
        }
        Cmd::Deny { run, reason, state } => {
            init_logging(false);
            return run_decision(&run, &Verb::Deny { reason }, state.as_deref());
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

/// A command's text on stdout, or its error's words on stderr and exit 1.
fn printed(text: anyhow::Result<String>) -> ExitCode {
    match text {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("wip: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `wip diff DIR`: the `diff` op of the working tree DIR is in (`ROOT@/ops/diff`), limited
/// to DIR when it is a folder below the root.
fn run_diff(dir: &std::path::Path, since: Option<String>, session: Option<String>) -> ExitCode {
    let dir = match std::path::absolute(dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("wip: {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    // The working tree's root is the nearest folder with an entry offering `diff`.
    let mut root = dir.as_path();
    let op = loop {
        let mut entry = root.as_os_str().to_owned();
        entry.push("@/ops/diff");
        let op = PathBuf::from(entry);
        if op.join("call").exists() {
            break op;
        }
        match root.parent() {
            Some(p) => root = p,
            None => {
                eprintln!(
                    "wip: {} is not in a working tree of a mount (no ROOT@/ops/diff above it)",
                    dir.display()
                );
                return ExitCode::FAILURE;
            }
        }
    };
    let mut args = serde_json::Map::new();
    if let Some(s) = since {
        let v = match s.trim().parse::<i64>() {
            Ok(n) => serde_json::json!(n),
            Err(_) => serde_json::json!(s),
        };
        args.insert("since".into(), v);
    }
    if let Some(s) = session {
        args.insert("session".into(), serde_json::json!(s));
    }
    if let Ok(under) = dir.strip_prefix(root) {
        if !under.as_os_str().is_empty() {
            args.insert("under".into(), serde_json::json!(under.to_string_lossy()));
        }
    }
    let payload = serde_json::Value::Object(args).to_string();
    run_call(op, Some(payload), true)
}

fn run_call(path: PathBuf, args: Option<String>, wait: bool) -> ExitCode {
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
    let mut outcome = daemon::call(&path, &payload);
    // Past the mount's timeout the call is a run: its `wait` answers when it ends (or
    // times out again, and is asked again).
    if wait {
        while let Ok(out) = &outcome {
            let timed_out = out
                .error
                .as_ref()
                .is_some_and(|e| e.raw_os_error() == Some(libc::ETIMEDOUT));
            let Some(run) = daemon::run_of(&out.result).filter(|_| timed_out) else {
                break;
            };
            outcome = daemon::call(&run.join("ops/wait"), b"");
        }
    }
    match outcome {
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

fn run_decision(run: &str, verb: &Verb, state: Option<&std::path::Path>) -> ExitCode {
    match wip::control::decide(run, verb, state) {
        Ok(a) if a.ok => {
            print!("{}", a.text);
            if a.call_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Ok(a) => {
            let e = std::io::Error::from_raw_os_error(a.errno);
            eprintln!("wip: {e}: {}", a.text.trim_end());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("wip: {e:#}");
            ExitCode::FAILURE
        }
    }
}
