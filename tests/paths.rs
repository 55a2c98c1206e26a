//! Every path the world prints exists in the tree, even when a host holds entries named
//! like the names an entry reserves for itself (`ops`, `description`, `body`): in a host
//! whose entries are directories those are escaped (`ops~`) wherever they are printed
//! (search hits, call results, discovered entries, guards); a files host's names are the
//! files' own, printed exactly.

mod common;

use std::path::Path;

use common::Mount;

const RESERVED: &[&str] = &["README.md", "ops", "description", "body"];

/// A files root holding files and a folder with reserved names, each with the word
/// `zebrafinch`, and a SQLite database with tables named like them.
fn world(dir: &Path) -> Mount {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("ops")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    for name in RESERVED.iter().filter(|n| **n != "ops") {
        std::fs::write(root.join(name), format!("zebrafinch in {name}\n")).unwrap();
    }
    std::fs::write(root.join("ops/x.txt"), "zebrafinch under ops\n").unwrap();
    std::fs::write(root.join("docs/README.md"), "zebrafinch in docs\n").unwrap();
    let db = dir.join("birds.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE ops (id INTEGER PRIMARY KEY, note TEXT);
         INSERT INTO ops (note) VALUES ('zebrafinch row in ops');
         CREATE TABLE body (id INTEGER PRIMARY KEY, note TEXT);
         INSERT INTO body (note) VALUES ('zebrafinch row in body');",
    )
    .unwrap();
    drop(conn);
    Mount::start(Some(&format!(
        "[[host]]\nkind = \"tracker\"\npath = \"tracker\"\n\
         [[host]]\nkind = \"files\"\npath = \"files\"\nroot = {root:?}\n\
         [[host]]\nkind = \"db\"\npath = \"db\"\nfile = {db:?}\nwritable = true\n\
         [[host]]\nkind = \"search\"\npath = \"search\"\n"
    )))
}

/// Each path `text` prints under this world's hosts exists in the mount, and some of
/// them contain each of `want` (so the check is not vacuous).
fn all_exist(m: &Mount, what: &str, text: &str, want: &[&str]) {
    let paths: Vec<String> = ["files", "db", "tracker", "search"]
        .iter()
        .flat_map(|host| m.printed_paths(text, host))
        .collect();
    assert!(!paths.is_empty(), "{what} printed no paths:\n{text}");
    m.assert_all_exist(&paths, text);
    for w in want {
        assert!(
            paths.iter().any(|p| p.contains(w)),
            "{what} printed no path with {w}:\n{text}"
        );
    }
}

#[test]
fn search_hits_on_reserved_names_are_escaped_and_exist() {
    let dir = tempfile::tempdir().unwrap();
    let m = world(dir.path());
    common::wait_until(
        "the first index",
        std::time::Duration::from_secs(60),
        || {
            let d = m.read("search/description");
            !d.contains("in progress") && !d.contains("indexing")
        },
    );
    m.ok("echo '{\"query\": \"zebrafinch\", \"limit\": 20}' > search/ops/search/call");
    let result = m.read("search/ops/search/result");
    all_exist(
        &m,
        "search",
        &result,
        &[
            "files/README.md",
            "files/ops/x.txt",
            "files/description",
            "files/body",
            "files/docs/README.md",
        ],
    );
}

#[test]
fn a_tree_walk_reaches_every_file_by_its_own_name_and_every_entry_through_its_escape() {
    let dir = tempfile::tempdir().unwrap();
    let m = world(dir.path());
    // A walker (grep -r) reaches every file of the root by its exact name, and nothing
    // else: exactly these files.
    let walked: std::collections::BTreeSet<String> = m
        .ok("grep -rl zebrafinch files")
        .lines()
        .map(str::to_string)
        .collect();
    let expected: std::collections::BTreeSet<String> = [
        "files/README.md",
        "files/description",
        "files/body",
        "files/ops/x.txt",
        "files/docs/README.md",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    assert_eq!(walked, expected);
    // find sees a files host's folders as they are, and another host's entries named
    // like reserved names through their escape.
    let entries: std::collections::BTreeSet<String> = m
        .ok("find files db/tables -mindepth 1 -maxdepth 1 -type d -printf '%p\n'")
        .lines()
        .map(str::to_string)
        .collect();
    for e in [
        "files/ops",
        "files/docs",
        "db/tables/ops~",
        "db/tables/body~",
    ] {
        assert!(entries.contains(e), "{e} not walked: {entries:?}");
    }
    assert_eq!(
        m.ok("find files -maxdepth 1 -name description -type f"),
        "files/description\n"
    );
    // What the walk found reads as the files it came from; their entries are `NAME@`.
    for (path, word) in [
        ("files/README.md", "README.md"),
        ("files/description", "description"),
        ("files/body", "body"),
        ("files/ops/x.txt", "under ops"),
    ] {
        assert!(m.read(path).contains(word), "{path}");
        assert!(
            m.read(&format!("{path}@/description")).contains("file"),
            "{path}@"
        );
    }
    assert!(m.read("files@/description").contains("Files of"));
    // The escape still reaches them under `files@/paths/`, where entries are directories.
    assert!(m
        .read("files@/paths/description~/description")
        .contains("file"));
}

#[test]
fn call_results_and_discovered_entries_print_existing_paths() {
    let dir = tempfile::tempdir().unwrap();
    let m = world(dir.path());
    // A query over a table named `ops` discovers its rows.
    m.ok("printf '%s\\n' '{\"sql\": \"SELECT id, note FROM ops\"}' > db/ops/query/call");
    let q = m.read("db/ops/query/result");
    all_exist(&m, "query", &q, &[]);
    // Inserting into `body` discovers the new row under `tables/body~`.
    m.ok("echo '{\"values\": {\"note\": \"another\"}}' > db/tables/body~/ops/insert/call");
    let ins = m.read("db/tables/body~/ops/insert/result");
    all_exist(&m, "insert", &ins, &["db/tables/body~/rows/"]);
    // Writing a file under `ops/` prints where it is.
    m.ok("echo '{\"path\": \"ops/new.txt\", \"content\": \"hi\\n\"}' > files@/ops/write/call");
    let w = m.read("files@/ops/write/result");
    all_exist(&m, "write", &w, &["files/ops/new.txt"]);
    // Every discovered link of those runs resolves.
    let out = m.sh(
        "for r in db/ops/query db/tables/body~/ops/insert files@/ops/write; do \
           find -L \"$r/runs\" -path '*/discovered/*' -type l || exit 1; done",
    );
    let (broken, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success() && err.is_empty(), "find failed: {err}");
    assert_eq!(broken.trim(), "", "broken discovered links:\n{broken}");
}

#[test]
fn tracker_guards_and_results_print_escaped_paths() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tracker.db");
    // The demo project, then a check and a label named like reserved names: only SQL can
    // name them so, and the tree must still reach them.
    let settings = wip::hosts::tracker::TrackerSettings {
        database: Some(db.clone()),
        ..Default::default()
    };
    let ctx = wip::hosts::HostContext::for_tests(dir.path());
    drop(wip::hosts::tracker::TrackerHost::open(settings, &ctx.at("tracker")).unwrap());
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "UPDATE checks SET name = 'ops' WHERE number = 50 AND name = 'test';
         INSERT INTO labels (name, color, description) VALUES ('body', 'ffffff', 'odd');
         INSERT INTO item_labels (number, label) VALUES (50, 'body');",
    )
    .unwrap();
    drop(conn);
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"tracker\"\npath = \"tracker\"\ndatabase = {db:?}\n"
    )));
    let listing = m.ok("ls tracker/labels tracker/pulls/50/checks");
    assert!(
        listing.contains("body~") && listing.contains("ops~"),
        "{listing}"
    );
    let guard = m.read("tracker/pulls/50/ops/merge/guard");
    all_exist(&m, "merge guard", &guard, &["tracker/pulls/50/checks/ops~"]);
    m.ok("echo '{}' > tracker/labels/body~/ops/issues/call");
    let found = m.read("tracker/labels/body~/ops/issues/result");
    all_exist(&m, "issues", &found, &["tracker/pulls/50"]);
}

/// Names at the kernel's limit: a path with a 256-byte name is ENAMETOOLONG (not EIO),
/// through an op and through the file system; a 255-byte name is a file like any.
#[test]
fn long_names_are_enametoolong_and_a_255_byte_name_is_a_file() {
    let m = Mount::start(None);
    let long = "a".repeat(256);
    let out = m.sh(&format!(
        "echo '{{\"path\":\"{long}\",\"content\":\"x\"}}' > files@/ops/write/call"
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("File name too long"), "{err}");
    assert!(
        m.result("files@/ops/write").contains("at most 255 bytes"),
        "{}",
        m.result("files@/ops/write")
    );
    let out = m.sh(&format!("echo x > files/{long}"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("File name too long"));
    // A 255-byte name (`ops` and 252 `~`) is the file itself, listed as it is.
    let at_limit = format!("ops{}", "~".repeat(252));
    std::fs::write(m.root.join(&at_limit), "fits\n").unwrap();
    let listing = m.ok("ls -a files");
    assert!(listing.lines().any(|l| l == at_limit), "{listing}");
    assert_eq!(m.read(&format!("files/{at_limit}")), "fits\n");
    // Its entry would be 256 bytes long: reached at `files@/paths/` instead.
    assert!(!m.sh(&format!("test -e files/{at_limit}@")).status.success());
}
