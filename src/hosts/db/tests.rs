//! Tests of the db host on temporary databases: browsing, descriptions, keys of every kind,
//! foreign keys both ways, read-only enforcement by SQLite, constraint errors, paging, query
//! results kept across a remount, and schema changes made by another connection.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::{json, Value};

use super::*;
use crate::host::{CallOutcome, Caller, Host, HostError, HostResult};

const SCHEMA: &str = "
CREATE TABLE Artist (ArtistId INTEGER PRIMARY KEY, Name TEXT NOT NULL);
CREATE TABLE Album (AlbumId INTEGER PRIMARY KEY, Title TEXT NOT NULL,
    ArtistId INTEGER NOT NULL REFERENCES Artist (ArtistId));
CREATE TABLE Track (TrackId INTEGER PRIMARY KEY, Name TEXT NOT NULL,
    AlbumId INTEGER REFERENCES Album (AlbumId), Composer TEXT,
    Milliseconds INTEGER CHECK (Milliseconds >= 0));
CREATE TABLE Playlist (PlaylistId INTEGER PRIMARY KEY, Name TEXT);
CREATE TABLE PlaylistTrack (PlaylistId INTEGER NOT NULL REFERENCES Playlist,
    TrackId INTEGER NOT NULL REFERENCES Track, PRIMARY KEY (PlaylistId, TrackId)) WITHOUT ROWID;
CREATE TABLE Genre (Code TEXT PRIMARY KEY, Label TEXT UNIQUE);
CREATE TABLE ZipCodes (zip TEXT, city TEXT);
CREATE TABLE Big (id INTEGER PRIMARY KEY, v TEXT);
CREATE VIEW AlbumTitles AS SELECT Album.Title, Artist.Name FROM Album JOIN Artist USING (ArtistId);
INSERT INTO Artist VALUES (1, 'AC/DC'), (2, 'Accept');
INSERT INTO Album VALUES (1, 'For Those About To Rock We Salute You', 1), (2, 'Balls to the Wall', 2);
INSERT INTO Track VALUES
    (1, 'For Those About To Rock (We Salute You)', 1, 'Angus Young', 343719),
    (2, 'Put The Finger On You', 1, 'Angus Young', 205662),
    (3, 'Balls to the Wall', 2, NULL, 342562);
INSERT INTO Playlist VALUES (1, 'Music'), (2, 'Empty');
INSERT INTO PlaylistTrack VALUES (1, 1), (1, 3);
INSERT INTO Genre VALUES ('a/b,c', 'weird'), ('rock', 'Rock'), ('', 'empty'), ('..', 'dots');
INSERT INTO ZipCodes VALUES ('10001', 'New York'), ('94103', 'San Francisco');
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
    INSERT INTO Big SELECT i, 'value ' || i FROM n;
";

struct Fixture {
    dir: tempfile::TempDir,
    file: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("test.db");
        let conn = Connection::open(&file).expect("create");
        conn.execute_batch(SCHEMA).expect("schema");
        Fixture { dir, file }
    }

    fn ctx(&self) -> HostContext {
        ctx(self.dir.path())
    }

    fn host(&self, writable: bool) -> DbHost {
        open(&self.ctx(), "test.db", writable)
    }

    /// Another process's view of the file.
    fn other(&self) -> Connection {
        Connection::open(&self.file).expect("open")
    }

    fn count(&self, table: &str) -> i64 {
        self.other()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .expect("count")
    }
}

fn ctx(dir: &Path) -> HostContext {
    HostContext {
        state_dir: dir.join("state"),
        mount_point: dir.join("mnt"),
        mount: "db/test".to_string(),
        ..HostContext::for_tests(dir)
    }
}

fn open(ctx: &HostContext, file: &str, writable: bool) -> DbHost {
    let settings = DbSettings {
        file: file.to_string(),
        writable,
        page_size: 200,
        search: Vec::new(),
        titles: Default::default(),
    };
    match DbHost::open(settings, &(ctx).at("db/test")) {
        Ok(h) => h,
        Err(e) => panic!("open failed: {e}"),
    }
}

fn p(s: &str) -> Vec<String> {
    s.split('/')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn desc(h: &DbHost, path: &str) -> String {
    h.entry(&p(path))
        .expect("entry")
        .unwrap_or_else(|| panic!("no entry {path}"))
        .description
}

fn names(h: &DbHost, path: &str) -> Vec<String> {
    h.children(&p(path))
        .expect("children")
        .into_iter()
        .filter(|c| c.info.indexable)
        .map(|c| c.name)
        .collect()
}

fn call(h: &DbHost, path: &str, op: &str, args: Value) -> HostResult<CallOutcome> {
    h.call(&p(path), op, &args, &Caller::default())
}

fn ok(h: &DbHost, path: &str, op: &str, args: Value) -> CallOutcome {
    match call(h, path, op, args) {
        Ok(o) => o,
        Err(e) => panic!("{path} {op}: {e:?}"),
    }
}

fn query(h: &DbHost, sql: &str) -> HostResult<CallOutcome> {
    call(h, "", "query", json!({ "sql": sql }))
}

fn forbidden(r: HostResult<CallOutcome>) -> String {
    match r {
        Err(HostError::Forbidden(words)) => words,
        other => panic!("expected Forbidden, got {other:?}"),
    }
}

fn invalid(r: HostResult<CallOutcome>) -> String {
    match r {
        Err(HostError::InvalidArgs(words)) => words,
        other => panic!("expected InvalidArgs, got {other:?}"),
    }
}

#[test]
fn root_tables_and_descriptions() {
    let f = Fixture::new();
    let h = f.host(false);
    let root = desc(&h, "");
    assert!(
        root.starts_with("SQLite database test.db · 8 tables, 1 view · read-only · "),
        "{root}"
    );
    assert_eq!(names(&h, ""), vec!["tables", "views"]);
    assert_eq!(
        names(&h, "tables"),
        vec![
            "Album",
            "Artist",
            "Big",
            "Genre",
            "Playlist",
            "PlaylistTrack",
            "Track",
            "ZipCodes"
        ]
    );
    let track = desc(&h, "tables/Track");
    assert!(
        track.starts_with("table Track · 3 rows · key TrackId · TrackId INTEGER, Name TEXT, AlbumId INTEGER → Album, Composer TEXT"),
        "{track}"
    );
    assert!(desc(&h, "tables/PlaylistTrack").contains("key PlaylistId, TrackId"));
    assert!(desc(&h, "tables/ZipCodes").contains("key rowid"));
    assert_eq!(names(&h, "tables/Track"), vec!["rows"]);
    let rows = desc(&h, "tables/Track/rows");
    assert!(
        rows.starts_with("3 rows of table Track; the listing shows the first 3 by key (TrackId)"),
        "{rows}"
    );
    assert!(rows.contains("rows/1"), "{rows}");
    assert_eq!(names(&h, "tables/Track/rows"), vec!["1", "2", "3"]);
    let row = desc(&h, "tables/Track/rows/1");
    assert!(
        row.starts_with("Name=For Those About To Rock (We Salute You) · "),
        "{row}"
    );
    assert!(row.chars().count() <= 120, "{row}");
    assert_eq!(
        h.entry(&p("tables/Track/rows/1"))
            .unwrap()
            .unwrap()
            .reference,
        "sqlite://test.db/Track/1"
    );
    assert!(desc(&h, "views/AlbumTitles").contains("columns Title, Name"));
    assert_eq!(names(&h, "views/AlbumTitles/rows"), vec!["1", "2"]);
    assert!(desc(&h, "views/AlbumTitles/rows/2").contains("Title=Balls to the Wall"));
    assert!(h.entry(&p("views/AlbumTitles/rows/3")).unwrap().is_none());
    assert!(h.entry(&p("tables/Nope")).unwrap().is_none());
    assert!(
        h.entry(&p("tables/track")).unwrap().is_none(),
        "one spelling per table"
    );
    let ops: Vec<String> = h
        .ops(&p("tables/Track"))
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(ops, vec!["schema", "count", "export", "insert"]);
    let schema = ok(&h, "tables/Track", "schema", json!({})).result;
    assert!(schema.starts_with("CREATE TABLE Track"), "{schema}");
    let all = ok(&h, "", "schema", json!({})).result;
    assert!(all.contains("CREATE VIEW AlbumTitles"), "{all}");
    let body = ok(&h, "tables/Track/rows/3", "read_body", json!({})).result;
    assert!(
        body.contains("TrackId: 3\nName: Balls to the Wall\nAlbumId: 2\nComposer: NULL\n"),
        "{body}"
    );
    let g = h
        .guard(&p("tables/Track/rows/3"), "read_body", None)
        .unwrap();
    assert!(g.allowed() && g.conditions[0].name == "can_read");
    let g = h.guard(&p(""), "query", None).unwrap();
    assert!(g
        .render()
        .contains("✓ read_only_connection: queries run on a read-only connection"));
}

#[test]
fn keys_of_every_kind_roundtrip() {
    let f = Fixture::new();
    let h = f.host(false);
    // Composite key.
    assert_eq!(names(&h, "tables/PlaylistTrack/rows"), vec!["1,1", "1,3"]);
    assert!(h
        .entry(&p("tables/PlaylistTrack/rows/1,3"))
        .unwrap()
        .is_some());
    assert!(h
        .entry(&p("tables/PlaylistTrack/rows/1,2"))
        .unwrap()
        .is_none());
    assert!(h
        .entry(&p("tables/PlaylistTrack/rows/1"))
        .unwrap()
        .is_none());
    // Text keys: `/` and `,` escaped, empty and `..` made valid names.
    let genres = names(&h, "tables/Genre/rows");
    assert_eq!(genres, vec!["%", "%2E%2E", "a%2Fb%2Cc", "rock"]);
    for g in &genres {
        let path = format!("tables/Genre/rows/{g}");
        assert!(h.entry(&p(&path)).unwrap().is_some(), "{path}");
    }
    assert!(desc(&h, "tables/Genre/rows/a%2Fb%2Cc").contains("Label=weird"));
    assert!(h
        .entry(&p("tables/Genre/rows/a%2fb%2Cc"))
        .unwrap()
        .is_none());
    // Rowid tables.
    assert_eq!(names(&h, "tables/ZipCodes/rows"), vec!["1", "2"]);
    assert!(desc(&h, "tables/ZipCodes/rows/2").contains("city=San Francisco"));
    let body = ok(&h, "tables/ZipCodes/rows/2", "read_body", json!({})).result;
    assert_eq!(body, "rowid: 2\nzip: 94103\ncity: San Francisco\n");
    // Integer keys: canonical only.
    assert!(h.entry(&p("tables/Track/rows/01")).unwrap().is_none());
    assert!(h.entry(&p("tables/Track/rows/99")).unwrap().is_none());
    assert!(h.entry(&p("tables/Track/rows/x")).unwrap().is_none());
    // Refs lead back to paths.
    for path in [
        "tables/Genre/rows/a%2Fb%2Cc",
        "tables/PlaylistTrack/rows/1,3",
        "tables/Track",
        "views/AlbumTitles",
        "",
    ] {
        let r = h.entry(&p(path)).unwrap().unwrap().reference;
        assert_eq!(h.resolve(&r), vec![p(path)], "{r}");
    }
    assert!(h.resolve("sqlite://other.db/Track/1").is_empty());
    assert!(h.resolve("sqlite://test.db/Track/99").is_empty());
}

#[test]
fn foreign_keys_both_ways() {
    let f = Fixture::new();
    let h = f.host(false);
    let out = ok(&h, "tables/Track/rows/1", "references", json!({}));
    assert_eq!(out.discovered, vec![p("tables/Album/rows/1")]);
    assert!(
        out.result.contains("AlbumId = 1 → Album row 1"),
        "{}",
        out.result
    );
    let out = ok(&h, "tables/PlaylistTrack/rows/1,3", "references", json!({}));
    assert_eq!(
        out.discovered,
        vec![p("tables/Playlist/rows/1"), p("tables/Track/rows/3")]
    );
    let out = ok(&h, "tables/Album/rows/1", "referenced_by", json!({}));
    assert_eq!(
        out.discovered,
        vec![p("tables/Track/rows/1"), p("tables/Track/rows/2")]
    );
    assert!(
        out.result.contains("Track.AlbumId: 2 rows"),
        "{}",
        out.result
    );
    let out = ok(&h, "tables/Track/rows/3", "referenced_by", json!({}));
    assert_eq!(out.discovered, vec![p("tables/PlaylistTrack/rows/1,3")]);
    let out = ok(&h, "tables/Playlist/rows/2", "referenced_by", json!({}));
    assert!(out.discovered.is_empty());
    let out = ok(&h, "tables/Big/rows/1", "references", json!({}));
    assert_eq!(out.result, "table Big has no foreign keys");
}

#[test]
fn referenced_by_is_bounded() {
    let f = Fixture::new();
    f.other()
        .execute_batch(
            "CREATE TABLE Child (id INTEGER PRIMARY KEY, big INTEGER REFERENCES Big (id));
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
             INSERT INTO Child SELECT i, 7 FROM n;",
        )
        .unwrap();
    let h = f.host(false);
    let out = ok(&h, "tables/Big/rows/7", "referenced_by", json!({}));
    assert_eq!(out.discovered.len(), 200);
    assert!(
        out.result
            .contains("Child.big: 300 rows (200 listed; all with ops/query"),
        "{}",
        out.result
    );
}

#[test]
fn queries_are_read_only_by_sqlite() {
    let f = Fixture::new();
    for writable in [false, true] {
        let h = f.host(writable);
        for sql in [
            "INSERT INTO Track (Name) VALUES ('x')",
            "UPDATE Track SET Name = 'x'",
            "DELETE FROM Track",
            "DROP TABLE Track",
            "CREATE TABLE t (x)",
            "ATTACH DATABASE ':memory:' AS other",
            "PRAGMA user_version = 5",
            "PRAGMA query_only = OFF",
            "BEGIN",
            "SELECT 1; DROP TABLE Track",
            "SELECT 1; SELECT 2",
            "WITH x AS (SELECT 1) DELETE FROM Track",
        ] {
            let words = forbidden(query(&h, sql));
            assert!(!words.is_empty(), "{sql}");
        }
        let words = forbidden(query(&h, "DELETE FROM Track"));
        assert!(words.contains("not authorized"), "{words}");
        // The `where` of count and export runs on the same connection.
        forbidden(call(
            &h,
            "tables/Track",
            "count",
            json!({"where": "1); DELETE FROM Track; SELECT (1"}),
        ));
        assert_eq!(f.count("Track"), 3);
        let v: i64 = f
            .other()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 0);
    }
    let h = f.host(false);
    // Reads, recursive CTEs and read-only pragmas are fine.
    assert!(ok(&h, "", "query", json!({"sql": "PRAGMA user_version"}))
        .result
        .starts_with("user_version\n0\n"));
    let out = ok(
        &h,
        "",
        "query",
        json!({"sql": "SELECT name FROM pragma_table_info('Track')"}),
    );
    assert!(out.result.contains("Composer"), "{}", out.result);
    let out = ok(
        &h,
        "",
        "query",
        json!({"sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3) SELECT sum(i) FROM n;"}),
    );
    assert!(out.result.starts_with("sum(i)\n6\n"), "{}", out.result);
    // Mistakes are EINVAL with SQLite's words.
    assert!(invalid(query(&h, "SELEC 1")).contains("syntax error"));
    assert!(invalid(query(&h, "SELECT * FROM Nope")).contains("no such table: Nope"));
    assert!(invalid(call(
        &h,
        "",
        "query",
        json!({"sql": "SELECT ?", "params": []})
    ))
    .contains("parameter"));
}

#[test]
fn parameters_are_data() {
    let f = Fixture::new();
    let h = f.host(true);
    let evil = "x'); DROP TABLE Track; --";
    let out = ok(
        &h,
        "",
        "query",
        json!({"sql": "SELECT count(*) AS n FROM Track WHERE Name = ?1", "params": [evil]}),
    );
    assert!(out.result.starts_with("n\n0\n"), "{}", out.result);
    let out = ok(
        &h,
        "tables/Track",
        "insert",
        json!({"values": {"Name": evil, "AlbumId": 1}}),
    );
    assert_eq!(out.discovered, vec![p("tables/Track/rows/4")]);
    let name: String = f
        .other()
        .query_row("SELECT Name FROM Track WHERE TrackId = 4", [], |r| r.get(0))
        .unwrap();
    assert_eq!(name, evil);
    let out = ok(
        &h,
        "tables/Track",
        "count",
        json!({"where": "Name = ?", "params": [evil]}),
    );
    assert!(
        out.result
            .starts_with("1 row of Track where Name = ? (params ["),
        "{}",
        out.result
    );
    assert_eq!(f.count("Track"), 4);
}

#[test]
fn writes_need_a_writable_mount() {
    let f = Fixture::new();
    let h = f.host(false);
    let g = h.guard(&p("tables/Track"), "insert", None).unwrap();
    assert!(!g.allowed());
    assert!(g.conditions[0].policy && g.conditions[0].name == "writable");
    for (path, op, args) in [
        ("tables/Track", "insert", json!({"values": {"Name": "x"}})),
        (
            "tables/Track/rows/1",
            "update",
            json!({"set": {"Name": "x"}}),
        ),
        ("tables/Track/rows/1", "delete", json!({})),
    ] {
        match call(&h, path, op, args) {
            Err(HostError::Blocked(g)) => assert!(g.first_failure().is_some_and(|c| c.policy)),
            other => panic!("{op}: {other:?}"),
        }
    }
    assert_eq!(f.count("Track"), 3);
}

#[test]
fn writes_and_constraints() {
    let f = Fixture::new();
    let h = f.host(true);
    assert!(desc(&h, "").contains(" · writable · "));
    let out = ok(
        &h,
        "tables/Track",
        "insert",
        json!({"values": {"Name": "New", "AlbumId": 2, "Milliseconds": 1}}),
    );
    assert_eq!(out.discovered, vec![p("tables/Track/rows/4")]);
    assert_eq!(
        out.changed,
        vec![
            p("tables/Track"),
            p("tables/Track/rows"),
            p("tables/Track/rows/4")
        ]
    );
    assert!(desc(&h, "tables/Track").contains("4 rows"));
    // Text and composite keys.
    let out = ok(
        &h,
        "tables/Genre",
        "insert",
        json!({"values": {"Code": "x/y", "Label": "slash"}}),
    );
    assert_eq!(out.discovered, vec![p("tables/Genre/rows/x%2Fy")]);
    let out = ok(
        &h,
        "tables/PlaylistTrack",
        "insert",
        json!({"values": {"PlaylistId": 2, "TrackId": 4}}),
    );
    assert_eq!(out.discovered, vec![p("tables/PlaylistTrack/rows/2,4")]);
    let out = ok(
        &h,
        "tables/ZipCodes",
        "insert",
        json!({"values": {"zip": "1"}}),
    );
    assert_eq!(out.discovered, vec![p("tables/ZipCodes/rows/3")]);
    // Update, also of a key.
    let out = ok(
        &h,
        "tables/Genre/rows/x%2Fy",
        "update",
        json!({"set": {"Code": "z", "Label": "zed"}}),
    );
    assert_eq!(out.discovered, vec![p("tables/Genre/rows/z")]);
    assert!(out.changed.contains(&p("tables/Genre/rows/x%2Fy")));
    assert!(desc(&h, "tables/Genre/rows/z").contains("Label=zed"));
    // Constraints: NOT NULL, FOREIGN KEY, CHECK, UNIQUE, unknown column.
    assert!(invalid(call(
        &h,
        "tables/Track",
        "insert",
        json!({"values": {"AlbumId": 1}})
    ))
    .contains("NOT NULL"));
    assert!(invalid(call(
        &h,
        "tables/Track",
        "insert",
        json!({"values": {"Name": "x", "AlbumId": 999}})
    ))
    .contains("FOREIGN KEY"));
    assert!(invalid(call(
        &h,
        "tables/Track/rows/1",
        "update",
        json!({"set": {"Milliseconds": -1}})
    ))
    .contains("CHECK"));
    assert!(invalid(call(
        &h,
        "tables/Genre",
        "insert",
        json!({"values": {"Code": "q", "Label": "Rock"}})
    ))
    .contains("UNIQUE"));
    assert!(invalid(call(
        &h,
        "tables/Track",
        "insert",
        json!({"values": {"Nope": 1}})
    ))
    .contains("no column"));
    assert!(invalid(call(
        &h,
        "tables/Track",
        "insert",
        json!({"values": {"Name": [1]}})
    ))
    .contains("must be"));
    // Deleting a referenced row breaks a foreign key.
    assert!(invalid(call(&h, "tables/Album/rows/1", "delete", json!({}))).contains("FOREIGN KEY"));
    let out = ok(&h, "tables/PlaylistTrack/rows/2,4", "delete", json!({}));
    assert_eq!(
        out.changed.last(),
        Some(&p("tables/PlaylistTrack/rows/2,4"))
    );
    assert!(h
        .entry(&p("tables/PlaylistTrack/rows/2,4"))
        .unwrap()
        .is_none());
    assert!(matches!(
        call(&h, "tables/Track/rows/99", "delete", json!({})),
        Err(HostError::NotFound(_))
    ));
    assert_eq!(f.count("Track"), 4);
}

#[test]
fn paging_a_large_table() {
    let f = Fixture::new();
    let h = f.host(false);
    let rows = names(&h, "tables/Big/rows");
    assert_eq!(rows.len(), 200);
    assert_eq!(rows[0], "1");
    assert_eq!(rows[199], "200");
    let d = desc(&h, "tables/Big/rows");
    assert!(d.starts_with("5000 rows of table Big; the listing shows the first 200 by key (id); any row is reachable by its key: rows/"), "{d}");
    assert_eq!(desc(&h, "tables/Big/rows/4711"), "v=value 4711");
    assert!(h.entry(&p("tables/Big/rows/5001")).unwrap().is_none());
    assert!(desc(&h, "tables/Big").contains("5000 rows"));
}

#[test]
fn query_results_are_paged_and_kept() {
    let f = Fixture::new();
    let h = f.host(false);
    let out = ok(
        &h,
        "",
        "query",
        json!({"sql": "SELECT id, v FROM Big WHERE id > ? ORDER BY id", "params": [10]}),
    );
    assert_eq!(out.discovered, vec![p("queries/1")]);
    let lines: Vec<&str> = out.result.lines().collect();
    assert_eq!(lines[0], "id\tv");
    assert_eq!(lines[1], "11\tvalue 11");
    assert_eq!(lines.len(), 23, "{}", out.result);
    assert_eq!(lines[22], "4990 rows; all at queries/1/rows of db/test");
    let info = h.entry(&p("queries/1")).unwrap().unwrap();
    assert!(!info.indexable);
    assert!(
        info.description.starts_with(
            "Query 1 · SELECT id, v FROM Big WHERE id > ? ORDER BY id · 4990 rows · columns id, v"
        ),
        "{}",
        info.description
    );
    assert!(names(&h, "").iter().all(|n| n != "queries"));
    assert_eq!(
        names(&h, "queries").len(),
        0,
        "query results are not listed"
    );
    assert_eq!(names(&h, "queries/1/rows").len(), 200);
    let row = h.entry(&p("queries/1/rows/4701")).unwrap().unwrap();
    assert_eq!(row.description, "id=4711 · v=value 4711");
    assert_eq!(
        row.reference, "sqlite://test.db/Big/4711",
        "carries Big's key"
    );
    assert_eq!(h.resolve(&row.reference), vec![p("tables/Big/rows/4711")]);
    assert!(h.entry(&p("queries/1/rows/4991")).unwrap().is_none());
    let body = ok(&h, "queries/1/rows/2", "read_body", json!({})).result;
    assert_eq!(
        body,
        "id: 12\nv: value 12\n(row db/test/tables/Big/rows/12)\n"
    );
    // Without the key, a row is its own.
    ok(&h, "", "query", json!({"sql": "SELECT v FROM Big LIMIT 3"}));
    let r = h.entry(&p("queries/2/rows/1")).unwrap().unwrap().reference;
    assert_eq!(r, "sqlite://test.db#queries/2/rows/1");
    // Rowid tables map through their rowid.
    ok(
        &h,
        "",
        "query",
        json!({"sql": "SELECT rowid, city FROM ZipCodes"}),
    );
    let r = h.entry(&p("queries/3/rows/2")).unwrap().unwrap().reference;
    assert_eq!(r, "sqlite://test.db/ZipCodes/2");
    drop(h);
    // A remount keeps them.
    let h = f.host(false);
    assert!(desc(&h, "queries/1").starts_with("Query 1 · "));
    assert_eq!(desc(&h, "queries/1/rows/1"), "id=11 · v=value 11");
    let next = ok(&h, "", "query", json!({"sql": "SELECT 1"}));
    assert_eq!(next.discovered, vec![p("queries/4")]);
}

#[test]
fn count_and_export() {
    let f = Fixture::new();
    let h = f.host(false);
    assert_eq!(
        ok(&h, "tables/Big", "count", json!({})).result,
        "5000 rows in Big"
    );
    let out = ok(
        &h,
        "tables/Track",
        "count",
        json!({"where": "Composer = ?", "params": ["Angus Young"]}),
    );
    assert_eq!(
        out.result,
        "2 rows of Track where Composer = ? (params [\"Angus Young\"])"
    );
    let csv = ok(
        &h,
        "tables/Track",
        "export",
        json!({"format": "csv", "limit": 2}),
    )
    .result;
    assert_eq!(
        csv,
        "TrackId,Name,AlbumId,Composer,Milliseconds\n1,For Those About To Rock (We Salute You),1,Angus Young,343719\n2,Put The Finger On You,1,Angus Young,205662\n# cut after 2 rows: more rows than the limit 2; raise limit (at most 100000) or narrow with where\n"
    );
    let json_text = ok(
        &h,
        "views/AlbumTitles",
        "export",
        json!({"format": "json", "where": "Name = 'Accept'"}),
    )
    .result;
    let parsed: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(
        parsed,
        json!([{"Title": "Balls to the Wall", "Name": "Accept"}])
    );
    assert_eq!(
        ok(&h, "views/AlbumTitles", "count", json!({})).result,
        "2 rows in AlbumTitles"
    );
    assert!(invalid(call(
        &h,
        "tables/Track",
        "count",
        json!({"where": "Nope = 1"})
    ))
    .contains("no such column"));
}

#[test]
fn schema_changes_show_at_the_next_look() {
    let f = Fixture::new();
    let h = f.host(false);
    assert!(h.entry(&p("tables/Fresh")).unwrap().is_none());
    f.other()
        .execute_batch("CREATE TABLE Fresh (k TEXT PRIMARY KEY, title TEXT); INSERT INTO Fresh VALUES ('a', 'first');")
        .unwrap();
    assert!(desc(&h, "").contains("9 tables"));
    assert!(names(&h, "tables").contains(&"Fresh".to_string()));
    assert_eq!(desc(&h, "tables/Fresh/rows/a"), "title=first");
    f.other()
        .execute_batch("ALTER TABLE Fresh ADD COLUMN extra INTEGER")
        .unwrap();
    assert!(desc(&h, "tables/Fresh").contains("extra INTEGER"));
    let out = ok(&h, "", "query", json!({"sql": "SELECT * FROM Fresh"}));
    assert!(
        out.result.starts_with("k\ttitle\textra\n"),
        "{}",
        out.result
    );
    f.other().execute_batch("DROP TABLE Fresh").unwrap();
    assert!(h.entry(&p("tables/Fresh")).unwrap().is_none());
}

#[test]
fn opening() {
    let f = Fixture::new();
    let c = f.ctx();
    // Missing files are an error with words, never a new database.
    let settings = DbSettings {
        file: "missing.db".to_string(),
        writable: true,
        page_size: 200,
        search: Vec::new(),
        titles: Default::default(),
    };
    let err = DbHost::open(settings, &c.at("db/x")).err().expect("error");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!f.dir.path().join("missing.db").exists());
    // `{state}` expands to the state directory.
    std::fs::create_dir_all(&c.state_dir).unwrap();
    std::fs::copy(&f.file, c.state_dir.join("copy.db")).unwrap();
    let h = open(&c, "{state}/copy.db", false);
    assert!(desc(&h, "").starts_with("SQLite database copy.db"));
    // Not a database.
    std::fs::write(
        f.dir.path().join("junk.db"),
        "this is not sqlite, not at all, no",
    )
    .unwrap();
    let settings = DbSettings {
        file: "junk.db".to_string(),
        writable: false,
        page_size: 200,
        search: Vec::new(),
        titles: Default::default(),
    };
    assert!(DbHost::open(settings, &c.at("db/junk")).is_err());
    // Settings are strict.
    let parsed: Result<DbSettings, _> =
        toml::from_str("file = \"a.db\"\nwritable = true\nbogus = 1\n");
    assert!(parsed.is_err());
    let parsed: DbSettings = toml::from_str("file = \"a.db\"").unwrap();
    assert_eq!(parsed.page_size, 200);
    assert!(!parsed.writable);
}

#[test]
fn a_wal_database_in_use_by_another_writer() {
    let f = Fixture::new();
    let writer = f.other();
    writer
        .pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    writer
        .execute("INSERT INTO Artist VALUES (3, 'Aerosmith')", [])
        .expect("insert");
    let h = f.host(false);
    assert_eq!(desc(&h, "tables/Artist/rows/3"), "Name=Aerosmith");
    writer
        .execute("INSERT INTO Artist VALUES (4, 'Alanis Morissette')", [])
        .expect("insert");
    assert!(desc(&h, "tables/Artist").contains("4 rows"));
    let out = ok(
        &h,
        "",
        "query",
        json!({"sql": "SELECT Name FROM Artist WHERE ArtistId = 4"}),
    );
    assert!(
        out.result.starts_with("Name\nAlanis Morissette\n"),
        "{}",
        out.result
    );
}

#[test]
fn a_runaway_query_is_cut_off() {
    let f = Fixture::new();
    let h = f.host(false);
    h.set_budget(std::time::Duration::from_millis(300));
    let start = std::time::Instant::now();
    let r = query(
        &h,
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n",
    );
    assert!(matches!(r, Err(HostError::TimedOut(_))), "{r:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    // The connection is usable again at once.
    assert!(ok(&h, "", "query", json!({"sql": "SELECT 1"}))
        .result
        .starts_with("1\n1\n"));
}

#[test]
fn runaway_queries_run_side_by_side_on_the_reader_pool() {
    let f = Fixture::new();
    let h = std::sync::Arc::new(f.host(false));
    h.set_budget(std::time::Duration::from_millis(1500));
    let runaway =
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n";
    let threads: Vec<_> = (0..super::READERS)
        .map(|_| {
            let h = std::sync::Arc::clone(&h);
            std::thread::spawn(move || query(&h, runaway))
        })
        .collect();
    // All readers are taken at once: the queries run side by side, not one by one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !h.readers.lock().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the queries never ran together"
        );
        std::thread::yield_now();
    }
    for t in threads {
        let r = t.join().unwrap();
        match r {
            Err(HostError::TimedOut(words)) => assert!(words.contains("interrupted"), "{words}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        h.readers.lock().unwrap().len(),
        super::READERS,
        "every reader came back"
    );
}

#[test]
fn rows_of_the_configured_tables_are_offered_to_search() {
    let f = Fixture::new();
    let settings = DbSettings {
        file: "test.db".to_string(),
        writable: false,
        page_size: 200,
        search: vec!["Artist".to_string(), "Playlist".to_string()],
        titles: Default::default(),
    };
    let h = DbHost::open(settings, &f.ctx().at("db/test")).expect("open");
    let (mut all, mut cursor) = (Vec::new(), None);
    loop {
        let (docs, next) = h.documents(cursor.as_deref(), 2).expect("documents");
        assert!(docs.len() <= 2);
        all.extend(docs);
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let artists = f.count("Artist") as usize;
    let playlists = f.count("Playlist") as usize;
    assert_eq!(all.len(), artists + playlists);
    let first = &all[0];
    assert_eq!(
        first.path[..2],
        ["tables".to_string(), "Artist".to_string()]
    );
    assert!(
        h.entry(&first.path).expect("entry").is_some(),
        "{:?}",
        first.path
    );
    assert!(first.text.contains("Name: "), "{}", first.text);
    // Not configured: nothing offered; a missing table is an error at open.
    assert!(f
        .host(false)
        .documents(None, 10)
        .expect("docs")
        .0
        .is_empty());
    let bad = DbSettings {
        file: "test.db".to_string(),
        writable: false,
        page_size: 200,
        search: vec!["NoSuch".to_string()],
        titles: Default::default(),
    };
    let err = DbHost::open(bad, &f.ctx().at("db/test"))
        .err()
        .expect("error");
    assert!(err.to_string().contains("NoSuch"), "{err}");
}

#[test]
fn loading_extensions_is_forbidden_and_nul_bytes_are_invalid() {
    let f = Fixture::new();
    let h = f.host(true);
    for sql in [
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT LOAD_EXTENSION('x', 'init')",
        "SELECT fts3_tokenizer('simple')",
    ] {
        let words = forbidden(query(&h, sql));
        assert!(words.contains("is not allowed"), "{sql}: {words}");
    }
    let words = invalid(query(&h, "SELECT 1\0; DROP TABLE Track"));
    assert!(words.contains("NUL byte"), "{words}");
    let words = invalid(call(
        &h,
        "tables/Track",
        "count",
        json!({"where": "1\0) OR (1"}),
    ));
    assert!(words.contains("NUL byte"), "{words}");
    let words = invalid(call(
        &h,
        "tables/Track",
        "insert",
        json!({"values": {"Name\0\"": "x"}}),
    ));
    assert!(words.contains("NUL byte"), "{words}");
    assert_eq!(f.count("Track"), 3);
}

#[test]
fn rows_carry_the_title_column_the_manifest_names() {
    let f = Fixture::new();
    let open_with = |titles: &[(&str, &str)]| {
        let settings = DbSettings {
            file: "test.db".to_string(),
            writable: false,
            page_size: 200,
            search: Vec::new(),
            titles: titles
                .iter()
                .map(|(t, c)| (t.to_string(), c.to_string()))
                .collect(),
        };
        DbHost::open(settings, &f.ctx().at("db/test"))
    };
    let h = open_with(&[("Artist", "Name"), ("Big", "v")]).expect("open");
    let rows = h.children(&p("tables/Artist/rows")).unwrap();
    let titles: Vec<Option<&str>> = rows.iter().map(|c| c.info.title.as_deref()).collect();
    assert_eq!(titles, vec![Some("AC/DC"), Some("Accept")]);
    let one = h.entry(&p("tables/Artist/rows/1")).unwrap().unwrap();
    assert_eq!(one.title.as_deref(), Some("AC/DC"));
    assert_eq!(
        one.description, rows[0].info.description,
        "the title changes no description"
    );
    // A table without a title column has none.
    let album = h.entry(&p("tables/Album/rows/1")).unwrap().unwrap();
    assert_eq!(album.title, None);
    // A title column that is not a telling column is read all the same.
    let big = h.entry(&p("tables/Big/rows/7")).unwrap().unwrap();
    assert_eq!(big.title.as_deref(), Some("value 7"));
    // Names that do not exist are refused with words.
    let e = open_with(&[("Nope", "Name")])
        .err()
        .expect("error")
        .to_string();
    assert!(e.contains("titles names the table \"Nope\""), "{e}");
    let e = open_with(&[("Artist", "Title")])
        .err()
        .expect("error")
        .to_string();
    assert!(
        e.contains("column \"Title\" of table \"Artist\"") && e.contains("ArtistId, Name"),
        "{e}"
    );
}

#[test]
fn a_row_body_is_one_json_object() {
    let f = Fixture::new();
    let h = f.host(false);
    let body = h
        .body(&p("tables/Track/rows/3"))
        .unwrap()
        .expect("a row has a body");
    let v: Value = serde_json::from_slice(&body.bytes.unwrap()).unwrap();
    assert_eq!(
        v,
        json!({"TrackId": 3, "Name": "Balls to the Wall", "AlbumId": 2, "Composer": null,
               "Milliseconds": 342562})
    );
    assert_eq!(body.write, None);
    assert!(h.body(&p("tables/Track")).unwrap().is_none());
    assert!(h.body(&p("tables/Track/rows/99")).unwrap().is_none());
}

#[test]
fn op_schemas_come_from_their_argument_types() {
    let f = Fixture::new();
    let h = f.host(true);
    let ops = h.ops(&p("tables/Track")).unwrap();
    let export = &ops.iter().find(|o| o.name == "export").unwrap().schema;
    assert_eq!(export["required"], json!(["format"]));
    assert_eq!(export["additionalProperties"], false);
    let props = &export["properties"];
    assert_eq!(props["format"]["enum"], json!(["csv", "json"]));
    assert_eq!(props["limit"]["minimum"], 1);
    assert_eq!(props["limit"]["maximum"], 100_000);
    assert_eq!(props["limit"]["default"], 1000);
    assert_eq!(props["where"]["type"], "string");
    assert_eq!(props["where"]["minLength"], 1);
    assert!(props["where"]["description"]
        .as_str()
        .unwrap()
        .starts_with("SQL condition"));
    assert_eq!(
        props["params"]["items"]["type"],
        json!(["string", "number", "boolean", "null"])
    );
    let insert = &ops.iter().find(|o| o.name == "insert").unwrap().schema;
    assert_eq!(insert["required"], json!(["values"]));
    let update = &h.ops(&p("tables/Track/rows/1")).unwrap()[3];
    assert_eq!(update.name, "update");
    assert_eq!(update.schema["properties"]["set"]["minProperties"], 1);
    // A bad argument names the op and the argument.
    let words = invalid(call(&h, "tables/Track", "export", json!({"format": "xml"})));
    assert!(
        words.starts_with("argument format of export: unknown variant `xml`"),
        "{words}"
    );
    let words = invalid(call(
        &h,
        "tables/Track",
        "export",
        json!({"format": "csv", "limit": 0}),
    ));
    assert!(words.contains("from 1 to 100000"), "{words}");
}

#[test]
fn a_write_keeps_its_run_in_its_transaction_and_reads_cannot_tell() {
    use crate::host::Settled;
    let f = Fixture::new();
    let h = f.host(true);
    let caller = Caller {
        run: "j:7".to_string(),
        ..Caller::default()
    };
    let out = h
        .call(
            &p("tables/Artist"),
            "insert",
            &json!({"values": {"Name": "x"}}),
            &caller,
        )
        .unwrap();
    assert_eq!(
        h.settle(&p("tables/Artist"), "insert", "j:7").unwrap(),
        Some(Settled::Done(out.result))
    );
    assert_eq!(
        h.settle(&p("tables/Artist"), "insert", "j:8").unwrap(),
        Some(Settled::NotRun)
    );
    assert_eq!(h.settle(&p(""), "query", "j:9").unwrap(), None);
    assert_eq!(
        f.host(false)
            .settle(&p("tables/Artist"), "insert", "j:7")
            .unwrap(),
        None
    );
}
