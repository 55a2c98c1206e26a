//! `wip serve-nfs`: the world served over NFSv3 in the foreground until stopped.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use nfsserve::tcp::{NFSTcp, NFSTcpListener};

use super::Served;
use crate::launch::{build_world, MountOptions};

pub struct Options {
    /// A directory (the default world of its files) or a manifest.
    pub world: Option<PathBuf>,
    pub listen: String,
    pub mount_point: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub state_url: Option<String>,
    pub titled: bool,
    /// Serve other users too (see `super::access`), whatever the manifest says.
    pub allow_other: bool,
}

/// Serve until the process is stopped.
pub fn run(opts: Options) -> Result<()> {
    let listen: SocketAddr = opts
        .listen
        .parse()
        .with_context(|| format!("--listen {}: not an address and port", opts.listen))?;
    let manifest = match &opts.world {
        Some(p) if p.is_dir() => {
            // The default world shows the files of the directory it starts in.
            std::env::set_current_dir(p)
                .with_context(|| format!("cannot enter {}", p.display()))?;
            None
        }
        Some(p) if p.is_file() => Some(p.clone()),
        Some(p) => bail!("{}: neither a directory nor a manifest file", p.display()),
        None => None,
    };
    if !listen.ip().is_loopback() {
        tracing::warn!(
            "serving on {listen}, beyond loopback: a client elsewhere is served only from a \
             privileged port, and NFSv3 (AUTH_SYS) then believes whatever uid it claims, so \
             root on any machine that reaches this port acts as whoever they say"
        );
    }
    // Documents' buffers are freed to the system when they go, as in a FUSE daemon.
    crate::launch::tune_allocator();
    // Without one, printed paths are world paths (`/tracker/issues/42`).
    let mount_point = opts.mount_point.clone().unwrap_or_default();
    let world = build_world(
        &MountOptions {
            mount_point,
            manifest,
            state_dir: opts.state_dir.clone(),
            titled: opts.titled,
            wait: true,
            allow_other: false,
            state_url: opts.state_url.clone(),
        },
        Arc::new(crate::world::Unsubscribed),
    )?;
    let access = super::Access {
        // SAFETY: geteuid cannot fail.
        owner: unsafe { libc::geteuid() },
        allow_other: opts.allow_other || world.settings().allow_other,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("nfs")
        .build()
        .context("cannot start the NFS server's runtime")?;
    runtime.block_on(async move {
        let handles = opts.state_dir.join("nfs-handles");
        let served = Served::new(world, Some(&handles), access);
        // Abandoned documents (their client went away) are freed even when no other
        // document opens.
        let sweeper = served.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(super::SWEEP_EVERY);
            loop {
                tick.tick().await;
                let s = sweeper.clone();
                let _ = tokio::task::spawn_blocking(move || s.sweep()).await;
            }
        });
        let listener = NFSTcpListener::bind(&listen.to_string(), served)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let port = listener.get_listen_port();
        let ip = listener.get_listen_ip();
        println!("serving over NFSv3 on {ip}:{port}");
        println!("{}", access.describe());
        println!(
            "mount (Linux): mount -t nfs -o vers=3,tcp,port={port},mountport={port},nolock,lookupcache=none,soft,timeo=50 {ip}:/ DIR"
        );
        println!(
            "mount (macOS): mount_nfs -o vers=3,tcp,port={port},mountport={port},nolocks localhost:/ DIR"
        );
        use std::io::Write;
        let _ = std::io::stdout().flush();
        listener
            .handle_forever()
            .await
            .context("the NFS server stopped")
    })
}

/// How long `wip mount --nfs` waits for its server to listen.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// `wip mount --nfs DIR`: a server on a free loopback port in the background (its log in
/// the state directory), then the platform's NFS mount of it at `dir`.
pub fn mount(dir: &std::path::Path, opts: Options) -> Result<()> {
    use std::io::{Read, Seek};
    use std::process::Command;

    if !dir.exists() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create mount point {}", dir.display()))?;
    }
    let dir = std::fs::canonicalize(dir)
        .with_context(|| format!("cannot use mount point {}", dir.display()))?;
    std::fs::create_dir_all(&opts.state_dir)
        .with_context(|| format!("cannot create state dir {}", opts.state_dir.display()))?;
    let log_path = opts.state_dir.join("wip-nfs.log");
    let mut cmd = crate::launch::wip_itself()?;
    cmd.arg("serve-nfs");
    if let Some(w) = &opts.world {
        cmd.arg(std::fs::canonicalize(w).unwrap_or_else(|_| w.clone()));
    }
    cmd.args(["--listen", "127.0.0.1:0", "--mount-point"])
        .arg(&dir)
        .arg("--state")
        .arg(&opts.state_dir);
    if let Some(url) = &opts.state_url {
        // By environment, not argument: a password in the URL stays out of `ps`.
        cmd.env("WIP_STATE_URL", url);
    }
    if opts.titled {
        cmd.arg("--titled");
    }
    if opts.allow_other {
        cmd.arg("--allow-other");
    }
    let (mut child, mut log, log_start) =
        crate::launch::spawn_detached(cmd, &log_path, "the NFS server")?;
    let deadline = std::time::Instant::now() + READY_TIMEOUT;
    let port = loop {
        let mut text = String::new();
        log.seek(std::io::SeekFrom::Start(log_start))?;
        log.read_to_string(&mut text)?;
        if let Some(port) = text.lines().find_map(|l| {
            l.strip_prefix("serving over NFSv3 on 127.0.0.1:")
                .and_then(|p| p.trim().parse::<u16>().ok())
        }) {
            break port;
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "the NFS server stopped ({status}) before it listened:\n{}",
                text.trim_end()
            );
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            bail!(
                "the NFS server did not listen within {READY_TIMEOUT:?} (log {})",
                log_path.display()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (tool, args) = if cfg!(target_os = "macos") {
        (
            "mount_nfs",
            vec![
                "-o".to_string(),
                format!("vers=3,tcp,port={port},mountport={port},nolocks"),
                "localhost:/".to_string(),
            ],
        )
    } else {
        (
            "mount",
            vec![
                "-t".to_string(),
                "nfs".to_string(),
                "-o".to_string(),
                format!(
                    "vers=3,tcp,port={port},mountport={port},nolock,lookupcache=none,soft,timeo=50,retrans=2"
                ),
                "127.0.0.1:/".to_string(),
            ],
        )
    };
    let out = Command::new(tool).args(&args).arg(&dir).output();
    let failed = match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Some(format!("cannot run {tool}: {e}")),
    };
    if let Some(words) = failed {
        let _ = child.kill();
        let _ = child.wait();
        let hint = if cfg!(target_os = "linux") && !kernel_has_nfs() {
            "\nthis kernel has no NFS client (no nfs in /proc/filesystems); `wip serve-nfs` \
             still serves the world to clients elsewhere"
        } else {
            ""
        };
        bail!(
            "{tool} {} {} failed: {words}{hint}",
            args.join(" "),
            dir.display()
        );
    }
    println!(
        "mounted {} over NFSv3 (server pid {}, port {port}, log {}); stop with `wip umount {}`",
        dir.display(),
        child.id(),
        log_path.display(),
        dir.display()
    );
    Ok(())
}

fn kernel_has_nfs() -> bool {
    std::fs::read_to_string("/proc/filesystems").is_ok_and(|t| {
        t.lines()
            .any(|l| l.split_whitespace().last() == Some("nfs"))
    })
}

/// `wip umount DIR` of an NFS mount: unmount it, then stop the server that serves it
/// (the `wip serve-nfs` whose `--mount-point` is `dir`).
pub fn umount(dir: &std::path::Path) -> Result<()> {
    let status = std::process::Command::new("umount")
        .arg(dir)
        .status()
        .context("cannot run umount")?;
    if !status.success() {
        bail!("umount {} failed", dir.display());
    }
    let want = dir.as_os_str().as_encoded_bytes().to_vec();
    for pid in crate::proc::pids() {
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
        let serves = args.iter().any(|a| *a == b"serve-nfs".as_slice())
            && args
                .windows(2)
                .any(|w| w[0] == b"--mount-point".as_slice() && w[1] == want.as_slice());
        if serves {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
    }
    Ok(())
}
