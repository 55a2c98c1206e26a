//! The known world: every entry looked up by path or discovered by a call, with its ref,
//! kept in the state database across remounts. Lookups are hot (a `find` makes thousands),
//! so they are queued and written in batches by one thread; readers flush the queue first.
//! It lives beside the journal: SQLite in the state directory, or the shared PostgreSQL
//! database, where every mount's discoveries meet.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{params, Connection};

use super::error::{WorldError, WorldResult};
use super::shared::SharedDb;

/// One known entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KnownEntry {
    pub path: String,
    pub reference: String,
    pub description: String,
    /// In the indexable range: it and every ancestor are indexable.
    pub indexable: bool,
}

enum Msg {
    Record(KnownEntry),
    Flush(mpsc::Sender<()>),
}

pub struct Known {
    tx: Mutex<mpsc::Sender<Msg>>,
    recent: Mutex<Recent>,
    reader: Reader,
    _writer: JoinHandle<()>,
}

enum Reader {
    Sqlite(Mutex<Connection>),
    Postgres(Arc<SharedDb>),
}

const PG_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS known(
  path TEXT PRIMARY KEY, ref TEXT NOT NULL, description TEXT NOT NULL,
  indexable BOOLEAN NOT NULL, seen TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS known_by_ref ON known(ref);
";
/// Serialises concurrent creation of the table by mounts starting together.
const PG_SCHEMA_LOCK: i64 = 0x7769_705f_6b6e_6f77;

/// How many queued records one transaction writes at most.
const BATCH: usize = 2048;

/// An entry recorded again unchanged within this time is not written again: every call
/// and lookup of a hot entry would otherwise rewrite the same row. `.wip/known` orders by
/// when an entry was seen, to this precision.
const SEEN_PRECISION: std::time::Duration = std::time::Duration::from_secs(10);
/// How many recent records are remembered for that (hashes and times, about 0.5 MiB).
const RECENT_MAX: usize = 16_384;

/// What was last written for each path lately (hashes), and when.
#[derive(Default)]
struct Recent {
    hasher: std::collections::hash_map::RandomState,
    at: std::collections::HashMap<u64, (u64, std::time::Instant)>,
}

impl Recent {
    /// Whether `entry` must be written: its path's row was not written with the same
    /// content lately.
    fn fresh(&mut self, entry: &KnownEntry) -> bool {
        use std::hash::BuildHasher;
        let key = self.hasher.hash_one(&entry.path);
        let content = self.hasher.hash_one(entry);
        let now = std::time::Instant::now();
        if let Some((c, t)) = self.at.get(&key) {
            if *c == content && now.duration_since(*t) < SEEN_PRECISION {
                return false;
            }
        }
        if self.at.len() >= RECENT_MAX {
            self.at
                .retain(|_, (_, t)| now.duration_since(*t) < SEEN_PRECISION);
            if self.at.len() >= RECENT_MAX {
                self.at.clear();
            }
        }
        self.at.insert(key, (content, now));
        true
    }
}

impl Known {
    pub fn open(path: &Path) -> WorldResult<Known> {
        let setup = |conn: &mut Connection| -> rusqlite::Result<()> {
            crate::sqlite::wait_when_busy(conn, std::time::Duration::from_secs(10))?;
            conn.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
                 CREATE TABLE IF NOT EXISTS known(
                   path TEXT PRIMARY KEY, ref TEXT NOT NULL, description TEXT NOT NULL,
                   indexable INTEGER NOT NULL, seen TEXT NOT NULL);
                 CREATE INDEX IF NOT EXISTS known_by_ref ON known(ref);",
            )
        };
        let mut writer_conn = Connection::open(path)?;
        setup(&mut writer_conn)?;
        let mut reader = Connection::open(path)?;
        setup(&mut reader)?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let writer = std::thread::Builder::new()
            .name("known-world".into())
            .spawn(move || write_loop(writer_conn, rx))
            .map_err(|e| {
                WorldError::backend(format!("cannot start the known-world writer: {e}"))
            })?;
        Ok(Known {
            tx: Mutex::new(tx),
            recent: Mutex::default(),
            reader: Reader::Sqlite(Mutex::new(reader)),
            _writer: writer,
        })
    }

    /// The known world in the shared PostgreSQL database.
    pub fn open_shared(db: Arc<SharedDb>) -> WorldResult<Known> {
        {
            let mut c = db.client()?;
            let created = (|| -> Result<(), postgres::Error> {
                let mut tx = c.transaction()?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PG_SCHEMA_LOCK])?;
                tx.batch_execute(PG_SCHEMA)?;
                tx.commit()
            })();
            created.map_err(|e| db.error("cannot open the known world", &e))?;
        }
        let (tx, rx) = mpsc::channel::<Msg>();
        let writer_db = Arc::clone(&db);
        let writer = std::thread::Builder::new()
            .name("known-world".into())
            .spawn(move || pg_write_loop(&writer_db, rx))
            .map_err(|e| {
                WorldError::backend(format!("cannot start the known-world writer: {e}"))
            })?;
        Ok(Known {
            tx: Mutex::new(tx),
            recent: Mutex::default(),
            reader: Reader::Postgres(db),
            _writer: writer,
        })
    }

    /// Remember an entry (queued; never blocks on the database).
    pub fn record(&self, entry: KnownEntry) {
        if let Ok(mut recent) = self.recent.lock() {
            if !recent.fresh(&entry) {
                return;
            }
        }
        if let Ok(tx) = self.tx.lock() {
            let _ = tx.send(Msg::Record(entry));
        }
    }

    /// Wait until everything recorded so far is written.
    pub fn flush(&self) {
        let (done_tx, done_rx) = mpsc::channel();
        let sent = self
            .tx
            .lock()
            .map(|tx| tx.send(Msg::Flush(done_tx)).is_ok())
            .unwrap_or(false);
        if sent {
            let _ = done_rx.recv_timeout(std::time::Duration::from_secs(10));
        }
    }

    fn reader(&self) -> WorldResult<std::sync::MutexGuard<'_, Connection>> {
        self.flush();
        match &self.reader {
            Reader::Sqlite(c) => c
                .lock()
                .map_err(|_| WorldError::backend("known world lock poisoned")),
            Reader::Postgres(_) => Err(WorldError::backend("known world: not on SQLite")),
        }
    }

    /// The shared database, if the known world is there (after a flush of the queue).
    fn shared(&self) -> Option<&SharedDb> {
        match &self.reader {
            Reader::Postgres(db) => {
                self.flush();
                Some(db)
            }
            Reader::Sqlite(_) => None,
        }
    }

    /// Indexable known entries whose path or description holds every word (any case).
    pub fn locate(&self, words: &[String], limit: usize) -> WorldResult<Vec<KnownEntry>> {
        if let Some(db) = self.shared() {
            return pg_locate(db, words, limit);
        }
        let conn = self.reader()?;
        let (sql, args) = locate_query(words, limit, "indexable = 1", "LIKE", '?');
        let mut st = conn.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(args.iter()), row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Every known path of the object with this ref.
    pub fn paths_of(&self, reference: &str) -> WorldResult<Vec<String>> {
        if let Some(db) = self.shared() {
            let mut c = db.client()?;
            let rows = c
                .query(
                    "SELECT path FROM known WHERE ref = $1 ORDER BY path",
                    &[&reference],
                )
                .map_err(|e| db.error("cannot read the known world", &e))?;
            return rows
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<Vec<String>, _>>()
                .map_err(|e| db.error("cannot read the known world", &e));
        }
        let conn = self.reader()?;
        let mut st = conn.prepare_cached("SELECT path FROM known WHERE ref = ?1 ORDER BY path")?;
        let rows = st.query_map([reference], |r| r.get(0))?;
        Ok(rows.collect::<Result<Vec<String>, _>>()?)
    }

    /// The most recently seen entries, newest first, and how many are known in all.
    pub fn recent(&self, limit: usize) -> WorldResult<(Vec<KnownEntry>, i64)> {
        if let Some(db) = self.shared() {
            let mut c = db.client()?;
            let read = (|| -> Result<_, postgres::Error> {
                let total: i64 = c.query_one("SELECT count(*) FROM known", &[])?.try_get(0)?;
                let rows = c.query(
                    "SELECT path, ref, description, indexable FROM known
                     ORDER BY seen DESC, path LIMIT $1",
                    &[&(limit as i64)],
                )?;
                let entries = rows.iter().map(pg_row).collect::<Result<Vec<_>, _>>()?;
                Ok((entries, total))
            })();
            return read.map_err(|e| db.error("cannot read the known world", &e));
        }
        let conn = self.reader()?;
        let total: i64 = conn.query_row("SELECT count(*) FROM known", [], |r| r.get(0))?;
        let mut st = conn.prepare_cached(
            "SELECT path, ref, description, indexable FROM known ORDER BY seen DESC, path LIMIT ?1",
        )?;
        let rows = st.query_map([limit as i64], row)?;
        Ok((rows.collect::<Result<Vec<_>, _>>()?, total))
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KnownEntry> {
    Ok(KnownEntry {
        path: r.get(0)?,
        reference: r.get(1)?,
        description: r.get(2)?,
        indexable: r.get::<_, i64>(3)? != 0,
    })
}

fn pg_row(r: &postgres::Row) -> Result<KnownEntry, postgres::Error> {
    Ok(KnownEntry {
        path: r.try_get(0)?,
        reference: r.try_get(1)?,
        description: r.try_get(2)?,
        indexable: r.try_get(3)?,
    })
}

/// The `locate` query for either engine: every word (any case) in the path or the
/// description, `%` and `_` taken literally; its text and its `like` patterns, numbered
/// from 1 after `mark` (`?` for SQLite, `$` for PostgreSQL).
fn locate_query(
    words: &[String],
    limit: usize,
    indexable: &str,
    like: &str,
    mark: char,
) -> (String, Vec<String>) {
    let mut sql = format!("SELECT path, ref, description, indexable FROM known WHERE {indexable}");
    let mut args: Vec<String> = Vec::new();
    for w in words {
        args.push(format!(
            "%{}%",
            w.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        ));
        let i = args.len();
        sql.push_str(&format!(
            " AND (path {like} {mark}{i} ESCAPE '\\' OR description {like} {mark}{i} ESCAPE '\\')"
        ));
    }
    sql.push_str(&format!(" ORDER BY length(path), path LIMIT {limit}"));
    (sql, args)
}

fn pg_locate(db: &SharedDb, words: &[String], limit: usize) -> WorldResult<Vec<KnownEntry>> {
    let (sql, args) = locate_query(words, limit, "indexable", "ILIKE", '$');
    let params: Vec<&(dyn postgres::types::ToSql + Sync)> = args
        .iter()
        .map(|a| a as &(dyn postgres::types::ToSql + Sync))
        .collect();
    let mut c = db.client()?;
    let rows = c
        .query(&sql, &params)
        .map_err(|e| db.error("cannot search the known world", &e))?;
    rows.iter()
        .map(pg_row)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| db.error("cannot search the known world", &e))
}

/// Take what is queued (up to `BATCH`), after the first message.
/// How long the writer gathers records after the first before it writes them: calls one
/// after another then share one transaction instead of one each (each would take the
/// state file's write lock the journal wants next). A flush writes at once.
const GATHER: std::time::Duration = std::time::Duration::from_millis(20);

fn next_batch(first: Msg, rx: &mpsc::Receiver<Msg>) -> Vec<Msg> {
    let deadline = std::time::Instant::now() + GATHER;
    let mut flushing = matches!(first, Msg::Flush(_));
    let mut batch = vec![first];
    while batch.len() < BATCH {
        let got = if flushing {
            rx.try_recv().ok()
        } else {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            rx.recv_timeout(left).ok()
        };
        match got {
            Some(m) => {
                flushing |= matches!(m, Msg::Flush(_));
                batch.push(m);
            }
            None => break,
        }
    }
    batch
}

fn pg_write_loop(db: &SharedDb, rx: mpsc::Receiver<Msg>) {
    while let Ok(first) = rx.recv() {
        let mut waiting = Vec::new();
        let mut entries = Vec::new();
        for m in next_batch(first, &rx) {
            match m {
                Msg::Record(e) => entries.push(e),
                Msg::Flush(done) => waiting.push(done),
            }
        }
        // One row once per batch, in path order: two mounts writing overlapping batches
        // then lock rows in the same order and cannot deadlock.
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        entries.dedup_by(|later, earlier| {
            if later.path == earlier.path {
                std::mem::swap(later, earlier);
                true
            } else {
                false
            }
        });
        if !entries.is_empty() {
            match db.client() {
                Ok(mut c) => {
                    let written = (|| -> Result<(), postgres::Error> {
                        let mut tx = c.transaction()?;
                        let st = tx.prepare(
                            r#"INSERT INTO known(path, ref, description, indexable, seen)
                               VALUES ($1, $2, $3, $4,
                                 to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                               ON CONFLICT(path) DO UPDATE SET ref = excluded.ref,
                                 description = excluded.description, indexable = excluded.indexable,
                                 seen = excluded.seen"#,
                        )?;
                        for e in &entries {
                            tx.execute(
                                &st,
                                &[&e.path, &e.reference, &e.description, &e.indexable],
                            )?;
                        }
                        tx.commit()
                    })();
                    if let Err(e) = written {
                        tracing::warn!("{}", db.error("known world", &e));
                    }
                }
                Err(e) => tracing::warn!("known world: {e}"),
            }
        }
        for done in waiting {
            let _ = done.send(());
        }
    }
}

fn write_loop(mut conn: Connection, rx: mpsc::Receiver<Msg>) {
    while let Ok(first) = rx.recv() {
        let batch = next_batch(first, &rx);
        let mut waiting = Vec::new();
        let written = (|| -> rusqlite::Result<()> {
            let tx = conn.transaction()?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT INTO known(path, ref, description, indexable, seen)
                     VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                     ON CONFLICT(path) DO UPDATE SET ref = excluded.ref,
                       description = excluded.description, indexable = excluded.indexable,
                       seen = excluded.seen",
                )?;
                for m in batch {
                    match m {
                        Msg::Record(e) => {
                            st.execute(params![e.path, e.reference, e.description, e.indexable])?;
                        }
                        Msg::Flush(done) => waiting.push(done),
                    }
                }
            }
            tx.commit()
        })();
        if let Err(e) = written {
            tracing::warn!("known world: {e}");
        }
        for done in waiting {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, reference: &str, description: &str, indexable: bool) -> KnownEntry {
        KnownEntry {
            path: path.into(),
            reference: reference.into(),
            description: description.into(),
            indexable,
        }
    }

    #[test]
    fn records_locates_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("journal.db");
        {
            let k = Known::open(&db).unwrap();
            k.record(entry(
                "/t/issues/42",
                "t://42",
                "Issue #42 · Crash when config is missing",
                true,
            ));
            k.record(entry("/s/results/1/hits/1", "t://42", "0.9 · crash", false));
            k.record(entry(
                "/t/issues/7",
                "t://7",
                "Issue #7 · Colours 100%",
                true,
            ));
            let found = k.locate(&["crash".into(), "config".into()], 10).unwrap();
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].path, "/t/issues/42");
            // LIKE wildcards in the query are literal.
            assert_eq!(k.locate(&["100%".into()], 10).unwrap().len(), 1);
            assert_eq!(k.locate(&["_".into()], 10).unwrap().len(), 0);
        }
        let k = Known::open(&db).unwrap();
        assert_eq!(
            k.paths_of("t://42").unwrap(),
            vec![
                "/s/results/1/hits/1".to_string(),
                "/t/issues/42".to_string()
            ]
        );
        assert_eq!(k.recent(10).unwrap().1, 3);
    }

    #[test]
    fn an_entry_recorded_again_keeps_its_latest_content() {
        let dir = tempfile::tempdir().unwrap();
        let k = Known::open(&dir.path().join("journal.db")).unwrap();
        // Unchanged records within the precision are not written again; a change, and a
        // change back, always are.
        for description in ["first", "first", "second", "first"] {
            k.record(entry("/t/issues/1", "t://1", description, true));
        }
        let found = k.locate(&["first".into()], 10).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(k.locate(&["second".into()], 10).unwrap().len(), 0);
        assert_eq!(k.recent(10).unwrap().1, 1);
    }
}

#[cfg(test)]
mod shared_tests {
    use super::*;
    use crate::world::shared::TestDb;

    #[test]
    fn two_mounts_share_one_known_world() {
        let db = TestDb::create();
        let a = Known::open_shared(Arc::new(SharedDb::connect(&db.url).unwrap())).unwrap();
        let b = Known::open_shared(Arc::new(SharedDb::connect(&db.url).unwrap())).unwrap();
        a.record(KnownEntry {
            path: "/t/issues/42".into(),
            reference: "t://42".into(),
            description: "Issue #42 · Crash when config is missing".into(),
            indexable: true,
        });
        b.record(KnownEntry {
            path: "/s/hits/1".into(),
            reference: "t://42".into(),
            description: "0.9 · crash".into(),
            indexable: false,
        });
        b.record(KnownEntry {
            path: "/t/issues/7".into(),
            reference: "t://7".into(),
            description: "Colours 100%".into(),
            indexable: true,
        });
        a.flush();
        let found = b.locate(&["CRASH".into(), "config".into()], 10).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, "/t/issues/42");
        assert_eq!(a.locate(&["100%".into()], 10).unwrap().len(), 1);
        assert_eq!(a.locate(&["_".into()], 10).unwrap().len(), 0);
        assert_eq!(
            a.paths_of("t://42").unwrap(),
            vec!["/s/hits/1".to_string(), "/t/issues/42".to_string()]
        );
        assert_eq!(a.recent(10).unwrap().1, 3);
    }
}
