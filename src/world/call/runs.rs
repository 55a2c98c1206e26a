//! What runs show: a run as the journal has it (or as its caller was told, when the
//! journal missed its outcome), each session's `result`, `.wip/runs` and `.wip/log`, and
//! the runs a crash cut off, settled at start-up where their host can tell.

use std::time::SystemTime;

use super::Pipeline;
use crate::calendar::parse_iso;
use crate::host::{self, names, Session};
use crate::state::{self as journal, Run};
use crate::world::error::{ErrorKind, WorldError, WorldResult};
use crate::world::node::Target;
use crate::world::{line, LOG_LINES};

/// How many runs `.wip/runs` shows of each kind (in flight, ended).
const RUNS_SHOWN: usize = 200;
/// How many characters of a call's arguments and result `.wip/log` shows.
const LOG_CUT: usize = 300;

/// A text on one line: newlines, tabs and other control characters escaped.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

impl Pipeline {
    /// Runs a crash cut off, settled where their host can tell: a transactional host kept
    /// each run's id with its change (`Caller::run`), so a run it knows is `ok` with the
    /// result the host recorded, and one it does not know changed nothing (`not_run`).
    /// Runs of hosts that cannot tell stay `interrupted`. Returns how many were settled.
    pub(in crate::world) fn settle_interrupted(&self, ids: &[i64]) -> usize {
        let mut settled = 0;
        for &id in ids {
            let Ok(Some(run)) = self.journal.get(id) else {
                continue;
            };
            let Some(e) = self.entries.entry_ref_at(&run.path) else {
                continue;
            };
            let Some(m) = self.entries.hosts().get(e.host) else {
                continue;
            };
            let key = format!("{}:{id}", self.journal.id());
            let (status, errno, text) = match m.host.settle(&e.path, &run.op, &key) {
                Ok(Some(host::Settled::Done(result))) => (
                    "ok",
                    0,
                    format!(
                        "(settled after a restart: the daemon stopped before it recorded this call's outcome, and {} says the call's change was made)\n{}",
                        m.path.join("/"),
                        line(&result)
                    ),
                ),
                Ok(Some(host::Settled::NotRun)) => (
                    crate::state::NOT_RUN,
                    // Nothing ran, as a call stopped before it started: ECANCELED.
                    ErrorKind::Cancelled.errno(),
                    format!(
                        "error: not run: the daemon stopped before this call's change was made ({} has no record of it); nothing changed, and calling again is safe\n",
                        m.path.join("/")
                    ),
                ),
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(run = id, "cannot settle an interrupted run: {err}");
                    continue;
                }
            };
            match self
                .journal
                .settle(id, status, errno, &crate::state::Clean::new(&text))
            {
                Ok(true) => settled += 1,
                Ok(false) => {}
                Err(err) => tracing::warn!(run = id, "cannot settle an interrupted run: {err}"),
            }
        }
        settled
    }

    pub(in crate::world) fn run(&self, id: i64) -> WorldResult<Run> {
        let mut run = self
            .journal
            .get(id)?
            .ok_or_else(|| WorldError::not_found(format!("no run {id}")))?;
        // The journal missed this outcome: show what the caller was told.
        if let Some(text) = self
            .unrecorded
            .lock()
            .ok()
            .and_then(|u| u.get(&id).cloned())
        {
            run.result = text;
        }
        Ok(run)
    }

    /// When a run ended (or began, while it runs).
    pub(in crate::world) fn run_time(&self, id: i64) -> WorldResult<Option<SystemTime>> {
        let run = self.run(id)?;
        Ok(parse_iso(run.finished.as_deref().unwrap_or(&run.started)))
    }

    pub(in crate::world) fn result_for(
        &self,
        target: &Target,
        op: &str,
        session: Session,
    ) -> WorldResult<String> {
        match self.result_run(target, op, session)? {
            Some(id) => Ok(self.shown_result(&self.run(id)?)),
            None => Ok(String::new()),
        }
    }

    /// A run's result; while it runs, where it got and how to wait for it or stop it.
    pub(in crate::world) fn shown_result(&self, run: &Run) -> String {
        if run.status == journal::RUNNING && run.result.is_empty() {
            self.running_text(run)
        } else {
            run.result.clone()
        }
    }

    /// The run whose result `session` sees in `result`: its last call, else the latest
    /// call of its uid; on this mount only, so no other user's and no other mount's
    /// result shows.
    pub(in crate::world) fn result_run(
        &self,
        target: &Target,
        op: &str,
        session: Session,
    ) -> WorldResult<Option<i64>> {
        let key = (target.clone(), op.to_string());
        let remembered = self.results.lock().ok().and_then(|r| {
            r.get(&key)
                .and_then(|o| o.by_session.get(&session).copied())
        });
        match remembered {
            Some(id) => Ok(Some(id)),
            // Its own calls from before a restart are in the journal too.
            None => Ok(self
                .journal
                .latest_for(&self.target_path(target), op, &session)?),
        }
    }

    /// `.wip/runs`: every run in flight (any mount's), then the latest that ended, one a
    /// line: status, start, how long, the run's path, progress.
    pub(in crate::world) fn runs_text(&self) -> WorldResult<String> {
        let running = self.journal.running_runs(RUNS_SHOWN)?;
        let mut out = String::new();
        for run in &running {
            out.push_str(&self.run_line(run));
            out.push('\n');
        }
        for run in self.journal.recent_brief(RUNS_SHOWN, 0)? {
            if run.status != journal::RUNNING {
                out.push_str(&self.run_line(&run));
                out.push('\n');
            }
        }
        if out.is_empty() {
            out.push_str("no runs yet\n");
        }
        Ok(out)
    }

    /// One run on a line, as `.wip/runs` and `.wip/status` show it.
    pub(in crate::world) fn run_line(&self, run: &Run) -> String {
        let dir = self.entries.absolute(&self.run_world_path(run));
        let mut line = format!(
            "{:<10} {} {:>8} {}",
            run.status,
            run.started,
            self.run_took(run),
            names::shown(&dir)
        );
        if let Some(p) = self.progress_line(run.id) {
            line.push_str(&format!(" · {p}"));
        }
        line
    }

    pub(in crate::world) fn log_text(&self) -> WorldResult<String> {
        let mut out = String::new();
        // One line per call, whatever its arguments and result hold.
        for run in self.journal.recent_brief(LOG_LINES, LOG_CUT)? {
            out.push_str(&format!(
                "#{} {} {:<11} {} {} args={} pid={} ({}) → {}\n",
                run.id,
                run.started,
                run.status,
                run.path,
                run.op,
                one_line(&run.args),
                run.pid,
                run.command.split(' ').next().unwrap_or(""),
                one_line(run.result.trim_end())
            ));
        }
        if out.is_empty() {
            out.push_str("no calls yet\n");
        }
        Ok(out)
    }
}
