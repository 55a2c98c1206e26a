//! The exec host, mounted for real: the example processes host (Python) over stdio, a unix
//! socket and TCP (and those servers restarting), driven as an agent would; hosts that
//! crash, hang, print junk or never shake hands, each of which must cost one call an errno
//! with words and never the mount; and a host that records what it is asked, to show that
//! reads never act and that declared kinds spare the `ops` requests.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Mount;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn processes_py() -> String {
    repo()
        .join("examples/hosts/processes.py")
        .display()
        .to_string()
}

fn recorder_py() -> String {
    repo().join("tests/hosts/recorder.py").display().to_string()
}

fn misbehave_py() -> String {
    repo()
        .join("tests/hosts/misbehave.py")
        .display()
        .to_string()
}

/// A host server the test started; killed (by its own id) when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(listen: &str) -> Server {
    try_serve(listen).unwrap_or_else(|why| panic!("{listen}: {why}"))
}

/// Start the processes host listening on `listen`; `Err` if it exits first (its port was
/// taken, say).
fn try_serve(listen: &str) -> Result<Server, String> {
    let child = Command::new("python3")
        .arg(processes_py())
        .arg("--listen")
        .arg(listen)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = server.0.try_wait() {
            return Err(format!("the server exited ({status})"));
        }
        let up = match listen.strip_prefix("unix:") {
            Some(p) => std::os::unix::net::UnixStream::connect(p).is_ok(),
            None => std::net::TcpStream::connect(listen.trim_start_matches("tcp:")).is_ok(),
        };
        // Up, and still ours: a port another process took would answer too.
        if up && matches!(server.0.try_wait(), Ok(None)) {
            return Ok(server);
        }
        if Instant::now() >= deadline {
            return Err("it never came up".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes host on a free loopback TCP port: a port found free may be taken before
/// the server binds it, so another is tried then.
fn serve_tcp() -> (Server, u16) {
    for _ in 0..5 {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        if let Ok(server) = try_serve(&format!("tcp:127.0.0.1:{port}")) {
            return (server, port);
        }
    }
    panic!("no free port took the processes host in five tries");
}

fn sleeper() -> Server {
    Server(Command::new("sleep").arg("300").spawn().unwrap())
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `host` lists the process `pid` (a sleeper) and reads its body.
fn lists_and_reads(m: &Mount, host: &str, pid: u32) {
    assert!(m
        .ok(&format!("ls {host}"))
        .lines()
        .any(|l| l == pid.to_string()));
    m.ok(&format!("echo > {host}/{pid}/ops/read_body/call"));
    assert!(m
        .result(&format!("{host}/{pid}/ops/read_body"))
        .contains("command: sleep 300"));
}

fn errno_of(r: Result<(), i32>) -> i32 {
    r.expect_err("the call should have failed")
}

#[test]
fn processes_over_stdio_as_an_agent_would() {
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"exec\"\npath = \"processes\"\ncommand = [\"python3\", {:?}]\n",
        processes_py()
    )));
    let d = m.read("processes/description");
    assert!(d.starts_with("Processes of "), "{d}");
    let listed = m.ok("ls processes");
    assert!(listed.lines().any(|l| l == "1"), "{listed}");
    assert!(listed.lines().any(|l| l == "ops"));
    let s = sleeper();
    let pid = s.0.id();
    // Just started, it may still be running for a moment before it sleeps.
    wait_for("the sleeper to sleep", || {
        m.read(&format!("processes/{pid}/description"))
            .contains("(sleeping)")
    });
    let d = m.read(&format!("processes/{pid}/description"));
    assert!(d.contains("sleep 300") && d.contains("(sleeping)"), "{d}");
    assert!(m
        .read(&format!("processes/{pid}/ref"))
        .starts_with("proc://"));
    assert_eq!(
        m.ok(&format!("ls processes/{pid}/ops")),
        "read_body\nsignal\n"
    );
    assert!(m
        .read(&format!("processes/{pid}/ops/signal/schema"))
        .contains("\"TERM\""));
    m.ok(&format!("echo > processes/{pid}/ops/read_body/call"));
    let body = m.result(&format!("processes/{pid}/ops/read_body"));
    assert!(
        body.contains("command: sleep 300") && body.contains("values not shown"),
        "{body}"
    );
    // find: processes as discovered entries, printed as paths.
    m.ok("echo 'sleep 300' > processes/ops/find/call");
    let found = m.result("processes/ops/find");
    assert!(
        found.contains(&format!("/processes/{pid}\tPID {pid} · sleep 300")),
        "{found}"
    );
    // The command that asks holds the pattern too: it and its parents are left out, with
    // the builtin echo (bash is the caller) and with /bin/echo (bash is its parent).
    for echo in ["echo", "/bin/echo"] {
        let out = m.ok(&format!(
            "echo $$; {echo} 'sleep 300' > processes/ops/find/call; cat processes/ops/find/result"
        ));
        let (me, found) = out.split_once('\n').unwrap();
        assert!(
            !found.contains(&format!("/processes/{me}\t")),
            "{echo}: the calling bash {me} is listed: {found}"
        );
        let left_out = found.split_once("left out: ").map(|(_, l)| l).unwrap_or("");
        assert!(
            left_out.contains(&format!("PID {me}"))
                && left_out.contains("the command that called find and its parents"),
            "{echo}: {found}"
        );
        assert!(found.contains(&format!("/processes/{pid}\t")), "{found}");
    }
    // The guard, then the signal.
    let g = m.read(&format!("processes/{pid}/ops/signal/guard"));
    assert!(
        g.starts_with("allowed\n") && g.contains("✓ not_init"),
        "{g}"
    );
    m.ok(&format!("echo TERM > processes/{pid}/ops/signal/call"));
    assert!(m
        .result(&format!("processes/{pid}/ops/signal"))
        .starts_with(&format!("sent SIGTERM to {pid}")));
    let mut s = s;
    let status = s.0.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
    // Gone and reaped, its result (and the call's run) is still readable by path.
    assert!(m
        .result(&format!("processes/{pid}/ops/signal"))
        .starts_with(&format!("sent SIGTERM to {pid}")));
    // The process exits after the call answered, and nobody tells the world: a description
    // read in between may be reused for the host's TTL (1 s), not longer.
    common::wait_until(
        "the killed process's description says it exited",
        Duration::from_secs(5),
        || {
            m.read(&format!("processes/{pid}/description"))
                .contains("exited")
        },
    );
    // PID 1 and the daemon itself: blocked by policy (EACCES), with the guard's words.
    let g = m.read("processes/1/ops/signal/guard");
    assert!(
        g.starts_with("blocked\n") && g.contains("✗ not_init: PID 1"),
        "{g}"
    );
    assert_eq!(
        errno_of(m.call("processes/1/ops/signal", "KILL\n")),
        libc::EACCES
    );
    assert!(m
        .result("processes/1/ops/signal")
        .contains("blocked by guard not_init"));
    let daemon = m.daemon_pid().unwrap();
    let g = m.read(&format!("processes/{daemon}/ops/signal/guard"));
    assert!(g.contains("✗ not_runtime: this is the wip daemon"), "{g}");
    // Its guard fails whatever the arguments: refused when `call` is opened, so even
    // bash's builtin echo reports it.
    assert_eq!(
        errno_of(m.call(&format!("processes/{daemon}/ops/signal"), "TERM\n")),
        libc::EACCES
    );
    let out = m.sh(&format!("echo TERM > processes/{daemon}/ops/signal/call"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    // A bad signal name is refused by the schema before the host sees it.
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let bad = m.call(&format!("processes/{}/ops/signal", sleeper.id()), "NOPE\n");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(errno_of(bad), libc::EINVAL);
    // Every call is in the journal.
    let log = m.read(".wip/log");
    assert!(log.contains(&format!("/processes/{pid} signal")), "{log}");
    assert!(log.contains("/processes/1 signal"), "{log}");
}

#[test]
fn the_example_manifest_mounts_the_processes_host() {
    // mounts/processes.toml names the script relative to the launch directory.
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("examples"), root.path().join("examples")).unwrap();
    let manifest = std::fs::read_to_string(repo().join("mounts/processes.toml")).unwrap();
    let m = Mount::start_in(Some(&manifest), root, tempfile::tempdir().unwrap());
    let d = m.read("processes/description");
    assert!(d.starts_with("Processes of "), "{d}");
    m.ok("echo > processes/ops/summary/call");
    let r = m.result("processes/ops/summary");
    assert!(
        r.contains(" processes (") && r.contains("load average"),
        "{r}"
    );
}

#[test]
fn a_process_that_exits_on_its_own_reaches_the_change_feed() {
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"exec\"\npath = \"processes\"\ncommand = [\"python3\", {:?}]\n",
        processes_py()
    )));
    let mut s = sleeper();
    let pid = s.0.id();
    assert!(m
        .read(&format!("processes/{pid}/description"))
        .contains("sleep 300"));
    // Killed outside the mount: the host notices and tells the runtime.
    s.0.kill().unwrap();
    s.0.wait().unwrap();
    let want = format!("/processes/{pid}\"");
    wait_for("the exit in .wip/events", || {
        m.read(".wip/events")
            .lines()
            .any(|l| l.contains(&want) && l.contains("\"changed\""))
    });
    // It stays reachable by path for a while, as exited, but is no longer listed.
    let d = m.read(&format!("processes/{pid}/description"));
    assert!(d.contains("exited"), "{d}");
    assert!(m
        .read(&format!("processes/{pid}/ops/signal/guard"))
        .contains("✗ exists"));
    assert!(!m.ok("ls processes").lines().any(|l| l == pid.to_string()));
}

#[test]
fn processes_over_a_unix_socket_and_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("processes.sock");
    let _unix = serve(&format!("unix:{}", sock.display()));
    let (_tcp, port) = serve_tcp();
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"exec\"\npath = \"far/unix\"\nconnect = \"unix:{}\"\n\
         [[host]]\nkind = \"exec\"\npath = \"far/tcp\"\nconnect = \"tcp:127.0.0.1:{port}\"\n",
        sock.display()
    )));
    let s = sleeper();
    let pid = s.0.id();
    for host in ["far/unix", "far/tcp"] {
        let d = m.read(&format!("{host}/description"));
        assert!(d.starts_with("Processes of "), "{host}: {d}");
        lists_and_reads(&m, host, pid);
        let g = m.read(&format!("{host}/1/ops/signal/guard"));
        assert!(g.starts_with("blocked"), "{g}");
    }
}

fn misbehaving_world() -> Mount {
    let py = misbehave_py();
    let mut manifest = format!(
        "[[host]]\nkind = \"exec\"\npath = \"processes\"\ncommand = [\"python3\", {:?}]\n",
        processes_py()
    );
    for mode in ["crash", "hang", "junk", "mute"] {
        manifest.push_str(&format!(
            "[[host]]\nkind = \"exec\"\npath = \"bad/{mode}\"\ncommand = [\"python3\", {py:?}, \"{mode}\"]\n\
             timeout_ms = 1500\nstart_timeout_ms = 3000\n"
        ));
    }
    Mount::start(Some(&manifest))
}

/// Other hosts still answer, and the misbehaving ones' roots say what they are (how fast,
/// while a host hangs, is measured by scripts/bench.sh).
fn responsive(m: &Mount) {
    assert!(m.read("processes/description").starts_with("Processes of"));
    assert!(m.ok("ls processes").lines().any(|l| l == "1"));
    for host in ["crash", "junk"] {
        let d = m.read(&format!("bad/{host}/description"));
        assert!(d.contains("misbehaves") || d.contains("is down"), "{d}");
    }
}

#[test]
fn misbehaving_hosts_fail_with_words_and_the_mount_stays_responsive() {
    let m = misbehaving_world();
    // The hosts start in the background; a slow start is reported, not waited for.
    wait_for("the hosts to start", || {
        ["processes", "bad/crash", "bad/hang", "bad/junk"]
            .iter()
            .all(|h| !m.read(&format!("{h}/description")).contains("starting"))
    });
    responsive(&m);

    // Crashes mid-call: EIO with the exit status; the host comes back after its backoff.
    assert_eq!(errno_of(m.call("bad/crash/ops/misbehave", "\n")), libc::EIO);
    let r = m.result("bad/crash/ops/misbehave");
    assert!(r.contains("exited (exit status: 3) during call"), "{r}");
    responsive(&m);
    wait_for("the crashed host to come back", || {
        m.call("bad/crash/ops/echo", "back\n").is_ok()
    });
    assert_eq!(m.result("bad/crash/ops/echo"), "echo: back\n");
    // Going down and coming back changed the host's root: the change feed has it.
    wait_for("the crash in .wip/events", || {
        m.read(".wip/events")
            .lines()
            .any(|l| l.contains("\"/bad/crash\"") && l.contains("\"changed\""))
    });

    // Never answers, nor anything after: while the call waits, the silent host is pinged,
    // and a ping unanswered within timeout_ms means it hung: EIO with those words, and the
    // host is restarted. The rest of the mount answers meanwhile.
    let hung = {
        let op = m.path("bad/hang/ops/misbehave/call");
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = std::fs::write(op, "\n").map_err(|e| e.raw_os_error());
            (r, t.elapsed())
        })
    };
    wait_for("the hung call to be running", || {
        m.read(".wip/log")
            .lines()
            .any(|l| l.contains("/bad/hang misbehave") && l.contains("running"))
    });
    responsive(&m);
    let (r, took) = hung.join().unwrap();
    assert_eq!(r, Err(Some(libc::EIO)));
    // Silent for timeout_ms (1.5 s), then unanswered for 1.5 s more: about 3 s, well
    // within the world's own call timeout.
    assert!(took >= Duration::from_millis(2900), "{took:?}");
    let r = m.result("bad/hang/ops/misbehave");
    assert!(
        r.contains("no answer to ping within 1500 ms while a call ran"),
        "{r}"
    );

    // Prints junk: EIO quoting it.
    assert_eq!(errno_of(m.call("bad/junk/ops/misbehave", "\n")), libc::EIO);
    let r = m.result("bad/junk/ops/misbehave");
    assert!(
        r.contains("not JSON-RPC") && r.contains("<html>this is not JSON-RPC</html>"),
        "{r}"
    );
    responsive(&m);

    // Never shakes hands: its root says why; listing it is EIO, not a hang.
    let d = m.read("bad/mute/description");
    assert!(
        d.contains("is down") && d.contains("no answer to initialize"),
        "{d}"
    );
    let out = m.sh("ls bad/mute");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Input/output error"));

    // The journal has each call with its outcome.
    let log = m.read(".wip/log");
    for (path, status) in [
        ("/bad/crash misbehave", "failed"),
        ("/bad/hang misbehave", "failed"),
        ("/bad/junk misbehave", "failed"),
        ("/bad/crash echo", "ok"),
    ] {
        assert!(
            log.lines().any(|l| l.contains(path) && l.contains(status)),
            "{path} {status} not in:\n{log}"
        );
    }
}

/// What the recording host was asked, one JSON object a request.
fn recorded(log: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn reads_never_act_on_an_exec_world_and_kinds_spare_every_ops_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let s = sleeper();
    let pid = s.0.id();
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"exec\"\npath = \"rec\"\ncommand = [\"python3\", {:?}, {:?}, \"--kinds\"]\n\
         [[host]]\nkind = \"exec\"\npath = \"processes\"\ncommand = [\"python3\", {:?}]\n",
        recorder_py(),
        log.display().to_string(),
        processes_py()
    )));
    wait_for("the hosts to start", || {
        m.read("rec/description").starts_with("a recording host")
            && m.read("processes/description").starts_with("Processes of")
    });
    // A file manager's walk: every directory listed, every file stat'ed and read.
    m.ok(&format!(
        "ls -laR rec processes/{pid} > /dev/null; ls -laRL rec processes/{pid} > /dev/null; \
         find -L rec processes/{pid} -type f -print0 | xargs -0 cat > /dev/null; \
         find -L rec processes/{pid} -print0 | xargs -0 stat > /dev/null; ls processes > /dev/null"
    ));
    let files = m.ok("find -L rec -type f | wc -l");
    assert!(files.trim().parse::<usize>().unwrap() >= 30, "{files}");
    // Nothing ran: no call reached either host, the journal is empty, the process lives.
    let asked = recorded(&log);
    assert!(
        asked.iter().any(|r| r["method"] == "guard"),
        "the walk read guards"
    );
    assert!(
        asked.iter().all(|r| r["method"] != "call"),
        "a read acted: {asked:?}"
    );
    assert_eq!(m.journal_count(), 0, "{}", m.read(".wip/log"));
    assert!(m
        .read(&format!("processes/{pid}/description"))
        .contains("sleep 300"));
    // The kinds were declared: the ops of every entry came from initialize.
    assert!(
        asked.iter().all(|r| r["method"] != "ops"),
        "{:?}",
        asked
            .iter()
            .filter(|r| r["method"] == "ops")
            .collect::<Vec<_>>()
    );
    assert_eq!(m.ok("ls rec/items/2/ops"), "read_body\ntouch\n");
    assert_eq!(m.ok("ls rec/ops"), "crash\necho\n");
    // What a write does run, it runs.
    m.ok("echo > rec/items/2/ops/touch/call");
    assert_eq!(
        m.read("rec/items/2/description"),
        "item 2, touched 1 times\n"
    );
    let calls: Vec<_> = recorded(&log)
        .into_iter()
        .filter(|r| r["method"] == "call")
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["path"], serde_json::json!(["items", "2"]));
}

#[test]
fn a_call_that_keeps_crashing_the_host_is_refused_and_named_on_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"exec\"\npath = \"rec\"\ncommand = [\"python3\", {:?}, {:?}]\n",
        recorder_py(),
        log.display().to_string()
    )));
    wait_for("the host to start", || {
        m.read("rec/description").starts_with("a recording host")
    });
    // An agent retrying the call that crashes the host: soon refused without reaching it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = m.call("rec/ops/crash", "\n");
        let words = m.result("rec/ops/crash");
        if words.contains("crashes on this call") {
            assert_eq!(r, Err(libc::EIO));
            assert!(
                words.starts_with("error: host rec crashes on this call: it went down during it")
                    && words.contains("(last: the host exited (exit status: 3) during call)"),
                "{words}"
            );
            break;
        }
        assert!(r.is_err(), "crash answered: {words}");
        assert!(Instant::now() < deadline, "never refused: {words}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let crashes = recorded(&log)
        .iter()
        .filter(|r| r["method"] == "call" && r["op"] == "crash")
        .count();
    let lives = recorded(&log)
        .iter()
        .filter(|r| r["method"] == "initialize")
        .count();
    assert!(lives <= crashes + 1, "{lives} starts for {crashes} crashes");
    // Back up, its root names the call; other calls run.
    wait_for("the root to be back up and name the call", || {
        let d = m.read("rec/description");
        d.contains("crashes on this call: rec/ops/crash (") && !d.contains(" is down")
    });
    m.ok("echo hi > rec/ops/echo/call");
    assert_eq!(m.result("rec/ops/echo"), "echo: hi\n");
}

#[test]
fn hosts_on_a_unix_socket_and_tcp_that_restart_are_reached_again() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("processes.sock");
    let unix = format!("unix:{}", sock.display());
    let (tcp_server, port) = serve_tcp();
    let tcp = format!("tcp:127.0.0.1:{port}");
    let servers = (serve(&unix), tcp_server);
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"exec\"\npath = \"far/unix\"\nconnect = {unix:?}\n\
         [[host]]\nkind = \"exec\"\npath = \"far/tcp\"\nconnect = {tcp:?}\n"
    )));
    for host in ["far/unix", "far/tcp"] {
        wait_for("the servers to be reached", || {
            m.read(&format!("{host}/description"))
                .starts_with("Processes of ")
        });
    }
    // Both servers go away: the roots say so, listings fail with words, nothing hangs.
    drop(servers);
    for host in ["far/unix", "far/tcp"] {
        wait_for("the roots to say the hosts are down", || {
            m.read(&format!("{host}/description")).contains("is down")
        });
        let out = m.sh(&format!("ls {host}"));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Input/output error"),
            "{out:?}"
        );
    }
    // They come back on the same socket and port: the mount reconnects on its own.
    let _servers = (serve(&unix), serve(&tcp));
    let s = sleeper();
    let pid = s.0.id();
    for host in ["far/unix", "far/tcp"] {
        wait_for("the hosts to be reached again", || {
            m.read(&format!("{host}/description"))
                .starts_with("Processes of ")
        });
        lists_and_reads(&m, host, pid);
    }
    // Going down and coming back are changes of the roots, in the change feed.
    let events = m.read(".wip/events");
    for host in ["/far/unix\"", "/far/tcp\""] {
        assert!(
            events
                .lines()
                .filter(|l| l.contains(host) && l.contains("\"changed\""))
                .count()
                >= 2,
            "{events}"
        );
    }
}

/// processes.py mounted at `processes` (after the manifest text `before`), and a sleeper
/// that has become `sleep 300`.
fn processes_with_a_sleeper(before: &str) -> (Mount, Server, u32) {
    let m = Mount::start(Some(&format!(
        "{before}[[host]]\nkind = \"exec\"\npath = \"processes\"\ncommand = [\"python3\", {:?}]\n",
        processes_py()
    )));
    let s = sleeper();
    let pid = s.0.id();
    // Just forked, it may not have exec'd sleep yet.
    wait_for("the sleeper to be sleep", || {
        m.read(&format!("processes/{pid}/description"))
            .contains("sleep 300")
    });
    (m, s, pid)
}

#[test]
fn titled_names_show_each_process_command() {
    let (m, _s, pid) = processes_with_a_sleeper("[world]\ntitled = true\n");
    let listed = m.ok("ls processes");
    let name = format!("{pid} sleep 300");
    assert!(listed.lines().any(|l| l == name), "{listed}");
    assert_eq!(
        m.read(&format!("processes/{name}/ref")),
        m.read(&format!("processes/{pid}/ref"))
    );
}

#[test]
fn a_process_body_is_its_status_and_reading_it_is_no_call() {
    let (m, _s, pid) = processes_with_a_sleeper("");
    let body = m.read(&format!("processes/{pid}/body"));
    assert!(body.starts_with("Name:\tsleep\n"), "{body}");
    assert!(body.contains(&format!("\nPid:\t{pid}\n")), "{body}");
    assert_eq!(
        m.ok(&format!("stat -c %s processes/{pid}/body")).trim(),
        body.len().to_string(),
        "the size is true"
    );
    let hits = m.ok(&format!("grep -l '^Name:.sleep$' processes/{pid}/body"));
    assert_eq!(hits.trim(), format!("processes/{pid}/body"));
    assert!(
        !m.sh("test -e processes/body").status.success(),
        "the root has none"
    );
    m.ok(&format!("! test -w processes/{pid}/body"));
    assert_eq!(m.journal_count(), 0);
}

/// A slow op of a host that answers other requests meanwhile: past the world's timeout the
/// caller hears ETIMEDOUT with the run's path, the host reports progress, `wait` returns
/// the result, `cancel` from another session stops it (the host is told), a killed
/// caller's run is waited on by the next, and the host is never restarted for any of it.
#[test]
fn a_slow_exec_call_is_a_run_to_watch_wait_on_and_cancel() {
    let py = misbehave_py();
    let m = Mount::start(Some(&format!(
        "[world]\ncall_timeout_ms = 2000\n\
         [[host]]\nkind = \"exec\"\npath = \"slow\"\ncommand = [\"python3\", {py:?}, \"crash\"]\n\
         timeout_ms = 1500\n"
    )));
    wait_for("the host to start", || {
        !m.read("slow/description").contains("starting")
    });
    let pid_before = m.read("slow/description");
    // 30 steps of 100 ms: past the 2 s the caller waits.
    let out = m.sh(r#"echo '{"steps":30,"ms":100}' > slow/ops/slow/call; echo "rc=$?"; cat slow/ops/slow/result"#);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains("Connection timed out"), "{stderr}");
    let run = m.path("slow/ops/slow/runs/1").display().to_string();
    assert!(text.contains("rc=1"), "{text}");
    common::assert_names_the_run(&text, &run);
    let progress = m.read("slow/ops/slow/runs/1/progress");
    assert!(progress.contains("/30 step"), "{progress}");
    // The host answers meanwhile: the slow call holds no one.
    assert_eq!(m.call("slow/ops/echo", "meanwhile\n"), Ok(()));
    // wait: returns when the run ends, with its result.
    let out = m.ok(
        "echo > slow/ops/slow/runs/1/ops/wait/call && cat slow/ops/slow/runs/1/ops/wait/result",
    );
    assert_eq!(out, "30 steps done\n");
    assert_eq!(m.read("slow/ops/slow/runs/1/status"), "ok\n");
    assert_eq!(m.read("slow/ops/slow/result"), "30 steps done\n");

    // A second run, cancelled from another session: the host is told and stops. (The
    // listing of runs/ is read first, so the kernel holds it: the new run must still show.)
    assert_eq!(m.ok("ls slow/ops/slow/runs"), "1\n");
    let caller = {
        let op = m.path("slow/ops/slow/call");
        std::thread::spawn(move || {
            std::fs::write(op, r#"{"steps":300,"ms":100}"#).map_err(|e| e.raw_os_error())
        })
    };
    // Listed in runs/ while it runs, well before its caller's 2 s wait ends.
    let spawned = Instant::now();
    wait_for("the second run listed in runs/", || {
        m.ok("ls slow/ops/slow/runs").lines().any(|l| l == "2")
    });
    assert!(
        spawned.elapsed() < Duration::from_millis(1500),
        "runs/ listed the run only after {:?}",
        spawned.elapsed()
    );
    wait_for("the second run to report progress", || {
        std::fs::read_to_string(m.path("slow/ops/slow/runs/2/progress"))
            .is_ok_and(|p| p.contains("/300"))
    });
    let out = m.ok("setsid bash -c 'echo > slow/ops/slow/runs/2/ops/cancel/call; cat slow/ops/slow/runs/2/ops/cancel/result'");
    assert!(out.starts_with("run 2 was cancelled: error: "), "{out}");
    assert!(out.contains("stopped at step"), "{out}");
    assert_eq!(m.read("slow/ops/slow/runs/2/status"), "cancelled\n");
    // Its caller had stopped waiting or hears the cancel.
    let r = caller.join().unwrap();
    assert!(
        matches!(r, Err(Some(libc::ETIMEDOUT)) | Err(Some(libc::ECANCELED))),
        "{r:?}"
    );
    let out = m.sh("echo > slow/ops/slow/runs/2/ops/cancel/call");
    assert!(
        !out.status.success(),
        "a run that ended cannot be cancelled again"
    );

    // A killed caller's run goes on; the next caller waits for it.
    let mut killed = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "echo '{{\"steps\":25,\"ms\":100}}' > {}/slow/ops/slow/call",
            m.path("").display()
        ))
        .spawn()
        .unwrap();
    wait_for("the third run to start", || {
        m.path("slow/ops/slow/runs/3").exists()
    });
    std::thread::sleep(Duration::from_millis(300));
    killed.kill().unwrap();
    let _ = killed.wait();
    let out = m.ok("echo '{\"timeout_ms\":1800}' > slow/ops/slow/runs/3/ops/wait/call; cat slow/ops/slow/runs/3/ops/wait/result; true");
    let out = if out.contains("still running") {
        m.ok(
            "echo > slow/ops/slow/runs/3/ops/wait/call && cat slow/ops/slow/runs/3/ops/wait/result",
        )
    } else {
        out
    };
    assert_eq!(out, "25 steps done\n");
    // Nothing of this restarted the host.
    assert_eq!(m.read("slow/description"), pid_before);
    // Reads of runs/ never act, and walkers do not enter it.
    let before = m.journal_count();
    m.ok("find slow > /dev/null; grep -r x slow > /dev/null; cat slow/ops/slow/runs/*/progress slow/ops/slow/runs/*/description > /dev/null; ls -R slow/ops/slow/runs > /dev/null");
    assert_eq!(m.journal_count(), before);
    assert!(!m.ok("find slow").contains("runs"));
}

/// The command line over long runs: `wip call --wait` waits past the mount's timeout (as
/// many waits as it takes) and prints the result; `wip runs` lists runs with their paths,
/// `--running` those in flight, as `.wip/status` does.
#[test]
fn wip_call_wait_and_wip_runs_follow_long_runs() {
    let py = misbehave_py();
    let m = Mount::start(Some(&format!(
        "[world]\ncall_timeout_ms = 1000\n\
         [[host]]\nkind = \"exec\"\npath = \"slow\"\ncommand = [\"python3\", {py:?}, \"crash\"]\n"
    )));
    wait_for("the host to start", || {
        !m.read("slow/description").contains("starting")
    });
    let wip = |args: &[&str]| {
        let out = common::wip_command().args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let op = m.path("slow/ops/slow").display().to_string();
    // 25 steps of 100 ms: three of the mount's waits.
    let (code, out, err) = wip(&["call", "--wait", &op, r#"{"steps":25,"ms":100}"#]);
    assert_eq!((code, out.as_str()), (0, "25 steps done\n"), "{err}");
    // Without --wait: ETIMEDOUT's words, with the run to wait on.
    let (code, _, err) = wip(&["call", &op, r#"{"steps":30,"ms":100}"#]);
    assert_eq!(code, 1);
    let run = format!("{op}/runs/2");
    assert!(
        err.contains("Connection timed out") && err.contains(&format!("run: {run}")),
        "{err}"
    );
    let dir = m.path("").display().to_string();
    let (code, out, _) = wip(&["runs", &dir, "--running"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(
        lines[0].starts_with("running ") && lines[0].contains(&run),
        "{out}"
    );
    assert!(lines[0].contains("/30 step"), "progress: {out}");
    let status = m.read(".wip/status");
    assert!(
        status.contains("runs in flight") && status.contains(&run),
        "{status}"
    );
    let (_, out, _) = wip(&["runs", &dir]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("ok ") && l.contains(&format!("{op}/runs/1"))),
        "{out}"
    );
    // Ended: --running lists nothing, the full list has it.
    let (code, out, _) = wip(&["call", "--wait", &format!("{run}/ops/wait"), ""]);
    assert_eq!((code, out.as_str()), (0, "30 steps done\n"));
    let (_, out, _) = wip(&["runs", &dir, "--running"]);
    assert!(out.lines().all(|l| !l.contains("/ops/slow/runs/")), "{out}");
}

/// A host starts with no signal blocked (the daemon blocks HUP, INT and TERM for its own
/// signal thread), so `kill -TERM` reaches it and what it starts; and an unmount leaves
/// nothing of it behind: not the host, which ignores the end of its stdin, nor the
/// grandchild it detached with `setsid`, which ignores SIGTERM.
#[test]
fn hosts_start_with_plain_signals_and_an_unmount_leaves_none_of_their_processes() {
    let mut strays = common::Strays::default();
    let mut m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"exec\"\npath = \"stubborn\"\ncommand = [\"python3\", {:?}, \"stubborn\"]\n",
        misbehave_py()
    )));
    m.call("stubborn/ops/misbehave", "\n").unwrap();
    let r = m.result("stubborn/ops/misbehave");
    let (host, grandchild) = (
        common::number_after(&r, "pid"),
        common::number_after(&r, "grandchild"),
    );
    strays.watch(host);
    strays.watch(grandchild);
    assert_eq!(common::status_field(&r, "SigBlk:"), 0, "{r}");
    // Python ignores SIGPIPE and SIGXFSZ itself; none of the stop signals is ignored.
    assert_eq!(
        common::status_field(&r, "SigIgn:") & common::STOP_SIGNALS,
        0,
        "{r}"
    );
    let own = std::fs::read_to_string(format!("/proc/{grandchild}/status")).unwrap();
    assert_eq!(common::status_field(&own, "SigBlk:"), 0, "{own}");
    m.unmount();
    let left = strays.gone_within(Duration::from_secs(10));
    assert!(left.is_empty(), "still running after the unmount: {left:?}");
}
