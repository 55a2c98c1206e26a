//! Undo: every change through a working tree keeps what it replaced, so one run can be
//! undone (`runs/N/ops/undo`), everything since a point reverted as one run
//! (`files@/ops/revert`), and shown as a diff (`files@/ops/diff`, `wip diff`). Driven with
//! bash, coreutils and git inside the mount, as agents drive it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{wait_until, Mount};

const GIT_ENV: &str = "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent";

/// A small repository with one commit, made outside the mount (no runs).
fn repository(root: &Path) {
    let w = |p: &str, text: &str| {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w("README.md", "# demo\n\nA small project.\n");
    w("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    w("src/lib/util.rs", "pub fn one() -> u32 {\n    1\n}\n");
    w("docs/guide.txt", "read me\n");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{GIT_ENV}; git init -q . && git add -A && git commit -qm first"
        ))
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mount_repository() -> Mount {
    let root = tempfile::tempdir().unwrap();
    repository(root.path());
    let state = tempfile::tempdir().unwrap();
    Mount::start_in(None, root, state)
}

/// A copy of the backing tree as it is now.
fn snapshot(m: &Mount) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let out = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", m.root.display()))
        .arg(copy.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    copy
}

fn same_tree(a: &Path, b: &Path) -> Result<(), String> {
    let out = Command::new("diff")
        .args(["-r", "--no-dereference"])
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Wait until every run the last commands make is recorded: a write's run comes at its
/// descriptor's last close, which close(2) does not wait for (the count stops moving).
fn settled(m: &Mount) {
    let mut last = -1;
    let mut same = 0;
    wait_until("the runs are recorded", Duration::from_secs(20), || {
        m.ok("cat .wip/status > /dev/null");
        let now = m.journal_count();
        if now == last {
            same += 1;
        } else {
            same = 0;
            last = now;
        }
        std::thread::sleep(Duration::from_millis(100));
        same >= 3
    });
}

/// The newest event's cursor in the change feed: a point to revert to.
fn last_event(m: &Mount) -> i64 {
    let db = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    m.ok("cat .wip/status >/dev/null");
    db.query_row("SELECT coalesce(max(cursor), 0) FROM events", [], |r| {
        r.get(0)
    })
    .unwrap()
}

#[test]
fn a_revert_puts_back_a_removed_tree_an_overwritten_file_and_a_commit() {
    let m = mount_repository();
    let before = snapshot(&m);
    let since = last_event(&m) + 1;
    m.ok(&format!(
        "{GIT_ENV}; cd files && rm -rf src && echo junk > README.md && git commit -qam x && git log --oneline | wc -l"
    ));
    assert!(
        same_tree(before.path(), &m.root).is_err(),
        "the commands changed the tree"
    );
    // The diff shows what changed since then, as git prints it.
    settled(&m);
    m.call("files@/ops/diff", &format!("{{\"since\": {since}}}"))
        .unwrap();
    let diff = m.result("files@/ops/diff");
    assert!(
        diff.contains("diff --git a/README.md b/README.md")
            && diff.contains("-# demo")
            && diff.contains("+junk"),
        "{diff}"
    );
    assert!(
        diff.contains("deleted file mode 100644\n--- a/src/main.rs\n+++ /dev/null"),
        "{diff}"
    );
    // `wip diff` prints the same from the shell.
    let out = common::wip_command()
        .arg("diff")
        .arg(m.path("files"))
        .arg("--since")
        .arg(since.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), diff);
    // Revert everything since then: the tree is as it was, .git included.
    settled(&m);
    let called = m.call("files@/ops/revert", &format!("{{\"since\": {since}}}"));
    let result = m.result("files@/ops/revert");
    assert!(called.is_ok(), "{called:?}: {result}");
    assert!(result.starts_with("reverted "), "{result}");
    if let Err(d) = same_tree(before.path(), &m.root) {
        panic!("the tree differs after the revert:\n{d}\n{result}");
    }
    // Nothing is left to revert.
    settled(&m);
    m.call("files@/ops/revert", &format!("{{\"since\": {since}}}"))
        .unwrap();
    assert!(
        m.result("files@/ops/revert").contains("nothing to revert"),
        "{}",
        m.result("files@/ops/revert")
    );
    let log = m.ok(&format!(
        "{GIT_ENV}; cd files && git status --short && git log --oneline | wc -l"
    ));
    assert_eq!(log.trim(), "1", "one commit, nothing changed: {log}");
}

#[test]
fn an_undo_blocked_by_a_later_change_names_it_and_is_allowed_once_that_is_undone() {
    let m = mount_repository();
    m.ok("cd files && echo v1 > docs/guide.txt && echo v2 > docs/guide.txt");
    settled(&m);
    let first = "files/docs/guide.txt@/ops/write/runs/1";
    let second = "files/docs/guide.txt@/ops/write/runs/2";
    let guard = m.read(&format!("{first}/ops/undo/guard"));
    assert!(guard.starts_with("blocked"), "{guard}");
    assert!(
        guard.contains("docs/guide.txt@/ops/write/runs/2"),
        "names the later run: {guard}"
    );
    let out = m.sh(&format!("echo > {first}/ops/undo/call"));
    assert!(!out.status.success(), "refused while blocked");
    // Undo the later one first: then the earlier may go.
    m.ok(&format!("echo > {second}/ops/undo/call"));
    assert_eq!(
        std::fs::read_to_string(m.root.join("docs/guide.txt")).unwrap(),
        "v1\n"
    );
    let guard = m.read(&format!("{first}/ops/undo/guard"));
    assert!(guard.starts_with("allowed"), "{guard}");
    m.ok(&format!("echo > {first}/ops/undo/call"));
    assert_eq!(
        std::fs::read_to_string(m.root.join("docs/guide.txt")).unwrap(),
        "read me\n"
    );
    // Undone already: says so.
    let guard = m.read(&format!("{first}/ops/undo/guard"));
    assert!(guard.contains("undone already"), "{guard}");
    // A change made outside the mount blocks an undo that would lose it.
    m.ok("cd files && echo v3 > docs/guide.txt");
    let third = "files/docs/guide.txt@/ops/write/runs/3";
    // The write's run is recorded at its descriptor's last close, which close(2) does not
    // wait for: the outside change comes after it.
    wait_until("the third write's run", Duration::from_secs(10), || {
        m.path(third).exists()
    });
    std::fs::write(m.root.join("docs/guide.txt"), "outside\n").unwrap();
    wait_until("the outside change is seen", Duration::from_secs(5), || {
        m.read(&format!("{third}/ops/undo/guard"))
            .contains("outside the mount")
    });
}

#[test]
fn removals_renames_and_modes_undo_one_by_one() {
    let m = mount_repository();
    m.ok("cd files && rm src/main.rs && mv docs/guide.txt docs/moved.txt && chmod 700 README.md && mkdir new && ln -s ../README.md new/link");
    // A path an undo removes is reached through files@/paths/ afterwards.
    for run in [
        "files@/paths/new/link/ops/symlink/runs/1",
        "files@/paths/new/ops/mkdir/runs/1",
        "files/README.md@/ops/chmod/runs/1",
        "files@/paths/docs/moved.txt/ops/rename/runs/1",
        "files@/paths/src/main.rs/ops/remove/runs/1",
    ] {
        let out = m.ok(&format!(
            "echo > {run}/ops/undo/call && cat {run}/ops/undo/result"
        ));
        assert!(out.starts_with("undid run 1"), "{run}: {out}");
    }
    let fresh = tempfile::tempdir().unwrap();
    repository(fresh.path());
    for p in ["src/main.rs", "docs/guide.txt", "README.md"] {
        assert_eq!(
            std::fs::read(m.root.join(p)).unwrap(),
            std::fs::read(fresh.path().join(p)).unwrap(),
            "{p}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(m.root.join("README.md"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    assert!(!m.root.join("new").exists() && !m.root.join("docs/moved.txt").exists());
}

#[test]
fn a_revert_cut_off_by_a_kill_is_finished_at_the_next_start() {
    let root = tempfile::tempdir().unwrap();
    repository(root.path());
    let state = tempfile::tempdir().unwrap();
    // Each step of a revert waits a moment, so the kill lands half-way.
    let mut m = Mount::start_in_with_env(None, root, state, &[("WIP_REVERT_STEP_DELAY_MS", "5")]);
    let big = m.root.join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..1000 {
        std::fs::write(big.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    let before = snapshot(&m);
    let since = last_event(&m) + 1;
    m.ok("rm -rf files/big");
    let caller = {
        let call = m.path("files@/ops/revert/call");
        let args = format!("{{\"since\": {since}}}");
        std::thread::spawn(move || std::fs::write(call, args))
    };
    // Kill it once some files are back, not all.
    wait_until("the revert is under way", Duration::from_secs(60), || {
        assert!(
            !caller.is_finished(),
            "the revert ended before the kill: {}",
            m.result("files@/ops/revert")
        );
        std::fs::read_dir(&big)
            .map(|d| d.count() > 50)
            .unwrap_or(false)
    });
    m.kill_daemon();
    let called = caller.join();
    eprintln!("the revert's caller heard: {called:?}");
    let back = std::fs::read_dir(&big).map(|d| d.count()).unwrap_or(0);
    let out = common::wip_command()
        .arg("umount")
        .arg(&m.mount)
        .output()
        .unwrap();
    assert!(out.status.success());
    m.remount();
    if let Err(d) = same_tree(before.path(), &m.root) {
        panic!(
            "after the restart the revert is half done ({back} files were back at the kill):\n{d}"
        );
    }
    // The run says what happened.
    let db = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    let (status, result): (String, String) = db
        .query_row(
            "SELECT status, result FROM calls WHERE op = 'revert' ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "ok", "{result}");
    assert!(result.contains("finished after a restart"), "{result}");
}

#[test]
fn a_revert_of_one_session_leaves_the_others_and_refuses_across_them() {
    let m = mount_repository();
    let since = last_event(&m) + 1;
    // Two sessions (setsid): one writes a.txt, the other b.txt.
    m.ok("cd files && setsid -w bash -c 'echo mine > a.txt' && setsid -w bash -c 'echo theirs > b.txt'");
    let session_of = |p: &str| -> u32 {
        let d = m.read(&format!("files/{p}@/ops/create/runs/1/description"));
        common::number_after(&d, "session")
    };
    let (a, b) = (session_of("a.txt"), session_of("b.txt"));
    assert_ne!(a, b);
    settled(&m);
    m.call(
        "files@/ops/revert",
        &format!("{{\"since\": {since}, \"session\": {a}}}"),
    )
    .unwrap();
    assert!(!m.root.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(m.root.join("b.txt")).unwrap(),
        "theirs\n"
    );
    // A session whose file another session changed later cannot be reverted alone.
    let since = last_event(&m) + 1;
    m.ok(
        "cd files && setsid -w bash -c 'echo one > c.txt' && setsid -w bash -c 'echo two >> c.txt'",
    );
    // A write's run is recorded at its descriptor's last close, which close(2) does not
    // wait for.
    wait_until("the append's run", Duration::from_secs(10), || {
        m.path("files/c.txt@/ops/write/runs/2").exists()
    });
    let c = {
        let d = m.read("files/c.txt@/ops/create/runs/1/description");
        common::number_after(&d, "session")
    };
    settled(&m);
    let err = m.call(
        "files@/ops/revert",
        &format!("{{\"since\": {since}, \"session\": {c}}}"),
    );
    assert!(err.is_err());
    let r = m.result("files@/ops/revert");
    assert!(
        r.contains("leaves out") && r.contains("c.txt@/ops/write/runs/2"),
        "{r}"
    );
}

#[test]
fn since_is_a_run_folder_an_event_or_a_time() {
    let m = mount_repository();
    m.ok("cd files && echo 1 > a.txt");
    let t = m.ok("sleep 0.05; date -u +%Y-%m-%dT%H:%M:%S.%3NZ; sleep 0.05");
    let t = t.trim();
    m.ok("cd files && echo 2 > b.txt && rm a.txt");
    // A time: both later changes show; a.txt was there before it.
    settled(&m);
    let diff = m.ok(&format!("{} diff files --since {t}", common::WIP));
    assert!(
        diff.contains("new file mode 100644\n--- /dev/null\n+++ b/b.txt"),
        "{diff}"
    );
    assert!(
        diff.contains("deleted file mode 100644\n--- a/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-1"),
        "{diff}"
    );
    // A run's folder, as its gone path reaches it (and relative to the tree's root).
    for since in [
        "files@/paths/a.txt/ops/remove/runs/1".to_string(),
        format!("{}/files/a.txt@/ops/remove/runs/1", m.mount.display()),
    ] {
        settled(&m);
        m.call("files@/ops/revert", &format!("{{\"since\": \"{since}\"}}"))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(m.root.join("a.txt")).unwrap(),
            "1\n"
        );
        assert!(
            m.root.join("b.txt").exists(),
            "only the removal since that run"
        );
        m.ok("rm files/a.txt");
    }
    // A time.
    settled(&m);
    m.call("files@/ops/revert", &format!("{{\"since\": \"{t}\"}}"))
        .unwrap();
    assert!(!m.root.join("b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(m.root.join("a.txt")).unwrap(),
        "1\n"
    );
    // Bad input: words, nothing changed.
    for bad in [
        r#"{"since": "yesterday"}"#,
        r#"{"since": {"a": 1}}"#,
        r#"{"since": 1, "session": "x"}"#,
        "{}",
    ] {
        assert!(m.call("files@/ops/revert", bad).is_err(), "{bad}");
        let r = m.result("files@/ops/revert");
        assert!(r.contains("since") || r.contains("session"), "{bad}: {r}");
    }
    assert_eq!(
        std::fs::read_to_string(m.root.join("a.txt")).unwrap(),
        "1\n"
    );
}

/// SQLite in WAL mode with two connections works through the mount with before-images on
/// (its `-shm` stays mappable beside its other opens).
#[test]
fn sqlite_in_wal_mode_with_two_connections_works_with_before_images() {
    let m = mount_repository();
    let py = r#"
import sqlite3
a = sqlite3.connect('db.sqlite'); a.execute('pragma journal_mode=wal')
a.execute('create table t(x)'); a.execute('insert into t values (1)'); a.commit()
b = sqlite3.connect('db.sqlite'); b.execute('insert into t values (2)'); b.commit()
print(a.execute('select count(*) from t').fetchone()[0], b.execute('select count(*) from t').fetchone()[0])
a.close(); b.close()
"#;
    let out = m.ok(&format!(
        "cd files && python3 -c \"{}\"",
        py.replace('"', "\\\"")
    ));
    assert_eq!(out.trim(), "2 2", "two WAL connections through the mount");
}

/// What programs do in a working tree reverts whole: `cp` (copy_file_range), an `O_RDWR`
/// open that never writes beside a writer, a setuid file.
#[test]
fn cp_and_readers_beside_writers_revert_whole() {
    let m = mount_repository();
    let before = snapshot(&m);
    let since = last_event(&m) + 1;
    m.ok("cd files && cp README.md copy.md && cp --reflink=never docs/guide.txt docs/g2.txt");
    m.ok("cd files && exec 4<>README.md && echo changed > README.md && exec 4>&-");
    m.ok("cd files && chmod 4755 src/main.rs");
    settled(&m);
    m.call("files@/ops/revert", &format!("{{\"since\": {since}}}"))
        .map_err(|e| format!("{e}: {}", m.result("files@/ops/revert")))
        .unwrap();
    if let Err(d) = same_tree(before.path(), &m.root) {
        panic!(
            "the tree differs after the revert:\n{d}\n{}",
            m.result("files@/ops/revert")
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        std::fs::metadata(m.root.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("src/main.rs"), 0o644);
    // And a setuid file comes back setuid.
    m.ok("cd files && chmod 4755 src/main.rs && rm src/main.rs");
    m.ok("echo > files@/paths/src/main.rs/ops/remove/runs/1/ops/undo/call");
    assert_eq!(mode("src/main.rs"), 0o4755);
}
