//! Operations: their specs (one-line description, strict JSON schema), their guards, and what
//! a call does. `run` evaluates the guard with the same function `guard` shows, inside the
//! caller's write transaction, so what the guard said is what the call checks.

use rusqlite::{params, Connection};
use serde_json::{json, Value};

use super::db::{self, Item};
use super::view::item_name;
use super::{db_err, Kind, Node, TrackerHost};
use crate::hosts::text::{and_list, flat, plural};
use crate::manifest::Role;
use crate::world::host::{
    object_schema, CallOutcome, Condition, Guard, HostError, HostResult, OpSpec,
};

const ISSUE_OPS: &[&str] = &[
    "read_body",
    "edit_body",
    "get_metadata",
    "comment",
    "close",
    "reopen",
    "label",
    "assign",
    "unassign",
];
const PULL_OPS: &[&str] = &[
    "read_body",
    "edit_body",
    "get_metadata",
    "comment",
    "close",
    "reopen",
    "label",
    "assign",
    "unassign",
    "diff",
    "request_review",
    "approve",
    "rerun_checks",
    "merge",
];

/// Names of the ops an entry offers, in the order `ops/` lists them.
pub(super) fn names(node: &Node) -> &'static [&'static str] {
    match node {
        Node::Root | Node::Issues => &["create_issue"],
        Node::Item(Kind::Issue, _) => ISSUE_OPS,
        Node::Item(Kind::Pull, _) => PULL_OPS,
        Node::Comment(..) => &["read_body", "edit_body"],
        Node::Review(..) => &["read_body"],
        Node::Check(..) => &["read_log"],
        Node::Label(_) | Node::User(_) => &["issues"],
        Node::Pulls
        | Node::Labels
        | Node::Users
        | Node::Comments(..)
        | Node::Checks(_)
        | Node::Reviews(_) => &[],
    }
}

pub(super) fn offered(node: &Node, op: &str) -> HostResult<()> {
    if names(node).contains(&op) {
        Ok(())
    } else {
        let offered = names(node);
        Err(HostError::NotFound(if offered.is_empty() {
            format!("no operation {op:?} here (this entry has none)")
        } else {
            format!("no operation {op:?} here (offered: {})", offered.join(", "))
        }))
    }
}

fn state_filter() -> Value {
    json!({
        "type": "string",
        "enum": ["open", "closed", "all"],
        "default": "all",
        "description": "which to list: open, closed (closed or merged) or all"
    })
}

pub(super) fn spec(node: &Node, op: &str) -> Option<OpSpec> {
    let string = |d: &str| json!({"type": "string", "minLength": 1, "description": d});
    let names = |d: &str| json!({"type": "array", "items": {"type": "string", "minLength": 1}, "description": d});
    let none = || object_schema(json!({}), &[]);
    let what = match node {
        Node::Item(Kind::Pull, _) => "pull request",
        _ => "issue",
    };
    let (description, schema) = match op {
        "create_issue" => (
            "Open a new issue: title, optional body (markdown), labels and assignees (names).".to_string(),
            object_schema(
                json!({
                    "title": string("one line"),
                    "body": {"type": "string", "description": "markdown"},
                    "labels": names("label names, see labels/"),
                    "assignees": names("user names, see users/"),
                }),
                &["title"],
            ),
        ),
        "read_body" => match node {
            Node::Comment(..) => ("Read the comment's full text (markdown).".to_string(), none()),
            Node::Review(..) => ("Read the review's full text and verdict.".to_string(), none()),
            _ => (format!("Read the {what}'s full text (markdown) with a header of its state."), none()),
        },
        "edit_body" => (
            match node {
                Node::Comment(..) => "Replace the comment's text (markdown) with body; writing its `body` file does this.".to_string(),
                _ => format!("Replace the {what}'s text (markdown) with body; writing its `body` file does this."),
            },
            object_schema(json!({"body": {"type": "string", "description": "the whole new text (markdown)"}}), &["body"]),
        ),
        "get_metadata" => (
            format!("All fields of the {what} as JSON: state, author, labels, assignees, dates{}.",
                if what == "pull request" { ", checks, reviews, branches" } else { "" }),
            none(),
        ),
        "comment" => (
            format!("Add a comment to the {what}: body (markdown)."),
            object_schema(json!({"body": string("markdown")}), &["body"]),
        ),
        "close" => (
            format!("Close the {what}{}: reason (text, e.g. \"fixed in 1.2\").",
                if what == "pull request" { " without merging" } else { "" }),
            object_schema(json!({"reason": string("why it is closed")}), &["reason"]),
        ),
        "reopen" => (format!("Reopen the closed {what}."), none()),
        "label" => (
            "Add and/or remove labels: add [names], remove [names] (see labels/).".to_string(),
            {
                let mut s = object_schema(
                    json!({
                        "add": names("labels to add"),
                        "remove": names("labels to remove"),
                    }),
                    &[],
                );
                s["minProperties"] = json!(1);
                s
            },
        ),
        "assign" => (
            format!("Assign a user to the {what}: user (name, see users/)."),
            object_schema(json!({"user": string("user name")}), &["user"]),
        ),
        "unassign" => (
            format!("Remove an assignee from the {what}: user (name)."),
            object_schema(json!({"user": string("user name")}), &["user"]),
        ),
        "diff" => ("The pull request's changes as a unified diff.".to_string(), none()),
        "request_review" => (
            "Ask someone to review the pull request: reviewer (user name, not its author).".to_string(),
            object_schema(json!({"reviewer": string("user name")}), &["reviewer"]),
        ),
        "approve" => (
            "Approve the pull request as you: body (optional review text).".to_string(),
            object_schema(json!({"body": {"type": "string", "description": "review text"}}), &[]),
        ),
        "rerun_checks" => (
            "Run the failing checks again (fixes failures of the runner, not of the code).".to_string(),
            none(),
        ),
        "merge" => (
            "Merge into the base branch: method merge|squash|rebase (default merge); closes the issues it fixes.".to_string(),
            object_schema(
                json!({"method": {"type": "string", "enum": ["merge", "squash", "rebase"], "default": "merge"}}),
                &[],
            ),
        ),
        "read_log" => ("Read the check's full log.".to_string(), none()),
        "issues" => match node {
            Node::Label(_) => (
                "Issues and pull requests with this label, newest first, as paths: state open|closed|all (default all).".to_string(),
                object_schema(json!({"state": state_filter()}), &[]),
            ),
            _ => (
                "Issues and pull requests this user opened or is assigned, newest first, as paths: state open|closed|all (default all).".to_string(),
                object_schema(json!({"state": state_filter()}), &[]),
            ),
        },
        _ => return None,
    };
    Some(OpSpec {
        name: op.to_string(),
        description,
        schema,
    })
}

// ---------------------------------------------------------------- arguments

/// The args object (a bare `null` counts as `{}`: ops without required args).
fn fields(args: &Value) -> HostResult<serde_json::Map<String, Value>> {
    match args {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(serde_json::Map::new()),
        other => Err(HostError::InvalidArgs(format!(
            "arguments must be a JSON object, not {other}"
        ))),
    }
}

fn opt_str(args: &Value, key: &str) -> HostResult<Option<String>> {
    match fields(args)?.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(HostError::InvalidArgs(format!(
            "{key} must be a string, not {other}"
        ))),
    }
}

/// A required string, non-blank.
fn req_str(args: &Value, key: &str) -> HostResult<String> {
    match opt_str(args, key)? {
        Some(s) if !s.trim().is_empty() => Ok(s.trim_end_matches(['\n', '\r']).to_string()),
        _ => Err(HostError::InvalidArgs(format!(
            "{key} is required and must not be empty"
        ))),
    }
}

fn str_list(args: &Value, key: &str) -> HostResult<Vec<String>> {
    match fields(args)?.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                other => Err(HostError::InvalidArgs(format!(
                    "{key} must hold non-empty names, not {other}"
                ))),
            })
            .collect(),
        Some(other) => Err(HostError::InvalidArgs(format!(
            "{key} must be an array of names, not {other}"
        ))),
    }
}

fn state_arg(args: &Value) -> HostResult<String> {
    let state = opt_str(args, "state")?.unwrap_or_else(|| "all".to_string());
    if ["open", "closed", "all"].contains(&state.as_str()) {
        Ok(state)
    } else {
        Err(HostError::InvalidArgs(format!(
            "state {state:?} is not one of open, closed, all"
        )))
    }
}

fn check_labels(conn: &Connection, project: &str, names: &[String]) -> HostResult<()> {
    for name in names {
        if db::label(conn, name)?.is_none() {
            return Err(HostError::InvalidArgs(format!(
                "unknown label {name:?}; labels in {project}: {}",
                db::label_names(conn)?.join(", ")
            )));
        }
    }
    Ok(())
}

fn check_users(conn: &Connection, project: &str, names: &[String]) -> HostResult<()> {
    for name in names {
        if db::user(conn, name)?.is_none() {
            return Err(HostError::InvalidArgs(format!(
                "unknown user {name:?}; users in {project}: {}",
                db::user_names(conn)?.join(", ")
            )));
        }
    }
    Ok(())
}

fn exec(conn: &Connection, sql: &str, p: impl rusqlite::Params) -> HostResult<usize> {
    conn.prepare_cached(sql)
        .and_then(|mut st| st.execute(p))
        .map_err(db_err)
}

// ---------------------------------------------------------------- guards

impl TrackerHost {
    fn you(&self) -> String {
        format!(
            "you are {}, a {} of {}",
            self.me.user,
            self.me.role.as_str(),
            self.project
        )
    }

    fn can_read(&self) -> Condition {
        Condition::check("can_read", true, "reading changes nothing; anyone may read")
    }

    fn can_comment(&self, action: &str) -> Condition {
        match self.me.role {
            Role::Maintainer | Role::Contributor => Condition::check(
                "can_comment",
                true,
                format!("{}; maintainers and contributors may {action}", self.you()),
            ),
            Role::Reader => Condition::check(
                "can_comment",
                false,
                format!(
                    "{}: readers cannot {action} — cannot be satisfied by you (the mount's identity is set in its manifest)",
                    self.you()
                ),
            ),
        }
    }

    /// Write permission for `action`; authors (contributors) may act on their own `item`.
    fn can_write(&self, action: &str, own: Option<&Item>) -> Condition {
        match (self.me.role, own) {
            (Role::Maintainer, _) => Condition::check("can_write", true, self.you()),
            (Role::Contributor, Some(item)) if item.author == self.me.user => Condition::check(
                "can_write",
                true,
                format!(
                    "you opened #{}, and authors may {action} their own",
                    item.number
                ),
            ),
            (Role::Contributor, _) => Condition::check(
                "can_write",
                false,
                format!(
                    "{}: only maintainers{} may {action} — cannot be satisfied by you",
                    self.you(),
                    if own.is_some() { " and the author" } else { "" }
                ),
            ),
            (Role::Reader, _) => Condition::check(
                "can_write",
                false,
                format!(
                    "{}: readers cannot write — cannot be satisfied by you",
                    self.you()
                ),
            ),
        }
    }

    /// Maintainers may edit any comment; others their own.
    fn can_edit_comment(&self, author: &str, n: i64, c: i64) -> Condition {
        match self.me.role {
            Role::Maintainer => Condition::check("can_edit", true, self.you()),
            _ if author == self.me.user && self.me.role != Role::Reader => Condition::check(
                "can_edit",
                true,
                format!("you wrote comment {c} on #{n}"),
            ),
            _ => Condition::check(
                "can_edit",
                false,
                format!(
                    "comment {c} on #{n} is by {author} and {}: only its author and maintainers may edit it — cannot be satisfied by you",
                    self.you()
                ),
            ),
        }
    }

    fn ops_path(&self, item: &Item, op: &str) -> String {
        let mut p = item.path();
        p.push("ops".into());
        p.push(op.into());
        let parts: Vec<&str> = p.iter().map(String::as_str).collect();
        self.world_path(&parts)
    }

    fn open_cond(&self, item: &Item) -> Condition {
        let who = item.label();
        match item.state.as_str() {
            "open" => Condition::check("open", true, format!("{who} is open")),
            "merged" => Condition::check(
                "open",
                false,
                format!(
                    "{who} was merged on {} by {}; a merged pull request stays merged — cannot be satisfied by you",
                    db::day(item.closed_at.as_deref().unwrap_or("")),
                    item.closed_by.as_deref().unwrap_or("someone")
                ),
            ),
            _ => Condition::check(
                "open",
                false,
                format!(
                    "{who} is already closed{} — reopen it with {}",
                    closed_why(item),
                    self.ops_path(item, "reopen")
                ),
            ),
        }
    }

    fn closed_cond(&self, item: &Item) -> Condition {
        let who = item.label();
        match item.state.as_str() {
            "closed" => Condition::check("closed", true, format!("{who} is closed{}", closed_why(item))),
            "merged" => Condition::check(
                "closed",
                false,
                format!("{who} was merged; a merged pull request cannot be reopened — cannot be satisfied by you"),
            ),
            _ => Condition::check(
                "closed",
                false,
                format!("{who} is open; nothing to reopen (close it with {})", self.ops_path(item, "close")),
            ),
        }
    }

    fn checks_cond(&self, conn: &Connection, pull: &Item) -> HostResult<Condition> {
        let checks = db::checks(conn, pull.number)?;
        let names = |f: &dyn Fn(&db::Check) -> bool| -> Vec<String> {
            checks
                .iter()
                .filter(|c| f(c))
                .map(|c| c.name.clone())
                .collect()
        };
        let failing = names(&|c| c.status == "failure");
        let pending = names(&|c| c.status == "pending");
        let all = names(&|_| true);
        if failing.is_empty() && pending.is_empty() {
            let detail = if all.is_empty() {
                "no checks are configured".to_string()
            } else {
                format!(
                    "all {} pass ({})",
                    plural(all.len() as i64, "check", "checks"),
                    all.join(", ")
                )
            };
            return Ok(Condition::check("checks_passing", true, detail));
        }
        let n = pull.number.to_string();
        let mut detail = String::new();
        if !failing.is_empty() {
            detail.push_str(&format!(
                "{} of {} checks failing ({}) — see {}",
                failing.len(),
                all.len(),
                failing.join(", "),
                self.world_path(&["pulls", &n, "checks", &failing[0]])
            ));
            let retry = names(&|c| c.status == "failure" && c.retryable);
            let hard = names(&|c| c.status == "failure" && !c.retryable);
            if !retry.is_empty() {
                let who = if self.can_rerun(pull) {
                    format!("rerun with {}", self.ops_path(pull, "rerun_checks"))
                } else {
                    "a maintainer or the author can rerun it (rerun_checks) — not you".to_string()
                };
                detail.push_str(&format!(
                    "; {} failed on the CI runner, not in the code (see its log): {who}",
                    and_list(&retry)
                ));
            }
            if !hard.is_empty() {
                let branch = pull.head.as_deref().unwrap_or("its branch");
                let fix = if pull.author == self.me.user {
                    format!("you (the author) must push a fix to {branch}, outside this tracker — cannot be satisfied by an op here")
                } else {
                    format!(
                        "the author ({}) must push a fix to {branch} — cannot be satisfied by you",
                        pull.author
                    )
                };
                detail.push_str(&format!(
                    "; {} fails the same way on every run, so rerun_checks cannot fix it: {fix}",
                    and_list(&hard)
                ));
            }
        }
        if !pending.is_empty() {
            if !detail.is_empty() {
                detail.push_str("; ");
            }
            detail.push_str(&format!(
                "{} still running — read this guard again later",
                and_list(&pending)
            ));
        }
        Ok(Condition::check("checks_passing", false, detail))
    }

    fn review_cond(&self, conn: &Connection, pull: &Item) -> HostResult<Condition> {
        let rs = db::review_state(conn, pull)?;
        if rs.approved() {
            return Ok(Condition::check(
                "review_approved",
                true,
                format!("approved by {}", and_list(&rs.approvers)),
            ));
        }
        let n = pull.number.to_string();
        if !rs.changes_by.is_empty() {
            return Ok(Condition::check(
                "review_approved",
                false,
                format!(
                    "changes requested by {} (see {}); the author must address them and the reviewer approve — cannot be satisfied by you",
                    and_list(&rs.changes_by),
                    self.world_path(&["pulls", &n, "reviews"])
                ),
            ));
        }
        let waiting = if rs.requested.is_empty() {
            String::new()
        } else {
            format!(
                " (review requested from {}, not given yet)",
                and_list(&rs.requested)
            )
        };
        let detail = if pull.author == self.me.user {
            format!(
                "no approving review yet{waiting}; you cannot approve your own pull request — ask someone with {}",
                self.ops_path(pull, "request_review")
            )
        } else if self.me.role == Role::Maintainer {
            format!(
                "no approving review yet{waiting} — approve it with {}",
                self.ops_path(pull, "approve")
            )
        } else {
            format!(
                "no approving review yet{waiting}; only maintainers approve — ask one with {}",
                self.ops_path(pull, "request_review")
            )
        };
        Ok(Condition::check("review_approved", false, detail))
    }

    fn mergeable_cond(&self, pull: &Item) -> Condition {
        let base = pull.base.as_deref().unwrap_or("main");
        if pull.mergeable {
            Condition::check("mergeable", true, format!("no conflicts with {base}"))
        } else {
            Condition::check(
                "mergeable",
                false,
                format!(
                    "conflicts with {base}{}; the author ({}) must rebase {} onto {base} — cannot be satisfied by you",
                    pull.conflicts.as_deref().map(|c| format!(" in {c}")).unwrap_or_default(),
                    pull.author,
                    pull.head.as_deref().unwrap_or("the branch"),
                ),
            )
        }
    }

    fn not_author_cond(&self, pull: &Item) -> Condition {
        if pull.author == self.me.user {
            Condition::check(
                "not_author",
                false,
                format!(
                    "you opened PR #{} and cannot approve your own pull request — ask someone with {}",
                    pull.number,
                    self.ops_path(pull, "request_review")
                ),
            )
        } else {
            Condition::check(
                "not_author",
                true,
                format!(
                    "{} opened PR #{}; you are {}",
                    pull.author, pull.number, self.me.user
                ),
            )
        }
    }

    fn can_rerun(&self, pull: &Item) -> bool {
        self.can_write("rerun checks", Some(pull)).ok
    }

    fn failing_cond(&self, conn: &Connection, pull: &Item) -> HostResult<Condition> {
        let checks = db::checks(conn, pull.number)?;
        let failing: Vec<String> = checks
            .iter()
            .filter(|c| c.status == "failure")
            .map(|c| c.name.clone())
            .collect();
        Ok(if failing.is_empty() {
            Condition::check(
                "has_failing_checks",
                false,
                format!(
                    "no check is failing ({} of {} pass); nothing to rerun",
                    checks.iter().filter(|c| c.status == "success").count(),
                    checks.len()
                ),
            )
        } else {
            let hard: Vec<String> = checks
                .iter()
                .filter(|c| c.status == "failure" && !c.retryable)
                .map(|c| c.name.clone())
                .collect();
            let mut detail = format!(
                "{} failing: rerun_checks runs {} again",
                and_list(&failing),
                if failing.len() == 1 { "it" } else { "them" }
            );
            if !hard.is_empty() {
                detail.push_str(&format!(
                    " (but {} fails in the code, not on the runner: a rerun will fail the same way)",
                    and_list(&hard)
                ));
            }
            Condition::check("has_failing_checks", true, detail)
        })
    }

    /// The guard of `op` on `node`: the same function serves `guard` files and `call`.
    pub(super) fn conditions(
        &self,
        conn: &Connection,
        node: &Node,
        op: &str,
        args: Option<&Value>,
    ) -> HostResult<Vec<Condition>> {
        let item = self.item_of(conn, node)?;
        self.conditions_with(conn, node, item.as_ref(), op, args)
    }

    /// The issue or pull request a node is, if it is one (guards need its state).
    pub(super) fn item_of(&self, conn: &Connection, node: &Node) -> HostResult<Option<Item>> {
        Ok(match node {
            Node::Item(_, n) => Some(db::item_req(conn, *n)?),
            _ => None,
        })
    }

    /// The guard conditions of `op` on a node whose item (if any) was already read, so
    /// the guards of all of an entry's ops read it once.
    pub(super) fn conditions_with(
        &self,
        conn: &Connection,
        node: &Node,
        item_ref: Option<&Item>,
        op: &str,
        args: Option<&Value>,
    ) -> HostResult<Vec<Condition>> {
        let need = || {
            item_ref
                .ok_or_else(|| HostError::NotFound(format!("{op} needs an issue or pull request")))
        };
        Ok(match op {
            "read_body" | "get_metadata" | "diff" | "read_log" | "issues" => vec![self.can_read()],
            "create_issue" => {
                let mut c = vec![self.can_comment("open issues")];
                // Labels and assignees are triage: maintainers only.
                let triage = args.is_some_and(|a| {
                    !str_list(a, "labels").unwrap_or_default().is_empty()
                        || !str_list(a, "assignees").unwrap_or_default().is_empty()
                });
                if triage {
                    c.push(self.can_write("set labels or assignees", None));
                }
                c
            }
            "comment" => vec![self.can_comment("comment")],
            "edit_body" => match node {
                Node::Comment(_, n, c) => {
                    let cm = db::comment(conn, *n, *c)?
                        .ok_or_else(|| HostError::NotFound(format!("no comment {c} on #{n}")))?;
                    vec![self.can_edit_comment(&cm.author, *n, *c)]
                }
                _ => vec![self.can_write("edit", Some(need()?))],
            },
            "close" => {
                let it = need()?;
                vec![self.open_cond(it), self.can_write("close", Some(it))]
            }
            "reopen" => {
                let it = need()?;
                vec![self.closed_cond(it), self.can_write("reopen", Some(it))]
            }
            "label" => vec![self.can_write("label", None)],
            "assign" | "unassign" => vec![self.can_write("assign", None)],
            "request_review" => {
                let it = need()?;
                vec![self.open_cond(it), self.can_comment("request reviews")]
            }
            "approve" => {
                let it = need()?;
                vec![
                    self.open_cond(it),
                    self.not_author_cond(it),
                    self.can_write("approve", None),
                ]
            }
            "rerun_checks" => {
                let it = need()?;
                vec![
                    self.open_cond(it),
                    self.failing_cond(conn, it)?,
                    self.can_write("rerun checks", Some(it)),
                ]
            }
            "merge" => {
                let it = need()?;
                vec![
                    self.open_cond(it),
                    self.checks_cond(conn, it)?,
                    self.review_cond(conn, it)?,
                    self.mergeable_cond(it),
                    self.can_write("merge", None),
                ]
            }
            other => return Err(HostError::NotFound(format!("no operation {other:?} here"))),
        })
    }
}

/// ` (by alex on 2026-11-30: fixed in 1.2)`
fn closed_why(item: &Item) -> String {
    let mut s = String::new();
    if let Some(by) = &item.closed_by {
        s.push_str(&format!(" by {by}"));
    }
    if let Some(at) = &item.closed_at {
        s.push_str(&format!(" on {}", db::day(at)));
    }
    if let Some(r) = &item.close_reason {
        s.push_str(&format!(": {r}"));
    }
    if s.is_empty() {
        s
    } else {
        format!(" ({})", s.trim_start())
    }
}

// ---------------------------------------------------------------- calls

/// Paths touched when an item's own line changes: the item, its collection, and (when an
/// open/closed count moved) the host root and its labels' entries.
fn item_changed(conn: &Connection, item: &Item, counts: bool) -> HostResult<Vec<Vec<String>>> {
    let mut out = vec![item.path(), vec![item.kind.dir().to_string()]];
    if counts {
        out.push(Vec::new());
        for l in db::labels_of(conn, item.number)? {
            out.push(Node::Label(l).path());
        }
    }
    Ok(out)
}

impl TrackerHost {
    pub(super) fn run(
        &self,
        conn: &Connection,
        node: &Node,
        op: &str,
        args: &Value,
    ) -> HostResult<CallOutcome> {
        let guard = Guard::new(self.conditions(conn, node, op, Some(args))?);
        if !guard.allowed() {
            return Err(HostError::Blocked(guard));
        }
        match (node, op) {
            (Node::Root | Node::Issues, "create_issue") => self.create_issue(conn, args),
            (Node::Item(_, n), _) => {
                let item = db::item_req(conn, *n)?;
                self.item_op(conn, &item, op, args)
            }
            (Node::Comment(_, n, c), "read_body") => match db::comment(conn, *n, *c)? {
                Some(cm) => Ok(CallOutcome::text(format!(
                    "Comment {c} on #{n} by {} on {}\n\n{}",
                    cm.author,
                    db::day(&cm.created_at),
                    cm.body
                ))),
                None => Err(HostError::NotFound(format!("no comment {c} on #{n}"))),
            },
            (Node::Comment(_, n, c), "edit_body") => {
                let body = opt_str(args, "body")?.unwrap_or_default();
                let now = db::now();
                exec(
                    conn,
                    "UPDATE comments SET body = ?3, edited_at = ?4 WHERE number = ?1 AND seq = ?2",
                    params![n, c, body, now],
                )?;
                db::touch(conn, *n, &now)?;
                let item = db::item_req(conn, *n)?;
                let mut out = CallOutcome::text(format!(
                    "replaced the text of comment {c} on #{n} ({})",
                    plural(body.len() as i64, "byte", "bytes")
                ));
                out.changed = item_changed(conn, &item, false)?;
                out.changed.push(node.path());
                Ok(out)
            }
            (Node::Review(n, r), "read_body") => match db::review(conn, *n, *r)? {
                Some(rv) => Ok(CallOutcome::text(format!(
                    "Review {r} on PR #{n} by {} on {} · {}\n\n{}",
                    rv.author,
                    db::day(&rv.created_at),
                    rv.state.replace('_', " "),
                    rv.body
                ))),
                None => Err(HostError::NotFound(format!("no review {r} on PR #{n}"))),
            },
            (Node::Check(n, name), "read_log") => match db::check(conn, *n, name)? {
                Some(c) => Ok(CallOutcome::text(c.log)),
                None => Err(HostError::NotFound(format!("no check {name} on PR #{n}"))),
            },
            (Node::Label(name), "issues") => {
                let state = state_arg(args)?;
                let (found, total) = db::items_with_label(conn, name, &state, self.page_size)?;
                let head = format!(
                    "{} labelled {name} (state {state}), newest first{}",
                    plural(
                        total as i64,
                        "issue or pull request",
                        "issues and pull requests"
                    ),
                    self.shown_note(found.len(), total)
                );
                Ok(self.found(head, found))
            }
            (Node::User(name), "issues") => {
                let state = state_arg(args)?;
                let (found, total) = db::items_of_user(conn, name, &state, self.page_size)?;
                let head = format!(
                    "{} opened by or assigned to {name} (state {state}), newest first{}",
                    plural(
                        total as i64,
                        "issue or pull request",
                        "issues and pull requests"
                    ),
                    self.shown_note(found.len(), total)
                );
                Ok(self.found(head, found))
            }
            _ => Err(HostError::NotFound(format!("no operation {op:?} here"))),
        }
    }

    fn shown_note(&self, shown: usize, total: usize) -> String {
        if shown < total {
            format!("; showing the first {shown}")
        } else {
            String::new()
        }
    }

    fn found(&self, head: String, found: Vec<(Kind, i64)>) -> CallOutcome {
        let mut out = CallOutcome::text(head);
        for (kind, n) in found {
            out = out.discovered(Node::Item(kind, n).path());
        }
        out
    }

    fn create_issue(&self, conn: &Connection, args: &Value) -> HostResult<CallOutcome> {
        let title = flat(&req_str(args, "title")?);
        let body = opt_str(args, "body")?.unwrap_or_default();
        let labels = str_list(args, "labels")?;
        let assignees = str_list(args, "assignees")?;
        check_labels(conn, &self.project, &labels)?;
        check_users(conn, &self.project, &assignees)?;
        let number: i64 = conn
            .query_row("SELECT coalesce(max(number), 0) + 1 FROM items", [], |r| {
                r.get(0)
            })
            .map_err(db_err)?;
        let now = db::now();
        exec(
            conn,
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at)
             VALUES (?1, 'issue', ?2, ?3, ?4, 'open', ?5, ?5)",
            params![number, title, body.trim_end(), self.me.user, now],
        )?;
        for l in &labels {
            exec(
                conn,
                "INSERT OR IGNORE INTO item_labels (number, label) VALUES (?1, ?2)",
                params![number, l],
            )?;
        }
        for u in &assignees {
            exec(
                conn,
                "INSERT OR IGNORE INTO assignees (number, user) VALUES (?1, ?2)",
                params![number, u],
            )?;
        }
        let mut out = CallOutcome::text(format!("opened issue #{number}: {title}"))
            .discovered(Node::Item(Kind::Issue, number).path())
            .changed(Vec::new())
            .changed(Node::Issues.path());
        for l in labels {
            out = out.changed(Node::Label(l).path());
        }
        Ok(out)
    }

    fn item_op(
        &self,
        conn: &Connection,
        item: &Item,
        op: &str,
        args: &Value,
    ) -> HostResult<CallOutcome> {
        let n = item.number;
        let name = item_name(item.kind, n);
        let now = db::now();
        match op {
            "read_body" => Ok(CallOutcome::text(self.body_text(conn, item)?)),
            "get_metadata" => {
                let meta = self.metadata(conn, item)?;
                let text = serde_json::to_string_pretty(&meta)
                    .map_err(|e| HostError::Backend(format!("cannot render metadata: {e}")))?;
                Ok(CallOutcome::text(text))
            }
            "diff" => {
                Ok(CallOutcome::text(item.diff.clone().unwrap_or_else(|| {
                    format!("(PR #{n} has no recorded changes)")
                })))
            }
            "edit_body" => {
                let body = opt_str(args, "body")?.unwrap_or_default();
                exec(
                    conn,
                    "UPDATE items SET body = ?2, updated_at = ?3 WHERE number = ?1",
                    params![n, body, now],
                )?;
                let mut out = CallOutcome::text(format!(
                    "replaced the text of {name} ({})",
                    plural(body.len() as i64, "byte", "bytes")
                ));
                out.changed = item_changed(conn, item, false)?;
                Ok(out)
            }
            "comment" => {
                let body = req_str(args, "body")?;
                let seq = db::add_comment(conn, n, &self.me.user, &body, &now)?;
                let mut cpath = item.path();
                cpath.push("comments".into());
                let mut out =
                    CallOutcome::text(format!("added comment {seq} on {name} as {}", self.me.user));
                out.discovered.push({
                    let mut p = cpath.clone();
                    p.push(seq.to_string());
                    p
                });
                out.changed = item_changed(conn, item, false)?;
                out.changed.push(cpath);
                Ok(out)
            }
            "close" => {
                let reason = flat(&req_str(args, "reason")?);
                exec(
                    conn,
                    "UPDATE items SET state = 'closed', closed_at = ?2, closed_by = ?3,
                     close_reason = ?4, updated_at = ?2 WHERE number = ?1",
                    params![n, now, self.me.user, reason],
                )?;
                let mut out = CallOutcome::text(format!("closed {name}: {reason}"));
                out.changed = item_changed(conn, item, true)?;
                Ok(out)
            }
            "reopen" => {
                exec(
                    conn,
                    "UPDATE items SET state = 'open', closed_at = NULL, closed_by = NULL,
                     close_reason = NULL, updated_at = ?2 WHERE number = ?1",
                    params![n, now],
                )?;
                let mut out = CallOutcome::text(format!("reopened {name}"));
                out.changed = item_changed(conn, item, true)?;
                Ok(out)
            }
            "label" => self.label_op(conn, item, args, &now),
            "assign" | "unassign" => {
                let user = req_str(args, "user")?.trim().to_string();
                check_users(conn, &self.project, std::slice::from_ref(&user))?;
                let before = db::assignees_of(conn, n)?;
                if op == "assign" {
                    exec(
                        conn,
                        "INSERT OR IGNORE INTO assignees (number, user) VALUES (?1, ?2)",
                        params![n, user],
                    )?;
                } else {
                    if !before.contains(&user) {
                        return Err(HostError::InvalidArgs(format!(
                            "{user} is not assigned to {name} (assignees: {})",
                            if before.is_empty() {
                                "none".to_string()
                            } else {
                                before.join(", ")
                            }
                        )));
                    }
                    exec(
                        conn,
                        "DELETE FROM assignees WHERE number = ?1 AND user = ?2",
                        params![n, user],
                    )?;
                }
                db::touch(conn, n, &now)?;
                let after = db::assignees_of(conn, n)?;
                let verb = if op == "assign" {
                    "assigned"
                } else {
                    "unassigned"
                };
                let mut out = CallOutcome::text(format!(
                    "{verb} {user} {} {name} (assignees: {})",
                    if op == "assign" { "to" } else { "from" },
                    if after.is_empty() {
                        "none".to_string()
                    } else {
                        after.join(", ")
                    }
                ));
                out.changed = item_changed(conn, item, false)?;
                Ok(out)
            }
            "request_review" => {
                let reviewer = req_str(args, "reviewer")?.trim().to_string();
                check_users(conn, &self.project, std::slice::from_ref(&reviewer))?;
                if reviewer == item.author {
                    return Err(HostError::InvalidArgs(format!(
                        "{reviewer} opened PR #{n} and cannot review it; choose another of: {}",
                        db::user_names(conn)?
                            .into_iter()
                            .filter(|u| *u != item.author)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                exec(
                    conn,
                    "INSERT OR IGNORE INTO review_requests (number, user) VALUES (?1, ?2)",
                    params![n, reviewer],
                )?;
                db::touch(conn, n, &now)?;
                let mut out =
                    CallOutcome::text(format!("requested a review of PR #{n} from {reviewer}"));
                out.changed = item_changed(conn, item, false)?;
                out.changed.push(Node::Reviews(n).path());
                Ok(out)
            }
            "approve" => {
                let body = opt_str(args, "body")?
                    .map(|b| b.trim_end().to_string())
                    .filter(|b| !b.is_empty())
                    .unwrap_or_else(|| "Approved.".to_string());
                let seq: i64 = conn
                    .query_row(
                        "SELECT coalesce(max(seq), 0) + 1 FROM reviews WHERE number = ?1",
                        [n],
                        |r| r.get(0),
                    )
                    .map_err(db_err)?;
                exec(
                    conn,
                    "INSERT INTO reviews (number, seq, author, state, body, created_at)
                     VALUES (?1, ?2, ?3, 'approved', ?4, ?5)",
                    params![n, seq, self.me.user, body, now],
                )?;
                exec(
                    conn,
                    "DELETE FROM review_requests WHERE number = ?1 AND user = ?2",
                    params![n, self.me.user],
                )?;
                db::touch(conn, n, &now)?;
                let mut out = CallOutcome::text(format!(
                    "approved PR #{n} as {} (review {seq})",
                    self.me.user
                ))
                .discovered(Node::Review(n, seq).path());
                out.changed = item_changed(conn, item, false)?;
                out.changed.push(Node::Reviews(n).path());
                Ok(out)
            }
            "rerun_checks" => self.rerun(conn, item, &now),
            "merge" => self.merge(conn, item, args, &now),
            other => Err(HostError::NotFound(format!(
                "no operation {other:?} on {name}"
            ))),
        }
    }

    fn label_op(
        &self,
        conn: &Connection,
        item: &Item,
        args: &Value,
        now: &str,
    ) -> HostResult<CallOutcome> {
        let n = item.number;
        let add = str_list(args, "add")?;
        let remove = str_list(args, "remove")?;
        if add.is_empty() && remove.is_empty() {
            return Err(HostError::InvalidArgs(format!(
                "give add and/or remove, e.g. {{\"add\": [\"bug\"]}}; labels in {}: {}",
                self.project,
                db::label_names(conn)?.join(", ")
            )));
        }
        check_labels(conn, &self.project, &add)?;
        check_labels(conn, &self.project, &remove)?;
        let before = db::labels_of(conn, n)?;
        for l in &add {
            exec(
                conn,
                "INSERT OR IGNORE INTO item_labels (number, label) VALUES (?1, ?2)",
                params![n, l],
            )?;
        }
        for l in &remove {
            exec(
                conn,
                "DELETE FROM item_labels WHERE number = ?1 AND label = ?2",
                params![n, l],
            )?;
        }
        db::touch(conn, n, now)?;
        let after = db::labels_of(conn, n)?;
        let added: Vec<String> = after
            .iter()
            .filter(|l| !before.contains(l))
            .cloned()
            .collect();
        let removed: Vec<String> = before
            .iter()
            .filter(|l| !after.contains(l))
            .cloned()
            .collect();
        let mut text = format!(
            "labels of {}: {}",
            item_name(item.kind, n),
            if after.is_empty() {
                "none".to_string()
            } else {
                after.join(", ")
            }
        );
        if !added.is_empty() {
            text.push_str(&format!(" (added {})", added.join(", ")));
        }
        if !removed.is_empty() {
            text.push_str(&format!(" (removed {})", removed.join(", ")));
        }
        if added.is_empty() && removed.is_empty() {
            text.push_str(" (unchanged)");
        }
        let mut out = CallOutcome::text(text);
        out.changed = item_changed(conn, item, false)?;
        for l in added.into_iter().chain(removed) {
            out.changed.push(Node::Label(l).path());
        }
        Ok(out)
    }

    fn rerun(&self, conn: &Connection, pull: &Item, now: &str) -> HostResult<CallOutcome> {
        let n = pull.number;
        let mut lines = Vec::new();
        let mut out = CallOutcome::default();
        for c in db::checks(conn, n)?
            .into_iter()
            .filter(|c| c.status == "failure")
        {
            let run = c.runs + 1;
            if c.retryable {
                // A runner failure: the code was fine, so the rerun passes.
                let log = format!(
                    "{}\n\n--- rerun {run} ({now}) ---\n{} passed on rerun {run}.\n",
                    c.log.trim_end(),
                    c.name
                );
                exec(
                    conn,
                    "UPDATE checks SET status = 'success', summary = ?3, log = ?4, retryable = 0,
                     runs = ?5 WHERE number = ?1 AND name = ?2",
                    params![n, c.name, format!("passed on rerun {run}"), log, run],
                )?;
                lines.push(format!(
                    "{}: passed on rerun {run} (it had failed on the runner: {})",
                    c.name, c.summary
                ));
            } else {
                let log = format!(
                    "{}\n\n--- rerun {run} ({now}) ---\nSame failure: {}\n",
                    c.log.trim_end(),
                    c.summary
                );
                exec(
                    conn,
                    "UPDATE checks SET log = ?3, runs = ?4 WHERE number = ?1 AND name = ?2",
                    params![n, c.name, log, run],
                )?;
                lines.push(format!(
                    "{}: failed again ({}); rerunning cannot fix it, the branch must change",
                    c.name, c.summary
                ));
            }
            out.changed.push(Node::Check(n, c.name.clone()).path());
        }
        db::touch(conn, n, now)?;
        out.result = format!("reran the failing checks of PR #{n}\n{}", lines.join("\n"));
        out.changed.push(Node::Checks(n).path());
        out.changed.extend(item_changed(conn, pull, false)?);
        Ok(out)
    }

    fn merge(
        &self,
        conn: &Connection,
        pull: &Item,
        args: &Value,
        now: &str,
    ) -> HostResult<CallOutcome> {
        let n = pull.number;
        let method = opt_str(args, "method")?.unwrap_or_else(|| "merge".to_string());
        if !["merge", "squash", "rebase"].contains(&method.as_str()) {
            return Err(HostError::InvalidArgs(format!(
                "method {method:?} is not one of merge, squash, rebase"
            )));
        }
        exec(
            conn,
            "UPDATE items SET state = 'merged', closed_at = ?2, closed_by = ?3, merge_method = ?4,
             close_reason = ?5, updated_at = ?2 WHERE number = ?1",
            params![n, now, self.me.user, method, format!("merged ({method})")],
        )?;
        exec(conn, "DELETE FROM review_requests WHERE number = ?1", [n])?;
        let base = pull.base.as_deref().unwrap_or("main");
        let mut lines = vec![format!(
            "merged PR #{n} into {base} ({method}): {}",
            pull.title
        )];
        let mut out = CallOutcome {
            changed: item_changed(conn, pull, true)?,
            ..Default::default()
        };
        out.changed.push(Node::Checks(n).path());
        out.changed.push(Node::Reviews(n).path());
        for issue in db::fixes_of(conn, n)? {
            let Some(it) = db::item(conn, issue)? else {
                continue;
            };
            if it.kind != Kind::Issue || !it.is_open() {
                continue;
            }
            let reason = format!("fixed by #{n}");
            exec(
                conn,
                "UPDATE items SET state = 'closed', closed_at = ?2, closed_by = ?3,
                 close_reason = ?4, updated_at = ?2 WHERE number = ?1",
                params![issue, now, self.me.user, reason],
            )?;
            let seq = db::add_comment(conn, issue, &self.me.user, &format!("Fixed by #{n}."), now)?;
            lines.push(format!(
                "closed issue #{issue} ({}): Fixed by #{n}",
                it.title
            ));
            out.discovered
                .push(Node::Comment(Kind::Issue, issue, seq).path());
            out.changed.extend(item_changed(conn, &it, true)?);
            out.changed.push(Node::Comments(Kind::Issue, issue).path());
        }
        // An issue's labels may repeat the PR's: keep each path once, in first-seen order.
        let mut seen = Vec::new();
        out.changed.retain(|p| {
            if seen.contains(p) {
                false
            } else {
                seen.push(p.clone());
                true
            }
        });
        out.result = lines.join("\n");
        Ok(out)
    }

    /// The text of `read_body` on an issue or pull request.
    fn body_text(&self, conn: &Connection, item: &Item) -> HostResult<String> {
        let mut head = format!(
            "#{} {}\n{} · opened by {} on {}",
            item.number,
            item.title,
            item.state,
            item.author,
            db::day(&item.created_at)
        );
        if item.state != "open" {
            head.push_str(&closed_why(item));
        }
        let labels = db::labels_of(conn, item.number)?;
        if !labels.is_empty() {
            head.push_str(&format!(" · labels: {}", labels.join(", ")));
        }
        let assignees = db::assignees_of(conn, item.number)?;
        if !assignees.is_empty() {
            head.push_str(&format!(" · assigned to {}", and_list(&assignees)));
        }
        head.push_str(&format!(
            " · {}",
            plural(db::comment_count(conn, item.number)?, "comment", "comments")
        ));
        if item.kind == Kind::Pull {
            head.push_str(&format!(
                "\n{} wants to merge {} into {}",
                item.author,
                item.head.as_deref().unwrap_or("?"),
                item.base.as_deref().unwrap_or("main")
            ));
        } else {
            let fixed_by = db::fixed_by(conn, item.number)?;
            if !fixed_by.is_empty() {
                let prs: Vec<String> = fixed_by.iter().map(|p| format!("#{p}")).collect();
                head.push_str(&format!("\npull requests that fix it: {}", prs.join(", ")));
            }
        }
        Ok(format!("{head}\n\n{}\n", item.body.trim_end()))
    }

    fn metadata(&self, conn: &Connection, item: &Item) -> HostResult<Value> {
        let n = item.number;
        let node = Node::Item(item.kind, n);
        let mut meta = json!({
            "number": n,
            "kind": match item.kind { Kind::Issue => "issue", Kind::Pull => "pull_request" },
            "title": item.title,
            "state": item.state,
            "author": item.author,
            "labels": db::labels_of(conn, n)?,
            "assignees": db::assignees_of(conn, n)?,
            "comments": db::comment_count(conn, n)?,
            "created_at": item.created_at,
            "updated_at": item.updated_at,
            "closed_at": item.closed_at,
            "closed_by": item.closed_by,
            "close_reason": item.close_reason,
            "ref": self.reference(&node),
            "path": self.world_path(&node.path().iter().map(String::as_str).collect::<Vec<_>>()),
        });
        match item.kind {
            Kind::Issue => {
                meta["fixed_by"] = json!(db::fixed_by(conn, n)?);
            }
            Kind::Pull => {
                let rs = db::review_state(conn, item)?;
                let checks: Vec<Value> = db::checks(conn, n)?
                    .into_iter()
                    .map(|c| json!({"name": c.name, "status": c.status, "summary": c.summary, "runs": c.runs}))
                    .collect();
                let reviews: Vec<Value> = db::reviews(conn, n, self.page_size)?
                    .into_iter()
                    .map(|r| json!({"number": r.seq, "author": r.author, "state": r.state, "created_at": r.created_at}))
                    .collect();
                meta["head"] = json!(item.head);
                meta["base"] = json!(item.base);
                meta["mergeable"] = json!(item.mergeable);
                meta["conflicts"] = json!(item.conflicts);
                meta["merge_method"] = json!(item.merge_method);
                meta["fixes"] = json!(db::fixes_of(conn, n)?);
                meta["checks"] = json!(checks);
                meta["reviews"] = json!(reviews);
                meta["review_requested"] = json!(rs.requested);
                meta["approved_by"] = json!(rs.approvers);
                meta["changes_requested_by"] = json!(rs.changes_by);
            }
        }
        Ok(meta)
    }
}
