//! `wip serve-nfs`: the default world over NFSv3, driven by NFS clients: the Linux
//! kernel's own, in a small guest under qemu (tests/nfs/guest.rs; the machine running
//! the tests may have no NFS client in its kernel), with busybox's shell and tools;
//! libnfs's `nfs-ls` and `nfs-cat` (real clients nobody here wrote) for walks and reads;
//! and tests/nfs/client.py, which sends single RPCs where a test needs to see them (the
//! UNSTABLE answer, cookies, handles).

mod common;
#[path = "nfs/guest.rs"]
mod guest;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{sh_in, wip_command};

/// A `wip serve-nfs` of the default world over `files/` of a temp dir, killed on drop.
struct Served {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    /// What the server printed on stdout so far.
    said: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Served {
    fn start() -> Served {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("files")).unwrap();
        std::fs::write(dir.path().join("files/notes.txt"), "hello over nfs\n").unwrap();
        Self::start_in(dir)
    }

    fn start_in(dir: tempfile::TempDir) -> Served {
        Self::start_on(dir, "127.0.0.1:0")
    }

    /// On `listen` (a restart takes the port its clients mounted).
    fn start_on(dir: tempfile::TempDir, listen: &str) -> Served {
        Self::start_env(dir, listen, &[])
    }

    fn start_env(dir: tempfile::TempDir, listen: &str, env: &[(&str, &str)]) -> Served {
        let world = dir.path().join("files");
        Self::start_world(dir, &world, listen, env)
    }

    /// The world of `manifest` (its files host's root is `files/` of the temp dir).
    fn start_manifest(manifest: &str) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("files");
        std::fs::create_dir_all(&files).unwrap();
        let text = format!(
            "{manifest}\n[[host]]\nkind = \"tracker\"\npath = \"tracker\"\nseed = \"demo\"\n\
             [[host]]\nkind = \"files\"\npath = \"files\"\nroot = {:?}\n",
            files.display().to_string()
        );
        let world = dir.path().join("world.toml");
        std::fs::write(&world, text).unwrap();
        Self::start_world(dir, &world, "127.0.0.1:0", &[])
    }

    fn start_world(
        dir: tempfile::TempDir,
        world: &Path,
        listen: &str,
        env: &[(&str, &str)],
    ) -> Served {
        let mut child = wip_command()
            .envs(env.iter().copied())
            .args(["serve-nfs", "--listen", listen])
            .arg(world)
            .arg("--state")
            .arg(dir.path().join("state"))
            .args(["--mount-point", "/mnt/w"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("wip serve-nfs");
        let stdout = child.stdout.take().unwrap();
        let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&said);
        let port = first_line(stdout, Duration::from_secs(60), move |line| {
            kept.lock().unwrap().push(line.to_string());
            line.strip_prefix("serving over NFSv3 on 127.0.0.1:")
                .and_then(|p| p.parse::<u16>().ok())
        });
        let port = match port {
            Some(p) => p,
            None => {
                let _ = child.kill();
                panic!("wip serve-nfs did not say where it listens within 60 s");
            }
        };
        Served {
            child,
            port,
            dir,
            said,
        }
    }

    /// The server's first lines (up to its mount lines), once it printed them.
    fn first_lines(&self) -> String {
        common::wait_until("the server's mount lines", Duration::from_secs(30), || {
            self.said
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.starts_with("mount (macOS)"))
        });
        self.said.lock().unwrap().join("\n")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn url(&self, path: &str) -> String {
        format!(
            "nfs://127.0.0.1/{}?version=3&nfsport={p}&mountport={p}",
            path.trim_start_matches('/'),
            p = self.port
        )
    }

    /// tests/nfs/client.py with these arguments, bounded: (exit ok, stdout).
    fn client(&self, args: &[&str]) -> (bool, String) {
        self.client_via("", args)
    }

    /// tests/nfs/client.py run by another local user: `uid`, its own gid, no groups.
    fn client_as(&self, uid: u32, args: &[&str]) -> (bool, String) {
        self.client_via(
            // The system's python: a root user's own (pyenv) is not another user's.
            &format!(
                "cd / && PATH=/usr/bin:/bin setpriv --reuid {uid} --regid {uid} --clear-groups"
            ),
            args,
        )
    }

    fn client_via(&self, prefix: &str, args: &[&str]) -> (bool, String) {
        let script = format!(
            "{prefix} timeout 120 python3 {} {} {}",
            client_py().display(),
            self.port,
            args.iter()
                .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let out = sh_in(self.dir.path(), &script, Duration::from_secs(150));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    fn cat(&self, path: &str) -> String {
        let (ok, out) = self.client(&["cat", path]);
        assert!(ok, "cat {path}: {out}");
        out
    }

    /// Calls in the journal.
    fn runs(&self, op: &str) -> i64 {
        let db = rusqlite::Connection::open(self.state().join("journal.db")).unwrap();
        db.query_row("SELECT count(*) FROM calls WHERE op = ?1", [op], |r| {
            r.get(0)
        })
        .unwrap()
    }

    fn all_runs(&self) -> i64 {
        let db = rusqlite::Connection::open(self.state().join("journal.db")).unwrap();
        db.query_row("SELECT count(*) FROM calls", [], |r| r.get(0))
            .unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first line `pick` takes from `out` (read on a thread of its own, which drains the
/// rest so the child never blocks on a full pipe), within `limit`.
fn first_line<T: Send + 'static>(
    out: impl std::io::Read + Send + 'static,
    limit: Duration,
    mut pick: impl FnMut(&str) -> Option<T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(v) = pick(&line) {
                let _ = tx.send(v);
            }
        }
    });
    rx.recv_timeout(limit).ok()
}

fn client_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nfs/client.py")
}

fn have_libnfs() -> bool {
    Command::new("nfs-ls")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

#[test]
fn the_readme_tour_over_nfs_gives_the_same_outcomes_as_through_fuse() {
    let s = Served::start();
    // Read a guard.
    let guard = s.cat("tracker/issues/2/ops/comment/guard");
    assert!(guard.starts_with("allowed"), "{guard}");
    // JSON, plain text and multi-line text in two WRITEs: one call each, at COMMIT.
    let (ok, out) = s.client(&[
        "write",
        "tracker/issues/2/ops/comment/call",
        r#"{"body":"as json"}"#,
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("WRITE NFS3_OK 0"), "answered UNSTABLE: {out}");
    assert!(out.contains("COMMIT NFS3_OK"), "{out}");
    assert!(s
        .cat("tracker/issues/2/ops/comment/result")
        .contains("as json"));
    let (ok, out) = s.client(&[
        "write",
        "tracker/issues/2/ops/comment/call",
        "fixed in 1.2\\n",
        "second line\\n",
    ]);
    assert!(ok, "{out}");
    let result = s.cat("tracker/issues/2/ops/comment/result");
    assert!(
        result.contains("fixed in 1.2 second line"),
        "one call with both lines: {result}"
    );
    assert!(
        result.contains("/mnt/w/tracker/issues/2/comments/"),
        "printed under the mount point: {result}"
    );
    assert_eq!(s.runs("comment"), 2, "exactly one call per document");
    // A blocked call: ACCESS denies writing, and the open (SETATTR) is EPERM; the
    // words are in `result`.
    let (_, out) = s.client(&["access", "tracker/issues/1/ops/close/call"]);
    assert!(out.contains("read") && !out.contains("modify"), "{out}");
    let (ok, out) = s.client(&["write", "tracker/issues/1/ops/close/call", "\\n"]);
    assert!(!ok && out.contains("SETATTR NFS3ERR_PERM"), "{out}");
    let words = s.cat("tracker/issues/1/ops/close/result");
    assert!(words.contains("already closed"), "{words}");
    // Bad arguments: the COMMIT carries EINVAL, which close(2) reports.
    let (ok, out) = s.client(&["write", "tracker/issues/2/ops/comment/call", "{\"nope\":1}"]);
    assert!(!ok && out.contains("NFS3ERR_INVAL"), "{out}");
    // A body written as `cat > body` is one edit_body call.
    let (ok, out) = s.client(&[
        "write",
        "tracker/issues/2/body",
        "New body\\n",
        "over nfs\\n",
    ]);
    assert!(ok, "{out}");
    assert_eq!(s.cat("tracker/issues/2/body"), "New body\nover nfs\n");
    assert_eq!(s.runs("edit_body"), 1);
    // The files host's content.
    assert_eq!(s.cat("files/notes.txt"), "hello over nfs\n");
}

#[test]
fn reads_never_act_over_nfs() {
    if !have_libnfs() {
        panic!("nfs-ls (Debian's libnfs-utils) is needed: .ci/run installs it");
    }
    let s = Served::start();
    // A recursive listing of everything, then of every op folder of an issue by path,
    // then a read of every guard, result, schema and description there.
    let script = format!(
        "timeout 120 nfs-ls -R '{}' > walk.txt && \
         timeout 60 nfs-ls -R '{}' > ops.txt && \
         for op in $(timeout 30 nfs-ls '{}' | awk '{{print $NF}}'); do \
           for f in guard result schema description; do \
             timeout 30 nfs-cat \"nfs://127.0.0.1/tracker/issues/2/.ops/$op/$f?version=3&nfsport={p}&mountport={p}\" > /dev/null || true; \
           done; \
         done; wc -l < walk.txt",
        s.url("/"),
        s.url("/tracker/issues/2/.ops"),
        s.url("/tracker/issues/2/.ops"),
        p = s.port
    );
    let out = sh_in(s.dir.path(), &script, Duration::from_secs(300));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let walked: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(walked > 100, "the walk saw the tree: {walked} lines");
    let ops = std::fs::read_to_string(s.dir.path().join("ops.txt")).unwrap();
    assert!(ops.contains("comment") && ops.contains("guard"), "{ops}");
    assert_eq!(s.all_runs(), 0, "a walk and reads ran no call");
}

#[test]
fn eight_clients_at_once_make_exactly_their_calls_and_each_reads_its_own_result() {
    let s = Served::start();
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8; do timeout 240 python3 {} {} comments tracker/issues/3 5 > out.$i 2>&1 & done; wait; cat out.*",
        client_py().display(),
        s.port
    );
    let out = sh_in(s.dir.path(), &script, Duration::from_secs(300));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("ok 5").count(), 8, "{text}");
    assert_eq!(s.runs("comment"), 40, "exactly their calls");
}

#[test]
fn a_killed_server_fails_its_client_and_a_restart_knows_its_handles() {
    let mut s = Served::start();
    let (ok, before) = s.client(&["fh", "tracker/issues/2/ops/comment/guard"]);
    assert!(ok, "{before}");
    // SIGKILL: the client's next request fails at once (the connection is gone), no hang.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGKILL) };
    let _ = s.child.wait();
    let started = std::time::Instant::now();
    let (ok, out) = s.client(&["cat", "tracker/issues/2/ops/comment/guard"]);
    assert!(!ok, "{out}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // Restarted on the same state: the client's handle is good at once (no lookup
    // first), and the same path gives the same handle.
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    let again = Served::start_in(dir);
    let (_, kept) = again.client(&["getattr-fh", before.trim()]);
    assert!(
        kept.contains("NFS3_OK"),
        "the old handle names the node: {kept}"
    );
    let (ok, after) = again.client(&["fh", "tracker/issues/2/ops/comment/guard"]);
    assert!(ok, "{after}");
    assert_eq!(before.trim(), after.trim());
    // A handle no run handed out is stale.
    let (_, stale) = again.client(&["getattr-fh", "0102030405060708"]);
    assert!(stale.contains("NFS3ERR_STALE"), "{stale}");
}

/// `path` listed by the client, which must have read it in more than three pages: what it
/// printed, and the names.
fn paged(s: &Served, path: &str) -> (String, Vec<String>) {
    let (ok, out) = s.client(&["ls", path]);
    assert!(ok, "{out}");
    let pages: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("pages "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(pages > 3, "the listing came in pages: {out}");
    let names = out
        .lines()
        .filter(|l| !l.starts_with("pages "))
        .map(str::to_string)
        .collect();
    (out, names)
}

#[test]
fn a_listing_pages_by_cookie_and_loses_no_name() {
    let s = Served::start();
    let (out, names) = paged(&s, "tracker/issues");
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "no name twice: {out}");
    for n in ["1", "2", "3", "description", "ref", "ops"] {
        assert!(names.iter().any(|x| x == n), "{n} in {out}");
    }
}

#[test]
fn mount_nfs_mounts_or_says_why_and_leaves_no_server_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let out = wip_command()
        .current_dir(&files)
        .args(["mount", "--nfs"])
        .arg(&mnt)
        .arg("--state")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&out.stderr).into_owned();
    let kernel_nfs = std::fs::read_to_string("/proc/filesystems")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().last() == Some("nfs"));
    let mnt_arg = std::fs::canonicalize(&mnt).unwrap();
    if out.status.success() {
        // A kernel with an NFS client: the world is there, and `wip umount` ends both.
        assert!(kernel_nfs);
        let readme = std::fs::read_to_string(mnt.join("README.md")).unwrap_or_default();
        let _ = wip_command().arg("umount").arg(&mnt).status();
        assert!(readme.contains("ops"), "{readme}");
    } else {
        assert!(!kernel_nfs, "{words}");
        assert!(words.contains("no NFS client"), "{words}");
    }
    // No `wip serve-nfs` for this mount point is left running.
    std::thread::sleep(Duration::from_millis(300));
    let left = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| {
            let c = String::from_utf8_lossy(c);
            c.contains("serve-nfs") && c.contains(&*mnt_arg.to_string_lossy())
        })
        .count();
    assert_eq!(left, 0, "a server was left behind");
}

#[test]
fn listening_beyond_loopback_warns_that_auth_sys_trusts_the_client() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    let mut child = wip_command()
        .arg("serve-nfs")
        .arg(dir.path().join("files"))
        .arg("--state")
        .arg(dir.path().join("state"))
        .args(["--listen", "0.0.0.0:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let warned = first_line(stderr, Duration::from_secs(60), |line| {
        line.contains("beyond loopback").then(|| line.to_string())
    });
    let _ = child.kill();
    let _ = child.wait();
    let line = warned.expect("a warning about listening beyond loopback");
    assert!(line.contains("uid"), "{line}");
    // A bad address is refused with words, before anything starts.
    let out = wip_command()
        .args(["serve-nfs", "--listen", "localhost"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an address and port"));
}

/// The journal's args of every run of `op`, oldest first.
fn args_of(s: &Served, op: &str) -> Vec<String> {
    let db = rusqlite::Connection::open(s.state().join("journal.db")).unwrap();
    let mut st = db
        .prepare("SELECT args FROM calls WHERE op = ?1 ORDER BY id")
        .unwrap();
    st.query_map([op], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn the_kernels_nfs_client_walks_the_readme_tour() {
    let s = Served::start();
    let script = r#"
c=tracker/issues/2/ops/comment
echo "@@ guard $(head -n 1 $c/guard)"
echo '{"body":"as json"}' > $c/call; echo "@@ json $?"
echo 'fixed in 1.2' > $c/call; echo "@@ text $?"
{ echo 'first line'; echo 'second line'; } > $c/call; echo "@@ lines $?"
printf 'one\ntwo\n' > $c/call; echo "@@ printf $?"
echo "@@ result $(head -n 1 $c/result)"
echo > tracker/issues/1/ops/close/call 2> /tmp/err; echo "@@ close $? $(cat /tmp/err)"
echo "@@ closeguard $(tr '\n' ' ' < tracker/issues/1/ops/close/guard)"
echo '{"nope":1}' > /tmp/bad
cp /tmp/bad $c/call 2> /tmp/err; echo "@@ badcp $? $(cat /tmp/err)"
echo '{"nope":1}' > $c/call 2> /tmp/err; echo "@@ badsh $? $(cat /tmp/err)"
echo "@@ badresult $(head -n 1 $c/result)"
printf 'New body\nover nfs\n' > tracker/issues/2/body; echo "@@ body $?"
echo "@@ bodynow $(tr '\n' '|' < tracker/issues/2/body)"
echo "@@ walk $(find tracker/issues | wc -l) $(ls -lR tracker/issues 2> /dev/null | wc -l) $(grep -r zzzz tracker/issues/2 tracker/issues/2/.ops 2> /dev/null | wc -l)"
"#;
    let console = guest::Guest::boot(s.port, script).finish(Duration::from_secs(240));
    let said = |key: &str| guest::report(&console, key);
    assert!(console.contains("@@ mounted"), "{console}");
    assert_eq!(said("guard"), "allowed");
    for k in ["json", "text", "lines", "printf", "body"] {
        assert_eq!(said(k), "0", "{k}: {console}");
    }
    let args = args_of(&s, "comment");
    assert_eq!(
        args[..4],
        [
            r#"{"body":"as json"}"#.to_string(),
            r#"{"body":"fixed in 1.2"}"#.to_string(),
            r#"{"body":"first line\nsecond line"}"#.to_string(),
            r#"{"body":"one\ntwo"}"#.to_string(),
        ],
        "one call per command, whole: {console}"
    );
    assert!(said("result").starts_with("added comment"), "{console}");
    // Refused at open: the kernel asked ACCESS, which denies writing; `guard` says why.
    assert!(said("close").starts_with('1'), "{console}");
    assert!(said("closeguard").contains("already closed"), "{console}");
    assert!(
        said("badcp").contains("Invalid argument"),
        "close(2) reports the COMMIT's status: {console}"
    );
    assert!(said("badresult").starts_with("error:"), "{console}");
    assert_eq!(said("bodynow"), "New body|over nfs|");
    assert_eq!(s.runs("edit_body"), 1);
    // The shell does not hear a failed close (a call that ran at COMMIT): the words are
    // in `result`, and tools that check close(2) (cp, dd, Python) get the errno.
    assert!(said("badsh").starts_with('0'), "{console}");
    // find, ls -lR and grep -r through the mount (the last steps; grep also through an
    // entry's .ops, reading every guard and result) ran no call: the six comment runs
    // and the body's edit are all there are.
    let walked: Vec<usize> = said("walk")
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(walked[0] > 300 && walked[1] > 300, "{console}");
    assert_eq!(s.all_runs(), 7, "{console}");
}

#[test]
fn eight_shell_agents_through_the_kernels_nfs_mount_make_exactly_their_calls() {
    let s = Served::start();
    let script = r#"
for i in 1 2 3 4 5 6 7 8; do
  ( for j in 1 2 3 4 5; do
      echo "agent $i call $j" > tracker/issues/3/ops/comment/call || echo "@@ failed $i $j"
    done ) &
done
wait
echo "@@ agents done"
"#;
    let console = guest::Guest::boot(s.port, script).finish(Duration::from_secs(300));
    assert!(console.contains("@@ agents done"), "{console}");
    assert!(!console.contains("@@ failed"), "{console}");
    let mut args = args_of(&s, "comment");
    assert_eq!(args.len(), 40, "exactly their calls: {args:?}");
    args.sort();
    args.dedup();
    assert_eq!(args.len(), 40, "each call its own, whole: {args:?}");
    for i in 1..=8 {
        for j in 1..=5 {
            let want = format!(r#"{{"body":"agent {i} call {j}"}}"#);
            assert!(args.contains(&want), "{want} in {args:?}");
        }
    }
}

#[test]
fn a_killed_server_gives_the_kernel_client_eio_and_a_restart_on_its_port_resumes() {
    let mut s = Served::start();
    let port = s.port;
    let script = r#"
c=tracker/issues/2/ops/comment
echo "@@ before $(head -n 1 $c/guard)"
echo "@@ kill now"
sleep 2
t0=$(date +%s)
head -n 1 $c/guard > /tmp/out 2> /tmp/err; rc=$?
t1=$(date +%s)
echo "@@ dead $rc $((t1 - t0)) $(cat /tmp/err)"
echo "@@ restart now"
i=0
while [ $i -lt 90 ]; do
  head -n 1 $c/guard > /tmp/out 2> /dev/null && break
  sleep 1; i=$((i + 1))
done
echo "@@ back $i $(cat /tmp/out)"
echo 'after the restart' > $c/call; echo "@@ call $?"
"#;
    let mut g = guest::Guest::boot(port, script);
    assert_eq!(g.wait_for("before", Duration::from_secs(120)), "allowed");
    g.wait_for("kill now", Duration::from_secs(30));
    unsafe { libc::kill(s.child.id() as i32, libc::SIGKILL) };
    let _ = s.child.wait();
    let dead = g.wait_for("dead", Duration::from_secs(120));
    println!("with the server killed: {dead}");
    let mut f = dead.splitn(3, ' ');
    let (rc, secs) = (f.next().unwrap(), f.next().unwrap());
    assert_ne!(rc, "0", "a read with the server gone fails: {dead}");
    assert!(
        dead.contains("Input/output error"),
        "EIO, as a soft mount says: {dead}"
    );
    let secs: u64 = secs.parse().unwrap();
    assert!(
        secs < 60,
        "within the soft mount's timeout (timeo=50,retrans=2), not a hang: {dead}"
    );
    g.wait_for("restart now", Duration::from_secs(30));
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    let again = Served::start_on(dir, &format!("127.0.0.1:{port}"));
    assert_eq!(again.port, port);
    let back = g.wait_for("back", Duration::from_secs(150));
    assert!(
        back.ends_with("allowed"),
        "the client's handles hold after the restart: {back}"
    );
    assert_eq!(g.wait_for("call", Duration::from_secs(60)), "0");
    let console = g.finish(Duration::from_secs(60));
    assert!(
        args_of(&again, "comment").contains(&r#"{"body":"after the restart"}"#.to_string()),
        "{console}"
    );
}

#[test]
fn wip_call_through_an_nfs_mount_prints_the_result_and_exits_with_the_calls_errno() {
    let s = Served::start();
    let script = r#"
wip call tracker/issues/2/ops/comment 'through wip call' > /tmp/out 2>&1; echo "@@ ok $? $(head -n 1 /tmp/out)"
wip call tracker/issues/2/ops/comment '{"nope":1}' > /tmp/out 2>&1; echo "@@ bad $? $(tr '\n' ' ' < /tmp/out)"
wip call tracker/issues/1/ops/close > /tmp/out 2>&1; echo "@@ refused $? $(tr '\n' ' ' < /tmp/out)"
wip status /mnt > /tmp/out 2>&1; echo "@@ status $? $(head -n 1 /tmp/out)"
wip runs /mnt > /tmp/out 2>&1; echo "@@ runs $? $(grep -c comment /tmp/out)"
"#;
    let console = guest::Guest::boot_with(s.port, script, true).finish(Duration::from_secs(300));
    let said = |key: &str| guest::report(&console, key);
    assert!(said("ok").starts_with("0 added comment"), "{console}");
    assert!(
        said("bad").starts_with("1 ") && said("bad").contains("invalid arguments"),
        "{console}"
    );
    assert!(said("refused").starts_with("1 "), "{console}");
    assert_eq!(args_of(&s, "comment").len(), 2, "{console}");
    // The other commands that read a mount's .wip/ work on an NFS mount too.
    assert!(said("status").starts_with("0 world"), "{console}");
    assert!(said("runs").starts_with("0 2"), "{console}");
}

#[test]
fn a_document_its_client_abandons_runs_once_for_nobody() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    let s = Served::start_env(dir, "127.0.0.1:0", &[("WIP_NFS_ABANDON_MS", "500")]);
    // Written, never committed: the client went away.
    let (ok, out) = s.client(&[
        "write-open",
        "tracker/issues/2/ops/comment/call",
        "left behind\n",
    ]);
    assert!(ok && out.contains("WRITE NFS3_OK"), "{out}");
    assert_eq!(s.runs("comment"), 0, "a document that may grow waits");
    std::thread::sleep(Duration::from_millis(800));
    // The next document anyone opens finds it abandoned: it runs, whole, once.
    let (ok, out) = s.client(&["write", "tracker/issues/3/ops/comment/call", "next\n"]);
    assert!(ok, "{out}");
    common::wait_until(
        "the abandoned document ran",
        Duration::from_secs(30),
        || s.runs("comment") == 2,
    );
    let args = args_of(&s, "comment");
    assert!(
        args.contains(&r#"{"body":"left behind"}"#.to_string()),
        "{args:?}"
    );
    assert!(args.contains(&r#"{"body":"next"}"#.to_string()), "{args:?}");
}

/// The uids of every run of `op`, oldest first.
fn uids_of(s: &Served, op: &str) -> Vec<u32> {
    let db = rusqlite::Connection::open(s.state().join("journal.db")).unwrap();
    let mut st = db
        .prepare("SELECT uid FROM calls WHERE op = ?1 ORDER BY id")
        .unwrap();
    st.query_map([op], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Another local user (uid 1001) reaches a root-owned server on loopback: claiming uid 0
/// (AUTH_SYS believes the uid a client says), sending no credential (AUTH_NONE), or as
/// itself. Each is refused at MNT, a file root alone may read stays unread, and no call
/// runs; root's own socket gets no further claiming another uid.
#[test]
fn another_local_user_is_refused_over_nfs_whatever_uid_it_claims() {
    let s = Served::start();
    let secret = s.dir.path().join("files/secret.txt");
    std::fs::write(&secret, "root's secret\n").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // The owner reads it (the world serves its files to the mount's owner).
    assert_eq!(s.cat("files/secret.txt"), "root's secret\n");
    for claim in [&["--uid", "0"][..], &["--auth", "none"], &[]] {
        let mut args = claim.to_vec();
        args.extend(["cat", "files/secret.txt"]);
        let (ok, out) = s.client_as(1001, &args);
        assert!(!ok && !out.contains("root's secret"), "{claim:?}: {out}");
        assert!(out.contains("MNT3ERR_ACCES"), "{claim:?}: {out}");
        let mut args = claim.to_vec();
        args.extend(["write", "tracker/issues/2/ops/comment/call", "PWNED\\n"]);
        let (ok, out) = s.client_as(1001, &args);
        assert!(!ok, "{claim:?}: {out}");
    }
    // Root's socket is the kernel's NFS client, carrying every local user's requests:
    // only the owner's uid is served on it.
    for claim in [&["--uid", "1001"][..], &["--auth", "none"]] {
        let mut args = claim.to_vec();
        args.extend(["cat", "files/secret.txt"]);
        let (ok, out) = s.client(&args);
        assert!(!ok && !out.contains("root's secret"), "{claim:?}: {out}");
        let mut args = claim.to_vec();
        args.extend(["write", "tracker/issues/2/ops/comment/call", "PWNED\\n"]);
        let (ok, out) = s.client(&args);
        assert!(!ok, "{claim:?}: {out}");
    }
    assert_eq!(s.all_runs(), 0, "nothing ran");
    // The owner is served as before.
    let (ok, out) = s.client(&["write", "tracker/issues/2/ops/comment/call", "mine\\n"]);
    assert!(ok, "{out}");
    assert_eq!(uids_of(&s, "comment"), [0]);
    let first = s.first_lines();
    assert!(
        first.contains("uid 0") && first.contains("allow_other"),
        "the first lines say who is served: {first}"
    );
}

/// `allow_other = true` in the manifest's `[world]` lets other users in, each as the uid
/// its socket belongs to: a claim of another uid on it is still refused.
#[test]
fn allow_other_lets_other_users_in_as_themselves_only() {
    let s = Served::start_manifest("[world]\nallow_other = true\n");
    let first = s.first_lines();
    assert!(first.contains("every user"), "{first}");
    let (ok, out) = s.client_as(
        1001,
        &["write", "tracker/issues/2/ops/comment/call", "from 1001\\n"],
    );
    assert!(ok, "{out}");
    let (ok, out) = s.client_as(
        1001,
        &[
            "--uid",
            "0",
            "write",
            "tracker/issues/2/ops/comment/call",
            "as root\\n",
        ],
    );
    assert!(!ok && out.contains("MNT3ERR_ACCES"), "{out}");
    // Root's socket (the kernel's client) carries other users' requests as they say.
    let (ok, out) = s.client(&[
        "--uid",
        "1002",
        "write",
        "tracker/issues/2/ops/comment/call",
        "from 1002\\n",
    ]);
    assert!(ok, "{out}");
    assert_eq!(uids_of(&s, "comment"), [1001, 1002]);
}

/// The Linux kernel's own NFS client (in the guest) is one root-owned socket carrying
/// every user's requests: another uid there reads nothing and calls nothing.
#[test]
fn the_kernels_nfs_client_serves_only_the_owners_uid() {
    let s = Served::start();
    let secret = s.dir.path().join("files/secret.txt");
    std::fs::write(&secret, "root's secret\n").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let script = r#"
mkdir -p /etc && echo 'other:x:1001:1001::/tmp:/bin/sh' >> /etc/passwd
echo "@@ root $(cat files/secret.txt)"
su other -c 'cat files/secret.txt' > /tmp/o 2>&1; echo "@@ other $? $(cat /tmp/o)"
su other -c 'echo PWNED > tracker/issues/2/ops/comment/call' > /tmp/o 2>&1; echo "@@ othercall $? $(cat /tmp/o)"
su other -c 'ls tracker/issues/2/ops/comment' > /tmp/o 2>&1; echo "@@ otherls $? $(tr '\n' ' ' < /tmp/o)"
echo 'mine' > tracker/issues/2/ops/comment/call; echo "@@ rootcall $?"
"#;
    let console = guest::Guest::boot(s.port, script).finish(Duration::from_secs(240));
    let said = |key: &str| guest::report(&console, key);
    assert_eq!(said("root"), "root's secret", "{console}");
    let other = said("other");
    assert!(
        !other.starts_with('0') && !other.contains("root's secret"),
        "{console}"
    );
    assert!(other.contains("Permission denied"), "{console}");
    assert!(!said("othercall").starts_with('0'), "{console}");
    assert!(!said("otherls").starts_with('0'), "{console}");
    assert_eq!(said("rootcall"), "0", "{console}");
    assert_eq!(uids_of(&s, "comment"), [0], "{console}");
}

/// Out-of-order WRITEs count against the budget wherever they land: 16,000 of 64 KiB at
/// offsets past 1 GiB into one `call` are refused (EFBIG: no such document fits
/// max_call_bytes) and the server's memory stays where it was; many documents each
/// holding a piece past a gap fill max_buffered_bytes (ENOSPC); what a client left when
/// it went away is freed.
#[test]
fn out_of_order_writes_are_held_within_the_budget_and_freed_when_the_client_goes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    // Documents wait 5 s for their client (as long again once it went away), so the
    // documents of one client's run below are all held at once.
    let s = Served::start_env(dir, "127.0.0.1:0", &[("WIP_NFS_ABANDON_MS", "5000")]);
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .unwrap()
    };
    assert_eq!(
        s.cat("tracker/issues/2/ops/comment/guard").lines().next(),
        Some("allowed")
    );
    let before = rss();
    let (ok, out) = s.client(&[
        "scatter",
        "tracker/issues/2/ops/comment/call",
        &(1u64 << 30).to_string(),
        "16000",
        "65536",
    ]);
    assert!(ok, "{out}");
    let during: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("rss_kb "))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        out.contains("WRITE NFS3ERR_FBIG 16000"),
        "every piece refused, none held: {out}"
    );
    assert!(
        during < before + 64 * 1024,
        "the server's memory stayed put: {before} kB before, {during} kB while the client was there"
    );
    let words = s.cat("tracker/issues/2/ops/comment/result");
    assert!(words.contains("max_call_bytes"), "{words}");
    assert!(s.runs("comment") <= 1, "one refusal at most, no call");
    // Within max_call_bytes, a piece past a gap holds the document up to its end: 24
    // documents of one 64 KiB piece at 4 MiB ask for ~98 MiB of the 64 MiB total.
    let started = std::time::Instant::now();
    let (ok, out) = s.client(&["scatter-many", "tracker/issues/3/ops/comment/call", "24"]);
    assert!(ok, "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "all held at once"
    );
    assert!(out.contains("NFS3ERR_NOSPC"), "{out}");
    let held: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("WRITE NFS3_OK "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!((10..=16).contains(&held), "about 15 held at once: {out}");
    // That client is gone: what it left is freed (its documents never arrived whole, so
    // none ran), and another client may hold as much again.
    std::thread::sleep(Duration::from_millis(6500));
    let (ok, again) = s.client(&["scatter-many", "tracker/issues/3/ops/comment/call", "24"]);
    assert!(ok, "{again}");
    let held_again: usize = again
        .lines()
        .find_map(|l| l.strip_prefix("WRITE NFS3_OK "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert_eq!(held_again, held, "the budget came back: {out} / {again}");
    assert_eq!(ran(&s, "comment"), 0, "no incomplete document ran");
    // Out of order but whole: one call, in offset order.
    let (ok, out) = s.client(&[
        "write-reversed",
        "tracker/issues/3/ops/comment/call",
        "first ",
        "second ",
        "third\\n",
    ]);
    assert!(ok, "{out}");
    assert_eq!(ran(&s, "comment"), 1);
    assert!(
        args_of(&s, "comment").contains(&r#"{"body":"first second third"}"#.to_string()),
        "{:?}",
        args_of(&s, "comment")
    );
}

/// Runs of `op` that ran and succeeded (refusals are runs too, with their errno).
fn ran(s: &Served, op: &str) -> i64 {
    let db = rusqlite::Connection::open(s.state().join("journal.db")).unwrap();
    db.query_row(
        "SELECT count(*) FROM calls WHERE op = ?1 AND errno = 0",
        [op],
        |r| r.get(0),
    )
    .unwrap()
}

/// The journal's runs of the files host, `(op, status, command)`, once they are written
/// (runs are committed in groups a moment after the change).
fn tree_runs(s: &Served, want: usize) -> Vec<(String, String, String)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let db = rusqlite::Connection::open(s.state().join("journal.db")).unwrap();
        let mut st = db
            .prepare("SELECT op, status, command FROM calls WHERE path LIKE '/files%' ORDER BY id")
            .unwrap();
        let runs: Vec<(String, String, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        if runs.len() >= want || std::time::Instant::now() > deadline {
            return runs;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_kernels_nfs_client_changes_the_working_tree_and_every_change_is_a_run() {
    let s = Served::start_manifest(
        "[[policy]]\nmatch = \"files/secret/**\"\naction = \"deny\"\nreason = \"secrets stay\"\n",
    );
    let files = s.dir.path().join("files");
    std::fs::create_dir_all(files.join("secret")).unwrap();
    std::fs::write(files.join("secret/s.txt"), "kept\n").unwrap();
    let script = r#"
echo one > files/made.txt; echo "@@ create $?"
echo two >> files/made.txt; echo "@@ append $?"
mkdir -p files/d/e; echo "@@ mkdir $?"
mv files/made.txt files/d/moved.txt; echo "@@ mv $?"
ln -s moved.txt files/d/link; echo "@@ ln $?"
chmod 600 files/d/moved.txt; echo "@@ chmod $?"
echo "@@ cat $(cat files/d/link | tr '\n' '|')"
echo "@@ ls $(ls files/d | tr '\n' ' ')"
rm files/d/link && rm -r files/d/e; echo "@@ rm $?"
echo pwned > files/secret/s.txt; echo "@@ denywrite $?"
rm -f files/secret/s.txt; echo "@@ denyrm $?"
mv files/secret/s.txt files/out.txt; echo "@@ denymv $?"
touch files/secret/new; echo "@@ denycreate $?"
echo "@@ guard $(tr '\n' ' ' < files/secret/s.txt@/ops/write/guard)"
echo "@@ caller $(cat files/d/moved.txt@/ops/chmod/runs/1/caller | tr '\n' ' ')"
"#;
    let console = guest::Guest::boot(s.port, script).finish(Duration::from_secs(240));
    let said = |key: &str| guest::report(&console, key);
    assert!(console.contains("@@ mounted"), "{console}");
    for k in ["create", "append", "mkdir", "mv", "ln", "chmod", "rm"] {
        assert_eq!(said(k), "0", "{k}: {console}");
    }
    assert_eq!(said("cat"), "one|two|", "{console}");
    assert_eq!(said("ls").trim(), "e link moved.txt", "{console}");
    for k in ["denywrite", "denyrm", "denymv", "denycreate"] {
        assert_ne!(said(k), "0", "{k} was refused: {console}");
    }
    assert!(
        said("guard").starts_with("blocked") && said("guard").contains("secrets stay"),
        "{console}"
    );
    assert!(said("caller").contains("NFS client"), "{console}");
    // The disk holds what the commands made, and nothing the policy refused.
    assert_eq!(
        std::fs::read_to_string(files.join("d/moved.txt")).unwrap(),
        "one\ntwo\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(files.join("d/moved.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        !files.join("d/e").exists()
            && !files.join("d/link").exists()
            && !files.join("made.txt").exists()
    );
    assert_eq!(
        std::fs::read_to_string(files.join("secret/s.txt")).unwrap(),
        "kept\n"
    );
    assert!(!files.join("secret/new").exists() && !files.join("out.txt").exists());
    // Each change is a run of its op, the NFS client its caller; the refusals are runs too.
    let runs = tree_runs(&s, 12);
    let ok: Vec<&str> = runs
        .iter()
        .filter(|r| r.1 == "ok")
        .map(|r| r.0.as_str())
        .collect();
    for op in [
        "create", "write", "mkdir", "rename", "symlink", "chmod", "remove", "rmdir",
    ] {
        assert!(ok.contains(&op), "no {op} run: {runs:#?}");
    }
    assert!(runs.iter().all(|r| r.2.contains("NFS client")), "{runs:#?}");
    assert!(
        runs.iter().filter(|r| r.1 == "refused").count() >= 3,
        "{runs:#?}"
    );
}

/// A working tree's large folder comes in many pages by cookie, each name once, the names
/// exactly the folder's.
#[test]
fn a_working_tree_folder_pages_by_cookie_and_loses_no_name() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("files/big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..1500 {
        std::fs::write(big.join(format!("file-{i:04}.txt")), "x\n").unwrap();
    }
    let s = Served::start_in(dir);
    let (_, mut names) = paged(&s, "files/big");
    names.retain(|n| n != "." && n != "..");
    names.sort();
    let want: Vec<String> = (0..1500).map(|i| format!("file-{i:04}.txt")).collect();
    assert_eq!(names, want, "each name once, no other");
}
