//! The files host is a working tree: programs run in it as in the real directory, every
//! change through the mount is a run of the op of its name (with the caller's command
//! line), each path's entry is at `PATH@`, and the policy judges every change at the path
//! it acts on. Driven with bash, coreutils, git, python, cargo, tar and vim, as agents and
//! people drive it.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::{sh_in, wait_until, Mount};
use std::time::Duration;

/// A small Python project and a small Rust crate, as a repository holds them.
fn project(root: &Path) {
    let w = |p: &str, text: &str| {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w("calc.py", "def add(a, b):\n    return a + b\n");
    w(
        "test_calc.py",
        "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n",
    );
    w(
        "crate/Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    );
    w(
        "crate/src/lib.rs",
        "pub fn twice(x: u32) -> u32 {\n    x * 2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn twice_doubles() {\n        assert_eq!(super::twice(21), 42);\n    }\n}\n",
    );
    w("notes/todo.txt", "one\ntwo\nthree\n");
}

fn mount_project(manifest: Option<&str>) -> Mount {
    let root = tempfile::tempdir().unwrap();
    project(root.path());
    let state = tempfile::tempdir().unwrap();
    Mount::start_in(manifest, root, state)
}

/// The journal's runs of the working tree (read through the mount first, which writes
/// what is queued): `(path, op, command)` of each, oldest first.
fn runs(m: &Mount) -> Vec<(String, String, String, String)> {
    m.ok("cat .wip/status >/dev/null");
    let db = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    let mut st = db
        .prepare(
            "SELECT path, op, command, status FROM calls WHERE path LIKE '/files%' ORDER BY id",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The same bash script, natively in a copy of the project and in the mount's files; the
/// two trees then hold the same (the git index aside: it keeps devices and inodes).
const SCRIPT: &str = r#"
set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
export GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'
python3 -m unittest -q 2>&1 | tail -1
python3 test_calc.py 2>&1 | tail -1
(cd crate && CARGO_TARGET_DIR=target cargo test -q --offline 2>&1 | grep 'test result')
git init -q .
printf 'crate/target/\n__pycache__/\n' > .gitignore
git add -A
git commit -qm 'first'
sed -i 's/a + b/b + a/' calc.py
vim -u NONE -i NONE -n -es -c '%s/two/TWO/' -c 'wq' notes/todo.txt
mv notes/todo.txt notes/done.txt
mkdir -p deep/er/est
echo leaf > deep/er/est/leaf.txt
ln notes/done.txt notes/hard.txt
ln -s ../calc.py notes/soft.py
chmod +x test_calc.py
tar cf /tmp/wip-tree-test-$$.tar -C notes . && mkdir unpacked && tar xf /tmp/wip-tree-test-$$.tar -C unpacked && rm /tmp/wip-tree-test-$$.tar
rm -rf deep
git add -A
git commit -qm 'second'
git status --short
"#;

#[test]
fn programs_run_in_the_tree_and_leave_what_they_leave_natively() {
    let m = mount_project(None);
    let native = tempfile::tempdir().unwrap();
    project(native.path());
    let there = sh_in(native.path(), SCRIPT, Duration::from_secs(300));
    assert!(
        there.status.success(),
        "native run failed: {}",
        String::from_utf8_lossy(&there.stderr)
    );
    let here = m.sh(&format!("cd files && {SCRIPT}"));
    assert!(
        here.status.success(),
        "run in the mount failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&here.stdout),
        String::from_utf8_lossy(&here.stderr)
    );
    // The same output as natively, times aside (cargo test prints how long it took).
    let timeless = |out: &[u8]| {
        String::from_utf8_lossy(out)
            .lines()
            .map(|l| l.split("; finished in ").next().unwrap_or(l).to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        timeless(&here.stdout),
        timeless(&there.stdout),
        "the same output as natively"
    );
    let out = String::from_utf8_lossy(&here.stdout);
    assert!(out.contains("OK"), "{out}");
    assert!(out.contains("test result: ok. 1 passed"), "{out}");
    // The backing directory holds exactly what the same commands leave natively.
    let diff = Command::new("diff")
        .args([
            "-r",
            "--no-dereference",
            "-x",
            "index",
            "-x",
            "target",
            "-x",
            "__pycache__",
        ])
        .arg(native.path())
        .arg(&m.root)
        .output()
        .unwrap();
    assert!(
        diff.status.success(),
        "trees differ:\n{}",
        String::from_utf8_lossy(&diff.stdout)
    );
    // Modes and link counts too (diff -r compares contents only).
    for p in ["test_calc.py", "notes/done.txt", "notes/hard.txt"] {
        let (a, b) = (
            std::fs::symlink_metadata(native.path().join(p)).unwrap(),
            std::fs::symlink_metadata(m.root.join(p)).unwrap(),
        );
        assert_eq!((a.mode(), a.nlink()), (b.mode(), b.nlink()), "{p}");
    }
    // Every change is a run, with the command that made it.
    let runs = runs(&m);
    let has = |path: &str, op: &str, cmd: &str| {
        runs.iter()
            .any(|(p, o, c, s)| p == path && o == op && c.contains(cmd) && s == "ok")
    };
    for (path, op, cmd) in [
        ("/files/calc.py@", "rename", "sed"),
        ("/files/notes/todo.txt@", "write", "vim"),
        ("/files/notes/done.txt@", "rename", "mv"),
        ("/files/deep@", "mkdir", "mkdir"),
        ("/files/deep/er/est/leaf.txt@", "create", "bash"),
        ("/files/deep/er/est/leaf.txt@", "write", "bash"),
        ("/files/notes/hard.txt@", "link", "ln"),
        ("/files/notes/soft.py@", "symlink", "ln"),
        ("/files/test_calc.py@", "chmod", "chmod"),
        ("/files/unpacked/done.txt@", "create", "tar"),
        ("/files/unpacked/done.txt@", "write", "tar"),
        ("/files/unpacked/done.txt@", "touch", "tar"),
        ("/files/deep/er/est/leaf.txt@", "remove", "rm"),
        ("/files/deep@", "rmdir", "rm"),
        ("/files/.git/HEAD@", "rename", "git"),
    ] {
        assert!(
            has(path, op, cmd),
            "no {op} run by {cmd} at {path} in {runs:#?}"
        );
    }
    // A warm `git status` changes nothing: no run at all. (Right after a commit the
    // index is racily clean and git rewrites it, natively too: a moment later it is warm.)
    std::thread::sleep(Duration::from_millis(1500));
    m.ok("cd files && git status >/dev/null");
    let before = self::runs(&m).len();
    m.ok("cd files && git status && git status --short");
    std::thread::sleep(Duration::from_millis(1500));
    let after = self::runs(&m);
    assert_eq!(
        after.len(),
        before,
        "git status made runs: {:#?}",
        &after[before..]
    );
}

#[test]
fn files_are_files_and_each_path_has_its_entry_at_path_at() {
    let m = mount_project(None);
    // A folder holds exactly its children; files are regular files.
    let listed = m.ok("ls -A files");
    assert_eq!(
        listed.split_whitespace().collect::<Vec<_>>(),
        ["calc.py", "crate", "notes", "test_calc.py"]
    );
    let out = m.ok("stat -c '%F %s' files/calc.py files/notes; grep -rn return files");
    assert!(out.contains("regular file 32"), "{out}");
    assert!(out.contains("directory"), "{out}");
    assert!(out.contains("files/calc.py:2:    return a + b"), "{out}");
    // The entry of a path: description, ref, ops; unlisted; at PATH@.
    let out = m.ok("cat files/calc.py@/description files/calc.py@/ref; ls files/calc.py@/ops/; cat files/notes@/description; cat files@/description");
    assert!(out.contains("file"), "{out}");
    assert!(out.contains("file://"), "{out}");
    for op in [
        "read", "write", "edit", "stat", "remove", "rename", "chmod", "create", "truncate", "touch",
    ] {
        assert!(out.lines().any(|l| l == op), "no op {op}: {out}");
    }
    assert!(
        !m.ok("ls -a files").contains('@'),
        "no listing shows an entry"
    );
    // `.@` is the folder's own entry, `..@` its parent's; a real `x@` wins and its entry
    // is `x@@`; gone paths keep theirs at `files@/paths/…`.
    m.ok("cd files/notes && cat .@/description | grep -q directory && cat ..@/description | grep -q Files");
    m.ok("cd files && echo real > 'odd@' && cat odd@ | grep -qx real && cat odd@@/description | grep -q file");
    m.ok("cd files && rm notes/todo.txt && test ! -e notes/todo.txt@ && cat ../files@/paths/notes/todo.txt/ops/remove/runs/1/result | grep -q 'removed'");
    // Explicit ops with JSON stay, with numbered lines and exact edits.
    m.ok("cd files && echo > calc.py@/ops/read/call && grep -q '     2	    return a + b' calc.py@/ops/read/result");
    m.ok(r#"cd files && echo '{"old_string":"a + b","new_string":"a - b"}' > calc.py@/ops/edit/call && grep -q 'a - b' calc.py"#);
    m.ok(r#"cd files && echo '{"to":"calc2.py"}' > calc.py@/ops/rename/call && test -f calc2.py && test ! -e calc.py"#);
    m.ok(r#"cd files && echo '{"path":"made/here","parents":true}' > notes@/ops/mkdir/call && test -d notes/made/here"#);
    m.ok(r#"cd files && echo '{"recursive":true}' > notes/made@/ops/remove/call && test ! -e notes/made"#);
    m.ok(r#"cd files && echo '{"mode":"700"}' > calc2.py@/ops/chmod/call && stat -c %a calc2.py | grep -qx 700"#);
}

#[test]
fn inodes_are_the_backing_files_and_open_files_survive_renames() {
    let m = mount_project(None);
    let native = std::fs::metadata(m.root.join("calc.py")).unwrap().ino();
    let shown = std::fs::metadata(m.path("files/calc.py")).unwrap().ino();
    assert_eq!(shown, native, "st_ino is the backing file's");
    m.ok("cd files && ln calc.py hard.py && test $(stat -c %i calc.py) = $(stat -c %i hard.py) && test $(stat -c %h calc.py) = 2");
    // An open file renamed and then unlinked keeps working.
    let out = m.ok(
        "cd files && exec 3<> notes/todo.txt && mv notes/todo.txt notes/moved.txt && rm notes/moved.txt && echo more >&3 && cat /proc/self/fd/3 >/dev/null; exec 3>&-; echo fine",
    );
    assert!(out.contains("fine"), "{out}");
    // Stable across a remount: git compares inodes.
    let mut m = m;
    m.unmount();
    m.remount();
    let again = std::fs::metadata(m.path("files/calc.py")).unwrap().ino();
    assert_eq!(again, native);
}

#[test]
fn names_are_bytes_and_special_files_are_what_they_are() {
    let m = mount_project(None);
    // A name that is not UTF-8 appears and round-trips exactly.
    m.ok(r#"cd files && name=$'caf\xe9' && echo latin1 > "$name" && test "$(cat "$name")" = latin1 && ls | grep -c caf | grep -qx 1"#);
    let found = std::fs::read_dir(&m.root)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().as_encoded_bytes() == b"caf\xe9");
    assert!(found, "the backing file has the very bytes");
    // A FIFO is a FIFO, flock works, xattrs pass through.
    m.ok("cd files && mkfifo pipe && test -p pipe && (echo through > pipe &) && read line < pipe && test \"$line\" = through");
    m.ok("cd files && flock -n calc.py true");
    m.ok("cd files && setfattr -n user.note -v kept calc.py && getfattr -n user.note --only-values calc.py | grep -qx kept");
    let native = Command::new("getfattr")
        .args(["-n", "user.note", "--only-values"])
        .arg(m.root.join("calc.py"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&native.stdout), "kept");
    // O_TMPFILE has no FUSE request: refused, and nothing made.
    let out =
        m.sh(r#"cd files && python3 -c 'import os; os.open(".", os.O_TMPFILE | os.O_WRONLY)'"#);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Operation not supported"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn outside_changes_show_within_a_second_and_are_no_runs() {
    let m = mount_project(None);
    m.ok("cat files/calc.py >/dev/null; ls files/notes >/dev/null");
    let before = runs(&m).len();
    std::fs::write(m.root.join("calc.py"), "changed outside\n").unwrap();
    std::fs::write(m.root.join("notes/new.txt"), "new\n").unwrap();
    std::fs::remove_file(m.root.join("notes/todo.txt")).unwrap();
    wait_until("the outside changes show", Duration::from_secs(1), || {
        std::fs::read_to_string(m.path("files/calc.py"))
            .ok()
            .as_deref()
            == Some("changed outside\n")
            && m.path("files/notes/new.txt").exists()
            && !m.path("files/notes/todo.txt").exists()
    });
    assert_eq!(runs(&m).len(), before, "an outside change is no run");
}

#[test]
fn a_deny_rule_refuses_every_change_kind_with_eacces_and_changes_nothing() {
    let manifest = r#"
[[host]]
kind = "files"
path = "files"

[[policy]]
match = "files/secret/**"
action = "deny"
reason = "secrets are not for agents"
"#;
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("secret")).unwrap();
    std::fs::create_dir(root.path().join("public")).unwrap();
    std::fs::write(root.path().join("secret/s.txt"), "SECRET\n").unwrap();
    std::fs::write(root.path().join("public/p.txt"), "public\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let m = Mount::start_in(Some(manifest), root, state);
    // A link in public (not denied) to the secret: writing through it is judged at the
    // secret's path.
    m.ok("cd files && ln -s ../secret/s.txt public/to-secret");
    let snapshot = || {
        let out = Command::new("bash")
            .arg("-c")
            .arg("find . -printf '%p %m %s %T@\\n' | sort; cat secret/s.txt; getfattr -d -R . 2>/dev/null")
            .current_dir(&m.root)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = snapshot();
    for (what, script) in [
        ("write", "echo PWNED > secret/s.txt"),
        ("append", "echo PWNED >> secret/s.txt"),
        ("create", "echo new > secret/new.txt"),
        ("truncate", "truncate -s 0 secret/s.txt"),
        ("remove", "rm secret/s.txt"),
        ("rename out", "mv secret/s.txt public/"),
        ("rename in", "mv public/p.txt secret/"),
        ("rename the folder", "mv secret elsewhere"),
        ("link", "ln secret/s.txt public/hard.txt"),
        ("symlink", "ln -s x secret/link"),
        ("mkdir", "mkdir secret/sub"),
        ("rmdir", "rmdir secret"),
        ("chmod", "chmod 777 secret/s.txt"),
        ("chown", "chown 1:1 secret/s.txt"),
        ("touch", "touch secret/s.txt"),
        ("setxattr", "setfattr -n user.x -v y secret/s.txt"),
        ("through a symlink", "echo PWNED > public/to-secret"),
        ("sed -i", "sed -i s/SECRET/PWNED/ secret/s.txt"),
    ] {
        let out = m.sh(&format!("cd files && {script}"));
        assert!(!out.status.success(), "{what} went through");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{what}: {err}");
    }
    // The explicit ops are judged at the path they act on: a `path` argument, `..`, a
    // symlink inside the root.
    for (op, args) in [
        ("files@/ops/read", r#"{"path":"secret/s.txt"}"#),
        (
            "files@/ops/write",
            r#"{"path":"secret/s.txt","content":"PWNED\n"}"#,
        ),
        (
            "files/public@/ops/edit",
            r#"{"path":"../secret/s.txt","old_string":"SECRET","new_string":"PWNED"}"#,
        ),
        (
            "files/public/to-secret@/ops/write",
            r#"{"content":"PWNED\n"}"#,
        ),
        (
            "files/public/to-secret@/ops/edit",
            r#"{"old_string":"SECRET","new_string":"PWNED"}"#,
        ),
    ] {
        assert_eq!(m.call(op, args), Err(libc::EACCES), "{op} {args}");
        let result = m.ok(&format!("cat {op}/result"));
        assert!(
            result.contains("denied by rule 1") && !result.contains("SECRET"),
            "{op}: {result}"
        );
    }
    assert_eq!(snapshot(), before, "nothing changed on disk");
    // The guard and the result say which rule and why.
    let guard = m.ok("cat files/secret/s.txt@/ops/write/guard");
    assert!(guard.starts_with("blocked"), "{guard}");
    assert!(
        guard.contains("denied by rule 1 (match \"files/secret/**\"): secrets are not for agents"),
        "{guard}"
    );
    let result = m.ok("cat files/secret/s.txt@/ops/write/result");
    assert!(result.contains("denied by rule 1"), "{result}");
    // The refusals are runs.
    let refused = runs(&m)
        .into_iter()
        .filter(|(p, _, _, s)| p.starts_with("/files/secret") && s == "refused")
        .count();
    assert!(refused >= 10, "{refused} refusals recorded");
    // Reading is not a change: the secret's bytes stay readable (hide is for that).
    assert_eq!(m.read("files/secret/s.txt"), "SECRET\n");
}

#[test]
fn an_approve_rule_refuses_the_change_and_points_to_the_op_that_waits() {
    let manifest = r#"
[[host]]
kind = "files"
path = "files"

[[policy]]
match = "files/**/ops/write"
action = "approve"
"#;
    let m = mount_project(Some(manifest));
    let out = m.sh("cd files && echo x > calc.py");
    assert!(!out.status.success());
    let result = m.ok("cat files/calc.py@/ops/write/result");
    assert!(result.contains("sign-off"), "{result}");
    assert!(
        result.contains("/files/calc.py@/ops/write/call"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(m.root.join("calc.py")).unwrap(),
        "def add(a, b):\n    return a + b\n"
    );
    // The explicit op waits as a pending run.
    let r = m.call("files/calc.py@/ops/write", r#"{"content":"x\n"}"#);
    assert_eq!(r, Err(libc::EINPROGRESS));
}

#[test]
fn a_hidden_subtree_is_absent_for_every_reader_and_cannot_be_moved_unseen() {
    let manifest = r#"
[[host]]
kind = "files"
path = "files"

[[policy]]
match = "files/notes/**"
action = "hide"
"#;
    let m = mount_project(Some(manifest));
    m.ok("cd files && ! ls | grep -q notes && test ! -e notes && test ! -e notes/todo.txt");
    let out = m.sh("cd files && ln -s notes/todo.txt peek && cat peek");
    assert!(!out.status.success(), "read through a symlink");
    let out = m.sh("cd files && echo > notes@/ops/list/call");
    assert!(!out.status.success());
    let out = m.sh("cd files && echo x > notes");
    assert!(!out.status.success(), "made where a hidden folder is");
    assert_eq!(
        std::fs::read_to_string(m.root.join("notes/todo.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
}

/// A hidden path is no search hit, no known entry and no `locate` answer, and a folder
/// holding one cannot be removed or moved without showing it.
#[test]
fn a_hidden_subtree_is_no_search_hit_nor_known_and_its_folder_stays_put() {
    let manifest = r#"
[[host]]
kind = "files"
path = "files"

[[host]]
kind = "search"
path = "search"

[[policy]]
match = "files/box/inner/**"
action = "hide"
"#;
    let root = tempfile::tempdir().unwrap();
    project(root.path());
    std::fs::create_dir_all(root.path().join("box/inner")).unwrap();
    std::fs::write(root.path().join("box/inner/s.txt"), "zebrafish secret\n").unwrap();
    std::fs::write(root.path().join("box/open.txt"), "zebrafish open\n").unwrap();
    let m = Mount::start_in(Some(manifest), root, tempfile::tempdir().unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !m.read("search/description").contains("up to date") {
        assert!(std::time::Instant::now() < deadline, "never indexed");
        std::thread::sleep(Duration::from_millis(100));
    }
    m.ok("echo zebrafish > search/ops/search/call");
    let hits = m.ok("cat search/ops/search/result");
    assert!(hits.contains("files/box/open.txt"), "{hits}");
    assert!(
        !hits.contains("inner") && !hits.contains("secret"),
        "{hits}"
    );
    m.ok("cat files/box/open.txt@/description > /dev/null; echo zebra > ops/locate/call");
    let known = m.ok("cat .wip/known; cat ops/locate/result");
    assert!(!known.contains("inner"), "{known}");
    // The folder that holds it looks as if it held only open.txt, yet cannot go unseen.
    assert_eq!(m.ok("ls -A files/box"), "open.txt\n");
    for (what, script) in [
        ("rm -rf", "rm -rf files/box"),
        ("mv", "mv files/box files/moved"),
    ] {
        let out = m.sh(script);
        assert!(!out.status.success(), "{what} went through");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{what}: {err}");
    }
    let said =
        m.ok("cat files/box@/ops/rmdir/result files/box@/ops/rename/result 2>/dev/null; true");
    assert!(said.contains("hides"), "the words say why: {said}");
    assert_eq!(
        std::fs::read_to_string(m.root.join("box/inner/s.txt")).unwrap(),
        "zebrafish secret\n"
    );
}

#[test]
fn unrecorded_paths_are_judged_but_not_journaled() {
    let manifest = r#"
[[host]]
kind = "files"
path = "files"
unrecorded = ["crate/target/**", "**/__pycache__/**"]
"#;
    let m = mount_project(Some(manifest));
    m.ok("cd files/crate && cargo build -q --offline && python3 -c 'import sys; sys.path.insert(0, \"..\"); import calc' && echo x > ../kept.txt");
    let runs = runs(&m);
    assert!(
        runs.iter().any(|(p, ..)| p == "/files/kept.txt@"),
        "{runs:?}"
    );
    assert!(
        !runs
            .iter()
            .any(|(p, ..)| p.contains("/target/") || p.contains("__pycache__")),
        "{runs:#?}"
    );
}

/// Eight agents at once in one folder, each making, appending to and renaming its own
/// files and then removing them by a glob: each glob sees exactly the agent's own files
/// (a listing paged by one walk is never another's), nothing is left, and every change
/// is one run.
#[test]
fn eight_agents_changing_one_folder_at_once_each_see_their_own_files() {
    let m = mount_project(None);
    let out = m.sh(
        "cd files && mkdir shared && cd shared && \
         for a in 1 2 3 4 5 6 7 8; do \
           ( for i in $(seq 1 60); do echo \"agent $a line $i\" > a$a-$i.txt; echo more >> a$a-$i.txt; \
               mv a$a-$i.txt b$a-$i.txt; done; ls b$a-*.txt | wc -l; rm b$a-*.txt ) & \
         done; wait; ls -A | wc -l",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.is_empty(), "{text}{err}");
    let counts: Vec<&str> = text.lines().collect();
    assert_eq!(counts.len(), 9, "{text}");
    assert!(
        counts[..8].iter().all(|c| *c == "60"),
        "each agent saw its 60 files: {text}"
    );
    assert_eq!(counts[8], "0", "nothing left: {text}");
    assert_eq!(std::fs::read_dir(m.root.join("shared")).unwrap().count(), 0);
    let runs = runs(&m);
    for (op, want) in [
        ("create", 480),
        ("write", 960),
        ("rename", 480),
        ("remove", 480),
    ] {
        let n = runs
            .iter()
            .filter(|(p, o, _, s)| p.starts_with("/files/shared/") && o == op && s == "ok")
            .count();
        assert_eq!(n, want, "{op} runs");
    }
}
