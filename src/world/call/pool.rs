//! Worker threads for host calls, and the calls in flight on them. The pool grows with
//! demand up to `max` threads (idle workers leave after a minute); beyond that, jobs wait
//! in a queue, and the call's timeout, which counts from submission, still bounds its
//! caller's wait. One thread watches the flights: it answers ETIMEDOUT at
//! `call_timeout_ms` (queued or not) and lets a caller that is being killed go.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::doc::CallReport;
use super::run::{Reply, RoutedOutcome};
use super::Pipeline;
use crate::host::Caller;
use crate::proc as caller;
use crate::world::error::{ErrorKind, WorldError, WorldResult};
use crate::world::node::*;

type Job = Box<dyn FnOnce() + Send>;

/// How long an idle worker waits for a job before it leaves.
const IDLE_EXIT: Duration = Duration::from_secs(60);

pub struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    max: usize,
    state: Mutex<State>,
    work: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    started: usize,
}

/// What the pool is doing now, for `.wip/stats` and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub threads: usize,
    pub idle: usize,
    pub queued: usize,
    /// Threads started since the pool was made.
    pub started: usize,
}

impl Pool {
    pub fn new(max: usize) -> Pool {
        Pool {
            shared: Arc::new(Shared {
                max: max.max(1),
                state: Mutex::new(State::default()),
                work: Condvar::new(),
            }),
        }
    }

    pub fn max(&self) -> usize {
        self.shared.max
    }

    /// Queue `job`; it starts at once when a worker is idle or the pool may grow.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let mut st = self.shared.lock();
        st.queue.push_back(Box::new(job));
        if st.idle >= st.queue.len() {
            self.shared.work.notify_one();
            return Ok(());
        }
        if st.threads < self.shared.max {
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new()
                .name("call".into())
                .spawn(move || worker(shared))?;
            st.threads += 1;
            st.started += 1;
        }
        Ok(())
    }

    pub fn stats(&self) -> PoolStats {
        let st = self.shared.lock();
        PoolStats {
            threads: st.threads,
            idle: st.idle,
            queued: st.queue.len(),
            started: st.started,
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A job never runs under the lock, so a poisoned lock holds a consistent queue.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn worker(shared: Arc<Shared>) {
    let mut st = shared.lock();
    loop {
        if let Some(job) = st.queue.pop_front() {
            drop(st);
            job();
            st = shared.lock();
            continue;
        }
        st.idle += 1;
        let (next, timeout) = shared
            .work
            .wait_timeout(st, IDLE_EXIT)
            .unwrap_or_else(|p| p.into_inner());
        st = next;
        st.idle -= 1;
        if timeout.timed_out() && st.queue.is_empty() {
            st.threads -= 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_hung_job_does_not_delay_the_next_and_idle_workers_are_reused() {
        let pool = Pool::new(8);
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        pool.run(move || {
            let _ = hold_rx.recv();
        })
        .unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        pool.run(move || done_tx.send(()).unwrap()).unwrap();
        done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        hold_tx.send(()).unwrap();
        // Wait (bounded) until both workers are idle, then run 50 jobs one after another:
        // they reuse the two idle workers and start no thread.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pool.stats().idle < 2 {
            assert!(std::time::Instant::now() < deadline, "{:?}", pool.stats());
            std::thread::yield_now();
        }
        let threads = pool.stats().threads;
        assert_eq!(threads, 2);
        for _ in 0..50 {
            let (tx, rx) = mpsc::channel();
            pool.run(move || tx.send(()).unwrap()).unwrap();
            rx.recv_timeout(Duration::from_secs(5)).unwrap();
            // The job has answered; its worker marks itself idle right after.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while pool.stats().idle < 2 {
                assert!(std::time::Instant::now() < deadline, "{:?}", pool.stats());
                std::thread::yield_now();
            }
            assert_eq!(pool.stats().threads, 2, "a job started a new thread");
        }
    }

    #[test]
    fn the_pool_stops_growing_at_its_maximum_and_queues() {
        let pool = Pool::new(2);
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        let hold_rx = Arc::new(Mutex::new(hold_rx));
        let (ran_tx, ran_rx) = mpsc::channel();
        for i in 0..3 {
            let (hold, ran) = (Arc::clone(&hold_rx), ran_tx.clone());
            pool.run(move || {
                ran.send(i).unwrap();
                let _ = hold.lock().unwrap().recv();
            })
            .unwrap();
        }
        // Two start; the third waits for a free worker.
        let mut started = vec![
            ran_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
            ran_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        ];
        assert_eq!(pool.stats().threads, 2);
        assert_eq!(pool.stats().queued, 1);
        hold_tx.send(()).unwrap();
        started.push(ran_rx.recv_timeout(Duration::from_secs(5)).unwrap());
        started.sort();
        assert_eq!(started, vec![0, 1, 2]);
        hold_tx.send(()).unwrap();
        hold_tx.send(()).unwrap();
    }
}

/// How often the watch looks at callers still waiting (are they being killed?).
const WATCH_TICK: Duration = Duration::from_millis(100);

/// One call running on the pool, between its worker and its waiting caller.
pub(super) struct Flight {
    pub(super) calls: Arc<Pipeline>,
    pub(super) target: Target,
    pub(super) op: String,
    pub(super) id: i64,
    pub(super) args: Value,
    pub(super) caller: Caller,
    /// The process whose wait this is (the caller, or the person who approved the call):
    /// when it is being killed, the wait ends and the call goes on.
    pub(super) waiter: u32,
    pub(super) deadline: Instant,
    pub(super) started: Instant,
    pub(super) state: Mutex<FlightState>,
    /// The run in flight: its progress, and what stops it.
    pub(super) live: Arc<crate::host::signal::LiveRun>,
}

pub(super) enum FlightState {
    /// Waiting for a worker.
    Queued(Reply),
    Running(Reply),
    /// The caller is gone: the outcome is recorded for nobody.
    Detached,
    /// The caller's wait timed out: the run goes on, and its outcome is recorded when
    /// it ends.
    TimedOut,
    /// Timed out before a worker took it: it never runs.
    Cancelled,
    Finished,
}

impl Flight {
    pub(super) fn lock(&self) -> MutexGuard<'_, FlightState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiting(&self) -> bool {
        matches!(
            *self.lock(),
            FlightState::Queued(_) | FlightState::Running(_)
        )
    }

    /// The worker's part.
    pub(super) fn work(self: Arc<Self>) {
        {
            let mut st = self.lock();
            match std::mem::replace(&mut *st, FlightState::Finished) {
                FlightState::Queued(reply) => *st = FlightState::Running(reply),
                FlightState::Cancelled => {
                    *st = FlightState::Cancelled;
                    return;
                }
                other => *st = other,
            }
        }
        let result = if self.live.starting() {
            Err(WorldError::new(
                ErrorKind::Cancelled,
                "cancelled before it started; it never ran",
            ))
        } else {
            self.invoke()
        };
        // A host that gave up because of the cancel may say so in its own words.
        let result = match result {
            Err(e) if self.live.cancel_requested() && e.kind != ErrorKind::Cancelled => Err(
                WorldError::new(ErrorKind::Cancelled, format!("cancelled: {e}")),
            ),
            other => other,
        };
        self.settle(result);
    }

    /// The call itself: the host's op, or a run's own (`wait`, `cancel`).
    fn invoke(&self) -> WorldResult<RoutedOutcome> {
        match &self.target {
            Target::Entry(e) if self.calls.is_tree_root_op(e, &self.op) => self
                .calls
                .tree_root_call(e.host, &self.op, &self.args, &self.caller),
            Target::Entry(e) => match self.calls.entries.hosts().get(e.host) {
                Some(m) => m
                    .host
                    .call(&e.path, &self.op, &self.args, &self.caller)
                    .map(|o| RoutedOutcome::of_host(e.host, o))
                    .map_err(WorldError::from),
                None => Err(WorldError::not_found("no such host")),
            },
            Target::Run(id) => self.calls.run_call(*id, &self.op, &self.args, &self.caller),
            Target::Root => self.calls.root_call(&self.op, &self.args),
        }
    }

    /// A call still waiting for a worker is cancelled: it never runs.
    pub(super) fn cancel_queued(&self) {
        let mut st = self.lock();
        let FlightState::Queued(reply) = std::mem::replace(&mut *st, FlightState::Cancelled) else {
            // A worker took it meanwhile: put back what was there.
            return;
        };
        drop(st);
        let e = WorldError::new(
            ErrorKind::Cancelled,
            "cancelled while it waited for a free worker; it never ran",
        );
        let report = self
            .calls
            .complete(&self.target, &self.op, &self.caller, self.id, Err(e));
        self.calls.live.end(self.id);
        reply(report);
    }

    /// Record the outcome and tell whoever still waits.
    fn settle(&self, result: WorldResult<RoutedOutcome>) {
        let mut st = self.lock();
        match std::mem::replace(&mut *st, FlightState::Finished) {
            FlightState::Running(reply) => {
                drop(st);
                let report =
                    self.calls
                        .complete(&self.target, &self.op, &self.caller, self.id, result);
                self.calls.live.end(self.id);
                reply(report);
            }
            FlightState::Detached => {
                drop(st);
                self.calls
                    .complete(&self.target, &self.op, &self.caller, self.id, result);
                self.calls.live.end(self.id);
            }
            FlightState::TimedOut => {
                drop(st);
                self.calls
                    .finish_late(&self.target, &self.op, self.id, result);
                self.calls.live.end(self.id);
            }
            other => *st = other,
        }
    }

    /// The watch's part: time out, or let a dying caller go. Returns whether it is done.
    fn watch(&self, now: Instant) -> bool {
        let mut st = self.lock();
        if now >= self.deadline {
            let timeout = self.calls.settings.call_timeout();
            match std::mem::replace(&mut *st, FlightState::Finished) {
                FlightState::Running(reply) => {
                    // The run goes on: the caller hears where it is and how to wait for
                    // it or stop it; its outcome is recorded when it ends.
                    *st = FlightState::TimedOut;
                    drop(st);
                    let report = self.calls.waited_out(
                        &self.target,
                        &self.op,
                        &self.caller,
                        self.id,
                        timeout,
                    );
                    reply(report);
                }
                FlightState::Queued(reply) => {
                    let pool = self.calls.pool.stats();
                    let e = WorldError::new(
                        ErrorKind::TimedOut,
                        format!(
                            "timed out after {:.1}s waiting for a free worker ({} calls running, max_call_threads = {}); it did not run",
                            timeout.as_secs_f64(),
                            pool.threads,
                            self.calls.pool.max()
                        ),
                    );
                    let report =
                        self.calls
                            .complete(&self.target, &self.op, &self.caller, self.id, Err(e));
                    *st = FlightState::Cancelled;
                    drop(st);
                    self.calls.live.end(self.id);
                    reply(report);
                }
                other => *st = other,
            }
            return true;
        }
        if !matches!(*st, FlightState::Queued(_) | FlightState::Running(_)) {
            return true;
        }
        drop(st);
        if caller::is_dying(self.waiter) {
            let mut st = self.lock();
            let reply = match std::mem::replace(&mut *st, FlightState::Detached) {
                FlightState::Running(r) => Some(r),
                FlightState::Queued(r) => {
                    // Nobody wants it any more and it has not started: it may still run,
                    // as a killed writer's finished document would.
                    *st = FlightState::Queued(Box::new(|_| {}));
                    Some(r)
                }
                other => {
                    *st = other;
                    None
                }
            };
            drop(st);
            if let Some(reply) = reply {
                reply(CallReport {
                    run: self.id,
                    text: Arc::from(""),
                    outcome: Err(WorldError::new(
                        ErrorKind::CallerGone,
                        "the caller is being killed; the call goes on",
                    )),
                });
            }
            return true;
        }
        false
    }
}

/// The one thread that watches calls in flight.
#[derive(Default)]
pub(in crate::world) struct Watch {
    state: Mutex<Watched>,
    wake: Condvar,
    thread: OnceLock<()>,
}

#[derive(Default)]
struct Watched {
    flights: Vec<Weak<Flight>>,
    /// The thread waits without a tick (nothing in flight for a while): a new flight must
    /// wake it. While it ticks, a new flight waits for the next tick instead, so a short
    /// call costs the watch no wakeup at all.
    asleep: bool,
}

/// How long the watch keeps ticking after the last flight before it sleeps until woken:
/// back-to-back calls then never wake it.
const WATCH_LINGER: Duration = Duration::from_secs(5);

impl Watch {
    pub(super) fn add(self: &Arc<Self>, flight: &Arc<Flight>) {
        let mut w = self.state.lock().unwrap_or_else(|p| p.into_inner());
        w.flights.push(Arc::downgrade(flight));
        if w.asleep {
            w.asleep = false;
            self.wake.notify_one();
        }
        drop(w);
        self.thread.get_or_init(|| {
            let me = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("call-watch".into())
                .spawn(move || watch_loop(me));
            if let Err(e) = spawned {
                tracing::error!("cannot start the call watch: {e}; timeouts will not be enforced");
            }
        });
    }
}

fn watch_loop(watch: Weak<Watch>) {
    let mut last_flight = Instant::now();
    loop {
        let Some(w) = watch.upgrade() else { return };
        let live: Vec<Arc<Flight>> = {
            let mut st = w.state.lock().unwrap_or_else(|p| p.into_inner());
            st.flights
                .retain(|x| x.upgrade().is_some_and(|x| x.waiting()));
            st.flights.iter().filter_map(Weak::upgrade).collect()
        };
        let now = Instant::now();
        for f in &live {
            // A caller is looked at once its call is a tick old: most calls end sooner,
            // and reading /proc for each would cost them more than the check is worth.
            if now >= f.deadline || now.duration_since(f.started) >= WATCH_TICK {
                f.watch(now);
            }
        }
        let next = live
            .iter()
            .filter(|f| f.waiting())
            .map(|f| f.deadline.saturating_duration_since(Instant::now()))
            .min()
            .map(|d| d.min(WATCH_TICK));
        if next.is_some() {
            last_flight = now;
        }
        drop(live);
        let mut st = w.state.lock().unwrap_or_else(|p| p.into_inner());
        let wait = match next {
            Some(d) => d,
            None if now.duration_since(last_flight) < WATCH_LINGER => WATCH_TICK,
            None => {
                st.asleep = true;
                Duration::from_secs(3600)
            }
        };
        // A flight added between the listing above and here is either seen by the next
        // tick or, when asleep, wakes this wait (`add` checks `asleep` under this lock).
        if st.asleep && !st.flights.is_empty() {
            st.asleep = false;
            continue;
        }
        let _ = w.wake.wait_timeout(st, wait);
    }
}
