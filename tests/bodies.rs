//! Bodies and files through a real mount: every tool that reads files reads the world's
//! content; writing a body is one journaled call, writing a file of a files host its runs.
//! Driven with `bash -c` as an agent or a person would.

mod common;

use common::Mount;
use std::os::unix::fs::PermissionsExt;

/// A mount whose files host holds a text file, a binary file and a file over 3 MB.
fn mount_with_files() -> (Mount, Vec<u8>) {
    let m = Mount::start(None);
    let big: Vec<u8> = (0..3_500_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(m.root.join("big.bin"), &big).unwrap();
    std::fs::write(m.root.join("small.bin"), [0u8, 159, 146, 150, 0, 255, 10]).unwrap();
    (m, big)
}

#[test]
fn a_file_is_the_file_byte_for_byte() {
    let (m, big) = mount_with_files();
    let root = m.root.display().to_string();
    m.ok(&format!(
        "cmp files/hello.txt {root}/hello.txt && cmp files/small.bin {root}/small.bin \
         && cmp files/big.bin {root}/big.bin"
    ));
    // The size is the file's, and a read by offset reads from there.
    assert_eq!(
        m.ok("stat -c %s files/big.bin").trim(),
        big.len().to_string()
    );
    let tail = m.ok("tail -c 16 files/big.bin | od -An -tx1 | tr -d ' \\n'");
    let want: String = big[big.len() - 16..]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(tail, want);
    // cp and file behave as on regular files; a folder holds its children, no body.
    m.ok("cp files/hello.txt /tmp/$$.copy && cmp /tmp/$$.copy files/hello.txt; rm -f /tmp/$$.copy");
    assert!(m.ok("file files/hello.txt").contains("text"));
    assert!(!m.sh("test -e files/src/body").status.success());
    assert!(!m.sh("test -e files/hello.txt/body").status.success());
    // Its mode, owner and times are the file's.
    assert_eq!(
        m.ok(&format!(
            "stat -c '%Y %a %u' files/hello.txt {root}/hello.txt | uniq | wc -l"
        ))
        .trim(),
        "1"
    );
}

/// The working tree's runs in the journal (read through the mount first, which writes
/// what is queued): (path, op, command) of each.
fn tree_runs(m: &Mount) -> Vec<(String, String, String)> {
    m.ok("cat .wip/status > /dev/null");
    let db = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    let mut st = db
        .prepare("SELECT path, op, command FROM calls WHERE path LIKE '/files%' ORDER BY id")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn grep_finds_content_and_reading_makes_no_call() {
    let m = Mount::start(None);
    let before = m.journal_count();
    let hits = m.ok("grep -r println files/");
    assert_eq!(hits.trim(), "files/src/main.rs:    println!(\"hi\");");
    let crash = m.ok("grep -l -i crash tracker/issues/*/body");
    assert!(
        crash.lines().any(|l| l == "tracker/issues/42/body"),
        "{crash}"
    );
    // The issue's body is its markdown, as read_body shows it (without the header).
    m.ok("echo > tracker/issues/42/ops/read_body/call");
    let shown = m.result("tracker/issues/42/ops/read_body");
    let body = m.read("tracker/issues/42/body");
    assert!(shown.contains(body.trim_end()), "{shown}\n---\n{body}");
    // Every read succeeds (a table without a first row has none: the glob skips it).
    m.ok(
        "shopt -s nullglob; cat tracker/issues/42/comments/1/body files/hello.txt > /dev/null && \
          for b in db/*/tables/*/rows/1/body; do cat \"$b\" > /dev/null || exit 1; done && \
          cat files/hello.txt@/description files/src@/ops/list/guard > /dev/null",
    );
    // One call: the read_body above; reading added none, in the tree neither.
    assert_eq!(m.journal_count(), before + 1);
    assert!(tree_runs(&m).is_empty(), "{:?}", tree_runs(&m));
}

#[test]
fn writing_a_file_is_a_run_and_a_body_one_journaled_call_with_guards() {
    let m = Mount::start(None);
    m.ok("printf 'one\\n' > files/hello.txt; printf 'two\\n' >> files/hello.txt");
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "one\ntwo\n"
    );
    let writes = |m: &Mount| {
        tree_runs(m)
            .into_iter()
            .filter(|(p, o, _)| p == "/files/hello.txt@" && o == "write")
            .count()
    };
    assert_eq!(writes(&m), 2, "one run per command");
    // The kernel sends a descriptor's last close (RELEASE) after `close(2)` returns, so
    // two commands in a row may be recorded in either order, and the first may find the
    // second's bytes already there: each run's hash is that of the size it records.
    let both = m.ok(
        "for n in 1 2; do cat files/hello.txt@/ops/write/runs/$n/result files/hello.txt@/ops/write/runs/$n/args; echo @@; done",
    );
    let runs: Vec<&str> = both.split("@@").filter(|r| r.contains("bytes")).collect();
    assert_eq!(runs.len(), 2, "{both}");
    for run in &runs {
        if run.contains(" 4 bytes") {
            assert!(
                run.contains("2c8b08da5ce60398e1f19af0e5dccc744df274b826abe585eaba68c525434806"),
                "the hash of the 4 bytes it records: {run}"
            );
        }
    }
    let result = runs
        .iter()
        .find(|r| r.contains(" 8 bytes"))
        .unwrap_or_else(|| panic!("no run of 8 bytes: {both}"));
    // The sha256 of what the file holds after the second command, never its bytes.
    assert!(
        result.contains("c3f9c8c283a2b1f2f1896f27a01cbe3cddc0c9d93f752e4639035a0f5b36f6e8"),
        "{result}"
    );
    assert!(!result.contains("two"), "{result}");
    // Python's open('w'), cat >, and sed -i (a new file renamed over it): each its runs.
    m.ok("python3 -c \"open('files/hello.txt', 'w').write('from python\\n')\"");
    m.ok("echo 'cat wrote this' | cat > files/hello.txt");
    assert_eq!(writes(&m), 4);
    m.ok("sed -i s/wrote/made/ files/hello.txt");
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "cat made this\n"
    );
    assert!(
        tree_runs(&m)
            .iter()
            .any(|(p, o, c)| p == "/files/hello.txt@" && o == "rename" && c.starts_with("sed")),
        "{:?}",
        tree_runs(&m)
    );
    // A tracker issue's text, edited through its body: the guard is on the run.
    m.ok("printf 'Rewritten through the body.\\n' > tracker/issues/42/body");
    assert_eq!(
        m.read("tracker/issues/42/body"),
        "Rewritten through the body.\n"
    );
    let guard = m.ok("cat tracker/issues/42/ops/edit_body/runs/*/guard");
    assert!(guard.starts_with("allowed\n✓ can_write"), "{guard}");
    // What cannot be written says so: EACCES on read-only files.
    let out = m.sh("echo x > tracker/issues/42/description");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    // sed -i on a body needs a temporary file beside it, which the tracker's tree refuses:
    // it fails, clearly, and changes nothing (no content, no call).
    let calls = m.journal_count();
    let text = m.read("tracker/issues/42/body");
    let sed = m.sh("sed -i s/a/b/ tracker/issues/42/body");
    assert!(!sed.status.success());
    assert!(
        String::from_utf8_lossy(&sed.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&sed.stderr)
    );
    assert_eq!(m.read("tracker/issues/42/body"), text);
    assert_eq!(m.journal_count(), calls, "sed -i made no call");
    // A body whose write the guard refuses (an issue's text, for a reader): the writer
    // hears it, and the text is as it was.
    let reader = Mount::start(Some(
        "[identity]\nuser = \"rita\"\nrole = \"reader\"\n[[host]]\nkind = \"tracker\"\npath = \"tracker\"\n",
    ));
    let text = reader.read("tracker/issues/42/body");
    let calls = reader.journal_count();
    let out = reader.sh("printf 'changed by a reader\\n' > tracker/issues/42/body");
    assert!(!out.status.success(), "a refused body write succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Permission denied") || err.contains("Operation not permitted"),
        "{err}"
    );
    assert_eq!(reader.read("tracker/issues/42/body"), text);
    assert!(
        reader.journal_count() <= calls + 1,
        "at most the refusal is journaled"
    );
}

#[test]
fn a_bad_body_write_is_refused_at_close_with_its_errno_and_a_file_takes_any_bytes() {
    let m = Mount::start(None);
    // Not UTF-8: the tracker's edit_body takes text. /bin/cat hears the close's errno.
    let text = m.read("tracker/issues/42/body");
    let out = m.sh("printf '\\377\\376' | cat > tracker/issues/42/body");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Invalid argument"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        m.read("tracker/issues/42/body"),
        text,
        "nothing was written"
    );
    assert!(m
        .result("tracker/issues/42/ops/edit_body")
        .contains("UTF-8"));
    // A file is bytes: any.
    m.ok("printf '\\377\\376' > files/hello.txt");
    assert_eq!(
        std::fs::read(m.root.join("hello.txt")).unwrap(),
        [0xff, 0xfe]
    );
}

#[test]
fn saving_from_vim_reaches_the_file_as_its_runs() {
    let m = Mount::start(None);
    let by_vim = |m: &Mount| {
        tree_runs(m)
            .into_iter()
            .filter(|(_, _, c)| c.contains("vim"))
            .collect::<Vec<_>>()
    };
    m.ok("HOME=$(mktemp -d) timeout 60 vim -N -u NONE -es -c 'normal! Goadded in vim' -c wq files/hello.txt </dev/null");
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "hello\nworld\nadded in vim\n"
    );
    let runs = by_vim(&m);
    assert!(
        runs.iter()
            .any(|(p, o, _)| p == "/files/hello.txt@" && (o == "write" || o == "rename")),
        "the save is a run of hello.txt: {runs:?}"
    );
    // With the distribution's defaults (backups, swap files) too: what vim makes beside
    // the file is runs too, and the file holds the save.
    m.ok("HOME=$(mktemp -d) timeout 60 vim -es -c 'normal! Goand again' -c wq files/hello.txt </dev/null");
    assert!(std::fs::read_to_string(m.root.join("hello.txt"))
        .unwrap()
        .ends_with("added in vim\nand again\n"));
    assert!(by_vim(&m).len() > runs.len());
    // Nothing is left beside it natively neither: a swap file is removed at the end.
    assert!(!m.root.join(".hello.txt.swp").exists());
}

#[test]
fn access_modes_and_chmod_tell_the_truth() {
    let m = Mount::start(None);
    m.ok("test -r tracker/issues/42/description && ! test -w tracker/issues/42/description");
    m.ok("! test -x tracker/issues/42/description && test -x tracker/issues/42");
    m.ok("test -w files/hello.txt && test -w tracker/issues/42/body && ! test -x files/hello.txt");
    assert_eq!(
        m.ok("stat -c %A tracker/issues/42/description").trim(),
        "-r--r--r--"
    );
    let out = m.sh("chmod 600 tracker/issues/42/description");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"));
    // A change that is already so takes effect: it succeeds.
    m.ok("chmod 444 tracker/issues/42/description");
    // A file's mode is its own, and chmod changes it (a run).
    m.ok("chmod 750 files/hello.txt && test -x files/hello.txt");
    assert_eq!(m.ok("stat -c %a files/hello.txt").trim(), "750");
    assert_eq!(
        std::fs::metadata(m.root.join("hello.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o750
    );
}

#[test]
fn a_read_only_host_refuses_writers_at_open_and_says_so() {
    let m = Mount::start(Some(
        r#"
[world]
name = "ro"
[[host]]
kind = "files"
path = "files"
read_only = true
"#,
    ));
    m.ok("! test -w files/hello.txt && test -r files/hello.txt");
    let out = m.sh("echo x > files/hello.txt");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    for script in [
        "rm files/hello.txt",
        "mkdir files/new",
        "touch files/hello.txt",
        "mv files/hello.txt files/x",
    ] {
        let out = m.sh(script);
        assert!(!out.status.success(), "{script}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "{script}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "hello\nworld\n"
    );
    let result = m.ok("cat files/hello.txt@/ops/write/result");
    assert!(result.contains("read-only"), "{result}");
    let guard = m.ok("cat files/hello.txt@/ops/write/guard");
    assert!(
        guard.starts_with("blocked") && guard.contains("read-only"),
        "{guard}"
    );
}

#[test]
fn an_issue_mtime_moves_when_it_changes() {
    let m = Mount::start(None);
    let mtime = |p: &str| {
        m.ok(&format!("stat -c %Y {p}"))
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = mtime("tracker/issues/42");
    let listing_before = mtime("tracker/issues/42/comments");
    assert_eq!(mtime("tracker/issues/42/description"), before);
    // A second later than the mount's start and anything seeded: a time that is the
    // mount's start (or stayed put) cannot pass for the call's.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let called = now();
    m.call("tracker/issues/42/ops/comment", "seen it too\n")
        .unwrap();
    let done = now();
    let after = mtime("tracker/issues/42");
    assert!(
        after > before && after >= called,
        "{before} → {after} (called at {called})"
    );
    assert_eq!(mtime("tracker/issues/42/description"), after);
    assert_eq!(mtime("tracker/issues/42/body"), after);
    // A folder's time moves with its listing: the comments it lists.
    let listing = mtime("tracker/issues/42/comments");
    assert!(
        listing > listing_before && listing >= called,
        "{listing_before} → {listing}"
    );
    // A run's time is its end; result shows the caller's last call; the change feed its
    // last event: each the call's moment, not the mount's.
    for p in [
        "tracker/issues/42/ops/comment/runs/1",
        "tracker/issues/42/ops/comment/runs/1/status",
        "tracker/issues/42/ops/comment/result",
        ".wip/events",
    ] {
        let t = mtime(p);
        assert!(
            t >= called && t <= done,
            "{p}: {t}, the call ran {called}..={done}"
        );
    }
}

#[test]
fn xattrs_are_the_description_and_the_ref() {
    let m = Mount::start(None);
    let out = m.ok("getfattr -d tracker/issues/42");
    assert!(
        out.contains("user.xdg.comment=\"Issue #42 · open · Crash when config is missing"),
        "{out}"
    );
    assert!(
        out.contains("user.wip.ref=\"tracker://demo/issues/42\""),
        "{out}"
    );
    // A file's entry has them; the file itself keeps its own xattrs.
    assert_eq!(
        m.ok("getfattr --only-values -n user.wip.ref files/hello.txt@"),
        format!("file://{}/hello.txt", m.root.display())
    );
    m.ok("setfattr -n user.mine -v 1 files/hello.txt && getfattr --only-values -n user.mine files/hello.txt | grep -qx 1");
    assert!(!m
        .sh("getfattr -n user.wip.ref files/hello.txt")
        .status
        .success());
    let set = m.sh("setfattr -n user.x -v 1 tracker/issues/42");
    assert!(!set.status.success());
    assert!(String::from_utf8_lossy(&set.stderr).contains("Operation not permitted"));
}

#[test]
fn saving_from_mcedit_reaches_the_file() {
    let m = Mount::start(None);
    // mcedit needs a terminal: drive it through a pty as a person would (type, F2, Enter
    // to confirm, F10).
    let script = r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.environ['TERM'] = 'xterm'
    os.execvp('mcedit', ['mcedit', sys.argv[1]])
def drain(t):
    end = time.time() + t
    while time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try: os.read(fd, 65536)
            except OSError: return
drain(2)
for keys, wait in [(b'typed in mcedit ', 0.5), (b'\x1b[12~', 1), (b'\r', 1.5), (b'\x1b[21~', 1)]:
    os.write(fd, keys)
    drain(wait)
os.kill(pid, 9)
"#;
    std::fs::write(m.state.join("mcedit.py"), script).unwrap();
    m.ok(&format!(
        "HOME=$(mktemp -d) timeout 60 python3 {} files/hello.txt",
        m.state.join("mcedit.py").display()
    ));
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "typed in mcedit hello\nworld\n"
    );
    assert!(
        tree_runs(&m)
            .iter()
            .any(|(p, _, c)| p == "/files/hello.txt@" && c.contains("mcedit")),
        "the save is a run: {:?}",
        tree_runs(&m)
    );
}

/// A body write cut short (too large for `max_call_bytes`) replaces nothing: the writer
/// hears EFBIG, the close runs no call with the part that fit, and the text is intact. A
/// file takes what its file system takes.
#[test]
fn a_body_write_refused_midway_replaces_nothing() {
    let m = Mount::start(None);
    let before = m.journal_count();
    let text = m.read("tracker/issues/42/body");
    let out = m.sh("head -c 9437184 /dev/zero | tr '\\0' x > tracker/issues/42/body");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("File too large"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(m.read("tracker/issues/42/body"), text);
    let result = m.result("tracker/issues/42/ops/edit_body");
    assert!(
        result.contains("max_call_bytes") && result.contains("nothing was run"),
        "{result}"
    );
    assert_eq!(m.journal_count(), before + 1, "one refusal, no write");
    m.ok("head -c 9437184 /dev/zero | tr '\\0' x > files/hello.txt");
    assert_eq!(
        std::fs::metadata(m.root.join("hello.txt")).unwrap().len(),
        9_437_184
    );
}

/// What cannot change says so with the errno tools expect: removing or setting an xattr is
/// EPERM, an xattr that is not there ENODATA, chown and chgrp EPERM, touching a read-only
/// file EACCES, setting its times EPERM; the access time is the change time (the mount is
/// noatime: reading moves no time).
#[test]
fn xattrs_times_and_ownership_refuse_what_cannot_change() {
    let m = Mount::start(None);
    let refused = |script: &str, words: &str| {
        let out = m.sh(script);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{script} succeeded");
        assert!(err.contains(words), "{script}: {err}");
    };
    refused(
        "setfattr -x user.xdg.comment tracker/issues/42",
        "Operation not permitted",
    );
    refused(
        "setfattr -n user.mine -v 1 tracker/issues/42",
        "Operation not permitted",
    );
    refused(
        "getfattr -n user.nope tracker/issues/42",
        "No such attribute",
    );
    refused(
        "chown 1234 tracker/issues/42/description",
        "Operation not permitted",
    );
    refused("chgrp 1234 tracker/issues/42", "Operation not permitted");
    refused("touch tracker/issues/42/description", "Permission denied");
    refused(
        "python3 -c \"import os; os.utime('tracker/issues/42/description', (0, 0))\"",
        "Operation not permitted",
    );
    // The description xattr is still there after the refused removal.
    assert!(m
        .ok("getfattr --only-values -n user.xdg.comment tracker/issues/42")
        .starts_with("Issue #42"));
    let times = || m.ok("stat -c '%X %Y' tracker/issues/42/description");
    let before = times();
    let (atime, mtime) = before.trim().split_once(' ').unwrap();
    assert_eq!(atime, mtime, "atime is mtime");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    m.ok("cat tracker/issues/42/description > /dev/null");
    assert_eq!(times(), before, "a read moved a time");
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let line = mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(m.mount.to_str().unwrap()))
        .unwrap();
    assert!(line.contains("noatime"), "{line}");
}
