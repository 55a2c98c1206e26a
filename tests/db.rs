//! The db host over real databases nobody here wrote (scripts/fixtures.sh builds them from
//! PyPI packages): Chinook and the 43,191-row zipcodes.db, mounted for real.

mod common;

use std::path::PathBuf;

use common::{fixtures, Mount};

const EINVAL: i32 = libc::EINVAL;
const EACCES: i32 = libc::EACCES;

/// A private copy of a fixture, so writes never touch the shared file.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::copy(fixtures().join(name), &path).unwrap();
    (dir, path)
}

fn mount(chinook: &std::path::Path, writable: bool) -> Mount {
    let zip = fixtures().join("zipcodes.db");
    Mount::start(Some(&format!(
        "[[host]]\nkind = \"db\"\npath = \"db/chinook\"\nfile = {chinook:?}\nwritable = {writable}\n\
         [[host]]\nkind = \"db\"\npath = \"db/zip\"\nfile = {zip:?}\n"
    )))
}

fn count(db: &std::path::Path, table: &str) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

fn first_path(result: &str, part: &str) -> String {
    result
        .lines()
        .filter_map(|l| l.split('\t').next())
        .find(|p| p.contains(part))
        .unwrap_or_else(|| panic!("no path with {part} in:\n{result}"))
        .to_string()
}

#[test]
fn browse_every_table_and_look_up_rows() {
    let (_d, chinook) = copy_of("chinook.db");
    let m = mount(&chinook, false);
    let tables = m.ok("ls db/chinook/tables");
    for t in [
        "Album",
        "Artist",
        "Customer",
        "Employee",
        "Genre",
        "Invoice",
        "InvoiceLine",
        "MediaType",
        "Playlist",
        "PlaylistTrack",
        "Track",
    ] {
        assert!(tables.lines().any(|l| l == t), "{t} missing: {tables}");
        let d = m.read(&format!("db/chinook/tables/{t}/description"));
        assert_eq!(d.lines().count(), 1, "{d}");
        let rows = count(&chinook, t);
        assert!(d.contains(&rows.to_string()), "{t}: {d}");
        // Every table lists a first page of rows, each with a one-line description.
        let first = m.ok(&format!(
            "ls db/chinook/tables/{t}/rows | grep -v -x -e description -e ref -e ops | head -n 1"
        ));
        let first = first.trim();
        assert!(!first.is_empty(), "{t} lists no rows");
        assert_eq!(
            m.read(&format!("db/chinook/tables/{t}/rows/{first}/description"))
                .lines()
                .count(),
            1
        );
    }
    let d = m.read("db/chinook/tables/Track/description");
    assert!(d.contains("TrackId") && d.contains("3503"), "{d}");
    let track = m.read("db/chinook/tables/Track/rows/1/description");
    assert!(track.contains("For Those About To Rock"), "{track}");
    m.ok("echo > db/chinook/tables/Track/rows/1/ops/read_body/call");
    let body = m.result("db/chinook/tables/Track/rows/1/ops/read_body");
    assert!(
        body.contains("Angus Young") && body.contains("343719"),
        "{body}"
    );
    // A composite key, and any key reachable by path though not listed.
    let pt = m.read("db/chinook/tables/PlaylistTrack/rows/1,3402/description");
    assert_eq!(pt, "PlaylistId=1 · TrackId=3402\n");
    assert!(!m.path("db/chinook/tables/Track/rows/999999").exists());
    m.ok("echo > db/chinook/ops/schema/call");
    assert!(m
        .result("db/chinook/ops/schema")
        .contains("CREATE TABLE PlaylistTrack"));
}

#[test]
fn foreign_keys_both_ways() {
    let (_d, chinook) = copy_of("chinook.db");
    let m = mount(&chinook, false);
    m.ok("echo > db/chinook/tables/Track/rows/1/ops/references/call");
    let r = m.result("db/chinook/tables/Track/rows/1/ops/references");
    let album = first_path(&r, "/tables/Album/rows/");
    assert!(album.ends_with("/tables/Album/rows/1"), "{r}");
    m.ok(&format!("echo > {album}/ops/references/call"));
    let r = m.read(&format!("{album}/ops/references/result"));
    let artist = first_path(&r, "/tables/Artist/rows/");
    assert!(m.read(&format!("{artist}/description")).contains("AC/DC"));
    // And back: the artist's albums, the album's tracks.
    m.ok(&format!("echo > {artist}/ops/referenced_by/call"));
    let back = m.read(&format!("{artist}/ops/referenced_by/result"));
    assert!(back.contains("/tables/Album/rows/1\t"), "{back}");
    assert!(back.contains("/tables/Album/rows/4\t"), "{back}");
    m.ok(&format!("echo > {album}/ops/referenced_by/call"));
    assert!(m
        .read(&format!("{album}/ops/referenced_by/result"))
        .contains("/tables/Track/rows/1\t"));
}

#[test]
fn queries_are_read_only_whatever_they_say() {
    let (dir, chinook) = copy_of("chinook.db");
    // Writable mount: query must still never write.
    let m = mount(&chinook, true);
    let before = count(&chinook, "Artist");
    // A file an ATTACH would create, in a directory of this test's own.
    let attack = dir.path().join("attack.db");
    for sql in [
        "INSERT INTO Artist (Name) VALUES ('x')",
        "UPDATE Artist SET Name = 'x'",
        "DELETE FROM Artist",
        "DROP TABLE Artist",
        &format!("ATTACH DATABASE '{}' AS a", attack.display()),
        "PRAGMA user_version = 5",
        "SELECT 1; DROP TABLE Artist",
        "CREATE TABLE t (a)",
    ] {
        let args = serde_json::json!({ "sql": sql }).to_string();
        assert_eq!(m.call("db/chinook/ops/query", &args), Err(EACCES), "{sql}");
        assert!(
            m.result("db/chinook/ops/query").starts_with("error: "),
            "{sql}"
        );
    }
    assert_eq!(count(&chinook, "Artist"), before);
    assert!(!attack.exists());
    let c = rusqlite::Connection::open(&chinook).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 0);
    // SQL in parameters is data.
    let args = serde_json::json!({
        "sql": "SELECT count(*) AS n FROM Artist WHERE Name = ?",
        "params": ["x'; DROP TABLE Artist; --"]
    })
    .to_string();
    m.call("db/chinook/ops/query", &args).unwrap();
    assert_eq!(count(&chinook, "Artist"), before);
    // A bad query is EINVAL with SQLite's words.
    assert_eq!(
        m.call(
            "db/chinook/ops/query",
            "{\"sql\":\"SELECT * FROM NoSuchTable\"}"
        ),
        Err(EINVAL)
    );
    assert!(m.result("db/chinook/ops/query").contains("no such table"));
}

#[test]
fn a_query_result_is_an_entry_linked_to_real_rows() {
    let (_d, chinook) = copy_of("chinook.db");
    let m = mount(&chinook, false);
    let args = serde_json::json!({
        "sql": "SELECT TrackId, Name FROM Track WHERE AlbumId = ? ORDER BY TrackId",
        "params": [1]
    })
    .to_string();
    m.call("db/chinook/ops/query", &args).unwrap();
    let r = m.result("db/chinook/ops/query");
    assert!(r.contains("For Those About To Rock"), "{r}");
    let q = first_path(&r, "/queries/");
    assert!(
        m.read(&format!("{q}/description")).contains("10 rows"),
        "{r}"
    );
    let row1 = format!("{q}/rows/1");
    assert_eq!(
        m.read(&format!("{row1}/ref")),
        m.read("db/chinook/tables/Track/rows/1/ref"),
        "a result row carrying the key is the same object as the table row"
    );
    // Query runs stay out of find.
    assert!(!m.ok("find db -maxdepth 2").contains("queries"));
}

#[test]
fn writes_on_a_writable_mount_and_constraint_errors() {
    let (_d, chinook) = copy_of("chinook.db");
    let m = mount(&chinook, true);
    m.ok("echo '{\"values\":{\"Name\":\"The Test Band\"}}' > db/chinook/tables/Artist/ops/insert/call");
    let r = m.result("db/chinook/tables/Artist/ops/insert");
    let artist = first_path(&r, "/tables/Artist/rows/");
    assert!(m
        .read(&format!("{artist}/description"))
        .contains("The Test Band"));
    // NOT NULL and FOREIGN KEY violations: EINVAL with SQLite's words, nothing written.
    let before = count(&chinook, "Album");
    assert_eq!(
        m.call(
            "db/chinook/tables/Album/ops/insert",
            "{\"values\":{\"ArtistId\":1}}"
        ),
        Err(EINVAL)
    );
    assert!(m
        .result("db/chinook/tables/Album/ops/insert")
        .contains("NOT NULL"));
    assert_eq!(
        m.call(
            "db/chinook/tables/Album/ops/insert",
            "{\"values\":{\"Title\":\"x\",\"ArtistId\":999999}}"
        ),
        Err(EINVAL)
    );
    assert!(m
        .result("db/chinook/tables/Album/ops/insert")
        .contains("FOREIGN KEY"));
    assert_eq!(count(&chinook, "Album"), before);
    m.ok(&format!(
        "echo '{{\"set\":{{\"Name\":\"Renamed\"}}}}' > {artist}/ops/update/call"
    ));
    assert!(m.read(&format!("{artist}/description")).contains("Renamed"));
    m.ok(&format!("echo > {artist}/ops/delete/call"));
    assert!(!std::path::Path::new(&format!("{artist}/description")).exists());
}

#[test]
fn a_read_only_mount_refuses_writes_by_policy() {
    let (_d, chinook) = copy_of("chinook.db");
    let m = mount(&chinook, false);
    let before = count(&chinook, "Artist");
    assert_eq!(
        m.call(
            "db/chinook/tables/Artist/ops/insert",
            "{\"values\":{\"Name\":\"x\"}}"
        ),
        Err(EACCES)
    );
    assert_eq!(
        m.call("db/chinook/tables/Artist/rows/1/ops/delete", "\n"),
        Err(EACCES)
    );
    assert_eq!(count(&chinook, "Artist"), before);
}

#[test]
fn the_43k_row_table_is_paged() {
    let (_d, chinook) = copy_of("chinook.db");
    let m = mount(&chinook, false);
    let d = m.read("db/zip/tables/ZipCodes/rows/description");
    assert!(
        d.starts_with("43191 rows of table ZipCodes; the listing shows the first 200 by key"),
        "{d}"
    );
    let listed = m
        .ok("ls db/zip/tables/ZipCodes/rows | grep -v -x -e description -e ref -e ops | wc -l")
        .trim()
        .parse::<usize>()
        .unwrap();
    assert_eq!(listed, 200, "the first page is bounded");
    // Rows past the first page are reachable by key.
    assert!(
        m.read("db/zip/tables/ZipCodes/rows/43191/description")
            .lines()
            .count()
            == 1
    );
    // key=value lines (one write, as /usr/bin/printf or a heredoc sends them) and JSON.
    let count_op = "db/zip/tables/ZipCodes/ops/count";
    m.ok(&format!(
        "/usr/bin/printf 'where=state = ?\\nparams=[\"NH\"]\\n' > {count_op}/call"
    ));
    let by_lines = m.result(count_op);
    m.ok(&format!(
        "echo '{{\"where\":\"state = ?\",\"params\":[\"NH\"]}}' > {count_op}/call"
    ));
    let n = m.result(count_op);
    assert_eq!(by_lines, n);
    let expected: i64 = rusqlite::Connection::open(fixtures().join("zipcodes.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM ZipCodes WHERE state = 'NH'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        n,
        format!("{expected} rows of ZipCodes where state = ? (params [\"NH\"])\n")
    );
}

#[test]
fn tables_and_rows_named_like_reserved_names_print_paths_that_exist() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reserved.db");
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "CREATE TABLE ops (k TEXT PRIMARY KEY, body TEXT);
             CREATE TABLE description (k TEXT PRIMARY KEY, ops TEXT REFERENCES ops (k));
             CREATE TABLE \"README.md\" (k TEXT PRIMARY KEY);
             INSERT INTO ops VALUES ('body', 'x'), ('README.md', 'y');
             INSERT INTO description VALUES ('ops', 'body');",
        )
        .unwrap();
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"db\"\npath = \"db/r\"\nfile = {file:?}\nwritable = true\n"
    )));
    assert_eq!(
        m.ok("ls db/r/tables"),
        "README.md\ndescription\ndescription~\nops\nops~\nref\n"
    );
    let mut texts = Vec::new();
    for (op, args) in [
        (
            "db/r/tables/ops~/ops/insert",
            r#"{"values":{"k":"description"}}"#,
        ),
        (
            "db/r/tables/README.md/ops/insert",
            r#"{"values":{"k":"ops"}}"#,
        ),
        (
            "db/r/tables/ops~/rows/body~/ops/update",
            r#"{"set":{"body":"z"}}"#,
        ),
        ("db/r/tables/ops~/rows/body~/ops/referenced_by", ""),
        ("db/r/tables/description~/rows/ops~/ops/references", ""),
        (
            "db/r/ops/query",
            r#"{"sql":"SELECT k FROM ops ORDER BY k"}"#,
        ),
    ] {
        texts.push(m.ok(&format!(
            "echo '{args}' > {op}/call; cat {op}/result; cat {op}/guard"
        )));
    }
    // A query's rows name the table rows they are.
    texts.push(m.ok(
        "echo > db/r/queries/1/rows/2/ops/read_body/call; cat db/r/queries/1/rows/2/ops/read_body/result; \
         echo > db/r/queries/1/ops/read_body/call; cat db/r/queries/1/ops/read_body/result",
    ));
    let all = texts.join("\n");
    for want in [
        "db/r/tables/ops~/rows/description~",
        "db/r/tables/README.md/rows/ops~",
        "db/r/tables/ops~/rows/body~",
        "db/r/tables/description~/rows/ops~",
        "db/r/queries/1/rows",
    ] {
        assert!(all.contains(want), "{want} never printed in:\n{all}");
    }
    for text in &texts {
        m.assert_all_exist(&m.printed_paths(text, "db/r"), text);
    }
}
