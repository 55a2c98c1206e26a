//! Operations, each declared once in `OPS`: its name, the entries that offer it, its
//! arguments as a typed value (the schema `ops/` shows is generated from that type), its
//! guard and its run. A call checks the guard inside the caller's write transaction, with
//! the function `guard` shows, so what the guard said is what the call checks.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::db::{self, Item};
use super::guards::closed_why;
use super::store::{args, Store, P};
use super::view::item_name;
use super::{Kind, Node, TrackerHost};
use crate::host::op::{spelled, Decl, Names, NoArgs, Ops, Text};
use crate::host::text::{and_list, flat, plural};
use crate::host::{CallOutcome, Condition, HostError, HostResult, OrFailed};

/// An entry as its ops see it: its node and, for an issue or pull request, the item itself,
/// read once so that the guards of all of an entry's ops share one read (and inside a call,
/// read in the call's transaction).
pub(super) struct Here {
    node: Node,
    item: Option<Item>,
}

impl Here {
    /// The entry at `node`, its item read from `conn`.
    pub(super) fn read(conn: &Store, node: Node) -> HostResult<Here> {
        let item = match &node {
            Node::Item(_, n) => Some(db::item_req(conn, *n)?),
            _ => None,
        };
        Ok(Here { node, item })
    }

    /// An issue or pull request already read.
    pub(super) fn of_item(item: Item) -> Here {
        Here {
            node: Node::Item(item.kind, item.number),
            item: Some(item),
        }
    }

    /// The entry without its item: enough for which ops it offers and their descriptions.
    pub(super) fn unread(node: Node) -> Here {
        Here { node, item: None }
    }

    fn item(&self) -> HostResult<&Item> {
        self.item
            .as_ref()
            .ok_or_else(|| HostError::NotFound("not an issue or pull request".into()))
    }

    fn is_item(&self) -> bool {
        matches!(self.node, Node::Item(..))
    }

    fn is_pull(&self) -> bool {
        matches!(self.node, Node::Item(Kind::Pull, _))
    }

    /// What the entry is called in descriptions.
    fn what(&self) -> &'static str {
        match self.node {
            Node::Comment(..) => "comment",
            Node::Item(Kind::Pull, _) => "pull request",
            _ => "issue",
        }
    }
}

// ---------------------------------------------------------------- arguments

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateIssue {
    /// one line
    title: Text,
    /// markdown
    body: Option<String>,
    /// label names, see labels/
    #[serde(default)]
    labels: Names,
    /// user names, see users/
    #[serde(default)]
    assignees: Names,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditBody {
    /// the whole new text (markdown)
    body: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddComment {
    /// markdown
    body: Text,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Close {
    /// why it is closed
    reason: Text,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1))]
struct Relabel {
    /// labels to add
    #[serde(default)]
    add: Names,
    /// labels to remove
    #[serde(default)]
    remove: Names,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Assignee {
    /// user name
    user: Text,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RequestReview {
    /// user name
    reviewer: Text,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Approve {
    /// review text
    body: Option<String>,
}

#[derive(Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Method {
    #[default]
    Merge,
    Squash,
    Rebase,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Merge {
    #[serde(default)]
    method: Method,
}

#[derive(Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum StateFilter {
    Open,
    Closed,
    #[default]
    All,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Related {
    /// which to list: open, closed (closed or merged) or all
    #[serde(default)]
    state: StateFilter,
}

// ---------------------------------------------------------------- the ops

type Op<A> = Decl<TrackerHost, Here, Store, A>;

/// Every op's name, spelled once: the declarations below and the words that point to an
/// op (a guard's "reopen it with …") use these.
pub(super) mod name {
    pub const CREATE_ISSUE: &str = "create_issue";
    pub const READ_BODY: &str = "read_body";
    pub const EDIT_BODY: &str = "edit_body";
    pub const GET_METADATA: &str = "get_metadata";
    pub const COMMENT: &str = "comment";
    pub const CLOSE: &str = "close";
    pub const REOPEN: &str = "reopen";
    pub const LABEL: &str = "label";
    pub const ASSIGN: &str = "assign";
    pub const UNASSIGN: &str = "unassign";
    pub const DIFF: &str = "diff";
    pub const REQUEST_REVIEW: &str = "request_review";
    pub const APPROVE: &str = "approve";
    pub const RERUN_CHECKS: &str = "rerun_checks";
    pub const MERGE: &str = "merge";
    pub const READ_LOG: &str = "read_log";
    pub const ISSUES: &str = "issues";
}

/// The guard of an op that only reads.
fn reading<A>(h: &TrackerHost, _: &Store, _: &Here, _: Option<&A>) -> HostResult<Vec<Condition>> {
    Ok(vec![h.can_read()])
}

/// Every op of the tracker, in the order `ops/` lists them.
pub(super) static OPS: LazyLock<Ops<TrackerHost, Here, Store>> = LazyLock::new(|| {
    Ops::new(vec![
        Op::<CreateIssue> {
            name: name::CREATE_ISSUE,
            offers: |at| matches!(at.node, Node::Root | Node::Issues),
            describe: |_| {
                "Open a new issue: title, optional body (markdown), labels and assignees (names)."
                    .into()
            },
            guard: |h, _, _, args| {
                let mut c = vec![h.can_comment("open issues")];
                // Labels and assignees are triage: maintainers only.
                if args.is_some_and(|a| !a.labels.is_empty() || !a.assignees.is_empty()) {
                    c.push(h.can_write("set labels or assignees", None));
                }
                Ok(c)
            },
            run: |h, conn, _, a| h.create_issue(conn, a),
        }
        .into(),
        Op::<NoArgs> {
            name: name::READ_BODY,
            offers: |at| matches!(at.node, Node::Item(..) | Node::Comment(..) | Node::Review(..)),
            describe: |at| match at.node {
                Node::Comment(..) => "Read the comment's full text (markdown).".into(),
                Node::Review(..) => "Read the review's full text and verdict.".into(),
                _ => format!(
                    "Read the {}'s full text (markdown) with a header of its state.",
                    at.what()
                ),
            },
            guard: reading,
            run: |h, conn, at, _| h.read_body(conn, at),
        }
        .reading(),
        Op::<EditBody> {
            name: name::EDIT_BODY,
            offers: |at| matches!(at.node, Node::Item(..) | Node::Comment(..)),
            describe: |at| {
                format!(
                    "Replace the {}'s text (markdown) with body; writing its `body` file does this.",
                    at.what()
                )
            },
            guard: |h, conn, at, _| {
                Ok(vec![match at.node {
                    Node::Comment(_, n, c) => {
                        let cm = db::comment(conn, n, c)?.ok_or_else(|| {
                            HostError::NotFound(format!("no comment {c} on #{n}"))
                        })?;
                        h.can_edit_comment(&cm.author, n, c)
                    }
                    _ => h.can_write("edit", Some(at.item()?)),
                }])
            },
            run: |h, conn, at, a| h.edit_body(conn, at, &a.body),
        }
        .into(),
        Op::<NoArgs> {
            name: name::GET_METADATA,
            offers: Here::is_item,
            describe: |at| {
                format!(
                    "All fields of the {} as JSON: state, author, labels, assignees, dates{}.",
                    at.what(),
                    if at.is_pull() {
                        ", checks, reviews, branches"
                    } else {
                        ""
                    }
                )
            },
            guard: reading,
            run: |h, conn, at, _| {
                let meta = h.metadata(conn, at.item()?)?;
                let text = serde_json::to_string_pretty(&meta).or_failed("cannot render metadata")?;
                Ok(CallOutcome::text(text))
            },
        }
        .reading(),
        Op::<AddComment> {
            name: name::COMMENT,
            offers: Here::is_item,
            describe: |at| format!("Add a comment to the {}: body (markdown).", at.what()),
            guard: |h, _, _, _| Ok(vec![h.can_comment("comment")]),
            run: |h, conn, at, a| h.comment(conn, at.item()?, a.body.as_str()),
        }
        .into(),
        Op::<Close> {
            name: name::CLOSE,
            offers: Here::is_item,
            describe: |at| {
                format!(
                    "Close the {}{}: reason (text, e.g. \"fixed in 1.2\").",
                    at.what(),
                    if at.is_pull() { " without merging" } else { "" }
                )
            },
            guard: |h, _, at, _| {
                let it = at.item()?;
                Ok(vec![h.open_cond(it), h.can_write("close", Some(it))])
            },
            run: |h, conn, at, a| h.close(conn, at.item()?, &flat(a.reason.as_str())),
        }
        .into(),
        Op::<NoArgs> {
            name: name::REOPEN,
            offers: Here::is_item,
            describe: |at| format!("Reopen the closed {}.", at.what()),
            guard: |h, _, at, _| {
                let it = at.item()?;
                Ok(vec![h.closed_cond(it), h.can_write("reopen", Some(it))])
            },
            run: |h, conn, at, _| h.reopen(conn, at.item()?),
        }
        .into(),
        Op::<Relabel> {
            name: name::LABEL,
            offers: Here::is_item,
            describe: |_| {
                "Add and/or remove labels: add [names], remove [names] (see labels/).".into()
            },
            guard: |h, _, _, _| Ok(vec![h.can_write("label", None)]),
            run: |h, conn, at, a| h.relabel(conn, at.item()?, a),
        }
        .into(),
        Op::<Assignee> {
            name: name::ASSIGN,
            offers: Here::is_item,
            describe: |at| {
                format!(
                    "Assign a user to the {}: user (name, see users/).",
                    at.what()
                )
            },
            guard: |h, _, _, _| Ok(vec![h.can_write("assign", None)]),
            run: |h, conn, at, a| h.assign(conn, at.item()?, a.user.as_str().trim(), true),
        }
        .into(),
        Op::<Assignee> {
            name: name::UNASSIGN,
            offers: Here::is_item,
            describe: |at| format!("Remove an assignee from the {}: user (name).", at.what()),
            guard: |h, _, _, _| Ok(vec![h.can_write("assign", None)]),
            run: |h, conn, at, a| h.assign(conn, at.item()?, a.user.as_str().trim(), false),
        }
        .into(),
        Op::<NoArgs> {
            name: name::DIFF,
            offers: Here::is_pull,
            describe: |_| "The pull request's changes as a unified diff.".into(),
            guard: reading,
            run: |_, _, at, _| {
                let pull = at.item()?;
                Ok(CallOutcome::text(pull.diff.clone().unwrap_or_else(|| {
                    format!("(PR #{} has no recorded changes)", pull.number)
                })))
            },
        }
        .reading(),
        Op::<RequestReview> {
            name: name::REQUEST_REVIEW,
            offers: Here::is_pull,
            describe: |_| {
                "Ask someone to review the pull request: reviewer (user name, not its author)."
                    .into()
            },
            guard: |h, _, at, _| {
                let it = at.item()?;
                Ok(vec![h.open_cond(it), h.can_comment("request reviews")])
            },
            run: |h, conn, at, a| h.request_review(conn, at.item()?, a.reviewer.as_str().trim()),
        }
        .into(),
        Op::<Approve> {
            name: name::APPROVE,
            offers: Here::is_pull,
            describe: |_| "Approve the pull request as you: body (optional review text).".into(),
            guard: |h, _, at, _| {
                let it = at.item()?;
                Ok(vec![
                    h.open_cond(it),
                    h.not_author_cond(it),
                    h.can_write("approve", None),
                ])
            },
            run: |h, conn, at, a| h.approve(conn, at.item()?, a.body.as_deref()),
        }
        .into(),
        Op::<NoArgs> {
            name: name::RERUN_CHECKS,
            offers: Here::is_pull,
            describe: |_| {
                "Run the failing checks again (fixes failures of the runner, not of the code)."
                    .into()
            },
            guard: |h, conn, at, _| {
                let it = at.item()?;
                Ok(vec![
                    h.open_cond(it),
                    h.failing_cond(conn, it)?,
                    h.can_write("rerun checks", Some(it)),
                ])
            },
            run: |h, conn, at, _| h.rerun(conn, at.item()?),
        }
        .into(),
        Op::<Merge> {
            name: name::MERGE,
            offers: Here::is_pull,
            describe: |_| {
                "Merge into the base branch: method merge|squash|rebase (default merge); closes the issues it fixes."
                    .into()
            },
            guard: |h, conn, at, _| {
                let it = at.item()?;
                Ok(vec![
                    h.open_cond(it),
                    h.checks_cond(conn, it)?,
                    h.review_cond(conn, it)?,
                    h.mergeable_cond(it),
                    h.can_write("merge", None),
                ])
            },
            run: |h, conn, at, a| h.merge(conn, at.item()?, a.method),
        }
        .into(),
        Op::<NoArgs> {
            name: name::READ_LOG,
            offers: |at| matches!(at.node, Node::Check(..)),
            describe: |_| "Read the check's full log.".into(),
            guard: reading,
            run: |_, conn, at, _| match &at.node {
                Node::Check(n, name) => match db::check(conn, *n, name)? {
                    Some(c) => Ok(CallOutcome::text(c.log)),
                    None => Err(HostError::NotFound(format!("no check {name} on PR #{n}"))),
                },
                _ => Err(HostError::NotFound("not a check".into())),
            },
        }
        .reading(),
        Op::<Related> {
            name: name::ISSUES,
            offers: |at| matches!(at.node, Node::Label(_) | Node::User(_)),
            describe: |at| {
                format!(
                    "Issues and pull requests {}, newest first, as paths: state open|closed|all (default all).",
                    match at.node {
                        Node::Label(_) => "with this label",
                        _ => "this user opened or is assigned",
                    }
                )
            },
            guard: reading,
            run: |h, conn, at, a| h.related(conn, &at.node, a.state),
        }
        .reading(),
    ])
});

fn exec(conn: &Store, sql: &str, p: &[P<'_>]) -> HostResult<()> {
    conn.execute(sql, p)
}

/// `a, b` or `none`.
fn none_or_list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

// ---------------------------------------------------------------- calls

/// Paths touched when an item's own line changes: the item, its collection, and (when an
/// open/closed count moved) the host root and its labels' entries.
fn item_changed(conn: &Store, item: &Item, counts: bool) -> HostResult<Vec<Vec<String>>> {
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
    /// Each of `names` is a known `what` (label, user), or words that list the known ones.
    fn check_known<S: AsRef<str>>(
        &self,
        conn: &Store,
        what: &str,
        names: &[S],
        known: fn(&Store) -> HostResult<Vec<String>>,
    ) -> HostResult<()> {
        if names.is_empty() {
            return Ok(());
        }
        let all = known(conn)?;
        match names.iter().find(|n| !all.iter().any(|k| k == n.as_ref())) {
            Some(name) => Err(HostError::InvalidArgs(format!(
                "unknown {what} {:?}; {what}s in {}: {}",
                name.as_ref(),
                self.project,
                all.join(", ")
            ))),
            None => Ok(()),
        }
    }

    fn read_body(&self, conn: &Store, at: &Here) -> HostResult<CallOutcome> {
        match at.node {
            Node::Comment(_, n, c) => match db::comment(conn, n, c)? {
                Some(cm) => Ok(CallOutcome::text(format!(
                    "Comment {c} on #{n} by {} on {}\n\n{}",
                    cm.author,
                    db::day(&cm.created_at),
                    cm.body
                ))),
                None => Err(HostError::NotFound(format!("no comment {c} on #{n}"))),
            },
            Node::Review(n, r) => match db::review(conn, n, r)? {
                Some(rv) => Ok(CallOutcome::text(format!(
                    "Review {r} on PR #{n} by {} on {} · {}\n\n{}",
                    rv.author,
                    db::day(&rv.created_at),
                    rv.state.replace('_', " "),
                    rv.body
                ))),
                None => Err(HostError::NotFound(format!("no review {r} on PR #{n}"))),
            },
            _ => Ok(CallOutcome::text(self.body_text(conn, at.item()?)?)),
        }
    }

    fn edit_body(&self, conn: &Store, at: &Here, body: &str) -> HostResult<CallOutcome> {
        let now = db::now();
        let bytes = plural(body.len() as i64, "byte", "bytes");
        match at.node {
            Node::Comment(_, n, c) => {
                exec(
                    conn,
                    "UPDATE comments SET body = ?3, edited_at = ?4 WHERE number = ?1 AND seq = ?2",
                    args![n, c, body, now],
                )?;
                db::touch(conn, n, &now)?;
                let mut out = CallOutcome::text(format!(
                    "replaced the text of comment {c} on #{n} ({bytes})"
                ));
                out.changed = item_changed(conn, &db::item_req(conn, n)?, false)?;
                out.changed.push(at.node.path());
                Ok(out)
            }
            _ => {
                let item = at.item()?;
                exec(
                    conn,
                    "UPDATE items SET body = ?2, updated_at = ?3 WHERE number = ?1",
                    args![item.number, body, now],
                )?;
                let name = item_name(item.kind, item.number);
                let mut out = CallOutcome::text(format!("replaced the text of {name} ({bytes})"));
                out.changed = item_changed(conn, item, false)?;
                Ok(out)
            }
        }
    }

    fn comment(&self, conn: &Store, item: &Item, body: &str) -> HostResult<CallOutcome> {
        let n = item.number;
        let seq = db::add_comment(conn, n, &self.me.user, body, &db::now())?;
        let comments = Node::Comments(item.kind, n);
        let mut out = CallOutcome::text(format!(
            "added comment {seq} on {} as {}",
            item_name(item.kind, n),
            self.me.user
        ))
        .discovered(Node::Comment(item.kind, n, seq).path());
        out.changed = item_changed(conn, item, false)?;
        out.changed.push(comments.path());
        Ok(out)
    }

    fn close(&self, conn: &Store, item: &Item, reason: &str) -> HostResult<CallOutcome> {
        exec(
            conn,
            "UPDATE items SET state = 'closed', closed_at = ?2, closed_by = ?3,
             close_reason = ?4, updated_at = ?2 WHERE number = ?1",
            args![item.number, db::now(), self.me.user, reason],
        )?;
        let mut out = CallOutcome::text(format!(
            "closed {}: {reason}",
            item_name(item.kind, item.number)
        ));
        out.changed = item_changed(conn, item, true)?;
        Ok(out)
    }

    fn reopen(&self, conn: &Store, item: &Item) -> HostResult<CallOutcome> {
        exec(
            conn,
            "UPDATE items SET state = 'open', closed_at = NULL, closed_by = NULL,
             close_reason = NULL, updated_at = ?2 WHERE number = ?1",
            args![item.number, db::now()],
        )?;
        let mut out = CallOutcome::text(format!("reopened {}", item_name(item.kind, item.number)));
        out.changed = item_changed(conn, item, true)?;
        Ok(out)
    }

    /// `assign` (`add`) or `unassign` `user`.
    fn assign(&self, conn: &Store, item: &Item, user: &str, add: bool) -> HostResult<CallOutcome> {
        let n = item.number;
        let name = item_name(item.kind, n);
        self.check_known(conn, "user", &[user], db::user_names)?;
        let before = db::assignees_of(conn, n)?;
        if add {
            exec(
                conn,
                "INSERT INTO assignees (number, \"user\") VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                args![n, user],
            )?;
        } else {
            if !before.iter().any(|b| b == user) {
                return Err(HostError::InvalidArgs(format!(
                    "{user} is not assigned to {name} (assignees: {})",
                    none_or_list(&before)
                )));
            }
            exec(
                conn,
                "DELETE FROM assignees WHERE number = ?1 AND \"user\" = ?2",
                args![n, user],
            )?;
        }
        db::touch(conn, n, &db::now())?;
        let after = db::assignees_of(conn, n)?;
        let (verb, to) = if add {
            ("assigned", "to")
        } else {
            ("unassigned", "from")
        };
        let mut out = CallOutcome::text(format!(
            "{verb} {user} {to} {name} (assignees: {})",
            none_or_list(&after)
        ));
        out.changed = item_changed(conn, item, false)?;
        Ok(out)
    }

    fn request_review(&self, conn: &Store, pull: &Item, reviewer: &str) -> HostResult<CallOutcome> {
        let n = pull.number;
        self.check_known(conn, "user", &[reviewer], db::user_names)?;
        if reviewer == pull.author {
            return Err(HostError::InvalidArgs(format!(
                "{reviewer} opened PR #{n} and cannot review it; choose another of: {}",
                db::user_names(conn)?
                    .into_iter()
                    .filter(|u| *u != pull.author)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        exec(
            conn,
            "INSERT INTO review_requests (number, \"user\") VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            args![n, reviewer],
        )?;
        db::touch(conn, n, &db::now())?;
        let mut out = CallOutcome::text(format!("requested a review of PR #{n} from {reviewer}"));
        out.changed = item_changed(conn, pull, false)?;
        out.changed.push(Node::Reviews(n).path());
        Ok(out)
    }

    fn approve(&self, conn: &Store, pull: &Item, body: Option<&str>) -> HostResult<CallOutcome> {
        let n = pull.number;
        let now = db::now();
        let body = body
            .map(str::trim_end)
            .filter(|b| !b.is_empty())
            .unwrap_or("Approved.");
        let seq = conn.int(
            "SELECT coalesce(max(seq), 0) + 1 FROM reviews WHERE number = ?1",
            args![n],
        )?;
        exec(
            conn,
            "INSERT INTO reviews (number, seq, author, state, body, created_at)
             VALUES (?1, ?2, ?3, 'approved', ?4, ?5)",
            args![n, seq, self.me.user, body, now],
        )?;
        exec(
            conn,
            "DELETE FROM review_requests WHERE number = ?1 AND \"user\" = ?2",
            args![n, self.me.user],
        )?;
        db::touch(conn, n, &now)?;
        let mut out = CallOutcome::text(format!(
            "approved PR #{n} as {} (review {seq})",
            self.me.user
        ))
        .discovered(Node::Review(n, seq).path());
        out.changed = item_changed(conn, pull, false)?;
        out.changed.push(Node::Reviews(n).path());
        Ok(out)
    }

    /// `issues` of a label or a user.
    fn related(&self, conn: &Store, node: &Node, state: StateFilter) -> HostResult<CallOutcome> {
        let state = &spelled(state);
        let things = |total: usize| {
            plural(
                total as i64,
                "issue or pull request",
                "issues and pull requests",
            )
        };
        let (found, head) = match node {
            Node::Label(name) => {
                let (found, total) = db::items_with_label(conn, name, state, self.page_size)?;
                let head = format!(
                    "{} labelled {name} (state {state}), newest first{}",
                    things(total),
                    self.shown_note(found.len(), total)
                );
                (found, head)
            }
            Node::User(name) => {
                let (found, total) = db::items_of_user(conn, name, state, self.page_size)?;
                let head = format!(
                    "{} opened by or assigned to {name} (state {state}), newest first{}",
                    things(total),
                    self.shown_note(found.len(), total)
                );
                (found, head)
            }
            _ => return Err(HostError::NotFound("not a label or a user".into())),
        };
        let mut out = CallOutcome::text(head);
        for (kind, n) in found {
            out = out.discovered(Node::Item(kind, n).path());
        }
        Ok(out)
    }

    fn shown_note(&self, shown: usize, total: usize) -> String {
        if shown < total {
            format!("; showing the first {shown}")
        } else {
            String::new()
        }
    }

    fn create_issue(&self, conn: &Store, args: CreateIssue) -> HostResult<CallOutcome> {
        let title = flat(args.title.as_str());
        let body = args.body.unwrap_or_default();
        let (labels, assignees) = (args.labels.0, args.assignees.0);
        self.check_known(conn, "label", &labels, db::label_names)?;
        self.check_known(conn, "user", &assignees, db::user_names)?;
        let number = conn.int("SELECT coalesce(max(number), 0) + 1 FROM items", &[])?;
        let now = db::now();
        exec(
            conn,
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at)
             VALUES (?1, 'issue', ?2, ?3, ?4, 'open', ?5, ?5)",
            args![number, title, body.trim_end(), self.me.user, now],
        )?;
        for l in &labels {
            exec(
                conn,
                "INSERT INTO item_labels (number, label) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                args![number, l],
            )?;
        }
        for u in &assignees {
            exec(
                conn,
                "INSERT INTO assignees (number, \"user\") VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                args![number, u],
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

    fn relabel(&self, conn: &Store, item: &Item, args: Relabel) -> HostResult<CallOutcome> {
        let n = item.number;
        let now = &db::now();
        let (add, remove) = (args.add.0, args.remove.0);
        if add.is_empty() && remove.is_empty() {
            return Err(HostError::InvalidArgs(format!(
                "give add and/or remove, e.g. {{\"add\": [\"bug\"]}}; labels in {}: {}",
                self.project,
                db::label_names(conn)?.join(", ")
            )));
        }
        self.check_known(conn, "label", &add, db::label_names)?;
        self.check_known(conn, "label", &remove, db::label_names)?;
        let before = db::labels_of(conn, n)?;
        for l in &add {
            exec(
                conn,
                "INSERT INTO item_labels (number, label) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                args![n, l],
            )?;
        }
        for l in &remove {
            exec(
                conn,
                "DELETE FROM item_labels WHERE number = ?1 AND label = ?2",
                args![n, l],
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

    fn rerun(&self, conn: &Store, pull: &Item) -> HostResult<CallOutcome> {
        let n = pull.number;
        let now = &db::now();
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
                    args![n, c.name, format!("passed on rerun {run}"), log, run],
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
                    args![n, c.name, log, run],
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

    fn merge(&self, conn: &Store, pull: &Item, method: Method) -> HostResult<CallOutcome> {
        let n = pull.number;
        let now = &db::now();
        let method = spelled(method);
        exec(
            conn,
            "UPDATE items SET state = 'merged', closed_at = ?2, closed_by = ?3, merge_method = ?4,
             close_reason = ?5, updated_at = ?2 WHERE number = ?1",
            args![n, now, self.me.user, method, format!("merged ({method})")],
        )?;
        exec(
            conn,
            "DELETE FROM review_requests WHERE number = ?1",
            args![n],
        )?;
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
                args![issue, now, self.me.user, reason],
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
    fn body_text(&self, conn: &Store, item: &Item) -> HostResult<String> {
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

    fn metadata(&self, conn: &Store, item: &Item) -> HostResult<Value> {
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
            "path": self.paths.entry(&node.path()),
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
