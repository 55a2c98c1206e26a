//! Search, the known world, locate and the change feed, over a real corpus nobody here
//! wrote: the Rust book's HTML as Debian's rust-doc package ships it, which
//! scripts/fixtures.sh extracts (the same text whatever toolchain runs the tests).

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Mount;

fn rust_book() -> PathBuf {
    let book = common::fixtures().join("rust-book");
    assert!(
        book.join("ch04-01-what-is-ownership.html").is_file(),
        "the Rust book is missing from {}: run scripts/fixtures.sh (it downloads Debian's rust-doc)",
        book.display()
    );
    book
}

fn mount_book() -> Mount {
    let book = rust_book();
    Mount::start(Some(&format!(
        "[[host]]\nkind = \"tracker\"\npath = \"tracker\"\n\
         [[host]]\nkind = \"files\"\npath = \"book\"\nroot = {book:?}\nread_only = true\n\
         [[host]]\nkind = \"search\"\npath = \"search\"\n"
    )))
}

/// Search and return the result text (the first search may wait for the first index).
fn search(m: &Mount, query: &str) -> String {
    let args = serde_json::json!({ "query": query, "limit": 10 }).to_string();
    m.call("search/ops/search", &args)
        .unwrap_or_else(|e| panic!("search failed ({e}): {}", m.result("search/ops/search")));
    m.result("search/ops/search")
}

fn wait_indexed(m: &Mount) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let d = m.read("search/description");
        if !d.contains("in progress") && !d.contains("indexing") {
            return;
        }
        assert!(Instant::now() < deadline, "indexing never finished: {d}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_distinctive_phrase_finds_its_chapter_first_and_hits_are_real_entries() {
    let m = mount_book();
    wait_indexed(&m);
    let r = search(&m, "\"governs how a Rust program manages memory\"");
    let first = r
        .lines()
        .find_map(|l| l.split('\t').next().filter(|p| p.contains("/book/")))
        .unwrap_or_else(|| panic!("no book path in:\n{r}"));
    assert!(
        first.ends_with("/book/ch04-01-what-is-ownership.html"),
        "{r}"
    );
    // The hit is the real file, whose entry (`PATH@`) has the ref; resolve gives the
    // book path.
    let reference = std::fs::read_to_string(format!("{first}@/ref")).unwrap();
    m.ok(&format!("echo '{}' > ops/resolve/call", reference.trim()));
    assert!(m
        .result("ops/resolve")
        .contains("/book/ch04-01-what-is-ownership.html\t"));
    // The run links it.
    let runs = m.ok("ls search/ops/search/runs");
    let id = runs.lines().next().unwrap();
    // A hit in a files host links the file itself; its ref is at the file's `PATH@`.
    let linked = m.ok(&format!(
        "for l in search/ops/search/runs/{id}/discovered/*; do \
           if [ -d \"$l\" ]; then cat \"$l/ref\"; else cat \"$(readlink -f \"$l\")@/ref\"; fi; done"
    ));
    assert!(linked.contains(reference.trim()), "{linked}");
    // Search results stay out of find and grep -r.
    let all = m.ok("find . -path ./book -prune -o -print");
    assert!(
        !all.lines().any(|l| l
            .split("/results/")
            .nth(1)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))),
        "find descended into search results"
    );
}

#[test]
fn locate_finds_an_issue_discovered_through_search() {
    let m = mount_book();
    wait_indexed(&m);
    // Nothing looked at issue 42 yet: locate does not know it.
    m.ok("echo 'Crash config missing' > ops/locate/call");
    assert!(!m.result("ops/locate").contains("/tracker/issues/42\t"));
    let r = search(&m, "crash config missing");
    assert!(r.contains("/tracker/issues/42\t"), "{r}");
    m.ok("echo 'Crash config missing' > ops/locate/call");
    assert!(
        m.result("ops/locate").contains("/tracker/issues/42\t"),
        "{}",
        m.result("ops/locate")
    );
    assert!(m.read(".wip/known").contains("/tracker/issues/42\t"));
    // A comment made a moment ago becomes searchable (a search says when the index is
    // still catching up; searching again gets the latest).
    m.ok("echo 'zebra-quokka-walrus reproduces here' > tracker/issues/17/ops/comment/call");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = search(&m, "quokka");
        if r.contains("/tracker/issues/17\t") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new comment never became searchable: {r}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A world of a files host over `root` and a search host indexing it.
fn files_and_search(root: tempfile::TempDir) -> Mount {
    let dir = std::fs::canonicalize(root.path()).unwrap();
    let manifest = format!(
        "[[host]]\nkind = \"files\"\npath = \"files\"\nroot = {dir:?}\n\
         [[host]]\nkind = \"search\"\npath = \"search\"\n"
    );
    Mount::start_in(Some(&manifest), root, tempfile::tempdir().unwrap())
}

/// Files whose names the tree reserves (`README.md`, `ops`, `description`, `body`) are
/// found by search, and every path the search prints is the file's own, which exists.
#[test]
fn hits_on_reserved_names_print_paths_that_exist() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("ops")).unwrap();
    for (file, text) in [
        ("README.md", "The platypus readme."),
        ("ops/x.txt", "A platypus under ops."),
        ("description", "A platypus description."),
        ("body", "A platypus body."),
    ] {
        std::fs::write(root.path().join(file), format!("{text}\n")).unwrap();
    }
    let m = files_and_search(root);
    wait_indexed(&m);
    let r = search(&m, "platypus");
    // `1. 0.42 files/ops/x.txt (line 1) — x.txt`: the world path is the third word.
    let mut hits: Vec<&str> = r
        .lines()
        .filter(|l| l.contains(" — "))
        .filter_map(|l| l.split(' ').nth(2))
        .collect();
    hits.sort();
    assert_eq!(
        hits,
        [
            "files/README.md",
            "files/body",
            "files/description",
            "files/ops/x.txt"
        ],
        "{r}"
    );
    // Each one is there for bash, and so is every path the result links.
    let linked: Vec<&str> = r
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(linked.len(), 5, "the search and its four hits: {r}");
    for path in hits.iter().copied().chain(linked.iter().copied()) {
        m.ok(&format!("test -e '{path}'"));
    }
    for path in &hits {
        m.ok(&format!("cat '{path}@/ref' > /dev/null"));
    }
    assert_eq!(m.ok("cat files/ops/x.txt"), "A platypus under ops.\n");
}

/// Whether process `pid` has `file` open.
fn has_open(pid: u32, file: &std::path::Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(Result::ok)
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == file))
        })
        .unwrap_or(false)
}

/// The change feed's events after `since`, as JSON, through `ops/events`.
fn events_since(m: &Mount, since: i64) -> Vec<serde_json::Value> {
    m.ok(&format!("echo 'since={since}' > ops/events/call"));
    m.result("ops/events")
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

// How soon tail sees an event (tail polls a FUSE file about once a second) is measured by
// scripts/bench.sh against tail on tmpfs; here only that it sees it.
#[test]
fn tail_f_of_the_change_feed_sees_another_process_close_an_issue() {
    let m = Mount::start(None);
    let feed = m.mount.join(".wip/events");
    let mut tail = std::process::Command::new("tail")
        .arg("-f")
        .arg(&feed)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = tail.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    common::wait_until("tail opened the feed", Duration::from_secs(30), || {
        has_open(tail.id(), &feed)
    });
    // Something before the close, so its cursor is not the first.
    m.ok("echo 'seen before the close' > tracker/issues/17/ops/comment/call");
    m.ok("setsid bash -c 'echo done > tracker/issues/42/ops/close/call'");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = None;
    while seen.is_none() && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            if line.contains("\"op\":\"close\"") {
                seen = Some(serde_json::from_str::<serde_json::Value>(&line).unwrap());
            }
        }
    }
    let _ = tail.kill();
    let _ = tail.wait();
    let event = seen.expect("tail -f never saw the close within 30 s");
    assert_eq!(event["kind"], "call");
    assert_eq!(event["path"], "/tracker/issues/42");
    assert_eq!(event["status"], "ok");
    let cursor = event["cursor"].as_i64().unwrap();
    assert!(cursor > 0, "{event}");
    // Resumable from any cursor: right before the call, the call comes first; from the
    // call's own cursor, only what followed it (the issue's change).
    assert!(cursor > 1, "{event}");
    let from_before = events_since(&m, cursor - 1);
    assert_eq!(
        from_before[0],
        event,
        "since={} starts with the close",
        cursor - 1
    );
    let after = events_since(&m, cursor);
    assert_eq!(after[0]["cursor"], cursor + 1);
    assert_eq!(after[0]["kind"], "changed");
    assert_eq!(after[0]["path"], "/tracker/issues/42");
    for (i, e) in after.iter().enumerate() {
        assert_eq!(
            e["cursor"],
            cursor + 1 + i as i64,
            "in order, none skipped: {after:?}"
        );
    }
    // The same events either way (the first read of the feed is itself a call: an event).
    assert_eq!(&from_before[1..], &after[..from_before.len() - 1]);
    assert_eq!(after.last().unwrap()["op"], "events");
}

/// Over a tree holding both identifiers, through the mount: a quoted identifier finds that
/// identifier only (not helgrind.h's `_VG_USERREQ__HG_PTHREAD_BARRIER_WAIT_PRE`), an
/// unquoted one ranks it first, and each hit names its line.
#[test]
fn a_quoted_identifier_finds_itself_only_and_each_hit_names_its_line() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("valgrind")).unwrap();
    std::fs::write(
        root.path().join("pthread.h"),
        "/* threads */\n#include <bits/types.h>\n\nextern int pthread_barrier_wait (pthread_barrier_t *__barrier);\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("valgrind/helgrind.h"),
        "/* helgrind */\n#define _VG_USERREQ__HG_PTHREAD_BARRIER_WAIT_PRE 1\n/* a pthread barrier wait is checked */\n",
    )
    .unwrap();
    let m = files_and_search(root);
    wait_indexed(&m);
    let hits = |r: &str| -> Vec<String> {
        r.lines()
            .filter(|l| l.contains(" — "))
            .map(|l| l.split(" — ").next().unwrap_or("").to_string())
            .collect()
    };
    m.ok("echo '\"pthread_barrier_wait\"' > search/ops/search/call");
    let quoted = m.result("search/ops/search");
    assert_eq!(
        hits(&quoted).len(),
        1,
        "the identifier itself, nothing else: {quoted}"
    );
    assert!(
        hits(&quoted)[0].ends_with("files/pthread.h (line 4)"),
        "{quoted}"
    );
    m.ok("echo pthread_barrier_wait > search/ops/search/call");
    let bare = m.result("search/ops/search");
    assert!(
        hits(&bare)
            .first()
            .is_some_and(|h| h.contains("files/pthread.h")),
        "exact matches first: {bare}"
    );
    assert_eq!(m.ok("cat files/pthread.h | wc -l").trim(), "4");
}

/// While the first pass reads a tree, the search host's description says it is indexing
/// (never "up to date"); once done, it says so.
#[test]
fn the_search_description_says_indexing_until_the_index_is_done() {
    let root = tempfile::tempdir().unwrap();
    for d in 0..20 {
        let dir = root.path().join(format!("d{d:02}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(
                dir.join(format!("f{f:03}.txt")),
                format!("file {d} {f} about platypus number {}\n", d * 100 + f).repeat(20),
            )
            .unwrap();
        }
    }
    let m = files_and_search(root);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let d = m.read("search/description");
        let done = d.contains("up to date");
        seen.push(d);
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never up to date: {:#?}",
            &seen[seen.len().saturating_sub(3)..]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let first = &seen[0];
    assert!(
        !first.contains("up to date")
            && (first.contains("indexing") || first.contains("about to start")),
        "the first description, read as the mount starts: {first}"
    );
    assert!(
        seen.iter()
            .all(|d| !d.contains("up to date") || !d.contains("indexing now")),
        "{seen:#?}"
    );
}
