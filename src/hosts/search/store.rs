//! The search host's SQLite file (`state.db` in the index directory): which version of
//! which document is indexed, and every search's query and hits, so `results/ID` survives
//! remounts.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::index::Hit;
use crate::host::{HostResult, OrFailed};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS docs (
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    version TEXT NOT NULL,
    PRIMARY KEY (source, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    query TEXT NOT NULL,
    source TEXT,
    total INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS hits (
    result INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    score REAL NOT NULL,
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    title TEXT NOT NULL,
    snippet TEXT NOT NULL,
    line INTEGER,
    PRIMARY KEY (result, rank)
) WITHOUT ROWID;
";

/// A stored search.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Search {
    pub id: i64,
    pub query: String,
    pub source: Option<String>,
    /// How many documents matched in all (more than the hits kept when limited).
    pub total: i64,
    /// How many hits are kept.
    pub kept: i64,
}

/// A change of the indexed set: (source, path, new version or None when removed).
pub(super) type Change = (String, String, Option<String>);

pub(super) struct Store {
    conn: Mutex<Connection>,
}

/// What a failed statement says it was at.
const DB: &str = "search database";

impl Store {
    /// Open (creating) the file; `clear` forgets the indexed documents (a new, empty index).
    pub(super) fn open(file: &Path, clear: bool) -> rusqlite::Result<Store> {
        let conn = Connection::open(file)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        // Searches kept before hits knew their line have none.
        let has_line: bool = conn.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info('hits') WHERE name = 'line'",
            [],
            |r| r.get(0),
        )?;
        if !has_line {
            conn.execute("ALTER TABLE hits ADD COLUMN line INTEGER", [])?;
        }
        if clear {
            conn.execute("DELETE FROM docs", [])?;
        }
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A thread that panicked left no transaction open: SQLite rolled it back.
        crate::hosts::lock(&self.conn)
    }

    /// Path → version of the indexed documents of one source.
    pub(super) fn versions(&self, source: &str) -> HostResult<HashMap<String, String>> {
        let conn = self.lock();
        let mut st = conn
            .prepare_cached("SELECT path, version FROM docs WHERE source = ?1")
            .or_failed(DB)?;
        let rows = st
            .query_map([source], |r| Ok((r.get(0)?, r.get(1)?)))
            .or_failed(DB)?;
        rows.collect::<Result<_, _>>().or_failed(DB)
    }

    /// Sources with indexed documents.
    pub(super) fn sources(&self) -> HostResult<Vec<String>> {
        let conn = self.lock();
        let mut st = conn
            .prepare_cached("SELECT DISTINCT source FROM docs ORDER BY source")
            .or_failed(DB)?;
        let rows = st.query_map([], |r| r.get(0)).or_failed(DB)?;
        rows.collect::<Result<_, _>>().or_failed(DB)
    }

    /// Indexed documents per source.
    pub(super) fn counts(&self) -> HostResult<HashMap<String, i64>> {
        let conn = self.lock();
        let mut st = conn
            .prepare_cached("SELECT source, count(*) FROM docs GROUP BY source")
            .or_failed(DB)?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .or_failed(DB)?;
        rows.collect::<Result<_, _>>().or_failed(DB)
    }

    /// Record a pass's changes in one transaction: first forget everything (`clear`, a full
    /// rebuild) and the `dropped` sources, then apply `changes`.
    pub(super) fn apply(
        &self,
        clear: bool,
        dropped: &[String],
        changes: &[Change],
    ) -> HostResult<()> {
        let mut conn = self.lock();
        let tx = conn.transaction().or_failed(DB)?;
        if clear {
            tx.execute("DELETE FROM docs", []).or_failed(DB)?;
        }
        for source in dropped {
            tx.execute("DELETE FROM docs WHERE source = ?1", [source])
                .or_failed(DB)?;
        }
        {
            let mut put = tx
                .prepare_cached(
                    "INSERT INTO docs (source, path, version) VALUES (?1, ?2, ?3)
                     ON CONFLICT (source, path) DO UPDATE SET version = excluded.version",
                )
                .or_failed(DB)?;
            let mut del = tx
                .prepare_cached("DELETE FROM docs WHERE source = ?1 AND path = ?2")
                .or_failed(DB)?;
            for (source, path, version) in changes {
                match version {
                    Some(v) => put.execute(params![source, path, v]),
                    None => del.execute(params![source, path]),
                }
                .or_failed(DB)?;
            }
        }
        tx.commit().or_failed(DB)
    }

    /// Keep a search and its hits; returns its id.
    pub(super) fn add_search(
        &self,
        query: &str,
        source: Option<&str>,
        total: usize,
        hits: &[Hit],
    ) -> HostResult<i64> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let mut conn = self.lock();
        let tx = conn.transaction().or_failed(DB)?;
        tx.execute(
            "INSERT INTO results (query, source, total, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![query, source, i64::try_from(total).unwrap_or(i64::MAX), now],
        )
        .or_failed(DB)?;
        let id = tx.last_insert_rowid();
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT INTO hits (result, rank, score, source, path, title, snippet, line)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .or_failed(DB)?;
            for (i, h) in hits.iter().enumerate() {
                st.execute(params![
                    id,
                    i as i64 + 1,
                    f64::from(h.score),
                    h.source,
                    h.path,
                    h.title,
                    h.snippet,
                    h.line
                ])
                .or_failed(DB)?;
            }
        }
        tx.commit().or_failed(DB)?;
        Ok(id)
    }

    pub(super) fn search(&self, id: i64) -> HostResult<Option<Search>> {
        let conn = self.lock();
        let mut st = conn
            .prepare_cached(
                "SELECT id, query, source, total,
                        (SELECT count(*) FROM hits WHERE result = results.id)
                 FROM results WHERE id = ?1",
            )
            .or_failed(DB)?;
        st.query_row([id], search_row).optional().or_failed(DB)
    }

    /// The newest `limit` searches, newest first, and how many there are.
    pub(super) fn searches(&self, limit: usize) -> HostResult<(Vec<Search>, i64)> {
        let conn = self.lock();
        let total: i64 = conn
            .query_row("SELECT count(*) FROM results", [], |r| r.get(0))
            .or_failed(DB)?;
        let mut st = conn
            .prepare_cached(
                "SELECT id, query, source, total,
                        (SELECT count(*) FROM hits WHERE result = results.id)
                 FROM results ORDER BY id DESC LIMIT ?1",
            )
            .or_failed(DB)?;
        let rows = st
            .query_map([i64::try_from(limit).unwrap_or(i64::MAX)], search_row)
            .or_failed(DB)?;
        Ok((rows.collect::<Result<_, _>>().or_failed(DB)?, total))
    }

    /// The hits of a search, best first (rank 1 first).
    pub(super) fn hits(&self, id: i64) -> HostResult<Vec<Hit>> {
        let conn = self.lock();
        let mut st = conn
            .prepare_cached(
                "SELECT score, source, path, title, snippet, line FROM hits
                 WHERE result = ?1 ORDER BY rank",
            )
            .or_failed(DB)?;
        let rows = st.query_map([id], hit_row).or_failed(DB)?;
        rows.collect::<Result<_, _>>().or_failed(DB)
    }

    pub(super) fn hit(&self, id: i64, rank: i64) -> HostResult<Option<Hit>> {
        let conn = self.lock();
        let mut st = conn
            .prepare_cached(
                "SELECT score, source, path, title, snippet, line FROM hits
                 WHERE result = ?1 AND rank = ?2",
            )
            .or_failed(DB)?;
        st.query_row(params![id, rank], hit_row)
            .optional()
            .or_failed(DB)
    }
}

fn search_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Search> {
    Ok(Search {
        id: r.get(0)?,
        query: r.get(1)?,
        source: r.get(2)?,
        total: r.get(3)?,
        kept: r.get(4)?,
    })
}

fn hit_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Hit> {
    let score: f64 = r.get(0)?;
    Ok(Hit {
        score: score as f32,
        source: r.get(1)?,
        path: r.get(2)?,
        title: r.get(3)?,
        snippet: r.get(4)?,
        line: r.get(5)?,
    })
}
