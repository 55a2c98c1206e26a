//! Many mounts, one world, when something breaks: a mount whose network is cut costs
//! the others nothing, calls on different issues run side by side across mounts, and a
//! PostgreSQL restart mid-load leaves the journal, the tracker and what callers were told
//! in agreement, with no run left `running`.
//!
//! PostgreSQL must be running (`.ci/run` starts Debian's, with a role for root); the
//! restart test starts a server of its own (Debian's binaries, run as `postgres`) so no
//! other test sees it go. Mounts in network namespaces reach PostgreSQL over TCP through
//! a relay on the host's end of a veth pair. The tests here run one at a time: each
//! measures latencies.

mod common;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{wait_until, Mount};

const SOCKET: &str = "/var/run/postgresql";

/// The daemons' log: these tests cause the failures it would report.
const QUIET: &str = "off";

/// One test at a time: each measures, and one restarts a server.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A PostgreSQL server: the system's (on `SOCKET`) or one of this test's own.
#[derive(Clone)]
struct Server {
    socket: PathBuf,
    port: u16,
}

impl Server {
    fn system() -> Server {
        Server {
            socket: SOCKET.into(),
            port: 5432,
        }
    }

    fn url(&self, db: &str) -> String {
        format!(
            "postgresql:///{db}?host={}&port={}",
            self.socket.display(),
            self.port
        )
    }

    fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.url("postgres"), postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at {}: {e}",
                self.socket.display()
            )
        })
    }

    fn unix_socket(&self) -> PathBuf {
        self.socket.join(format!(".s.PGSQL.{}", self.port))
    }
}

/// A database for one test, dropped afterwards.
struct TestDb {
    server: Server,
    name: String,
    url: String,
}

impl TestDb {
    fn create(server: &Server, tag: &str) -> TestDb {
        let name = format!("wip_ft_{tag}_{}", std::process::id());
        let mut a = server.admin();
        a.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        a.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        TestDb {
            url: server.url(&name),
            server: server.clone(),
            name,
        }
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut a) = postgres::Client::connect(&self.server.url("postgres"), postgres::NoTls)
        {
            let _ = a.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A PostgreSQL server of this test's own, in a temporary directory, stopped and removed
/// when dropped.
struct OwnServer {
    server: Server,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

fn as_postgres(args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("runuser")
}

impl OwnServer {
    fn start() -> OwnServer {
        let dir = tempfile::Builder::new()
            .prefix("wip-pg-")
            .tempdir()
            .unwrap();
        let data = dir.path().join("data");
        let chown = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(chown.success());
        let init = as_postgres(&[
            &format!("{PG_BIN}/initdb"),
            "-D",
            data.to_str().unwrap(),
            "-U",
            "root",
            "--auth=trust",
            "--no-sync",
        ]);
        assert!(
            init.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let port = 20000 + (std::process::id() % 20000) as u16;
        let own = OwnServer {
            server: Server {
                socket: dir.path().to_path_buf(),
                port,
            },
            data,
            _dir: dir,
        };
        own.pg_ctl("start");
        own
    }

    fn pg_ctl(&self, what: &str) {
        let opts = format!(
            "-k {} -p {} -c listen_addresses='' -c fsync=off -c max_connections=200",
            self.server.socket.display(),
            self.server.port
        );
        let log = self.server.socket.join("log");
        let out = as_postgres(&[
            &format!("{PG_BIN}/pg_ctl"),
            "-D",
            self.data.to_str().unwrap(),
            "-l",
            log.to_str().unwrap(),
            "-o",
            &opts,
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            what,
        ]);
        assert!(
            out.status.success(),
            "pg_ctl {what}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = as_postgres(&[
            &format!("{PG_BIN}/pg_ctl"),
            "-D",
            self.data.to_str().unwrap(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ]);
    }
}

/// A tracker on `tracker_url`, with more manifest text.
fn manifest(tracker_url: &str) -> String {
    format!(
        "[identity]\nuser = \"alex\"\nrole = \"maintainer\"\n\n\
         [[host]]\nkind = \"tracker\"\npath = \"tracker\"\nseed = \"demo\"\ndatabase = \"{tracker_url}\"\n"
    )
}

/// A network namespace joined to this one by a veth pair, deleted when dropped.
struct NetNs {
    name: String,
    /// The namespace's end of the pair (its link is cut by setting it down).
    inner: String,
    host_ip: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl NetNs {
    fn create() -> NetNs {
        static N: AtomicUsize = AtomicUsize::new(0);
        let pid = std::process::id();
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("wipfns{pid}_{n}");
        let (here, there) = (format!("wfh{pid}x{n}"), format!("wfn{pid}x{n}"));
        let net = format!("10.{}.{}", 200 + n % 20, pid % 250);
        let host_ip = format!("{net}.1");
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = NetNs {
            name: name.clone(),
            inner: there.clone(),
            host_ip: host_ip.clone(),
        };
        ip(&["link", "add", &here, "type", "veth", "peer", "name", &there]);
        ip(&["link", "set", &there, "netns", &name]);
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &here]);
        ip(&["link", "set", &here, "up"]);
        let inner = format!("{net}.2/30");
        for args in [
            ["addr", "add", inner.as_str(), "dev", there.as_str()].as_slice(),
            &["link", "set", there.as_str(), "up"],
            &["link", "set", "lo", "up"],
        ] {
            let mut cmd = vec!["-n", name.as_str()];
            cmd.extend_from_slice(args);
            ip(&cmd);
        }
        ns
    }

    /// Cut (`false`) or restore (`true`) the namespace's link.
    fn link(&self, up: bool) {
        ip(&[
            "-n",
            &self.name,
            "link",
            "set",
            &self.inner,
            if up { "up" } else { "down" },
        ]);
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// TCP on `addr` relayed to `server`'s unix socket; the port.
fn relay(addr: &str, server: &Server) -> u16 {
    let listener = std::net::TcpListener::bind((addr, 0)).expect("listen on the veth address");
    let port = listener.local_addr().unwrap().port();
    let socket = server.unix_socket();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(tcp) = conn else { continue };
            let Ok(unix) = UnixStream::connect(&socket) else {
                continue;
            };
            let (mut t_in, mut t_out) = (tcp.try_clone().unwrap(), tcp);
            let (mut u_in, mut u_out) = (unix.try_clone().unwrap(), unix);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut t_in, &mut u_out);
                let _ = u_out.shutdown(std::net::Shutdown::Both);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut u_in, &mut t_out);
                let _ = t_out.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    port
}

/// A daemon in a network namespace (its mount visible here), unmounted when dropped.
struct NsMount {
    mount: PathBuf,
    _dirs: Vec<tempfile::TempDir>,
    child: Option<std::process::Child>,
    stop_watchdog: Option<std::sync::mpsc::Sender<()>>,
}

impl NsMount {
    fn start(ns: &NetNs, manifest: &str, state_url: &str) -> NsMount {
        let mnt = tempfile::Builder::new()
            .prefix("wip-mnt-")
            .tempdir()
            .unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join("manifest.toml"), manifest).unwrap();
        let mut cmd = Command::new("nsenter");
        common::scrub_env(&mut cmd);
        let child = cmd
            .arg(format!("--net=/var/run/netns/{}", ns.name))
            .arg("--")
            .arg(common::WIP)
            .arg("mount")
            .arg(mnt.path())
            .arg("-f")
            .arg("--state")
            .arg(state.path())
            .arg("--manifest")
            .arg(state.path().join("manifest.toml"))
            .env("WIP_STATE_URL", state_url)
            .env("WIP_LOG", QUIET)
            .current_dir(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nsenter (util-linux)");
        let mut m = NsMount {
            mount: mnt.path().to_path_buf(),
            _dirs: vec![mnt, state, root],
            child: Some(child),
            stop_watchdog: None,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !common::is_mounted(&m.mount) {
            if let Some(c) = m.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!("wip in the namespace exited before mounting: {status}");
                }
            }
            assert!(
                Instant::now() < deadline,
                "wip in the namespace did not mount within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let dir = m.mount.clone();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                rx.recv_timeout(Duration::from_secs(240))
            {
                common::lazy_umount(&dir);
            }
        });
        m.stop_watchdog = Some(tx);
        m
    }
}

impl Drop for NsMount {
    fn drop(&mut self) {
        if common::is_mounted(&self.mount) {
            let ok = common::wip_command()
                .arg("umount")
                .arg(&self.mount)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                common::lazy_umount(&self.mount);
            }
        }
        if let Some(mut c) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !matches!(c.try_wait(), Ok(Some(_))) {
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Some(tx) = self.stop_watchdog.take() {
            let _ = tx.send(());
        }
    }
}

/// Write `args` into `dir/op_dir/call` as `echo ARGS > call` does: the errno, if any, and
/// how long it took.
fn call_in(dir: &Path, op_dir: &str, args: &str) -> (Result<(), i32>, Duration) {
    use std::io::Write;
    let t = Instant::now();
    let r = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(dir.join(op_dir).join("call"))
            .map_err(|e| e.raw_os_error().unwrap_or(-1))?;
        f.write_all(args.as_bytes())
            .map_err(|e| e.raw_os_error().unwrap_or(-1))?;
        let fd = std::os::fd::IntoRawFd::into_raw_fd(f);
        if unsafe { libc::close(fd) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1));
        }
        Ok(())
    })();
    (r, t.elapsed())
}

/// A read of `dir/rel`, and how long it took.
fn read_in(dir: &Path, rel: &str) -> (std::io::Result<String>, Duration) {
    let t = Instant::now();
    let r = std::fs::read_to_string(dir.join(rel));
    (r, t.elapsed())
}

fn p50_max(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    if d.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    (d[d.len() / 2], d[d.len() - 1])
}

/// Runs still `running` in the journal.
fn running(db: &TestDb) -> i64 {
    db.client()
        .query_one("SELECT count(*) FROM calls WHERE status = 'running'", &[])
        .map(|r| r.get(0))
        .unwrap_or(-1)
}

/// A mount in a namespace loses its link for 10 s while its agent calls without pause:
/// the call it had in flight held its issue's row, which the server releases within
/// seconds; the other mount's calls (on another issue) and reads (of that very issue too)
/// stay at their idle latency and none fails. When the link is back, the cut mount calls
/// again and no run stays `running`.
#[test]
fn a_link_cut_on_one_mount_leaves_the_others_calls_and_reads_at_their_idle_latency() {
    let _one = serial();
    let server = Server::system();
    let db = TestDb::create(&server, "cut");
    let tracker = TestDb::create(&server, "cut_tracker");
    let ns = NetNs::create();
    let port = relay(&ns.host_ip, &server);
    let tcp = |name: &str| format!("postgresql://root@{}:{port}/{name}", ns.host_ip);
    let a = Mount::start_with_env(
        Some(&manifest(&tracker.url)),
        &[("WIP_STATE_URL", db.url.as_str()), ("WIP_LOG", QUIET)],
    );
    let b = NsMount::start(&ns, &manifest(&tcp(&tracker.name)), &tcp(&db.name));
    let (call_a, read_a) = (
        "tracker/issues/42/ops/comment",
        "tracker/issues/43/description",
    );

    // Idle: A alone.
    let mut idle_calls = Vec::new();
    let mut idle_reads = Vec::new();
    for i in 0..10 {
        let (r, took) = call_in(&a.mount, call_a, &format!("{{\"body\":\"idle {i}\"}}\n"));
        assert_eq!(r, Ok(()), "idle call {i}");
        idle_calls.push(took);
        let (r, took) = read_in(&a.mount, read_a);
        r.unwrap();
        idle_reads.push(took);
    }

    // B's agent calls on issue 43 without pause, through the cut and after.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let b_dir = b.mount.clone();
    let b_stop = std::sync::Arc::clone(&stop);
    let b_agent = std::thread::spawn(move || {
        let (mut ok, mut failed) = (0, 0);
        let mut k = 0;
        while !b_stop.load(Ordering::Relaxed) {
            k += 1;
            match call_in(
                &b_dir,
                "tracker/issues/43/ops/comment",
                &format!("{{\"body\":\"b {k}\"}}\n"),
            )
            .0
            {
                Ok(()) => ok += 1,
                Err(_) => failed += 1,
            }
        }
        (ok, failed)
    });
    std::thread::sleep(Duration::from_millis(700));
    ns.link(false);
    let cut = Instant::now();
    let mut calls = Vec::new();
    let mut reads = Vec::new();
    let mut failures = Vec::new();
    let mut i = 0;
    while cut.elapsed() < Duration::from_secs(10) {
        i += 1;
        let (r, took) = call_in(&a.mount, call_a, &format!("{{\"body\":\"cut {i}\"}}\n"));
        if let Err(e) = r {
            failures.push(format!(
                "call {i}: errno {e}: {}",
                a.result(call_a).trim_end()
            ));
        }
        calls.push(took);
        let (r, took) = read_in(&a.mount, read_a);
        if let Err(e) = r {
            failures.push(format!("read {i}: {e}"));
        }
        reads.push(took);
    }
    ns.link(true);
    let back = Instant::now();
    // B calls again once its link is back.
    wait_until("the cut mount calls again", Duration::from_secs(60), || {
        call_in(
            &b.mount,
            "tracker/issues/44/ops/comment",
            "{\"body\":\"back\"}\n",
        )
        .0
        .is_ok()
    });
    let b_again = back.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (b_ok, b_failed) = b_agent.join().unwrap();
    wait_until("no run stays running", Duration::from_secs(30), || {
        running(&db) == 0
    });
    let settled = back.elapsed();

    let ((ic50, icmax), (ir50, irmax)) = (p50_max(idle_calls), p50_max(idle_reads));
    let ((c50, cmax), (r50, rmax)) = (p50_max(calls.clone()), p50_max(reads.clone()));
    println!(
        "idle on A: call p50 {ic50:?} max {icmax:?}, read p50 {ir50:?} max {irmax:?}\n\
         B's link cut 10 s: A made {} calls (p50 {c50:?}, max {cmax:?}) and {} reads \
         (p50 {r50:?}, max {rmax:?}), {} failed; B's agent {b_ok} ok, {b_failed} failed; \
         B called again {b_again:?} after the link came back, no run running after {settled:?}",
        calls.len(),
        reads.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:#?}");
    // The fault this guards against: a call or a read waiting for the cut mount's lock,
    // 10 s and more. The machine is noisy: a bound well above idle, well below that.
    assert!(cmax < Duration::from_secs(3), "a call on A took {cmax:?}");
    assert!(rmax < Duration::from_secs(3), "a read on A took {rmax:?}");
    assert!(calls.len() >= 10, "A kept calling: {}", calls.len());
}

/// While a call on issue 42 through mount A waits for its row (another session holds it),
/// a call on issue 43 through mount B runs at once: tracker calls on different issues do
/// not wait for each other across mounts.
#[test]
fn calls_on_different_issues_run_side_by_side_across_mounts() {
    let _one = serial();
    let server = Server::system();
    let db = TestDb::create(&server, "beside");
    let tracker = TestDb::create(&server, "beside_tracker");
    let env = [("WIP_STATE_URL", db.url.as_str())];
    let a = Mount::start_with_env(Some(&manifest(&tracker.url)), &env);
    let b = Mount::start_with_env(Some(&manifest(&tracker.url)), &env);
    // Each mount's first call opens its connections.
    a.ok("echo '{\"body\":\"warm\"}' > tracker/issues/44/ops/comment/call");
    b.ok("echo '{\"body\":\"warm\"}' > tracker/issues/44/ops/comment/call");
    let mut holder = tracker.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute("SELECT 1 FROM items WHERE number = 42 FOR UPDATE", &[])
        .unwrap();
    let held = Instant::now();
    let a_dir = a.mount.clone();
    let on_42 = std::thread::spawn(move || {
        let (r, _) = call_in(
            &a_dir,
            "tracker/issues/42/ops/comment",
            "{\"body\":\"waits for its row\"}\n",
        );
        (r, held.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    let (r, beside) = call_in(
        &b.mount,
        "tracker/issues/43/ops/comment",
        "{\"body\":\"beside\"}\n",
    );
    assert_eq!(r, Ok(()));
    std::thread::sleep(Duration::from_millis(2000));
    assert!(!on_42.is_finished(), "A's call waits for issue 42's row");
    tx.rollback().unwrap();
    let (r, waited) = on_42.join().unwrap();
    assert_eq!(r, Ok(()));
    println!("B's call on #43 beside A's waiting on #42: {beside:?}; A's call: {waited:?}");
    assert!(beside < Duration::from_secs(2), "B waited: {beside:?}");
    assert!(waited >= Duration::from_millis(2400), "{waited:?}");
    assert!(
        b.read("tracker/issues/42/description")
            .contains("4 comments"),
        "{}",
        b.read("tracker/issues/42/description")
    );
}

/// An agent's tally: each body it sent, and whether its call said it succeeded.
fn agent_script(tag: &str, issue: u32, until: u64) -> String {
    format!(
        "k=0; end=$((SECONDS+{until})); while [ $SECONDS -lt $end ]; do k=$((k+1)); \
         b=\"{tag}-$k\"; \
         if echo \"{{\\\"body\\\":\\\"$b\\\"}}\" > tracker/issues/{issue}/ops/comment/call 2>/dev/null; \
         then echo \"ok $b\"; else echo \"fail $b $(tr '\\n' ' ' < tracker/issues/{issue}/ops/comment/result)\"; fi; \
         done"
    )
}

/// Agents on two mounts (one in a network namespace, over TCP) comment without pause
/// while PostgreSQL, holding both the state and the tracker, restarts. 10 s after the
/// server is back no run is `running`, and for every comment sent the tracker, the
/// journal and the agent agree: in the tracker exactly when its run is `ok` and its
/// agent was told so.
#[test]
fn a_postgresql_restart_mid_load_leaves_no_run_running_and_all_three_agree() {
    let _one = serial();
    let own = OwnServer::start();
    let db = TestDb::create(&own.server, "restart");
    let tracker = TestDb::create(&own.server, "restart_tracker");
    let ns = NetNs::create();
    let port = relay(&ns.host_ip, &own.server);
    let tcp = |name: &str| format!("postgresql://root@{}:{port}/{name}", ns.host_ip);
    let a = Mount::start_with_env(
        Some(&manifest(&tracker.url)),
        &[("WIP_STATE_URL", db.url.as_str()), ("WIP_LOG", QUIET)],
    );
    let b = NsMount::start(&ns, &manifest(&tcp(&tracker.name)), &tcp(&db.name));
    const PER_MOUNT: u32 = 3;
    const SECONDS: u64 = 14;
    let mut agents = Vec::new();
    for (m, dir) in [("a", &a.mount), ("b", &b.mount)] {
        for i in 0..PER_MOUNT {
            let issue = 1 + i + if m == "a" { 0 } else { PER_MOUNT };
            let mut cmd = Command::new("bash");
            common::scrub_env(&mut cmd);
            agents.push(
                cmd.arg("-c")
                    .arg(agent_script(&format!("ft{m}{i}"), issue, SECONDS))
                    .current_dir(dir)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
    }
    std::thread::sleep(Duration::from_secs(4));
    let t = Instant::now();
    own.pg_ctl("restart");
    let back = Instant::now();
    println!("PostgreSQL restarted in {:?}", t.elapsed());
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut told: Vec<(String, bool, String)> = Vec::new();
    for mut c in agents {
        while c.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("an agent overran 120 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = c.wait_with_output().unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut parts = line.splitn(3, ' ');
            let (verdict, body, rest) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or("").to_string(),
                parts.next().unwrap_or("").to_string(),
            );
            told.push((body, verdict == "ok", rest));
        }
    }
    let wait = Duration::from_secs(10).saturating_sub(back.elapsed());
    std::thread::sleep(wait);
    let still = running(&db);
    let mut journal = db.client();
    let runs: Vec<(String, String, String)> = journal
        .query(
            "SELECT id::text, status, args FROM calls WHERE status = 'running'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        still, 0,
        "runs still running 10 s after the restart: {runs:#?}"
    );
    let mut status_of = |body: &str| -> Vec<String> {
        journal
            .query(
                "SELECT status FROM calls WHERE op = 'comment' AND args LIKE $1",
                &[&format!("%\"{body}\"%")],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let mut in_tracker: std::collections::BTreeSet<String> = tracker
        .client()
        .query("SELECT body FROM comments", &[])
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0).trim_end().to_string())
        .collect();
    let (mut ok, mut failed, mut disagree) = (0, 0, Vec::new());
    for (body, success, words) in &told {
        let present = in_tracker.remove(body);
        let statuses = status_of(body);
        let run_ok = statuses.iter().any(|s| s == "ok");
        if *success {
            ok += 1;
        } else {
            failed += 1;
        }
        if present != *success || run_ok != present {
            disagree.push(format!(
                "{body}: told {}, in the tracker {present}, runs {statuses:?}: {words}",
                if *success { "ok" } else { "failed" }
            ));
        }
    }
    let strays: Vec<&String> = in_tracker.iter().filter(|b| b.starts_with("ft")).collect();
    println!(
        "restart mid-load: {} calls, {ok} told ok, {failed} told failed; none running 10 s after",
        told.len()
    );
    assert!(disagree.is_empty(), "{disagree:#?}");
    assert!(strays.is_empty(), "in the tracker, never sent: {strays:?}");
    assert!(
        ok > 0 && failed > 0,
        "the restart met calls: {ok} ok, {failed} failed"
    );
}
