//! What both adapters start from: a world built from a manifest (its state directory
//! locked to this process), the state directory's default, the allocator a daemon wants,
//! and a process started in the background. FUSE (`daemon`) and NFS (`nfs::serve`) mount
//! what this builds; `control` reads where state lives and what is mounted.

use std::fs::OpenOptions;
use std::io::{Read, Seek, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::host::Changes;
use crate::hosts::{self, HostContext};
use crate::manifest::{Manifest, DEFAULT_MANIFEST};
use crate::world::{Mounted, World};

/// The state directory's lock file: one daemon per state directory.
const LOCK_FILE: &str = "daemon.lock";
/// How long a new daemon waits for one whose mount is already gone to finish exiting
/// (`wip umount DIR && wip mount DIR` right after).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Where state lives unless `--state` says otherwise.
pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("wip");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".local/state/wip")
}

pub struct MountOptions {
    pub mount_point: PathBuf,
    pub manifest: Option<PathBuf>,
    pub state_dir: PathBuf,
    /// Titled names whatever the manifest says (`--titled`).
    pub titled: bool,
    /// Wait up to `startup_wait_ms` for hosts starting in the background (not `--no-wait`).
    pub wait: bool,
    /// Let other users reach the mount (`-o allow_other`).
    pub allow_other: bool,
    /// Shared state on PostgreSQL (overrides the manifest's `[state] url`).
    pub state_url: Option<String>,
}

/// Read the manifest (or the embedded default) and its text with secrets redacted.
pub(crate) fn load_manifest(path: Option<&Path>) -> Result<(Manifest, String)> {
    let (manifest, text) = match path {
        Some(p) => {
            let m = Manifest::load(p)?;
            (m, std::fs::read_to_string(p).unwrap_or_default())
        }
        None => (Manifest::default_world(), DEFAULT_MANIFEST.to_string()),
    };
    // Whatever the world prints from here on is scrubbed of the manifest's secrets.
    crate::secrets::register_manifest(&text);
    Ok((manifest, crate::secrets::redact_manifest(&text)))
}

/// Exclusive use of a state directory (an advisory `flock` on `daemon.lock`, which names
/// the holder). The kernel drops the lock when the holder's process ends, also by a crash,
/// so a stale file never blocks a mount.
pub struct StateLock {
    _file: std::fs::File,
}

/// What a lock file says of its holder: `pid PID` and `mount DIR` lines.
fn lock_holder(file: &mut std::fs::File) -> (Option<u32>, Option<PathBuf>) {
    let mut text = String::new();
    let _ = file.seek(std::io::SeekFrom::Start(0));
    let _ = file.read_to_string(&mut text);
    let mut pid = None;
    let mut mount = None;
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("pid ") {
            pid = p.trim().parse().ok();
        } else if let Some(m) = line.strip_prefix("mount ") {
            mount = Some(PathBuf::from(m));
        }
    }
    (pid, mount)
}

/// Take the state directory for the daemon serving `mount_point`, or say who has it.
///
/// A holder whose mount is already gone is on its way out: wait for it (bounded), so an
/// unmount followed at once by a mount works. A holder still serving its mount is a
/// second daemon on the same journal and databases: refused.
pub fn lock_state_dir(state_dir: &Path, mount_point: &Path) -> Result<StateLock> {
    use std::fs::TryLockError;
    let path = state_dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("cannot open the state lock {}", path.display()))?;
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let (pid, mount) = lock_holder(&mut file);
                let serving = mount
                    .as_deref()
                    .and_then(mounted_fs_type)
                    .is_some_and(|t| t.starts_with("fuse"));
                let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
                if serving || Instant::now() > deadline {
                    let who = match (pid, &mount) {
                        (Some(p), Some(m)) => {
                            format!("wip daemon pid {p}, serving {}", m.display())
                        }
                        (Some(p), None) => format!("process {p}"),
                        _ => "another process".to_string(),
                    };
                    let state = state_dir.display();
                    let how = match (&mount, serving) {
                        (Some(m), true) => format!("unmount it first (wip umount {})", m.display()),
                        _ if alive => "stop it first".to_string(),
                        _ => "wait until it has exited".to_string(),
                    };
                    bail!(
                        "the state directory {state} is in use by another {who}; one state directory serves one mount: {how}, or give this mount its own --state DIR"
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
    }
    file.set_len(0)?;
    file.seek(std::io::SeekFrom::Start(0))?;
    write!(
        file,
        "pid {}\nmount {}\n",
        std::process::id(),
        mount_point.display()
    )?;
    file.flush()?;
    Ok(StateLock { _file: file })
}

/// Locks this process holds: one per world it built, released when the process ends.
static HELD_LOCKS: std::sync::Mutex<Vec<StateLock>> = std::sync::Mutex::new(Vec::new());

/// Set up the allocator for a daemon; call it before any worker thread exists.
pub fn tune_allocator() {
    // One heap arena instead of one per worker thread: memory freed when the kernel
    // forgets nodes can then be returned to the system (malloc_trim) instead of staying
    // scattered.
    // SAFETY: mallopt only tunes the allocator, before the worker threads exist.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    // Large buffers (documents being written, bodies, results) in mappings of their own,
    // unmapped when freed: a fixed threshold stops glibc from raising it after the first
    // large free, which kept every later document's memory in the heap after its close.
    // SAFETY: as above.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10) };
}

/// Build the world a manifest describes (hosts open their backends here). The state
/// directory stays locked to this process from here on.
pub fn build_world(
    opts: &MountOptions,
    subscriber: Arc<dyn crate::world::Subscriber>,
) -> Result<Arc<World>> {
    // The daemon's environment and state URL may hold secrets too (tokens, passwords).
    crate::secrets::register_env(std::env::vars());
    if let Some(url) = &opts.state_url {
        crate::secrets::register_env([("state url".to_string(), url.clone())]);
    }
    let (mut manifest, config_text) = load_manifest(opts.manifest.as_deref())?;
    manifest.world.titled |= opts.titled;
    std::fs::create_dir_all(&opts.state_dir)
        .with_context(|| format!("cannot create state dir {}", opts.state_dir.display()))?;
    let lock = lock_state_dir(&opts.state_dir, &opts.mount_point)?;
    HELD_LOCKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(lock);
    let (changes, change_rx) = Changes::channel();
    let policy = manifest.policy()?;
    let hides = std::sync::Arc::new(policy.clone());
    let mut ctx = HostContext {
        state_dir: opts.state_dir.clone(),
        launch_dir: std::env::current_dir().context("cannot read the current directory")?,
        mount_point: opts.mount_point.clone(),
        identity: manifest.identity.clone(),
        peers: Vec::new(),
        changes: Changes::detached(),
        call_timeout: manifest.world.call_timeout(),
        mount: String::new(),
        hidden: if policy.hides_any() {
            crate::host::Hidden::new(move |p| hides.hiding(p).is_some())
        } else {
            Default::default()
        },
    };
    let mut mounted = Vec::new();
    for (index, spec) in manifest.hosts.iter().enumerate() {
        ctx.changes = changes.for_host(index);
        let host = hosts::build(spec, &ctx)?;
        ctx.peers.push(hosts::Peer {
            path: spec.path.clone(),
            host: Arc::clone(&host),
        });
        mounted.push(Mounted {
            path: spec.path.split('/').map(str::to_string).collect(),
            kind: spec.kind.clone(),
            host,
        });
    }
    let state_url = opts.state_url.clone().or(manifest.state.url.clone());
    let world = World::new(crate::world::WorldParts {
        settings: manifest.world.clone(),
        identity: manifest.identity.clone(),
        hosts: mounted,
        state: crate::world::StateAt {
            dir: &opts.state_dir,
            url: state_url.as_deref(),
        },
        mount_point: opts.mount_point.clone(),
        config_text,
        subscriber,
        policy,
    })?;
    if world.interrupted_at_start > 0 {
        tracing::warn!(
            calls = world.interrupted_at_start,
            "calls cut off by the last stop are marked interrupted in the journal"
        );
    }
    // Only the hosts keep senders: the listener ends when the world's hosts are gone.
    drop(changes);
    drop(ctx);
    let world = Arc::new(world);
    let calls = world.calls();
    calls
        .listen_for_host_changes(change_rx)
        .context("cannot start the host-changes thread")?;
    calls
        .start_approvals()
        .context("cannot start the approvals' expiry thread")?;
    calls
        .listen_to_other_mounts()
        .context("cannot start the thread that hears other mounts")?;
    Ok(world)
}

/// Whether `dir` is a mount point now (per /proc/self/mountinfo), and its fs type.
pub fn mounted_fs_type(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = dir.to_string_lossy().replace(' ', "\\040");
    info.lines().rev().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        let sep = fields.iter().position(|f| *f == "-")?;
        (fields.get(4) == Some(&want.as_str()))
            .then(|| fields.get(sep + 1).map(|s| s.to_string()))?
    })
}

/// This `wip` executable, to start again as a background process.
pub(crate) fn wip_itself() -> Result<Command> {
    let exe = std::env::current_exe().context("cannot find the wip executable")?;
    Ok(Command::new(exe))
}

/// Start `cmd` in the background, in a session of its own (away from the caller's
/// terminal), its output appended to the log `log_path`: the child, the log open for
/// reading, and where this start's output begins in it.
pub(crate) fn spawn_detached(
    mut cmd: Command,
    log_path: &Path,
    what: &str,
) -> Result<(std::process::Child, std::fs::File, u64)> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(log_path)
        .with_context(|| format!("cannot open log {}", log_path.display()))?;
    let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?);
    // SAFETY: setsid is async-signal-safe; it detaches the child from our terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    Ok((child, log, log_start))
}
