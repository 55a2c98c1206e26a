//! The known world: every entry looked up by path or discovered by a call, with its ref,
//! kept in the state database across remounts. Lookups are hot (a `find` makes thousands),
//! so they are queued and written in batches by one thread; readers flush the queue first.

use std::path::Path;
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{params, Connection};

use super::error::{WorldError, WorldResult};

/// One known entry.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    reader: Mutex<Connection>,
    _writer: JoinHandle<()>,
}

/// How many queued records one transaction writes at most.
const BATCH: usize = 2048;

impl Known {
    pub fn open(path: &Path) -> WorldResult<Known> {
        let setup = |conn: &Connection| -> rusqlite::Result<()> {
            conn.busy_timeout(std::time::Duration::from_secs(10))?;
            conn.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
                 CREATE TABLE IF NOT EXISTS known(
                   path TEXT PRIMARY KEY, ref TEXT NOT NULL, description TEXT NOT NULL,
                   indexable INTEGER NOT NULL, seen TEXT NOT NULL);
                 CREATE INDEX IF NOT EXISTS known_by_ref ON known(ref);",
            )
        };
        let writer_conn = Connection::open(path)?;
        setup(&writer_conn)?;
        let reader = Connection::open(path)?;
        setup(&reader)?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let writer = std::thread::Builder::new()
            .name("known-world".into())
            .spawn(move || write_loop(writer_conn, rx))
            .map_err(|e| {
                WorldError::backend(format!("cannot start the known-world writer: {e}"))
            })?;
        Ok(Known {
            tx: Mutex::new(tx),
            reader: Mutex::new(reader),
            _writer: writer,
        })
    }

    /// Remember an entry (queued; never blocks on the database).
    pub fn record(&self, entry: KnownEntry) {
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
        self.reader
            .lock()
            .map_err(|_| WorldError::backend("known world lock poisoned"))
    }

    /// Indexable known entries whose path or description holds every word (any case).
    pub fn locate(&self, words: &[String], limit: usize) -> WorldResult<Vec<KnownEntry>> {
        let conn = self.reader()?;
        let mut sql =
            String::from("SELECT path, ref, description, indexable FROM known WHERE indexable = 1");
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
                " AND (path LIKE ?{i} ESCAPE '\\' OR description LIKE ?{i} ESCAPE '\\')"
            ));
        }
        sql.push_str(&format!(" ORDER BY length(path), path LIMIT {limit}"));
        let mut st = conn.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(args.iter()), row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Every known path of the object with this ref.
    pub fn paths_of(&self, reference: &str) -> WorldResult<Vec<String>> {
        let conn = self.reader()?;
        let mut st = conn.prepare_cached("SELECT path FROM known WHERE ref = ?1 ORDER BY path")?;
        let rows = st.query_map([reference], |r| r.get(0))?;
        Ok(rows.collect::<Result<Vec<String>, _>>()?)
    }

    /// The most recently seen entries, newest first, and how many are known in all.
    pub fn recent(&self, limit: usize) -> WorldResult<(Vec<KnownEntry>, i64)> {
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

fn write_loop(mut conn: Connection, rx: mpsc::Receiver<Msg>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
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
}
