//! The state in one SQLite file of the state directory (the embedded default, one mount):
//! the journal (calls, events), the approvals and the known world, each table written
//! here once.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::{
    fresh_journal_id, known, Approval, Began, Clean, Decider, Event, Expired, Journal, KnownEntry,
    NewApproval, Run, RunChange, APPROVAL_COLUMNS, EXPIRED, EXPIRED_ERRNO, INTERRUPTED,
    INTERRUPTED_ERRNO, INTERRUPTED_WORDS, PENDING, RUNNING,
};
use super::{StateError, StateResult};
use crate::host::{Caller, Session};

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
    /// The known world's own connections to the same file: its writer's batches and its
    /// readers never wait behind a call's transaction on `conn`.
    known_writer: Mutex<Connection>,
    known_reader: Mutex<Connection>,
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

const COLUMNS: &str = "id, started, finished, pid, uid, session, command, path, op, args, guard, status, errno, result, discovered, seq, session_start";

impl SqliteJournal {
    /// Open (or create) the journal and mark calls that were running at a crash.
    pub fn open(path: &Path) -> StateResult<(SqliteJournal, Vec<i64>)> {
        let mut conn = Connection::open(path)?;
        crate::sqlite::wait_when_busy(&mut conn, Duration::from_secs(10))?;
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
             CREATE INDEX IF NOT EXISTS calls_running ON calls(id) WHERE status = 'running';
             CREATE TABLE IF NOT EXISTS events(
               cursor INTEGER PRIMARY KEY,
               at TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
               op TEXT, run INTEGER, status TEXT);
             CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
        )?;
        number_runs(&conn)?;
        keep_session_starts(&conn)?;
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
        create_approvals(&conn)?;
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
        let known_conn = || -> rusqlite::Result<Connection> {
            let mut c = Connection::open(path)?;
            crate::sqlite::wait_when_busy(&mut c, Duration::from_secs(10))?;
            c.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
                 CREATE TABLE IF NOT EXISTS known(
                   path TEXT PRIMARY KEY, ref TEXT NOT NULL, description TEXT NOT NULL,
                   indexable INTEGER NOT NULL, seen TEXT NOT NULL);
                 CREATE INDEX IF NOT EXISTS known_by_ref ON known(ref);",
            )?;
            Ok(c)
        };
        let known_writer = Mutex::new(known_conn()?);
        let known_reader = Mutex::new(known_conn()?);
        Ok((
            SqliteJournal {
                known_writer,
                known_reader,
                conn: Mutex::new(conn),
                ran: Mutex::new(ran),
                id,
                seqs: Mutex::new(std::collections::HashMap::new()),
            },
            interrupted,
        ))
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        lock(&self.conn)
    }
}

impl SqliteJournal {
    /// The next run number of (`path`, `op`), with the connection held (see `begin`).
    fn next_seq(&self, conn: &Connection, path: &str, op: &str) -> rusqlite::Result<i64> {
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
        if let Ok(mut seqs) = self.seqs.lock() {
            if seqs.len() >= SEQS_KEPT {
                seqs.clear();
            }
            seqs.insert(key, last + 1);
        }
        if let Ok(mut ran) = self.ran.lock() {
            let key = ran.key(path, op);
            ran.pairs.insert(key);
        }
        Ok(last + 1)
    }
}

impl Journal for SqliteJournal {
    /// Many ended runs in one transaction: the working tree's changes, grouped.
    fn record_ended(&self, runs: &[super::Ended]) -> StateResult<Vec<Began>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let mut out = Vec::with_capacity(runs.len());
        for r in runs {
            let seq = match self.next_seq(&tx, &r.path, &r.op) {
                Ok(s) => s,
                Err(e) => {
                    // Numbers handed out in this transaction go with it.
                    if let Ok(mut seqs) = self.seqs.lock() {
                        seqs.clear();
                    }
                    return Err(e.into());
                }
            };
            tx.prepare_cached(
                "INSERT INTO calls(started, finished, pid, uid, session, command, path, op, args, guard, status, errno, result, seq,
                   session_start)
                 VALUES (strftime('%Y-%m-%dT%H:%M:%fZ','now'), strftime('%Y-%m-%dT%H:%M:%fZ','now'),
                   ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )?
            .execute(params![
                r.caller.pid,
                r.caller.uid,
                r.caller.session,
                Clean::new(&r.caller.command).as_str(),
                r.path,
                r.op,
                Clean::new(&r.args).as_str(),
                Clean::new(&r.guard).as_str(),
                r.status,
                r.errno,
                Clean::new(&r.result).as_str(),
                seq,
                start_column(r.caller.session_start)
            ])?;
            let id = tx.last_insert_rowid();
            insert_events(
                &tx,
                &[Event::of_run("call", &r.path, &r.op, seq, &r.status)],
            )?;
            out.push(Began { id, seq });
        }
        if let Err(e) = tx.commit() {
            if let Ok(mut seqs) = self.seqs.lock() {
                seqs.clear();
            }
            return Err(e.into());
        }
        Ok(out)
    }

    fn ran_at(&self, path: &str, under: &str) -> StateResult<bool> {
        let (from, to) = super::below(under);
        Ok(self.conn().prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM calls WHERE path = ?1) OR EXISTS(SELECT 1 FROM calls WHERE path >= ?2 AND path < ?3)",
        )?
        .query_row(params![path, from, to], |r| r.get(0))?)
    }

    /// The write-ahead log to disk: commits are not synced one by one (synchronous =
    /// NORMAL), so a caller's `fsync` syncs them all.
    fn sync(&self) -> StateResult<()> {
        let conn = self.conn();
        let Some(path) = conn.path().map(|p| format!("{p}-wal")) else {
            return Ok(());
        };
        match std::fs::File::open(&path) {
            Ok(f) => f
                .sync_all()
                .map_err(|e| StateError::new(format!("journal: cannot sync {path}: {e}"))),
            // No log yet: every commit is in the database file, which was synced.
            Err(_) => Ok(()),
        }
    }

    /// Record a call before it runs; returns its run id and number.
    fn begin(
        &self,
        caller: &Caller,
        path: &str,
        op: &str,
        args: &str,
        guard: &Clean,
    ) -> StateResult<Began> {
        let conn = self.conn();
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
            "INSERT INTO calls(started, pid, uid, session, command, path, op, args, guard, status, seq,
               session_start)
             VALUES (strftime('%Y-%m-%dT%H:%M:%fZ','now'), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?
        .execute(params![
            caller.pid,
            caller.uid,
            caller.session,
            caller.command,
            path,
            op,
            args,
            guard.as_str(),
            RUNNING,
            seq,
            start_column(caller.session_start)
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
    fn finish(
        &self,
        id: i64,
        status: &str,
        errno: i32,
        result: &Clean,
        discovered: &[String],
        events: &[Event],
    ) -> StateResult<()> {
        let discovered = serde_json::to_string(discovered)
            .map_err(|e| StateError::new(format!("journal: {e}")))?;
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.prepare_cached(
            "UPDATE calls SET status = ?2, errno = ?3, result = ?4, discovered = ?5,
               finished = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?1",
        )?
        .execute(params![id, status, errno, result.as_str(), discovered])?;
        insert_events(&tx, events)?;
        tx.commit()?;
        Ok(())
    }

    /// This journal's identity.
    fn id(&self) -> &str {
        &self.id
    }

    /// Settle a run marked interrupted at start-up, as its host knows it ended (`ok` with
    /// its result, or `not_run`); a run no longer interrupted is left alone.
    fn settle(&self, id: i64, status: &str, errno: i32, result: &Clean) -> StateResult<bool> {
        let conn = self.conn();
        let n = conn.execute(
            "UPDATE calls SET status = ?2, errno = ?3, result = ?4 WHERE id = ?1 AND status = ?5",
            params![id, status, errno, result.as_str(), INTERRUPTED],
        )?;
        Ok(n == 1)
    }

    /// Record changes that no call made (a host's own notifications), in one transaction.
    fn record_events(&self, events: &[Event]) -> StateResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        insert_events(&tx, events)?;
        tx.commit()?;
        Ok(())
    }

    /// Events after `cursor`, oldest first, at most `limit`.
    fn events_after(&self, cursor: i64, limit: usize) -> StateResult<Vec<Event>> {
        let conn = self.conn();
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
    fn last_event_at(&self, cursor: i64) -> StateResult<Option<String>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT at FROM events WHERE cursor > ?1 ORDER BY cursor DESC LIMIT 1",
                params![cursor],
                |r| r.get(0),
            )
            .optional()?)
    }

    fn last_event(&self) -> StateResult<i64> {
        Ok(self
            .conn()
            .query_row("SELECT coalesce(max(cursor), 0) FROM events", [], |r| {
                r.get(0)
            })?)
    }

    fn get(&self, id: i64) -> StateResult<Option<Run>> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached(&format!("SELECT {COLUMNS} FROM calls WHERE id = ?1"))?;
        Ok(stmt.query_row([id], row_to_run).optional()?)
    }

    /// Runs of one op of one entry, newest first: (id, number).
    fn runs_of(&self, path: &str, op: &str, limit: usize) -> StateResult<Vec<Began>> {
        // Let go before the connection is taken (`begin` takes it while holding the
        // connection), so the two locks are never taken in the other order.
        let never_ran = self
            .ran
            .lock()
            .is_ok_and(|ran| !ran.pairs.contains(&ran.key(path, op)));
        if never_ran {
            return Ok(Vec::new());
        }
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, seq FROM calls WHERE path = ?1 AND op = ?2 ORDER BY seq DESC LIMIT ?3",
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

    /// The session's own latest run of one op of one entry, else its uid's (one SQLite
    /// journal is one mount's).
    fn latest_for(&self, path: &str, op: &str, session: &Session) -> StateResult<Option<i64>> {
        let never_ran = self
            .ran
            .lock()
            .is_ok_and(|ran| !ran.pairs.contains(&ran.key(path, op)));
        if never_ran || *session == Session::NONE {
            return Ok(None);
        }
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM calls WHERE path = ?1 AND op = ?2 AND uid = ?3
             ORDER BY (session = ?4 AND session_start = ?5) DESC, seq DESC LIMIT 1",
        )?;
        Ok(stmt
            .query_row(
                params![
                    path,
                    op,
                    session.uid,
                    session.number,
                    start_column(session.start)
                ],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The journal id of run number `seq` of one op of one entry.
    fn numbered(&self, path: &str, op: &str, seq: i64) -> StateResult<Option<i64>> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached("SELECT id FROM calls WHERE path = ?1 AND op = ?2 AND seq = ?3")?;
        Ok(stmt
            .query_row(params![path, op, seq], |r| r.get(0))
            .optional()?)
    }

    /// Runs still running, oldest first, at most `limit`.
    fn running_runs(&self, limit: usize) -> StateResult<Vec<Run>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM calls WHERE status = 'running' ORDER BY id LIMIT ?1"
        ))?;
        let runs = stmt
            .query_map([limit as i64], row_to_run)?
            .collect::<Result<Vec<Run>, _>>()?;
        Ok(runs)
    }

    /// Newest calls first.
    fn recent(&self, limit: usize) -> StateResult<Vec<Run>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM calls ORDER BY id DESC LIMIT ?1"
        ))?;
        let runs = stmt
            .query_map([limit as i64], row_to_run)?
            .collect::<Result<Vec<Run>, _>>()?;
        Ok(runs)
    }

    fn runs_from(
        &self,
        first: i64,
        a: (&str, &str),
        b: (&str, &str),
        limit: usize,
    ) -> StateResult<Vec<Run>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM calls
             WHERE id >= ?1 AND ((path >= ?2 AND path < ?3) OR (path >= ?4 AND path < ?5))
             ORDER BY id LIMIT ?6"
        ))?;
        let runs = stmt
            .query_map(params![first, a.0, a.1, b.0, b.1, limit as i64], row_to_run)?
            .collect::<Result<Vec<Run>, _>>()?;
        Ok(runs)
    }

    fn first_run_at(&self, time: &str) -> StateResult<Option<i64>> {
        let conn = self.conn();
        let id: Option<i64> = conn.query_row(
            "SELECT MIN(id) FROM calls WHERE started >= ?1",
            params![time],
            |r| r.get(0),
        )?;
        Ok(id)
    }

    /// Newest calls first, with `args` and `result` cut to their first `cut` characters by the
    /// database itself, so a view of recent calls costs the same whatever they carried.
    fn recent_brief(&self, limit: usize, cut: usize) -> StateResult<Vec<Run>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, started, finished, pid, uid, session, command, path, op,
                    substr(args, 1, ?2), '', status, errno, substr(result, 1, ?2), '[]', seq,
                    session_start, length(args), length(result)
             FROM calls ORDER BY id DESC LIMIT ?1",
        )?;
        let runs = stmt
            .query_map(params![limit as i64, cut as i64], |r| {
                let mut run = row_to_run(r)?;
                let (args_len, result_len): (i64, i64) = (r.get(17)?, r.get(18)?);
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

    fn count(&self) -> StateResult<i64> {
        Ok(self
            .conn()
            .query_row("SELECT count(*) FROM calls", [], |r| r.get(0))?)
    }

    /// How many calls are running now (begun, not finished).
    fn running(&self) -> StateResult<i64> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM calls WHERE status = 'running'",
            [],
            |r| r.get(0),
        )?)
    }

    /// The database's size in bytes (pages in use, without the write-ahead log).
    fn bytes(&self) -> StateResult<i64> {
        Ok(self.conn().query_row(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |r| r.get(0),
        )?)
    }

    /// Hold run `run` for a person's sign-off, with its `pending` event.
    fn hold(&self, run: i64, new: &NewApproval<'_>, event: &Event) -> StateResult<Approval> {
        let approvers = serde_json::to_string(new.approvers)
            .map_err(|e| StateError::new(format!("journal: {e}")))?;
        let expires_ms = new.expires_after.map(|d| d.as_millis() as f64);
        {
            let mut conn = self.conn();
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO approvals(run, rule, rule_text, approvers, self_approve, requested, expires, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ','now'),
                   CASE WHEN ?6 IS NULL THEN NULL
                        ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', '+' || (?6 / 1000.0) || ' seconds') END,
                   ?7)",
                params![
                    run,
                    new.rule as i64,
                    new.rule_text.as_str(),
                    approvers,
                    new.self_approve,
                    expires_ms,
                    PENDING
                ],
            )?;
            insert_events(&tx, std::slice::from_ref(event))?;
            tx.commit()?;
        }
        self.approval(run)?
            .ok_or_else(|| StateError::new("journal: the approval just written is gone"))
    }

    /// The approval record of a run, if it asked for one.
    fn approval(&self, run: i64) -> StateResult<Option<Approval>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run = ?1"
        ))?;
        Ok(st.query_row([run], row_to_approval).optional()?)
    }

    /// Runs waiting for a decision, oldest first, at most `limit`.
    fn pending_approvals(&self, limit: usize) -> StateResult<Vec<Approval>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = ?1 ORDER BY run LIMIT ?2"
        ))?;
        let rows = st.query_map(params![PENDING, limit as i64], row_to_approval)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Record a decision (`approved` or `denied`) on a pending run, the run's change and the
    /// events, in one transaction. `false` when the run is no longer pending (someone else
    /// decided first, or it expired): nothing is written then.
    fn decide(
        &self,
        run: i64,
        state: &str,
        who: &Decider,
        reason: Option<&Clean>,
        change: &RunChange<'_>,
        events: &[Event],
    ) -> StateResult<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let n = tx.execute(
            "UPDATE approvals SET state = ?2, decided_at = strftime('%Y-%m-%dT%H:%M:%fZ','now'),
               decider_uid = ?3, decider_pid = ?4, decider_session = ?5, decider_command = ?6,
               reason = ?7
             WHERE run = ?1 AND state = ?8",
            params![
                run,
                state,
                who.uid,
                who.pid,
                who.session,
                who.command,
                reason.map(Clean::as_str),
                PENDING
            ],
        )?;
        if n == 0 {
            return Ok(false);
        }
        update_run(&tx, run, change)?;
        insert_events(&tx, events)?;
        tx.commit()?;
        Ok(true)
    }

    /// Expire the pending runs whose time is up: each gets status `expired`, the result
    /// `result_of` gives it, and an `expired` event. Returns what expired.
    fn expire_due(
        &self,
        result_of: &dyn Fn(&Approval) -> Clean<'static>,
    ) -> StateResult<Vec<Expired>> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let due: Vec<Expired> = {
            let mut st = tx.prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS}, calls.path, calls.op FROM approvals JOIN calls ON calls.id = approvals.run
                 WHERE state = ?1 AND expires IS NOT NULL
                   AND expires <= strftime('%Y-%m-%dT%H:%M:%fZ','now') ORDER BY run"
            ))?;
            let rows = st.query_map([PENDING], |r| {
                Ok(Expired {
                    approval: row_to_approval(r)?,
                    path: r.get(14)?,
                    op: r.get(15)?,
                })
            })?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        for x in &due {
            let a = &x.approval;
            tx.execute(
                "UPDATE approvals SET state = ?2, decided_at = expires WHERE run = ?1",
                params![a.run, EXPIRED],
            )?;
            let text = result_of(a);
            update_run(
                &tx,
                a.run,
                &RunChange {
                    status: EXPIRED,
                    errno: EXPIRED_ERRNO,
                    result: Some(text),
                    guard: None,
                },
            )?;
            let event = Event::of_run(EXPIRED, &x.path, &x.op, a.run, EXPIRED);
            insert_events(&tx, &[event])?;
        }
        tx.commit()?;
        Ok(due)
    }

    /// How long until the next pending run expires (zero if one is due), if any will.
    fn next_expiry(&self) -> StateResult<Option<Duration>> {
        let ms: Option<f64> = self.conn().query_row(
            "SELECT (julianday(min(expires)) - julianday('now')) * 86400000.0
             FROM approvals WHERE state = ?1 AND expires IS NOT NULL",
            [PENDING],
            |r| r.get(0),
        )?;
        Ok(ms.map(|ms| Duration::from_millis(ms.max(0.0).ceil() as u64)))
    }

    fn write_known(&self, entries: &[KnownEntry]) -> StateResult<()> {
        let mut conn = lock(&self.known_writer);
        let tx = conn.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO known(path, ref, description, indexable, seen)
                 VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                 ON CONFLICT(path) DO UPDATE SET ref = excluded.ref,
                   description = excluded.description, indexable = excluded.indexable,
                   seen = excluded.seen",
            )?;
            for e in entries {
                st.execute(params![e.path, e.reference, e.description, e.indexable])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn locate(&self, words: &[String], limit: usize) -> StateResult<Vec<KnownEntry>> {
        let conn = lock(&self.known_reader);
        let (sql, args) = known::locate_query(words, limit, "indexable = 1", "LIKE", '?');
        let mut st = conn.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(args.iter()), known_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn paths_of(&self, reference: &str) -> StateResult<Vec<String>> {
        let conn = lock(&self.known_reader);
        let mut st = conn.prepare_cached("SELECT path FROM known WHERE ref = ?1 ORDER BY path")?;
        let rows = st.query_map([reference], |r| r.get(0))?;
        Ok(rows.collect::<Result<Vec<String>, _>>()?)
    }

    fn known_recent(&self, limit: usize) -> StateResult<(Vec<KnownEntry>, i64)> {
        let conn = lock(&self.known_reader);
        let total: i64 = conn.query_row("SELECT count(*) FROM known", [], |r| r.get(0))?;
        let mut st = conn.prepare_cached(
            "SELECT path, ref, description, indexable FROM known ORDER BY seen DESC, path LIMIT ?1",
        )?;
        let rows = st.query_map([limit as i64], known_row)?;
        Ok((rows.collect::<Result<Vec<_>, _>>()?, total))
    }
}

/// A failed statement is the journal's failure (EIO), with SQLite's error as its cause.
impl From<rusqlite::Error> for StateError {
    fn from(e: rusqlite::Error) -> Self {
        StateError::new(format!("journal: {e}")).caused_by(e)
    }
}

/// A connection, its lock poisoned or not (every write is a transaction: a panic leaves
/// none half done).
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|p| p.into_inner())
}

fn known_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KnownEntry> {
    Ok(KnownEntry {
        path: r.get(0)?,
        reference: r.get(1)?,
        description: r.get(2)?,
        indexable: r.get::<_, i64>(3)? != 0,
    })
}

/// The approvals table; a pending run whose call row is no longer pending (cut off between
/// the two writes by a crash) is marked `interrupted`.
fn create_approvals(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS approvals(
           run INTEGER PRIMARY KEY,
           rule INTEGER NOT NULL, rule_text TEXT NOT NULL,
           approvers TEXT NOT NULL, self_approve INTEGER NOT NULL,
           requested TEXT NOT NULL, expires TEXT,
           state TEXT NOT NULL,
           decided_at TEXT, decider_uid INTEGER, decider_pid INTEGER,
           decider_session INTEGER, decider_command TEXT, reason TEXT);
         CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals(state, run);",
    )?;
    conn.execute(
        "UPDATE approvals SET state = 'interrupted'
         WHERE state = ?1 AND run NOT IN (SELECT id FROM calls WHERE status = ?1)",
        [PENDING],
    )?;
    Ok(())
}

fn update_run(
    tx: &rusqlite::Transaction,
    run: i64,
    change: &RunChange<'_>,
) -> rusqlite::Result<()> {
    match &change.result {
        Some(result) => tx.execute(
            "UPDATE calls SET status = ?2, errno = ?3, result = ?4, guard = coalesce(?5, guard),
               finished = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?1",
            params![
                run,
                change.status,
                change.errno,
                result.as_str(),
                change.guard.as_ref().map(Clean::as_str)
            ],
        )?,
        None => tx.execute(
            "UPDATE calls SET status = ?2, errno = ?3, guard = coalesce(?4, guard), finished = NULL
             WHERE id = ?1",
            params![
                run,
                change.status,
                change.errno,
                change.guard.as_ref().map(Clean::as_str)
            ],
        )?,
    };
    debug_assert!(change.result.is_some() || change.status == RUNNING);
    Ok(())
}

impl super::Columns for rusqlite::Row<'_> {
    type Error = rusqlite::Error;

    fn int(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.get(i)
    }

    fn text(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.get(i)
    }

    fn flag(&self, i: usize) -> rusqlite::Result<bool> {
        self.get(i)
    }
}

fn row_to_run(r: &rusqlite::Row<'_>) -> rusqlite::Result<Run> {
    super::run_of(r)
}

fn row_to_approval(r: &rusqlite::Row<'_>) -> rusqlite::Result<Approval> {
    super::approval_of(r)
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
             CREATE INDEX IF NOT EXISTS calls_by_op ON calls(path, op, id);
             ALTER TABLE calls ADD COLUMN seq INTEGER;
             UPDATE calls SET seq = (SELECT count(*) FROM calls c
               WHERE c.path = calls.path AND c.op = calls.op AND c.id <= calls.id);
             COMMIT;",
        )?;
    }
    // Numbers follow ids within an op (one writer gives both, in order), so this index
    // orders an op's runs as well as one on (path, op, id) did: that one, which every
    // call's first commit also wrote, is dropped.
    conn.execute_batch(
        "CREATE UNIQUE INDEX IF NOT EXISTS calls_numbered ON calls(path, op, seq);
         DROP INDEX IF EXISTS calls_by_op;",
    )
}

/// Journals made before sessions were told apart by their start get the column (their
/// runs' sessions begun at an unknown time, 0).
fn keep_session_starts(conn: &Connection) -> rusqlite::Result<()> {
    let has_start: bool = conn.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('calls') WHERE name = 'session_start'",
        [],
        |r| r.get(0),
    )?;
    if !has_start {
        conn.execute_batch(
            "ALTER TABLE calls ADD COLUMN session_start INTEGER NOT NULL DEFAULT 0",
        )?;
    }
    Ok(())
}

/// A session's start as a column holds it (SQLite's integers are signed; a start in clock
/// ticks since boot is far below the limit).
fn start_column(start: u64) -> i64 {
    i64::try_from(start).unwrap_or(i64::MAX)
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
        let (j, n) = SqliteJournal::open(&path).unwrap();
        assert!(n.is_empty());
        let caller = Caller {
            pid: 1,
            uid: 0,
            session: 1,
            command: "bash".into(),
            ..Default::default()
        };
        let done = j
            .begin(&caller, "/t", "close", "{}", &"allowed".into())
            .unwrap()
            .id;
        let ev = Event {
            kind: "call".into(),
            path: "/t".into(),
            op: Some("close".into()),
            run: Some(done),
            status: Some("ok".into()),
            ..Default::default()
        };
        j.finish(done, "ok", 0, &"closed".into(), &["/t/x".into()], &[ev])
            .unwrap();
        let cut = j
            .begin(&caller, "/t", "close", "{}", &"allowed".into())
            .unwrap()
            .id;
        drop(j);
        let (j, n) = SqliteJournal::open(&path).unwrap();
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
    fn a_journal_from_before_numbering_is_numbered_and_loses_the_index_calls_no_longer_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        {
            // The table and index as journals made before runs were numbered have them.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE calls(
                   id INTEGER PRIMARY KEY AUTOINCREMENT,
                   started TEXT NOT NULL, finished TEXT,
                   pid INTEGER NOT NULL, uid INTEGER NOT NULL, session INTEGER NOT NULL,
                   command TEXT NOT NULL, path TEXT NOT NULL, op TEXT NOT NULL,
                   args TEXT NOT NULL, guard TEXT NOT NULL, status TEXT NOT NULL,
                   errno INTEGER NOT NULL DEFAULT 0, result TEXT NOT NULL DEFAULT '',
                   discovered TEXT NOT NULL DEFAULT '[]');
                 CREATE INDEX calls_by_op ON calls(path, op, id);",
            )
            .unwrap();
            for (path, op) in [("/a", "close"), ("/b", "close"), ("/a", "close")] {
                c.execute(
                    "INSERT INTO calls(started, pid, uid, session, command, path, op, args, guard, status)
                     VALUES ('2026-01-01T00:00:00Z', 1, 0, 1, 'bash', ?1, ?2, '{}', '', 'ok')",
                    params![path, op],
                )
                .unwrap();
            }
        }
        let (j, _) = SqliteJournal::open(&path).unwrap();
        assert_eq!(
            j.runs_of("/a", "close", 10).unwrap(),
            vec![Began { id: 3, seq: 2 }, Began { id: 1, seq: 1 }]
        );
        let caller = Caller::default();
        let next = j.begin(&caller, "/a", "close", "{}", &"".into()).unwrap();
        assert_eq!(next.seq, 3);
        assert_eq!(j.runs_of("/a", "close", 1).unwrap(), vec![next]);
        let indexes: Vec<String> = j
            .conn()
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'calls' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(indexes, vec!["calls_numbered", "calls_running"]);
        // Their sessions began at a time the journal did not keep: unknown, 0.
        let old = j.get(1).unwrap().unwrap();
        assert_eq!((old.session, old.session_start), (1, 0));
    }

    #[test]
    fn a_runs_session_keeps_its_start_and_result_falls_back_only_to_its_uid() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = SqliteJournal::open(&dir.path().join("journal.db")).unwrap();
        let who = |session, session_start, uid| Caller {
            pid: 1,
            uid,
            session,
            session_start,
            command: "bash".into(),
            ..Default::default()
        };
        let begin = |c: &Caller| j.begin(c, "/t", "close", "{}", &"".into()).unwrap().id;
        let own = begin(&who(7, 1234, 0));
        let later = begin(&who(8, 99, 0));
        assert_eq!(
            j.get(own).unwrap().unwrap().caller_session(),
            who(7, 1234, 0).own_session()
        );
        let latest_for = |c: &Caller| j.latest_for("/t", "close", &c.own_session()).unwrap();
        assert_eq!(
            latest_for(&who(7, 1234, 0)),
            Some(own),
            "its own, not the latest"
        );
        assert_eq!(
            latest_for(&who(7, 5678, 0)),
            Some(later),
            "another session: its uid's latest"
        );
        assert_eq!(latest_for(&who(7, 1234, 1001)), None, "no call of that uid");
        assert_eq!(j.latest_for("/t", "close", &Session::NONE).unwrap(), None);
        assert_eq!(
            j.latest_for("/t", "reopen", &who(7, 1234, 0).own_session())
                .unwrap(),
            None
        );
    }

    #[test]
    fn the_latest_run_is_found_as_soon_as_it_begins_and_never_for_another_op() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = SqliteJournal::open(&dir.path().join("journal.db")).unwrap();
        let caller = Caller {
            pid: 1,
            uid: 0,
            session: 1,
            command: "bash".into(),
            ..Default::default()
        };
        assert_eq!(j.latest("/t/1", "close").unwrap(), None);
        let id = j
            .begin(&caller, "/t/1", "close", "{}", &"allowed".into())
            .unwrap()
            .id;
        assert_eq!(j.latest("/t/1", "close").unwrap(), Some(id));
        assert_eq!(j.latest("/t/1", "reopen").unwrap(), None);
        assert_eq!(j.latest("/t/2", "close").unwrap(), None);
    }

    #[test]
    fn events_without_a_call_join_the_feed() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = SqliteJournal::open(&dir.path().join("journal.db")).unwrap();
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

#[cfg(test)]
mod approval_tests {
    use super::*;
    use crate::state::DENIED;

    fn journal() -> (tempfile::TempDir, SqliteJournal) {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = SqliteJournal::open(&dir.path().join("journal.db")).unwrap();
        (dir, j)
    }

    fn held(j: &SqliteJournal, expires_after: Option<Duration>) -> i64 {
        let id = j
            .begin(&Caller::default(), "/t", "merge", "{}", &"blocked".into())
            .unwrap()
            .id;
        j.finish(
            id,
            PENDING,
            libc::EINPROGRESS,
            &"error: waits".into(),
            &[],
            &[],
        )
        .unwrap();
        let new = NewApproval {
            rule: 2,
            rule_text: "match \"t/ops/merge\"".into(),
            approvers: &[0, 4242],
            self_approve: false,
            expires_after,
        };
        let ev = Event {
            kind: "pending".into(),
            path: "/t".into(),
            run: Some(id),
            ..Default::default()
        };
        let a = j.hold(id, &new, &ev).unwrap();
        assert_eq!(a.state, PENDING);
        assert_eq!(a.approvers, vec![0, 4242]);
        assert_eq!(a.expires.is_some(), expires_after.is_some());
        id
    }

    #[test]
    fn one_decision_per_pending_run() {
        let (_d, j) = journal();
        let id = held(&j, None);
        assert_eq!(j.pending_approvals(10).unwrap().len(), 1);
        let who = Decider {
            uid: 0,
            pid: 7,
            session: 7,
            command: "wip deny".into(),
        };
        let change = RunChange {
            status: DENIED,
            errno: libc::EACCES,
            result: Some("error: denied".into()),
            guard: None,
        };
        assert!(j
            .decide(id, "denied", &who, Some(&"no".into()), &change, &[])
            .unwrap());
        assert!(!j.decide(id, "approved", &who, None, &change, &[]).unwrap());
        let a = j.approval(id).unwrap().unwrap();
        assert_eq!(a.state, "denied");
        assert_eq!(a.decider, Some(who));
        assert_eq!(a.reason.as_deref(), Some("no"));
        assert_eq!(j.get(id).unwrap().unwrap().status, DENIED);
        assert!(j.pending_approvals(10).unwrap().is_empty());
        assert_eq!(j.next_expiry().unwrap(), None);
    }

    #[test]
    fn pending_runs_survive_a_reopen_and_expire_when_due() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let (j, _) = SqliteJournal::open(&path).unwrap();
        let later = held(&j, Some(Duration::from_secs(3600)));
        let due = held(&j, Some(Duration::from_millis(1)));
        drop(j);
        let (j, interrupted) = SqliteJournal::open(&path).unwrap();
        assert!(interrupted.is_empty(), "pending runs are not running ones");
        assert_eq!(j.get(later).unwrap().unwrap().status, PENDING);
        // The 1 ms one is due by now or very soon; the wait is bounded.
        let mut expired = Vec::new();
        for _ in 0..200 {
            expired = j.expire_due(&|_| "error: expired".into()).unwrap();
            if !expired.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            expired.iter().map(|x| x.approval.run).collect::<Vec<_>>(),
            vec![due]
        );
        assert_eq!(
            (expired[0].path.as_str(), expired[0].op.as_str()),
            ("/t", "merge")
        );
        assert_eq!(j.get(due).unwrap().unwrap().status, EXPIRED);
        assert_eq!(j.approval(due).unwrap().unwrap().state, EXPIRED);
        assert_eq!(j.get(later).unwrap().unwrap().status, PENDING);
        let next = j.next_expiry().unwrap().unwrap();
        assert!(next <= Duration::from_secs(3600) && next > Duration::from_secs(3000));
        let events = j.events_after(0, 10).unwrap();
        assert_eq!(events.iter().filter(|e| e.kind == "expired").count(), 1);
    }
}
