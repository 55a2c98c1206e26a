//! Policy and approvals in the call pipeline. The manifest's `[[policy]]` rules (and hosts'
//! defaults) add their lines to every guard; a call an `approve` rule holds becomes a
//! pending run (EINPROGRESS) that a person approves or denies from outside the mount
//! (`wip approve`, over the daemon's control socket, never from the caller's own session
//! unless the rule allows it). An approved run is checked again (schema, guard, policy)
//! and runs with its recorded arguments as its recorded caller, through the same pipeline
//! as any call; denied and expired runs never run.

use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use super::doc::CallReport;
use super::policy::{self, Policy, Rule};
use super::Pipeline;
use crate::host::{self, Caller, Session};
use crate::state::{
    Approval, Clean, Decider, Event, NewApproval, Run, RunChange, DENIED, EXPIRED, PENDING, RUNNING,
};
use crate::world::error::{ErrorKind, WorldError, WorldResult};
use crate::world::node::*;
use crate::world::{line, readme};

/// How many pending runs `.wip/pending` lists.
const PENDING_SHOWN: usize = 1000;
/// The expiry watch looks again at least this often (it is woken for new pending runs).
const EXPIRY_TICK: Duration = Duration::from_secs(60);

/// The world's policy and what its pending runs need.
pub(in crate::world) struct Approvals {
    pub(super) policy: std::sync::Arc<Policy>,
    expiry: Arc<Wakeup>,
    thread: OnceLock<()>,
    /// Where the control socket listens (shown in `.wip/control`).
    control: Mutex<Option<String>>,
}

impl Approvals {
    pub(in crate::world) fn new(policy: std::sync::Arc<Policy>) -> Approvals {
        Approvals {
            policy,
            expiry: Arc::default(),
            thread: OnceLock::new(),
            control: Mutex::new(None),
        }
    }
}

#[derive(Default)]
struct Wakeup {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wakeup {
    fn wake(&self) {
        if let Ok(mut w) = self.woken.lock() {
            *w = true;
            self.cv.notify_all();
        }
    }

    fn wait(&self, limit: Duration) {
        let Ok(w) = self.woken.lock() else { return };
        if let Ok((mut w, _)) = self.cv.wait_timeout_while(w, limit, |w| !*w) {
            *w = false;
        }
    }
}

/// Who decides, as the control socket's peer credentials and `/proc` tell.
#[derive(Clone, Debug, Default)]
pub struct Person {
    pub decider: Decider,
    /// The sessions of the deciding process and of its ancestors: a decision from the
    /// caller's session (or a process it started, even in a new session) is the caller's.
    pub sessions: Vec<Session>,
}

/// A person's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verb {
    Approve,
    Deny { reason: Option<String> },
}

/// What a decision did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    pub text: String,
    /// For an approval: whether the call that ran then succeeded.
    pub call_ok: bool,
}

/// `…/ops/OP/runs/ID`, optionally followed by one of the run's files: the entry's world
/// path, the op and the run id.
fn parse_run_path(rest: &str) -> Option<(String, String, i64)> {
    let segs: Vec<&str> = rest
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    (0..segs.len()).rev().find_map(|i| {
        let is_ops = segs[i] == "ops" || segs[i] == crate::world::tree::OPS_DIR;
        let fits = is_ops && segs.len() >= i + 4 && segs.len() <= i + 5;
        if !fits || segs[i + 2] != "runs" {
            return None;
        }
        let id = segs[i + 3].parse().ok()?;
        Some((
            format!("/{}", segs[..i].join("/")),
            segs[i + 1].to_string(),
            id,
        ))
    })
}

impl Pipeline {
    /// Say where the control socket listens (`.wip/control` shows it).
    pub fn set_control_socket(&self, path: &std::path::Path) {
        if let Ok(mut c) = self.approvals.control.lock() {
            *c = Some(path.display().to_string());
        }
    }

    /// The uids the policy's rules let decide.
    pub fn policy_approvers(&self) -> Vec<u32> {
        let mut uids: Vec<u32> = self
            .approvals
            .policy
            .rules()
            .iter()
            .flat_map(|r| r.approvers.iter().copied())
            .collect();
        uids.sort_unstable();
        uids.dedup();
        uids
    }

    /// The uids that may decide runs still pending (perhaps under an earlier manifest).
    pub fn pending_approvers(&self) -> Vec<u32> {
        let mut uids: Vec<u32> = match self.journal.pending_approvals(usize::MAX >> 1) {
            Ok(list) => list
                .iter()
                .flat_map(|a| a.approvers.iter().copied())
                .collect(),
            Err(e) => {
                tracing::error!("journal: {e}");
                Vec::new()
            }
        };
        uids.sort_unstable();
        uids.dedup();
        uids
    }

    /// Hold a journaled call for a person's sign-off: a pending run, EINPROGRESS with the
    /// words saying where it waits and how a person decides.
    pub(in crate::world) fn hold(
        &self,
        target: &Target,
        op: &str,
        caller: &Caller,
        id: i64,
        rule: &Rule,
    ) -> CallReport {
        let path = self.target_path(target);
        let rule_text = rule.describe();
        let new = NewApproval {
            rule: rule.number,
            rule_text: Clean::new(&rule_text),
            approvers: &rule.approvers,
            self_approve: rule.self_approve,
            expires_after: rule.expires_after,
        };
        let event = Event::of_run(PENDING, &path, op, self.seq_of(id), PENDING);
        let outcome = match self.journal.hold(id, &new, &event) {
            Ok(a) => Err(WorldError::new(
                ErrorKind::Pending,
                self.pending_words(&path, op, rule, &a),
            )),
            Err(e) => Err(WorldError::backend(format!(
                "cannot hold the call for a person's sign-off ({e}); it did not run"
            ))),
        };
        let report = self.complete(target, op, caller, id, outcome);
        self.publish(&[NodeId::WipFile(WipFile::Pending)]);
        self.approvals.expiry.wake();
        report
    }

    fn pending_words(&self, path: &str, op: &str, rule: &Rule, a: &Approval) -> String {
        let run = self.run_dir(path, op, a.run);
        let wip = readme::wip_command();
        let approvers: Vec<String> = a.approvers.iter().map(|u| policy::user_words(*u)).collect();
        let expiry = match (&a.expires, rule.expires_after) {
            (Some(at), Some(after)) => format!(
                "It expires at {at} (after {}).",
                policy::duration_words(after)
            ),
            _ => "It does not expire.".to_string(),
        };
        format!(
            "needs a person's sign-off (rule {n}: {rule_text}); the call waits as the pending run {run}\n\
             A person decides, outside this mount{session}:\n  \
             {wip} approve {run}\n  \
             {wip} deny {run} [--reason …]\n\
             Who may decide: {approvers}. {expiry}\n\
             Its outcome will appear in {run}/result; {pending} lists every pending run.",
            n = rule.number,
            rule_text = a.rule_text,
            session = if a.self_approve {
                ""
            } else {
                " and not from this terminal session"
            },
            approvers = approvers.join(", "),
            pending = self.entries.absolute("/.wip/pending"),
        )
    }

    /// A person's decision on a pending run, named by its path in the mount
    /// (`…/ops/OP/runs/ID`) or its id. An approval runs the call and waits for it (at most
    /// the call timeout).
    /// `in_tree` is the run a path inside the mount leads to through the tree, if any.
    pub(in crate::world) fn decide(
        self: &Arc<Self>,
        run_ref: &str,
        in_tree: impl Fn(&str) -> Option<i64>,
        verb: &Verb,
        who: &Person,
    ) -> WorldResult<Decided> {
        let id = self.run_named(run_ref, in_tree)?;
        // A run whose time is up expired, whether or not the watch got to it yet.
        self.expire_now();
        let run = self.run(id)?;
        let approval = self.journal.approval(id)?.ok_or_else(|| {
            WorldError::invalid(format!(
                "{} did not wait for a person's sign-off (its status is {})",
                self.run_dir(&run.path, &run.op, id),
                run.status
            ))
        })?;
        may_decide(&approval, &run, &self.run_dir(&run.path, &run.op, id), who)?;
        match verb {
            Verb::Deny { reason } => self.deny(&run, who, reason.as_deref()),
            Verb::Approve => Ok(self.approve(&run, who)?),
        }
    }

    fn deny(&self, run: &Run, who: &Person, reason: Option<&str>) -> WorldResult<Decided> {
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        let text = format!(
            "error: denied by {}{}; the call never ran\n",
            policy::user_words(who.decider.uid),
            reason.map(|r| format!(": {r}")).unwrap_or_default()
        );
        let change = RunChange {
            status: DENIED,
            // A person's no is a refusal by policy: the one table's EACCES.
            errno: ErrorKind::Forbidden.errno(),
            result: Some(Clean::new(&text)),
            guard: None,
        };
        self.record_decision(run, "denied", who, reason, &change)?;
        Ok(Decided {
            text: format!(
                "denied {}; the call never ran\n",
                self.run_dir(&run.path, &run.op, run.id)
            ),
            call_ok: true,
        })
    }

    fn approve(self: &Arc<Self>, run: &Run, who: &Person) -> WorldResult<Decided> {
        let target = self.target_at(&run.path);
        // Checked again now: the op, the arguments against today's schema, the guard and
        // the policy (a rule may deny it now).
        let by = format!("{} at the decision", policy::user_words(who.decider.uid));
        let prepared = target
            .clone()
            .ok_or_else(|| {
                WorldError::not_found(format!("{} is no longer in this calls", run.path))
            })
            .and_then(|t| {
                let spec = self.entries.op_spec(&t, &run.op)?;
                let args = super::args::parse_and_validate(run.args.as_bytes(), &spec.schema)?;
                let mut guard = self.host_guard(&t, &run.op, Some(&args))?;
                self.apply_policy(&t, &run.op, Some(&args), Some(&by), &mut guard);
                Ok((t, args, guard))
            });
        let guard_text = prepared.as_ref().ok().map(|(_, _, g)| g.render());
        let change = RunChange {
            status: RUNNING,
            errno: 0,
            result: None,
            guard: guard_text.as_deref().map(Clean::new),
        };
        self.record_decision(run, "approved", who, None, &change)?;
        let caller = Caller {
            pid: run.pid,
            uid: run.uid,
            session: run.session,
            session_start: run.session_start,
            command: run.command.clone(),
            run: String::new(),
            signal: Default::default(),
            judged: None,
        };
        let (id, op) = (run.id, run.op.as_str());
        let report = match prepared {
            Ok((t, args, guard)) if guard.allowed() => {
                let (tx, rx) = std::sync::mpsc::channel();
                let reply = Box::new(move |r| {
                    let _ = tx.send(r);
                });
                Arc::clone(self).dispatch(&t, op, &caller, who.decider.pid, id, args, reply);
                rx.recv().unwrap_or_else(|_| CallReport {
                    run: id,
                    text: Arc::from("error: the call ended without a report\n"),
                    outcome: Err(WorldError::backend("the call ended without a report")),
                })
            }
            Ok((t, _, guard)) => self.complete(
                &t,
                op,
                &caller,
                id,
                Err(host::HostError::Blocked(guard).into()),
            ),
            Err(e) => match &target {
                Some(t) => self.complete(t, op, &caller, id, Err(e)),
                None => self.finish_orphan(&run.path, op, id, e),
            },
        };
        let ran = match &report.outcome {
            Err(e) if e.kind == ErrorKind::CallerGone => {
                "it runs on; its outcome will appear in its result".to_string()
            }
            _ => format!("it ran:\n{}", report.text),
        };
        Ok(Decided {
            text: format!("approved {}; {ran}", self.run_dir(&run.path, op, id)),
            call_ok: report.outcome.is_ok(),
        })
    }

    /// Record a decision with its event, unless someone decided first; tell the kernel.
    fn record_decision(
        &self,
        run: &Run,
        state: &str,
        who: &Person,
        reason: Option<&str>,
        change: &RunChange<'_>,
    ) -> WorldResult<()> {
        let event = Event::of_run(state, &run.path, &run.op, run.seq, state);
        let reason = reason.map(Clean::new);
        if !self.journal.decide(
            run.id,
            state,
            &who.decider,
            reason.as_ref(),
            change,
            &[event],
        )? {
            return Err(self.lost_race(run.id));
        }
        self.publish_decision(self.target_at(&run.path).as_ref(), &run.op, run.id);
        Ok(())
    }

    /// The run a decision names: an id, or a run's path inside this mount.
    fn run_named(&self, run_ref: &str, in_tree: impl Fn(&str) -> Option<i64>) -> WorldResult<i64> {
        let run_ref = run_ref.trim();
        if let Ok(id) = run_ref.parse::<i64>() {
            self.run(id)?;
            return Ok(id);
        }
        let mount = self.entries.mount_point().display().to_string();
        let mount = mount.trim_end_matches('/');
        let rest = run_ref
            .strip_prefix(mount)
            .filter(|r| r.is_empty() || r.starts_with('/'))
            .ok_or_else(|| {
                WorldError::invalid(format!(
                    "{run_ref} is not inside this mount ({mount}); name a run as {mount}/…/ops/OP/runs/ID, or by its id"
                ))
            })?;
        // Through the tree first: `ops/`, `.ops/` and titled names are the same run.
        if let Some(id) = in_tree(rest) {
            self.run(id)?;
            return Ok(id);
        }
        let (path, op, seq) = parse_run_path(rest).ok_or_else(|| {
            WorldError::invalid(format!(
                "{run_ref} is not a run's path: runs are …/ops/OP/runs/ID (see {mount}/.wip/pending)"
            ))
        })?;
        self.journal.numbered(&path, &op, seq)?.ok_or_else(|| {
            WorldError::not_found(format!("{run_ref}: {op} on {path} has no run {seq}"))
        })
    }

    /// The target of a world path, whether or not its entry still exists.
    fn target_at(&self, world_path: &str) -> Option<Target> {
        if world_path == "/" {
            return Some(Target::Root);
        }
        self.entries.entry_ref_at(world_path).map(Target::Entry)
    }

    fn lost_race(&self, id: i64) -> WorldError {
        let named = match self.journal.get(id) {
            Ok(Some(run)) => self.run_dir(&run.path, &run.op, id),
            _ => format!("run {id}"),
        };
        match self.journal.approval(id) {
            Ok(Some(a)) => already_decided(&a, &named),
            _ => WorldError::invalid(format!("{named}: already decided")),
        }
    }

    /// An approved run whose entry left the world: its outcome, recorded directly.
    fn finish_orphan(&self, path: &str, op: &str, id: i64, e: WorldError) -> CallReport {
        let text = format!("error: {e}\n");
        let event = Event::of_run("call", path, op, self.seq_of(id), e.kind.status());
        if let Err(err) = self.journal.finish(
            id,
            e.kind.status(),
            e.errno(),
            &Clean::new(&text),
            &[],
            &[event],
        ) {
            tracing::error!(run = id, "journal: {err}");
        }
        self.publish(&[
            NodeId::WipFile(WipFile::Log),
            NodeId::WipFile(WipFile::Events),
        ]);
        CallReport {
            run: id,
            text: Arc::from(text),
            outcome: Err(e),
        }
    }

    /// A decision (or an expiry) changed a run: its files, its op's runs and result, the
    /// pending list, the feed and the log.
    fn publish_decision(&self, target: Option<&Target>, op: &str, id: i64) {
        let mut nodes: Vec<NodeId> = RunFile::ALL
            .iter()
            .map(|(_, f)| NodeId::RunFile(id, *f))
            .collect();
        nodes.push(NodeId::RunFile(id, RunFile::Approval));
        if let Some(t) = target {
            nodes.push(NodeId::Runs(t.clone(), intern(op)));
            nodes.push(NodeId::OpFile(t.clone(), intern(op), OpFile::Result));
        }
        nodes.extend(
            [WipFile::Pending, WipFile::Events, WipFile::Log]
                .into_iter()
                .map(NodeId::WipFile),
        );
        self.publish(&nodes);
    }

    /// Expire every pending run whose time is up.
    pub(in crate::world) fn expire_now(&self) {
        let expired = self.journal.expire_due(&|a| {
            Clean::owned(format!(
                "error: expired at {}: nobody decided in time (rule {}); the call never ran\n",
                a.expires.as_deref().unwrap_or("?"),
                a.rule
            ))
        });
        match expired {
            Ok(list) => {
                for x in list {
                    let target = self.target_at(&x.path);
                    self.publish_decision(target.as_ref(), &x.op, x.approval.run);
                }
            }
            Err(e) => tracing::error!("journal: cannot expire pending runs: {e}"),
        }
    }

    /// Start the thread that expires pending runs when their time is up (also those that
    /// expired while the world was not mounted).
    pub fn start_approvals(self: &Arc<Self>) -> std::io::Result<()> {
        if self.approvals.thread.get().is_some() {
            return Ok(());
        }
        let calls: Weak<Pipeline> = Arc::downgrade(self);
        let wake = Arc::clone(&self.approvals.expiry);
        std::thread::Builder::new()
            .name("approvals-expiry".into())
            .spawn(move || loop {
                let Some(w) = calls.upgrade() else { return };
                w.expire_now();
                let next = match w.journal.next_expiry() {
                    Ok(n) => n.unwrap_or(EXPIRY_TICK),
                    Err(e) => {
                        tracing::error!("journal: {e}");
                        EXPIRY_TICK
                    }
                };
                drop(w);
                // A few ms past the due time: the journal's clock must have passed it.
                wake.wait(next.min(EXPIRY_TICK) + Duration::from_millis(5));
            })?;
        let _ = self.approvals.thread.set(());
        Ok(())
    }

    // ---- what the mount shows ------------------------------------------------------

    /// `.wip/pending`: one line per run waiting for a decision, oldest first.
    pub(in crate::world) fn pending_text(&self) -> WorldResult<String> {
        let mut out = String::new();
        for a in self.journal.pending_approvals(PENDING_SHOWN)? {
            let Some(run) = self.journal.get(a.run)? else {
                continue;
            };
            let mut args = crate::host::names::shown(&run.args).into_owned();
            if args.chars().count() > 200 {
                args = args.chars().take(200).collect::<String>() + "…";
            }
            out.push_str(&format!(
                "{}\t{} on {} · args {} · called by pid {} ({}) session {} at {} · rule {} · expires {}\n",
                crate::host::names::shown(&self.run_dir(&run.path, &run.op, a.run)),
                run.op,
                crate::host::names::shown(&run.path),
                args,
                run.pid,
                crate::host::names::shown(run.command.split(' ').next().unwrap_or("")),
                run.session,
                a.requested,
                a.rule,
                a.expires.as_deref().unwrap_or("never"),
            ));
        }
        if out.is_empty() {
            out.push_str("no pending runs\n");
        }
        Ok(out)
    }

    /// `runs/ID/approval`: what the run asked for and who decided.
    pub(in crate::world) fn approval_text(&self, id: i64) -> WorldResult<String> {
        let a = self
            .journal
            .approval(id)?
            .ok_or_else(|| WorldError::not_found(format!("run {id} needed no approval")))?;
        let mut out = line(&decision_words(&a));
        if let Some(d) = &a.decider {
            out.push_str(&format!(
                "decider pid {} · session {} · {}\n",
                d.pid, d.session, d.command
            ));
        }
        if let Some(r) = &a.reason {
            out.push_str(&line(&format!("reason {r}")));
        }
        let approvers: Vec<String> = a.approvers.iter().map(|u| policy::user_words(*u)).collect();
        out.push_str(&format!(
            "rule {}: {}\napprovers {}{}\nrequested {}\nexpires {}\n",
            a.rule,
            a.rule_text,
            approvers.join(", "),
            if a.self_approve {
                " (also from the caller's session)"
            } else {
                ""
            },
            a.requested,
            a.expires.as_deref().unwrap_or("never"),
        ));
        Ok(out)
    }

    /// Whether a run has an `approval` file.
    pub(in crate::world) fn has_approval(&self, id: i64) -> WorldResult<bool> {
        Ok(self.journal.approval(id)?.is_some())
    }

    /// `.wip/control`: where `wip approve` and `wip deny` reach the daemon.
    pub(in crate::world) fn control_text(&self) -> String {
        match self.approvals.control.lock().ok().and_then(|c| c.clone()) {
            Some(path) => line(&path),
            None => "no control socket: decisions cannot be made for this calls\n".to_string(),
        }
    }
}

/// Whether `who` may decide this pending run: an approver, and (unless the rule lets the
/// caller decide) not from the caller's session or a process started in it.
fn may_decide(approval: &Approval, run: &Run, named: &str, who: &Person) -> WorldResult<()> {
    if approval.state != PENDING {
        return Err(already_decided(approval, named));
    }
    if !approval.approvers.contains(&who.decider.uid) {
        let names: Vec<String> = approval
            .approvers
            .iter()
            .map(|u| policy::user_words(*u))
            .collect();
        return Err(WorldError::new(
            ErrorKind::Forbidden,
            format!(
                "{} may not decide {named}: rule {} lets only {} decide",
                policy::user_words(who.decider.uid),
                approval.rule,
                names.join(", ")
            ),
        ));
    }
    // The very session that called, not another given its number since (an unknown
    // start counts as that session: when in doubt, the decision is the caller's own).
    let caller = run.caller_session();
    if !approval.self_approve && who.sessions.iter().any(|s| s.may_be_same_terminal(&caller)) {
        return Err(WorldError::new(
            ErrorKind::Forbidden,
            format!(
                "a decision from the caller's own session is refused: {named} was called from session {} (pid {}, {}), and so is this decision (or from a process started there); decide from another terminal, or set self_approve = true on rule {}",
                run.session,
                run.pid,
                run.command.split(' ').next().unwrap_or("?"),
                approval.rule
            ),
        ));
    }
    Ok(())
}

/// The state of a decided approval in words.
fn decision_words(a: &Approval) -> String {
    let who = a
        .decider
        .as_ref()
        .map(|d| policy::user_words(d.uid))
        .unwrap_or_else(|| "?".into());
    let at = a.decided_at.as_deref().unwrap_or("?");
    match a.state.as_str() {
        PENDING => "pending: waiting for a person's sign-off".to_string(),
        "approved" => format!("signed off by {who} at {at}"),
        "denied" => format!("denied by {who} at {at}; the call never ran"),
        EXPIRED => format!("expired at {at}: nobody decided in time; the call never ran"),
        "interrupted" => {
            "interrupted: the daemon stopped while the call was being held; it never ran"
                .to_string()
        }
        other => other.to_string(),
    }
}

fn already_decided(a: &Approval, named: &str) -> WorldError {
    WorldError::invalid(format!(
        "already decided: {named} was {}",
        decision_words(a)
    ))
}

#[cfg(test)]
mod tests;
