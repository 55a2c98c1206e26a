//! A world walks like a directory tree: `ops` is a link to an unlisted `.ops`, so `find`,
//! `grep -r`, `du`, `tar` and `rsync -a` see content only, while everything an agent does
//! through `ENTRY/ops/…` works as before, and every spelling of an op's path (`ops/`,
//! `.ops/`, a titled name, a symlink made elsewhere) is the same op under the same rules.

mod common;

use common::Mount;

const POLICY: &str = r#"
[world]
name = "walk"

[[host]]
kind = "tracker"
path = "tracker"
seed = "demo"

[[policy]]
match = "tracker/issues/*/ops/close"
action = "deny"
reason = "issues are closed by the release process"

[[policy]]
match = "tracker/issues/*/ops/comment"
action = "approve"
"#;

#[test]
fn walkers_see_content_and_ops_work_through_the_link() {
    let m = Mount::start(None);
    // The link and what it leads to.
    assert_eq!(m.ok("readlink tracker/issues/42/ops"), ".ops\n");
    assert_eq!(m.ok("stat -c %F tracker/issues/42/ops"), "symbolic link\n");
    let listing = m.ok("ls -a tracker/issues/42");
    assert!(listing.lines().any(|l| l == "ops"), "{listing}");
    assert!(!listing.lines().any(|l| l == ".ops"), "{listing}");
    assert!(m.ok("ls tracker/issues/42/ops/").contains("close"));
    assert!(m.ok("ls tracker/issues/42/.ops/").contains("close"));
    assert!(m.ok("ls ops/").contains("locate"), "the root's ops too");
    assert!(
        m.ok("ls tracker/ops/").contains("create_issue"),
        "a host's root too"
    );
    // find sees no call machinery; find -L reaches it.
    let plain = m.ok("find tracker/issues/42 | sort");
    assert!(
        !plain.contains("/ops/") && !plain.contains(".ops"),
        "{plain}"
    );
    assert!(
        plain.lines().any(|l| l == "tracker/issues/42/ops"),
        "{plain}"
    );
    assert!(
        plain.lines().any(|l| l == "tracker/issues/42/body"),
        "{plain}"
    );
    let followed = m.ok("find -L tracker/issues/42 -name guard | wc -l");
    assert!(followed.trim().parse::<usize>().unwrap() >= 5, "{followed}");
    // grep -r reads content only; reading everything through the links still runs nothing.
    let calls = m.journal_count();
    let hits = m.ok("grep -rl 'Issue #42' tracker/issues/42");
    assert_eq!(hits, "tracker/issues/42/description\n");
    m.ok("grep -R -l -e allowed -e blocked tracker/issues/42 > /dev/null");
    assert_eq!(m.journal_count(), calls, "a read ran an op");
    // Calls as always, the printed paths say ops/.
    m.ok("echo 'through the link' > tracker/issues/42/ops/comment/call");
    let result = m.read("tracker/issues/42/ops/comment/result");
    assert_eq!(result, m.read("tracker/issues/42/.ops/comment/result"));
    assert!(result.contains("/tracker/issues/42/comments/"), "{result}");
    assert!(!result.contains(".ops"), "{result}");
    // du, tar and rsync -a copy content, no machinery.
    let tar = m.ok("tar cf - tracker/issues/42 | tar tf - | sort");
    assert!(!tar.contains("/ops/") && !tar.contains(".ops"), "{tar}");
    let dest = tempfile::tempdir().unwrap();
    m.ok(&format!(
        "rsync -a tracker/issues/42/ {}/",
        dest.path().display()
    ));
    assert!(dest.path().join("body").exists());
    assert!(std::fs::symlink_metadata(dest.path().join("ops"))
        .unwrap()
        .file_type()
        .is_symlink());
}

/// A deny rule holds however the op's path is spelt; an approve rule holds a call made
/// through `.ops/` as one made through `ops/`.
#[test]
fn the_policy_holds_whatever_the_spelling_of_the_path() {
    let m = Mount::start_with_args(Some(POLICY), &["--titled"]);
    let titled = m.ok("ls tracker/issues | grep '^42 '");
    let titled = titled.trim();
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("close");
    std::os::unix::fs::symlink(m.path("tracker/issues/42/.ops/close"), &link).unwrap();
    for dir in [
        "tracker/issues/42/ops/close".to_string(),
        "tracker/issues/42/.ops/close".to_string(),
        format!("tracker/issues/{titled}/ops/close"),
        format!("tracker/issues/{titled}/.ops/close"),
        link.display().to_string(),
    ] {
        let out = m.sh(&format!("echo done > '{dir}/call'"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{dir}: {err}");
        assert!(
            m.read("tracker/issues/42/ops/close/result")
                .contains("denied by rule 1"),
            "{dir}"
        );
    }
    assert!(m.read("tracker/issues/42/description").contains("· open ·"));
    let guard = m.read("tracker/issues/42/.ops/close/guard");
    assert!(guard.contains("✗ policy: denied by rule 1"), "{guard}");
    // Held for a person through `.ops/`, and through the titled name (the agent in a
    // session of its own, so the test's session may decide).
    for dir in [
        "tracker/issues/42/.ops/comment".to_string(),
        format!("tracker/issues/{titled}/ops/comment"),
    ] {
        std::fs::write(
            m.state.join("agent.sh"),
            format!("echo '{{\"body\":\"x\"}}' > '{dir}/call'\n"),
        )
        .unwrap();
        let out = m.sh(&format!(
            "setsid -w bash {}",
            m.state.join("agent.sh").display()
        ));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Operation now in progress"), "{dir}: {err}");
    }
    assert_eq!(m.read(".wip/pending").lines().count(), 2);
    // Both pending runs name the canonical path, and approving one through `.ops` works.
    let pending = m.read(".wip/pending");
    assert!(
        pending
            .lines()
            .all(|l| l.contains("/tracker/issues/42/ops/comment/runs/")),
        "{pending}"
    );
    let run = pending.lines().next().unwrap().split('\t').next().unwrap();
    let dotted = run.replace("/ops/comment/", "/.ops/comment/");
    let out = m.sh(&format!("$WIP approve '{dotted}'"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(m.read(".wip/pending").lines().count(), 1);
}

/// The daemon's `rchar` (bytes its read calls returned, /proc/PID/io).
fn rchar(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// The files host's nodes are cached by the kernel, and what changes on disk outside the
/// mount shows within a second: a new file, a changed one, a removed one.
#[test]
fn changes_made_outside_the_mount_show_within_a_second() {
    let m = Mount::start(None);
    let listing = |m: &Mount| m.ok("ls files");
    assert!(!listing(&m).contains("fresh.txt"));
    std::fs::write(m.root.join("fresh.txt"), "one\n").unwrap();
    common::wait_until(
        "a new file listed",
        std::time::Duration::from_secs(1),
        || listing(&m).lines().any(|l| l == "fresh.txt"),
    );
    assert_eq!(m.read("files/fresh.txt"), "one\n");
    assert!(m
        .read("files/fresh.txt@/description")
        .contains("4 B · 1 line"));
    std::fs::write(m.root.join("fresh.txt"), "one\ntwo\nthree\n").unwrap();
    common::wait_until(
        "a changed file shown",
        std::time::Duration::from_secs(1),
        || {
            m.read("files/fresh.txt@/description")
                .contains("14 B · 3 lines")
                && m.ok("stat -c %s files/fresh.txt") == "14\n"
        },
    );
    assert_eq!(m.read("files/fresh.txt"), "one\ntwo\nthree\n");
    std::fs::remove_file(m.root.join("fresh.txt")).unwrap();
    common::wait_until(
        "a removed file gone",
        std::time::Duration::from_secs(1),
        || !m.sh("test -e files/fresh.txt").status.success(),
    );
    assert!(!listing(&m).contains("fresh.txt"));
    // In a subdirectory the mount has shown too.
    m.ok("ls files/src");
    std::fs::write(m.root.join("src/lib.rs"), "// lib\n").unwrap();
    common::wait_until(
        "a file in a subdirectory",
        std::time::Duration::from_secs(1),
        || m.ok("ls files/src").lines().any(|l| l == "lib.rs"),
    );
}

/// A file read once keeps its backing file registered for the next open, yet a file
/// replaced (renamed over, as editors and `git checkout` do), removed and made again, or
/// written through the mount shows its new content: the old file is never read again.
#[test]
fn a_file_read_before_shows_the_file_that_replaced_it() {
    let m = Mount::start(None);
    std::fs::write(m.root.join("doc.txt"), "first\n").unwrap();
    common::wait_until(
        "the new file listed",
        std::time::Duration::from_secs(1),
        || m.ok("ls files").lines().any(|l| l == "doc.txt"),
    );
    assert_eq!(m.read("files/doc.txt"), "first\n");
    assert_eq!(m.read("files/doc.txt"), "first\n");
    // Renamed over: another inode at the same path.
    std::fs::write(m.root.join(".doc.txt.tmp"), "second, longer\n").unwrap();
    std::fs::rename(m.root.join(".doc.txt.tmp"), m.root.join("doc.txt")).unwrap();
    common::wait_until(
        "the replacing file's content",
        std::time::Duration::from_secs(1),
        || m.read("files/doc.txt") == "second, longer\n",
    );
    assert_eq!(m.ok("cat files/doc.txt"), "second, longer\n");
    // Removed, then made again.
    std::fs::remove_file(m.root.join("doc.txt")).unwrap();
    std::fs::write(m.root.join("doc.txt"), "third\n").unwrap();
    common::wait_until(
        "the file made again",
        std::time::Duration::from_secs(1),
        || m.sh("cat files/doc.txt").stdout == b"third\n",
    );
    // Written through the mount, then read by the same path.
    m.ok("printf 'fourth\\n' > files/doc.txt");
    assert_eq!(
        std::fs::read_to_string(m.root.join("doc.txt")).unwrap(),
        "fourth\n"
    );
    assert_eq!(m.ok("cat files/doc.txt"), "fourth\n");
    // Replaced by an explicit op (behind the kernel's back): the kernel is told.
    m.ok(r#"echo '{"content":"fifth\n"}' > files/doc.txt@/ops/write/call"#);
    assert_eq!(m.ok("cat files/doc.txt"), "fifth\n");
    assert_eq!(m.ok("stat -c %s files/doc.txt"), "6\n");
}

/// A file is read and written by the kernel from the file itself (FUSE passthrough): the
/// daemon reads none of its bytes, and the content is the file's.
#[test]
fn files_are_read_and_written_by_the_kernel_itself() {
    let m = Mount::start(None);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(m.root.join("big.bin"), &big).unwrap();
    let pid = m.daemon_pid().unwrap();
    m.ok("stat files/big.bin > /dev/null");
    let before = rchar(pid);
    let copy = m.state.join("copy.bin");
    m.ok(&format!("cat files/big.bin > {}", copy.display()));
    assert_eq!(std::fs::read(&copy).unwrap(), big);
    let read = rchar(pid) - before;
    assert!(
        read < 1_000_000,
        "the daemon read {read} bytes for a 3 MB file"
    );
    // Reads by offset and mmap work as on the file.
    assert_eq!(
        m.ok("tail -c 3 files/big.bin | od -An -tu1 | tr -s ' '"),
        format!(
            " {} {} {}\n",
            big[big.len() - 3],
            big[big.len() - 2],
            big[big.len() - 1]
        )
    );
    m.ok("python3 -c \"import mmap; f = open('files/big.bin', 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); assert m[1000] == 1000 % 251\"");
    // A shared mapping written through: the file holds it.
    m.ok("python3 -c \"import mmap; f = open('files/big.bin', 'r+b'); m = mmap.mmap(f.fileno(), 0); m[0:3] = b'abc'; m.flush(); m.close(); f.close()\"");
    assert_eq!(&std::fs::read(m.root.join("big.bin")).unwrap()[..3], b"abc");
    // A 3 MB write goes to the file, not through the daemon.
    let written = || {
        std::fs::read_to_string(format!("/proc/{pid}/io"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("wchar: "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap()
    };
    let before = written();
    m.ok(&format!("cat {} > files/copy.bin", copy.display()));
    assert_eq!(std::fs::read(m.root.join("copy.bin")).unwrap(), big);
    let wrote = written() - before;
    assert!(
        wrote < 1_000_000,
        "the daemon wrote {wrote} bytes for a 3 MB file"
    );
}
