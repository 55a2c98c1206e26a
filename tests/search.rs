//! Search, the known world, locate and the change feed, over a real corpus nobody here
//! wrote: the Rust book installed with the toolchain's documentation.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Mount;

fn rust_book() -> Option<PathBuf> {
    let out = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let book =
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("share/doc/rust/html/book");
    book.join("ch04-01-what-is-ownership.html")
        .exists()
        .then_some(book)
}

fn mount_book() -> Option<Mount> {
    let book = rust_book()?;
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"tracker\"\npath = \"tracker\"\n\
         [[host]]\nkind = \"files\"\npath = \"book\"\nroot = {book:?}\nread_only = true\n\
         [[host]]\nkind = \"search\"\npath = \"search\"\n"
    )));
    Some(m)
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
    let Some(m) = mount_book() else {
        eprintln!("skipped: no Rust book in the toolchain's docs");
        return;
    };
    wait_indexed(&m);
    let r = search(&m, "\"govern how a Rust program manages memory\"");
    let first = r
        .lines()
        .find_map(|l| l.split('\t').next().filter(|p| p.contains("/book/")))
        .unwrap_or_else(|| panic!("no book path in:\n{r}"));
    assert!(
        first.ends_with("/book/ch04-01-what-is-ownership.html"),
        "{r}"
    );
    // The hit is the real entry: same ref, and resolve gives the book path.
    let reference = std::fs::read_to_string(format!("{first}/ref")).unwrap();
    m.ok(&format!("echo '{}' > ops/resolve/call", reference.trim()));
    assert!(m
        .result("ops/resolve")
        .contains("/book/ch04-01-what-is-ownership.html\t"));
    // The run links it.
    let runs = m.ok("ls search/ops/search/runs");
    let id = runs.lines().next().unwrap();
    let linked = m.ok(&format!(
        "cat search/ops/search/runs/{id}/discovered/*/ref 2>/dev/null || true"
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
    let Some(m) = mount_book() else {
        eprintln!("skipped: no Rust book in the toolchain's docs");
        return;
    };
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
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    m.ok("setsid bash -c 'echo done > tracker/issues/42/ops/close/call'");
    let mut seen = None;
    while started.elapsed() < Duration::from_secs(3) {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            if line.contains("\"op\":\"close\"") {
                seen = Some(started.elapsed());
                let event: serde_json::Value = serde_json::from_str(&line).unwrap();
                assert_eq!(event["path"], "/tracker/issues/42");
                assert!(event["cursor"].as_i64().unwrap() > 0);
                break;
            }
        }
    }
    let _ = tail.kill();
    let _ = tail.wait();
    let seen = seen.expect("tail -f never saw the close");
    assert!(seen < Duration::from_millis(1500), "seen after {seen:?}");
    // The feed is resumable from a cursor.
    m.ok("echo 'since=0' > ops/events/call");
    assert!(m
        .result("ops/events")
        .contains("\"kind\":\"changed\",\"path\":\"/tracker/issues/42\""));
}
