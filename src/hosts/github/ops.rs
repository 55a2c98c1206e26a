//! Operations: the tracker's names and arguments where they mean the same, their specs, and
//! what a call asks of GitHub.

use http::Method;
use serde_json::{json, Map, Value};

use super::client::{query_value, seg};
use super::tree::{login, s};
use super::{GithubHost, Hit, Kind, Node, Repo, SearchRun};
use crate::hosts::text::{and_list, flat, plural};
use crate::world::host::{object_schema, CallOutcome, Guard, HostError, HostResult, OpSpec};

const ISSUE_OPS: &[&str] = &[
    "read_body",
    "get_metadata",
    "comment",
    "close",
    "reopen",
    "label",
    "assign",
    "unassign",
    "lock",
    "unlock",
];
const PULL_OPS: &[&str] = &[
    "read_body",
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
    "merge",
];

pub(super) fn names(node: &Node) -> &'static [&'static str] {
    match node {
        Node::Root => &["search"],
        Node::Repo(_) => &["search", "create_issue", "create_status", "read_file"],
        Node::Issues(_) => &["create_issue"],
        Node::Labels(_) => &["create_label"],
        Node::Item(_, Kind::Issue, _) => ISSUE_OPS,
        Node::Item(_, Kind::Pull, _) => PULL_OPS,
        Node::Check(..) => &["read_log"],
        Node::Review(..) | Node::File(..) => &["read_body"],
        Node::Label(..) => &["issues"],
        Node::Branch(..) => &["get_metadata"],
        _ => &[],
    }
}

pub(super) fn offered(node: &Node, op: &str) -> HostResult<()> {
    if names(node).contains(&op) {
        return Ok(());
    }
    let offered = names(node);
    Err(HostError::NotFound(if offered.is_empty() {
        format!("no operation {op:?} here (this entry has none)")
    } else {
        format!("no operation {op:?} here (offered: {})", offered.join(", "))
    }))
}

pub(super) fn spec(node: &Node, op: &str) -> Option<OpSpec> {
    let string = |d: &str| json!({"type": "string", "minLength": 1, "description": d});
    let names = |d: &str| json!({"type": "array", "items": {"type": "string", "minLength": 1}, "description": d});
    let none = || object_schema(json!({}), &[]);
    let what = match node {
        Node::Item(_, Kind::Pull, _) => "pull request",
        _ => "issue",
    };
    let (description, schema) = match op {
        "search" => (
            match node {
                Node::Root => "Search GitHub's issues and pull requests: query (GitHub search syntax), limit (1-100). Makes results/ID/ with hits/1…N linked to the entries.".to_string(),
                _ => "Search this repository's issues and pull requests: query (GitHub search syntax), limit (1-100). Makes results/ID/ with hits/1…N linked to the entries.".to_string(),
            },
            object_schema(
                json!({"query": string("GitHub search words and qualifiers, e.g. is:open label:bug crash"),
                       "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "how many hits to keep"}}),
                &["query"],
            ),
        ),
        "create_issue" => (
            "Open a new issue: title, optional body (markdown), labels and assignees (names).".to_string(),
            object_schema(
                json!({
                    "title": string("one line"),
                    "body": {"type": "string", "description": "markdown"},
                    "labels": names("label names, see labels/"),
                    "assignees": names("GitHub logins"),
                }),
                &["title"],
            ),
        ),
        "create_status" => (
            "Set a commit status: sha, state pending|success|failure|error, context, description, target_url.".to_string(),
            object_schema(
                json!({
                    "sha": string("full commit sha"),
                    "state": {"type": "string", "enum": ["pending", "success", "failure", "error"]},
                    "context": string("the status's name, e.g. ci/build"),
                    "description": {"type": "string"},
                    "target_url": {"type": "string"},
                }),
                &["sha", "state"],
            ),
        ),
        "read_file" => (
            "Read a file of the repository: path, ref (branch, tag or sha; default the default branch).".to_string(),
            object_schema(json!({"path": string("path in the repository"), "ref": string("branch, tag or sha")}), &["path"]),
        ),
        "create_label" => (
            "Create a label: name, color (6 hex digits, e.g. d73a4a), description.".to_string(),
            object_schema(
                json!({"name": string("label name"), "color": string("6 hex digits"), "description": {"type": "string"}}),
                &["name", "color"],
            ),
        ),
        "read_body" => match node {
            Node::Review(..) => ("Read the review's full text and verdict.".to_string(), none()),
            Node::File(..) => ("Read the file's patch in this pull request.".to_string(), none()),
            _ => (format!("Read the {what}'s full text (markdown) with a header of its state."), none()),
        },
        "get_metadata" => match node {
            Node::Branch(..) => ("All of GitHub's fields of the branch as JSON.".to_string(), none()),
            _ => (
                format!("All of GitHub's fields of the {what} as JSON: state, author, labels, assignees, dates{}.",
                    if what == "pull request" { ", branches, mergeable" } else { "" }),
                none(),
            ),
        },
        "comment" => (
            format!("Add a comment to the {what}: body (markdown)."),
            object_schema(json!({"body": string("markdown")}), &["body"]),
        ),
        "close" => (
            format!("Close the {what}{}: reason (text, posted as a comment; \"completed\" or \"not_planned\" set GitHub's state reason).",
                if what == "pull request" { " without merging" } else { "" }),
            object_schema(json!({"reason": string("why it is closed")}), &["reason"]),
        ),
        "reopen" => (format!("Reopen the closed {what}."), none()),
        "label" => (
            "Add and/or remove labels: add [names], remove [names] (see labels/).".to_string(),
            {
                let mut sc = object_schema(json!({"add": names("labels to add"), "remove": names("labels to remove")}), &[]);
                sc["minProperties"] = json!(1);
                sc
            },
        ),
        "assign" => (
            format!("Assign a user to the {what}: user (GitHub login)."),
            object_schema(json!({"user": string("GitHub login")}), &["user"]),
        ),
        "unassign" => (
            format!("Remove an assignee from the {what}: user (GitHub login)."),
            object_schema(json!({"user": string("GitHub login")}), &["user"]),
        ),
        "lock" => (
            "Lock the conversation: reason (optional: off-topic, too heated, resolved, spam).".to_string(),
            object_schema(json!({"reason": {"type": "string", "enum": ["off-topic", "too heated", "resolved", "spam"]}}), &[]),
        ),
        "unlock" => ("Unlock the conversation.".to_string(), none()),
        "diff" => ("The pull request's changes as a unified diff (file by file).".to_string(), none()),
        "request_review" => (
            "Ask someone to review the pull request: reviewer (GitHub login, not its author).".to_string(),
            object_schema(json!({"reviewer": string("GitHub login")}), &["reviewer"]),
        ),
        "approve" => (
            "Approve the pull request as the token's user: body (optional review text).".to_string(),
            object_schema(json!({"body": {"type": "string", "description": "review text"}}), &[]),
        ),
        "merge" => (
            "Merge into the base branch: method merge|squash|rebase (default merge). GitHub refuses it if the head moved since the guard was read.".to_string(),
            object_schema(json!({"method": {"type": "string", "enum": ["merge", "squash", "rebase"], "default": "merge"}}), &[]),
        ),
        "read_log" => ("Read the check's output (title, summary, text) and where its full log is.".to_string(), none()),
        "issues" => (
            "Issues and pull requests with this label, newest first, as paths: state open|closed|all (default all).".to_string(),
            object_schema(json!({"state": {"type": "string", "enum": ["open", "closed", "all"], "default": "all"}}), &[]),
        ),
        _ => return None,
    };
    Some(OpSpec {
        name: op.to_string(),
        description,
        schema,
    })
}

fn opt_str(a: &Map<String, Value>, key: &str) -> HostResult<Option<String>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(x)) => Ok(Some(x.trim_end_matches(['\n', '\r']).to_string())),
        Some(other) => Err(HostError::InvalidArgs(format!(
            "{key} must be a string, not {other}"
        ))),
    }
}

fn req_str(a: &Map<String, Value>, key: &str) -> HostResult<String> {
    match opt_str(a, key)? {
        Some(x) if !x.trim().is_empty() => Ok(x),
        _ => Err(HostError::InvalidArgs(format!(
            "{key} is required and must not be empty"
        ))),
    }
}

fn str_list(a: &Map<String, Value>, key: &str) -> HostResult<Vec<String>> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(x) if !x.trim().is_empty() => Ok(x.trim().to_string()),
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

impl GithubHost {
    fn repo_of(node: &Node) -> Option<&Repo> {
        match node {
            Node::Repo(r)
            | Node::Issues(r)
            | Node::Pulls(r)
            | Node::Labels(r)
            | Node::Branches(r)
            | Node::Item(r, ..)
            | Node::Checks(r, _)
            | Node::Check(r, ..)
            | Node::Reviews(r, _)
            | Node::Review(r, ..)
            | Node::Files(r, _)
            | Node::File(r, ..)
            | Node::Label(r, _)
            | Node::Branch(r, _) => Some(r),
            _ => None,
        }
    }

    fn write(
        &self,
        what: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> HostResult<Value> {
        self.client
            .write(method, path, body)
            .map_err(|e| e.into_host(what))
    }

    /// After a change: forget what we cached of the item and the repository's listings.
    fn changed_item(&self, r: &Repo, kind: Kind, n: u64) -> CallOutcome {
        self.client.forget(&[
            format!("{}/issues", r.api()),
            format!("{}/pulls", r.api()),
            r.api(),
        ]);
        let mut out = CallOutcome::default();
        out.changed.push(Node::Item(r.clone(), kind, n).path());
        out.changed
            .push(Node::Item(r.clone(), kind, n).path()[..3].to_vec());
        out
    }

    pub(super) fn run(&self, node: &Node, op: &str, args: &Value) -> HostResult<CallOutcome> {
        let spec = spec(node, op)
            .ok_or_else(|| HostError::NotFound(format!("no operation {op:?} here")))?;
        let a = spec.check_args(args)?;
        // Guards are read again, fresh from GitHub, right before the change.
        let guard = Guard::new(self.conditions(node, op, Some(args), true)?);
        if !guard.allowed() {
            return Err(HostError::Blocked(guard));
        }
        match (node, op) {
            (_, "search") => self.search(node, &a),
            (Node::Repo(r) | Node::Issues(r), "create_issue") => self.create_issue(r, &a),
            (Node::Repo(r), "create_status") => {
                let sha = req_str(&a, "sha")?;
                let mut body = Map::new();
                body.insert("state".into(), json!(req_str(&a, "state")?));
                for k in ["target_url", "description", "context"] {
                    if let Some(v) = opt_str(&a, k)? {
                        body.insert(k.into(), json!(v));
                    }
                }
                let v = self.write(
                    &format!("status on {sha}"),
                    Method::POST,
                    &format!("{}/statuses/{}", r.api(), seg(&sha)),
                    Some(&Value::Object(body)),
                )?;
                self.client
                    .forget(&[format!("{}/commits/{}", r.api(), seg(&sha))]);
                Ok(CallOutcome::text(format!(
                    "status {} set to {} on {}",
                    s(&v, "context"),
                    s(&v, "state"),
                    sha
                )))
            }
            (Node::Repo(r), "read_file") => {
                let path = req_str(&a, "path")?;
                let enc: Vec<String> = path.trim_matches('/').split('/').map(seg).collect();
                let mut url = format!("{}/contents/{}", r.api(), enc.join("/"));
                if let Some(rf) = opt_str(&a, "ref")? {
                    url.push_str(&format!("?ref={}", query_value(&rf)));
                }
                let p = self
                    .client
                    .get_media(&url, "application/vnd.github.raw")
                    .map_err(|e| e.into_host(&format!("reading {path} in {}", r.full())))?;
                Ok(CallOutcome::text(match &p.body {
                    Value::String(t) => t.clone(),
                    other => serde_json::to_string_pretty(other).unwrap_or_default(),
                }))
            }
            (Node::Labels(r), "create_label") => {
                let mut body = Map::new();
                body.insert("name".into(), json!(req_str(&a, "name")?));
                body.insert(
                    "color".into(),
                    json!(req_str(&a, "color")?.trim_start_matches('#')),
                );
                if let Some(d) = opt_str(&a, "description")? {
                    body.insert("description".into(), json!(d));
                }
                let v = self.write(
                    &format!("new label in {}", r.full()),
                    Method::POST,
                    &format!("{}/labels", r.api()),
                    Some(&Value::Object(body)),
                )?;
                self.client.forget(&[format!("{}/labels", r.api())]);
                let name = s(&v, "name").to_string();
                Ok(CallOutcome::text(format!("created label {name}"))
                    .discovered(Node::Label(r.clone(), name).path())
                    .changed(Node::Labels(r.clone()).path()))
            }
            (Node::Item(r, k, n), _) => self.item_op(node, r, *k, *n, op, &a),
            (Node::Check(r, n, c), "read_log") => {
                let ch = self
                    .checks_of(r, *n)?
                    .into_iter()
                    .find(|x| &x.name == c)
                    .ok_or_else(|| HostError::NotFound(format!("no check {c} on PR #{n}")))?;
                let o = &ch.body["output"];
                let mut text = format!("{} {} · {}\n", ch.kind, ch.name, ch.outcome);
                for k in ["title", "summary", "text"] {
                    let t = s(o, k);
                    if !t.is_empty() {
                        text.push_str(&format!("\n{t}\n"));
                    }
                }
                if !ch.summary.is_empty() && ch.kind == "status" {
                    text.push_str(&format!("\n{}\n", ch.summary));
                }
                if !ch.url.is_empty() {
                    text.push_str(&format!("\nfull log: {}\n", ch.url));
                }
                Ok(CallOutcome::text(text))
            }
            (Node::Review(r, n, id), "read_body") => {
                let v = self
                    .reviews_of(r, *n)?
                    .into_iter()
                    .find(|v| v["id"].as_u64() == Some(*id))
                    .ok_or_else(|| HostError::NotFound(format!("no review {id} on PR #{n}")))?;
                Ok(CallOutcome::text(format!(
                    "Review {id} on PR #{n} by {} · {}\n\n{}",
                    login(&v["user"]),
                    s(&v, "state").to_lowercase().replace('_', " "),
                    s(&v, "body")
                )))
            }
            (Node::File(r, n, f), "read_body") => {
                let v = self
                    .files_of(r, *n)?
                    .into_iter()
                    .find(|v| s(v, "filename") == f)
                    .ok_or_else(|| HostError::NotFound(format!("no file {f} in PR #{n}")))?;
                Ok(CallOutcome::text(file_patch(&v)))
            }
            (Node::Label(r, l), "issues") => {
                let state = opt_str(&a, "state")?.unwrap_or_else(|| "all".into());
                if !["open", "closed", "all"].contains(&state.as_str()) {
                    return Err(HostError::InvalidArgs(format!(
                        "state {state:?} is not one of open, closed, all"
                    )));
                }
                let (items, more) = self.list(&format!(
                    "{}/issues?labels={}&state={state}",
                    r.api(),
                    query_value(l)
                ))?;
                let mut out = CallOutcome::text(format!(
                    "{} labelled {l} (state {state}), newest first{}",
                    plural(
                        items.len() as u64,
                        "issue or pull request",
                        "issues and pull requests"
                    ),
                    if more { "; showing the first ones" } else { "" }
                ));
                for v in items {
                    let Some(n) = v["number"].as_u64() else {
                        continue;
                    };
                    let kind = if v.get("pull_request").is_some() {
                        Kind::Pull
                    } else {
                        Kind::Issue
                    };
                    out.discovered.push(Node::Item(r.clone(), kind, n).path());
                }
                Ok(out)
            }
            (Node::Branch(r, b), "get_metadata") => {
                let p = self
                    .get_opt(&format!("{}/branches/{}", r.api(), seg(b)), true)?
                    .ok_or_else(|| HostError::NotFound(format!("no branch {b}")))?;
                Ok(CallOutcome::text(
                    serde_json::to_string_pretty(&p.body).unwrap_or_default(),
                ))
            }
            _ => Err(HostError::NotFound(format!("no operation {op:?} here"))),
        }
    }

    fn create_issue(&self, r: &Repo, a: &Map<String, Value>) -> HostResult<CallOutcome> {
        let mut body = Map::new();
        body.insert("title".into(), json!(flat(&req_str(a, "title")?)));
        if let Some(b) = opt_str(a, "body")? {
            body.insert("body".into(), json!(b));
        }
        for k in ["labels", "assignees"] {
            let l = str_list(a, k)?;
            if !l.is_empty() {
                body.insert(k.into(), json!(l));
            }
        }
        let v = self.write(
            &format!("new issue in {}", r.full()),
            Method::POST,
            &format!("{}/issues", r.api()),
            Some(&Value::Object(body)),
        )?;
        let n = v["number"].as_u64().ok_or_else(|| {
            HostError::Backend("GitHub did not say the new issue's number".into())
        })?;
        let mut out = self.changed_item(r, Kind::Issue, n);
        self.client.seed(&format!("{}/issues/{n}", r.api()), &v);
        out.result = format!("opened issue #{n}: {}", s(&v, "title"));
        out.discovered
            .push(Node::Item(r.clone(), Kind::Issue, n).path());
        Ok(out)
    }

    fn item_op(
        &self,
        node: &Node,
        r: &Repo,
        kind: Kind,
        n: u64,
        op: &str,
        a: &Map<String, Value>,
    ) -> HostResult<CallOutcome> {
        let issue = format!("{}/issues/{n}", r.api());
        let pull = format!("{}/pulls/{n}", r.api());
        let label = Self::item_label(kind, n);
        let what = |verb: &str| format!("{verb} of {}#{n}", r.full());
        match op {
            "read_body" => {
                let p = self
                    .item(r, kind, n, true)?
                    .ok_or_else(|| HostError::NotFound(format!("no {} #{n}", kind.dir())))?;
                let v = &p.body;
                Ok(CallOutcome::text(format!(
                    "{}\n{}\n\n{}",
                    self.item_line(kind, n, v),
                    s(v, "html_url"),
                    s(v, "body")
                )))
            }
            "get_metadata" => {
                let p = self
                    .item(r, kind, n, true)?
                    .ok_or_else(|| HostError::NotFound(format!("no {} #{n}", kind.dir())))?;
                Ok(CallOutcome::text(
                    serde_json::to_string_pretty(&p.body).unwrap_or_default(),
                ))
            }
            "diff" => {
                let files = self.files_of(r, n)?;
                let mut text = String::new();
                for f in &files {
                    text.push_str(&file_patch(f));
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                }
                if files.is_empty() {
                    text = format!("PR #{n} changes no files\n");
                }
                Ok(CallOutcome::text(text))
            }
            "comment" => {
                let body = req_str(a, "body")?;
                let v = self.write(
                    &what("comment"),
                    Method::POST,
                    &format!("{issue}/comments"),
                    Some(&json!({"body": body})),
                )?;
                let mut out = self.changed_item(r, kind, n);
                out.result = format!("commented on {label}: {}", s(&v, "html_url"));
                Ok(out)
            }
            "close" | "reopen" => {
                let mut body = Map::new();
                if op == "close" {
                    let reason = req_str(a, "reason")?;
                    let code = reason.trim().replace(' ', "_").to_lowercase();
                    body.insert("state".into(), json!("closed"));
                    if kind == Kind::Issue && (code == "completed" || code == "not_planned") {
                        body.insert("state_reason".into(), json!(code));
                    } else {
                        // Free text: GitHub keeps no reason field, so it is said in a comment.
                        self.write(
                            &what("comment"),
                            Method::POST,
                            &format!("{issue}/comments"),
                            Some(&json!({"body": reason})),
                        )?;
                    }
                } else {
                    body.insert("state".into(), json!("open"));
                }
                let target = if kind == Kind::Pull { &pull } else { &issue };
                self.write(&what(op), Method::PATCH, target, Some(&Value::Object(body)))?;
                let mut out = self.changed_item(r, kind, n);
                out.result = format!(
                    "{label} {}",
                    if op == "close" { "closed" } else { "reopened" }
                );
                Ok(out)
            }
            "label" => {
                let add = str_list(a, "add")?;
                let remove = str_list(a, "remove")?;
                if add.is_empty() && remove.is_empty() {
                    return Err(HostError::InvalidArgs(
                        "give add and/or remove: label names".into(),
                    ));
                }
                let mut now: Vec<String> = Vec::new();
                if !add.is_empty() {
                    let v = self.write(
                        &what("labelling"),
                        Method::POST,
                        &format!("{issue}/labels"),
                        Some(&json!({"labels": add})),
                    )?;
                    now = v
                        .as_array()
                        .map(|l| l.iter().map(|x| s(x, "name").to_string()).collect())
                        .unwrap_or_default();
                }
                for l in &remove {
                    let v = self.write(
                        &what("unlabelling"),
                        Method::DELETE,
                        &format!("{issue}/labels/{}", seg(l)),
                        None,
                    )?;
                    if let Some(arr) = v.as_array() {
                        now = arr.iter().map(|x| s(x, "name").to_string()).collect();
                    }
                }
                let mut out = self.changed_item(r, kind, n);
                out.result = format!(
                    "{label} now labelled {}",
                    if now.is_empty() {
                        "(none)".to_string()
                    } else {
                        and_list(&now)
                    }
                );
                Ok(out)
            }
            "assign" | "unassign" => {
                let user = req_str(a, "user")?;
                let method = if op == "assign" {
                    Method::POST
                } else {
                    Method::DELETE
                };
                let v = self.write(
                    &what(op),
                    method,
                    &format!("{issue}/assignees"),
                    Some(&json!({"assignees": [user]})),
                )?;
                let now: Vec<String> = v["assignees"]
                    .as_array()
                    .map(|l| l.iter().map(login).collect())
                    .unwrap_or_default();
                let mut out = self.changed_item(r, kind, n);
                out.result = format!(
                    "{label} assigned to {}",
                    if now.is_empty() {
                        "nobody".to_string()
                    } else {
                        and_list(&now)
                    }
                );
                Ok(out)
            }
            "lock" | "unlock" => {
                if op == "lock" {
                    let body = opt_str(a, "reason")?.map(|r| json!({"lock_reason": r}));
                    self.write(
                        &what("lock"),
                        Method::PUT,
                        &format!("{issue}/lock"),
                        body.as_ref(),
                    )?;
                } else {
                    self.write(
                        &what("unlock"),
                        Method::DELETE,
                        &format!("{issue}/lock"),
                        None,
                    )?;
                }
                let mut out = self.changed_item(r, kind, n);
                out.result = format!(
                    "{label} {}",
                    if op == "lock" { "locked" } else { "unlocked" }
                );
                Ok(out)
            }
            "request_review" => {
                let reviewer = req_str(a, "reviewer")?;
                self.write(
                    &what("review request"),
                    Method::POST,
                    &format!("{pull}/requested_reviewers"),
                    Some(&json!({"reviewers": [reviewer]})),
                )?;
                let mut out = self.changed_item(r, kind, n);
                out.result = format!("asked {reviewer} to review {label}");
                Ok(out)
            }
            "approve" => {
                let mut body = json!({"event": "APPROVE"});
                if let Some(b) = opt_str(a, "body")? {
                    body["body"] = json!(b);
                }
                let v = self.write(
                    &what("approval"),
                    Method::POST,
                    &format!("{pull}/reviews"),
                    Some(&body),
                )?;
                self.client.forget(&[format!("{pull}/reviews")]);
                let mut out = self.changed_item(r, kind, n);
                out.result = format!("approved {label} (review {})", v["id"]);
                if let Some(id) = v["id"].as_u64() {
                    out.discovered.push(Node::Review(r.clone(), n, id).path());
                }
                Ok(out)
            }
            "merge" => {
                let method = opt_str(a, "method")?.unwrap_or_else(|| "merge".into());
                if !["merge", "squash", "rebase"].contains(&method.as_str()) {
                    return Err(HostError::InvalidArgs(format!(
                        "method {method:?} is not one of merge, squash, rebase"
                    )));
                }
                // The head we checked: GitHub refuses (409) if it moved since.
                let sha = self.head_sha(r, n)?;
                let v = self.write(
                    &what("merge"),
                    Method::PUT,
                    &format!("{pull}/merge"),
                    Some(&json!({"merge_method": method, "sha": sha})),
                )?;
                let mut out = self.changed_item(r, kind, n);
                out.result = format!(
                    "{label} merged ({method}) as {}: {}",
                    s(&v, "sha"),
                    s(&v, "message")
                );
                let _ = node;
                Ok(out)
            }
            other => Err(HostError::NotFound(format!("no operation {other:?} here"))),
        }
    }

    fn search(&self, node: &Node, a: &Map<String, Value>) -> HostResult<CallOutcome> {
        let query = req_str(a, "query")?;
        let limit = match a.get("limit") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(l) if (1..=100).contains(&l) => Some(l),
                _ => {
                    return Err(HostError::InvalidArgs(format!(
                        "limit must be 1..100, not {v}"
                    )))
                }
            },
        };
        let q = match Self::repo_of(node) {
            Some(r) => format!("{query} repo:{}", r.full()),
            None => query.clone(),
        };
        let mut url = format!("/search/issues?q={}", query_value(&q));
        if let Some(l) = limit {
            url.push_str(&format!("&per_page={l}"));
        }
        let p = self
            .client
            .get(&url)
            .map_err(|e| e.into_host(&format!("search {q:?}")))?;
        let total = p.body["total_count"].as_u64().unwrap_or(0);
        let mut hits = Vec::new();
        for v in p.body["items"].as_array().cloned().unwrap_or_default() {
            let Some(n) = v["number"].as_u64() else {
                continue;
            };
            let repo_url = s(&v, "repository_url");
            let mut parts = repo_url.rsplit('/');
            let (Some(name), Some(owner)) = (parts.next(), parts.next()) else {
                continue;
            };
            let repo = Repo {
                owner: owner.to_string(),
                name: name.to_string(),
            };
            let kind = if v.get("pull_request").is_some() {
                Kind::Pull
            } else {
                Kind::Issue
            };
            if kind == Kind::Issue && self.repo_known(&repo) {
                self.client.seed(&format!("{}/issues/{n}", repo.api()), &v);
            }
            hits.push(Hit {
                repo,
                kind,
                number: n,
                title: flat(s(&v, "title")),
                state: s(&v, "state").to_string(),
            });
            if limit.is_some_and(|l| hits.len() as u64 >= l) {
                break;
            }
        }
        let id = {
            let mut all = self.searches.lock().unwrap_or_else(|e| e.into_inner());
            let id = all.last().map(|x| x.id + 1).unwrap_or(1);
            all.push(SearchRun {
                id,
                query: q.clone(),
                total,
                hits: hits.clone(),
            });
            id
        };
        let mut text = format!(
            "{} for {q:?} (search {id}; each hit is results/{id}/hits/K, its ref the object's)\n",
            plural(total, "hit", "hits")
        );
        let mut out = CallOutcome::default();
        out.discovered.push(Node::Result(id).path());
        out.changed.push(Node::Results.path());
        for (i, h) in hits.iter().enumerate() {
            let target = Node::Item(h.repo.clone(), h.kind, h.number);
            text.push_str(&format!(
                "{}. {} {}#{} · {} · {}\n",
                i + 1,
                if h.kind == Kind::Pull { "PR" } else { "Issue" },
                h.repo.full(),
                h.number,
                h.state,
                h.title
            ));
            if self.repo_known(&h.repo) {
                out.discovered.push(target.path());
            }
        }
        out.result = text;
        Ok(out)
    }
}

/// A file of a pull request as a unified diff section.
pub(super) fn file_patch(v: &Value) -> String {
    let f = s(v, "filename");
    let prev = v
        .get("previous_filename")
        .and_then(Value::as_str)
        .unwrap_or(f);
    let mut text = format!("diff --git a/{prev} b/{f}\n--- a/{prev}\n+++ b/{f}\n");
    match v.get("patch").and_then(Value::as_str) {
        Some(p) => text.push_str(p),
        None => text.push_str(&format!(
            "(no patch shown by GitHub: {} file)",
            s(v, "status")
        )),
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}
