//! Where the journal lives: SQLite in the state directory (the embedded default, one
//! mount) or PostgreSQL (shared by every mount of the world). Both engines keep the same
//! tables and answer the same calls; this is the one place that chooses.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::pg::PgJournal;
use super::{Approval, Began, Decider, Event, Expired, NewApproval, Run, RunChange, SqliteJournal};
use crate::secrets::scrub;
use crate::world::error::WorldResult;
use crate::world::host::Caller;
use crate::world::shared::SharedDb;

pub struct Journal {
    store: Store,
}

enum Store {
    Sqlite(Box<SqliteJournal>),
    Postgres(PgJournal),
}

/// The same call on whichever engine holds the journal.
macro_rules! on_store {
    ($self:ident, $j:ident => $call:expr) => {
        match &$self.store {
            Store::Sqlite($j) => $call,
            Store::Postgres($j) => $call,
        }
    };
}

impl Journal {
    /// Open (or create) the SQLite journal and mark calls that were running at a crash.
    pub fn open(path: &Path) -> WorldResult<(Journal, Vec<i64>)> {
        let (j, n) = SqliteJournal::open(path)?;
        Ok((
            Journal {
                store: Store::Sqlite(Box::new(j)),
            },
            n,
        ))
    }

    /// Open the journal shared on PostgreSQL; only this mount's (`origin`'s) cut-off calls
    /// are marked interrupted, since other mounts may be running theirs right now.
    pub fn open_shared(db: Arc<SharedDb>, origin: &str) -> WorldResult<(Journal, Vec<i64>)> {
        let (j, n) = PgJournal::open(db, origin)?;
        Ok((
            Journal {
                store: Store::Postgres(j),
            },
            n,
        ))
    }

    /// This journal's identity: hosts that keep a run's id with its change name the run
    /// `ID:RUN` (see `Caller::run`).
    pub fn id(&self) -> &str {
        on_store!(self, j => j.id())
    }

    /// Settle a run marked interrupted at start-up, as its host knows it ended; `false`
    /// when it was no longer interrupted.
    pub fn settle(&self, id: i64, status: &str, errno: i32, result: &str) -> WorldResult<bool> {
        let result = scrub(result);
        on_store!(self, j => j.settle(id, status, errno, &result))
    }

    /// Record a call before it runs; returns its run id and its number among its op's runs.
    pub fn begin(
        &self,
        caller: &Caller,
        path: &str,
        op: &str,
        args: &str,
        guard: &str,
    ) -> WorldResult<Began> {
        // What the journal keeps is printed again later: no secret of the daemon's in it.
        let guard = scrub(guard);
        on_store!(self, j => j.begin(caller, path, op, args, &guard))
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
        let result = scrub(result);
        on_store!(self, j => j.finish(id, status, errno, &result, discovered, events))
    }

    /// Record changes that no call made (a host's own notifications), in one transaction.
    pub fn record_events(&self, events: &[Event]) -> WorldResult<()> {
        on_store!(self, j => j.record_events(events))
    }

    /// Events after `cursor`, oldest first, at most `limit`.
    pub fn events_after(&self, cursor: i64, limit: usize) -> WorldResult<Vec<Event>> {
        on_store!(self, j => j.events_after(cursor, limit))
    }

    /// When the newest event after `cursor` happened (`None`: there is none).
    pub fn last_event_at(&self, cursor: i64) -> WorldResult<Option<String>> {
        on_store!(self, j => j.last_event_at(cursor))
    }

    /// The cursor of the newest event (0 if none).
    pub fn last_event(&self) -> WorldResult<i64> {
        on_store!(self, j => j.last_event())
    }

    pub fn get(&self, id: i64) -> WorldResult<Option<Run>> {
        on_store!(self, j => j.get(id))
    }

    /// Runs of one op of one entry, newest first.
    pub fn runs_of(&self, path: &str, op: &str, limit: usize) -> WorldResult<Vec<Began>> {
        on_store!(self, j => j.runs_of(path, op, limit))
    }

    /// The journal id of run number `seq` of one op of one entry (`runs/SEQ`).
    pub fn numbered(&self, path: &str, op: &str, seq: i64) -> WorldResult<Option<i64>> {
        on_store!(self, j => j.numbered(path, op, seq))
    }

    /// Runs still running (every mount's), oldest first.
    pub fn running_runs(&self, limit: usize) -> WorldResult<Vec<Run>> {
        on_store!(self, j => j.running_runs(limit))
    }

    /// The latest run of one op of one entry.
    pub fn latest(&self, path: &str, op: &str) -> WorldResult<Option<i64>> {
        on_store!(self, j => j.latest(path, op))
    }

    /// Newest calls first.
    pub fn recent(&self, limit: usize) -> WorldResult<Vec<Run>> {
        on_store!(self, j => j.recent(limit))
    }

    /// Newest calls first, `args` and `result` cut to `cut` characters by the database.
    pub fn recent_brief(&self, limit: usize, cut: usize) -> WorldResult<Vec<Run>> {
        on_store!(self, j => j.recent_brief(limit, cut))
    }

    pub fn count(&self) -> WorldResult<i64> {
        on_store!(self, j => j.count())
    }

    /// How many calls are running now (begun, not finished).
    pub fn running(&self) -> WorldResult<i64> {
        on_store!(self, j => j.running())
    }

    /// The journal's size in bytes.
    pub fn bytes(&self) -> WorldResult<i64> {
        on_store!(self, j => j.bytes())
    }

    /// Hold run `run` for a person's sign-off, with its `pending` event.
    pub fn hold(&self, run: i64, new: &NewApproval<'_>, event: &Event) -> WorldResult<Approval> {
        let rule_text = scrub(new.rule_text);
        let new = NewApproval {
            rule_text: &rule_text,
            ..*new
        };
        on_store!(self, j => j.hold(run, &new, event))
    }

    /// The approval record of a run, if it asked for one.
    pub fn approval(&self, run: i64) -> WorldResult<Option<Approval>> {
        on_store!(self, j => j.approval(run))
    }

    /// Runs waiting for a decision, oldest first, at most `limit`.
    pub fn pending_approvals(&self, limit: usize) -> WorldResult<Vec<Approval>> {
        on_store!(self, j => j.pending_approvals(limit))
    }

    /// Record a decision on a pending run, the run's change and the events, in one
    /// transaction; `false` (nothing written) when the run is no longer pending.
    pub fn decide(
        &self,
        run: i64,
        state: &str,
        who: &Decider,
        reason: Option<&str>,
        change: &RunChange<'_>,
        events: &[Event],
    ) -> WorldResult<bool> {
        let reason = reason.map(scrub);
        let result = change.result.map(scrub);
        let guard = change.guard.map(scrub);
        let change = RunChange {
            result: result.as_deref(),
            guard: guard.as_deref(),
            ..*change
        };
        on_store!(self, j => j.decide(run, state, who, reason.as_deref(), &change, events))
    }

    /// Expire the pending runs whose time is up; returns what expired.
    pub fn expire_due(&self, result_of: impl Fn(&Approval) -> String) -> WorldResult<Vec<Expired>> {
        let result_of = |a: &Approval| scrub(&result_of(a)).into_owned();
        on_store!(self, j => j.expire_due(result_of))
    }

    /// How long until the next pending run expires (zero if one is due), if any will.
    pub fn next_expiry(&self) -> WorldResult<Option<Duration>> {
        on_store!(self, j => j.next_expiry())
    }
}
