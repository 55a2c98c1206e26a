//! The state on PostgreSQL, shared by every mount of one world: the same tables as the
//! SQLite engine (calls, events, approvals, the known world), with each call's `origin` (the mount that
//! made it) so a restarting mount marks only its own cut-off calls interrupted.
//!
//! Change-feed writes take no lock: a writer puts its events in `events_staged` and
//! notifies `wip_events` with its origin in the same transaction. Readers publish what is
//! staged before they read: `wip_publish` moves every committed staged event into
//! `events`, numbering them, under an advisory lock held for that one statement only, so
//! cursors become visible in order (a reader that saw cursor N never later meets a
//! smaller one) and each event is published once. No lock is ever held across a round
//! trip to a client, so a mount whose network is cut cannot stall the feed.
//!
//! When the database goes away mid-call (a restart, a cut), what could not be recorded is
//! kept and recorded as soon as the database answers again (`Unrecorded`): a finished
//! call's outcome, and a call whose start may have been recorded although the mount
//! heard an error (it did not run: it is settled `not_run`). So no run stays `running`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use postgres::types::Type;
use postgres::Transaction;

use super::pg::{SharedDb, EVENTS_CHANNEL};
use super::{
    known, Approval, Began, Clean, Decider, Event, Expired, Journal, KnownEntry, NewApproval, Run,
    RunChange, APPROVAL_COLUMNS, EXPIRED, EXPIRED_ERRNO, INTERRUPTED, INTERRUPTED_ERRNO,
    INTERRUPTED_WORDS, NOT_RUN, PENDING, RUNNING,
};
use super::{StateError, StateResult};
use crate::host::{Caller, Session};

/// The current time as the SQLite journal writes it (ISO 8601, UTC, milliseconds).
const NOW: &str =
    r#"to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"#;
/// Advisory lock keys: schema creation, and publishing the change feed (in cursor order;
/// held by one statement at a time, never across a round trip).
const SCHEMA_LOCK: i64 = 0x7769_705f_7363_6865;
const EVENTS_LOCK: i64 = 0x7769_705f_6576_7473;
/// How often what could not be recorded is tried again while the database is away.
const RETRY_EVERY: Duration = Duration::from_millis(500);
/// How long after a failed start a run that may have been recorded is settled: a start
/// whose answer is merely slow has arrived by then.
const ORPHAN_AFTER: Duration = Duration::from_secs(2);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS known(
  path TEXT PRIMARY KEY, ref TEXT NOT NULL, description TEXT NOT NULL,
  indexable BOOLEAN NOT NULL, seen TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS known_by_ref ON known(ref);
CREATE TABLE IF NOT EXISTS journal_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls(
  id BIGSERIAL PRIMARY KEY, origin TEXT NOT NULL,
  started TEXT NOT NULL, finished TEXT,
  pid BIGINT NOT NULL, uid BIGINT NOT NULL, session BIGINT NOT NULL,
  command TEXT NOT NULL, path TEXT NOT NULL, op TEXT NOT NULL,
  args TEXT NOT NULL, guard TEXT NOT NULL, status TEXT NOT NULL,
  errno INTEGER NOT NULL DEFAULT 0, result TEXT NOT NULL DEFAULT '',
  discovered TEXT NOT NULL DEFAULT '[]');
CREATE INDEX IF NOT EXISTS calls_by_op ON calls(path, op, id);
ALTER TABLE calls ADD COLUMN IF NOT EXISTS seq BIGINT;
CREATE UNIQUE INDEX IF NOT EXISTS calls_numbered ON calls(path, op, seq);
-- Runs not numbered yet (journals from before numbering): found at open without a scan.
CREATE INDEX IF NOT EXISTS calls_unnumbered ON calls(id) WHERE seq IS NULL;
CREATE INDEX IF NOT EXISTS calls_running ON calls(origin, status);
-- When each call's session began (journals from before: 0, unknown).
ALTER TABLE calls ADD COLUMN IF NOT EXISTS session_start BIGINT NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS events(
  cursor BIGSERIAL PRIMARY KEY,
  at TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
  op TEXT, run BIGINT, status TEXT);
CREATE TABLE IF NOT EXISTS approvals(
  run BIGINT PRIMARY KEY,
  rule BIGINT NOT NULL, rule_text TEXT NOT NULL,
  approvers TEXT NOT NULL, self_approve BOOLEAN NOT NULL,
  requested TEXT NOT NULL, expires TEXT,
  state TEXT NOT NULL,
  decided_at TEXT, decider_uid BIGINT, decider_pid BIGINT,
  decider_session BIGINT, decider_command TEXT, reason TEXT);
CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals(state, run);
-- Change-feed writes, until a reader publishes them into `events` (see the module's doc).
CREATE TABLE IF NOT EXISTS events_staged(
  id BIGSERIAL PRIMARY KEY,
  at TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
  op TEXT, run BIGINT, status TEXT);
-- A token each start carries, so a start the mount did not hear answered can be found.
ALTER TABLE calls ADD COLUMN IF NOT EXISTS token TEXT;
";

/// A call's outcome and its events in one statement, so recording it costs one round trip
/// (the hot path: every call ends here). `p_events` is a JSON array of events, staged for
/// publishing; `p_origin` the notification's payload.
fn finish_function() -> String {
    format!(
        "CREATE OR REPLACE FUNCTION wip_finish(p_id bigint, p_status text, p_errno integer,
           p_result text, p_discovered text, p_events text, p_origin text) RETURNS void
         LANGUAGE plpgsql AS $fn$
         BEGIN
           UPDATE calls SET status = p_status, errno = p_errno, result = p_result,
             discovered = p_discovered, finished = {NOW} WHERE id = p_id;
           IF jsonb_array_length(p_events::jsonb) > 0 THEN
             INSERT INTO events_staged(at, kind, path, op, run, status)
               SELECT {NOW}, e->>'kind', e->>'path', e->>'op', (e->>'run')::bigint, e->>'status'
               FROM jsonb_array_elements(p_events::jsonb) WITH ORDINALITY AS t(e, i) ORDER BY i;
             PERFORM pg_notify('{EVENTS_CHANNEL}', p_origin);
           END IF;
         END $fn$"
    )
}

/// Publish the committed staged events into `events`, numbered in the order they were
/// staged. The lock is held by this one statement (and its commit) only; a reader that
/// finds nothing staged takes no lock and writes nothing.
fn publish_function() -> String {
    format!(
        "CREATE OR REPLACE FUNCTION wip_publish() RETURNS void
         LANGUAGE plpgsql AS $fn$
         BEGIN
           IF EXISTS (SELECT 1 FROM events_staged) THEN
             PERFORM pg_advisory_xact_lock({EVENTS_LOCK});
             WITH moved AS (DELETE FROM events_staged RETURNING *)
             INSERT INTO events(at, kind, path, op, run, status)
               SELECT at, kind, path, op, run, status FROM moved ORDER BY id;
           END IF;
         END $fn$"
    )
}

const COLUMNS: &str = "id, started, finished, pid, uid, session, command, path, op, args, guard, status, errno, result, discovered, seq, session_start";

pub(crate) struct PgJournal {
    db: Arc<SharedDb>,
    /// Which mount this is (host name and state directory): its calls carry it.
    origin: String,
    /// The shared journal's identity (one for every mount on it).
    id: String,
    /// What could not be recorded while the database was away, tried again until it is.
    unrecorded: Arc<Mutex<Unrecorded>>,
    /// Tells each start apart (see `Unrecorded::starts`).
    tokens: AtomicU64,
    nonce: String,
}

/// An outcome the journal could not record when the call ended.
#[derive(Clone)]
struct Outcome {
    id: i64,
    status: String,
    errno: i32,
    result: String,
    discovered: String,
    events: String,
}

/// What waits to be recorded, and whether a thread is trying.
#[derive(Default)]
struct Unrecorded {
    outcomes: Vec<Outcome>,
    /// Tokens of starts whose answer was lost: each may have made a row the mount never
    /// heard of, and whose call never ran.
    starts: Vec<(String, std::time::Instant)>,
    retrying: bool,
}

type PgResult<T> = Result<T, postgres::Error>;

/// How often `begin` takes the next run number again when another mount took it first.
const BEGIN_TRIES: usize = 100;

impl PgJournal {
    /// Create the tables if needed and mark this mount's calls that a crash cut off.
    pub fn open(db: Arc<SharedDb>, origin: &str) -> StateResult<(PgJournal, Vec<i64>)> {
        let mut j = PgJournal {
            db,
            origin: origin.to_string(),
            id: String::new(),
            unrecorded: Arc::default(),
            tokens: AtomicU64::new(0),
            nonce: super::fresh_journal_id(),
        };
        let (id, interrupted) = j.with("cannot open the journal", |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            tx.batch_execute(SCHEMA)?;
            // Journals made before runs were numbered per op get their numbers, once.
            tx.batch_execute(
                "UPDATE calls SET seq = n.seq FROM (
                   SELECT id, row_number() OVER (PARTITION BY path, op ORDER BY id) AS seq
                   FROM calls WHERE path IN (SELECT path FROM calls WHERE seq IS NULL)) n
                 WHERE calls.id = n.id AND calls.seq IS DISTINCT FROM n.seq",
            )?;
            tx.batch_execute(&finish_function())?;
            tx.batch_execute(&publish_function())?;
            tx.execute(
                "INSERT INTO journal_meta (key, value) VALUES ('id', $1) ON CONFLICT DO NOTHING",
                &[&super::fresh_journal_id()],
            )?;
            let id: String = tx
                .query_one("SELECT value FROM journal_meta WHERE key = 'id'", &[])?
                .get(0);
            let n: Vec<i64> = tx
                .query(
                    &format!(
                        "UPDATE calls SET status = $1, errno = $2, finished = {NOW}, result = $5
                         WHERE status = $3 AND origin = $4 RETURNING id"
                    ),
                    &[
                        &INTERRUPTED,
                        &INTERRUPTED_ERRNO,
                        &RUNNING,
                        &j.origin,
                        &INTERRUPTED_WORDS,
                    ],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            tx.execute(
                "UPDATE approvals SET state = 'interrupted'
                 WHERE state = $1 AND run NOT IN (SELECT id FROM calls WHERE status = $1)",
                &[&PENDING],
            )?;
            tx.commit()?;
            Ok((id, n))
        })?;
        j.id = id;
        Ok((j, interrupted))
    }

    /// Run `f` on a pooled connection; a failure becomes EIO with words.
    fn with<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut postgres::Client) -> PgResult<T>,
    ) -> StateResult<T> {
        let mut c = self.db.client()?;
        f(&mut c).map_err(|e| self.db.error(what, &e))
    }

    /// `with`, for a read: on the read pool, so it never waits behind calls. A read that
    /// meets a connection cut before it (a restart) is read again on another: a read
    /// changes nothing, so it is safe to repeat.
    fn read<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&mut postgres::Client) -> PgResult<T>,
    ) -> StateResult<T> {
        let mut tries = 0;
        loop {
            let mut c = self.db.reader()?;
            match f(&mut c) {
                // A cut shows as a closed connection, or as the server's own words on it
                // (57P01 terminated by an administrator, 08… connection exceptions).
                Err(e)
                    if tries < super::pg::READ_RETRIES
                        && (c.is_closed() || e.is_closed() || connection_lost(&e)) =>
                {
                    tries += 1
                }
                done => return done.map_err(|e| self.db.error(what, &e)),
            }
        }
    }

    /// Stage events and tell every mount, inside the caller's transaction.
    fn insert_events(&self, tx: &mut Transaction<'_>, events: &[Event]) -> PgResult<()> {
        stage_events(tx, events, &self.origin)
    }

    /// Keep what could not be recorded, and make sure a thread records it once the
    /// database answers again.
    fn keep_unrecorded(&self, add: impl FnOnce(&mut Unrecorded)) {
        let Ok(mut u) = self.unrecorded.lock() else {
            return;
        };
        add(&mut u);
        if u.retrying {
            return;
        }
        u.retrying = true;
        let (pending, db, origin) = (
            Arc::downgrade(&self.unrecorded),
            Arc::clone(&self.db),
            self.origin.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("journal-retry".into())
            .spawn(move || record_when_back(&pending, &db, &origin));
        if let Err(e) = spawned {
            tracing::error!("journal: cannot start recording what was missed: {e}");
            u.retrying = false;
        }
    }
}

/// Stage events for publishing and notify every mount, inside a transaction.
fn stage_events(tx: &mut Transaction<'_>, events: &[Event], origin: &str) -> PgResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let insert = tx.prepare(&format!(
        "INSERT INTO events_staged(at, kind, path, op, run, status) VALUES ({NOW}, $1, $2, $3, $4, $5)"
    ))?;
    for e in events {
        tx.execute(&insert, &[&e.kind, &e.path, &e.op, &e.run, &e.status])?;
    }
    tx.execute("SELECT pg_notify($1, $2)", &[&EVENTS_CHANNEL, &origin])?;
    Ok(())
}

/// The words a run gets when its start was recorded but the mount never heard so, and so
/// never made the call.
const LOST_START_WORDS: &str = "error: not run: the mount lost the shared state database as it recorded this call, so it did not make it; nothing changed, and calling again is safe\n";

/// Record what waits in `pending` until it is all recorded (or the journal is gone): each
/// outcome once (a run already ended, because the lost answer was of a write that did
/// commit, is left alone), and each lost start settled `not_run`.
fn record_when_back(pending: &Weak<Mutex<Unrecorded>>, db: &SharedDb, origin: &str) {
    loop {
        std::thread::sleep(RETRY_EVERY);
        let Some(pending) = pending.upgrade() else {
            return;
        };
        let (outcomes, starts): (Vec<Outcome>, Vec<String>) = {
            let Ok(mut u) = pending.lock() else { return };
            if u.outcomes.is_empty() && u.starts.is_empty() {
                u.retrying = false;
                return;
            }
            let due: Vec<String> = u
                .starts
                .iter()
                .filter(|(_, at)| at.elapsed() >= ORPHAN_AFTER)
                .map(|(t, _)| t.clone())
                .collect();
            (u.outcomes.clone(), due)
        };
        let Ok(mut c) = db.client() else { continue };
        let mut done_outcomes = Vec::new();
        for Outcome {
            id,
            status,
            errno,
            result,
            discovered,
            events,
        } in &outcomes
        {
            let recorded = (|| -> PgResult<()> {
                let mut tx = c.transaction()?;
                let updated = tx.execute(
                    &format!(
                        "UPDATE calls SET status = $2, errno = $3, result = $4, discovered = $5,
                           finished = {NOW} WHERE id = $1 AND status = $6"
                    ),
                    &[id, status, errno, result, discovered, &RUNNING],
                )?;
                if updated == 1 {
                    let staged = tx.execute(
                        &format!(
                            "INSERT INTO events_staged(at, kind, path, op, run, status)
                             SELECT {NOW}, e->>'kind', e->>'path', e->>'op', (e->>'run')::bigint,
                               e->>'status'
                             FROM jsonb_array_elements($1::text::jsonb) WITH ORDINALITY AS t(e, i)
                             ORDER BY i"
                        ),
                        &[events],
                    )?;
                    if staged > 0 {
                        tx.execute("SELECT pg_notify($1, $2)", &[&EVENTS_CHANNEL, &origin])?;
                    }
                }
                tx.commit()
            })();
            match recorded {
                Ok(()) => done_outcomes.push(*id),
                Err(e) => {
                    tracing::warn!(run = id, "journal: still cannot record the outcome: {e}");
                    break;
                }
            }
        }
        let mut done_starts = Vec::new();
        for token in &starts {
            let settled = (|| -> PgResult<()> {
                let mut tx = c.transaction()?;
                let rows = tx.query(
                    &format!(
                        "UPDATE calls SET status = $2, errno = $3, result = $4, finished = {NOW}
                         WHERE token = $1 AND origin = $5 AND status = $6
                         RETURNING path, op, seq"
                    ),
                    &[
                        token,
                        &NOT_RUN,
                        &libc::ECANCELED,
                        &LOST_START_WORDS,
                        &origin,
                        &RUNNING,
                    ],
                )?;
                let mut events = Vec::new();
                for r in &rows {
                    let (path, op, seq): (String, String, Option<i64>) =
                        (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
                    tracing::warn!(
                        "journal: run {seq:?} of {op} on {path} was recorded although the mount heard an error; it did not run, settled not_run"
                    );
                    events.push(Event::of_run("call", &path, &op, seq.unwrap_or(0), NOT_RUN));
                }
                stage_events(&mut tx, &events, origin)?;
                tx.commit()
            })();
            match settled {
                Ok(()) => done_starts.push(token.clone()),
                Err(e) => {
                    tracing::warn!("journal: still cannot settle a lost start: {e}");
                    break;
                }
            }
        }
        if let Ok(mut u) = pending.lock() {
            u.outcomes.retain(|o| !done_outcomes.contains(&o.id));
            u.starts.retain(|(t, _)| !done_starts.contains(t));
        };
    }
}

/// Whether `e` says the session was ended under it (a restart, an administrator).
fn connection_lost(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        let code = c.code();
        code.starts_with("57P") || code.starts_with("08")
    })
}

impl Journal for PgJournal {
    /// This journal's identity.
    fn id(&self) -> &str {
        &self.id
    }

    /// Settle a run marked interrupted at start-up (see `SqliteJournal::settle`).
    fn settle(&self, id: i64, status: &str, errno: i32, result: &Clean) -> StateResult<bool> {
        self.with("cannot settle a run", |c| {
            c.execute(
                "UPDATE calls SET status = $2, errno = $3, result = $4 WHERE id = $1 AND status = $5",
                &[&id, &status, &errno, &result.as_str(), &INTERRUPTED],
            )
        })
        .map(|n| n == 1)
    }

    fn begin(
        &self,
        caller: &Caller,
        path: &str,
        op: &str,
        args: &str,
        guard: &Clean,
    ) -> StateResult<Began> {
        let guard = guard.as_str();
        let start = start_column(caller.session_start);
        let token = format!(
            "{}:{}",
            self.nonce,
            self.tokens.fetch_add(1, Ordering::Relaxed)
        );
        let began = self.with("cannot record the call", |c| {
            // Typed: one round trip instead of prepare, execute and close. Two mounts may
            // take the same next number at once: the unique index makes one of them wait
            // and then insert nothing, and it takes the next number.
            for _ in 0..BEGIN_TRIES {
                let row = c.query_typed_opt(
                &format!(
                    "INSERT INTO calls(origin, started, pid, uid, session, command, path, op, args, guard, status, seq,
                       session_start, token)
                     VALUES ($1, {NOW}, $2, $3, $4, $5, $6, $7, $8, $9, $10,
                       coalesce((SELECT max(seq) FROM calls WHERE path = $6 AND op = $7), 0) + 1, $11, $12)
                     ON CONFLICT DO NOTHING RETURNING id, seq"
                ),
                &[
                    (&self.origin, Type::TEXT),
                    (&i64::from(caller.pid), Type::INT8),
                    (&i64::from(caller.uid), Type::INT8),
                    (&i64::from(caller.session), Type::INT8),
                    (&caller.command, Type::TEXT),
                    (&path, Type::TEXT),
                    (&op, Type::TEXT),
                    (&args, Type::TEXT),
                    (&guard, Type::TEXT),
                    (&RUNNING, Type::TEXT),
                    (&start, Type::INT8),
                    (&token, Type::TEXT),
                ],
            )?;
                if let Some(row) = row {
                    return Ok(Some(Began {
                        id: row.try_get(0)?,
                        seq: row.try_get(1)?,
                    }));
                }
            }
            Ok(None)
        });
        if began.is_err() {
            // The row may be in the journal although the answer was lost: once the
            // database answers, a row with this token is settled (its call never ran).
            let at = std::time::Instant::now();
            self.keep_unrecorded(|u| u.starts.push((token, at)));
        }
        let began = began?;
        // Only a storm of writers on one op gets here; saying so beats a wrong number.
        began.ok_or_else(|| {
            StateError::new(format!(
                "cannot record the call: {BEGIN_TRIES} other calls of {op} on {path} took its run number first; call again"
            ))
        })
    }

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
        let events =
            serde_json::to_string(events).map_err(|e| StateError::new(format!("journal: {e}")))?;
        let recorded = self.with("cannot record the call's outcome", |c| {
            c.query_typed(
                "SELECT wip_finish($1, $2, $3, $4, $5, $6, $7)",
                &[
                    (&id, Type::INT8),
                    (&status, Type::TEXT),
                    (&errno, Type::INT4),
                    (&result.as_str(), Type::TEXT),
                    (&discovered, Type::TEXT),
                    (&events, Type::TEXT),
                    (&self.origin, Type::TEXT),
                ],
            )?;
            Ok(())
        });
        if recorded.is_err() {
            // Recorded as soon as the database answers again (unless this very write did
            // commit and only its answer was lost: then the run has ended already).
            self.keep_unrecorded(|u| {
                u.outcomes.push(Outcome {
                    id,
                    status: status.to_string(),
                    errno,
                    result: result.as_str().to_string(),
                    discovered,
                    events,
                })
            });
        }
        recorded
    }

    fn record_events(&self, events: &[Event]) -> StateResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.with("cannot record changes", |c| {
            let mut tx = c.transaction()?;
            self.insert_events(&mut tx, events)?;
            tx.commit()
        })
    }

    fn events_after(&self, cursor: i64, limit: usize) -> StateResult<Vec<Event>> {
        self.read("cannot read the change feed", |c| {
            publish(c)?;
            let rows = c.query(
                "SELECT cursor, at, kind, path, op, run, status FROM events
                 WHERE cursor > $1 ORDER BY cursor LIMIT $2",
                &[&cursor, &(limit.min(i64::MAX as usize) as i64)],
            )?;
            rows.iter()
                .map(|r| {
                    Ok(Event {
                        cursor: r.try_get(0)?,
                        at: r.try_get(1)?,
                        kind: r.try_get(2)?,
                        path: r.try_get(3)?,
                        op: r.try_get(4)?,
                        run: r.try_get(5)?,
                        status: r.try_get(6)?,
                    })
                })
                .collect()
        })
    }

    fn last_event_at(&self, cursor: i64) -> StateResult<Option<String>> {
        self.read("cannot read the change feed", |c| {
            publish(c)?;
            c.query_opt(
                "SELECT at FROM events WHERE cursor > $1 ORDER BY cursor DESC LIMIT 1",
                &[&cursor],
            )?
            .map(|r| r.try_get(0))
            .transpose()
        })
    }

    fn last_event(&self) -> StateResult<i64> {
        self.read("cannot read the change feed", |c| {
            publish(c)?;
            c.query_one("SELECT coalesce(max(cursor), 0) FROM events", &[])?
                .try_get(0)
        })
    }

    fn get(&self, id: i64) -> StateResult<Option<Run>> {
        self.read("cannot read the run", |c| {
            c.query_opt(
                &format!("SELECT {COLUMNS} FROM calls WHERE id = $1"),
                &[&id],
            )?
            .map(|r| row_to_run(&r))
            .transpose()
        })
    }

    fn ran_at(&self, path: &str, under: &str) -> StateResult<bool> {
        let (from, to) = super::below(under);
        self.read("cannot look for runs", |c| {
            c.query_one(
                "SELECT EXISTS(SELECT 1 FROM calls WHERE path = $1) OR EXISTS(SELECT 1 FROM calls WHERE path >= $2 AND path < $3)",
                &[&path, &from, &to],
            )?
            .try_get(0)
        })
    }

    fn runs_of(&self, path: &str, op: &str, limit: usize) -> StateResult<Vec<Began>> {
        self.read("cannot list runs", |c| {
            c.query(
                "SELECT id, seq FROM calls WHERE path = $1 AND op = $2 ORDER BY id DESC LIMIT $3",
                &[&path, &op, &(limit as i64)],
            )?
            .iter()
            .map(|r| {
                Ok(Began {
                    id: r.try_get(0)?,
                    seq: r.try_get(1)?,
                })
            })
            .collect()
        })
    }

    /// The session's own latest run of one op of one entry, else its uid's: of this
    /// mount's calls only (the journal holds every mount's).
    fn latest_for(&self, path: &str, op: &str, session: &Session) -> StateResult<Option<i64>> {
        if *session == Session::NONE {
            return Ok(None);
        }
        self.read("cannot find the latest run", |c| {
            c.query_typed_opt(
                "SELECT id FROM calls WHERE path = $1 AND op = $2 AND uid = $3 AND origin = $4
                 ORDER BY (session = $5 AND session_start = $6) DESC, seq DESC LIMIT 1",
                &[
                    (&path, Type::TEXT),
                    (&op, Type::TEXT),
                    (&i64::from(session.uid), Type::INT8),
                    (&self.origin, Type::TEXT),
                    (&i64::from(session.number), Type::INT8),
                    (&start_column(session.start), Type::INT8),
                ],
            )?
            .map(|r| r.try_get(0))
            .transpose()
        })
    }

    fn numbered(&self, path: &str, op: &str, seq: i64) -> StateResult<Option<i64>> {
        self.read("cannot find the run", |c| {
            c.query_opt(
                "SELECT id FROM calls WHERE path = $1 AND op = $2 AND seq = $3",
                &[&path, &op, &seq],
            )?
            .map(|r| r.try_get(0))
            .transpose()
        })
    }

    fn running_runs(&self, limit: usize) -> StateResult<Vec<Run>> {
        self.read("cannot list runs", |c| {
            c.query(
                &format!("SELECT {COLUMNS} FROM calls WHERE status = $1 ORDER BY id LIMIT $2"),
                &[&RUNNING, &(limit as i64)],
            )?
            .iter()
            .map(row_to_run)
            .collect()
        })
    }

    fn recent(&self, limit: usize) -> StateResult<Vec<Run>> {
        self.read("cannot list calls", |c| {
            c.query(
                &format!("SELECT {COLUMNS} FROM calls ORDER BY id DESC LIMIT $1"),
                &[&(limit as i64)],
            )?
            .iter()
            .map(row_to_run)
            .collect()
        })
    }

    fn runs_from(
        &self,
        first: i64,
        a: (&str, &str),
        b: (&str, &str),
        limit: usize,
    ) -> StateResult<Vec<Run>> {
        self.with("cannot list calls", |c| {
            c.query(
                &format!(
                    "SELECT {COLUMNS} FROM calls
                     WHERE id >= $1 AND origin = $2
                       AND ((path >= $3 AND path < $4) OR (path >= $5 AND path < $6))
                     ORDER BY id LIMIT $7"
                ),
                &[
                    &first,
                    &self.origin,
                    &a.0,
                    &a.1,
                    &b.0,
                    &b.1,
                    &(limit as i64),
                ],
            )?
            .iter()
            .map(row_to_run)
            .collect()
        })
    }

    fn first_run_at(&self, time: &str) -> StateResult<Option<i64>> {
        self.with("cannot list calls", |c| {
            let row = c.query_one(
                "SELECT MIN(id) FROM calls WHERE started >= $1 AND origin = $2",
                &[&time, &self.origin],
            )?;
            row.try_get::<_, Option<i64>>(0)
        })
    }

    fn recent_brief(&self, limit: usize, cut: usize) -> StateResult<Vec<Run>> {
        let cut32 = i32::try_from(cut).unwrap_or(i32::MAX);
        self.read("cannot list calls", |c| {
            c.query(
                "SELECT id, started, finished, pid, uid, session, command, path, op,
                        substr(args, 1, $2), '', status, errno, substr(result, 1, $2), '[]', seq,
                        session_start, length(args), length(result)
                 FROM calls ORDER BY id DESC LIMIT $1",
                &[&(limit as i64), &cut32],
            )?
            .iter()
            .map(|r| {
                let mut run = row_to_run(r)?;
                let (args_len, result_len): (i32, i32) = (r.try_get(17)?, r.try_get(18)?);
                if args_len as usize > cut {
                    run.args.push('…');
                }
                if result_len as usize > cut {
                    run.result.push('…');
                }
                Ok(run)
            })
            .collect()
        })
    }

    fn count(&self) -> StateResult<i64> {
        self.read("cannot count calls", |c| {
            c.query_one("SELECT count(*) FROM calls", &[])?.try_get(0)
        })
    }

    /// Calls running now, on any mount.
    fn running(&self) -> StateResult<i64> {
        self.read("cannot count running calls", |c| {
            c.query_one("SELECT count(*) FROM calls WHERE status = $1", &[&RUNNING])?
                .try_get(0)
        })
    }

    /// The size of the journal's tables in bytes (with their indexes).
    fn bytes(&self) -> StateResult<i64> {
        self.read("cannot measure the journal", |c| {
            c.query_one(
                "SELECT (pg_total_relation_size('calls') + pg_total_relation_size('events')
                         + pg_total_relation_size('approvals'))::bigint",
                &[],
            )?
            .try_get(0)
        })
    }

    // ---- pending runs ----------------------------------------------------------------

    fn hold(&self, run: i64, new: &NewApproval<'_>, event: &Event) -> StateResult<Approval> {
        let approvers = serde_json::to_string(new.approvers)
            .map_err(|e| StateError::new(format!("journal: {e}")))?;
        let expires_ms = new.expires_after.map(|d| d.as_millis() as f64);
        self.with("cannot hold the run for approval", |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                &format!(
                    "INSERT INTO approvals(run, rule, rule_text, approvers, self_approve, requested, expires, state)
                     VALUES ($1, $2, $3, $4, $5, {NOW},
                       CASE WHEN $6::float8 IS NULL THEN NULL
                            ELSE to_char((clock_timestamp() + $6::float8 * interval '1 millisecond')
                                 AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') END,
                       $7)"
                ),
                &[
                    &run,
                    &(new.rule as i64),
                    &new.rule_text.as_str(),
                    &approvers,
                    &new.self_approve,
                    &expires_ms,
                    &PENDING,
                ],
            )?;
            self.insert_events(&mut tx, std::slice::from_ref(event))?;
            tx.commit()
        })?;
        self.approval(run)?
            .ok_or_else(|| StateError::new("journal: the approval just written is gone"))
    }

    fn approval(&self, run: i64) -> StateResult<Option<Approval>> {
        self.read("cannot read the approval", |c| {
            c.query_opt(
                &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run = $1"),
                &[&run],
            )?
            .map(|r| row_to_approval(&r))
            .transpose()
        })
    }

    fn pending_approvals(&self, limit: usize) -> StateResult<Vec<Approval>> {
        self.read("cannot list pending runs", |c| {
            c.query(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = $1 ORDER BY run LIMIT $2"
                ),
                &[&PENDING, &(limit.min(i64::MAX as usize) as i64)],
            )?
            .iter()
            .map(row_to_approval)
            .collect()
        })
    }

    fn decide(
        &self,
        run: i64,
        state: &str,
        who: &Decider,
        reason: Option<&Clean>,
        change: &RunChange<'_>,
        events: &[Event],
    ) -> StateResult<bool> {
        self.with("cannot record the decision", |c| {
            let mut tx = c.transaction()?;
            // The row lock makes a concurrent decision (or expiry) from another mount wait,
            // then find the run no longer pending.
            let n = tx.execute(
                &format!(
                    "UPDATE approvals SET state = $2, decided_at = {NOW},
                       decider_uid = $3, decider_pid = $4, decider_session = $5,
                       decider_command = $6, reason = $7
                     WHERE run = $1 AND state = $8"
                ),
                &[
                    &run,
                    &state,
                    &i64::from(who.uid),
                    &i64::from(who.pid),
                    &i64::from(who.session),
                    &who.command,
                    &reason.map(Clean::as_str),
                    &PENDING,
                ],
            )?;
            if n == 0 {
                return Ok(false);
            }
            update_run(&mut tx, run, change)?;
            self.insert_events(&mut tx, events)?;
            tx.commit()?;
            Ok(true)
        })
    }

    fn expire_due(
        &self,
        result_of: &dyn Fn(&Approval) -> Clean<'static>,
    ) -> StateResult<Vec<Expired>> {
        self.with("cannot expire pending runs", |c| {
            let mut tx = c.transaction()?;
            // SKIP LOCKED: a run another mount is expiring or deciding right now is theirs.
            let rows = tx.query(
                &format!(
                    "SELECT {APPROVAL_COLUMNS}, calls.path, calls.op FROM approvals
                     JOIN calls ON calls.id = approvals.run
                     WHERE state = $1 AND expires IS NOT NULL AND expires <= {NOW}
                     ORDER BY run FOR UPDATE OF approvals SKIP LOCKED"
                ),
                &[&PENDING],
            )?;
            let mut due = Vec::new();
            for r in &rows {
                due.push(Expired {
                    approval: row_to_approval(r)?,
                    path: r.try_get(14)?,
                    op: r.try_get(15)?,
                });
            }
            for x in &due {
                let a = &x.approval;
                tx.execute(
                    "UPDATE approvals SET state = $2, decided_at = expires WHERE run = $1",
                    &[&a.run, &EXPIRED],
                )?;
                let text = result_of(a);
                update_run(
                    &mut tx,
                    a.run,
                    &RunChange {
                        status: EXPIRED,
                        errno: EXPIRED_ERRNO,
                        result: Some(text),
                        guard: None,
                    },
                )?;
                let event = Event::of_run(EXPIRED, &x.path, &x.op, a.run, EXPIRED);
                self.insert_events(&mut tx, &[event])?;
            }
            tx.commit()?;
            Ok(due)
        })
    }

    fn next_expiry(&self) -> StateResult<Option<Duration>> {
        let ms: Option<f64> = self.read("cannot read expiries", |c| {
            c.query_one(
                "SELECT (extract(epoch FROM (min(expires)::timestamptz - clock_timestamp())) * 1000.0)::float8
                 FROM approvals WHERE state = $1 AND expires IS NOT NULL",
                &[&PENDING],
            )?
            .try_get(0)
        })?;
        Ok(ms.map(|ms| Duration::from_millis(ms.max(0.0).ceil() as u64)))
    }

    fn write_known(&self, entries: &[KnownEntry]) -> StateResult<()> {
        self.with("cannot write the known world", |c| {
            let mut tx = c.transaction()?;
            let st = tx.prepare(&format!(
                "INSERT INTO known(path, ref, description, indexable, seen)
                 VALUES ($1, $2, $3, $4, {NOW})
                 ON CONFLICT(path) DO UPDATE SET ref = excluded.ref,
                   description = excluded.description, indexable = excluded.indexable,
                   seen = excluded.seen"
            ))?;
            for e in entries {
                tx.execute(&st, &[&e.path, &e.reference, &e.description, &e.indexable])?;
            }
            tx.commit()
        })
    }

    fn locate(&self, words: &[String], limit: usize) -> StateResult<Vec<KnownEntry>> {
        let (sql, args) = known::locate_query(words, limit, "indexable", "ILIKE", '$');
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = args
            .iter()
            .map(|a| a as &(dyn postgres::types::ToSql + Sync))
            .collect();
        self.read("cannot search the known world", |c| {
            c.query(&sql, &params)?.iter().map(known_row).collect()
        })
    }

    fn paths_of(&self, reference: &str) -> StateResult<Vec<String>> {
        self.read("cannot read the known world", |c| {
            c.query(
                "SELECT path FROM known WHERE ref = $1 ORDER BY path",
                &[&reference],
            )?
            .iter()
            .map(|r| r.try_get(0))
            .collect()
        })
    }

    fn known_recent(&self, limit: usize) -> StateResult<(Vec<KnownEntry>, i64)> {
        self.read("cannot read the known world", |c| {
            let total: i64 = c.query_one("SELECT count(*) FROM known", &[])?.try_get(0)?;
            let rows = c.query(
                "SELECT path, ref, description, indexable FROM known
                 ORDER BY seen DESC, path LIMIT $1",
                &[&(limit as i64)],
            )?;
            let entries = rows.iter().map(known_row).collect::<PgResult<Vec<_>>>()?;
            Ok((entries, total))
        })
    }
}

/// Publish what is staged (see `publish_function`), in a statement of its own: committed
/// before anything is read.
fn publish(c: &mut postgres::Client) -> PgResult<()> {
    c.batch_execute("SELECT wip_publish()")
}

fn update_run(tx: &mut Transaction<'_>, run: i64, change: &RunChange<'_>) -> PgResult<()> {
    let guard = change.guard.as_ref().map(Clean::as_str);
    match &change.result {
        Some(result) => tx.execute(
            &format!(
                "UPDATE calls SET status = $2, errno = $3, result = $4, guard = coalesce($5, guard),
                   finished = {NOW} WHERE id = $1"
            ),
            &[
                &run,
                &change.status,
                &change.errno,
                &result.as_str(),
                &guard,
            ],
        )?,
        None => tx.execute(
            "UPDATE calls SET status = $2, errno = $3, guard = coalesce($4, guard), finished = NULL
             WHERE id = $1",
            &[&run, &change.status, &change.errno, &guard],
        )?,
    };
    Ok(())
}

fn known_row(r: &postgres::Row) -> PgResult<KnownEntry> {
    Ok(KnownEntry {
        path: r.try_get(0)?,
        reference: r.try_get(1)?,
        description: r.try_get(2)?,
        indexable: r.try_get(3)?,
    })
}

impl super::Columns for postgres::Row {
    type Error = postgres::Error;

    /// INTEGER and BIGINT columns alike (errno is the one INTEGER).
    fn int(&self, i: usize) -> PgResult<Option<i64>> {
        if self.columns().get(i).map(|c| c.type_()) == Some(&Type::INT4) {
            return Ok(self.try_get::<_, Option<i32>>(i)?.map(i64::from));
        }
        self.try_get(i)
    }

    fn text(&self, i: usize) -> PgResult<Option<String>> {
        self.try_get(i)
    }

    fn flag(&self, i: usize) -> PgResult<bool> {
        self.try_get(i)
    }
}

/// A session's start as a BIGINT column holds it (a start in clock ticks since boot is far
/// below the limit).
fn start_column(start: u64) -> i64 {
    i64::try_from(start).unwrap_or(i64::MAX)
}

fn row_to_run(r: &postgres::Row) -> PgResult<Run> {
    super::run_of(r)
}

fn row_to_approval(r: &postgres::Row) -> PgResult<Approval> {
    super::approval_of(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::pg::TestDb;

    fn open(db: &TestDb, origin: &str) -> (PgJournal, usize) {
        let shared = Arc::new(SharedDb::connect(&db.url).unwrap());
        let (j, cut) = PgJournal::open(shared, origin).unwrap();
        (j, cut.len())
    }

    fn caller() -> Caller {
        Caller {
            pid: 1,
            uid: 0,
            session: 1,
            command: "bash".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_restart_interrupts_only_its_own_running_calls() {
        let db = TestDb::create();
        let (a, _) = open(&db, "host-a:/state");
        let (b, _) = open(&db, "host-b:/state");
        let mine = a
            .begin(&caller(), "/t", "close", "{}", &"allowed".into())
            .unwrap()
            .id;
        let theirs = b
            .begin(&caller(), "/t", "close", "{}", &"allowed".into())
            .unwrap()
            .id;
        let ev = Event::of_run("call", "/t", "close", theirs, "ok");
        b.finish(theirs, "ok", 0, &"closed".into(), &["/t/x".into()], &[ev])
            .unwrap();
        let running = b
            .begin(&caller(), "/t", "comment", "hi", &"allowed".into())
            .unwrap()
            .id;
        drop(a);
        let (a, n) = open(&db, "host-a:/state");
        assert_eq!(n, 1);
        assert_eq!(a.get(mine).unwrap().unwrap().status, INTERRUPTED);
        assert_eq!(a.get(running).unwrap().unwrap().status, RUNNING);
        let done = a.get(theirs).unwrap().unwrap();
        assert_eq!(
            (done.status.as_str(), done.result.as_str()),
            ("ok", "closed")
        );
        assert_eq!(done.discovered, vec!["/t/x".to_string()]);
        // Numbered per op across mounts: the first call of close is run 1 wherever it ran.
        assert_eq!(
            a.runs_of("/t", "close", 10).unwrap(),
            vec![Began { id: theirs, seq: 2 }, Began { id: mine, seq: 1 }]
        );
        assert_eq!(a.numbered("/t", "close", 2).unwrap(), Some(theirs));
        assert_eq!(a.count().unwrap(), 3);
        let brief = a.recent_brief(10, 2).unwrap();
        assert_eq!(brief[2].args, "{}");
        assert_eq!(brief[1].result, "cl…");
        let events = b.events_after(0, 10).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(a.last_event().unwrap(), events[0].cursor);
    }

    /// `result`'s fallback reads this mount's calls of the caller's uid only, the
    /// session's own first; a journal from before sessions' starts were kept gets the
    /// column, its runs' starts unknown.
    #[test]
    fn the_latest_for_a_session_is_of_its_mount_and_uid_only() {
        let db = TestDb::create();
        {
            let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
            c.batch_execute(
                "CREATE TABLE calls(
                   id BIGSERIAL PRIMARY KEY, origin TEXT NOT NULL,
                   started TEXT NOT NULL, finished TEXT,
                   pid BIGINT NOT NULL, uid BIGINT NOT NULL, session BIGINT NOT NULL,
                   command TEXT NOT NULL, path TEXT NOT NULL, op TEXT NOT NULL,
                   args TEXT NOT NULL, guard TEXT NOT NULL, status TEXT NOT NULL,
                   errno INTEGER NOT NULL DEFAULT 0, result TEXT NOT NULL DEFAULT '',
                   discovered TEXT NOT NULL DEFAULT '[]', seq BIGINT);
                 INSERT INTO calls(origin, started, pid, uid, session, command, path, op, args,
                   guard, status, seq)
                 VALUES ('a', '2026-01-01T00:00:00.000Z', 1, 0, 1, 'bash', '/t', 'close', '{}',
                   '', 'ok', 1);",
            )
            .unwrap();
        }
        let (a, _) = open(&db, "a");
        let (b, _) = open(&db, "b");
        let old = a.get(1).unwrap().unwrap();
        assert_eq!((old.session, old.session_start), (1, 0));
        let who = |session_start, uid| Caller {
            uid,
            session_start,
            ..caller()
        };
        let begin =
            |j: &PgJournal, c: &Caller| j.begin(c, "/t", "close", "{}", &"".into()).unwrap().id;
        let mine = begin(&a, &who(50, 0));
        let theirs = begin(&b, &who(60, 0));
        assert_eq!(
            a.get(mine).unwrap().unwrap().caller_session(),
            who(50, 0).own_session()
        );
        let latest =
            |j: &PgJournal, c: &Caller| j.latest_for("/t", "close", &c.own_session()).unwrap();
        assert_eq!(latest(&a, &who(50, 0)), Some(mine));
        // Another session of uid 0 on A: A's latest, never B's later call.
        assert_eq!(latest(&a, &who(70, 0)), Some(mine));
        assert_eq!(latest(&b, &who(50, 0)), Some(theirs));
        assert_eq!(latest(&a, &who(50, 1001)), None);
        assert_eq!(a.latest_for("/t", "close", &Session::NONE).unwrap(), None);
    }

    #[test]
    fn concurrent_writers_make_one_gapless_ordered_feed() {
        let db = TestDb::create();
        let journals: Vec<Arc<PgJournal>> = (0..4)
            .map(|i| Arc::new(open(&db, &format!("m{i}")).0))
            .collect();
        let threads: Vec<_> = journals
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let j = Arc::clone(j);
                std::thread::spawn(move || {
                    for k in 0..25 {
                        let id = j
                            .begin(&caller(), "/t", "comment", &format!("{i}/{k}"), &"".into())
                            .unwrap()
                            .id;
                        let ev = Event::of_run("call", "/t", "comment", id, "ok");
                        j.finish(id, "ok", 0, &"".into(), &[], &[ev]).unwrap();
                    }
                })
            })
            .collect();
        // A reader following the feed while it is written sees every event, in cursor
        // order and without a gap: an event that became visible after a later one would
        // show as a skipped cursor (it would never be read again).
        let reader = Arc::clone(&journals[0]);
        let follow = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let mut cursor = 0;
            let mut seen = Vec::new();
            while seen.len() < 100 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the feed stopped at cursor {cursor} after {} of 100 events",
                    seen.len()
                );
                for e in reader.events_after(cursor, 1000).unwrap() {
                    assert_eq!(
                        e.cursor,
                        cursor + 1,
                        "a gap in the feed after cursor {cursor}"
                    );
                    cursor = e.cursor;
                    seen.push((e.path.clone(), e.run.unwrap()));
                }
            }
            seen
        });
        for t in threads {
            t.join().unwrap();
        }
        let mut seen = follow.join().unwrap();
        let all = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!((all, seen.len()), (100, 100), "every call once in the feed");
    }

    /// An outcome that could not be recorded (the connection cut) is recorded once the
    /// database answers, with its events, once; a start whose answer was lost (its row
    /// written, its call never made) is settled `not_run`.
    #[test]
    fn what_could_not_be_recorded_is_recorded_when_the_database_answers() {
        let db = TestDb::create();
        let (j, _) = open(&db, "a");
        let id = j
            .begin(&caller(), "/t", "comment", "hi", &"allowed".into())
            .unwrap()
            .id;
        db.cut_connections();
        let ev = Event::of_run("call", "/t", "comment", 1, "ok");
        // Every connection of the pool was cut: the first finish fails with words.
        let failed = j.finish(id, "ok", 0, &"added".into(), &[], &[ev]);
        assert!(failed.is_err(), "the cut connection shows");
        // A start whose answer was lost: its row is there, the mount never heard of it.
        let mut c = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
        c.execute(
            "INSERT INTO calls(origin, started, pid, uid, session, command, path, op, args,
               guard, status, seq, token)
             VALUES ('a', '2026-01-01T00:00:00.000Z', 1, 0, 1, 'bash', '/t', 'comment', 'x',
               '', 'running', 2, 'lost-1')",
            &[],
        )
        .unwrap();
        j.keep_unrecorded(|u| u.starts.push(("lost-1".into(), std::time::Instant::now())));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let running: i64 = c
                .query_one("SELECT count(*) FROM calls WHERE status = 'running'", &[])
                .unwrap()
                .get(0);
            if running == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{running} runs still running"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let run = j.get(id).unwrap().unwrap();
        assert_eq!((run.status.as_str(), run.result.as_str()), ("ok", "added"));
        let lost: (String, i32) = {
            let r = c
                .query_one(
                    "SELECT status, errno FROM calls WHERE token = 'lost-1'",
                    &[],
                )
                .unwrap();
            (r.get(0), r.get(1))
        };
        assert_eq!(lost, (NOT_RUN.to_string(), libc::ECANCELED));
        let events: Vec<(String, Option<String>)> = j
            .events_after(0, 10)
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.status))
            .collect();
        assert_eq!(
            events,
            vec![
                ("call".to_string(), Some("ok".to_string())),
                ("call".to_string(), Some(NOT_RUN.to_string()))
            ]
        );
        // Recorded once: the run that ended is not changed by a late second try.
        j.keep_unrecorded(|u| {
            u.outcomes.push(Outcome {
                id,
                status: "error".into(),
                errno: 5,
                result: "late".into(),
                discovered: "[]".into(),
                events: "[]".into(),
            })
        });
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(j.get(id).unwrap().unwrap().result, "added");
    }

    #[test]
    fn one_decision_wins_across_mounts_and_expiry_is_taken_once() {
        let db = TestDb::create();
        let (a, _) = open(&db, "a");
        let (b, _) = open(&db, "b");
        let hold = |j: &PgJournal, expires: Option<Duration>| {
            let id = j
                .begin(&caller(), "/t", "merge", "{}", &"blocked".into())
                .unwrap()
                .id;
            j.finish(id, PENDING, libc::EINPROGRESS, &"waits".into(), &[], &[])
                .unwrap();
            let new = NewApproval {
                rule: 1,
                rule_text: "match \"t/ops/merge\"".into(),
                approvers: &[0],
                self_approve: false,
                expires_after: expires,
            };
            j.hold(
                id,
                &new,
                &Event::of_run(PENDING, "/t", "merge", id, PENDING),
            )
            .unwrap();
            id
        };
        let id = hold(&a, None);
        assert_eq!(b.pending_approvals(10).unwrap()[0].run, id);
        let who = Decider {
            uid: 0,
            pid: 9,
            session: 9,
            command: "wip approve".into(),
        };
        let change = RunChange {
            status: RUNNING,
            errno: 0,
            result: None,
            guard: Some("allowed".into()),
        };
        assert!(b.decide(id, "approved", &who, None, &change, &[]).unwrap());
        assert!(!a
            .decide(id, "denied", &who, Some(&"late".into()), &change, &[])
            .unwrap());
        assert_eq!(a.approval(id).unwrap().unwrap().decider, Some(who.clone()));
        assert_eq!(a.get(id).unwrap().unwrap().status, RUNNING);

        let due = hold(&a, Some(Duration::from_millis(1)));
        let later = hold(&b, Some(Duration::from_secs(3600)));
        std::thread::sleep(Duration::from_millis(20));
        let mut expired = a.expire_due(&|_| "expired".into()).unwrap();
        expired.extend(b.expire_due(&|_| "expired".into()).unwrap());
        assert_eq!(
            expired.iter().map(|x| x.approval.run).collect::<Vec<_>>(),
            vec![due]
        );
        assert_eq!(b.get(due).unwrap().unwrap().status, EXPIRED);
        assert_eq!(a.get(later).unwrap().unwrap().status, PENDING);
        let next = a.next_expiry().unwrap().unwrap();
        assert!(next > Duration::from_secs(3000) && next <= Duration::from_secs(3600));

        // At once, for real: two mounts decide each of 20 runs at the same moment (a
        // barrier lets them go together), and four mounts expire 20 due runs together.
        let (a, b) = (Arc::new(a), Arc::new(b));
        let ids: Vec<i64> = (0..20).map(|_| hold(&a, None)).collect();
        for id in ids {
            let gate = Arc::new(std::sync::Barrier::new(2));
            let racers: Vec<_> = [(Arc::clone(&a), "approved"), (Arc::clone(&b), "denied")]
                .into_iter()
                .map(|(j, state)| {
                    let (gate, who) = (Arc::clone(&gate), who.clone());
                    std::thread::spawn(move || {
                        let change = RunChange {
                            status: RUNNING,
                            errno: 0,
                            result: None,
                            guard: Some("allowed".into()),
                        };
                        gate.wait();
                        j.decide(id, state, &who, None, &change, &[]).unwrap()
                    })
                })
                .collect();
            let won: Vec<bool> = racers.into_iter().map(|t| t.join().unwrap()).collect();
            assert_eq!(won.iter().filter(|w| **w).count(), 1, "run {id}: {won:?}");
        }
        let due: Vec<i64> = (0..20)
            .map(|_| hold(&a, Some(Duration::from_millis(1))))
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        let mounts: Vec<Arc<PgJournal>> = (0..4)
            .map(|i| Arc::new(open(&db, &format!("x{i}")).0))
            .collect();
        let gate = Arc::new(std::sync::Barrier::new(mounts.len()));
        let takers: Vec<_> = mounts
            .iter()
            .map(|j| {
                let (j, gate) = (Arc::clone(j), Arc::clone(&gate));
                std::thread::spawn(move || {
                    gate.wait();
                    j.expire_due(&|_| "expired".into()).unwrap()
                })
            })
            .collect();
        let mut taken: Vec<i64> = takers
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .map(|x| x.approval.run)
            .collect();
        taken.sort();
        assert_eq!(taken, due, "each due run expired exactly once");
    }

    #[test]
    fn a_lost_connection_is_eio_with_words_and_the_next_call_reconnects() {
        let db = TestDb::create();
        let (j, _) = open(&db, "a");
        j.count().unwrap();
        db.cut_connections();
        // A read changes nothing: it is read again on a new connection.
        assert_eq!(j.count().unwrap(), 0);
        let mut failed = None;
        // The pool holds one or more connections, each cut: every write on a cut one
        // fails with words; then the pool connects again.
        let event = Event::of_run("call", "/t", "comment", 1, "ok");
        for _ in 0..32 {
            match j.record_events(std::slice::from_ref(&event)) {
                Err(e) => failed = Some(e),
                Ok(()) => break,
            }
        }
        // A StateError, which the world makes EIO (`world::error`'s tests).
        let e = failed.expect("a cut connection fails once");
        let words = e.to_string();
        assert!(
            words.contains("shared state database") && words.contains("reconnects"),
            "{words}"
        );
        assert_eq!(j.count().unwrap(), 0);
    }
}
