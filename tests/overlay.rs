//! A files host in overlay mode: programs work in a layer, the root is never written
//! through the mount, `diff` shows what is pending, `apply` (under an approve rule, signed
//! off with `wip approve`) writes it, `discard` drops it. Driven with bash, python, cargo
//! and git inside the mount.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{wait_until, Mount};

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
    w("notes/todo.txt", "one\ntwo\n");
    w("old/gone.txt", "bye\n");
}

const MANIFEST: &str = r#"
[[host]]
kind = "files"
path = "files"
overlay = true

[[policy]]
match = "files@/ops/apply"
action = "approve"
"#;

fn mount(manifest: &str) -> Mount {
    let root = tempfile::tempdir().unwrap();
    project(root.path());
    let state = tempfile::tempdir().unwrap();
    Mount::start_in(Some(manifest), root, state)
}

fn copy_of(dir: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let out = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", dir.display()))
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

#[test]
fn programs_work_in_the_layer_and_the_root_stays_as_it_was_until_a_person_applies() {
    let m = mount(MANIFEST);
    let pristine = copy_of(&m.root);
    let out = m.ok(
        "cd files && python3 -m unittest -q 2>&1 | tail -1 && \
         (cd crate && CARGO_TARGET_DIR=target cargo test -q --offline 2>&1 | grep 'test result') && \
         sed -i 's/a + b/b + a/' calc.py && echo three >> notes/todo.txt && rm -r old && \
         mkdir -p new/deep && echo leaf > new/deep/leaf.txt && chmod 755 test_calc.py && \
         mv notes notes2 && ls && stat -c %i calc.py",
    );
    assert!(
        out.contains("OK") && out.contains("test result: ok"),
        "{out}"
    );
    // A file changed in place is copied up under the same inode number (git compares it).
    let inos = m.ok("cd files && stat -c %i crate/Cargo.toml && echo '# more' >> crate/Cargo.toml && stat -c %i crate/Cargo.toml");
    let inos: Vec<&str> = inos.lines().collect();
    assert_eq!(inos[0], inos[1], "st_ino across a copy-up");
    assert_eq!(
        std::fs::read_to_string(m.root.join("crate/Cargo.toml")).unwrap(),
        std::fs::read_to_string(pristine.path().join("crate/Cargo.toml")).unwrap()
    );
    // The root is untouched: byte for byte.
    if let Err(d) = same_tree(pristine.path(), &m.root) {
        panic!("the root changed:\n{d}");
    }
    // diff lists the pending changes, as git prints them.
    m.call("files@/ops/diff", "{}").unwrap();
    let diff = m.result("files@/ops/diff");
    for want in [
        "diff --git a/calc.py b/calc.py",
        "-    return a + b",
        "+    return b + a",
        "deleted file mode 100644\n--- a/old/gone.txt",
        "new file mode 100644\n--- /dev/null\n+++ b/new/deep/leaf.txt",
        "+++ b/notes2/todo.txt",
        "old mode 100644\nnew mode 100755",
        "crate/target/",
    ] {
        assert!(diff.contains(want), "no {want:?} in:\n{diff}");
    }
    // apply waits for a person (asked from an agent's own session).
    let result = m.ok(
        "setsid -w bash -c \"echo '{}' > files@/ops/apply/call 2>/dev/null; cat files@/ops/apply/result\"",
    );
    let run = result
        .split("waits as the pending run ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{result}"))
        .to_string();
    assert!(
        same_tree(pristine.path(), &m.root).is_ok(),
        "nothing before the sign-off"
    );
    // A person, from another session (the test's own).
    let out = m.sh(&format!("{} approve {run}", common::WIP));
    assert!(out.status.success(), "{out:?}");
    // Now the root is the merged view (the layer as programs saw it).
    let merged = m.path("files");
    if let Err(d) = same_tree(&merged, &m.root) {
        panic!("the root is not the merged view after apply:\n{d}");
    }
    m.call("files@/ops/diff", "{}").unwrap();
    assert!(
        m.result("files@/ops/diff").contains("no pending changes"),
        "{}",
        m.result("files@/ops/diff")
    );
}

#[test]
fn discard_leaves_the_root_untouched_and_the_layer_is_the_root_again() {
    let m = mount("[[host]]\nkind = \"files\"\npath = \"files\"\noverlay = true\n");
    let pristine = copy_of(&m.root);
    m.ok(
        "cd files && echo x > calc.py && rm test_calc.py && mkdir z && echo y > z/y && mv notes n",
    );
    let d = m.call("files@/ops/discard", "{}");
    assert!(d.is_ok(), "{d:?}: {}", m.result("files@/ops/discard"));
    assert!(
        m.result("files@/ops/discard").starts_with("discarded "),
        "{}",
        m.result("files@/ops/discard")
    );
    assert!(same_tree(pristine.path(), &m.root).is_ok());
    if let Err(d) = same_tree(&m.path("files"), &m.root) {
        panic!("the view is not the root after discard:\n{d}");
    }
    // An outside change to the root meanwhile is a conflict apply names.
    m.ok("cd files && echo mine > calc.py");
    std::fs::write(m.root.join("calc.py"), "outside\n").unwrap();
    assert!(m.call("files@/ops/apply", "{}").is_err());
    let r = m.result("files@/ops/apply");
    assert!(r.contains("calc.py (changed in the root since)"), "{r}");
    assert_eq!(
        std::fs::read_to_string(m.root.join("calc.py")).unwrap(),
        "outside\n"
    );
    let forced = m.call("files@/ops/apply", r#"{"force": true}"#);
    assert!(
        forced.is_ok(),
        "{forced:?}: {}",
        m.result("files@/ops/apply")
    );
    assert_eq!(
        std::fs::read_to_string(m.root.join("calc.py")).unwrap(),
        "mine\n"
    );
}

#[test]
fn a_kill_mid_apply_leaves_each_file_old_or_new_and_the_run_settled() {
    let root = tempfile::tempdir().unwrap();
    project(root.path());
    for i in 0..400 {
        std::fs::write(
            root.path().join(format!("f{i:03}.txt")),
            format!("old {i}\n"),
        )
        .unwrap();
    }
    let state = tempfile::tempdir().unwrap();
    let mut m = Mount::start_in(
        Some("[[host]]\nkind = \"files\"\npath = \"files\"\noverlay = true\n"),
        root,
        state,
    );
    m.ok("cd files && for i in $(seq -w 0 399); do printf 'new %d\\n' $((10#$i)) > f$i.txt; done");
    let caller = {
        let call = m.path("files@/ops/apply/call");
        std::thread::spawn(move || std::fs::write(call, "{}"))
    };
    wait_until("the apply is under way", Duration::from_secs(60), || {
        std::fs::read_dir(&m.root)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with('f'))
            .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.starts_with("new")))
    });
    m.kill_daemon();
    let _ = caller.join();
    for i in 0..400 {
        let text = std::fs::read_to_string(m.root.join(format!("f{i:03}.txt"))).unwrap();
        assert!(
            text == format!("old {i}\n") || text == format!("new {i}\n"),
            "f{i:03}.txt is torn: {text:?}"
        );
    }
    let out = common::wip_command()
        .arg("umount")
        .arg(&m.mount)
        .output()
        .unwrap();
    assert!(out.status.success());
    m.remount();
    let db = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    let (status, result): (String, String) = db
        .query_row(
            "SELECT status, result FROM calls WHERE op = 'apply' ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_ne!(status, "running", "{result}");
    assert_ne!(status, "interrupted", "settled with words: {result}");
    // The rest applies now.
    m.call("files@/ops/apply", "{}").unwrap();
    for i in 0..400 {
        assert_eq!(
            std::fs::read_to_string(m.root.join(format!("f{i:03}.txt"))).unwrap(),
            format!("new {i}\n")
        );
    }
}
