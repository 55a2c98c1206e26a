//! Many mounts, one world: two daemons whose state (journal, change feed, known world,
//! approvals) is one PostgreSQL database and whose tracker is another, driven by agents
//! on both at once, as a team on several machines would.
//!
//! PostgreSQL must be running (`.ci/run` installs and starts Debian's, with a role for
//! root); each test makes a database of its own and drops it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{wait_until, Mount};

const SOCKET: &str = "/var/run/postgresql";

/// A database for one test, dropped afterwards.
struct TestDb {
    name: String,
    url: String,
}

fn admin() -> postgres::Client {
    postgres::Client::connect(
        &format!("postgresql:///postgres?host={SOCKET}"),
        postgres::NoTls,
    )
    .unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is not reachable at {SOCKET}: {e}. Start it as root with \
                 `apt-get install -y postgresql && pg_ctlcluster 15 main start && \
                 su postgres -c 'createuser -s root'` (.ci/run does this)"
        )
    })
}

impl TestDb {
    fn create(tag: &str) -> TestDb {
        let name = format!("wip_it_{tag}_{}", std::process::id());
        let mut a = admin();
        a.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        a.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        TestDb {
            url: format!("postgresql:///{name}?host={SOCKET}"),
            name,
        }
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = admin().batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// A tracker on the PostgreSQL database `tracker_db`, state on `url` when given in the
/// manifest (the other mount gets it from WIP_STATE_URL).
fn manifest(tracker_db: &str, url: Option<&str>) -> String {
    let state = url
        .map(|u| format!("[state]\nurl = \"{u}\"\n\n"))
        .unwrap_or_default();
    format!(
        "{state}[identity]\nuser = \"alex\"\nrole = \"maintainer\"\n\n\
         [[host]]\nkind = \"tracker\"\npath = \"tracker\"\nseed = \"demo\"\ndatabase = \"{tracker_db}\"\n"
    )
}

/// Two mounts of one world: A names the state database in its manifest, B in its
/// environment; both name the tracker's database.
fn two_mounts(db: &TestDb, tracker: &TestDb) -> (Mount, Mount) {
    two_mounts_with(db, tracker, "")
}

/// The same, with more manifest text (policy rules) on both.
/// The tracker's URL carries a password (the server trusts root on its socket and never
/// asks for it), which no file of the mount may show.
fn two_mounts_with(db: &TestDb, tracker: &TestDb, more: &str) -> (Mount, Mount) {
    let tracker_url = tracker
        .url
        .replace("postgresql:///", "postgresql://root:s3cret@/");
    let a = Mount::start(Some(&(manifest(&tracker_url, Some(&db.url)) + more)));
    let b = Mount::start_with_env(
        Some(&(manifest(&tracker_url, None) + more)),
        &[("WIP_STATE_URL", db.url.as_str())],
    );
    (a, b)
}

/// A mount the tests drive: a `Mount` of tests/common, or a daemon in its own network
/// namespace.
trait Side {
    fn dir(&self) -> &Path;

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    fn ok(&self, script: &str) -> String {
        let out = common::sh_in(self.dir(), script, Duration::from_secs(120));
        assert!(
            out.status.success(),
            "script failed: {script}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Side for Mount {
    fn dir(&self) -> &Path {
        &self.mount
    }
}

fn feed(m: &dyn Side) -> Vec<serde_json::Value> {
    m.read(".wip/events")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// How often each run appears as a `call` event of `op` in a feed.
fn calls_in(feed: &[serde_json::Value], op: &str) -> BTreeMap<i64, usize> {
    let mut n = BTreeMap::new();
    for e in feed {
        if e["kind"] == "call" && e["op"] == op {
            *n.entry(e["run"].as_i64().unwrap()).or_default() += 1;
        }
    }
    n
}

fn comment_count(description: &str) -> usize {
    // "Issue #42 · open · Crash when config is missing · 3 comments"
    description
        .split(" · ")
        .find_map(|part| {
            part.trim()
                .strip_suffix(" comments")
                .or_else(|| part.trim().strip_suffix(" comment"))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `tail -f` of a mount's change feed, its lines arriving on a channel.
struct Tail {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Tail {
    fn start(m: &dyn Side) -> Tail {
        let feed = m.dir().join(".wip/events");
        let mut child = Command::new("tail")
            .args(["-n", "0", "-f"])
            .arg(&feed)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id();
        wait_until("tail opened the feed", Duration::from_secs(30), || {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok)
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == feed))
            })
        });
        Tail { child, lines }
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `script` in `bash -c` in each mount's directory, all at once; their outputs.
fn agents(scripts: Vec<(std::path::PathBuf, String)>) -> Vec<std::process::Output> {
    let children: Vec<_> = scripts
        .into_iter()
        .map(|(dir, script)| {
            let mut cmd = Command::new("bash");
            common::scrub_env(&mut cmd);
            cmd.arg("-c")
                .arg(script)
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(180);
    children
        .into_iter()
        .map(|mut c| {
            while c.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                    panic!("an agent overran 180 s");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            c.wait_with_output().unwrap()
        })
        .collect()
}

const AGENTS: usize = 8;
const CALLS: usize = 5;

#[test]
fn eight_agents_on_each_of_two_mounts_lose_and_repeat_nothing_and_both_see_it_all() {
    let db = TestDb::create("agents");
    let tracker = TestDb::create("agents_tracker");
    let (a, b) = two_mounts(&db, &tracker);
    agents_on_both(&db, &tracker, &a, &b);
}

/// 8 agents on each mount comment on one issue; every call shows once everywhere, each
/// comment has a number of its own, and B's kernel caches and `tail -f` follow A.
fn agents_on_both(db: &TestDb, tracker: &TestDb, a: &dyn Side, b: &dyn Side) {
    assert!(b
        .read("README.md")
        .contains("Other mounts share this world's state"));
    for m in [a, b] {
        let root = m.read("tracker/description");
        assert!(root.contains(" · on PostgreSQL postgresql://"), "{root}");
    }
    // B holds the issue in its kernel caches before anyone changes it.
    let before = comment_count(&b.read("tracker/issues/42/description"));
    b.ok("ls tracker/issues/42/comments > /dev/null");
    let tail = Tail::start(b);

    let mut scripts = Vec::new();
    for (name, m) in [("A", a), ("B", b)] {
        for n in 0..AGENTS {
            scripts.push((
                m.dir().to_path_buf(),
                format!(
                    "for i in $(seq 1 {CALLS}); do \
                       echo \"note from mount {name} agent {n} call $i\" > tracker/issues/42/ops/comment/call || exit 1; \
                     done"
                ),
            ));
        }
    }
    for out in agents(scripts) {
        assert!(
            out.status.success(),
            "an agent failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let total = 2 * AGENTS * CALLS;
    let expected: BTreeSet<String> = ["A", "B"]
        .iter()
        .flat_map(|name| {
            (0..AGENTS).flat_map(move |n| {
                (1..=CALLS).map(move |i| format!("note from mount {name} agent {n} call {i}"))
            })
        })
        .collect();

    // The journal: every call once, each finished ok.
    let mut pg = db.client();
    let rows = pg
        .query(
            // The change feed names a run by its number among its op's runs (`runs/N`).
            "SELECT seq, args, status, origin FROM calls WHERE op = 'comment' ORDER BY id",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), total, "one journal row per call");
    let mut args_seen = BTreeSet::new();
    let mut origins = BTreeSet::new();
    let mut runs = BTreeSet::new();
    for r in &rows {
        let args: String = r.get(1);
        let status: String = r.get(2);
        assert_eq!(status, "ok", "{args}");
        assert!(
            args_seen.insert(args.trim_end().to_string()),
            "twice: {args}"
        );
        origins.insert(r.get::<_, String>(3));
        runs.insert(r.get::<_, i64>(0));
    }
    assert_eq!(origins.len(), 2, "each mount recorded its own calls");
    assert_eq!(
        args_seen
            .iter()
            .map(|s| comment_text(s))
            .collect::<BTreeSet<_>>(),
        expected
    );

    // The tracker's database: every comment once, each with its own number.
    let row = tracker
        .client()
        .query_one(
            "SELECT count(*), count(DISTINCT seq), max(seq) FROM comments WHERE number = 42",
            &[],
        )
        .unwrap();
    let (n, distinct, max): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(n as usize, before + total);
    assert_eq!(
        (distinct, max),
        (n, n),
        "comment numbers 1..{n}, none twice"
    );
    // The tracker: every comment once, read through B (whose listing was cached).
    let bodies = b.ok("cat tracker/issues/42/comments/*/description");
    for text in &expected {
        assert_eq!(bodies.matches(text.as_str()).count(), 1, "{text}");
    }
    // B's cached description follows the calls made through A too.
    // All calls have returned by now: about a second is the promise, five the bound.
    wait_until(
        "B's description counts every comment",
        Duration::from_secs(5),
        || comment_count(&b.read("tracker/issues/42/description")) == before + total,
    );
    assert_eq!(
        comment_count(&a.read("tracker/issues/42/description")),
        before + total
    );

    // Both feeds: every call exactly once, the same runs as the journal.
    for m in [a, b] {
        let calls = calls_in(&feed(m), "comment");
        assert!(calls.values().all(|&n| n == 1), "{calls:?}");
        assert_eq!(calls.keys().copied().collect::<BTreeSet<_>>(), runs);
    }
    // tail -f on B saw A's calls as they happened.
    let a_runs: BTreeSet<i64> = rows
        .iter()
        .filter(|r| r.get::<_, String>(1).contains("mount A"))
        .map(|r| r.get(0))
        .collect();
    // Every call returned long ago: about a second is the promise, five the bound.
    let mut heard = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !a_runs.is_subset(&heard) && Instant::now() < deadline {
        if let Ok(line) = tail.lines.recv_timeout(Duration::from_millis(100)) {
            let e: serde_json::Value = serde_json::from_str(&line).unwrap();
            if e["kind"] == "call" {
                heard.insert(e["run"].as_i64().unwrap());
            }
        }
    }
    assert!(
        a_runs.is_subset(&heard),
        "tail -f on B missed A's runs {:?}",
        a_runs.difference(&heard).collect::<Vec<_>>()
    );
    // Then only A changes the issue: B's kernel caches (the description, the feed's size)
    // hear of it from A alone.
    let count = comment_count(&b.read("tracker/issues/42/description"));
    let feed_len = b.read(".wip/events").len();
    a.ok("echo 'after the crowd' > tracker/issues/42/ops/comment/call");
    // The promise is about a second (LISTEN/NOTIFY, then the kernel's copy dropped):
    // the figure is printed, and five seconds is the most a loaded machine may take.
    let called = Instant::now();
    wait_until(
        "B's cached description shows A's call",
        Duration::from_secs(5),
        || comment_count(&b.read("tracker/issues/42/description")) == count + 1,
    );
    println!(
        "B's cached description showed A's call {:?} after it returned",
        called.elapsed()
    );
    assert!(b.read(".wip/events").len() > feed_len);
    let last: i64 = pg
        .query_one("SELECT max(seq) FROM calls WHERE op = 'comment'", &[])
        .unwrap()
        .get(0);
    let deadline = called + Duration::from_secs(5);
    while !heard.contains(&last) && Instant::now() < deadline {
        if let Ok(line) = tail.lines.recv_timeout(Duration::from_millis(100)) {
            let e: serde_json::Value = serde_json::from_str(&line).unwrap();
            if e["kind"] == "call" {
                heard.insert(e["run"].as_i64().unwrap());
            }
        }
    }
    assert!(
        heard.contains(&last),
        "tail -f on B never showed A's run {last}"
    );
    // The runs are one set: B lists a run A made, with A's result.
    let a_run = a_runs.iter().next().unwrap();
    let status = b.read(&format!(
        "tracker/issues/42/ops/comment/runs/{a_run}/status"
    ));
    assert!(status.starts_with("ok"), "{status}");
}

/// The comment text an agent wrote, from the journal's args (JSON or the plain text).
fn comment_text(args: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(v) => v["body"].as_str().unwrap_or(args).trim_end().to_string(),
        Err(_) => args.trim_end().to_string(),
    }
}

#[test]
fn two_merges_of_one_pull_request_from_two_mounts_one_wins_one_hears_eperm() {
    let db = TestDb::create("merge");
    let tracker = TestDb::create("merge_tracker");
    let shared = tempfile::tempdir().unwrap();
    let (a, b) = two_mounts(&db, &tracker);
    // A barrier: each agent opens `call` first (its open checks the guard, which both
    // pass), says it is ready, and writes the moment both are: the two merges meet in
    // the host's own check, not in the guard read before it.
    let go = shared.path().join("go");
    let ready = shared.path().join("ready");
    let script = format!(
        "exec 3> tracker/pulls/51/ops/merge/call || exit 9; touch {ready}.$$; \
         while [ ! -e {go} ]; do :; done; \
         echo '{{\"method\":\"merge\"}}' >&3",
        go = go.display(),
        ready = ready.display()
    );
    for m in [&a, &b] {
        for file in [".wip/config", "tracker/description"] {
            let text = m.read(file);
            assert!(
                text.contains("postgresql://root:<redacted>@/"),
                "{file}: {text}"
            );
            assert!(!text.contains("s3cret"), "{file}: {text}");
        }
    }
    // Both guards read "allowed" before the race.
    for m in [&a, &b] {
        assert!(m
            .read("tracker/pulls/51/ops/merge/guard")
            .starts_with("allowed"));
    }
    let racers = std::thread::spawn({
        let scripts = vec![
            (a.mount.clone(), script.clone()),
            (b.mount.clone(), script.clone()),
        ];
        move || agents(scripts)
    });
    wait_until(
        "both agents ready at the barrier",
        Duration::from_secs(30),
        || {
            std::fs::read_dir(shared.path())
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter(|e| e.file_name().to_string_lossy().starts_with("ready."))
                        .count()
                })
                .unwrap_or(0)
                == 2
        },
    );
    std::fs::write(&go, "").unwrap();
    let outs = racers.join().unwrap();
    let won: Vec<bool> = outs.iter().map(|o| o.status.success()).collect();
    assert_eq!(
        won.iter().filter(|w| **w).count(),
        1,
        "exactly one merge succeeds: {:?}",
        outs.iter()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .collect::<Vec<_>>()
    );
    let (winner, loser, lost) = if won[0] {
        (&a, &b, &outs[1])
    } else {
        (&b, &a, &outs[0])
    };
    let err = String::from_utf8_lossy(&lost.stderr);
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(winner
        .result("tracker/pulls/51/ops/merge")
        .contains("merged PR #51"));
    // The loser's words name the state it found (refused at open or at the write).
    let guard = loser.read("tracker/pulls/51/ops/merge/guard");
    assert!(
        guard.starts_with("blocked") && guard.contains("was merged"),
        "{guard}"
    );
    // One merge in the journal, the refusal beside it when it got that far.
    let mut pg = db.client();
    let ok: i64 = pg
        .query_one(
            "SELECT count(*) FROM calls WHERE op = 'merge' AND status = 'ok'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ok, 1);
    // One merge in the tracker database too.
    let state: String = tracker
        .client()
        .query_one("SELECT state FROM items WHERE number = 51", &[])
        .unwrap()
        .get(0);
    assert_eq!(state, "merged");
    for m in [&a, &b] {
        wait_until(
            "both mounts show the pull request merged",
            Duration::from_secs(20),
            || m.read("tracker/pulls/51/description").contains("merged"),
        );
    }
}

#[test]
fn a_mount_on_an_unreachable_database_refuses_to_start_with_words() {
    let state = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    // A port nothing listens on, on this machine.
    let out = common::wip_command()
        .arg("mount")
        .arg(mnt.path())
        .arg("-f")
        .arg("--state")
        .arg(state.path())
        .arg("--state-url")
        .arg("postgresql://wip:secret@127.0.0.1:1/wip?connect_timeout=2")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "cannot reach the shared state database postgresql://wip:<redacted>@127.0.0.1:1/wip"
        ),
        "{err}"
    );
    assert!(!err.contains("secret"), "{err}");
    assert!(!common::is_mounted(mnt.path()));
}

/// Debian's self-signed certificate, which its PostgreSQL serves with `ssl = on`
/// (`.ci/run` makes sure).
const SNAKEOIL: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

/// A database owned by a login role with a password, for TCP (Debian's pg_hba.conf asks
/// for a password on 127.0.0.1), dropped with its role afterwards.
struct PasswordDb {
    name: String,
    password: String,
}

impl PasswordDb {
    fn create(tag: &str) -> PasswordDb {
        let name = format!("wip_it_{tag}_{}", std::process::id());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let password = format!("pw{nanos}x{}", std::process::id());
        let mut a = admin();
        a.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        a.batch_execute(&format!("DROP ROLE IF EXISTS {name}"))
            .unwrap();
        a.batch_execute(&format!("CREATE ROLE {name} LOGIN PASSWORD '{password}'"))
            .unwrap();
        a.batch_execute(&format!("CREATE DATABASE {name} OWNER {name}"))
            .unwrap();
        PasswordDb { name, password }
    }
}

impl Drop for PasswordDb {
    fn drop(&mut self) {
        let mut a = admin();
        let _ = a.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
        let _ = a.batch_execute(&format!("DROP ROLE IF EXISTS {}", self.name));
    }
}

/// The DNS name the server's certificate carries (the snakeoil's: the host name of the
/// machine it was made on), read by openssl.
fn certificate_name() -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in", SNAKEOIL])
        .output()
        .expect("run openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(|c: char| c == ',' || c.is_whitespace())
        .find_map(|w| w.strip_prefix("DNS:"))
        .unwrap_or_else(|| panic!("no DNS name in {SNAKEOIL}: {text}"))
        .to_string()
}

#[test]
fn a_mount_on_a_verified_tls_connection_records_its_calls_there() {
    let db = PasswordDb::create("tls");
    // The certificate's name for verification, the loopback address to dial.
    let url = format!(
        "postgresql://{0}:{1}@{2}:5432/{0}?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={SNAKEOIL}",
        db.name,
        db.password,
        certificate_name()
    );
    // The tracker in the same database, over the same verified connection.
    let m = Mount::start(Some(&manifest(&url, Some(&url))));
    // An agent comments, then looks for its run in the runtime's files.
    let out = m.ok(
        "echo 'sent over TLS' > tracker/issues/42/ops/comment/call && \
         cat tracker/issues/42/ops/comment/result && \
         grep '\"op\":\"comment\"' .wip/events && \
         grep '/tracker/issues/42 comment' .wip/log && \
         grep '^url' .wip/config",
    );
    assert!(out.starts_with("added comment"), "{out}");
    let events: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let run = events
        .iter()
        .find(|e| e["kind"] == "call")
        .and_then(|e| e["run"].as_i64())
        .unwrap_or_else(|| panic!("no call event in .wip/events: {out}"));
    assert_eq!(
        m.read(&format!("tracker/issues/42/ops/comment/runs/{run}/status")),
        "ok\n"
    );
    assert!(
        out.contains(&format!("#{run} ")),
        ".wip/log lists run {run}: {out}"
    );
    // .wip/config shows the URL, its password redacted.
    assert!(out.contains("sslmode=verify-full"), "{out}");
    assert!(!out.contains(&db.password), "{out}");
    assert!(out.contains(&format!("{}:<redacted>@", db.name)), "{out}");
    // The run and the comment are in the database, and every connection the daemon holds
    // (the state's and the tracker's) is encrypted.
    let rows: Vec<(String, bool)> = admin()
        .query(
            "SELECT a.usename::text, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.datname = $1",
            &[&db.name],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|(_, ssl)| *ssl), "{rows:?}");
    let pg = postgres::Client::connect(
        &format!("postgresql:///{}?host={SOCKET}", db.name),
        postgres::NoTls,
    );
    let mut pg = pg.unwrap();
    let status: String = pg
        .query_one("SELECT status FROM calls WHERE id = $1", &[&run])
        .unwrap()
        .get(0);
    assert_eq!(status, "ok");
    let comments: i64 = pg
        .query_one(
            "SELECT count(*) FROM comments WHERE number = 42 AND body = 'sent over TLS'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(comments, 1);
}

/// A network namespace joined to this one by a veth pair (10.231.N.1 here, .2 there),
/// deleted when dropped.
struct NetNs {
    name: String,
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
        let pid = std::process::id();
        let name = format!("wipns{pid}");
        let (here, there) = (format!("wiph{pid}"), format!("wipn{pid}"));
        let net = format!("10.231.{}", pid % 250);
        let host_ip = format!("{net}.1");
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = NetNs {
            name: name.clone(),
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
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // The veth pair goes with the namespace.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// PostgreSQL over TCP on `addr`: each connection is relayed to the server's unix socket
/// (the server keeps its own configuration; its peer authentication sees this process).
/// Returns the port and a count of the connections relayed.
fn relay_to_postgres(addr: &str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::os::unix::net::UnixStream;
    let listener = std::net::TcpListener::bind((addr, 0)).expect("listen on the veth address");
    let port = listener.local_addr().unwrap().port();
    let relayed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&relayed);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(tcp) = conn else { continue };
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Ok(unix) = UnixStream::connect(format!("{SOCKET}/.s.PGSQL.5432")) else {
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
    (port, relayed)
}

/// A daemon started inside a network namespace (its mount is visible here: only the
/// network is its own), unmounted and gone when dropped.
struct NsMount {
    mount: std::path::PathBuf,
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
            .env("WIP_LOG", "warn,fuser::session=error")
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
        // As tests/common does: a test that overruns gets the mount lazily unmounted.
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

impl Side for NsMount {
    fn dir(&self) -> &Path {
        &self.mount
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

#[test]
fn a_mount_in_its_own_network_namespace_shares_the_world_over_tcp() {
    let db = TestDb::create("netns");
    let tracker = TestDb::create("netns_tracker");
    let ns = NetNs::create();
    let (port, relayed) = relay_to_postgres(&ns.host_ip);
    let a = Mount::start(Some(&manifest(&tracker.url, Some(&db.url))));
    // B dials the host's end of the veth pair from inside its namespace, for the state
    // and for the tracker: it has no other way to either.
    let tcp = |name: &str| format!("postgresql://root@{}:{port}/{name}", ns.host_ip);
    let b = NsMount::start(&ns, &manifest(&tcp(&tracker.name), None), &tcp(&db.name));
    assert!(
        relayed.load(std::sync::atomic::Ordering::Relaxed) >= 2,
        "B reached both databases over TCP"
    );
    agents_on_both(&db, &tracker, &a, &b);
}

#[test]
fn a_run_held_on_one_mount_is_listed_and_approved_on_the_other() {
    let db = TestDb::create("approve");
    let tracker = TestDb::create("approve_tracker");
    let policy = "\n[[policy]]\nmatch = \"tracker/issues/*/ops/assign\"\naction = \"approve\"\nself_approve = true\n";
    let (a, b) = two_mounts_with(&db, &tracker, policy);
    let out = a.sh("echo '{\"user\":\"sam\"}' > tracker/issues/42/ops/assign/call");
    assert!(!out.status.success(), "held, not run");
    // The journal's id names the run to `wip approve`; its path has its number (`runs/N`).
    let row = db
        .client()
        .query_one(
            "SELECT id, seq FROM calls WHERE op = 'assign' AND status = 'pending'",
            &[],
        )
        .unwrap();
    let (id, seq): (i64, i64) = (row.get(0), row.get(1));
    wait_until("B lists A's pending run", Duration::from_secs(20), || {
        b.read(".wip/pending").contains(&format!("/runs/{seq}"))
    });
    let decided = b.ok(&format!("$WIP approve {id} --state {}", b.state.display()));
    // A person reads the run by its path and per-op number only.
    assert!(
        decided.starts_with("approved ")
            && decided.contains(&format!("tracker/issues/42/ops/assign/runs/{seq}"))
            && !decided.contains(&format!("run {id}")),
        "{decided}"
    );
    // The call ran (on B, asked to decide) and A sees it: the run, the issue.
    wait_until(
        "A sees the approved run finished",
        Duration::from_secs(20),
        || a.read(&format!("tracker/issues/42/ops/assign/runs/{seq}/status")) == "ok\n",
    );
    wait_until(
        "A's cached issue shows the assignee",
        Duration::from_secs(20),
        || a.read("tracker/issues/42/description").contains("sam"),
    );
    assert!(!a.read(".wip/pending").contains(&format!("/runs/{seq}")));
}

/// `result` shows this mount's calls only. After a kill -9 and a restart of A, the session
/// that called on A before reads that call (not B's later one), a session of A without a
/// call of its own reads A's latest, and an op only B called shows nothing on A.
#[test]
fn result_after_a_restart_shows_this_mounts_calls_never_another_mounts() {
    let db = TestDb::create("result");
    let tracker = TestDb::create("result_tracker");
    let (mut a, b) = two_mounts(&db, &tracker);
    let op = "tracker/issues/42/ops/comment";
    a.ok(&format!("echo 'from A' > {op}/call"));
    let mine = a.result(op);
    assert!(mine.contains("comment"), "{mine}");
    a.kill_daemon();
    let out = common::wip_command()
        .arg("umount")
        .arg(&a.mount)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    a.remount();
    b.ok(&format!("echo 'from B' > {op}/call"));
    b.ok("echo 'only B' > tracker/issues/43/ops/comment/call");
    let theirs = b.result(op);
    assert_ne!(theirs, mine);
    assert_eq!(a.result(op), mine, "this session's own call on A");
    assert_eq!(
        a.ok(&format!("setsid -w cat {op}/result")),
        mine,
        "a session of A without a call: A's latest"
    );
    assert_eq!(
        a.ok("setsid -w cat tracker/issues/43/ops/comment/result"),
        "",
        "no call of this op on A"
    );
}
