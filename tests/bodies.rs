//! Bodies through a real mount: every tool that reads files reads the world's content, and
//! writing a body is one journaled call. Driven with `bash -c` as an agent or a person would.

mod common;

use common::Mount;

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
fn a_file_body_is_the_file_byte_for_byte() {
    let (m, big) = mount_with_files();
    let root = m.root.display().to_string();
    m.ok(&format!(
        "cmp files/hello.txt/body {root}/hello.txt && cmp files/small.bin/body {root}/small.bin \
         && cmp files/big.bin/body {root}/big.bin"
    ));
    // The size is the file's, and a read by offset reads from there.
    assert_eq!(
        m.ok("stat -c %s files/big.bin/body").trim(),
        big.len().to_string()
    );
    let tail = m.ok("tail -c 16 files/big.bin/body | od -An -tx1 | tr -d ' \\n'");
    let want: String = big[big.len() - 16..]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(tail, want);
    // cp and file behave as on regular files; a directory has no body.
    m.ok("cp files/hello.txt/body /tmp/$$.copy && cmp /tmp/$$.copy files/hello.txt/body; rm -f /tmp/$$.copy");
    assert!(m.ok("file files/hello.txt/body").contains("text"));
    assert!(!m.sh("test -e files/src/body").status.success());
    // The body's mtime is the file's.
    assert_eq!(
        m.ok(&format!(
            "stat -c %Y files/hello.txt/body {root}/hello.txt | uniq | wc -l"
        ))
        .trim(),
        "1"
    );
}

#[test]
fn grep_finds_content_and_reading_bodies_makes_no_call() {
    let m = Mount::start(None);
    let before = m.journal_count();
    let hits = m.ok("grep -r println files/");
    assert_eq!(hits.trim(), "files/src/main.rs/body:    println!(\"hi\");");
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
    // Every body read succeeds (a table without a first row has none: the glob skips it).
    m.ok(
        "shopt -s nullglob; cat tracker/issues/42/comments/1/body > /dev/null && \
          for b in db/*/tables/*/rows/1/body; do cat \"$b\" > /dev/null || exit 1; done",
    );
    // One call: the read_body above; reading bodies added none.
    assert_eq!(m.journal_count(), before + 1);
}

#[test]
fn writing_a_body_is_one_journaled_call_with_guards() {
    let m = Mount::start(None);
    let before = m.journal_count();
    m.ok("printf 'one\\n' > files/hello.txt/body; printf 'two\\n' >> files/hello.txt/body");
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(m.journal_count(), before + 2, "one call per command");
    let log = m.read(".wip/log");
    let last = log.lines().next().unwrap();
    assert!(last.contains("/files/hello.txt write"), "{last}");
    assert!(last.contains(r#"args={"content":"one\ntwo\n"}"#), "{last}");
    // Python's open('w'), and cat > body.
    m.ok("python3 -c \"open('files/hello.txt/body', 'w').write('from python\\n')\"");
    m.ok("echo 'cat wrote this' | cat > files/hello.txt/body");
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "cat wrote this\n"
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
    // sed -i needs a temporary file beside the body: it fails, clearly, and changes
    // nothing (no content, no call).
    let calls = m.journal_count();
    let sed = m.sh("sed -i s/a/b/ files/hello.txt/body");
    assert!(!sed.status.success());
    assert!(
        String::from_utf8_lossy(&sed.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&sed.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "cat wrote this\n"
    );
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
fn a_bad_body_write_is_refused_at_close_with_its_errno() {
    let m = Mount::start(None);
    // Not UTF-8: the files host's write takes text. /bin/cat hears the close's errno.
    let out = m.sh("printf '\\377\\376' | cat > files/hello.txt/body");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Invalid argument"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "hello\nworld\n",
        "nothing was written"
    );
    assert!(m.result("files/hello.txt/ops/write").contains("not UTF-8"));
}

#[test]
fn saving_from_vim_reaches_the_file() {
    let m = Mount::start(None);
    // One save is one call: a write of the whole file, journaled once.
    let writes = |m: &Mount| {
        m.read(".wip/log")
            .lines()
            .filter(|l| l.contains("/files/hello.txt write"))
            .count()
    };
    let (calls, before) = (m.journal_count(), writes(&m));
    m.ok("HOME=$(mktemp -d) timeout 60 vim -N -u NONE -es -c 'normal! Goadded in vim' -c wq files/hello.txt/body </dev/null");
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "hello\nworld\nadded in vim\n"
    );
    assert_eq!(writes(&m), before + 1, "one save, one write call");
    assert_eq!(m.journal_count(), calls + 1, "and no other call");
    // With the distribution's defaults (backups, swap files) too.
    let calls = m.journal_count();
    m.ok("HOME=$(mktemp -d) timeout 60 vim -es -c 'normal! Goand again' -c wq files/hello.txt/body </dev/null");
    assert!(std::fs::read_to_string(m.root.join("hello.txt"))
        .unwrap()
        .ends_with("added in vim\nand again\n"));
    assert_eq!(writes(&m), before + 2, "one save, one write call");
    assert_eq!(m.journal_count(), calls + 1, "and no other call");
}

#[test]
fn access_modes_and_chmod_tell_the_truth() {
    let m = Mount::start(None);
    m.ok("test -r tracker/issues/42/description && ! test -w tracker/issues/42/description");
    m.ok("! test -x tracker/issues/42/description && test -x tracker/issues/42");
    m.ok("test -w files/hello.txt/body && test -w tracker/issues/42/body");
    assert_eq!(
        m.ok("stat -c %A tracker/issues/42/description").trim(),
        "-r--r--r--"
    );
    let out = m.sh("chmod 600 tracker/issues/42/description");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"));
    // A change that is already so takes effect: it succeeds.
    m.ok("chmod 444 tracker/issues/42/description");
}

#[test]
fn read_only_bodies_have_mode_r_and_refuse_writers() {
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
    assert_eq!(m.ok("stat -c %A files/hello.txt/body").trim(), "-r--r--r--");
    m.ok("! test -w files/hello.txt/body");
    let out = m.sh("echo x > files/hello.txt/body");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    assert_eq!(m.journal_count(), 0, "refused at open, before any call");
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
    assert_eq!(
        m.ok("getfattr --only-values -n user.wip.ref files/hello.txt/body"),
        format!("file://{}/hello.txt", m.root.display())
    );
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
        "HOME=$(mktemp -d) timeout 60 python3 {} files/hello.txt/body",
        m.state.join("mcedit.py").display()
    ));
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "typed in mcedit hello\nworld\n"
    );
    assert_eq!(m.journal_count(), 1, "one save, one call");
}

/// A body write cut short (too large for `max_call_bytes`) replaces nothing: the writer
/// hears EFBIG, the close runs no call with the part that fit, and the file is intact.
#[test]
fn a_body_write_refused_midway_replaces_nothing() {
    let m = Mount::start(None);
    let before = m.journal_count();
    let out = m.sh("head -c 9437184 /dev/zero | tr '\\0' x > files/hello.txt/body");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("File too large"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "hello\nworld\n"
    );
    let result = m.result("files/hello.txt/ops/write");
    assert!(
        result.contains("max_call_bytes") && result.contains("nothing was run"),
        "{result}"
    );
    assert_eq!(m.journal_count(), before + 1, "one refusal, no write");
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
