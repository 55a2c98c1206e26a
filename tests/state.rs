//! The state directory under stress, as a user meets it: a second daemon on the same state,
//! a daemon killed in the middle of a tracker write, a journal another process holds
//! locked, and `runs/` after thousands of calls.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{wait_until, wip_command, Mount};

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A background daemon some step of a test started; unmounted and gone when dropped.
struct Background {
    mount: std::path::PathBuf,
}

impl Drop for Background {
    fn drop(&mut self) {
        if common::is_mounted(&self.mount) {
            let ok = wip_command()
                .arg("umount")
                .arg(&self.mount)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                common::lazy_umount(&self.mount);
            }
        }
    }
}

#[test]
fn a_second_daemon_on_the_same_state_is_refused_with_words_naming_the_first() {
    let m = Mount::start(None);
    let pid = m.daemon_pid().unwrap();
    let other = tempfile::Builder::new()
        .prefix("wip-mnt-")
        .tempdir()
        .unwrap();
    let want = format!(
        "the state directory {} is in use by another wip daemon pid {pid}, serving {}",
        m.state.display(),
        m.mount.display()
    );
    // In the foreground (as the tests and systemd run it) and in the background (the
    // caller's terminal gets the words before any daemon starts).
    for foreground in [true, false] {
        let mut cmd = wip_command();
        cmd.arg("mount").arg(other.path());
        if foreground {
            cmd.arg("-f");
        }
        let out = cmd
            .arg("--state")
            .arg(&m.state)
            .current_dir(&m.root)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&want), "{err}");
        assert!(
            err.contains(&format!("wip umount {}", m.mount.display()))
                && err.contains("--state DIR"),
            "{err}"
        );
        assert!(!common::is_mounted(other.path()));
    }
    // The first daemon goes on serving.
    assert!(m
        .read("tracker/issues/42/description")
        .starts_with("Issue #42"));
}

#[test]
fn unmount_then_mount_at_once_on_the_same_state_works() {
    let mut m = Mount::start(None);
    m.ok("echo 'before the remount' > tracker/issues/17/ops/comment/call");
    let next = tempfile::Builder::new()
        .prefix("wip-mnt-")
        .tempdir()
        .unwrap();
    let _cleanup = Background {
        mount: next.path().to_path_buf(),
    };
    // No pause between the two: the new daemon waits for the old one to finish exiting.
    let out = common::sh_in(
        &m.root,
        &format!(
            "$WIP umount {old} && $WIP mount {new} --state {state}",
            old = m.mount.display(),
            new = next.path().display(),
            state = m.state.display()
        ),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(common::is_mounted(next.path()));
    let body = std::fs::read_to_string(next.path().join("tracker/issues/17/description")).unwrap();
    assert!(body.contains("comment"), "{body}");
    // The old foreground daemon has exited (it held the lock the new one took).
    m.unmount();
}

/// The tracker's database file in a state directory (default world).
fn tracker_db(m: &Mount) -> std::path::PathBuf {
    m.state.join("tracker-tracker.db")
}

fn run_status(m: &Mount, id: i64) -> Option<String> {
    let db = rusqlite::Connection::open_with_flags(
        m.state.join("journal.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .ok()?;
    db.query_row("SELECT status FROM calls WHERE id = ?1", [id], |r| r.get(0))
        .ok()
}

fn last_run(m: &Mount, op: &str) -> Option<i64> {
    let db = rusqlite::Connection::open_with_flags(
        m.state.join("journal.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .ok()?;
    db.query_row("SELECT max(id) FROM calls WHERE op = ?1", [op], |r| {
        r.get::<_, Option<i64>>(0)
    })
    .ok()
    .flatten()
}

#[test]
fn a_daemon_killed_during_a_tracker_write_loses_nothing_and_settles_the_call_not_run() {
    let mut m = Mount::start(None);
    let comments = |m: &Mount| {
        m.ok("ls tracker/issues/17/comments | grep -v -x -e description -e ref -e ops | wc -l")
            .trim()
            .parse::<usize>()
            .unwrap()
    };
    let before = comments(&m);
    // Another process holds the tracker's write lock, so the call's transaction waits
    // inside the daemon; the daemon is killed right there.
    let holder = rusqlite::Connection::open(tracker_db(&m)).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut writer = Command::new("bash")
        .arg("-c")
        // /bin/echo hears the close's errno (bash's builtin would not: plain text runs at
        // close).
        .arg("/bin/echo 'lost in the crash?' > tracker/issues/17/ops/comment/call")
        .current_dir(&m.mount)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut id = None;
    wait_until(
        "the comment call is journaled as running",
        Duration::from_secs(30),
        || {
            id = last_run(&m, "comment");
            id.is_some_and(|id| run_status(&m, id).as_deref() == Some("running"))
        },
    );
    let id = id.unwrap();
    m.kill_daemon();
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    let status = writer.wait().unwrap();
    assert!(
        !status.success(),
        "the writer saw its call fail with the daemon"
    );
    let out = wip_command().arg("umount").arg(&m.mount).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    m.remount();
    // The run says what happened (the tracker never committed it: nothing changed); the
    // tracker is whole and holds no half comment.
    let run = format!("tracker/issues/17/ops/comment/runs/{id}");
    assert_eq!(m.read(&format!("{run}/status")), "not_run\n");
    assert!(
        m.read(&format!("{run}/result")).contains("nothing changed"),
        "{}",
        m.read(&format!("{run}/result"))
    );
    assert!(m
        .read(&format!("{run}/args"))
        .contains("lost in the crash?"));
    assert_eq!(comments(&m), before);
    let check: String = rusqlite::Connection::open(tracker_db(&m))
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    // And the same call goes through now.
    m.ok("echo 'after the crash' > tracker/issues/17/ops/comment/call");
    assert_eq!(comments(&m), before + 1);
}

#[test]
fn a_journal_locked_by_another_process_is_eio_with_words_and_runs_nothing() {
    let m = Mount::start(None);
    let comment = "tracker/issues/17/ops/comment";
    m.ok(&format!("echo 'first' > {comment}/call"));
    let calls = m.journal_count();
    // Another process (a backup, an sqlite3 shell) holds the journal's write lock longer
    // than the journal waits for it (10 s).
    let holder = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // /bin/echo (which hears the close's errno, where plain text runs) and `wip call`,
    // side by side: both wait out the same lock.
    let echo = Command::new("bash")
        .arg("-c")
        .arg(format!("/bin/echo 'while locked' > {comment}/call"))
        .current_dir(&m.mount)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let call = wip_command()
        .arg("call")
        .arg(m.path(comment))
        .arg("via wip call while locked")
        .output()
        .unwrap();
    let echo = echo.wait_with_output().unwrap();
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert!(!echo.status.success());
    assert!(
        stderr_of(&echo).contains("write error: Input/output error"),
        "{}",
        stderr_of(&echo)
    );
    let err = stderr_of(&call);
    assert_eq!(call.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "wip: Input/output error (os error 5): journal: database is locked",
    );
    // Nothing ran: no comment, no run, and the journal works again once released.
    let body = m.ok("cat tracker/issues/17/comments/*/description");
    assert!(!body.contains("while locked"), "{body}");
    assert_eq!(m.journal_count(), calls);
    m.ok(&format!("echo 'after the lock' > {comment}/call"));
    assert_eq!(m.journal_count(), calls + 1);
    let r = m.result(comment);
    assert!(r.starts_with("added comment 4 on issue #17"), "{r}");
}

#[test]
fn runs_lists_the_newest_thousand_after_thousands_of_calls() {
    let m = Mount::start(None);
    let op = "tracker/issues/42/ops/get_metadata";
    let calls = 2500;
    m.ok(&format!(
        "for i in $(seq {calls}); do echo > {op}/call; done"
    ));
    assert_eq!(m.journal_count(), calls);
    // Listed in the directory's own order: newest first, the newest 1000 only.
    let listed: Vec<i64> = m
        .ok(&format!("ls -U {op}/runs"))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let want: Vec<i64> = (calls - 999..=calls).rev().collect();
    assert_eq!(listed, want);
    // Older runs are reachable by id, each with its own record.
    for id in [1, calls - 1000] {
        assert_eq!(m.read(&format!("{op}/runs/{id}/status")), "ok\n");
        assert_eq!(m.read(&format!("{op}/runs/{id}/args")), "{}\n");
    }
    for missing in [0, calls + 1] {
        assert!(
            !m.path(&format!("{op}/runs/{missing}")).exists(),
            "{missing}"
        );
    }
    // A run belongs to its op: another op of the same entry does not show it.
    assert!(!m.path("tracker/issues/42/ops/close/runs/1").exists());
    // And none of it floods a walk of the tree.
    assert!(!m.ok("find tracker/issues/42").contains("/runs"));
}

fn comment_bodies(m: &Mount) -> Vec<String> {
    let db = rusqlite::Connection::open_with_flags(
        tracker_db(m),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut st = db
        .prepare("SELECT body FROM comments ORDER BY body")
        .unwrap();
    st.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The daemon is killed after the tracker committed a comment but before the journal
/// recorded the outcome (another process holds the journal's write lock then): after the
/// restart the run is `ok`, with the tracker's result, not `interrupted`.
#[test]
fn a_call_the_tracker_committed_before_a_crash_is_settled_ok() {
    let mut m = Mount::start(None);
    let tracker = rusqlite::Connection::open(tracker_db(&m)).unwrap();
    tracker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut writer = Command::new("bash")
        .arg("-c")
        .arg("/bin/echo 'committed before the crash' > tracker/issues/17/ops/comment/call")
        .current_dir(&m.mount)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut id = None;
    wait_until(
        "the comment call is running",
        Duration::from_secs(30),
        || {
            id = last_run(&m, "comment");
            id.is_some_and(|id| run_status(&m, id).as_deref() == Some("running"))
        },
    );
    let id = id.unwrap();
    // Hold the journal, then let the tracker commit: the outcome cannot be recorded.
    let journal = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    journal.execute_batch("BEGIN IMMEDIATE").unwrap();
    tracker.execute_batch("ROLLBACK").unwrap();
    wait_until(
        "the tracker committed the comment",
        Duration::from_secs(30),
        || {
            comment_bodies(&m)
                .iter()
                .any(|b| b == "committed before the crash")
        },
    );
    m.kill_daemon();
    journal.execute_batch("ROLLBACK").unwrap();
    drop(journal);
    let _ = writer.wait();
    let out = wip_command().arg("umount").arg(&m.mount).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    m.remount();
    let run = format!("tracker/issues/17/ops/comment/runs/{id}");
    assert_eq!(m.read(&format!("{run}/status")), "ok\n");
    let result = m.read(&format!("{run}/result"));
    assert!(
        result.contains("settled after a restart") && result.contains("added comment"),
        "{result}"
    );
}

/// Eight writers add comments as fast as they can and the daemon is killed among them:
/// after the restart every run of theirs is settled to exactly what the tracker holds (an
/// `ok` run has its comment, a `not_run` one none) and none stays `interrupted`.
#[test]
fn a_kill_mid_batch_settles_every_run_to_what_the_tracker_holds() {
    let mut m = Mount::start(None);
    let mut writers = Vec::new();
    for w in 0..8 {
        writers.push(
            Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "for i in $(seq 1 400); do echo \"{{\\\"body\\\":\\\"batch {w}-$i\\\"}}\" > tracker/issues/17/ops/comment/call || exit 0; done"
                ))
                .current_dir(&m.mount)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    wait_until("a few dozen comments", Duration::from_secs(60), || {
        comment_bodies(&m)
            .iter()
            .filter(|b| b.starts_with("batch "))
            .count()
            >= 40
    });
    m.kill_daemon();
    for mut w in writers {
        let _ = w.wait();
    }
    let out = wip_command().arg("umount").arg(&m.mount).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    m.remount();
    let db = rusqlite::Connection::open_with_flags(
        m.state.join("journal.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut st = db
        .prepare("SELECT args, status FROM calls WHERE op = 'comment' ORDER BY id")
        .unwrap();
    let runs: Vec<(String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let bodies = comment_bodies(&m);
    let mut ok = 0;
    for (args, status) in &runs {
        let body = serde_json::from_str::<serde_json::Value>(args).unwrap()["body"]
            .as_str()
            .unwrap()
            .to_string();
        let held = bodies.iter().filter(|b| **b == body).count();
        match status.as_str() {
            "ok" => {
                ok += 1;
                assert_eq!(held, 1, "{body}: ok but {held} comments");
            }
            "not_run" => assert_eq!(held, 0, "{body}: not_run but {held} comments"),
            other => panic!("{body}: {other}"),
        }
    }
    let batch = bodies.iter().filter(|b| b.starts_with("batch ")).count();
    assert_eq!(batch, ok, "every comment has its ok run");
}
