//! The world's policy: the manifest's `[[policy]]` rules (allow, deny, or wait for a
//! person's approval), matched against an op's world path `ENTRY/ops/NAME`, first match
//! wins, then a host's own default for the op (the mcp host's annotation allow lists).
//!
//! Pure: globs, argument matching and the guard lines a verdict shows. Applying it to calls
//! (pending runs, decisions) is `approvals`; reading it from TOML is `manifest`.

use std::time::Duration;

use serde_json::{Map, Value};

use super::Pipeline;
use crate::host::names;
use crate::host::{Condition, Guard};
use crate::world::error::WorldResult;
use crate::world::node::{EntryRef, Target};

/// The guard line of a rule that asks a person to decide: its own word, never "approval",
/// so it cannot be read as a pull request's review approval beside it.
pub const SIGN_OFF: &str = "sign_off";

/// What a rule does with the calls it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Deny,
    /// The call waits as a pending run until a person approves or denies it.
    Approve,
    /// The matched paths are absent for every reader: not listed, not found by path, not
    /// searched, not known; a change that would act on them without showing them is
    /// refused (EACCES).
    Hide,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Approve => "approve",
            Action::Hide => "hide",
        }
    }

    /// How strict a verdict is, where several places of one call meet different rules:
    /// deny over approve over allow.
    fn severity(self) -> u8 {
        match self {
            Action::Allow => 1,
            Action::Approve => 2,
            Action::Deny | Action::Hide => 3,
        }
    }
}

pub use crate::host::HostDefault;

pub use crate::host::glob::Glob;

/// One `[[policy]]` rule, checked and resolved (user names are uids here).
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// 1-based position in the manifest, as guards and runs name it.
    pub number: usize,
    pub pattern: Glob,
    pub action: Action,
    /// The rule applies only to calls whose arguments contain these.
    pub args: Option<Map<String, Value>>,
    /// Who may decide (approve rules): uids.
    pub approvers: Vec<u32>,
    /// A pending run nobody decided expires after this long.
    pub expires_after: Option<Duration>,
    /// Whether a decision from the caller's own session counts.
    pub self_approve: bool,
    /// Words the guard and the refusal add (why the rule exists).
    pub reason: Option<String>,
}

impl Rule {
    /// `match "PATTERN"`, with the arguments when the rule has some: how guards name it.
    pub fn describe(&self) -> String {
        let mut s = format!("match {:?}", self.pattern.as_str());
        if let Some(args) = &self.args {
            s.push_str(&format!(", args {}", Value::Object(args.clone())));
        }
        s
    }

    /// Whether the call's arguments contain every key of the rule's `args` with that value;
    /// an array argument contains a value it holds (`add = "wontfix"` matches
    /// `{"add": ["bug", "wontfix"]}`), or every value of an array the rule gives.
    fn args_match(&self, args: &Value) -> bool {
        let Some(want) = &self.args else {
            return true;
        };
        want.iter().all(|(k, v)| {
            args.get(k).is_some_and(|a| match (a, v) {
                (Value::Array(have), Value::Array(need)) => {
                    need.iter().all(|n| have.iter().any(|h| same_value(h, n)))
                }
                (Value::Array(have), one) => have.iter().any(|h| same_value(h, one)),
                _ => same_value(a, v),
            })
        })
    }
}

/// JSON equality where numbers compare by value (TOML's `1` and JSON's `1.0` are one).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// What the rules say about one call (or, without arguments, about the op as `guard` shows it).
#[derive(Debug, Default)]
pub struct Verdict<'a> {
    /// The rule that decides: at each place the call acts on the first rule that matches
    /// decides, and of those places' rules the strictest (deny over approve over allow).
    pub rule: Option<&'a Rule>,
    /// Earlier rules that match the path but depend on arguments not known yet.
    pub depends_on_args: Vec<&'a Rule>,
}

impl Verdict<'_> {
    /// The rule that makes this call wait for a person, if one does.
    pub fn approval(&self) -> Option<&Rule> {
        self.rule.filter(|r| r.action == Action::Approve)
    }
}

/// One place a call acts on, as the rules see it: the names they are matched against
/// (`ENTRY/ops/NAME`; for a files host also the path itself, `files/src/main.rs`) and,
/// for an op over a whole directory (removing or renaming it), that directory's path:
/// then every rule that can match a path below it counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subjects {
    pub names: Vec<String>,
    pub within: Option<String>,
}

impl Subjects {
    /// A place named by its op path alone.
    pub fn op(path: impl Into<String>) -> Subjects {
        Subjects {
            names: vec![path.into()],
            within: None,
        }
    }
}

/// The manifest's rules, in order.
/// Why the policy refuses a change through a working tree: the words its run's `result`
/// and the op's `guard` show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ChangeRefused(pub String);

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    pub fn new(rules: Vec<Rule>) -> Policy {
        Policy { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether any rule hides paths.
    pub fn hides_any(&self) -> bool {
        self.rules.iter().any(|r| r.action == Action::Hide)
    }

    /// The rule that hides the world path `path` (no leading `/`), if one does: hiding
    /// does not depend on order, any `hide` rule that matches it does.
    pub fn hiding(&self, path: &str) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|r| r.action == Action::Hide && r.pattern.matches(path))
    }

    /// The verdict for the op at `op_path` (`ENTRY/ops/NAME`) alone; `args` are the
    /// call's, or `None` for the guard as the `guard` file shows it.
    pub fn verdict(&self, op_path: &str, args: Option<&Value>) -> Verdict<'_> {
        let op = op_path.rsplit('/').next().unwrap_or("");
        self.judge(&[Subjects::op(op_path)], op, args)
    }

    /// The verdict for a call of `op` that acts on every place in `places`: at each place
    /// the first rule that matches one of its names decides; over a whole directory, every
    /// rule that can match below it counts too; and of all these the strictest wins.
    pub fn judge(&self, places: &[Subjects], op: &str, args: Option<&Value>) -> Verdict<'_> {
        let mut verdict = Verdict::default();
        for place in places {
            for rule in self.rules.iter().filter(|r| r.action != Action::Hide) {
                if !place.names.iter().any(|n| rule.pattern.matches(n)) {
                    continue;
                }
                match (rule.args.is_some(), args) {
                    (false, _) => {
                        stricter(&mut verdict, rule);
                        break;
                    }
                    (true, Some(a)) if rule.args_match(a) => {
                        stricter(&mut verdict, rule);
                        break;
                    }
                    (true, Some(_)) => {}
                    (true, None) => push_rule(&mut verdict.depends_on_args, rule),
                }
            }
            let Some(within) = &place.within else {
                continue;
            };
            // Below a directory the op acts on, whatever rule could match there counts
            // (hide rules too: what is hidden must not move or go unseen).
            for rule in self
                .rules
                .iter()
                .filter(|r| r.pattern.matches_within(within, Some(op)))
            {
                match (rule.args.is_some(), args) {
                    (false, _) => stricter(&mut verdict, rule),
                    (true, Some(a)) if rule.args_match(a) => stricter(&mut verdict, rule),
                    (true, Some(_)) => {}
                    (true, None) => push_rule(&mut verdict.depends_on_args, rule),
                }
            }
        }
        verdict
    }

    /// The guard lines of a verdict: one per rule that depends on arguments, then the
    /// deciding rule's, else the host's default. `approved` says who approved this run
    /// (it is being run after a person's sign-off).
    pub fn conditions(
        verdict: &Verdict<'_>,
        host_default: Option<HostDefault>,
        approved: Option<&str>,
    ) -> Vec<Condition> {
        let mut out: Vec<Condition> = verdict
            .depends_on_args
            .iter()
            .map(|r| {
                let what = match r.action {
                    Action::Allow => "allows",
                    Action::Deny | Action::Hide => "denies",
                    Action::Approve => "asks a person's sign-off for",
                };
                Condition::policy(
                    "policy",
                    true,
                    format!(
                        "rule {} ({}) {what} calls with those arguments; they are checked when the call runs",
                        r.number,
                        r.describe()
                    ),
                )
            })
            .collect();
        match verdict.rule {
            Some(r) => out.push(match r.action {
                Action::Allow => Condition::policy(
                    "policy",
                    true,
                    format!("allowed by rule {} ({})", r.number, r.describe()),
                ),
                Action::Deny => Condition::policy(
                    "policy",
                    false,
                    format!(
                        "denied by rule {} ({}){}",
                        r.number,
                        r.describe(),
                        r.reason.as_deref().map(|w| format!(": {w}")).unwrap_or_default()
                    ),
                ),
                // Met below a directory the call acts on: what is hidden there must not
                // move or go without being seen.
                Action::Hide => Condition::policy(
                    "policy",
                    false,
                    format!(
                        "this call would act on paths hidden by rule {} ({}){}; they cannot be changed through the mount",
                        r.number,
                        r.describe(),
                        r.reason.as_deref().map(|w| format!(": {w}")).unwrap_or_default()
                    ),
                ),
                Action::Approve => match approved {
                    Some(who) => Condition::check(
                        SIGN_OFF,
                        true,
                        format!("signed off by {who} (rule {})", r.number),
                    ),
                    None => Condition::check(
                        SIGN_OFF,
                        false,
                        format!(
                            "needs a person's sign-off (rule {}); the call will wait as a pending run{}",
                            r.number,
                            r.reason.as_deref().map(|w| format!(" ({w})")).unwrap_or_default()
                        ),
                    ),
                },
            }),
            None => {
                if let Some(d) = host_default {
                    out.push(Condition::policy("policy", d.allowed, d.words));
                }
            }
        }
        out
    }
}

/// `rule` decides `verdict` if it is stricter than the rule deciding it so far.
fn stricter<'a>(verdict: &mut Verdict<'a>, rule: &'a Rule) {
    if verdict
        .rule
        .is_none_or(|r| rule.action.severity() > r.action.severity())
    {
        verdict.rule = Some(rule);
    }
}

fn push_rule<'a>(rules: &mut Vec<&'a Rule>, rule: &'a Rule) {
    if !rules.iter().any(|r| r.number == rule.number) {
        rules.push(rule);
    }
}

/// Why `expires_after` is not a duration a rule can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("expires_after {0:?} is not a duration: write a number and a unit (ms, s, m, h, d), e.g. \"24h\", \"30m\", \"1h30m\"")]
    NotADuration(String),
    #[error("expires_after {0:?} must be longer than zero")]
    Zero(String),
}

/// A duration as manifests write it: `24h`, `30m`, `90s`, `500ms`, `2d`, `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError::NotADuration(text.to_string());
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            _ => return Err(bad()),
        };
        total = total.saturating_add(unit);
        rest = &rest[unit_len..];
    }
    if total.is_zero() {
        return Err(DurationError::Zero(text.to_string()));
    }
    Ok(total)
}

/// A duration in words, for results (`24h`, `1h 30m`, `45s`, `500ms`).
pub fn duration_words(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    let parts = [
        (s / 86_400, "d"),
        (s / 3600 % 24, "h"),
        (s / 60 % 60, "m"),
        (s % 60, "s"),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The uid of a user name, from the system's user database.
pub fn uid_of(name: &str) -> Option<u32> {
    let c_name = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: zeroed passwd is a valid out-parameter; every pointer outlives the call.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes only into pwd and buf, whose sizes are given.
    let rc = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    (rc == 0 && !found.is_null()).then_some(pwd.pw_uid)
}

/// The user name of a uid, if the system knows it.
pub fn name_of(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in uid_of.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes only into pwd and buf, whose sizes are given.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into buf, NUL-terminated by getpwuid_r.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// `alice (uid 1000)`, or `uid 4242` for a uid the system has no name for.
pub fn user_words(uid: u32) -> String {
    match name_of(uid) {
        Some(n) => format!("{n} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

// ---- the guard a call meets: the host's conditions, then the policy's -------------
// What a `guard` file shows is reused for a moment (a walk or a file manager reads each
// op's guard in turn); any change forgets it.

impl Pipeline {
    /// Whether opening `op`'s `call` is refused whatever the arguments: its guard fails
    /// and no person may approve it (an NFS ACCESS check asks, where there is no open).
    pub fn refuses_any_call(&self, target: &Target, op: &str) -> bool {
        match self.guard(target, op) {
            Ok(g) => !g.allowed() && self.awaits_approval(target, op, None, &g).is_none(),
            // A guard that cannot be read now is asked again when the document runs.
            Err(_) => false,
        }
    }

    /// The guard as the `guard` file shows it (cached briefly).
    pub fn guard(&self, target: &Target, op: &str) -> WorldResult<Guard> {
        if let Target::Run(_) = target {
            // A run's state changes on its own (it ends): never reused.
            return self.evaluate_guard(target, op, None);
        }
        let key = (target.clone(), op.to_string());
        if let Some(g) = self.guards.get(&key) {
            return Ok(g);
        }
        if let Some(g) = self.all_guards(target, op) {
            return Ok(g);
        }
        self.guards
            .get_or_try(key, || self.evaluate_guard(target, op, None))
    }

    /// Ask a host that can for the guards of all of the entry's ops at once and keep them
    /// (a walk or a file manager reads each op's `guard` in turn): `op`'s guard, or `None`
    /// when the host does not batch or failed (then `op` is asked alone).
    pub(in crate::world) fn all_guards(&self, target: &Target, op: &str) -> Option<Guard> {
        let Target::Entry(e) = target else {
            return None;
        };
        let ops = self.entries.ops(target).ok()?;
        let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
        let guards = self
            .entries
            .host(e)
            .ok()?
            .host
            .guards(&e.path, &names)?
            .ok()?;
        let mut wanted = None;
        for (name, mut guard) in names.iter().zip(guards) {
            self.apply_policy(target, name, None, None, &mut guard);
            if *name == op {
                wanted = Some(guard.clone());
            }
            self.guards
                .insert((target.clone(), name.to_string()), guard);
        }
        wanted
    }

    /// The host's guard, then the policy's lines.
    pub(in crate::world) fn evaluate_guard(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
    ) -> WorldResult<Guard> {
        let mut guard = self.host_guard(target, op, args)?;
        self.apply_policy(target, op, args, None, &mut guard);
        Ok(guard)
    }

    pub(in crate::world) fn host_guard(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
    ) -> WorldResult<Guard> {
        match target {
            Target::Root => Ok(Guard::default()),
            Target::Entry(e) if self.is_tree_root_op(e, op) => {
                self.tree_root_guard(e.host, op, args)
            }
            Target::Entry(e) => Ok(self.entries.host(e)?.host.guard(&e.path, op, args)?),
            Target::Run(id) => self.run_guard(*id, op),
        }
    }

    /// Whether the policy lets a call of `op` run now (or a person may approve it): a body
    /// the host offers to replace through `op` is writable (`rw-`) only then. The host's
    /// own guard was asked when it offered (`Body::write`), so only the policy is added.
    pub(in crate::world) fn may_run(&self, target: &Target, op: &str) -> bool {
        let mut g = crate::host::Guard::default();
        self.apply_policy(target, op, None, None, &mut g);
        g.allowed() || self.awaits_approval(target, op, None, &g).is_some()
    }

    /// `ENTRY/ops/NAME`, the path policy rules match.
    fn op_world_path(&self, target: &Target, op: &str) -> String {
        match target {
            Target::Entry(e) => self.entries.op_subject(e, op),
            _ => {
                let base = self.target_path(target);
                match base.trim_start_matches('/') {
                    "" => format!("ops/{op}"),
                    base => format!("{base}/ops/{op}"),
                }
            }
        }
    }

    /// Where a call acts, as the rules see it: its entry, then every place its host says
    /// the call acts on (`Host::acts_on`, with the call's arguments when known). `Err`:
    /// the host cannot tell, so no rule can be checked.
    pub(in crate::world) fn places(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
    ) -> WorldResult<Vec<(EntryRef, Subjects)>> {
        let Target::Entry(e) = target else {
            return Ok(Vec::new());
        };
        let mut places = vec![(e.clone(), self.entries.subjects(e, op, false))];
        let host = self.entries.host(e)?;
        for p in host.host.acts_on(&e.path, op, args)? {
            let at = EntryRef::new(e.host, p.path);
            let subjects = self.entries.subjects(&at, op, p.subtree);
            places.push((at, subjects));
        }
        Ok(places)
    }

    /// The rules' verdict on a call, judged at every place it acts on; with the words of
    /// why no verdict could be had, when the places cannot be told.
    fn verdict(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
    ) -> (Verdict<'_>, Option<String>) {
        let policy = &self.approvals.policy;
        if policy.is_empty() {
            return (Verdict::default(), None);
        }
        match self.places(target, op, args) {
            Ok(places) if places.is_empty() => (
                policy.judge(&[Subjects::op(self.op_world_path(target, op))], op, args),
                None,
            ),
            Ok(places) => {
                let subjects: Vec<Subjects> = places.into_iter().map(|(_, s)| s).collect();
                (policy.judge(&subjects, op, args), None)
            }
            // The entry itself is still judged; the call is refused for what is unknown.
            Err(why) => (
                policy.judge(&[Subjects::op(self.op_world_path(target, op))], op, args),
                Some(why.message),
            ),
        }
    }

    /// Add the policy's lines to a guard: the manifest's rules, else the host's default.
    /// `approved` names who approved the run being checked again before it runs.
    pub(in crate::world) fn apply_policy(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
        approved: Option<&str>,
        guard: &mut Guard,
    ) {
        let (verdict, unknown) = self.verdict(target, op, args);
        if let Some(why) = unknown {
            guard.conditions.push(Condition::policy(
                "policy",
                false,
                format!("cannot tell where this call acts ({why}); the policy's rules for it cannot be checked"),
            ));
        }
        let default = match (&verdict.rule, target) {
            (None, Target::Entry(e)) => self
                .entries
                .hosts()
                .get(e.host)
                .and_then(|m| m.host.policy_default(&e.path, op)),
            _ => None,
        };
        guard.conditions.extend(self.implied_conditions(target, op));
        guard
            .conditions
            .extend(Policy::conditions(&verdict, default, approved));
    }

    /// The rules for what a call also does (`Host::implied_ops`): a side effect a rule
    /// denies, or holds for a person's sign-off, refuses the call (EACCES), naming it. A
    /// person's yes is for the op it was asked for, never carried over to another.
    fn implied_conditions(&self, target: &Target, op: &str) -> Vec<Condition> {
        let (Target::Entry(e), false) = (target, self.approvals.policy.is_empty()) else {
            return Vec::new();
        };
        let Some(m) = self.entries.hosts().get(e.host) else {
            return Vec::new();
        };
        let implied = match m.host.implied_ops(&e.path, op) {
            Ok(i) => i,
            Err(err) => {
                return vec![Condition::policy(
                    "side_effects",
                    false,
                    format!("cannot tell what else this call would change ({err}); the policy's rules for it cannot be checked"),
                )]
            }
        };
        let mut out = Vec::new();
        for (path, side_op) in implied {
            let side = Target::Entry(EntryRef::new(e.host, path));
            let Some(rule) = self.verdict(&side, &side_op, None).0.rule else {
                continue;
            };
            let at = self.op_world_path(&side, &side_op);
            let why = rule
                .reason
                .as_deref()
                .map(|w| format!(": {w}"))
                .unwrap_or_default();
            let words = match rule.action {
                Action::Allow => continue,
                Action::Deny | Action::Hide => format!(
                    "this call would also run {at}, which rule {} ({}) denies{why}",
                    rule.number,
                    rule.describe()
                ),
                Action::Approve => format!(
                    "this call would also run {at}, which rule {} ({}) holds for a person's sign-off{why}; run that op first, then this one",
                    rule.number,
                    rule.describe()
                ),
            };
            out.push(Condition::policy("side_effects", false, words));
        }
        out
    }

    /// The decision on a change through a working tree (a POSIX call of `op` at the tree
    /// paths `places` of host `host`, each with whether all below it is acted on): the
    /// manifest's rules at every place, the strictest winning, else the host's own
    /// default. `Err` holds the refusal's words. A rule asking a person's sign-off cannot
    /// hold a system call open: it refuses, and its words name the op that can wait.
    pub(in crate::world) fn judge_change(
        &self,
        host: usize,
        op: &str,
        places: &[(Vec<String>, bool)],
        args: &Value,
    ) -> Result<(), ChangeRefused> {
        let Some((first, _)) = places.first() else {
            return Ok(());
        };
        let at = EntryRef::new(host, first.clone());
        let policy = &self.approvals.policy;
        let verdict = if policy.is_empty() {
            Verdict::default()
        } else {
            let subjects: Vec<Subjects> = places
                .iter()
                .map(|(p, subtree)| {
                    self.entries
                        .subjects(&EntryRef::new(host, p.clone()), op, *subtree)
                })
                .collect();
            policy.judge(&subjects, op, Some(args))
        };
        let why = |r: &Rule| {
            r.reason
                .as_deref()
                .map(|w| format!(": {w}"))
                .unwrap_or_default()
        };
        match verdict.rule {
            Some(r) => match r.action {
                Action::Allow => Ok(()),
                Action::Deny | Action::Hide => Err(ChangeRefused(format!(
                    "denied by rule {} ({}){}",
                    r.number,
                    r.describe(),
                    why(r)
                ))),
                Action::Approve => {
                    let explicit = match op {
                        "remove" | "rename" | "mkdir" => op,
                        _ => "write",
                    };
                    let entry = self.entries.entry_path(host, &at.path);
                    Err(ChangeRefused(format!(
                        "needs a person's sign-off (rule {} ({}){}); a change through the file system cannot wait for one: call {}/ops/{explicit}/call instead, which waits as a pending run",
                        r.number,
                        r.describe(),
                        why(r),
                        names::shown(&self.entries.absolute(&entry))
                    )))
                }
            },
            None => match self
                .entries
                .hosts()
                .get(host)
                .and_then(|m| m.host.policy_default(&at.path, op))
            {
                Some(d) if !d.allowed => Err(ChangeRefused(d.words)),
                _ => Ok(()),
            },
        }
    }

    /// The rule that makes this call wait for a person, when that is all that stands in its
    /// way (a guard failing otherwise refuses the call, as without a policy).
    pub(in crate::world) fn awaits_approval(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
        guard: &Guard,
    ) -> Option<Rule> {
        let (verdict, _) = self.verdict(target, op, args);
        let rule = verdict.approval()?;
        // The approval line is the guard's last (apply_policy adds it after the host's).
        let (last, rest) = guard.conditions.split_last()?;
        (last.name == super::policy::SIGN_OFF && !last.ok && rest.iter().all(|c| c.ok))
            .then(|| rule.clone())
    }

    /// Whether a policy rule asks a person's sign-off for this call.
    pub(in crate::world) fn awaits_approval_rule(
        &self,
        target: &Target,
        op: &str,
        args: &Value,
    ) -> bool {
        self.verdict(target, op, Some(args)).0.approval().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(number: usize, pattern: &str, action: Action) -> Rule {
        Rule {
            number,
            pattern: Glob::new(pattern).unwrap(),
            action,
            args: None,
            approvers: Vec::new(),
            expires_after: None,
            self_approve: false,
            reason: None,
        }
    }

    #[test]
    fn globs_match_segments() {
        let g = Glob::new("tracker/pulls/*/ops/merge").unwrap();
        assert!(g.matches("tracker/pulls/7/ops/merge"));
        assert!(!g.matches("tracker/pulls/7/ops/merge_all"));
        assert!(
            !g.matches("tracker/pulls/7/x/ops/merge"),
            "* stays in one segment"
        );
        assert!(!g.matches("tracker/issues/7/ops/merge"));
        let deep = Glob::new("tracker/**/ops/*").unwrap();
        assert!(
            deep.matches("tracker/ops/search"),
            "** matches no segment too"
        );
        assert!(deep.matches("tracker/issues/42/comments/1/ops/edit"));
        assert!(!deep.matches("files/ops/write"));
        assert!(Glob::new("**").unwrap().matches("ops/locate"));
        let partial = Glob::new("db/*/tables/T?ack/ops/de*").unwrap();
        assert!(partial.matches("db/chinook/tables/Track/ops/delete"));
        assert!(!partial.matches("db/chinook/tables/Trrack/ops/delete"));
        assert!(Glob::new("/files/ops/write")
            .unwrap()
            .matches("files/ops/write"));
    }

    #[test]
    fn bad_globs_are_refused_with_words() {
        for (bad, words) in [
            ("", "empty"),
            ("a//ops/b", "empty segment"),
            ("a**/ops/b", "whole segments"),
            ("tracker/pulls/7/merge", "can never match an op"),
        ] {
            let e = Glob::new(bad).unwrap_err().to_string();
            assert!(e.contains(words), "{bad:?}: {e}");
        }
    }

    #[test]
    fn first_match_wins_and_args_rules_wait_for_arguments() {
        let mut squash = rule(1, "tracker/pulls/*/ops/merge", Action::Deny);
        squash.args = Some(
            json!({"method": "squash", "n": 1})
                .as_object()
                .unwrap()
                .clone(),
        );
        let p = Policy::new(vec![
            squash,
            rule(2, "tracker/pulls/*/ops/merge", Action::Approve),
            rule(3, "tracker/**", Action::Allow),
        ]);
        let path = "tracker/pulls/7/ops/merge";
        let v = p.verdict(path, None);
        assert_eq!(v.rule.map(|r| r.number), Some(2));
        assert_eq!(v.depends_on_args.len(), 1);
        let v = p.verdict(path, Some(&json!({"method": "squash", "n": 1.0})));
        assert_eq!(
            v.rule.map(|r| r.number),
            Some(1),
            "numbers compare by value"
        );
        let v = p.verdict(path, Some(&json!({"method": "merge"})));
        assert_eq!(v.approval().map(|r| r.number), Some(2));
        let v = p.verdict("tracker/issues/1/ops/close", None);
        assert_eq!(v.rule.map(|r| r.action), Some(Action::Allow));
        let mut label = rule(1, "**", Action::Deny);
        label.args = Some(json!({"add": "wontfix"}).as_object().unwrap().clone());
        let mut both = rule(2, "**", Action::Deny);
        both.args = Some(json!({"add": ["a", "b"]}).as_object().unwrap().clone());
        let p = Policy::new(vec![label, both]);
        let decided = |args: Value| p.verdict("x/ops/label", Some(&args)).rule.map(|r| r.number);
        assert_eq!(decided(json!({"add": ["bug", "wontfix"]})), Some(1));
        assert_eq!(decided(json!({"add": "wontfix"})), Some(1));
        assert_eq!(decided(json!({"add": ["b", "c", "a"]})), Some(2));
        assert_eq!(decided(json!({"add": ["b"]})), None);
        assert_eq!(decided(json!({"remove": ["wontfix"]})), None);
        assert!(p.verdict("files/ops/write", None).rule.is_none());
    }

    #[test]
    fn guard_lines_name_the_rule() {
        let mut deny = rule(1, "files/ops/write", Action::Deny);
        deny.reason = Some("read-only on Fridays".into());
        let p = Policy::new(vec![deny, rule(2, "tracker/**", Action::Approve)]);
        let c = Policy::conditions(&p.verdict("files/ops/write", None), None, None);
        assert_eq!(c.len(), 1);
        assert!(!c[0].ok && c[0].policy);
        assert_eq!(
            c[0].detail,
            "denied by rule 1 (match \"files/ops/write\"): read-only on Fridays"
        );
        let v = p.verdict("tracker/issues/1/ops/close", None);
        let c = Policy::conditions(&v, None, None);
        assert_eq!(c[0].name, SIGN_OFF);
        assert!(!c[0].ok && !c[0].policy, "an approval is not a refusal");
        assert_eq!(
            c[0].detail,
            "needs a person's sign-off (rule 2); the call will wait as a pending run"
        );
        let c = Policy::conditions(&v, None, Some("root (uid 0)"));
        assert!(c[0].ok);
        let default = HostDefault {
            allowed: false,
            words: "the server marks it destructive".into(),
        };
        let c = Policy::conditions(&p.verdict("mcp/ops/x", None), Some(default.clone()), None);
        assert_eq!(
            c,
            vec![Condition::policy("policy", false, default.words.clone())]
        );
        // A manifest rule overrides the host's default.
        let c = Policy::conditions(&v, Some(default), None);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, SIGN_OFF);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        for bad in ["", "24", "h", "1x", "-1h", "0s", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(duration_words(Duration::from_secs(5400)), "1h 30m");
        assert_eq!(duration_words(Duration::from_millis(200)), "200ms");
    }

    #[test]
    fn users_resolve() {
        assert_eq!(uid_of("root"), Some(0));
        assert_eq!(name_of(0).as_deref(), Some("root"));
        assert_eq!(uid_of("no-such-user-here"), None);
        assert_eq!(user_words(0), "root (uid 0)");
    }
}
