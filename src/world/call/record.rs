//! The working tree's runs, recorded off the request path (group commit): a change through
//! the mount is queued as a run that already ended, and the queue is written in one
//! transaction per moment (`WINDOW`) by one thread. `Grouped` wraps the journal, and every
//! other journal method writes what is queued first, so nothing ever reads around a queued
//! run (a `runs/` listing right after a write shows it). A caller's `fsync` writes the
//! queue and syncs the journal: what a daemon crash can lose is the last window's runs,
//! never a run an `fsync` returned after.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::host::{Caller, Session};
use crate::state::{
    Approval, Began, Clean, Decider, Ended, Event, Expired, Journal, KnownEntry, NewApproval, Run,
    RunChange, StateResult,
};

/// How long the writer waits for more runs after the first of a batch.
const WINDOW: Duration = Duration::from_millis(2);
/// The most runs one transaction writes.
const BATCH_MAX: usize = 2048;
/// How long a reader waits for the queue to be written before it reads anyway.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// How long a run is held back when what it made may vanish again unseen (an empty file
/// just created: a lock file, an editor's probe).
pub const HOLD: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Queue {
    pending: Vec<Ended>,
    /// Runs held back (see `Grouped::hold`), with when they are due.
    held: Vec<(Ended, std::time::Instant)>,
    /// Runs queued, and runs written (or given up on), since the start.
    queued: u64,
    done: u64,
    stop: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    /// The writer waits on it for runs; readers for `done` to reach theirs.
    cv: Condvar,
    /// Runs that could not be written (the journal failed).
    lost: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Queue {
    /// Queue a run (after a held run of the same entry, which comes first).
    fn queue(&mut self, run: Ended) {
        if let Some(i) = self.held.iter().position(|(h, _)| h.path == run.path) {
            let (held, _) = self.held.remove(i);
            self.pending.push(held);
            self.queued += 1;
        }
        self.pending.push(run);
        self.queued += 1;
    }

    /// Queue the held runs that are due (all of them with `all`).
    fn release_held(&mut self, all: bool) {
        let now = std::time::Instant::now();
        let mut i = 0;
        while i < self.held.len() {
            if all || self.held[i].1 <= now {
                let (run, _) = self.held.remove(i);
                self.pending.push(run);
                self.queued += 1;
            } else {
                i += 1;
            }
        }
    }
}

/// The journal with a queue of ended runs in front of it.
pub struct Grouped {
    inner: Arc<dyn Journal>,
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Grouped {
    pub fn new(inner: Arc<dyn Journal>) -> Grouped {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            cv: Condvar::new(),
            lost: AtomicU64::new(0),
        });
        let (journal, state) = (Arc::clone(&inner), Arc::clone(&shared));
        let writer = std::thread::Builder::new()
            .name("journal-group".into())
            .spawn(move || write_loop(journal.as_ref(), &state))
            .map_err(|e| tracing::warn!("no journal writer thread ({e}): runs are written at once"))
            .ok();
        Grouped {
            inner,
            shared,
            writer: Mutex::new(writer),
        }
    }

    /// Queue a run that ended (it is written within `WINDOW`, or before anything reads).
    pub fn push(&self, run: Ended) {
        let has_writer = self.writer.lock().map(|w| w.is_some()).unwrap_or(false);
        if !has_writer {
            if let Err(e) = self.inner.record_ended(std::slice::from_ref(&run)) {
                self.shared.lost.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    "journal: a run of {} on {} not recorded: {e}",
                    run.op,
                    run.path
                );
            }
            return;
        }
        let mut q = self.shared.lock();
        q.queue(run);
        self.shared.cv.notify_all();
    }

    /// Hold a run back for `HOLD`: written then, or as soon as another run of its entry
    /// or a reader comes, unless `retract` takes it back first (what it made vanished
    /// again, unseen: no change, no run).
    pub fn hold(&self, run: Ended) {
        let mut q = self.shared.lock();
        q.held.push((run, std::time::Instant::now() + HOLD));
        self.shared.cv.notify_all();
    }

    /// Queue a held run of the entry `path` now, if there is one (what follows on another
    /// path must come after it: a rename of the file it made).
    pub fn release(&self, path: &str) {
        let mut q = self.shared.lock();
        if let Some(i) = q.held.iter().position(|(h, _)| h.path == path) {
            let (run, _) = q.held.remove(i);
            q.pending.push(run);
            q.queued += 1;
            self.shared.cv.notify_all();
        }
    }

    /// Whether a run of `op` on the entry `path` is held back now.
    pub fn holds(&self, path: &str, op: &str) -> bool {
        self.shared
            .lock()
            .held
            .iter()
            .any(|(h, _)| h.path == path && h.op == op)
    }

    /// Take back a held run of `op` on the entry `path`; whether there was one.
    pub fn retract(&self, path: &str, op: &str) -> bool {
        let mut q = self.shared.lock();
        match q
            .held
            .iter()
            .position(|(h, _)| h.path == path && h.op == op)
        {
            Some(i) => {
                q.held.remove(i);
                true
            }
            None => false,
        }
    }

    /// Wait until every run queued before now is written.
    pub fn flush(&self) {
        let mut q = self.shared.lock();
        q.release_held(true);
        let target = q.queued;
        if q.done >= target {
            return;
        }
        self.shared.cv.notify_all();
        let deadline = std::time::Instant::now() + FLUSH_WAIT;
        while q.done < target && !q.stop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                tracing::warn!("journal: the queued runs are slow to be written; reading anyway");
                return;
            }
            q = match self.shared.cv.wait_timeout(q, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// How many queued runs the journal could not take.
    pub fn lost(&self) -> u64 {
        self.shared.lost.load(Ordering::Relaxed)
    }
}

impl Drop for Grouped {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.cv.notify_all();
        if let Some(w) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            let _ = w.join();
        }
    }
}

fn write_loop(journal: &dyn Journal, shared: &Shared) {
    loop {
        let batch = {
            let mut q = shared.lock();
            loop {
                let stopping = q.stop;
                q.release_held(stopping);
                if !q.pending.is_empty() || q.stop {
                    break;
                }
                // Asleep until a run comes or the first held one is due.
                let due = q.held.iter().map(|(_, at)| *at).min();
                q = match due {
                    Some(at) => {
                        let wait = at.saturating_duration_since(std::time::Instant::now());
                        match shared.cv.wait_timeout(q, wait) {
                            Ok((g, _)) => g,
                            Err(p) => p.into_inner().0,
                        }
                    }
                    None => match shared.cv.wait(q) {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    },
                };
            }
            if q.pending.is_empty() && q.stop {
                return;
            }
            // A moment for the rest of a burst (`tar x` makes four runs a file).
            if !q.stop && q.pending.len() < BATCH_MAX {
                drop(q);
                std::thread::sleep(WINDOW);
                q = shared.lock();
            }
            let n = q.pending.len().min(BATCH_MAX);
            q.pending.drain(..n).collect::<Vec<_>>()
        };
        if let Err(e) = journal.record_ended(&batch) {
            shared.lost.fetch_add(batch.len() as u64, Ordering::Relaxed);
            tracing::error!(
                runs = batch.len(),
                "journal: changes through the mount not recorded: {e}"
            );
        }
        let mut q = shared.lock();
        q.done += batch.len() as u64;
        shared.cv.notify_all();
    }
}

/// Every other method: what is queued is written first, then the journal answers.
impl Journal for Grouped {
    fn record_ended(&self, runs: &[Ended]) -> StateResult<Vec<Began>> {
        self.flush();
        self.inner.record_ended(runs)
    }

    fn ran_at(&self, path: &str, under: &str) -> StateResult<bool> {
        self.flush();
        self.inner.ran_at(path, under)
    }

    fn sync(&self) -> StateResult<()> {
        self.flush();
        self.inner.sync()
    }

    fn id(&self) -> &str {
        self.inner.id()
    }

    fn settle(&self, id: i64, status: &str, errno: i32, result: &Clean) -> StateResult<bool> {
        self.flush();
        self.inner.settle(id, status, errno, result)
    }

    fn begin(
        &self,
        caller: &Caller,
        path: &str,
        op: &str,
        args: &str,
        guard: &Clean,
    ) -> StateResult<Began> {
        self.flush();
        self.inner.begin(caller, path, op, args, guard)
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
        self.flush();
        self.inner
            .finish(id, status, errno, result, discovered, events)
    }

    fn record_events(&self, events: &[Event]) -> StateResult<()> {
        self.flush();
        self.inner.record_events(events)
    }

    fn events_after(&self, cursor: i64, limit: usize) -> StateResult<Vec<Event>> {
        self.flush();
        self.inner.events_after(cursor, limit)
    }

    fn last_event_at(&self, cursor: i64) -> StateResult<Option<String>> {
        self.flush();
        self.inner.last_event_at(cursor)
    }

    fn last_event(&self) -> StateResult<i64> {
        self.flush();
        self.inner.last_event()
    }

    fn get(&self, id: i64) -> StateResult<Option<Run>> {
        self.flush();
        self.inner.get(id)
    }

    fn runs_of(&self, path: &str, op: &str, limit: usize) -> StateResult<Vec<Began>> {
        self.flush();
        self.inner.runs_of(path, op, limit)
    }

    fn numbered(&self, path: &str, op: &str, seq: i64) -> StateResult<Option<i64>> {
        self.flush();
        self.inner.numbered(path, op, seq)
    }

    fn latest(&self, path: &str, op: &str) -> StateResult<Option<i64>> {
        self.flush();
        self.inner.latest(path, op)
    }

    fn latest_for(&self, path: &str, op: &str, session: &Session) -> StateResult<Option<i64>> {
        self.flush();
        self.inner.latest_for(path, op, session)
    }

    fn running_runs(&self, limit: usize) -> StateResult<Vec<Run>> {
        self.flush();
        self.inner.running_runs(limit)
    }

    fn recent(&self, limit: usize) -> StateResult<Vec<Run>> {
        self.flush();
        self.inner.recent(limit)
    }

    fn runs_from(
        &self,
        first: i64,
        a: (&str, &str),
        b: (&str, &str),
        limit: usize,
    ) -> StateResult<Vec<Run>> {
        self.flush();
        self.inner.runs_from(first, a, b, limit)
    }

    fn first_run_at(&self, time: &str) -> StateResult<Option<i64>> {
        self.flush();
        self.inner.first_run_at(time)
    }

    fn recent_brief(&self, limit: usize, cut: usize) -> StateResult<Vec<Run>> {
        self.flush();
        self.inner.recent_brief(limit, cut)
    }

    fn count(&self) -> StateResult<i64> {
        self.flush();
        self.inner.count()
    }

    fn running(&self) -> StateResult<i64> {
        self.flush();
        self.inner.running()
    }

    fn bytes(&self) -> StateResult<i64> {
        self.inner.bytes()
    }

    fn hold(&self, run: i64, new: &NewApproval<'_>, event: &Event) -> StateResult<Approval> {
        self.flush();
        self.inner.hold(run, new, event)
    }

    fn approval(&self, run: i64) -> StateResult<Option<Approval>> {
        self.inner.approval(run)
    }

    fn pending_approvals(&self, limit: usize) -> StateResult<Vec<Approval>> {
        self.inner.pending_approvals(limit)
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
        self.flush();
        self.inner.decide(run, state, who, reason, change, events)
    }

    fn expire_due(
        &self,
        result_of: &dyn Fn(&Approval) -> Clean<'static>,
    ) -> StateResult<Vec<Expired>> {
        self.flush();
        self.inner.expire_due(result_of)
    }

    fn next_expiry(&self) -> StateResult<Option<Duration>> {
        self.inner.next_expiry()
    }

    fn write_known(&self, entries: &[KnownEntry]) -> StateResult<()> {
        self.inner.write_known(entries)
    }

    fn locate(&self, words: &[String], limit: usize) -> StateResult<Vec<KnownEntry>> {
        self.inner.locate(words, limit)
    }

    fn paths_of(&self, reference: &str) -> StateResult<Vec<String>> {
        self.inner.paths_of(reference)
    }

    fn known_recent(&self, limit: usize) -> StateResult<(Vec<KnownEntry>, i64)> {
        self.inner.known_recent(limit)
    }
}
