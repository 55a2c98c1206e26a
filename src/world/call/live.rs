//! Runs in flight: the progress their hosts report, how to stop them, and the ops every
//! run carries (`runs/ID/ops/wait`, `runs/ID/ops/cancel`).
//!
//! A call outlives its caller's patience (`call_timeout_ms`) as a run: the caller hears
//! ETIMEDOUT with the run's path, the host goes on, and anyone may wait for the run or
//! (its own session, or the mount's owner) cancel it. What a host can do about a cancel
//! it says by registering a hook on the call's `RunSignal` (MCP sends
//! `notifications/cancelled` or `tasks/cancel`, the exec protocol a `cancel`, the agents
//! host stops the agent's process); a call still queued for a worker never starts.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::run::RoutedOutcome;
use super::Pipeline;
use crate::host::signal::{LiveRun, Progress, RunSignal};
use crate::host::{Caller, Condition, Guard, OpSpec};
use crate::state::{self as journal, Run};
use crate::world::error::{ErrorKind, WorldError, WorldResult};

/// Op names of every run.
pub const WAIT: &str = "wait";
pub const CANCEL: &str = "cancel";
/// How often a wait looks at a run another mount is running (the journal is shared).
const REMOTE_POLL: Duration = Duration::from_millis(250);
/// How long `cancel` waits for the host to stop the run before it answers.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// How many runs' numbers are kept in memory (older ones are read from the journal).
pub(super) const SEQS_KEPT: usize = 10_000;
/// How many ended runs' last progress lines are kept.
const LAST_KEPT: usize = 1000;

/// The runs in flight on this mount.
#[derive(Default)]
pub(in crate::world) struct Live {
    runs: Mutex<HashMap<i64, Arc<LiveRun>>>,
    ended: Condvar,
    /// The last progress of runs that ended (bounded), so `progress` says where they got.
    last: Mutex<HashMap<i64, String>>,
}

impl Live {
    fn runs(&self) -> MutexGuard<'_, HashMap<i64, Arc<LiveRun>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A run begins on this mount: its signal for the host.
    pub(in crate::world) fn start(&self, id: i64) -> (Arc<LiveRun>, RunSignal) {
        let run = Arc::new(LiveRun::new(id));
        self.runs().insert(id, Arc::clone(&run));
        let signal = RunSignal::of(Arc::clone(&run));
        (run, signal)
    }

    /// The run ended and its outcome is recorded: whoever waits for it wakes.
    pub(in crate::world) fn end(&self, id: i64) {
        let run = self.runs().remove(&id);
        if let Some(p) = run.and_then(|r| r.progress()) {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.len() >= LAST_KEPT {
                last.clear();
            }
            last.insert(id, p.line());
        }
        self.ended.notify_all();
    }

    pub(in crate::world) fn get(&self, id: i64) -> Option<Arc<LiveRun>> {
        self.runs().get(&id).cloned()
    }

    /// Wait until run `id` is no longer in flight here, or `within` passed.
    fn wait_end(&self, id: i64, within: Duration) {
        let deadline = Instant::now() + within;
        let mut runs = self.runs();
        while runs.contains_key(&id) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            runs = match self.ended.wait_timeout(runs, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The progress line of a run (in flight, or ended here).
    fn progress_line(&self, id: i64) -> Option<String> {
        if let Some(r) = self.get(id) {
            return r.progress().as_ref().map(Progress::line);
        }
        self.last.lock().ok().and_then(|l| l.get(&id).cloned())
    }
}

/// The ops every run has.
pub(in crate::world) fn run_ops() -> Vec<OpSpec> {
    vec![
        OpSpec {
            output: None,
            name: WAIT.into(),
            description: "wait(timeout_ms?): wait for this run to end and return its result; ETIMEDOUT again if it is still running (at most the mount's call_timeout_ms)".into(),
            schema: json!({
                "type": "object",
                "properties": {"timeout_ms": {"type": "integer", "minimum": 0, "description": "how long to wait at most (bounded by the mount's call_timeout_ms)"}},
                "additionalProperties": false
            }),
        },
        OpSpec {
            output: None,
            name: CANCEL.into(),
            description: "cancel(): ask the host to stop this run; it ends cancelled (or as it ended, if it finished first). The run's own session or the mount's owner may".into(),
            schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
    ]
}

/// The world path of run number `seq` of `op` on the entry at `entry_path` (`/` the root).
pub(in crate::world) fn run_path(entry_path: &str, op: &str, seq: i64) -> String {
    let base = if entry_path == "/" { "" } else { entry_path };
    format!("{base}/ops/{op}/runs/{seq}")
}

/// `3.2 s`, `12 s`, `4 min 3 s`.
fn took(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 600.0 {
        format!("{s:.0} s")
    } else {
        format!("{} min {} s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

fn is_running(run: &Run) -> bool {
    run.status == journal::RUNNING
}

impl Pipeline {
    /// The world path of a run's folder (`/tracker/issues/1/ops/close/runs/3`).
    pub(in crate::world) fn run_world_path(&self, run: &Run) -> String {
        run_path(&run.path, &run.op, run.seq)
    }

    /// How long a run took, or has taken so far.
    fn run_age(&self, run: &Run) -> Option<Duration> {
        if let Some(live) = self.live.get(run.id) {
            return Some(live.started().elapsed());
        }
        let start = crate::calendar::parse_iso(&run.started)?;
        let end = match &run.finished {
            Some(f) => crate::calendar::parse_iso(f)?,
            None => std::time::SystemTime::now(),
        };
        end.duration_since(start).ok()
    }

    /// How long a run took or has taken, as `.wip/runs` shows it.
    pub(in crate::world) fn run_took(&self, run: &Run) -> String {
        self.run_age(run).map(took).unwrap_or_else(|| "-".into())
    }

    /// The progress line of a run, if its host reported one on this mount.
    pub(in crate::world) fn progress_line(&self, id: i64) -> Option<String> {
        self.live.progress_line(id)
    }

    /// `runs/ID/progress`: the latest progress line, empty when none was reported.
    pub(in crate::world) fn progress_text(&self, id: i64) -> String {
        match self.live.progress_line(id) {
            Some(p) => format!("{p}\n"),
            None => String::new(),
        }
    }

    /// What `result` shows of a run still running: where it got, and how to wait for it
    /// or stop it.
    pub(in crate::world) fn running_text(&self, run: &Run) -> String {
        let dir = self.entries.absolute(&self.run_world_path(run));
        let dir = crate::host::names::shown(&dir);
        let mut out = format!(
            "running: {} on {} for {}",
            run.op,
            run.path,
            self.run_age(run)
                .map(took)
                .unwrap_or_else(|| "a while".into())
        );
        if let Some(p) = self.live.progress_line(run.id) {
            out.push_str(&format!(" · progress {p}"));
        }
        out.push_str(&format!(
            "\nrun: {dir}\nwait for it: echo > {dir}/ops/wait/call (returns its result)\nstop it: echo > {dir}/ops/cancel/call\n"
        ));
        out
    }

    /// A run's `description`.
    pub(in crate::world) fn run_description(&self, run: &Run) -> String {
        let state = if is_running(run) {
            format!(
                "running for {}",
                self.run_age(run)
                    .map(took)
                    .unwrap_or_else(|| "a while".into())
            )
        } else {
            match self.run_age(run) {
                Some(d) => format!("{} after {}", run.status, took(d)),
                None => run.status.clone(),
            }
        };
        let mut out = format!(
            "Run {} of {} on {} by pid {} ({}), session {}, started {} · {state}",
            run.seq,
            run.op,
            run.path,
            run.pid,
            run.command.split(' ').next().unwrap_or(""),
            run.session,
            run.started
        );
        if let Some(p) = self.live.progress_line(run.id) {
            out.push_str(&format!(" · progress {p}"));
        }
        out
    }

    /// A run's `ref`: the journal's identity and the run's id in it.
    pub(in crate::world) fn run_ref(&self, run: &Run) -> String {
        format!("wip-run://{}/{}", self.journal.id(), run.id)
    }

    /// The guard of a run's op (no caller known: who may cancel is checked as it runs).
    pub(in crate::world) fn run_guard(&self, id: i64, op: &str) -> WorldResult<Guard> {
        let run = self.run(id)?;
        let running = is_running(&run);
        Ok(match op {
            WAIT => Guard::new(vec![Condition::check(
                "run",
                true,
                if running {
                    "running: wait returns when it ends".to_string()
                } else {
                    format!("ended {}: wait returns its result at once", run.status)
                },
            )]),
            CANCEL => {
                let mut c = vec![Condition::check(
                    "running",
                    running,
                    if running {
                        format!("run {} is running", run.seq)
                    } else if run.status == journal::PENDING {
                        format!(
                            "run {} waits for a person's sign-off; it has not started, and only a person decides it (wip deny {})",
                            run.seq,
                            crate::host::names::shown(&self.entries.absolute(&self.run_world_path(&run)))
                        )
                    } else {
                        format!("run {} already ended {}", run.seq, run.status)
                    },
                )];
                if running {
                    let (ok, words) = match self.live.get(id) {
                        Some(l) if l.stoppable() => (true, "its host can stop it".to_string()),
                        Some(_) => (
                            false,
                            format!(
                                "the host of {} cannot stop a call once it runs; it goes on until it ends",
                                run.path
                            ),
                        ),
                        None => (
                            false,
                            "it is not running on this mount (another mount of the shared world runs it, or it cannot be stopped); cancel it where it runs".to_string(),
                        ),
                    };
                    c.push(Condition::check("stoppable", ok, words));
                    c.push(Condition::check(
                        "caller",
                        true,
                        format!(
                            "its own session ({}) or the mount's owner (uid {}) may cancel it",
                            run.session,
                            owner_uid()
                        ),
                    ));
                }
                Guard::new(c)
            }
            crate::world::undo::UNDO => return self.undo_guard(id),
            other => return Err(WorldError::not_found(format!("no op {other:?} here"))),
        })
    }

    /// Run a run's op (on a worker: `wait` blocks).
    pub(in crate::world) fn run_call(
        &self,
        id: i64,
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> WorldResult<RoutedOutcome> {
        match op {
            WAIT => self.wait_for(id, args),
            CANCEL => self.cancel_run(id, caller),
            crate::world::undo::UNDO => self.undo_run(id, caller),
            other => Err(WorldError::not_found(format!("no op {other:?} here"))),
        }
    }

    /// How long a run's op may block: the caller's own wait, less a margin so the op
    /// answers in its own words before the call's timeout does.
    fn op_patience(&self) -> Duration {
        let t = self.settings.call_timeout();
        t.saturating_sub((t / 10).min(Duration::from_millis(100)))
    }

    fn wait_for(&self, id: i64, args: &Value) -> WorldResult<RoutedOutcome> {
        let mut patience = self.op_patience();
        if let Some(ms) = args.get("timeout_ms").and_then(Value::as_u64) {
            patience = patience.min(Duration::from_millis(ms));
        }
        let deadline = Instant::now() + patience;
        loop {
            let run = self.run(id)?;
            if !is_running(&run) && run.status != journal::PENDING {
                return self.ended_outcome(&run);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let dir = self.entries.absolute(&self.run_world_path(&run));
                let dir = crate::host::names::shown(&dir);
                let mut words = format!(
                    "run {} is still {} after waiting {}",
                    run.seq,
                    if is_running(&run) {
                        "running"
                    } else {
                        "waiting for a person's sign-off"
                    },
                    took(patience)
                );
                if let Some(p) = self.live.progress_line(id) {
                    words.push_str(&format!(" (progress {p})"));
                }
                words.push_str(&format!(
                    "\nrun: {dir}\nwait again: echo > {dir}/ops/wait/call\nstop it: echo > {dir}/ops/cancel/call"
                ));
                return Err(WorldError::new(ErrorKind::TimedOut, words));
            }
            if self.live.get(id).is_some() {
                self.live.wait_end(id, left);
            } else {
                // Another mount's run, or one between its end and its record.
                std::thread::sleep(left.min(REMOTE_POLL));
            }
        }
    }

    /// What `wait` returns of a run that ended: its result, with its own errno.
    fn ended_outcome(&self, run: &Run) -> WorldResult<RoutedOutcome> {
        if run.status == "ok" {
            return Ok(RoutedOutcome {
                result: run.result.clone(),
                ..Default::default()
            });
        }
        let kind = ErrorKind::of_errno(run.errno).unwrap_or(ErrorKind::Backend);
        let text = run.result.trim_end();
        let text = text.strip_prefix("error: ").unwrap_or(text);
        Err(WorldError::new(
            kind,
            format!("run {} ended {}: {text}", run.seq, run.status),
        ))
    }

    fn cancel_run(&self, id: i64, caller: &Caller) -> WorldResult<RoutedOutcome> {
        let run = self.run(id)?;
        if run.status == journal::PENDING {
            return Err(WorldError::new(
                ErrorKind::Blocked,
                format!(
                    "blocked by guard running: run {} waits for a person's sign-off; only a person decides it (wip deny)",
                    run.seq
                ),
            ));
        }
        if !is_running(&run) {
            return Ok(RoutedOutcome {
                result: format!(
                    "run {} had already ended {} before the cancel; nothing was stopped\n",
                    run.seq, run.status
                ),
                ..Default::default()
            });
        }
        let owner = owner_uid();
        // The session that called, not merely its number: a later session given the same
        // number is another.
        if caller.own_session() != run.caller_session() && caller.uid != owner {
            return Err(WorldError::new(
                ErrorKind::Blocked,
                format!(
                    "blocked by guard caller: run {} belongs to session {} of uid {}, not to this one (a session given the same number after that one ended is another); only that session or the mount's owner (uid {owner}) may cancel it",
                    run.seq, run.session, run.uid
                ),
            ));
        }
        let Some(live) = self.live.get(id) else {
            return Err(WorldError::new(
                ErrorKind::Blocked,
                "blocked by guard stoppable: it is not running on this mount; cancel it where it runs",
            ));
        };
        if !live.request_cancel() {
            return Err(WorldError::new(
                ErrorKind::Blocked,
                format!(
                    "blocked by guard stoppable: the host of {} cannot stop a call once it runs; it goes on until it ends",
                    run.path
                ),
            ));
        }
        self.live.wait_end(id, CANCEL_WAIT.min(self.op_patience()));
        let after = self.run(id)?;
        let dir = self.entries.absolute(&self.run_world_path(&after));
        let dir = crate::host::names::shown(&dir);
        let result = match after.status.as_str() {
            journal::RUNNING => format!(
                "asked the host to stop run {}; it has not ended yet (wait for it: echo > {dir}/ops/wait/call)\n",
                after.seq
            ),
            "cancelled" => format!("run {} was cancelled: {}", after.seq, after.result),
            other => format!(
                "run {} ended {other} before the host could stop it:\n{}",
                after.seq, after.result
            ),
        };
        Ok(RoutedOutcome {
            result,
            ..Default::default()
        })
    }
}

/// The mount's owner: the daemon's user.
fn owner_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
