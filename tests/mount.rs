//! The default world mounted for real, driven with std::fs and `bash -c` as an agent would.

mod common;

use common::Mount;
use std::io::{Read, Write};

const EINVAL: i32 = libc::EINVAL;
const EPERM: i32 = libc::EPERM;
const EACCES: i32 = libc::EACCES;
const ETIMEDOUT: i32 = libc::ETIMEDOUT;

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// The first pull request whose description contains every word.
fn pull_with(m: &Mount, words: &[&str]) -> String {
    let out =
        m.ok("for d in tracker/pulls/[0-9]*/; do echo \"${d%/}	$(cat $d/description)\"; done");
    for line in out.lines() {
        let (path, desc) = line.split_once('\t').unwrap();
        if words.iter().all(|w| desc.contains(w)) {
            return path.to_string();
        }
    }
    panic!("no pull request with {words:?} in:\n{out}");
}

#[test]
fn explore_the_root_and_an_issue() {
    let m = Mount::start(None);
    let ls = m.ok("ls -A");
    for name in [
        "README.md",
        "description",
        "ref",
        "ops",
        ".wip",
        "tracker",
        "files",
    ] {
        assert!(
            ls.lines().any(|l| l == name),
            "{name} missing from ls: {ls}"
        );
    }
    assert!(m.read("README.md").contains("ops/NAME/guard"));
    assert!(m.read("description").contains("tracker"));
    let d = m.read("tracker/issues/42/description");
    assert!(
        d.starts_with("Issue #42 · open · Crash when config is missing"),
        "{d}"
    );
    assert_eq!(d.lines().count(), 1);
    assert_eq!(
        m.read("tracker/issues/42/ref"),
        "tracker://demo/issues/42\n"
    );
    let ops = m.ok("ls tracker/issues/42/ops");
    for op in [
        "read_body",
        "get_metadata",
        "comment",
        "close",
        "reopen",
        "label",
        "assign",
    ] {
        assert!(ops.lines().any(|l| l == op), "{op} missing: {ops}");
    }
    let files = m.ok("ls tracker/issues/42/ops/close");
    assert_eq!(files, "call\ndescription\nguard\nresult\nschema\n");
    let schema: serde_json::Value =
        serde_json::from_str(&m.read("tracker/issues/42/ops/close/schema")).unwrap();
    assert_eq!(schema["type"], "object");
    assert_eq!(
        first_line(&m.read("tracker/issues/42/ops/close/guard")),
        "allowed"
    );
    // True sizes: what stat says is what cat gets.
    let size = std::fs::metadata(m.path("tracker/issues/42/description"))
        .unwrap()
        .len();
    assert_eq!(size as usize, d.len());
    // Any issue is reachable by path; comments are entries.
    assert!(m.path("tracker/issues/1/description").exists());
    assert_eq!(
        m.ok("ls tracker/issues/42/comments | grep -v -x -e description -e ref -e ops"),
        "1\n2\n3\n"
    );
    assert!(!m.path("tracker/issues/99999").exists());
    // A folder holding hosts says which.
    assert!(m.read("db/description").contains("tracker (db)"));
    // The files host shows the launch directory.
    assert!(m.read("files/hello.txt@/description").contains("file"));
}

#[test]
fn read_body_metadata_and_comment() {
    let m = Mount::start(None);
    let issue = "tracker/issues/42";
    m.call(&format!("{issue}/ops/read_body"), "\n").unwrap();
    assert!(m
        .result(&format!("{issue}/ops/read_body"))
        .to_lowercase()
        .contains("config"));
    m.call(&format!("{issue}/ops/get_metadata"), "\n").unwrap();
    let meta: serde_json::Value =
        serde_json::from_str(&m.result(&format!("{issue}/ops/get_metadata"))).unwrap();
    assert_eq!(meta["number"], 42);
    let before = m.ok(&format!("ls {issue}/comments | wc -l"));
    let desc_before = m.read(&format!("{issue}/description"));
    m.ok(&format!(
        "echo 'I can reproduce this on 1.4' > {issue}/ops/comment/call"
    ));
    let result = m.result(&format!("{issue}/ops/comment"));
    // The new comment's absolute path is printed, and it is an entry.
    let path = result
        .lines()
        .find_map(|l| l.split('\t').next().filter(|p| p.contains("/comments/")))
        .unwrap_or_else(|| panic!("no comment path in result: {result}"));
    assert!(path.starts_with(m.mount.to_str().unwrap()), "{path}");
    assert!(std::path::Path::new(path).join("description").exists());
    let after = m.ok(&format!("ls {issue}/comments | wc -l"));
    assert_eq!(
        after.trim().parse::<i32>().unwrap(),
        before.trim().parse::<i32>().unwrap() + 1
    );
    // The cached description was invalidated: the comment count changed.
    assert_ne!(m.read(&format!("{issue}/description")), desc_before);
    // The run is kept with args, status and discovered links.
    let runs = m.ok(&format!("ls {issue}/ops/comment/runs"));
    let id = runs.lines().next().unwrap().to_string();
    let run = format!("{issue}/ops/comment/runs/{id}");
    assert_eq!(m.read(&format!("{run}/status")), "ok\n");
    assert!(m
        .read(&format!("{run}/args"))
        .contains("I can reproduce this on 1.4"));
    let link = m.ok(&format!("cat {run}/discovered/1/description"));
    assert!(
        link.contains("reproduce") || link.contains("Comment"),
        "{link}"
    );
    // runs/ is not listed by its parent.
    assert!(!m.ok(&format!("ls {issue}/ops/comment")).contains("runs"));
}

#[test]
fn close_reopen_label_assign_and_errnos() {
    let m = Mount::start(None);
    let issue = "tracker/issues/42";
    // Plain text for the single required string.
    m.ok(&format!("echo 'fixed in 1.2' > {issue}/ops/close/call"));
    assert!(m.read(&format!("{issue}/description")).contains("closed"));
    // Closing again: EPERM, words in result, the guard says how to satisfy it.
    assert_eq!(m.call(&format!("{issue}/ops/close"), "again\n"), Err(EPERM));
    let r = m.result(&format!("{issue}/ops/close"));
    assert!(r.starts_with("error: blocked by guard"), "{r}");
    let guard = m.read(&format!("{issue}/ops/close/guard"));
    assert_eq!(first_line(&guard), "blocked");
    assert!(guard.contains("reopen"), "{guard}");
    // bash reports the failed write.
    let out = m.sh(&format!("echo again > {issue}/ops/close/call"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"));
    m.ok(&format!("echo > {issue}/ops/reopen/call"));
    assert!(m.read(&format!("{issue}/description")).contains("open"));
    // key=value lines, typed by the schema.
    m.ok(&format!("printf 'add=docs\\n' > {issue}/ops/label/call"));
    assert!(m.read(&format!("{issue}/description")).contains("docs"));
    m.ok(&format!("echo dana > {issue}/ops/assign/call"));
    assert!(m.read(&format!("{issue}/description")).contains("dana"));
    // EINVAL: bad JSON, unknown field, unknown label — always with words.
    assert_eq!(
        m.call(&format!("{issue}/ops/label"), "{\"add\": [\"bug\"\n"),
        Err(EINVAL)
    );
    assert!(m.result(&format!("{issue}/ops/label")).contains("JSON"));
    assert_eq!(
        m.call(&format!("{issue}/ops/label"), "{\"ad\": [\"bug\"]}\n"),
        Err(EINVAL)
    );
    assert!(m
        .result(&format!("{issue}/ops/label"))
        .starts_with("error: invalid arguments"));
    assert_eq!(
        m.call(
            &format!("{issue}/ops/label"),
            "{\"add\": [\"no-such-label\"]}\n"
        ),
        Err(EINVAL)
    );
    assert!(m
        .result(&format!("{issue}/ops/label"))
        .contains("no-such-label"));
}

#[test]
fn create_issue_appears_as_an_entry() {
    let m = Mount::start(None);
    let listing_before = m.ok("ls tracker/issues");
    m.ok("echo '{\"title\":\"Docs typo in README\",\"body\":\"teh → the\"}' > tracker/ops/create_issue/call");
    let r = m.result("tracker/ops/create_issue");
    let path = r
        .lines()
        .find_map(|l| l.split('\t').next().filter(|p| p.contains("/issues/")))
        .unwrap_or_else(|| panic!("{r}"));
    let number = path.rsplit('/').next().unwrap();
    assert!(!listing_before.lines().any(|l| l == number));
    assert!(m.ok("ls tracker/issues").lines().any(|l| l == number));
    assert!(m
        .read(&format!("tracker/issues/{number}/description"))
        .contains("Docs typo"));
    // resolve(ref) gives the path back.
    let reference = m.read(&format!("tracker/issues/{number}/ref"));
    m.ok(&format!("echo '{}' > ops/resolve/call", reference.trim()));
    assert!(m
        .result("ops/resolve")
        .contains(&format!("/tracker/issues/{number}\t")));
}

#[test]
fn pull_request_ops_and_merge_guards() {
    let m = Mount::start(None);
    let fix = pull_with(&m, &["open", "Fix crash"]);
    m.call(&format!("{fix}/ops/diff"), "\n").unwrap();
    assert!(m.result(&format!("{fix}/ops/diff")).contains("@@"));
    let guard = m.read(&format!("{fix}/ops/merge/guard"));
    assert_eq!(first_line(&guard), "blocked", "{guard}");
    assert!(guard.contains("✗ checks_passing"), "{guard}");
    assert_eq!(
        m.call(&format!("{fix}/ops/merge"), "{\"method\":\"squash\"}\n"),
        Err(EPERM)
    );
    assert!(m
        .result(&format!("{fix}/ops/merge"))
        .contains("blocked by guard"));
    let checks = m.ok(&format!(
        "ls {fix}/checks | grep -v -x -e description -e ref -e ops"
    ));
    assert!(checks.lines().any(|c| c == "lint"), "{checks}");
    assert_eq!(checks.lines().count(), 3, "{checks}");
    m.ok(&format!("echo > {fix}/ops/rerun_checks/call"));
    m.ok(&format!("echo > {fix}/ops/approve/call"));
    m.ok(&format!("echo dana > {fix}/ops/request_review/call"));
    let r = m.result(&format!("{fix}/ops/request_review"));
    assert!(r.contains("dana"), "{r}");
    assert_eq!(
        first_line(&m.read(&format!("{fix}/ops/merge/guard"))),
        "allowed"
    );
    m.ok(&format!(
        "echo '{{\"method\":\"squash\"}}' > {fix}/ops/merge/call"
    ));
    assert!(m.read(&format!("{fix}/description")).contains("merged"));
    assert!(m.read("tracker/issues/42/description").contains("closed"));
    // Already merged: blocked, words name it.
    assert_eq!(m.call(&format!("{fix}/ops/merge"), "\n"), Err(EPERM));
    // Own pull request: approving is blocked, and the guard says you cannot.
    let own = pull_with(&m, &["open", "by alex"]);
    let g = m.read(&format!("{own}/ops/approve/guard"));
    assert_eq!(first_line(&g), "blocked", "{g}");
    assert_eq!(m.call(&format!("{own}/ops/approve"), "\n"), Err(EPERM));
    // Every blocked guard line names how to satisfy it or says it cannot be.
    let all = m.ok("for d in tracker/pulls/[0-9]*/; do cat $d/ops/merge/guard; done");
    for line in all.lines().filter(|l| l.starts_with('✗')) {
        assert!(
            line.contains("ops/") || line.contains("tracker/") || line.contains("cannot"),
            "guard line names no way forward: {line}"
        );
    }
}

#[test]
fn files_host_read_write_edit_and_escapes() {
    let m = Mount::start(None);
    m.ok("echo > files/hello.txt@/ops/read/call");
    assert_eq!(
        m.result("files/hello.txt@/ops/read"),
        "     1\thello\n     2\tworld\n"
    );
    m.ok("echo '{\"old_string\":\"world\",\"new_string\":\"there\"}' > files/hello.txt@/ops/edit/call");
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "hello\nthere\n"
    );
    m.ok("echo '{\"path\":\"new/notes.md\",\"content\":\"# notes\\n\",\"create_dirs\":true}' > files@/ops/write/call");
    assert_eq!(
        std::fs::read_to_string(m.root.join("new/notes.md")).unwrap(),
        "# notes\n"
    );
    assert_eq!(m.ok("cat files/new/notes.md"), "# notes\n");
    assert!(m.read("files/new/notes.md@/description").contains("file"));
    // Escapes: refused by policy (EACCES), nothing written outside.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), m.root.join("out")).unwrap();
    for path in [
        "../escape.txt",
        "/tmp/escape.txt",
        "src/../../escape.txt",
        "out/escape.txt",
    ] {
        let args = format!("{{\"path\":\"{path}\",\"content\":\"x\"}}\n");
        assert_eq!(m.call("files@/ops/write", &args), Err(EACCES), "{path}");
        assert!(
            m.result("files@/ops/write").contains("inside_root"),
            "{path}"
        );
    }
    // (The shell follows the link itself, as the kernel resolves every symlink: a link
    // that leads out of the mount leads out of the world, with the caller's own rights.)
    assert!(!m.root.parent().unwrap().join("escape.txt").exists());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // ENAMETOOLONG: the OS refuses a 300-byte file name (its own errno, not EIO).
    let long = "x".repeat(300);
    assert_eq!(
        m.call(
            "files@/ops/write",
            &format!("{{\"path\":\"{long}\",\"content\":\"x\"}}\n")
        ),
        Err(libc::ENAMETOOLONG)
    );
    assert!(m.result("files@/ops/write").contains("too long"));
    // Edit that matches twice without replace_all: EINVAL with words.
    std::fs::write(m.root.join("twice.txt"), "a a\n").unwrap();
    assert_eq!(
        m.call(
            "files@/ops/edit",
            "{\"path\":\"twice.txt\",\"old_string\":\"a\",\"new_string\":\"b\"}\n"
        ),
        Err(EINVAL)
    );
    assert!(m.result("files@/ops/edit").contains("2 times"));
    // The other hosts' trees are not edited by hand; the files host is a working tree.
    let out = m.sh("touch tracker/new; rm tracker/issues/42/description");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    m.ok("mkdir files/x && echo made > files/x/y && rm -r files/x");
    assert!(!m.root.join("x").exists());
    // Changes made behind the mount's back show up within a second.
    let listed = m.ok("ls files");
    assert!(!listed.contains("later.txt"));
    std::fs::write(m.root.join("later.txt"), "x\n").unwrap();
    wait_for_listing(&m, "files", "later.txt");
}

#[test]
fn files_named_like_reserved_names_are_themselves_and_print_paths_that_exist() {
    let m = Mount::start(None);
    for dir in ["ops", "description", "body", "README.md~"] {
        std::fs::create_dir(m.root.join(dir)).unwrap();
    }
    std::fs::write(m.root.join("README.md"), "read me\n").unwrap();
    std::fs::write(m.root.join("ref"), "mine\n").unwrap();
    // A files host's names are exactly the files': no escaping, nothing reserved.
    wait_for_listing(&m, "files", "README.md~");
    for name in ["ops", "description", "body", "README.md", "ref"] {
        wait_for_listing(&m, "files", name);
    }
    assert_eq!(m.ok("cat files/ref"), "mine\n");
    assert!(m.ok("cat files/ops@/description").contains("directory"));
    assert!(!m.ok("cat files/ops@/description").contains("really named"));
    let mut texts = Vec::new();
    // Calls on a folder's `path`, on the files themselves, and their guards.
    for (op, args) in [
        (
            "files@/ops/write",
            r#"{"path":"ops/notes.txt","content":"a\n"}"#,
        ),
        (
            "files@/ops/write",
            r#"{"path":"README.md","content":"new\n"}"#,
        ),
        (
            "files@/ops/write",
            r#"{"path":"description/body","content":"b\n"}"#,
        ),
        (
            "files@/ops/write",
            r#"{"path":"body/ops","content":"","create_dirs":true}"#,
        ),
        (
            "files@/ops/write",
            r#"{"path":"README.md~/x","content":"x\n"}"#,
        ),
        (
            "files@/ops/edit",
            r#"{"path":"ops/notes.txt","old_string":"a","new_string":"c"}"#,
        ),
        ("files@/ops/read", r#"{"path":"body/ops"}"#),
        ("files@/ops/read", r#"{"path":"ops/notes.txt","offset":9}"#),
        ("files/ops@/ops/list", ""),
        ("files/ops@/ops/stat", ""),
        ("files/README.md~@/ops/stat", ""),
        ("files/description/body@/ops/write", r#"{"content":"d\n"}"#),
        ("files/body/ops@/ops/read", ""),
    ] {
        let text = m.ok(&format!(
            "echo '{args}' > {op}/call; cat {op}/result; cat {op}/guard"
        ));
        texts.push(text);
    }
    // A refusal names the link that leads out of the root by its path.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), m.root.join("ops/out")).unwrap();
    let text = m.ok(
        "echo '{\"path\":\"ops/out/x\",\"content\":\"x\"}' > files@/ops/write/call; \
         cat files@/ops/write/result",
    );
    assert!(text.contains("symlink files/ops/out → "), "{text}");
    m.assert_all_exist(&["files/ops/out".to_string()], &text);
    let all = texts.join("\n");
    for want in [
        "files/ops/notes.txt",
        "files/README.md",
        "files/description/body",
        "files/body/ops",
        "files/README.md~/x",
    ] {
        assert!(all.contains(want), "{want} never printed in:\n{all}");
    }
    for text in &texts {
        m.assert_all_exist(&m.printed_paths(text, "files"), text);
    }
    assert_eq!(
        std::fs::read_to_string(m.root.join("ops/notes.txt")).unwrap(),
        "c\n"
    );
    assert_eq!(
        std::fs::read_to_string(m.root.join("description/body")).unwrap(),
        "d\n"
    );
}

/// Wait (bounded) until `ls dir` lists `name`: the files host's listings live a second.
fn wait_for_listing(m: &Mount, dir: &str, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !m.ok(&format!("ls {dir}")).lines().any(|l| l == name) {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} never listed in {dir}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn read_only_policy_is_eacces() {
    let m = Mount::start(Some(
        "[[host]]\nkind = \"files\"\npath = \"files\"\nread_only = true\n",
    ));
    let guard = m.read("files/hello.txt@/ops/write/guard");
    assert_eq!(first_line(&guard), "blocked");
    assert_eq!(
        m.call("files/hello.txt@/ops/write", "{\"content\":\"x\"}\n"),
        Err(EACCES)
    );
    assert!(m.result("files/hello.txt@/ops/write").contains("read-only"));
    // The shell's own changes are refused the same way, and nothing changes on disk.
    for change in [
        "echo x > files/hello.txt",
        "rm files/hello.txt",
        "touch files/new.txt",
    ] {
        let out = m.sh(change);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "{change}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!m.root.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(m.root.join("hello.txt")).unwrap(),
        "hello\nworld\n"
    );
}

/// A world whose `slow` files host sits on a file system whose reads block until released.
fn slow_world(slow: &common::slow_fs::Slow, world: &str) -> String {
    format!(
        "{world}[[host]]\nkind = \"files\"\npath = \"files\"\n\
         [[host]]\nkind = \"files\"\npath = \"slow\"\nroot = {:?}\n",
        slow.path().display().to_string()
    )
}

#[test]
fn a_call_that_hangs_times_out() {
    let slow = common::slow_fs::Slow::mount();
    let m = Mount::start(Some(&slow_world(
        &slow,
        "[world]\ncall_timeout_ms = 1000\n",
    )));
    // The read blocks in the kernel, inside the backend's file system.
    let started = std::time::Instant::now();
    let called = m.call("slow@/ops/read", "path=late.txt\n");
    // Whatever is asserted, the backend is released before the mount goes (a daemon
    // thread still reading it would hold the unmount).
    let released = {
        let r = m.result("slow@/ops/read");
        let ok = called == Err(ETIMEDOUT)
            && started.elapsed() < std::time::Duration::from_secs(10)
            && r.starts_with("running: read on /slow")
            && r.contains("slow@/ops/read/runs/1/ops/wait/call");
        // The mount stays responsive while the call hangs.
        let responsive = m.read("files/hello.txt@/description").contains("file")
            && m.read("slow@/description").contains("1 entry");
        slow.release();
        (ok, responsive, r)
    };
    assert!(
        released.0,
        "{called:?} after {:?}: {}",
        started.elapsed(),
        released.2
    );
    assert!(released.1);
    // The run goes on and its outcome lands in it once the backend answers.
    let run = "slow@/ops/read/runs/1";
    let out = m.ok(&format!(
        "until echo > {run}/ops/wait/call 2>/dev/null; do :; done; cat {run}/ops/wait/result"
    ));
    assert!(out.contains("late"), "{out}");
    assert_eq!(m.read(&format!("{run}/status")), "ok\n");
    assert_eq!(m.read(&format!("{run}/result")), out);
}

#[test]
fn a_large_payload_in_chunks_runs_at_flush() {
    let m = Mount::start(None);
    let content: String = (0..20_000)
        .map(|i| format!("line {i:05} of a large file\n"))
        .collect();
    assert!(content.len() > 512 * 1024);
    let args = serde_json::json!({"path": "big.txt", "content": content}).to_string();
    assert!(args.len() > 1 << 19);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(m.path("files@/ops/write/call"))
        .unwrap();
    for chunk in args.as_bytes().chunks(64 * 1024) {
        f.write_all(chunk).unwrap();
    }
    drop(f);
    assert_eq!(
        std::fs::read_to_string(m.root.join("big.txt")).unwrap(),
        content
    );
    // A 1 MiB payload through bash's printf, and back through read with offset/limit.
    let big = "x".repeat(1 << 20);
    std::fs::write(
        m.root.join("payload"),
        format!("{{\"path\":\"mib.txt\",\"content\":\"{big}\"}}"),
    )
    .unwrap();
    m.ok("printf '%s' \"$(cat \"$0\")\" > files@/ops/write/call"
        .replace("$0", m.root.join("payload").to_str().unwrap())
        .as_str());
    assert_eq!(
        std::fs::metadata(m.root.join("mib.txt")).unwrap().len(),
        1 << 20
    );
}

#[test]
fn results_are_per_session_and_race_free_on_one_descriptor() {
    let m = Mount::start(None);
    let op = "tracker/issues/41/ops/comment";
    // Session B calls first and reads its result only after session A called the same op
    // with other arguments: each sees its own, where one global "latest" would not.
    let out = m.ok(&format!(
        "setsid bash -c 'echo \"from B\" > {op}/call; while [ ! -e /tmp/$$.go ]; do sleep 0.02; done; cat {op}/result' > b.out 2>&1 &
         b=$!
         while ! grep -q 'from B' .wip/log 2>/dev/null; do sleep 0.02; done
         setsid bash -c 'echo \"from A\" > {op}/call; cat {op}/result'
         touch /tmp/$b.go; wait $b; rm -f /tmp/$b.go; cat b.out; rm -f b.out"
    ).replace("b.out", &m.state.join("b.out").display().to_string()));
    let (a, b) = out.split_at(
        out.find("added comment")
            .and_then(|i| out[i + 1..].find("added comment").map(|j| i + 1 + j))
            .unwrap(),
    );
    assert!(a.contains("· from A") && !a.contains("from B"), "{out}");
    assert!(b.contains("· from B") && !b.contains("from A"), "{out}");
    // A session that never called sees the latest call of anyone.
    let fresh = m.ok(&format!("setsid bash -c 'cat {op}/result'"));
    assert!(fresh.contains("· from A"), "{fresh}");
    // A real race in one session: eight descriptors at once, each reads back its own.
    let out = m.ok(&format!(
        "for i in 1 2 3 4 5 6 7 8; do ( $WIP call {op} \"racer $i\" > {dir}/r$i ) & done; wait; \
         for i in 1 2 3 4 5 6 7 8; do echo \"== $i\"; cat {dir}/r$i; done",
        dir = m.state.display()
    ));
    for part in out.split("== ").filter(|p| !p.is_empty()) {
        let (i, text) = part.split_once('\n').unwrap();
        assert!(text.contains(&format!("· racer {i}")), "racer {i}: {text}");
        assert_eq!(text.matches("added comment").count(), 1, "{text}");
    }
    // Open read-write, write, read back from the same descriptor.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.path("tracker/issues/41/ops/read_body/call"))
        .unwrap();
    f.write_all(b"\n").unwrap();
    let mut out = String::new();
    f.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("#41 "), "{out}");
    // `wip call` does exactly that.
    let out = m.ok("$WIP call tracker/issues/41/ops/get_metadata");
    assert!(out.contains("\"number\": 41"), "{out}");
    let out = m.sh("$WIP call tracker/issues/41/ops/label '{\"add\":[\"nope\"]}'");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    // Opening and closing `call` without writing runs nothing.
    let before = m.journal_count();
    m.ok(": > tracker/issues/41/ops/close/call");
    assert_eq!(m.journal_count(), before);
}

#[test]
fn parallel_comments_are_all_kept() {
    let m = Mount::start(None);
    let before_rows = m.journal_count();
    let before = m
        .ok("ls tracker/issues/7/comments | wc -l")
        .trim()
        .parse::<usize>()
        .unwrap();
    // Eight writers at once on one op, each call its own descriptor: every one must
    // succeed (a writer of a busy call inode is sent to another one, never refused).
    let script = "pids=; for p in 1 2 3 4 5 6 7 8; do \
        ( for i in $(seq 1 50); do echo \"comment $p.$i\" > tracker/issues/7/ops/comment/call || exit 1; done ) & \
        pids=\"$pids $!\"; done; for q in $pids; do wait $q || exit 1; done";
    let out = m.sh(script);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(m.journal_count() - before_rows, 400);
    let db = rusqlite::Connection::open(m.state.join("journal.db")).unwrap();
    let ok: i64 = db
        .query_row(
            "SELECT count(*) FROM calls WHERE op = 'comment' AND status = 'ok'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ok, 400);
    let after = m
        .ok("ls tracker/issues/7/comments | wc -l")
        .trim()
        .parse::<usize>()
        .unwrap();
    assert_eq!(after, before + 400);
    m.ok("echo > tracker/issues/7/ops/get_metadata/call");
    let meta: serde_json::Value =
        serde_json::from_str(&m.result("tracker/issues/7/ops/get_metadata")).unwrap();
    let comments = meta["comments"]
        .as_u64()
        .unwrap_or_else(|| panic!("{meta}"));
    // `ls` also shows description, ref and ops.
    assert_eq!(comments as usize, before - 3 + 400);
}

fn dump_tracker(m: &Mount) -> String {
    let path = std::fs::read_dir(&m.state)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with("tracker") && name.ends_with(".db")
        })
        .expect("tracker db");
    let db =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut out = String::new();
    for t in tables {
        let mut st = db.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = st.column_count();
        let rows = st
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap();
        for r in rows {
            out.push_str(&r.unwrap());
            out.push('\n');
        }
    }
    out
}

#[test]
fn reading_everything_runs_nothing() {
    let m = Mount::start(None);
    let before = dump_tracker(&m);
    let calls = m.journal_count();
    // grep exits 1 for "nothing found" and 2 for any error reading the tree.
    m.ok("grep -r -l zzz-not-there . > /dev/null; test $? -eq 1");
    let n = m.ok("find . | wc -l").trim().parse::<usize>().unwrap();
    assert!(n > 1000, "find saw only {n} paths");
    m.ok("find . -type f -print0 | xargs -0 -n 200 head -c 4096 > /dev/null");
    m.ok("find . -type f -print0 | xargs -0 stat > /dev/null; ls -laR > /dev/null");
    // No run folder is walked into (`.wip/runs` is a file that lists them).
    assert!(!m.ok("find . -name runs -type d").contains("runs"));
    assert_eq!(m.journal_count(), calls);
    assert_eq!(dump_tracker(&m), before);
}

#[test]
fn a_killed_daemon_is_recovered_and_its_call_shows_interrupted() {
    let slow = common::slow_fs::Slow::mount();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("hello.txt"), "hi\n").unwrap();
    let mut m = Mount::start_in(
        Some(&slow_world(&slow, "")),
        root,
        tempfile::tempdir().unwrap(),
    );
    // A call that blocks in the backend (a read its file system does not answer).
    let call = m.path("slow@/ops/read/call");
    let hung = std::thread::spawn(move || {
        let _ = std::fs::write(call, "path=late.txt\n");
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while m.journal_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "call never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The killed daemon's read, already in the backend's file system, is answered only
    // later: the daemon dies then, without recording the call's end.
    let releaser = slow.release_after(std::time::Duration::from_secs(1));
    m.kill_daemon();
    let _ = hung.join();
    let _ = releaser.join();
    // The dead mount: `wip umount` recovers the mount point.
    let out = std::process::Command::new(common::WIP)
        .arg("umount")
        .arg(&m.mount)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!common::is_mounted(&m.mount));
    m.remount();
    let runs = m.ok("ls slow@/ops/read/runs");
    let id = runs.lines().next().unwrap();
    assert_eq!(
        m.read(&format!("slow@/ops/read/runs/{id}/status")),
        "interrupted\n"
    );
    assert!(m.read(".wip/log").contains("interrupted"));
}

#[test]
fn wip_dir_shows_log_and_redacted_config() {
    // Real secrets in values the daemon uses (a host's environment), by name and by shape,
    // and one in a comment.
    let processes =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hosts/processes.py");
    let m = Mount::start(Some(&format!(
        "[world]\nname = \"t\"\n[[host]]\nkind = \"files\"\npath = \"files\"\n# api_token = \"c0mment-s3cret\"\n\
         [[host]]\nkind = \"exec\"\npath = \"processes\"\ncommand = [\"python3\", {:?}]\n\
         env = {{ API_TOKEN = \"s3cret-value-123\", NOTE = \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\" }}\n",
        processes.display().to_string()
    )));
    m.ok("echo > files/hello.txt@/ops/stat/call");
    let log = m.read(".wip/log");
    assert!(log.contains("/files/hello.txt@ stat"), "{log}");
    let config = m.read(".wip/config");
    for secret in [
        "c0mment-s3cret",
        "s3cret-value-123",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ] {
        assert!(!config.contains(secret), "{secret} in:\n{config}");
    }
    // What is not secret is shown, and where a secret was, it says so.
    assert!(
        config.contains("processes.py") && config.contains("API_TOKEN"),
        "{config}"
    );
    assert!(config.matches("<redacted>").count() >= 2, "{config}");
}

/// `runs/ID/caller` names who called: the writing process's pid, uid, kernel session and
/// command line, and when the run started and finished.
#[test]
fn a_runs_caller_file_names_the_process_that_wrote_the_call() {
    let m = Mount::start(None);
    let out = m.ok(
        "python3 -c \"import os; print(os.getpid(), os.getuid(), os.getsid(0)); \
         open('tracker/issues/42/ops/comment/call', 'w').write('from python\\n')\"",
    );
    let ids: Vec<u32> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    let (pid, uid, sid) = (ids[0], ids[1], ids[2]);
    let caller = m.read("tracker/issues/42/ops/comment/runs/1/caller");
    let lines: Vec<&str> = caller.lines().collect();
    assert_eq!(lines.len(), 3, "{caller}");
    assert!(
        lines[0].starts_with(&format!("pid {pid} · uid {uid} · session {sid} · "))
            && lines[0].contains("python3 -c import os; print(os.getpid()"),
        "{caller}"
    );
    let stamp = |l: &str, word: &str| {
        let t = l.strip_prefix(word).unwrap_or_else(|| panic!("{l}")).trim();
        assert!(t.len() >= 20 && t.ends_with('Z') && t.contains('T'), "{t}");
        t.to_string()
    };
    let started = stamp(lines[1], "started");
    let finished = stamp(lines[2], "finished");
    assert!(started <= finished, "{caller}");
}

#[test]
fn wip_stats_counts_the_nodes_the_kernel_holds() {
    let m = Mount::start(None);
    let held = |m: &Mount| -> usize {
        let stats = m.read(".wip/stats");
        stats
            .lines()
            .find_map(|l| l.strip_prefix("materialised_nodes "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no count in {stats}"))
    };
    let before = held(&m);
    // A walk makes the kernel hold a node for every name it met.
    m.ok("find tracker/issues > /dev/null");
    let after = held(&m);
    assert!(after > before + 40, "{before} then {after}");
}
