//! Starting and stopping a FUSE mount: mount the world `launch` builds, serve in the
//! foreground or hand over to a background process, unmount, and `wip call`.

use std::fs::OpenOptions;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::launch::{
    build_world, load_manifest, lock_state_dir, mounted_fs_type, spawn_detached, tune_allocator,
    wip_itself, MountOptions,
};

/// How long `wip mount` waits for the background daemon to be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// FUSE worker threads: calls may block (a slow backend) without stalling reads.
const THREADS: usize = 8;

/// What `wip mount` was told by flags, before `-o` options are applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountFlags {
    pub manifest: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub foreground: bool,
    pub titled: bool,
    pub no_wait: bool,
    pub allow_other: bool,
}

/// Generic mount options mount(8), fstab and systemd pass along that mean nothing to a
/// wip mount (or that fuser sets on its own): accepted and ignored.
const IGNORED_OPTIONS: &[&str] = &[
    "rw",
    "defaults",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "atime",
    "noatime",
    "relatime",
    "norelatime",
    "nodiratime",
    "strictatime",
    "lazytime",
    "async",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "nofail",
];

/// Apply `-o` options (`manifest=FILE,state=DIR,titled`, and mount.fuse3's `source=`) to
/// the flags. `source=default` is the embedded world; any other source is a manifest.
pub fn apply_mount_options(mut flags: MountFlags, options: &[String]) -> Result<MountFlags> {
    let mut source: Option<String> = None;
    for opt in options.iter().flat_map(|o| o.split(',')) {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v)),
            None => (opt.trim(), None),
        };
        let need = |what: &str| -> Result<String> {
            match value {
                Some(v) if !v.is_empty() => Ok(v.to_string()),
                _ => bail!("mount option {key} needs a value: {key}={what}"),
            }
        };
        match key {
            "" => {}
            "manifest" => flags.manifest = Some(PathBuf::from(need("FILE")?)),
            "state" => flags.state = Some(PathBuf::from(need("DIR")?)),
            "source" => source = Some(need("MANIFEST or default")?),
            "titled" if value.is_none() => flags.titled = true,
            "no_wait" | "nowait" if value.is_none() => flags.no_wait = true,
            "foreground" if value.is_none() => flags.foreground = true,
            // Other users may reach the mount (a normal user needs `user_allow_other` in
            // /etc/fuse.conf).
            "allow_other" if value.is_none() => flags.allow_other = true,
            "titled" | "no_wait" | "nowait" | "foreground" | "allow_other" => {
                bail!("mount option {key} takes no value (write {key}, not {opt})")
            }
            k if value.is_none() && IGNORED_OPTIONS.contains(&k) => {}
            k if k.starts_with("x-") || k == "comment" => {}
            "ro" => bail!(
                "mount option ro: a wip mount changes only through its ops, and its files are read-only already; leave ro out"
            ),
            other => bail!(
                "unknown mount option {other:?} (wip takes manifest=FILE, state=DIR, titled, no_wait, foreground, allow_other, and ignores the generic rw, defaults, nodev, nosuid, noauto, nofail, _netdev, x-*)"
            ),
        }
    }
    match source.as_deref() {
        None | Some("default") | Some("wip") => {}
        Some(path) => match &flags.manifest {
            Some(m) if m != Path::new(path) => bail!(
                "two manifests: the source {path} and manifest={}; give one (the source may be `default`)",
                m.display()
            ),
            _ => flags.manifest = Some(PathBuf::from(path)),
        },
    }
    Ok(flags)
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Mounting as a normal user goes through `fusermount3`; say how to get it.
fn check_can_mount() -> Result<()> {
    if is_root() || which("fusermount3").is_some() || which("fusermount").is_some() {
        return Ok(());
    }
    bail!(
        "mounting as a normal user needs fusermount3, which is not installed; \
         install Debian's fuse3 package (sudo apt-get install fuse3) or run wip as root"
    )
}

fn prepare_mount_point(dir: &Path) -> Result<PathBuf> {
    if let Some(fs) = mounted_fs_type(dir) {
        if fs.starts_with("fuse") {
            bail!(
                "{} is already a mount point ({fs}); run `wip umount {}` first",
                dir.display(),
                dir.display()
            );
        }
    }
    if !dir.exists() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create mount point {}", dir.display()))?;
    }
    let canonical = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot use mount point {}", dir.display()))?;
    if !canonical.is_dir() {
        bail!("mount point {} is not a directory", canonical.display());
    }
    Ok(canonical)
}

/// Mount and serve until unmounted (or SIGTERM/SIGINT, which unmount cleanly).
pub fn serve_foreground(mut opts: MountOptions) -> Result<()> {
    check_can_mount()?;
    opts.mount_point = prepare_mount_point(&opts.mount_point)?;
    // Block the stop signals in every thread; one thread waits for them and unmounts.
    let signals = stop_signals();
    // SAFETY: the set is initialised by stop_signals; blocking signals has no other effect.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut());
    }
    // What a host detaches stays ours, to reap as it ends and to end at unmount.
    if crate::children::become_subreaper() {
        crate::children::reap_orphans();
    }
    tune_allocator();
    // The kernel's caches hear of the world's changes through this invalidator, given to
    // the world when it is made and to the file system that mounts it.
    let inv = crate::fuse::Invalidator::default();
    let world = build_world(&opts, Arc::new(inv.clone()))?;
    // Decisions on pending runs reach the world here, outside the mount; the sockets go
    // when the daemon does.
    let _control = crate::control::serve(Arc::clone(&world), &opts.state_dir)?;
    // `-o allow_other`, or the manifest's `[world] allow_other`: one meaning, over FUSE
    // as over NFS.
    let allow_other = opts.allow_other || world.settings().allow_other;
    let mut session = crate::fuse::mount(world, inv, &opts.mount_point, THREADS, allow_other)
        .map_err(|e| {
            let hint = if is_root() {
                ""
            } else if crate::fuse::fusermount::helper().is_none() {
                " (as a normal user this needs fusermount3 from Debian's fuse3 package)"
            } else if e.to_string().contains("/dev/fuse") {
                " (/dev/fuse is not open to you: Debian makes it mode 0666; elsewhere ask to join the group that owns it)"
            } else if allow_other {
                " (allow_other needs the line user_allow_other in /etc/fuse.conf)"
            } else {
                ""
            };
            anyhow!("cannot mount {}: {e}{hint}", opts.mount_point.display())
        })?;
    tracing::info!(mount_point = %opts.mount_point.display(), "mounted");
    let mut unmounter = session.unmount_callable();
    let mount_point = opts.mount_point.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: sigwait on a set of blocked signals.
            unsafe { libc::sigwait(&signals, &mut sig) };
            tracing::info!(signal = sig, mount_point = %mount_point.display(), "unmounting");
            if let Err(e) = unmounter.unmount() {
                tracing::warn!("unmount: {e}; trying a lazy unmount");
                let _ = lazy_unmount(&mount_point);
            }
            // A mount fusermount3 made is not the session's to undo: unmount it as
            // `wip umount` does.
            if mounted_fs_type(&mount_point).is_some_and(|t| t.starts_with("fuse")) {
                if let Err(e) = umount(&mount_point) {
                    tracing::warn!("unmount: {e}");
                }
            }
        })?;
    // The session takes its file system with it as it ends; with the control socket the
    // world goes (hosts stop their processes), then whatever is left of what they started:
    // an unmount leaves no process of theirs behind.
    let served = session.run();
    drop(_control);
    crate::children::end_descendants(HOSTS_GRACE);
    served.context("the FUSE session ended with an error")?;
    tracing::info!("unmounted");
    Ok(())
}

/// How long the hosts' processes have between SIGTERM and SIGKILL at unmount.
const HOSTS_GRACE: Duration = Duration::from_secs(2);

fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Start a daemon serving the mount in the background; return once it is mounted.
pub fn mount_background(opts: MountOptions) -> Result<()> {
    check_can_mount()?;
    let mount_point = prepare_mount_point(&opts.mount_point)?;
    std::fs::create_dir_all(&opts.state_dir)
        .with_context(|| format!("cannot create state dir {}", opts.state_dir.display()))?;
    // Fail fast on a bad manifest or a state directory in use, in the caller's terminal
    // (the daemon takes the lock for itself once started).
    let (manifest, _) = load_manifest(opts.manifest.as_deref())?;
    let startup_wait = Duration::from_millis(manifest.world.startup_wait_ms);
    drop(lock_state_dir(&opts.state_dir, &mount_point)?);
    let log_path = opts.state_dir.join("wip.log");
    let mut cmd = wip_itself()?;
    cmd.arg("mount")
        .arg(&mount_point)
        .arg("-f")
        .arg("--state")
        .arg(&opts.state_dir);
    if let Some(url) = &opts.state_url {
        // By environment, not argument: a password in the URL stays out of `ps`.
        cmd.env("WIP_STATE_URL", url);
    }
    if opts.allow_other {
        cmd.arg("-o").arg("allow_other");
    }
    if let Some(m) = &opts.manifest {
        cmd.arg("--manifest")
            .arg(std::fs::canonicalize(m).unwrap_or_else(|_| m.clone()));
    }
    if opts.titled {
        cmd.arg("--titled");
    }
    let (mut child, _, log_start) = spawn_detached(cmd, &log_path, "the daemon")?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if mounted_fs_type(&mount_point).is_some_and(|t| t.starts_with("fuse")) {
            println!(
                "mounted {} (daemon pid {}, log {})",
                mount_point.display(),
                child.id(),
                log_path.display()
            );
            if opts.wait {
                wait_for_hosts(&mount_point, startup_wait);
            }
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let mut text = String::new();
            if let Ok(mut f) = std::fs::File::open(&log_path) {
                let _ = f.seek(std::io::SeekFrom::Start(log_start));
                let _ = f.read_to_string(&mut text);
            }
            bail!(
                "the daemon exited ({status}) before mounting:\n{}",
                text.trim_end()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!(
                "the daemon did not mount {} within {}s; see {}",
                mount_point.display(),
                READY_TIMEOUT.as_secs(),
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until the mount's `.wip/status` says no host is starting any more, at most
/// `limit`; then say which still are (the mount is usable either way: their entries say
/// `starting` until they answer).
fn wait_for_hosts(mount_point: &Path, limit: Duration) {
    let status = mount_point.join(".wip/status");
    let deadline = Instant::now() + limit;
    let mut text = String::new();
    loop {
        text = std::fs::read_to_string(&status).unwrap_or(text);
        let ready = text.lines().next().is_some_and(|l| l.ends_with("· ready"));
        if ready {
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let starting: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains(" starting: "))
        .map(str::trim)
        .collect();
    eprintln!(
        "still starting after {} ms (startup_wait_ms), usable once they answer:\n  {}",
        limit.as_millis(),
        starting.join("\n  ")
    );
}

/// The text of `wip status DIR`: the mount's `.wip/status`, or why there is none.
pub fn status(dir: &Path) -> Result<String> {
    wip_file(dir, "status")
}

/// `wip runs DIR`: the mount's `.wip/runs` (runs in flight first), only those running
/// with `running`.
pub fn runs(dir: &Path, running: bool) -> Result<String> {
    let text = wip_file(dir, "runs")?;
    if !running {
        return Ok(text);
    }
    Ok(text
        .lines()
        .filter(|l| l.starts_with("running ") || l.starts_with("pending "))
        .map(|l| format!("{l}\n"))
        .collect())
}

/// Where a run's `result` says it goes on (`run: DIR`), for `wip call --wait`.
pub fn run_of(result: &str) -> Option<PathBuf> {
    result
        .lines()
        .find_map(|l| l.strip_prefix("run: "))
        .map(|p| PathBuf::from(p.trim_end()))
}

/// A file of a mount's `.wip/`, with words when DIR is not a live wip mount.
fn wip_file(dir: &Path, name: &str) -> Result<String> {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    match mounted_fs_type(&dir) {
        Some(t) if t.starts_with("fuse") => {}
        Some(t) if t.starts_with("nfs") => {}
        Some(t) => bail!("{} is a {t} mount, not a wip mount", dir.display()),
        None => bail!("{} is not mounted", dir.display()),
    }
    std::fs::read_to_string(dir.join(".wip").join(name)).with_context(|| {
        format!(
            "{} is a FUSE mount but answers no .wip/{name} (not wip, or its daemon died: wip umount {})",
            dir.display(),
            dir.display()
        )
    })
}

fn lazy_unmount(dir: &Path) -> Result<()> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: a valid C string; umount2 only reads it.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().into())
    }
}

/// Unmount `dir`, also when its daemon died (a "Transport endpoint is not connected" mount).
pub fn umount(dir: &Path) -> Result<()> {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    match mounted_fs_type(&dir) {
        Some(t) if t.starts_with("fuse") => {}
        Some(t) if t.starts_with("nfs") => return crate::nfs::serve::umount(&dir),
        Some(t) => bail!("{} is a {t} mount, not a wip mount", dir.display()),
        None => bail!("{} is not mounted", dir.display()),
    }
    if is_root() {
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
        // SAFETY: a valid C string; umount2 only reads it.
        if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EBUSY) {
            lazy_unmount(&dir)?;
            eprintln!(
                "{} was busy: detached it; it goes away when the last user leaves",
                dir.display()
            );
            return Ok(());
        }
        bail!("cannot unmount {}: {err}", dir.display());
    }
    let tool = which("fusermount3")
        .or_else(|| which("fusermount"))
        .ok_or_else(|| {
            anyhow!("unmounting as a normal user needs fusermount3 (Debian package fuse3)")
        })?;
    let status = Command::new(&tool).arg("-u").arg(&dir).status()?;
    if !status.success() {
        let lazy = Command::new(&tool).arg("-uz").arg(&dir).status()?;
        if !lazy.success() {
            bail!("{} -u {} failed", tool.display(), dir.display());
        }
    }
    Ok(())
}

/// What `wip call` ends with.
pub struct CallOutput {
    pub result: String,
    pub error: Option<std::io::Error>,
}

/// Whether `path` lies on an NFS mount (a world served by `wip serve-nfs`).
fn on_nfs(path: &Path) -> bool {
    const NFS_SUPER_MAGIC: i64 = 0x6969;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string and a zeroed struct statfs for the kernel to fill.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && st.f_type as i64 == NFS_SUPER_MAGIC
}

/// `call` over NFS: the client's page cache would answer a read-back with the bytes just
/// written, so the document is written, committed by `fsync` (whose errno is the call's)
/// and closed, and the result read from `result`, which is this client's own.
fn call_over_nfs(call_path: &Path, args: &[u8]) -> Result<CallOutput> {
    let words = || {
        call_path
            .parent()
            .map(|d| std::fs::read_to_string(d.join("result")).unwrap_or_default())
            .unwrap_or_default()
    };
    let mut file = match OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(call_path)
    {
        Ok(f) => f,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => {
            return Ok(CallOutput {
                result: words(),
                error: Some(e),
            })
        }
        Err(e) => {
            return Err(anyhow!(e)).with_context(|| format!("cannot open {}", call_path.display()))
        }
    };
    let payload: &[u8] = if args.is_empty() { b"\n" } else { args };
    let error = file.write_all(payload).and_then(|()| file.sync_all()).err();
    drop(file);
    Ok(CallOutput {
        result: words(),
        error,
    })
}

/// Run an op race-free: open `call` read-write, write the whole document, then read the
/// result back from the same descriptor. Reading back is what ends a text document (it
/// runs then); a failed call answers that first read with its errno, later reads with
/// its words.
pub fn call(path: &Path, args: &[u8]) -> Result<CallOutput> {
    let call_path = if path.is_dir() {
        if path.join("call").exists() {
            path.join("call")
        } else {
            bail!("{} is not an op (no call file in it)", path.display());
        }
    } else {
        path.to_path_buf()
    };
    if on_nfs(&call_path) {
        return call_over_nfs(&call_path, args);
    }
    let mut file = match OpenOptions::new()
        .read(true)
        .write(true)
        .truncate(true)
        .open(&call_path)
    {
        Ok(f) => f,
        // Refused at open (a guard that fails whatever the arguments, a policy): the
        // words are in this session's `result` beside it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => {
            let words = call_path
                .parent()
                .map(|d| std::fs::read_to_string(d.join("result")).unwrap_or_default())
                .unwrap_or_default();
            return Ok(CallOutput {
                result: words,
                error: Some(e),
            });
        }
        Err(e) => {
            return Err(anyhow!(e)).with_context(|| format!("cannot open {}", call_path.display()))
        }
    };
    let payload: Vec<u8> = if args.is_empty() {
        b"\n".to_vec()
    } else {
        args.to_vec()
    };
    let mut error = file.write_all(&payload).err();
    let mut result = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        // pread: the descriptor's position stays where the write left it.
        match std::os::unix::fs::FileExt::read_at(&file, &mut chunk, offset) {
            Ok(0) => break,
            Ok(n) => {
                result.extend_from_slice(&chunk[..n]);
                offset += n as u64;
            }
            Err(e) if error.is_none() => {
                error = Some(e);
            }
            Err(e) => {
                return Err(anyhow!(e)).with_context(|| {
                    format!("cannot read the result from {}", call_path.display())
                })
            }
        }
    }
    let _ = file.flush();
    Ok(CallOutput {
        result: String::from_utf8_lossy(&result).into_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_text_hides_tokens_and_url_passwords() {
        let text = "[state]\nurl = \"postgresql://wip:s3cret@db/wip\"\n\
                    [[host]]\ntoken = \"abc\"\nbase_uri = \"http://127.0.0.1:8080\"\n";
        let shown = crate::secrets::redact_manifest(text);
        assert!(
            !shown.contains("s3cret") && !shown.contains("abc"),
            "{shown}"
        );
        assert!(
            shown.contains(&format!(
                "url = \"postgresql://wip:{}@db/wip\"",
                crate::secrets::REDACTED
            )),
            "{shown}"
        );
        assert!(
            shown.contains("base_uri = \"http://127.0.0.1:8080\""),
            "{shown}"
        );
    }

    fn apply(options: &[&str]) -> Result<MountFlags> {
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        apply_mount_options(MountFlags::default(), &options)
    }

    #[test]
    fn mount_options_as_fstab_gives_them() {
        let f = apply(&[
            "source=default",
            "rw,nodev,nosuid,state=/s,titled,noauto,x-systemd.automount",
        ])
        .unwrap();
        assert_eq!(
            f,
            MountFlags {
                state: Some(PathBuf::from("/s")),
                titled: true,
                ..MountFlags::default()
            }
        );
        let f = apply(&["source=/etc/wip/w.toml", "no_wait,foreground"]).unwrap();
        assert_eq!(f.manifest, Some(PathBuf::from("/etc/wip/w.toml")));
        assert!(f.no_wait && f.foreground);
        let f = apply(&["source=default,manifest=m.toml"]).unwrap();
        assert_eq!(f.manifest, Some(PathBuf::from("m.toml")));
    }

    #[test]
    fn bad_mount_options_say_why() {
        let words = |o: &[&str]| apply(o).unwrap_err().to_string();
        assert!(words(&["bogus"]).contains("unknown mount option \"bogus\""));
        assert!(words(&["titled=yes"]).contains("titled takes no value"));
        assert!(words(&["state="]).contains("state needs a value"));
        assert!(words(&["ro"]).contains("leave ro out"));
        assert!(words(&["source=a.toml,manifest=b.toml"]).contains("two manifests"));
    }
}
