//! The journal: every call, written before it runs and again with its outcome, in the
//! state database. `runs/` and `.wip/log` are views of it; nothing about a call is kept
//! anywhere else, so a crash loses nothing that was already acknowledged.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};

use super::error::{WorldError, WorldResult};
use super::host::Caller;

mod pending;
mod pg;
mod store;
pub use pending::{Approval, Decider, Expired, NewApproval, RunChange, DENIED, EXPIRED, PENDING};
pub use store::Journal;

/// Status of a call cut off by a crash; set on the next mount.
pub const INTERRUPTED: &str = "interrupted";
/// A run cut off by a crash whose host says its change never committed: nothing changed.
pub const NOT_RUN: &str = "not_run";
/// The errno of a run cut off by a crash (the backend's: EIO), from the one table.
pub const INTERRUPTED_ERRNO: i32 = crate::world::error::ErrorKind::Backend.errno();
/// The errno of a pending run nobody decided in time (ETIMEDOUT), from the one table.
pub const EXPIRED_ERRNO: i32 = crate::world::error::ErrorKind::TimedOut.errno();
/// The result of a run marked interrupted at start-up.
pub const INTERRUPTED_WORDS: &str = "error: interrupted: the daemon stopped before this call finished; check the object before calling again\n";

/// A new journal's identity: 16 random bytes in hex (a host that keeps run ids beside its
/// own changes tells journals apart by it, see `Caller::run`).
pub fn fresh_journal_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No randomness to be had: the time and the pid still tell journals apart.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes[..16].copy_from_slice(&(t ^ (u128::from(std::process::id()) << 96)).to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
pub const RUNNING: &str = "running";

/// One row of the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub id: i64,
    pub started: String,
    pub finished: Option<String>,
    pub pid: u32,
    pub uid: u32,
    pub session: u32,
    pub command: String,
    /// World path of the entry the op belongs to (`/` for the root).
    pub path: String,
    pub op: String,
    pub args: String,
    pub guard: String,
    pub status: String,
    pub errno: i32,
    pub result: String,
    /// World paths discovered by the call.
    pub discovered: Vec<String>,
    /// Its number among the runs of its op on its entry (`runs/SEQ`), from 1.
    pub seq: i64,
}

/// A run just begun: its journal id and its number among its op's runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Began {
    pub id: i64,
    pub seq: i64,
}

/// One line of the change feed (`.wip/events`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Event {
    /// Resumable position in the feed (set when stored).
    pub cursor: i64,
    pub at: String,
    /// `call` (a call finished), `changed`, `removed` or `discovered` (an entry);
    /// `pending`, `approved`, `denied` or `expired` (a run held for a person's sign-off).
    pub kind: String,
    /// World path of the entry (for `call`: the entry whose op ran).
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl Event {
    /// An event about a run of an op: `kind` and the run's status.
    pub fn of_run(kind: &str, path: &str, op: &str, run: i64, status: &str) -> Event {
        Event {
            kind: kind.into(),
            path: path.into(),
            op: Some(op.into()),
            run: Some(run),
            status: Some(status.into()),
            ..Default::default()
        }
    }
}

/// The journal in one SQLite file of the state directory (the embedded default).
pub(crate) struct SqliteJournal {
    conn: Mutex<Connection>,
    /// Which (path, op) pairs have a run (hashes): a cold walk asks the latest run of
    /// every `result` it lists, and most ops never ran. This daemon alone writes the
    /// file (the state directory is locked to it), so the set is complete.
    ran: Mutex<RanSet>,
    /// This journal's identity (see `fresh_journal_id`).
    id: String,
    /// The last run number of each (path, op) lately called (bounded; read again when
    /// missing).
    seqs: Mutex<std::collections::HashMap<(String, String), i64>>,
}

/// How many (path, op) pairs' last run numbers are kept.
const SEQS_KEPT: usize = 65_536;

/// Hashes of the (path, op) pairs with runs. A collision only costs a query.
#[derive(Default)]
struct RanSet {
    hasher: std::collections::hash_map::RandomState,
    pairs: std::collections::HashSet<u64>,
}

impl RanSet {
    fn key(&self, path: &str, op: &str) -> u64 {
        std::hash::BuildHasher::hash_one(&self.hasher, (path, op))
    }
}

const COLUMNS: &str = "id, started, finished, pid, uid, session, command, path, op, args, guard, status, errno, result, discovered, seq";

impl SqliteJournal {
    /// Open (or create) the journal and mark calls that were running at a crash.
    pub fn open(path: &Path) -> WorldResult<(SqliteJournal, Vec<i64>)> {
        let mut conn = Connection::open(path)?;
        crate::sqlite::wait_when_busy(&mut conn, std::time::Duration::from_secs(10))?;
        // Plans stay as prepared (as the tracker's): a cached statement is never planned
        // again because a bound value changed.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        // WAL survives a killed daemon; synchronous=NORMAL trades only OS-crash durability
        // of the last calls for a call overhead far below an fsync. Ids and cursors are
        // plain rowids: no row is ever deleted, so they only grow, and AUTOINCREMENT would
        // write its sqlite_sequence page in every call's two transactions. (Journals made
        // with it keep it; both behave the same.)
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS calls(
               id INTEGER PRIMARY KEY,
               started TEXT NOT NULL, finished TEXT,
               pid INTEGER NOT NULL, uid INTEGER NOT NULL, session INTEGER NOT NULL,
               command TEXT NOT NULL, path TEXT NOT NULL, op TEXT NOT NULL,
               args TEXT NOT NULL, guard TEXT NOT NULL, status TEXT NOT NULL,
               errno INTEGER NOT NULL DEFAULT 0, result TEXT NOT NULL DEFAULT '',
               discovered TEXT NOT NULL DEFAULT '[]');
             CREATE INDEX IF NOT EXISTS calls_by_op ON calls(path, op, id);
             CREATE INDEX IF NOT EXISTS calls_running ON calls(id) WHERE status = 'running';
             CREATE TABLE IF NOT EXISTS events(
               cursor INTEGER PRIMARY KEY,
               at TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
               op TEXT, run INTEGER, status TEXT);
             CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
        )?;
        number_runs(&conn)?;
        conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('id', ?1)",
            params![fresh_journal_id()],
        )?;
        let id: String =
            conn.query_row("SELECT value FROM meta WHERE key = 'id'", [], |r| r.get(0))?;
        let interrupted = conn
            .prepare(
                "UPDATE calls SET status = ?1, errno = ?2, finished = strftime('%Y-%m-%dT%H:%M:%fZ','now'),
                   result = ?4
                 WHERE status = ?3 RETURNING id",
            )?
            .query_map(params![INTERRUPTED, INTERRUPTED_ERRNO, RUNNING, INTERRUPTED_WORDS], |r| {
                r.get::<_, i64>(0)
            })?
            .collect::<Result<Vec<i64>, _>>()?;
        pending::create(&conn)?;
        let mut ran = RanSet::default();
        {
            // Distinct pairs come off the (path, op, id) index without reading the rows.
            let mut st = conn.prepare("SELECT DISTINCT path, op FROM calls")?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let key = ran.key(&r.get::<_, String>(0)?, &r.get::<_, String>(1)?);
                ran.pairs.insert(key);
            }
        }
        Ok((
            SqliteJournal {
                conn: Mutex::new(conn),
                ran: Mutex::new(ran),
                id,
                seqs: Mutex::new(std::collections::HashMap::new()),
            },
            interrupted,
        ))
    }

    fn conn(&self) -> WorldResult<std::sync::MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| WorldError::backend("journal lock poisoned"))
    }

    /// Record a call before it runs; returns its run id and number.
    pub fn begin(
        &self,
        caller: &Caller,
        path: &str,
        op: &str,
        args: &str,
        guard: &str,
    ) -> WorldResult<Began> {
        let conn = self.conn()?;
        // One writer (this daemon, under the connection's lock): the next number is the
        // last one given plus one, kept in memory (a statement that computes it would be
        // planned again at every call: its plan depends on the bound path).
        let key = (path.to_string(), op.to_string());
        let last = self.seqs.lock().ok().and_then(|s| s.get(&key).copied());
        let last = match last {
            Some(n) => n,
            None => conn
                .prepare_cached(
                    "SELECT coalesce(max(seq), 0) FROM calls WHERE path = ?1 AND op = ?2",
                )?
                .query_row(params![path, op], |r| r.get::<_, i64>(0))?,
        };
        let seq = last + 1;
        conn.prepare_cached(
            "INSERT INTO calls(started, pid, uid, session, command, path, op, args, guard, status, seq)
             VALUES (strftime('%Y-%m-%dT%H:%M:%fZ','now'), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?
        .execute(params![
            caller.pid,
            caller.uid,
            caller.session,
            caller.command,
            path,
            op,
            args,
            guard,
            RUNNING,
            seq
        ])?;
        let id = conn.last_insert_rowid();
        if let Ok(mut seqs) = self.seqs.lock() {
            if seqs.len() >= SEQS_KEPT {
                seqs.clear();
            }
            seqs.insert(key, seq);
        }
        if let Ok(mut ran) = self.ran.lock() {
            let key = ran.key(path, op);
            ran.pairs.insert(key);
        }
        Ok(Began { id, seq })
    }

    /// Record the outcome of a call and the changes it made, in one transaction.
    pub fn finish(
        &self,
        id: i64,
        status: &str,
        errno: i32,
        result: &str,
        discovered: &[String],
        events: &[Event],
    ) -> WorldResult<()> {
        let discovered = serde_json::to_string(discovered)
            .map_err(|e| WorldError::backend(format!("journal: {e}")))?;
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        tx.prepare_cached(
            "UPDATE calls SET status = ?2, errno = ?3, result = ?4, discovered = ?5,
               finished = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?1",
        )?
        .execute(params![id, status, errno, result, discovered])?;
        insert_events(&tx, events)?;
        tx.commit()?;
        Ok(())
    }

    /// This journal's identity.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Settle a run marked interrupted at start-up, as its host knows it ended (`ok` with
    /// its result, or `not_run`); a run no longer interrupted is left alone.
    pub fn settle(&self, id: i64, status: &str, errno: i32, result: &str) -> WorldResult<bool> {
        let conn = self.conn()?;
        let n = conn.execute(
            "UPDATE calls SET status = ?2, errno = ?3, result = ?4 WHERE id = ?1 AND status = ?5",
            params![id, status, errno, result, INTERRUPTED],
        )?;
        Ok(n == 1)
    }

    /// Record changes that no call made (a host's own notifications), in one transaction.
    pub fn record_events(&self, events: &[Event]) -> WorldResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        insert_events(&tx, events)?;
        tx.commit()?;
        Ok(())
    }

    /// Events after `cursor`, oldest first, at most `limit`.
    pub fn events_after(&self, cursor: i64, limit: usize) -> WorldResult<Vec<Event>> {
        let conn = self.conn()?;
        let mut st = conn.prepare_cached(
            "SELECT cursor, at, kind, path, op, run, status FROM events
             WHERE cursor > ?1 ORDER BY cursor LIMIT ?2",
        )?;
        let rows = st.query_map(params![cursor, limit as i64], |r| {
            Ok(Event {
                cursor: r.get(0)?,
                at: r.get(1)?,
                kind: r.get(2)?,
                path: r.get(3)?,
                op: r.get(4)?,
                run: r.get(5)?,
                status: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The cursor of the newest event (0 if none).
    /// When the newest event after `cursor` happened (`None`: there is none).
    pub fn last_event_at(&self, cursor: i64) -> WorldResult<Option<String>> {
        Ok(self
            .conn()?
            .query_row(
                "SELECT at FROM events WHERE cursor > ?1 ORDER BY cursor DESC LIMIT 1",
                params![cursor],
                |r| r.get(0),
            )
            .optional()?)
    }

    pub fn last_event(&self) -> WorldResult<i64> {
        Ok(self
            .conn()?
            .query_row("SELECT coalesce(max(cursor), 0) FROM events", [], |r| {
                r.get(0)
            })?)
    }

    pub fn get(&self, id: i64) -> WorldResult<Option<Run>> {
        let conn = self.conn()?;
        let mut stmt =
            conn.prepare_cached(&format!("SELECT {COLUMNS} FROM calls WHERE id = ?1"))?;
        Ok(stmt.query_row([id], row_to_run).optional()?)
    }

    /// Runs of one op of one entry, newest first: (id, number).
    pub fn runs_of(&self, path: &str, op: &str, limit: usize) -> WorldResult<Vec<Began>> {
        // Let go before the connection is taken (`begin` takes it while holding the
        // connection), so the two locks are never taken in the other order.
        let never_ran = self
            .ran
            .lock()
            .is_ok_and(|ran| !ran.pairs.contains(&ran.key(path, op)));
        if never_ran {
            return Ok(Vec::new());
        }
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT id, seq FROM calls WHERE path = ?1 AND op = ?2 ORDER BY id DESC LIMIT ?3",
        )?;
        let ids = stmt
            .query_map(params![path, op, limit as i64], |r| {
                Ok(Began {
                    id: r.get(0)?,
                    seq: r.get(1)?,
                })
            })?
            .collect::<Result<Vec<Began>, _>>()?;
        Ok(ids)
    }

    /// The journal id of run number `seq` of one op of one entry.
    pub fn numbered(&self, path: &str, op: &str, seq: i64) -> WorldResult<Option<i64>> {
        let conn = self.conn()?;
        let mut stmt =
            conn.prepare_cached("SELECT id FROM calls WHERE path = ?1 AND op = ?2 AND seq = ?3")?;
        Ok(stmt
            .query_row(params![path, op, seq], |r| r.get(0))
            .optional()?)
    }

    /// The latest run of one op of one entry.
    pub fn latest(&self, path: &str, op: &str) -> WorldResult<Option<i64>> {
        Ok(self.runs_of(path, op, 1)?.first().map(|b| b.id))
    }

    /// Runs still running, oldest first, at most `limit`.
    pub fn running_runs(&self, limit: usize) -> WorldResult<Vec<Run>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM calls WHERE status = 'running' ORDER BY id LIMIT ?1"
        ))?;
        let runs = stmt
            .query_map([limit as i64], row_to_run)?
            .collect::<Result<Vec<Run>, _>>()?;
        Ok(runs)
    }

    /// Newest calls first.
    pub fn recent(&self, limit: usize) -> WorldResult<Vec<Run>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM calls ORDER BY id DESC LIMIT ?1"
        ))?;
        let runs = stmt
            .query_map([limit as i64], row_to_run)?
            .collect::<Result<Vec<Run>, _>>()?;
        Ok(runs)
    }

    /// Newest calls first, with `args` and `result` cut to their first `cut` characters by the
    /// database itself, so a view of recent calls costs the same whatever they carried.
    pub fn recent_brief(&self, limit: usize, cut: usize) -> WorldResult<Vec<Run>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT id, started, finished, pid, uid, session, command, path, op,
                    substr(args, 1, ?2), '', status, errno, substr(result, 1, ?2), '[]', seq,
                    length(args), length(result)
             FROM calls ORDER BY id DESC LIMIT ?1",
        )?;
        let runs = stmt
            .query_map(params![limit as i64, cut as i64], |r| {
                let mut run = row_to_run(r)?;
                let (args_len, result_len): (i64, i64) = (r.get(16)?, r.get(17)?);
                if args_len as usize > cut {
                    run.args.push('…');
                }
                if result_len as usize > cut {
                    run.result.push('…');
                }
                Ok(run)
            })?
            .collect::<Result<Vec<Run>, _>>()?;
        Ok(runs)
    }

    pub fn count(&self) -> WorldResult<i64> {
        Ok(self
            .conn()?
            .query_row("SELECT count(*) FROM calls", [], |r| r.get(0))?)
    }

    /// How many calls are running now (begun, not finished).
    pub fn running(&self) -> WorldResult<i64> {
        Ok(self.conn()?.query_row(
            "SELECT count(*) FROM calls WHERE status = 'running'",
            [],
            |r| r.get(0),
        )?)
    }

    /// The database's size in bytes (pages in use, without the write-ahead log).
    pub fn bytes(&self) -> WorldResult<i64> {
        Ok(self.conn()?.query_row(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |r| r.get(0),
        )?)
    }
}

fn row_to_run(r: &rusqlite::Row<'_>) -> rusqlite::Result<Run> {
    let discovered: String = r.get(14)?;
    Ok(Run {
        id: r.get(0)?,
        started: r.get(1)?,
        finished: r.get(2)?,
        pid: r.get(3)?,
        uid: r.get(4)?,
        session: r.get(5)?,
        command: r.get(6)?,
        path: r.get(7)?,
        op: r.get(8)?,
        args: r.get(9)?,
        guard: r.get(10)?,
        status: r.get(11)?,
        errno: r.get(12)?,
        result: r.get(13)?,
        discovered: serde_json::from_str(&discovered).unwrap_or_default(),
        seq: r.get(15)?,
    })
}

/// Give journals made before runs were numbered per op their numbers, once.
fn number_runs(conn: &Connection) -> rusqlite::Result<()> {
    let has_seq: bool = conn.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('calls') WHERE name = 'seq'",
        [],
        |r| r.get(0),
    )?;
    if !has_seq {
        conn.execute_batch(
            "BEGIN;
             ALTER TABLE calls ADD COLUMN seq INTEGER;
             UPDATE calls SET seq = (SELECT count(*) FROM calls c
               WHERE c.path = calls.path AND c.op = calls.op AND c.id <= calls.id);
             COMMIT;",
        )?;
    }
    conn.execute_batch("CREATE UNIQUE INDEX IF NOT EXISTS calls_numbered ON calls(path, op, seq);")
}

/// Append events to the change feed, inside the caller's transaction.
fn insert_events(tx: &rusqlite::Transaction, events: &[Event]) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO events(at, kind, path, op, run, status)
         VALUES (strftime('%Y-%m-%dT%H:%M:%fZ','now'), ?1, ?2, ?3, ?4, ?5)",
    )?;
    for e in events {
        insert.execute(params![e.kind, e.path, e.op, e.run, e.status])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_calls_become_interrupted_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let (j, n) = Journal::open(&path).unwrap();
        assert!(n.is_empty());
        let caller = Caller {
            pid: 1,
            uid: 0,
            session: 1,
            command: "bash".into(),
            ..Default::default()
        };
        let done = j.begin(&caller, "/t", "close", "{}", "allowed").unwrap().id;
        let ev = Event {
            kind: "call".into(),
            path: "/t".into(),
            op: Some("close".into()),
            run: Some(done),
            status: Some("ok".into()),
            ..Default::default()
        };
        j.finish(done, "ok", 0, "closed", &["/t/x".into()], &[ev])
            .unwrap();
        let cut = j.begin(&caller, "/t", "close", "{}", "allowed").unwrap().id;
        drop(j);
        let (j, n) = Journal::open(&path).unwrap();
        assert_eq!(n, vec![cut]);
        assert_eq!(j.get(cut).unwrap().unwrap().status, INTERRUPTED);
        let ok = j.get(done).unwrap().unwrap();
        assert_eq!(ok.status, "ok");
        assert_eq!(ok.discovered, vec!["/t/x".to_string()]);
        assert_eq!(
            j.runs_of("/t", "close", 10).unwrap(),
            vec![Began { id: cut, seq: 2 }, Began { id: done, seq: 1 }]
        );
        assert_eq!(j.numbered("/t", "close", 1).unwrap(), Some(done));
        assert_eq!(j.count().unwrap(), 2);
        let events = j.events_after(0, 10).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].op.as_deref(), Some("close"));
        assert_eq!(j.last_event().unwrap(), events[0].cursor);
    }

    #[test]
    fn the_latest_run_is_found_as_soon_as_it_begins_and_never_for_another_op() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(&dir.path().join("journal.db")).unwrap();
        let caller = Caller {
            pid: 1,
            uid: 0,
            session: 1,
            command: "bash".into(),
            ..Default::default()
        };
        assert_eq!(j.latest("/t/1", "close").unwrap(), None);
        let id = j
            .begin(&caller, "/t/1", "close", "{}", "allowed")
            .unwrap()
            .id;
        assert_eq!(j.latest("/t/1", "close").unwrap(), Some(id));
        assert_eq!(j.latest("/t/1", "reopen").unwrap(), None);
        assert_eq!(j.latest("/t/2", "close").unwrap(), None);
    }

    #[test]
    fn events_without_a_call_join_the_feed() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(&dir.path().join("journal.db")).unwrap();
        j.record_events(&[]).unwrap();
        assert_eq!(j.last_event().unwrap(), 0);
        let ev = Event {
            kind: "changed".into(),
            path: "agents/conversations/1".into(),
            ..Default::default()
        };
        j.record_events(&[ev.clone(), ev]).unwrap();
        let events = j.events_after(0, 10).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].kind, "changed");
        assert_eq!(events[1].run, None);
    }
}
