//! Running a call: arguments validated against the op's schema, the guard evaluated, the
//! run journaled before and after, the host called, and the outcome published (result per
//! session, change feed, kernel cache invalidation).
//!
//! No caller's thread waits for a host: a call runs on the caller's thread only when its
//! host's calls are bounded by nature (an embedded database), else on the worker pool,
//! watched by one thread that answers ETIMEDOUT at `call_timeout_ms` (queued or not) and
//! lets a caller that is being killed go. A call that outlives its caller's wait is
//! recorded as timed out first and gets its late outcome recorded over it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use std::collections::HashMap;
use std::path::PathBuf;

use super::doc::{CallDoc, CallReport};
use super::live::SEQS_KEPT;
use super::pool::{Flight, FlightState, Watch};
use super::{approvals, budget, changes, live, policy, pool};
use crate::cache::TtlCache;
use crate::host::names;
use crate::host::Guard;
use crate::host::{self, CallOutcome, Caller, Session};
use crate::state::Event;
use crate::state::Journal;
use crate::world::entries::Entries;
use crate::world::error::{ErrorKind, WorldError, WorldResult};
use crate::world::node::*;
use crate::world::settings::WorldSettings;
use crate::world::Subscriber;

/// What each session last read back from an op: its own latest run on this mount.
#[derive(Default)]
pub(in crate::world) struct OpResults {
    pub(in crate::world) by_session: HashMap<Session, i64>,
}

/// How long a guard evaluation is reused (a `stat` then `cat` of `guard` asks once).
const GUARD_CACHE: std::time::Duration = std::time::Duration::from_millis(500);

/// The call pipeline: from a written document to the host and back, with everything a
/// call leaves behind (runs, results, approvals) and everything that must hear of it.
pub struct Pipeline {
    /// The model: hosts and what they said of their entries.
    pub(in crate::world) entries: Arc<Entries>,
    pub(in crate::world) journal: Arc<dyn Journal>,
    /// The same journal, for queuing the working tree's runs (see `record`).
    pub(in crate::world) grouped: Arc<super::record::Grouped>,
    /// Who hears of changes: the kernel's caches, when a kernel is there.
    pub(super) subscriber: Arc<dyn Subscriber>,
    pub(super) settings: WorldSettings,
    /// The state directory (runs' content files live under it).
    pub(super) state_dir: PathBuf,
    /// Guards as their files last showed them (see `GUARD_CACHE`).
    pub(super) guards: TtlCache<(Target, String), Guard>,
    /// The shared state database and this mount's origin in it, when state is shared.
    pub(super) shared: Option<changes::OtherMounts>,
    /// The change feed's cursor when this mount started.
    pub(super) events_start: i64,
    pub(super) pool: pool::Pool,
    pub(super) watch: Arc<Watch>,
    pub(super) results: Mutex<HashMap<(Target, String), OpResults>>,
    /// Results of calls whose outcome the journal could not record (shown instead).
    pub(super) unrecorded: Mutex<HashMap<i64, String>>,
    /// What open `call` and `body` descriptors buffer, in total (`max_buffered_bytes`).
    pub(super) buffered: Arc<budget::Budget>,
    /// Runs in flight on this mount: their progress and how to stop them.
    pub(super) live: live::Live,
    /// Runs' numbers among their op's runs, by journal id (see `begin_run`).
    pub(super) seqs: Mutex<HashMap<i64, i64>>,
    /// The policy and what pending runs need (see `approvals`).
    pub(super) approvals: approvals::Approvals,
}

/// What a pipeline is made of (see `Pipeline::new`).
pub(in crate::world) struct Parts {
    pub entries: Arc<Entries>,
    pub journal: Arc<dyn Journal>,
    pub grouped: Arc<super::record::Grouped>,
    pub subscriber: Arc<dyn Subscriber>,
    pub settings: WorldSettings,
    pub state_dir: PathBuf,
    pub shared: Option<changes::OtherMounts>,
    pub events_start: i64,
    pub policy: Arc<policy::Policy>,
}

impl Pipeline {
    pub(in crate::world) fn new(p: Parts) -> Pipeline {
        let pipeline = Pipeline {
            pool: pool::Pool::new(p.settings.max_call_threads),
            buffered: budget::Budget::new(p.settings.max_buffered_bytes),
            entries: p.entries,
            journal: p.journal,
            grouped: p.grouped,
            subscriber: p.subscriber,
            settings: p.settings,
            state_dir: p.state_dir,
            guards: TtlCache::new(GUARD_CACHE, 1024),
            shared: p.shared,
            events_start: p.events_start,
            watch: Arc::default(),
            results: Mutex::new(HashMap::new()),
            unrecorded: Mutex::new(HashMap::new()),
            live: live::Live::default(),
            seqs: Mutex::new(HashMap::new()),
            approvals: approvals::Approvals::new(p.policy),
        };
        pipeline.sweep_content();
        pipeline
    }

    pub fn settings(&self) -> &WorldSettings {
        &self.settings
    }

    /// The worker pool's state now (tests).
    #[cfg(test)]
    pub(in crate::world) fn pool_stats(&self) -> pool::PoolStats {
        self.pool.stats()
    }

    /// How many nodes the kernel holds now (`.wip/stats`).
    pub(in crate::world) fn held(&self) -> usize {
        self.subscriber.held()
    }

    /// World path of a target, e.g. `/tracker/issues/42` (names escaped as in the tree).
    pub fn target_path(&self, target: &Target) -> String {
        match target {
            Target::Root => "/".to_string(),
            Target::Entry(e) => self.entries.entry_path(e.host, &e.path),
            Target::Run(id) => match self.journal.get(*id) {
                Ok(Some(run)) => self.run_world_path(&run),
                // Only a run that exists has a node; a journal that fails says so later.
                _ => format!("/.wip/runs/{id}"),
            },
        }
    }

    /// A call of one of the world root's ops (`root_ops`).
    pub(in crate::world) fn root_call(
        &self,
        op: &str,
        args: &serde_json::Value,
    ) -> WorldResult<RoutedOutcome> {
        crate::world::root_ops::call(&self.entries, self.journal.as_ref(), op, args)
    }

    /// Tell the subscriber (the kernel's caches) what changed, before the caller hears
    /// back, so its next read sees the change.
    pub(in crate::world) fn publish(&self, nodes: &[NodeId]) {
        self.subscriber.changed(nodes);
    }

    /// A call or a change changed the world: every cached answer about entries (guards,
    /// op lists, infos, times, bodies) may differ now.
    pub(in crate::world) fn forget_cached_state(&self) {
        self.guards.clear();
        self.entries.forget();
    }
}

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

impl Pipeline {
    /// Record a call before it runs; returns its journal id (its number is kept for the
    /// paths and events that name it).
    pub(in crate::world) fn begin_run(
        &self,
        caller: &Caller,
        path: &str,
        op: &str,
        args: &str,
        guard: &str,
    ) -> WorldResult<i64> {
        let began = self
            .journal
            .begin(caller, path, op, args, &crate::state::Clean::new(guard))?;
        let mut seqs = self.seqs.lock().unwrap_or_else(|p| p.into_inner());
        if seqs.len() >= SEQS_KEPT {
            seqs.clear();
        }
        seqs.insert(began.id, began.seq);
        Ok(began.id)
    }

    /// A run's number among its op's runs (`runs/SEQ`), from its journal id.
    pub(in crate::world) fn seq_of(&self, id: i64) -> i64 {
        let kept = self.seqs.lock().ok().and_then(|s| s.get(&id).copied());
        match kept {
            Some(seq) => seq,
            None => match self.journal.get(id) {
                Ok(Some(run)) => run.seq,
                _ => id,
            },
        }
    }

    /// The absolute path of a run's folder: run `id` (journal) is `runs/SEQ` of its op.
    pub(in crate::world) fn run_dir(&self, entry_path: &str, op: &str, id: i64) -> String {
        self.entries
            .absolute(&super::live::run_path(entry_path, op, self.seq_of(id)))
    }

    /// Open `call` for writing: an op whose guard fails whatever the arguments (or that a
    /// policy forbids) is refused here, where even bash reports the errno; the refusal is
    /// a run with its words in `result`.
    pub fn open_call(
        self: &Arc<Self>,
        target: &Target,
        op: &str,
        caller: &Caller,
    ) -> WorldResult<CallDoc> {
        self.entries.op_spec(target, op)?;
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
        let spec = match self.entries.op_spec(target, op) {
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
        let bound;
        let caller = match self.bind_places(target, op, &args, caller) {
            Ok(Some(c)) => {
                bound = c;
                &bound
            }
            Ok(None) => caller,
            Err(e) => return reply(self.record_refusal(target, op, caller, &args_text, e)),
        };
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

    /// The places the policy judges a call at, bound to the call (`Caller::judged`: its
    /// host acts on no other); `None` when no rule could apply. A place a rule hides is
    /// not there for the caller: NotFound, in the words a missing path gets.
    fn bind_places(
        &self,
        target: &Target,
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> WorldResult<Option<Caller>> {
        if self.approvals.policy.is_empty() {
            return Ok(None);
        }
        // A host that cannot tell where the call acts is refused by its guard's words.
        let Ok(places) = self.places(target, op, Some(args)) else {
            return Ok(None);
        };
        if let Some((e, _)) = places.iter().find(|(e, _)| self.entries.is_hidden(e)) {
            return Err(WorldError::not_found(format!(
                "{}: no such file or directory",
                names::shown(&self.entries.entry_path(e.host, &e.path))
            )));
        }
        let judged = places.into_iter().map(|(e, _)| e.path.to_vec()).collect();
        Ok(Some(Caller {
            judged: Some(Arc::new(judged)),
            ..caller.clone()
        }))
    }

    /// The guard checked before a call runs. A host that checks its own guard as the call
    /// runs is not asked first (the answer could change before the call anyway): only the
    /// policy's lines are checked here, unless the policy asks for a person's sign-off,
    /// which must not hold a call the host would refuse.
    fn call_guard(&self, target: &Target, op: &str, args: &Value) -> WorldResult<host::Guard> {
        let host_checks = match target {
            Target::Root | Target::Run(_) => false,
            Target::Entry(e) => self.entries.host(e)?.host.checks_guard_in_call(),
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
                let host = match self.entries.host(e) {
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
        let (live, signal) = self.live.start(id);
        // A call that may take long is listed in its op's `runs/` while it runs.
        self.publish(&[NodeId::Runs(target.clone(), intern(op))]);
        let caller = &Caller {
            run: format!("{}:{id}", self.journal.id()),
            signal,
            ..caller.clone()
        };
        let flight = Arc::new(Flight {
            calls: Arc::clone(&self),
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
        self.watch.add(&flight);
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
            self.pool.run(move || job.work()).map_err(|e| e.to_string())
        };
        if let Err(err) = started {
            let mut st = flight.lock();
            if let FlightState::Queued(reply) = std::mem::replace(&mut *st, FlightState::Finished) {
                drop(st);
                let e = WorldError::backend(format!("cannot start the call: {err}"));
                let report = self.complete(target, op, caller, id, Err(e));
                self.live.end(id);
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
    pub(super) fn waited_out(
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
        self.keep_result(target, op, caller.own_session(), id);
        let mut nodes = changed_by_any_call(target, op).to_vec();
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

    pub(super) fn finish_late(
        &self,
        target: &Target,
        op: &str,
        id: i64,
        outcome: WorldResult<RoutedOutcome>,
    ) {
        let (_, _, mut nodes) = self.record(target, op, id, outcome, "");
        self.forget_cached_state();
        nodes.extend(changed_by_any_call(target, op));
        // The kernel may have kept what the run's files showed while it ran.
        nodes.extend(RunFile::ALL.iter().map(|(_, f)| NodeId::RunFile(id, *f)));
        nodes.push(NodeId::Info(Target::Run(id), InfoFile::Description));
        self.publish(&nodes);
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
                let super::super::entries::Effect {
                    text,
                    discovered,
                    changed,
                    events,
                } = self.entries.took_effect(&o);
                // Content that is not text stays as the run's files (`attachments`).
                let kept = if o.content.is_empty() {
                    String::new()
                } else {
                    let run_dir = self.run_dir(&self.target_path(target), op, id);
                    self.keep_content(id, &names::shown(&run_dir), &o.content)
                };
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
        events.retain(|e| !self.entries.hides_path(&e.path));
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
            if let Ok(mut u) = self.unrecorded.lock() {
                if u.len() >= UNRECORDED_KEPT {
                    u.clear();
                }
                u.insert(id, text.clone());
            }
        }
        (result, text, changed)
    }

    /// Run `id` is what `session` reads in `op`'s `result` (a session without a call of
    /// its own reads its uid's latest, from the journal).
    fn keep_result(&self, target: &Target, op: &str, session: Session, id: i64) {
        if let Ok(mut results) = self.results.lock() {
            let r = results.entry((target.clone(), op.to_string())).or_default();
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
                self.entries.note_if_gone(e, op);
            }
        }
        self.keep_result(target, op, caller.own_session(), id);
        // A failed call may have found the world other than its cached guards said (a
        // server that exited): ask again rather than let the next open trust them.
        if !changed.is_empty() || result.is_err() {
            self.forget_cached_state();
        }
        changed.extend(changed_by_any_call(target, op));
        self.publish(&changed);
        CallReport {
            run: id,
            text: Arc::from(text),
            outcome: result,
        }
    }
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
