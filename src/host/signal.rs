//! A call's run as its host sees it: report progress, learn of a cancel. The world keeps
//! the other end (`world::call::live`), and nothing else passes between them.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// What a host said of how far a call got.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// How far, where a number was given (a task's status message alone has none).
    pub done: Option<f64>,
    pub total: Option<f64>,
    pub message: Option<String>,
}

impl Progress {
    /// `2/6 Step 2 of 6`, as `runs/ID/progress` shows it.
    pub fn line(&self) -> String {
        let n = |v: f64| {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{}", v as i64)
            } else {
                format!("{v}")
            }
        };
        let mut out = match (self.done, self.total) {
            (Some(d), Some(t)) => format!("{}/{}", n(d), n(t)),
            (Some(d), None) => n(d),
            (None, _) => String::new(),
        };
        if let Some(m) = self.message.as_deref().filter(|m| !m.trim().is_empty()) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&super::names::printable(m.trim()).replace('\n', " "));
        }
        out
    }
}

type Hook = Box<dyn FnOnce() + Send>;

/// One run in flight on this mount.
pub struct LiveRun {
    id: i64,
    started: Instant,
    state: Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    progress: Option<Progress>,
    cancel_requested: bool,
    /// What stops the call now: the world's (a call still queued) or the host's.
    hook: Option<Hook>,
    /// A host said it can stop this call (it registered a hook).
    host_stops: bool,
    /// Still waiting for a worker: the world itself can stop it.
    queued: bool,
}

impl LiveRun {
    /// Run `id`, in flight from now.
    pub(crate) fn new(id: i64) -> LiveRun {
        LiveRun {
            id,
            started: Instant::now(),
            state: Mutex::default(),
        }
    }

    /// When it began.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The last progress its host reported.
    pub(crate) fn progress(&self) -> Option<Progress> {
        self.lock().progress.clone()
    }

    fn lock(&self) -> MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The world's hook while the call waits for a worker.
    pub(crate) fn while_queued(&self, hook: impl FnOnce() + Send + 'static) {
        let mut st = self.lock();
        st.queued = true;
        st.hook = Some(Box::new(hook));
    }

    /// A worker took the call: from now on only its host can stop it. Returns whether a
    /// cancel came first (then the call must not start).
    pub(crate) fn starting(&self) -> bool {
        let mut st = self.lock();
        st.queued = false;
        st.hook = None;
        st.cancel_requested
    }

    pub(crate) fn cancel_requested(&self) -> bool {
        self.lock().cancel_requested
    }

    /// Whether a cancel can reach the call now.
    pub(crate) fn stoppable(&self) -> bool {
        let st = self.lock();
        st.queued || st.host_stops
    }

    /// Ask the call to stop; `false` when nothing can stop it.
    pub(crate) fn request_cancel(&self) -> bool {
        let hook = {
            let mut st = self.lock();
            if !(st.queued || st.host_stops) {
                return false;
            }
            st.cancel_requested = true;
            st.hook.take()
        };
        // Outside the lock: a hook may end the call, which reads this state.
        if let Some(h) = hook {
            h();
        }
        true
    }
}

/// What a host holds of its call's run: report progress, learn of a cancel. Outside a run
/// (tests, tools calling a host directly) it does nothing.
#[derive(Clone, Default)]
pub struct RunSignal(Option<Arc<LiveRun>>);

impl RunSignal {
    /// The signal of a run in flight.
    pub(crate) fn of(run: Arc<LiveRun>) -> RunSignal {
        RunSignal(Some(run))
    }

    /// How far the call got: shown in `runs/ID/progress` and the run's description.
    pub fn progress(&self, done: f64, total: Option<f64>, message: Option<String>) {
        if let Some(run) = &self.0 {
            run.lock().progress = Some(Progress {
                done: Some(done),
                total,
                message,
            });
        }
    }

    /// Where the call is, in words only (a task's status message): the last numbers stay.
    pub fn note(&self, message: String) {
        if let Some(run) = &self.0 {
            let mut st = run.lock();
            let p = st.progress.get_or_insert(Progress {
                done: None,
                total: None,
                message: None,
            });
            p.message = Some(message);
        }
    }

    /// Whether someone asked this call to stop.
    pub fn cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|r| r.cancel_requested())
    }

    /// The host can stop this call: `stop` runs (once) when someone cancels the run, at
    /// once if someone already did. The host then ends the call with
    /// `HostError::Cancelled` (or its outcome, if it finished first).
    pub fn on_cancel(&self, stop: impl FnOnce() + Send + 'static) {
        let Some(run) = &self.0 else { return };
        let mut st = run.lock();
        st.host_stops = true;
        if st.cancel_requested {
            drop(st);
            stop();
        } else {
            st.hook = Some(Box::new(stop));
        }
    }

    /// The run's journal id, if this call is a run.
    pub fn run_id(&self) -> Option<i64> {
        self.0.as_ref().map(|r| r.id)
    }
}

impl std::fmt::Debug for RunSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(r) => write!(f, "RunSignal({})", r.id),
            None => f.write_str("RunSignal(none)"),
        }
    }
}

/// Two callers are the same whichever run they are in.
impl PartialEq for RunSignal {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for RunSignal {}
