//! Operations, each declared once: the tracker's names and arguments where they mean the
//! same, which entries offer them, their guards (guards.rs) and what a call asks of GitHub.

use std::sync::LazyLock;

use http::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::client::{query_value, seg};
use super::guards::Read;
use super::tree::{login, s};
use super::{GithubHost, Hit, Kind, Node, Repo, SearchRun};
use crate::host::op::{spelled as word, Bounded, Decl, Names, NoArgs, Ops, Prose, Text};
use crate::host::text::{and_list, flat, plural};
use crate::host::{CallOutcome, Condition, HostError, HostResult};
use crate::hosts::lock;

/// How many search hits to keep: 1 to 100 (GitHub's largest page).
type Limit = Bounded<1, 100>;

type D<A> = Decl<GithubHost, Node, Read, A>;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Search {
    /// GitHub search words and qualifiers, e.g. is:open label:bug crash
    query: Text,
    /// how many hits to keep
    #[serde(default)]
    limit: Option<Limit>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateIssue {
    /// one line
    title: Text,
    /// markdown
    #[serde(default)]
    body: Option<Prose>,
    /// label names, see labels/
    #[serde(default)]
    labels: Names,
    /// GitHub logins
    #[serde(default)]
    assignees: Names,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum StatusState {
    Pending,
    Success,
    Failure,
    Error,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateStatus {
    /// full commit sha
    sha: Text,
    state: StatusState,
    /// the status's name, e.g. ci/build
    #[serde(default)]
    context: Option<Text>,
    #[serde(default)]
    description: Option<Prose>,
    #[serde(default)]
    target_url: Option<Prose>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadFile {
    /// path in the repository
    path: Text,
    /// branch, tag or sha
    #[serde(default, rename = "ref")]
    reference: Option<Text>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateLabel {
    /// label name
    name: Text,
    /// 6 hex digits
    color: Text,
    #[serde(default)]
    description: Option<Prose>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Comment {
    /// markdown
    body: Text,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Close {
    /// why it is closed
    reason: Text,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1))]
struct Label {
    /// labels to add
    #[serde(default)]
    add: Names,
    /// labels to remove
    #[serde(default)]
    remove: Names,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct User {
    /// GitHub login
    user: Text,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema)]
enum LockReason {
    #[serde(rename = "off-topic")]
    OffTopic,
    #[serde(rename = "too heated")]
    TooHeated,
    #[serde(rename = "resolved")]
    Resolved,
    #[serde(rename = "spam")]
    Spam,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Lock {
    #[serde(default)]
    reason: Option<LockReason>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RequestReview {
    /// GitHub login
    reviewer: Text,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Approve {
    /// review text
    #[serde(default)]
    body: Option<Prose>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum MergeMethod {
    #[default]
    Merge,
    Squash,
    Rebase,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Merge {
    #[serde(default)]
    method: MergeMethod,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum IssueState {
    Open,
    Closed,
    #[default]
    All,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Issues {
    #[serde(default)]
    state: IssueState,
}

/// `issue` or `pull request`, in descriptions.
fn what(node: &Node) -> &'static str {
    match node {
        Node::Item(_, Kind::Pull, _) => "pull request",
        _ => "issue",
    }
}

fn is_item(node: &Node) -> bool {
    matches!(node, Node::Item(..))
}

fn is_pull(node: &Node) -> bool {
    matches!(node, Node::Item(_, Kind::Pull, _))
}

fn is_issue(node: &Node) -> bool {
    matches!(node, Node::Item(_, Kind::Issue, _))
}

/// The issue or pull request an item op acts on, and the words and URLs it uses.
struct Target<'a> {
    repo: &'a Repo,
    kind: Kind,
    n: u64,
}

impl<'a> Target<'a> {
    fn of(node: &'a Node) -> HostResult<Target<'a>> {
        match node {
            Node::Item(repo, kind, n) => Ok(Target {
                repo,
                kind: *kind,
                n: *n,
            }),
            _ => Err(HostError::NotFound(
                "this entry is not an issue or pull request".to_string(),
            )),
        }
    }

    fn issue(&self) -> String {
        format!("{}/issues/{}", self.repo.api(), self.n)
    }

    fn pull(&self) -> String {
        format!("{}/pulls/{}", self.repo.api(), self.n)
    }

    /// `Issue #4` / `PR #7`.
    fn label(&self) -> String {
        GithubHost::item_label(self.kind, self.n)
    }

    /// What a write is called in GitHub's errors: `merge of octo/hello#7`.
    fn doing(&self, verb: &str) -> String {
        format!("{verb} of {}#{}", self.repo.full(), self.n)
    }
}

/// The guard of an op that only reads.
fn reading<A>(h: &GithubHost, _: &Read, _: &Node, _: Option<&A>) -> HostResult<Vec<Condition>> {
    Ok(vec![h.can_read()])
}

/// The guard of a change GitHub checks by itself when it is made: a token is configured.
fn needs_token<A>(h: &GithubHost, _: &Read, _: &Node, _: Option<&A>) -> HostResult<Vec<Condition>> {
    Ok(vec![h.token_cond()])
}

/// Every op's name, spelled once: the declarations below and the words that point to an
/// op use these.
pub(super) mod name {
    pub const SEARCH: &str = "search";
    pub const CREATE_ISSUE: &str = "create_issue";
    pub const CREATE_STATUS: &str = "create_status";
    pub const READ_FILE: &str = "read_file";
    pub const CREATE_LABEL: &str = "create_label";
    pub const READ_BODY: &str = "read_body";
    pub const GET_METADATA: &str = "get_metadata";
    pub const COMMENT: &str = "comment";
    pub const CLOSE: &str = "close";
    pub const REOPEN: &str = "reopen";
    pub const LABEL: &str = "label";
    pub const ASSIGN: &str = "assign";
    pub const UNASSIGN: &str = "unassign";
    pub const LOCK: &str = "lock";
    pub const UNLOCK: &str = "unlock";
    pub const DIFF: &str = "diff";
    pub const REQUEST_REVIEW: &str = "request_review";
    pub const APPROVE: &str = "approve";
    pub const MERGE: &str = "merge";
    pub const READ_LOG: &str = "read_log";
    pub const ISSUES: &str = "issues";
}

/// Every op of the github host, in the order `ops/` lists them.
pub(super) static OPS: LazyLock<Ops<GithubHost, Node, Read>> = LazyLock::new(|| {
    Ops::new(vec![
        D::<Search> {
            name: name::SEARCH,
            offers: |n| matches!(n, Node::Root | Node::Repo(_)),
            describe: |n| {
                format!(
                    "Search {} issues and pull requests: query (GitHub search syntax), limit (1-100). Makes results/ID/ with hits/1…N linked to the entries.",
                    if matches!(n, Node::Root) { "GitHub's" } else { "this repository's" }
                )
            },
            guard: reading,
            run: |h, _, n, a| h.search(n, a),
        }
        .into(),
        D::<CreateIssue> {
            name: name::CREATE_ISSUE,
            offers: |n| matches!(n, Node::Repo(_) | Node::Issues(_)),
            describe: |_| {
                "Open a new issue: title, optional body (markdown), labels and assignees (names)."
                    .to_string()
            },
            guard: needs_token,
            run: |h, _, n, a| match n {
                Node::Repo(r) | Node::Issues(r) => h.create_issue(r, a),
                _ => Err(HostError::NotFound("create_issue needs a repository".into())),
            },
        }
        .into(),
        D::<CreateStatus> {
            name: name::CREATE_STATUS,
            offers: |n| matches!(n, Node::Repo(_)),
            describe: |_| {
                "Set a commit status: sha, state pending|success|failure|error, context, description, target_url.".to_string()
            },
            guard: needs_token,
            run: |h, _, n, a| {
                let r = repo_of(n)?;
                let sha = a.sha.into_string();
                let mut body = Map::new();
                body.insert("state".into(), json!(a.state));
                for (k, v) in [
                    ("target_url", a.target_url.map(|p| p.0)),
                    ("description", a.description.map(|p| p.0)),
                    ("context", a.context.map(Text::into_string)),
                ] {
                    if let Some(v) = v {
                        body.insert(k.into(), json!(v));
                    }
                }
                let v = h.write(
                    &format!("status on {sha}"),
                    Method::POST,
                    &format!("{}/statuses/{}", r.api(), seg(&sha)),
                    Some(&Value::Object(body)),
                )?;
                h.client
                    .forget(&[format!("{}/commits/{}", r.api(), seg(&sha))]);
                Ok(CallOutcome::text(format!(
                    "status {} set to {} on {}",
                    s(&v, "context"),
                    s(&v, "state"),
                    sha
                )))
            },
        }
        .into(),
        D::<ReadFile> {
            name: name::READ_FILE,
            offers: |n| matches!(n, Node::Repo(_)),
            describe: |_| {
                "Read a file of the repository: path, ref (branch, tag or sha; default the default branch).".to_string()
            },
            guard: reading,
            run: |h, _, n, a| {
                let r = repo_of(n)?;
                let path = a.path.as_str();
                let enc: Vec<String> = path.trim_matches('/').split('/').map(seg).collect();
                let mut url = format!("{}/contents/{}", r.api(), enc.join("/"));
                if let Some(rf) = &a.reference {
                    url.push_str(&format!("?ref={}", query_value(rf.as_str())));
                }
                let p = h
                    .client
                    .get_media(&url, "application/vnd.github.raw")
                    .map_err(|e| e.into_host(&format!("reading {path} in {}", r.full())))?;
                Ok(CallOutcome::text(match &p.body {
                    Value::String(t) => t.clone(),
                    other => serde_json::to_string_pretty(other).unwrap_or_default(),
                }))
            },
        }
        .into(),
        D::<CreateLabel> {
            name: name::CREATE_LABEL,
            offers: |n| matches!(n, Node::Labels(_)),
            describe: |_| {
                "Create a label: name, color (6 hex digits, e.g. d73a4a), description.".to_string()
            },
            guard: needs_token,
            run: |h, _, n, a| {
                let r = repo_of(n)?;
                let mut body = Map::new();
                body.insert("name".into(), json!(a.name.as_str()));
                body.insert("color".into(), json!(a.color.as_str().trim_start_matches('#')));
                if let Some(d) = a.description {
                    body.insert("description".into(), json!(d.0));
                }
                let v = h.write(
                    &format!("new label in {}", r.full()),
                    Method::POST,
                    &format!("{}/labels", r.api()),
                    Some(&Value::Object(body)),
                )?;
                h.client.forget(&[format!("{}/labels", r.api())]);
                let name = s(&v, "name").to_string();
                Ok(CallOutcome::text(format!("created label {name}"))
                    .discovered(Node::Label(r.clone(), name).path())
                    .changed(Node::Labels(r.clone()).path()))
            },
        }
        .into(),
        D::<NoArgs> {
            name: name::READ_BODY,
            offers: |n| matches!(n, Node::Item(..) | Node::Review(..) | Node::File(..)),
            describe: |n| match n {
                Node::Review(..) => "Read the review's full text and verdict.".to_string(),
                Node::File(..) => "Read the file's patch in this pull request.".to_string(),
                _ => format!("Read the {}'s full text (markdown) with a header of its state.", what(n)),
            },
            guard: reading,
            run: |h, _, n, _| h.read_body(n),
        }
        .into(),
        D::<NoArgs> {
            name: name::GET_METADATA,
            offers: |n| matches!(n, Node::Item(..) | Node::Branch(..)),
            describe: |n| match n {
                Node::Branch(..) => "All of GitHub's fields of the branch as JSON.".to_string(),
                _ => format!(
                    "All of GitHub's fields of the {} as JSON: state, author, labels, assignees, dates{}.",
                    what(n),
                    if is_pull(n) { ", branches, mergeable" } else { "" }
                ),
            },
            guard: reading,
            run: |h, _, n, _| {
                let page = match n {
                    Node::Branch(r, b) => h
                        .get_opt(&format!("{}/branches/{}", r.api(), seg(b)), true)?
                        .ok_or_else(|| HostError::NotFound(format!("no branch {b}")))?,
                    _ => {
                        let t = Target::of(n)?;
                        h.item(t.repo, t.kind, t.n, true)?.ok_or_else(|| {
                            HostError::NotFound(format!("no {} #{}", t.kind.dir(), t.n))
                        })?
                    }
                };
                Ok(CallOutcome::text(
                    serde_json::to_string_pretty(&page.body).unwrap_or_default(),
                ))
            },
        }
        .into(),
        D::<Comment> {
            name: name::COMMENT,
            offers: is_item,
            describe: |n| format!("Add a comment to the {}: body (markdown).", what(n)),
            guard: needs_token,
            run: |h, _, n, a| {
                let t = Target::of(n)?;
                let v = h.write(
                    &t.doing("comment"),
                    Method::POST,
                    &format!("{}/comments", t.issue()),
                    Some(&json!({"body": a.body.as_str()})),
                )?;
                Ok(h.changed_item(&t, format!("commented on {}: {}", t.label(), s(&v, "html_url"))))
            },
        }
        .into(),
        D::<Close> {
            name: name::CLOSE,
            offers: is_item,
            describe: |n| {
                format!(
                    "Close the {}{}: reason (text, posted as a comment; \"completed\" or \"not_planned\" set GitHub's state reason).",
                    what(n),
                    if is_pull(n) { " without merging" } else { "" }
                )
            },
            guard: |h, c, n, _| h.open_guard(*c, n),
            run: |h, _, n, a| {
                let t = Target::of(n)?;
                let reason = a.reason.as_str();
                let code = reason.trim().replace(' ', "_").to_lowercase();
                let mut body = json!({"state": "closed"});
                if t.kind == Kind::Issue && (code == "completed" || code == "not_planned") {
                    body["state_reason"] = json!(code);
                } else {
                    // Free text: GitHub keeps no reason field, so it is said in a comment.
                    h.write(
                        &t.doing("comment"),
                        Method::POST,
                        &format!("{}/comments", t.issue()),
                        Some(&json!({"body": reason})),
                    )?;
                }
                h.set_state(&t, "close", &body)?;
                Ok(h.changed_item(&t, format!("{} closed", t.label())))
            },
        }
        .into(),
        D::<NoArgs> {
            name: name::REOPEN,
            offers: is_item,
            describe: |n| format!("Reopen the closed {}.", what(n)),
            guard: |h, c, n, _| h.closed_guard(*c, n),
            run: |h, _, n, _| {
                let t = Target::of(n)?;
                h.set_state(&t, "reopen", &json!({"state": "open"}))?;
                Ok(h.changed_item(&t, format!("{} reopened", t.label())))
            },
        }
        .into(),
        D::<Label> {
            name: name::LABEL,
            offers: is_item,
            describe: |_| {
                "Add and/or remove labels: add [names], remove [names] (see labels/).".to_string()
            },
            guard: needs_token,
            run: |h, _, n, a| h.relabel(&Target::of(n)?, a),
        }
        .into(),
        D::<User> {
            name: name::ASSIGN,
            offers: is_item,
            describe: |n| format!("Assign a user to the {}: user (GitHub login).", what(n)),
            guard: needs_token,
            run: |h, _, n, a| h.assignees(&Target::of(n)?, "assign", Method::POST, a.user),
        }
        .into(),
        D::<User> {
            name: name::UNASSIGN,
            offers: is_item,
            describe: |n| {
                format!("Remove an assignee from the {}: user (GitHub login).", what(n))
            },
            guard: needs_token,
            run: |h, _, n, a| h.assignees(&Target::of(n)?, "unassign", Method::DELETE, a.user),
        }
        .into(),
        D::<Lock> {
            name: name::LOCK,
            offers: is_issue,
            describe: |_| {
                "Lock the conversation: reason (optional: off-topic, too heated, resolved, spam)."
                    .to_string()
            },
            guard: |h, c, n, _| h.locked_guard(*c, n, false),
            run: |h, _, n, a| {
                let t = Target::of(n)?;
                let body = a.reason.map(|r| json!({"lock_reason": r}));
                h.write(
                    &t.doing("lock"),
                    Method::PUT,
                    &format!("{}/lock", t.issue()),
                    body.as_ref(),
                )?;
                Ok(h.changed_item(&t, format!("{} locked", t.label())))
            },
        }
        .into(),
        D::<NoArgs> {
            name: name::UNLOCK,
            offers: is_issue,
            describe: |_| "Unlock the conversation.".to_string(),
            guard: |h, c, n, _| h.locked_guard(*c, n, true),
            run: |h, _, n, _| {
                let t = Target::of(n)?;
                h.write(
                    &t.doing("unlock"),
                    Method::DELETE,
                    &format!("{}/lock", t.issue()),
                    None,
                )?;
                Ok(h.changed_item(&t, format!("{} unlocked", t.label())))
            },
        }
        .into(),
        D::<NoArgs> {
            name: name::DIFF,
            offers: is_pull,
            describe: |_| {
                "The pull request's changes as a unified diff (file by file).".to_string()
            },
            guard: reading,
            run: |h, _, n, _| {
                let t = Target::of(n)?;
                let files = h.files_of(t.repo, t.n)?;
                let mut text = String::new();
                for f in &files {
                    text.push_str(&file_patch(f));
                }
                if files.is_empty() {
                    text = format!("PR #{} changes no files\n", t.n);
                }
                Ok(CallOutcome::text(text))
            },
        }
        .into(),
        D::<RequestReview> {
            name: name::REQUEST_REVIEW,
            offers: is_pull,
            describe: |_| {
                "Ask someone to review the pull request: reviewer (GitHub login, not its author)."
                    .to_string()
            },
            guard: |h, c, n, _| h.open_guard(*c, n),
            run: |h, _, n, a| {
                let t = Target::of(n)?;
                let reviewer = a.reviewer.as_str();
                h.write(
                    &t.doing("review request"),
                    Method::POST,
                    &format!("{}/requested_reviewers", t.pull()),
                    Some(&json!({"reviewers": [reviewer]})),
                )?;
                Ok(h.changed_item(&t, format!("asked {reviewer} to review {}", t.label())))
            },
        }
        .into(),
        D::<Approve> {
            name: name::APPROVE,
            offers: is_pull,
            describe: |_| {
                "Approve the pull request as the token's user: body (optional review text)."
                    .to_string()
            },
            guard: |h, c, n, _| h.approve_guard(*c, n),
            run: |h, _, n, a| {
                let t = Target::of(n)?;
                let mut body = json!({"event": "APPROVE"});
                if let Some(b) = a.body {
                    body["body"] = json!(b.0);
                }
                let v = h.write(
                    &t.doing("approval"),
                    Method::POST,
                    &format!("{}/reviews", t.pull()),
                    Some(&body),
                )?;
                h.client.forget(&[format!("{}/reviews", t.pull())]);
                let mut out =
                    h.changed_item(&t, format!("approved {} (review {})", t.label(), v["id"]));
                if let Some(id) = v["id"].as_u64() {
                    out.discovered
                        .push(Node::Review(t.repo.clone(), t.n, id).path());
                }
                Ok(out)
            },
        }
        .into(),
        D::<Merge> {
            name: name::MERGE,
            offers: is_pull,
            describe: |_| {
                "Merge into the base branch: method merge|squash|rebase (default merge). GitHub refuses it if the head moved since the guard was read.".to_string()
            },
            guard: |h, c, n, _| h.merge_guard(*c, n),
            run: |h, _, n, a| {
                let t = Target::of(n)?;
                // The head we checked: GitHub refuses (409) if it moved since.
                let sha = h.head_sha(t.repo, t.n)?;
                let v = h.write(
                    &t.doing("merge"),
                    Method::PUT,
                    &format!("{}/merge", t.pull()),
                    Some(&json!({"merge_method": a.method, "sha": sha})),
                )?;
                Ok(h.changed_item(
                    &t,
                    format!(
                        "{} merged ({}) as {}: {}",
                        t.label(),
                        word(a.method),
                        s(&v, "sha"),
                        s(&v, "message")
                    ),
                ))
            },
        }
        .into(),
        D::<NoArgs> {
            name: name::READ_LOG,
            offers: |n| matches!(n, Node::Check(..)),
            describe: |_| {
                "Read the check's output (title, summary, text) and where its full log is."
                    .to_string()
            },
            guard: reading,
            run: |h, _, n, _| {
                let Node::Check(r, pr, c) = n else {
                    return Err(HostError::NotFound("read_log needs a check".into()));
                };
                let ch = h
                    .checks_of(r, *pr)?
                    .into_iter()
                    .find(|x| &x.name == c)
                    .ok_or_else(|| HostError::NotFound(format!("no check {c} on PR #{pr}")))?;
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
            },
        }
        .into(),
        D::<Issues> {
            name: name::ISSUES,
            offers: |n| matches!(n, Node::Label(..)),
            describe: |_| {
                "Issues and pull requests with this label, newest first, as paths: state open|closed|all (default all).".to_string()
            },
            guard: reading,
            run: |h, _, n, a| {
                let Node::Label(r, l) = n else {
                    return Err(HostError::NotFound("issues needs a label".into()));
                };
                let state = word(a.state);
                let (items, more) = h.list(&format!(
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
            },
        }
        .into(),
    ])
});

/// The repository an op on a repository's entry acts on.
fn repo_of(node: &Node) -> HostResult<&Repo> {
    GithubHost::repo_of(node)
        .ok_or_else(|| HostError::NotFound("this entry is not in a repository".to_string()))
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

    /// After a change: forget what we cached of the item and the repository's listings; the
    /// item and its folder changed, `result` says how.
    fn changed_item(&self, t: &Target, result: String) -> CallOutcome {
        let r = t.repo;
        self.client.forget(&[
            format!("{}/issues", r.api()),
            format!("{}/pulls", r.api()),
            r.api(),
        ]);
        let item = Node::Item(r.clone(), t.kind, t.n).path();
        let mut out = CallOutcome::text(result);
        out.changed.push(item.clone());
        out.changed.push(item[..3].to_vec());
        out
    }

    /// Close or reopen: the state is the issue's, or the pull request's (which GitHub keeps
    /// apart from its issue).
    fn set_state(&self, t: &Target, verb: &str, body: &Value) -> HostResult<()> {
        let target = if t.kind == Kind::Pull {
            t.pull()
        } else {
            t.issue()
        };
        self.write(&t.doing(verb), Method::PATCH, &target, Some(body))?;
        Ok(())
    }

    fn read_body(&self, node: &Node) -> HostResult<CallOutcome> {
        match node {
            Node::Review(r, n, id) => {
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
            Node::File(r, n, f) => {
                let v = self
                    .files_of(r, *n)?
                    .into_iter()
                    .find(|v| s(v, "filename") == f)
                    .ok_or_else(|| HostError::NotFound(format!("no file {f} in PR #{n}")))?;
                Ok(CallOutcome::text(file_patch(&v)))
            }
            _ => {
                let t = Target::of(node)?;
                let p = self
                    .item(t.repo, t.kind, t.n, true)?
                    .ok_or_else(|| HostError::NotFound(format!("no {} #{}", t.kind.dir(), t.n)))?;
                let v = &p.body;
                Ok(CallOutcome::text(format!(
                    "{}\n{}\n\n{}",
                    self.item_line(t.kind, t.n, v),
                    s(v, "html_url"),
                    s(v, "body")
                )))
            }
        }
    }

    fn create_issue(&self, r: &Repo, a: CreateIssue) -> HostResult<CallOutcome> {
        let mut body = Map::new();
        body.insert("title".into(), json!(flat(a.title.as_str())));
        if let Some(b) = a.body {
            body.insert("body".into(), json!(b.0));
        }
        for (k, names) in [("labels", a.labels), ("assignees", a.assignees)] {
            if !names.is_empty() {
                body.insert(k.into(), json!(names.0));
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
        let t = Target {
            repo: r,
            kind: Kind::Issue,
            n,
        };
        let mut out = self.changed_item(&t, format!("opened issue #{n}: {}", s(&v, "title")));
        self.client.seed(&t.issue(), &v);
        out.discovered
            .push(Node::Item(r.clone(), Kind::Issue, n).path());
        Ok(out)
    }

    fn relabel(&self, t: &Target, a: Label) -> HostResult<CallOutcome> {
        if a.add.is_empty() && a.remove.is_empty() {
            return Err(HostError::InvalidArgs(
                "give add and/or remove: label names".into(),
            ));
        }
        let issue = t.issue();
        let mut now: Vec<String> = Vec::new();
        if !a.add.is_empty() {
            let v = self.write(
                &t.doing("labelling"),
                Method::POST,
                &format!("{issue}/labels"),
                Some(&json!({"labels": a.add.0})),
            )?;
            now = v
                .as_array()
                .map(|l| l.iter().map(|x| s(x, "name").to_string()).collect())
                .unwrap_or_default();
        }
        for l in &a.remove.0 {
            let v = self.write(
                &t.doing("unlabelling"),
                Method::DELETE,
                &format!("{issue}/labels/{}", seg(l)),
                None,
            )?;
            if let Some(arr) = v.as_array() {
                now = arr.iter().map(|x| s(x, "name").to_string()).collect();
            }
        }
        Ok(self.changed_item(
            t,
            format!(
                "{} now labelled {}",
                t.label(),
                if now.is_empty() {
                    "(none)".to_string()
                } else {
                    and_list(&now)
                }
            ),
        ))
    }

    /// Assign (POST) or unassign (DELETE) one user.
    fn assignees(
        &self,
        t: &Target,
        verb: &str,
        method: Method,
        user: Text,
    ) -> HostResult<CallOutcome> {
        let v = self.write(
            &t.doing(verb),
            method,
            &format!("{}/assignees", t.issue()),
            Some(&json!({"assignees": [user.as_str()]})),
        )?;
        let now: Vec<String> = v["assignees"]
            .as_array()
            .map(|l| l.iter().map(login).collect())
            .unwrap_or_default();
        Ok(self.changed_item(
            t,
            format!(
                "{} assigned to {}",
                t.label(),
                if now.is_empty() {
                    "nobody".to_string()
                } else {
                    and_list(&now)
                }
            ),
        ))
    }

    fn search(&self, node: &Node, a: Search) -> HostResult<CallOutcome> {
        let query = a.query.into_string();
        let limit = a.limit.map(|l| l.0);
        let q = match Self::repo_of(node) {
            Some(r) => format!("{query} repo:{}", r.full()),
            None => query,
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
            let mut all = lock(&self.searches);
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
            "{} for {q:?} (search {id}; each hit is {}/K, its ref the object's)\n",
            plural(total, "hit", "hits"),
            self.paths.entry(&Node::Hits(id).path())
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

/// A file of a pull request as a unified diff section (ending in a newline).
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
