//! Guard conditions: each says whether it holds and why, in words an agent can act on
//! (which op or whom to ask; "cannot be satisfied by you" when nothing here can change it).

use super::store::Store;

use super::db::{self, Item};
use super::ops::name;
use super::{Node, TrackerHost};
use crate::host::identity::Role;
use crate::host::text::{and_list, plural};
use crate::host::{Condition, HostResult};

impl TrackerHost {
    fn you(&self) -> String {
        format!(
            "you are {}, a {} of {}",
            self.me.user,
            self.me.role.as_str(),
            self.project
        )
    }

    pub(super) fn can_read(&self) -> Condition {
        Condition::check("can_read", true, "reading changes nothing; anyone may read")
    }

    pub(super) fn can_comment(&self, action: &str) -> Condition {
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
    pub(super) fn can_write(&self, action: &str, own: Option<&Item>) -> Condition {
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
    pub(super) fn can_edit_comment(&self, author: &str, n: i64, c: i64) -> Condition {
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

    /// Where `item`'s op `op` is, as guard details show it.
    fn op_path(&self, item: &Item, op: &str) -> String {
        self.paths.op(&item.path(), op)
    }

    pub(super) fn open_cond(&self, item: &Item) -> Condition {
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
                    self.op_path(item, name::REOPEN)
                ),
            ),
        }
    }

    pub(super) fn closed_cond(&self, item: &Item) -> Condition {
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
                format!("{who} is open; nothing to reopen (close it with {})", self.op_path(item, name::CLOSE)),
            ),
        }
    }

    pub(super) fn checks_cond(&self, conn: &Store, pull: &Item) -> HostResult<Condition> {
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
        let mut detail = String::new();
        if !failing.is_empty() {
            detail.push_str(&format!(
                "{} of {} checks failing ({}) — see {}",
                failing.len(),
                all.len(),
                failing.join(", "),
                self.paths
                    .entry(&Node::Check(pull.number, failing[0].clone()).path())
            ));
            let retry = names(&|c| c.status == "failure" && c.retryable);
            let hard = names(&|c| c.status == "failure" && !c.retryable);
            if !retry.is_empty() {
                let who = if self.can_rerun(pull) {
                    format!("rerun with {}", self.op_path(pull, name::RERUN_CHECKS))
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

    pub(super) fn review_cond(&self, conn: &Store, pull: &Item) -> HostResult<Condition> {
        let rs = db::review_state(conn, pull)?;
        if rs.approved() {
            return Ok(Condition::check(
                "review_approved",
                true,
                format!("approved by {}", and_list(&rs.approvers)),
            ));
        }
        if !rs.changes_by.is_empty() {
            return Ok(Condition::check(
                "review_approved",
                false,
                format!(
                    "changes requested by {} (see {}); the author must address them and the reviewer approve — cannot be satisfied by you",
                    and_list(&rs.changes_by),
                    self.paths.entry(&Node::Reviews(pull.number).path())
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
                self.op_path(pull, name::REQUEST_REVIEW)
            )
        } else if self.me.role == Role::Maintainer {
            format!(
                "no approving review yet{waiting} — approve it with {}",
                self.op_path(pull, name::APPROVE)
            )
        } else {
            format!(
                "no approving review yet{waiting}; only maintainers approve — ask one with {}",
                self.op_path(pull, name::REQUEST_REVIEW)
            )
        };
        Ok(Condition::check("review_approved", false, detail))
    }

    pub(super) fn mergeable_cond(&self, pull: &Item) -> Condition {
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

    pub(super) fn not_author_cond(&self, pull: &Item) -> Condition {
        if pull.author == self.me.user {
            Condition::check(
                "not_author",
                false,
                format!(
                    "you opened PR #{} and cannot approve your own pull request — ask someone with {}",
                    pull.number,
                    self.op_path(pull, name::REQUEST_REVIEW)
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

    pub(super) fn failing_cond(&self, conn: &Store, pull: &Item) -> HostResult<Condition> {
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
}

/// ` (by alex on 2026-11-30: fixed in 1.2)`
pub(super) fn closed_why(item: &Item) -> String {
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
