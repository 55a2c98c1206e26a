//! Running a call: arguments validated against the op's schema, the guard evaluated, the
//! run journaled before and after, the host called, and the outcome published (result per
//! session, change feed, kernel cache invalidation).
//!
//! No caller's thread waits for a host: a call runs on the caller's thread only when its
//! host's calls are bounded by nature (an embedded database), else on the worker pool,
//! watched by one thread that answers ETIMEDOUT at `call_timeout_ms` (queued or not) and
//! lets a caller that is being killed go. A call that outlives its caller's wait is
//! recorded as timed out first and gets its late outcome recorded over it.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::doc::{CallDoc, CallReport};
use crate::host::names;
use crate::host::{self, CallOutcome, Caller};
use crate::proc as caller;
use crate::state::Event;
use crate::world::error::{ErrorKind, WorldError, WorldResult};
use crate::world::node::*;
use crate::world::World;

/// How often the watch looks at callers still waiting (are they being killed?).
const WATCH_TICK: Duration = Duration::from_millis(100);
/// How many unrecorded results are kept in memory at most.
const UNRECORDED_KEPT: usize = 1000;

/// A successful call routed back to the world: a host's `CallOutcome` with every path tied
/// to its host (root ops span hosts).
#[derive(Default)]
pub(in crate::world) struct RoutedOutcome {
    pub result: String,
    pub discovered: Vec<(usize, Vec<String>)>,
    pub changed: Vec<(usize, Vec<String>)>,
    /// World paths of entries of other hosts.
    pub elsewhere: Vec<String>,
    /// Content that is not text, kept as the run's files.
    pub content: Vec<crate::host::ContentPart>,
}

impl RoutedOutcome {
    pub fn of_host(host: usize, o: CallOutcome) -> RoutedOutcome {
        RoutedOutcome {
            result: o.result,
            discovered: o.discovered.into_iter().map(|p| (host, p)).collect(),
            changed: o.changed.into_iter().map(|p| (host, p)).collect(),
            elsewhere: o.found_elsewhere,
            content: o.content,
        }
    }
}

pub(in crate::world) type Reply = Box<dyn FnOnce(CallReport) + Send>;

/// One call running on the pool, between its worker and its waiting caller.
struct Flight {
    world: Arc<World>,
    target: Target,
    op: String,
    id: i64,
    args: Value,
    caller: Caller,
    /// The process whose wait this is (the caller, or the person who approved the call):
    /// when it is being killed, the wait ends and the call goes on.
    waiter: u32,
    deadline: Instant,
    started: Instant,
    state: Mutex<FlightState>,
    /// The run in flight: its progress, and what stops it.
    live: Arc<crate::host::signal::LiveRun>,
}

enum FlightState {
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
    fn lock(&self) -> MutexGuard<'_, FlightState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiting(&self) -> bool {
        matches!(
            *self.lock(),
            FlightState::Queued(_) | FlightState::Running(_)
        )
    }

    /// The worker's part.
    fn work(self: Arc<Self>) {
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
            Target::Entry(e) => match self.world.hosts.get(e.host) {
                Some(m) => m
                    .host
                    .call(&e.path, &self.op, &self.args, &self.caller)
                    .map(|o| RoutedOutcome::of_host(e.host, o))
                    .map_err(WorldError::from),
                None => Err(WorldError::not_found("no such host")),
            },
            Target::Run(id) => self.world.run_call(*id, &self.op, &self.args, &self.caller),
            Target::Root => self.world.root_call(&self.op, &self.args),
        }
    }

    /// A call still waiting for a worker is cancelled: it never runs.
    fn cancel_queued(&self) {
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
            .world
            .complete(&self.target, &self.op, &self.caller, self.id, Err(e));
        self.world.calls.live.end(self.id);
        reply(report);
    }

    /// Record the outcome and tell whoever still waits.
    fn settle(&self, result: WorldResult<RoutedOutcome>) {
        let mut st = self.lock();
        match std::mem::replace(&mut *st, FlightState::Finished) {
            FlightState::Running(reply) => {
                drop(st);
                let report =
                    self.world
                        .complete(&self.target, &self.op, &self.caller, self.id, result);
                self.world.calls.live.end(self.id);
                reply(report);
            }
            FlightState::Detached => {
                drop(st);
                self.world
                    .complete(&self.target, &self.op, &self.caller, self.id, result);
                self.world.calls.live.end(self.id);
            }
            FlightState::TimedOut => {
                drop(st);
                self.world
                    .finish_late(&self.target, &self.op, self.id, result);
                self.world.calls.live.end(self.id);
            }
            other => *st = other,
        }
    }

    /// The watch's part: time out, or let a dying caller go. Returns whether it is done.
    fn watch(&self, now: Instant) -> bool {
        let mut st = self.lock();
        if now >= self.deadline {
            let timeout = self.world.settings.call_timeout();
            match std::mem::replace(&mut *st, FlightState::Finished) {
                FlightState::Running(reply) => {
                    // The run goes on: the caller hears where it is and how to wait for
                    // it or stop it; its outcome is recorded when it ends.
                    *st = FlightState::TimedOut;
                    drop(st);
                    let report = self.world.waited_out(
                        &self.target,
                        &self.op,
                        &self.caller,
                        self.id,
                        timeout,
                    );
                    reply(report);
                }
                FlightState::Queued(reply) => {
                    let pool = self.world.calls.pool.stats();
                    let e = WorldError::new(
                        ErrorKind::TimedOut,
                        format!(
                            "timed out after {:.1}s waiting for a free worker ({} calls running, max_call_threads = {}); it did not run",
                            timeout.as_secs_f64(),
                            pool.threads,
                            self.world.calls.pool.max()
                        ),
                    );
                    let report =
                        self.world
                            .complete(&self.target, &self.op, &self.caller, self.id, Err(e));
                    *st = FlightState::Cancelled;
                    drop(st);
                    self.world.calls.live.end(self.id);
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
    fn add(self: &Arc<Self>, flight: &Arc<Flight>) {
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

impl World {
    /// Open `call` for writing: an op whose guard fails whatever the arguments (or that a
    /// policy forbids) is refused here, where even bash reports the errno; the refusal is
    /// a run with its words in `result`.
    pub fn open_call(
        self: &Arc<Self>,
        target: &Target,
        op: &str,
        caller: &Caller,
    ) -> WorldResult<CallDoc> {
        self.op_spec(target, op)?;
        let guard = match self.guard(target, op) {
            Ok(g) => g,
            // A guard that cannot be read now is asked again when the document runs.
            Err(_) => {
                return Ok(CallDoc::new(
                    Arc::clone(self),
                    target.clone(),
                    op.to_string(),
                    caller.clone(),
                ))
            }
        };
        if !guard.allowed() && self.awaits_approval(target, op, None, &guard).is_none() {
            let text = guard.render();
            let path = self.target_path(target);
            let error: WorldError = host::HostError::Blocked(guard).into();
            return match self.begin_run(caller, &path, op, "", &text) {
                Ok(id) => {
                    let report = self.complete(target, op, caller, id, Err(error));
                    Err(report
                        .outcome
                        .err()
                        .unwrap_or_else(|| WorldError::backend("refused")))
                }
                Err(e) => Err(WorldError::new(
                    error.kind,
                    format!("{error} (and the journal failed: {e})"),
                )),
            };
        }
        Ok(CallDoc::new(
            Arc::clone(self),
            target.clone(),
            op.to_string(),
            caller.clone(),
        ))
    }

    /// Run the document `bytes` as a call; `reply` gets the report now (bounded hosts,
    /// refusals) or when the call ends, times out, or its caller is gone.
    pub(in crate::world) fn run_document(
        self: Arc<Self>,
        target: &Target,
        op: &str,
        caller: &Caller,
        bytes: &[u8],
        reply: Reply,
    ) {
        let path = self.target_path(target);
        let spec = match self.op_spec(target, op) {
            Ok(s) => s,
            Err(e) => return reply(self.record_refusal(target, op, caller, "", e)),
        };
        let args = match super::args::parse_and_validate(bytes, &spec.schema) {
            Ok(a) => a,
            Err(e) => {
                let raw = String::from_utf8_lossy(bytes).into_owned();
                return reply(self.record_refusal(target, op, caller, &raw, e));
            }
        };
        let args_text = args.to_string();
        let guard = match self.call_guard(target, op, &args) {
            Ok(g) => g,
            Err(e) => return reply(self.record_refusal(target, op, caller, &args_text, e)),
        };
        let id = match self.begin_run(caller, &path, op, &args_text, &guard.render()) {
            Ok(id) => id,
            Err(e) => {
                // Without a journal row the call must not run: nothing may go unrecorded.
                return reply(CallReport {
                    run: 0,
                    text: Arc::from(format!("error: {e}\n")),
                    outcome: Err(e),
                });
            }
        };
        if !guard.allowed() {
            if let Some(rule) = self.awaits_approval(target, op, Some(&args), &guard) {
                return reply(self.hold(target, op, caller, id, &rule));
            }
            let outcome = Err(host::HostError::Blocked(guard).into());
            return reply(self.complete(target, op, caller, id, outcome));
        }
        self.dispatch(target, op, caller, caller.pid, id, args, reply);
    }

    /// The guard checked before a call runs. A host that checks its own guard as the call
    /// runs is not asked first (the answer could change before the call anyway): only the
    /// policy's lines are checked here, unless the policy asks for a person's sign-off,
    /// which must not hold a call the host would refuse.
    fn call_guard(&self, target: &Target, op: &str, args: &Value) -> WorldResult<host::Guard> {
        let host_checks = match target {
            Target::Root | Target::Run(_) => false,
            Target::Entry(e) => self.host(e)?.host.checks_guard_in_call(),
        };
        if !host_checks || self.awaits_approval_rule(target, op, args) {
            return self.evaluate_guard(target, op, Some(args));
        }
        // The run shows the guard as `open` just read it (no round trip), when it did.
        let note = |again: &str| {
            host::Condition::check(
                "host",
                true,
                format!("checked {again}by the host as the call ran"),
            )
        };
        let mut guard = match self.guards.get(&(target.clone(), op.to_string())) {
            Some(mut opened) => {
                // Its policy lines were for no arguments: those with the arguments follow.
                let mut policy = host::Guard::default();
                self.apply_policy(target, op, None, None, &mut policy);
                let host_part = opened
                    .conditions
                    .len()
                    .saturating_sub(policy.conditions.len());
                opened.conditions.truncate(host_part);
                if opened.allowed() {
                    opened.conditions.push(note("again "));
                    opened
                } else {
                    // What changed since is the host's to find; a stale answer refuses nothing.
                    host::Guard::new(vec![note("")])
                }
            }
            None => host::Guard::new(vec![note("")]),
        };
        self.apply_policy(target, op, Some(args), None, &mut guard);
        Ok(guard)
    }

    /// Run a journaled call whose guard passed: on the caller's thread for bounded hosts,
    /// else on the pool, watched for its timeout and for `waiter` being killed.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::world) fn dispatch(
        self: Arc<Self>,
        target: &Target,
        op: &str,
        caller: &Caller,
        waiter: u32,
        id: i64,
        args: Value,
        reply: Reply,
    ) {
        match target {
            Target::Root => {
                let outcome = self.root_call(op, &args);
                return reply(self.complete(target, op, caller, id, outcome));
            }
            Target::Entry(e) => {
                let host = match self.host(e) {
                    Ok(m) => Arc::clone(&m.host),
                    Err(err) => return reply(self.complete(target, op, caller, id, Err(err))),
                };
                if host.bounded_calls() {
                    // No thread hand-off: two context switches cost more than most such
                    // calls. The host may keep the run's name with its change.
                    let caller = &Caller {
                        run: format!("{}:{id}", self.journal.id()),
                        ..caller.clone()
                    };
                    let outcome = host
                        .call(&e.path, op, &args, caller)
                        .map(|o| RoutedOutcome::of_host(e.host, o))
                        .map_err(WorldError::from);
                    return reply(self.complete(target, op, caller, id, outcome));
                }
            }
            // A run's own ops wait: on a worker like any long call.
            Target::Run(_) => {}
        }
        let (live, signal) = self.calls.live.start(id);
        // A call that may take long is listed in its op's `runs/` while it runs.
        self.publish(&[NodeId::Runs(target.clone(), intern(op))]);
        let caller = &Caller {
            run: format!("{}:{id}", self.journal.id()),
            signal,
            ..caller.clone()
        };
        let flight = Arc::new(Flight {
            world: Arc::clone(&self),
            target: target.clone(),
            op: op.to_string(),
            id,
            args,
            caller: caller.clone(),
            waiter,
            deadline: Instant::now() + self.settings.call_timeout(),
            started: Instant::now(),
            state: Mutex::new(FlightState::Queued(reply)),
            live,
        });
        let queued = Arc::downgrade(&flight);
        flight.live.while_queued(move || {
            if let Some(f) = queued.upgrade() {
                f.cancel_queued();
            }
        });
        self.calls.watch.add(&flight);
        let job = Arc::clone(&flight);
        let started = if let Target::Run(_) = target {
            // A run's own ops never queue behind the calls they wait for or stop (a full
            // pool would starve a cancel of the very call that fills it): a thread each.
            std::thread::Builder::new()
                .name("run-op".into())
                .spawn(move || job.work())
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            self.calls
                .pool
                .run(move || job.work())
                .map_err(|e| e.to_string())
        };
        if let Err(err) = started {
            let mut st = flight.lock();
            if let FlightState::Queued(reply) = std::mem::replace(&mut *st, FlightState::Finished) {
                drop(st);
                let e = WorldError::backend(format!("cannot start the call: {err}"));
                let report = self.complete(target, op, caller, id, Err(e));
                self.calls.live.end(id);
                reply(report);
            }
        }
    }

    /// Run a call and wait for its report (benchmarks, tests and tools in-process).
    pub fn call(
        self: &Arc<Self>,
        target: &Target,
        op: &str,
        bytes: &[u8],
        caller: &Caller,
    ) -> CallReport {
        let (tx, rx) = std::sync::mpsc::channel();
        Arc::clone(self).run_document(
            target,
            op,
            caller,
            bytes,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| CallReport {
            run: 0,
            text: Arc::from("error: the call ended without a report\n"),
            outcome: Err(WorldError::backend("the call ended without a report")),
        })
    }

    /// A call refused before it ran (bad arguments, too large, written after its
    /// descriptor's call ran): a run of its own with the words, no guard.
    pub(in crate::world) fn record_refusal(
        &self,
        target: &Target,
        op: &str,
        caller: &Caller,
        args: &str,
        error: WorldError,
    ) -> CallReport {
        let path = self.target_path(target);
        match self.begin_run(caller, &path, op, args, "") {
            Ok(id) => self.complete(target, op, caller, id, Err(error)),
            Err(e) => CallReport {
                run: 0,
                text: Arc::from(format!("error: {error} (and the journal failed: {e})\n")),
                outcome: Err(error),
            },
        }
    }

    /// The caller stopped waiting (`call_timeout_ms`) for a run that goes on: ETIMEDOUT
    /// with the run's path and how to wait for it or stop it. Its session's `result`
    /// shows the run, which says the same while it runs.
    fn waited_out(
        &self,
        target: &Target,
        op: &str,
        caller: &Caller,
        id: i64,
        timeout: Duration,
    ) -> CallReport {
        let dir = self.run_dir(&self.target_path(target), op, id);
        let dir = names::shown(&dir);
        let words = format!(
            "timed out after {:.1}s (call_timeout_ms); the call goes on as a run\n\
             run: {dir}\n\
             wait for it: echo > {dir}/ops/wait/call (returns its result)\n\
             stop it: echo > {dir}/ops/cancel/call",
            timeout.as_secs_f64()
        );
        self.keep_result(target, op, caller.session, id);
        let mut nodes = Self::changed_by_any_call(target, op).to_vec();
        nodes.extend(RunFile::ALL.iter().map(|(_, f)| NodeId::RunFile(id, *f)));
        self.publish(&nodes);
        let text =
            crate::secrets::scrub(&names::printable(&format!("error: {words}\n"))).into_owned();
        CallReport {
            run: id,
            text: Arc::from(text),
            outcome: Err(WorldError::new(ErrorKind::TimedOut, words)),
        }
    }

    fn finish_late(&self, target: &Target, op: &str, id: i64, outcome: WorldResult<RoutedOutcome>) {
        let (_, _, mut nodes) = self.record(target, op, id, outcome, "");
        self.forget_cached_state();
        nodes.extend(Self::changed_by_any_call(target, op));
        // The kernel may have kept what the run's files showed while it ran.
        nodes.extend(RunFile::ALL.iter().map(|(_, f)| NodeId::RunFile(id, *f)));
        nodes.push(NodeId::Info(Target::Run(id), InfoFile::Description));
        self.publish(&nodes);
    }

    /// Tell the subscriber (the kernel's caches) what changed, before the caller hears
    /// back, so its next read sees the change.
    pub(in crate::world) fn publish(&self, nodes: &[NodeId]) {
        self.subscriber.changed(nodes);
    }

    /// Write a call's outcome to its run; returns the outcome, its `result` text and the
    /// nodes it changed. A successful text starts with `prefix`.
    fn record(
        &self,
        target: &Target,
        op: &str,
        id: i64,
        outcome: WorldResult<RoutedOutcome>,
        prefix: &str,
    ) -> (Result<(), WorldError>, String, Vec<NodeId>) {
        let (status, errno, text, discovered, changed, mut events, result) = match outcome {
            Ok(o) => {
                let (text, discovered, changed, events) = self.render_success(&o);
                let run_dir = self.run_dir(&self.target_path(target), op, id);
                let kept = self.keep_content(id, &names::shown(&run_dir), &o.content);
                let text = format!("{prefix}{text}{kept}");
                ("ok", 0, text, discovered, changed, events, Ok(()))
            }
            Err(e) => (
                e.kind.status(),
                e.errno(),
                format!("error: {e}\n"),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Err(e),
            ),
        };
        events.insert(
            0,
            Event {
                kind: "call".into(),
                path: self.target_path(target),
                op: Some(op.to_string()),
                run: Some(self.seq_of(id)),
                status: Some(status.to_string()),
                ..Default::default()
            },
        );
        // What `result` and `wip call` print: no raw control character, no secret.
        let mut text = crate::secrets::scrub(&names::printable(&text)).into_owned();
        if let Err(e) = self.journal.finish(
            id,
            status,
            errno,
            &crate::state::Clean::new(&text),
            &discovered,
            &events,
        ) {
            tracing::error!(run = id, "journal: {e}");
            // The call did happen: say so, and that the record of it is missing.
            text.push_str(&format!(
                "warning: this outcome could not be recorded in the journal ({e}); runs/ \
                 and other mounts may still show run {id} as running\n"
            ));
            if let Ok(mut u) = self.calls.unrecorded.lock() {
                if u.len() >= UNRECORDED_KEPT {
                    u.clear();
                }
                u.insert(id, text.clone());
            }
        }
        (result, text, changed)
    }

    /// What every call changes, whatever it did: its runs, its result, the log.
    pub(in crate::world) fn changed_by_any_call(target: &Target, op: &str) -> [NodeId; 6] {
        [
            NodeId::Runs(target.clone(), intern(op)),
            NodeId::OpFile(target.clone(), intern(op), OpFile::Result),
            NodeId::WipFile(WipFile::Log),
            NodeId::WipFile(WipFile::Stats),
            NodeId::WipFile(WipFile::Known),
            NodeId::WipFile(WipFile::Events),
        ]
    }

    /// A call changed the world: every cached answer about entries (guards, op lists,
    /// infos, times, bodies) may differ now.
    pub(in crate::world) fn forget_cached_state(&self) {
        self.guards.clear();
        self.ops_cache.clear();
        self.infos.clear();
        self.mtimes.clear();
        self.bodies.clear();
    }

    /// Result text, discovered world paths and changed nodes of a successful call.
    fn render_success(
        &self,
        outcome: &RoutedOutcome,
    ) -> (String, Vec<String>, Vec<NodeId>, Vec<Event>) {
        let mut text = outcome.result.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let mut discovered = Vec::new();
        let mut found: Vec<(usize, Vec<String>)> = outcome.discovered.clone();
        for p in &outcome.elsewhere {
            match self.entry_at(p) {
                Some(e) => found.push((e.host, e.path.to_vec())),
                None => tracing::debug!(path = p, "a found path is not an entry"),
            }
        }
        for (h, rel) in &found {
            let world_path = self.entry_path(*h, rel);
            let info = self
                .hosts
                .get(*h)
                .and_then(|m| m.host.entry(rel).ok().flatten());
            let description = match &info {
                Some(i) => {
                    let e = EntryRef::new(*h, rel.clone());
                    self.note_ancestors(&e);
                    self.remember(&e, i);
                    i.description.clone()
                }
                None => String::new(),
            };
            text.push_str(&format!(
                "{}\t{}\n",
                names::shown(&self.absolute(&world_path)),
                names::shown(&description)
            ));
            discovered.push(world_path);
        }
        let mut events: Vec<Event> = discovered
            .iter()
            .map(|p| Event {
                kind: "discovered".into(),
                path: p.clone(),
                ..Default::default()
            })
            .collect();
        let (mut changed, change_events) = self.changed_entries(&outcome.changed);
        events.extend(change_events);
        // A new entry changes its parent's listing (hosts need not say so).
        for (h, rel) in &found {
            if let Some((_, parent)) = rel.split_last() {
                changed.push(NodeId::Entry(EntryRef::new(*h, parent)));
            }
            // A name the kernel may hold for it (the removed one's, made again) goes.
            let e = EntryRef::new(*h, rel.as_slice());
            changed.push(NodeId::EntryName(e.clone()));
            // Made again where a call had removed one: what the kernel holds of the
            // removed one (its ops that ran, and nothing else) goes.
            if self.is_gone(&e) {
                self.gone.forget(&e);
                self.entry_changed_nodes(*h, rel, &mut changed);
            }
        }
        (text, discovered, changed, events)
    }

    /// The nodes and change-feed events of entries that changed.
    pub(in crate::world) fn changed_entries(
        &self,
        entries: &[(usize, Vec<String>)],
    ) -> (Vec<NodeId>, Vec<Event>) {
        let mut changed = Vec::new();
        let mut events = Vec::new();
        for (h, p) in entries {
            // A host's root is never removed: not asking spares it.
            let gone = !p.is_empty()
                && self
                    .hosts
                    .get(*h)
                    .is_some_and(|m| matches!(m.host.exists(p), Ok(false)));
            events.push(Event {
                kind: if gone { "removed" } else { "changed" }.into(),
                path: self.entry_path(*h, p),
                ..Default::default()
            });
            self.entry_changed_nodes(*h, p, &mut changed);
            if gone {
                changed.push(NodeId::EntryName(EntryRef::new(*h, p.as_slice())));
            }
        }
        (changed, events)
    }

    /// The nodes whose kernel copies an entry's change makes stale.
    pub(in crate::world) fn entry_changed_nodes(
        &self,
        h: usize,
        p: &[String],
        changed: &mut Vec<NodeId>,
    ) {
        let e = EntryRef::new(h, p);
        let target = Target::Entry(e.clone());
        changed.push(NodeId::Info(target.clone(), InfoFile::Description));
        changed.push(NodeId::Body(e.clone()));
        // The set of ops may change with the entry's state (a server's new tools).
        changed.push(NodeId::Ops(target.clone()));
        // The entry's guards depend on its state: their sizes may have changed.
        if let Ok(ops) = self.ops(&target) {
            for o in ops.iter() {
                changed.push(NodeId::OpFile(
                    target.clone(),
                    intern(&o.name),
                    OpFile::Guard,
                ));
            }
        }
        if p.is_empty() {
            // The root README quotes every host's root description.
            changed.push(NodeId::Readme);
        } else {
            // A child's description shows in its parent's listing (titles, counts),
            // and a removed child leaves it: the parent changed too.
            changed.push(NodeId::Entry(EntryRef::new(h, &p[..p.len() - 1])));
        }
        changed.push(NodeId::Entry(e));
    }

    /// Run `id` is what `session` (and, as the latest, every session without a call of
    /// its own) reads in `op`'s `result`.
    fn keep_result(&self, target: &Target, op: &str, session: u32, id: i64) {
        if let Ok(mut results) = self.calls.results.lock() {
            let r = results.entry((target.clone(), op.to_string())).or_default();
            r.latest = r.latest.max(id);
            r.by_session.insert(session, id);
        }
    }

    /// Record a finished call, keep it as its session's result, and publish what changed.
    pub(in crate::world) fn complete(
        &self,
        target: &Target,
        op: &str,
        caller: &Caller,
        id: i64,
        outcome: WorldResult<RoutedOutcome>,
    ) -> CallReport {
        let (result, text, mut changed) = self.record(target, op, id, outcome, "");
        if let (Ok(_), Target::Entry(e)) = (&result, target) {
            // Only what the call said it changed can be gone (a `delete`'s own entry).
            if changed.contains(&NodeId::Entry(e.clone())) {
                self.note_if_gone(e, op);
            }
        }
        self.keep_result(target, op, caller.session, id);
        // A failed call may have found the world other than its cached guards said (a
        // server that exited): ask again rather than let the next open trust them.
        if !changed.is_empty() || result.is_err() {
            self.forget_cached_state();
        }
        changed.extend(Self::changed_by_any_call(target, op));
        self.publish(&changed);
        CallReport {
            run: id,
            text: Arc::from(text),
            outcome: result,
        }
    }
}
