//! What a world remembers, behind one trait: every call (the journal: runs, their
//! outcomes, the change feed), the runs held for a person's sign-off, and the known world.
//! `sqlite.rs` keeps it in the state directory (the embedded default, one mount),
//! `postgres.rs` in a PostgreSQL database every mount of the world shares (`pg/` holds
//! its connection pool and TLS). A new engine is one file implementing `Journal`;
//! nothing else chooses between engines.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::host::{Caller, ErrorSource, Session};
use crate::secrets::scrub;

mod approval;
pub mod known;
pub mod pg;
mod postgres;
mod sqlite;

pub use approval::{Approval, Decider, Expired, NewApproval, RunChange, DENIED, EXPIRED, PENDING};
pub use known::{Known, KnownEntry};

/// Status of a call cut off by a crash; set on the next mount.
pub const INTERRUPTED: &str = "interrupted";
/// A run cut off by a crash whose host says its change never committed: nothing changed.
pub const NOT_RUN: &str = "not_run";
/// The errno of a run cut off by a crash: the backend's, EIO (the world's `Backend` kind;
/// `world::error`'s tests hold the two to the same value).
pub const INTERRUPTED_ERRNO: i32 = libc::EIO;
/// The errno of a pending run nobody decided in time: ETIMEDOUT (the world's `TimedOut`).
pub const EXPIRED_ERRNO: i32 = libc::ETIMEDOUT;
/// The result of a run marked interrupted at start-up.
pub const INTERRUPTED_WORDS: &str = "error: interrupted: the daemon stopped before this call finished; check the object before calling again\n";

/// Why the state failed, in the words a user reads, with the database's error kept as
/// its cause. Storage failing is always the backend's doing: the world makes it EIO.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct StateError {
    message: String,
    #[source]
    source: Option<ErrorSource>,
}

impl StateError {
    pub fn new(message: impl Into<String>) -> Self {
        StateError {
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `source`.
    pub fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(ErrorSource(Arc::new(source)));
        self
    }

    /// Its words and its cause, for an error of a layer above to carry on.
    pub fn into_parts(self) -> (String, Option<ErrorSource>) {
        (self.message, self.source)
    }
}

pub type StateResult<T> = Result<T, StateError>;

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
    /// When that session began (see `crate::host::Session`); 0 for runs of journals
    /// from before it was kept.
    pub session_start: u64,
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

impl Run {
    /// The session that made the call.
    pub fn caller_session(&self) -> crate::host::Session {
        crate::host::Session {
            number: self.session,
            start: self.session_start,
            uid: self.uid,
        }
    }
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

/// Text the journal keeps and later prints (a guard, a result, a rule, a reason), with
/// every secret of the daemon's taken out. Only `Clean::new` makes one, so no engine is
/// handed text that was not scrubbed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clean<'a>(Cow<'a, str>);

impl<'a> Clean<'a> {
    pub fn new(text: &'a str) -> Clean<'a> {
        Clean(scrub(text))
    }

    /// `new`, for text made on the spot.
    pub fn owned(text: String) -> Clean<'static> {
        let clean = match scrub(&text) {
            Cow::Borrowed(_) => None,
            Cow::Owned(scrubbed) => Some(scrubbed),
        };
        Clean(Cow::Owned(clean.unwrap_or(text)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'a> From<&'a str> for Clean<'a> {
    fn from(text: &'a str) -> Clean<'a> {
        Clean::new(text)
    }
}

/// A run that ended as it was made (a change through a working tree), to be recorded
/// whole: who, where, which op, its arguments and outcome.
#[derive(Clone, Debug)]
pub struct Ended {
    pub caller: Caller,
    /// World path of the entry the op belongs to.
    pub path: String,
    pub op: String,
    pub args: String,
    pub guard: String,
    pub status: String,
    pub errno: i32,
    pub result: String,
}

/// The range of world paths below `prefix` (`/files/src` → from `/files/src/` up to
/// `/files/src0`, the next byte after `/`), for a query an index can answer.
pub fn below(prefix: &str) -> (String, String) {
    let base = prefix.trim_end_matches('/');
    (format!("{base}/"), format!("{base}0"))
}

/// The journal, the approvals and the known world of one world, on one engine. Every
/// method is called from many threads at once.
pub trait Journal: Send + Sync {
    /// Record runs that already ended, each with its `call` event, in one transaction
    /// where the engine allows: their ids and numbers, in order. (By default one begin and
    /// one finish each.)
    fn record_ended(&self, runs: &[Ended]) -> StateResult<Vec<Began>> {
        runs.iter()
            .map(|r| {
                let began =
                    self.begin(&r.caller, &r.path, &r.op, &r.args, &Clean::new(&r.guard))?;
                let event = Event::of_run("call", &r.path, &r.op, began.seq, &r.status);
                self.finish(
                    began.id,
                    &r.status,
                    r.errno,
                    &Clean::new(&r.result),
                    &[],
                    &[event],
                )?;
                Ok(began)
            })
            .collect()
    }

    /// Whether any run was recorded at the entry `path`, or at an entry below the world
    /// path `under` (a removed folder's files).
    fn ran_at(&self, path: &str, under: &str) -> StateResult<bool>;

    /// Make what was recorded so far durable on disk (a caller's `fsync`). Engines whose
    /// commits are durable already need nothing.
    fn sync(&self) -> StateResult<()> {
        Ok(())
    }

    /// This journal's identity: hosts that keep a run's id with its change name the run
    /// `ID:RUN` (see `Caller::run`).
    fn id(&self) -> &str;

    /// Settle a run marked interrupted at start-up, as its host knows it ended (`ok` with
    /// its result, or `not_run`); `false` when it was no longer interrupted.
    fn settle(&self, id: i64, status: &str, errno: i32, result: &Clean) -> StateResult<bool>;

    /// Record a call before it runs; returns its run id and its number among its op's runs.
    fn begin(
        &self,
        caller: &Caller,
        path: &str,
        op: &str,
        args: &str,
        guard: &Clean,
    ) -> StateResult<Began>;

    /// Record the outcome of a call and the changes it made, in one transaction.
    fn finish(
        &self,
        id: i64,
        status: &str,
        errno: i32,
        result: &Clean,
        discovered: &[String],
        events: &[Event],
    ) -> StateResult<()>;

    /// Record changes that no call made (a host's own notifications), in one transaction.
    fn record_events(&self, events: &[Event]) -> StateResult<()>;

    /// Events after `cursor`, oldest first, at most `limit`.
    fn events_after(&self, cursor: i64, limit: usize) -> StateResult<Vec<Event>>;

    /// When the newest event after `cursor` happened (`None`: there is none).
    fn last_event_at(&self, cursor: i64) -> StateResult<Option<String>>;

    /// The cursor of the newest event (0 if none).
    fn last_event(&self) -> StateResult<i64>;

    fn get(&self, id: i64) -> StateResult<Option<Run>>;

    /// Runs of one op of one entry, newest first: (id, number).
    fn runs_of(&self, path: &str, op: &str, limit: usize) -> StateResult<Vec<Began>>;

    /// The journal id of run number `seq` of one op of one entry (`runs/SEQ`).
    fn numbered(&self, path: &str, op: &str, seq: i64) -> StateResult<Option<i64>>;

    /// The latest run of one op of one entry.
    fn latest(&self, path: &str, op: &str) -> StateResult<Option<i64>> {
        Ok(self.runs_of(path, op, 1)?.first().map(|b| b.id))
    }

    /// The run `session` reads in an op's `result` when this mount has no call of it in
    /// memory: the session's own latest call, else the latest call of its uid; of this
    /// mount only, never another mount's sharing the journal.
    fn latest_for(&self, path: &str, op: &str, session: &Session) -> StateResult<Option<i64>>;

    /// Runs still running (every mount's), oldest first, at most `limit`.
    fn running_runs(&self, limit: usize) -> StateResult<Vec<Run>>;

    /// Newest calls first.
    fn recent(&self, limit: usize) -> StateResult<Vec<Run>>;

    /// Runs from journal id `first` on, oldest first, at most `limit`, at paths in either
    /// range (see `below`): a working tree's runs since a point. A shared journal answers
    /// this mount's runs only (a working tree is one mount's).
    fn runs_from(
        &self,
        first: i64,
        a: (&str, &str),
        b: (&str, &str),
        limit: usize,
    ) -> StateResult<Vec<Run>>;

    /// The first run started at or after `time` (ISO 8601 UTC, as runs keep it).
    fn first_run_at(&self, time: &str) -> StateResult<Option<i64>>;

    /// Newest calls first, `args` and `result` cut to their first `cut` characters by the
    /// database itself, so a view of recent calls costs the same whatever they carried.
    fn recent_brief(&self, limit: usize, cut: usize) -> StateResult<Vec<Run>>;

    fn count(&self) -> StateResult<i64>;

    /// How many calls are running now (begun, not finished).
    fn running(&self) -> StateResult<i64>;

    /// The database's size in bytes.
    fn bytes(&self) -> StateResult<i64>;

    /// Hold run `run` for a person's sign-off, with its `pending` event.
    fn hold(&self, run: i64, new: &NewApproval<'_>, event: &Event) -> StateResult<Approval>;

    /// The approval record of a run, if it asked for one.
    fn approval(&self, run: i64) -> StateResult<Option<Approval>>;

    /// Runs waiting for a decision, oldest first, at most `limit`.
    fn pending_approvals(&self, limit: usize) -> StateResult<Vec<Approval>>;

    /// Record a decision on a pending run, the run's change and the events, in one
    /// transaction; `false` (nothing written) when the run is no longer pending.
    fn decide(
        &self,
        run: i64,
        state: &str,
        who: &Decider,
        reason: Option<&Clean>,
        change: &RunChange<'_>,
        events: &[Event],
    ) -> StateResult<bool>;

    /// Expire the pending runs whose time is up, each with the result `result_of` gives;
    /// returns what expired.
    fn expire_due(
        &self,
        result_of: &dyn Fn(&Approval) -> Clean<'static>,
    ) -> StateResult<Vec<Expired>>;

    /// How long until the next pending run expires (zero if one is due), if any will.
    fn next_expiry(&self) -> StateResult<Option<Duration>>;

    /// Write known entries (one batch of the known world's writer), each path once.
    fn write_known(&self, entries: &[KnownEntry]) -> StateResult<()>;

    /// Indexable known entries whose path or description holds every word (any case).
    fn locate(&self, words: &[String], limit: usize) -> StateResult<Vec<KnownEntry>>;

    /// Every known path of the object with this ref.
    fn paths_of(&self, reference: &str) -> StateResult<Vec<String>>;

    /// The most recently seen known entries, newest first, and how many are known in all.
    fn known_recent(&self, limit: usize) -> StateResult<(Vec<KnownEntry>, i64)>;
}

/// A world's state, opened: the journal, the runs a crash cut off (now `interrupted`),
/// and the shared database when state is on PostgreSQL.
pub struct Opened {
    pub journal: Arc<dyn Journal>,
    pub interrupted: Vec<i64>,
    pub shared: Option<Arc<pg::SharedDb>>,
}

/// Open the state: SQLite in `state_dir`, or the PostgreSQL database `url` names (where
/// only this mount's, `origin`'s, cut-off calls are marked interrupted: other mounts may
/// be running theirs right now).
pub fn open(state_dir: &Path, url: Option<&str>, origin: &str) -> StateResult<Opened> {
    match url {
        None => {
            let (j, interrupted) = sqlite::SqliteJournal::open(&state_dir.join("journal.db"))?;
            Ok(Opened {
                journal: Arc::new(j),
                interrupted,
                shared: None,
            })
        }
        Some(url) => {
            let db = Arc::new(pg::SharedDb::connect(url)?);
            let (j, interrupted) = postgres::PgJournal::open(Arc::clone(&db), origin)?;
            Ok(Opened {
                journal: Arc::new(j),
                interrupted,
                shared: Some(db),
            })
        }
    }
}

#[cfg(test)]
pub(crate) use postgres::PgJournal;
/// A result row as either engine gives it, read by column: the one mapping of a row to a
/// `Run` or an `Approval` (`run_of`, `approval_of`) reads through it.
trait Columns {
    type Error;
    fn int(&self, i: usize) -> Result<Option<i64>, Self::Error>;
    fn text(&self, i: usize) -> Result<Option<String>, Self::Error>;
    fn flag(&self, i: usize) -> Result<bool, Self::Error>;
}

/// The columns `SELECT id, started, finished, pid, uid, session, command, path, op, args,
/// guard, status, errno, result, discovered, seq, session_start` gives, as a run.
fn run_of<R: Columns>(r: &R) -> Result<Run, R::Error> {
    let int = |i| -> Result<i64, R::Error> { Ok(r.int(i)?.unwrap_or(0)) };
    let text = |i| -> Result<String, R::Error> { Ok(r.text(i)?.unwrap_or_default()) };
    Ok(Run {
        id: int(0)?,
        started: text(1)?,
        finished: r.text(2)?,
        pid: int(3)? as u32,
        uid: int(4)? as u32,
        session: int(5)? as u32,
        command: text(6)?,
        path: text(7)?,
        op: text(8)?,
        args: text(9)?,
        guard: text(10)?,
        status: text(11)?,
        errno: int(12)? as i32,
        result: text(13)?,
        discovered: serde_json::from_str(&text(14)?).unwrap_or_default(),
        seq: int(15)?,
        session_start: int(16)?.max(0) as u64,
    })
}

/// The columns `APPROVAL_COLUMNS` names, as an approval.
fn approval_of<R: Columns>(r: &R) -> Result<Approval, R::Error> {
    let text = |i| -> Result<String, R::Error> { Ok(r.text(i)?.unwrap_or_default()) };
    Ok(Approval {
        run: r.int(0)?.unwrap_or(0),
        rule: r.int(1)?.unwrap_or(0) as usize,
        rule_text: text(2)?,
        approvers: serde_json::from_str(&text(3)?).unwrap_or_default(),
        self_approve: r.flag(4)?,
        requested: text(5)?,
        expires: r.text(6)?,
        state: text(7)?,
        decided_at: r.text(8)?,
        decider: match r.int(9)? {
            Some(uid) => Some(Decider {
                uid: uid as u32,
                pid: r.int(10)?.unwrap_or(0) as u32,
                session: r.int(11)?.unwrap_or(0) as u32,
                command: r.text(12)?.unwrap_or_default(),
            }),
            None => None,
        },
        reason: r.text(13)?,
    })
}

/// What an approvals row holds, in the order `approval_of` reads it.
const APPROVAL_COLUMNS: &str =
    "run, rule, rule_text, approvers, self_approve, requested, expires, state,
    decided_at, decider_uid, decider_pid, decider_session, decider_command, reason";

#[cfg(test)]
pub(crate) use sqlite::SqliteJournal;
