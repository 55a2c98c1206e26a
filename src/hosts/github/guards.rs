//! Guards from GitHub's own state: open, mergeable (mergeable_state), checks and statuses on
//! the head commit, branch protection's required reviews and checks, approving reviews, and
//! the token user's permission (collaborator permission API). A call reads everything again
//! (`Read::Fresh`, ETag-revalidated) right before the change.

use std::sync::Arc;

use serde_json::Value;

use super::client::{seg, GhError, GhResult, Page};
use super::ops::name;
use super::tree::{check_path_name, day, is_merged, login, s};
use super::{GithubHost, Kind, Node, Repo};
use crate::host::text::{and_list, plural};
use crate::host::{Condition, HostError, HostResult};
use crate::hosts::lock;

/// Why it is not known whom the token acts as.
#[derive(Debug, thiserror::Error)]
pub(super) enum Anonymous {
    #[error("no token is configured")]
    NoToken,
    /// GitHub's own words (without the status).
    #[error("{}", .0.message())]
    Github(#[from] GhError),
    #[error("GitHub did not say who the token belongs to")]
    NoLogin,
}

/// How a guard reads GitHub's state: through the cache for the guard file, fresh for the
/// check a call makes right before its change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Read {
    Cached,
    Fresh,
}

/// The issue or pull request a guard is about (item ops are offered on items only).
fn item_of(node: &Node) -> HostResult<(&Repo, Kind, u64)> {
    match node {
        Node::Item(r, k, n) => Ok((r, *k, *n)),
        _ => Err(HostError::NotFound(
            "this entry is not an issue or pull request".to_string(),
        )),
    }
}

impl GithubHost {
    /// A GET through the cache, or revalidated now.
    pub(super) fn get_read(&self, path: &str, read: Read) -> GhResult<Arc<Page>> {
        match read {
            Read::Fresh => self.client.get_fresh(path),
            Read::Cached => self.client.get(path),
        }
    }

    pub(super) fn can_read(&self) -> Condition {
        Condition::check("can_read", true, "reading changes nothing")
    }

    /// A token is configured (GitHub itself checks permission when the change is made).
    pub(super) fn token_cond(&self) -> Condition {
        if self.has_token {
            Condition::check(
                "token",
                true,
                "a token is configured; GitHub checks its permission when the change is made",
            )
        } else {
            Condition::check(
                "token",
                false,
                "no GitHub token: set GITHUB_TOKEN (or run `gh auth login`) and remount — cannot be satisfied from inside the mount",
            )
        }
    }

    fn ops_path(&self, node: &Node, op: &str) -> String {
        self.paths.op(&node.path(), op)
    }

    /// World path of the entry `sub` below `node` (`reviews`, `checks/NAME`).
    fn below(&self, node: &Node, sub: &[&str]) -> String {
        let mut segs = node.path();
        segs.extend(sub.iter().map(|s| s.to_string()));
        self.paths.entry(&segs)
    }

    /// The token's login (`GET /user`), asked once.
    pub(super) fn me(&self) -> Result<String, Anonymous> {
        if !self.has_token {
            return Err(Anonymous::NoToken);
        }
        if let Some(l) = lock(&self.login).clone() {
            return Ok(l);
        }
        let p = self.client.get("/user")?;
        let l = s(&p.body, "login").to_string();
        if l.is_empty() {
            return Err(Anonymous::NoLogin);
        }
        *lock(&self.login) = Some(l.clone());
        Ok(l)
    }

    fn open_cond(&self, node: &Node, kind: Kind, n: u64, v: &Value) -> Condition {
        let who = Self::item_label(kind, n);
        if is_merged(v) {
            return Condition::check(
                "open",
                false,
                format!(
                    "{who} was merged on {} by {}; a merged pull request stays merged — cannot be satisfied by you",
                    day(s(v, "merged_at")),
                    login(&v["merged_by"])
                ),
            );
        }
        match s(v, "state") {
            "open" => Condition::check("open", true, format!("{who} is open")),
            _ => Condition::check(
                "open",
                false,
                format!(
                    "{who} is already closed{} — reopen it with {}",
                    match s(v, "closed_at") {
                        "" => String::new(),
                        at => format!(" (on {})", day(at)),
                    },
                    self.ops_path(node, name::REOPEN)
                ),
            ),
        }
    }

    fn closed_cond(&self, node: &Node, kind: Kind, n: u64, v: &Value) -> Condition {
        let who = Self::item_label(kind, n);
        if is_merged(v) {
            return Condition::check(
                "closed",
                false,
                format!("{who} was merged; a merged pull request cannot be reopened — cannot be satisfied by you"),
            );
        }
        match s(v, "state") {
            "closed" => Condition::check("closed", true, format!("{who} is closed")),
            _ => Condition::check(
                "closed",
                false,
                format!(
                    "{who} is open; nothing to reopen (close it with {})",
                    self.ops_path(node, name::CLOSE)
                ),
            ),
        }
    }

    fn locked_cond(&self, node: &Node, n: u64, v: &Value, want: bool) -> Condition {
        let locked = v["locked"].as_bool() == Some(true);
        if want == locked {
            Condition::check(
                if want { "locked" } else { "unlocked" },
                true,
                format!("#{n} is {}", if locked { "locked" } else { "not locked" }),
            )
        } else {
            Condition::check(
                if want { "locked" } else { "unlocked" },
                false,
                format!(
                    "#{n} is {} — nothing to do{}",
                    if locked {
                        "already locked"
                    } else {
                        "not locked"
                    },
                    if locked {
                        format!(" (unlock it with {})", self.ops_path(node, name::UNLOCK))
                    } else {
                        String::new()
                    }
                ),
            )
        }
    }

    fn mergeable_cond(&self, v: &Value) -> Condition {
        let base = s(&v["base"], "ref");
        let head = s(&v["head"], "ref");
        let state = s(v, "mergeable_state");
        if v["draft"].as_bool() == Some(true) || state == "draft" {
            return Condition::check(
                "mergeable",
                false,
                "the pull request is a draft; its author must mark it ready for review on GitHub",
            );
        }
        match v["mergeable"].as_bool() {
            None => Condition::check(
                "mergeable",
                false,
                format!(
                    "GitHub has not computed whether {head} merges cleanly into {base} yet (mergeable_state {}) — read this guard again in a few seconds",
                    if state.is_empty() { "unknown" } else { state }
                ),
            ),
            Some(false) => Condition::check(
                "mergeable",
                false,
                format!(
                    "{head} conflicts with {base} (mergeable_state {state}); the author ({}) must rebase or merge {base} into {head} — cannot be satisfied by you",
                    login(&v["user"])
                ),
            ),
            Some(true) => match state {
                "behind" => Condition::check(
                    "mergeable",
                    false,
                    format!("{head} is behind {base} and the branch protection wants it up to date (mergeable_state behind); update the branch on GitHub"),
                ),
                _ => Condition::check(
                    "mergeable",
                    true,
                    format!("no conflicts with {base} (mergeable_state {state})"),
                ),
            },
        }
    }

    /// Branch protection of the base branch: `Ok(None)` when it is not protected, `Err` with
    /// GitHub's words when it cannot be read.
    fn protection(&self, r: &Repo, base: &str, read: Read) -> GhResult<Option<Value>> {
        let path = format!("{}/branches/{}/protection", r.api(), seg(base));
        match self.get_read(&path, read) {
            Ok(p) => Ok(Some(p.body.clone())),
            Err(e) if e.status() == Some(404) && e.message().contains("not protected") => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn checks_cond(
        &self,
        node: &Node,
        r: &Repo,
        v: &Value,
        protection: &GhResult<Option<Value>>,
        read: Read,
    ) -> HostResult<Condition> {
        let sha = s(&v["head"], "sha");
        let checks = match self.checks_at(r, sha, read) {
            Ok(c) => c,
            Err(e) => {
                return Ok(Condition::check(
                    "checks_passing",
                    false,
                    format!("could not read the checks on the head commit: {e}"),
                ))
            }
        };
        let see = |name: &str| self.below(node, &["checks", &check_path_name(name)]);
        let failing: Vec<String> = checks
            .iter()
            .filter(|c| c.failing())
            .map(|c| c.name.clone())
            .collect();
        let pending: Vec<String> = checks
            .iter()
            .filter(|c| c.pending())
            .map(|c| c.name.clone())
            .collect();
        let required: Vec<String> = match protection {
            Ok(Some(p)) => p["required_status_checks"]["contexts"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let missing: Vec<String> = required
            .iter()
            .filter(|name| !checks.iter().any(|c| &c.name == *name))
            .cloned()
            .collect();
        let short = sha.get(..7).unwrap_or(sha);
        if failing.is_empty() && pending.is_empty() && missing.is_empty() {
            let detail = if checks.is_empty() {
                format!("no checks or statuses on {short} and none required")
            } else {
                format!(
                    "all {} pass on {short} ({})",
                    plural(checks.len() as u64, "check", "checks"),
                    and_list(&checks.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
                )
            };
            return Ok(Condition::check("checks_passing", true, detail));
        }
        let mut parts = Vec::new();
        if !failing.is_empty() {
            parts.push(format!(
                "{} of {} failing on {short} ({}) — see {}",
                failing.len(),
                checks.len(),
                and_list(&failing),
                see(&failing[0])
            ));
        }
        if !pending.is_empty() {
            parts.push(format!(
                "{} still running — read this guard again later (see {})",
                and_list(&pending),
                see(&pending[0])
            ));
        }
        if !missing.is_empty() {
            parts.push(format!(
                "required by branch protection but not reported on {short}: {}",
                and_list(&missing)
            ));
        }
        Ok(Condition::check("checks_passing", false, parts.join("; ")))
    }

    fn review_cond(
        &self,
        node: &Node,
        r: &Repo,
        n: u64,
        v: &Value,
        protection: &GhResult<Option<Value>>,
        read: Read,
    ) -> HostResult<Condition> {
        let path = self.paged(&format!("{}/pulls/{n}/reviews", r.api()));
        let reviews = match self.get_read(&path, read) {
            Ok(r) => r,
            // The guard says what it could not read rather than failing the read of it.
            Err(e) => {
                return Ok(Condition::check(
                    "review_approved",
                    false,
                    format!(
                        "could not read the reviews of PR #{n} (GitHub said: {}) — see {}",
                        e.message(),
                        self.below(node, &["reviews"])
                    ),
                ))
            }
        };
        // The latest verdict of each reviewer counts (comments do not change it).
        let mut latest: Vec<(String, String)> = Vec::new();
        for rv in reviews.body.as_array().cloned().unwrap_or_default() {
            let state = s(&rv, "state").to_string();
            if !matches!(
                state.as_str(),
                "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED"
            ) {
                continue;
            }
            let who = login(&rv["user"]);
            latest.retain(|(w, _)| w != &who);
            latest.push((who, state));
        }
        let approvers: Vec<String> = latest
            .iter()
            .filter(|(_, s)| s == "APPROVED")
            .map(|(w, _)| w.clone())
            .collect();
        let blockers: Vec<String> = latest
            .iter()
            .filter(|(_, s)| s == "CHANGES_REQUESTED")
            .map(|(w, _)| w.clone())
            .collect();
        let base = s(&v["base"], "ref");
        let (needed, why) = match protection {
            Ok(Some(p)) => match p["required_pull_request_reviews"].as_object() {
                Some(rr) => (
                    rr.get("required_approving_review_count")
                        .and_then(Value::as_u64)
                        .unwrap_or(1),
                    format!("branch protection of {base} asks for"),
                ),
                None => (
                    0,
                    format!("branch protection of {base} asks for no review;"),
                ),
            },
            Ok(None) => (
                0,
                format!("{base} is not protected, so GitHub asks for no review;"),
            ),
            Err(e) => (
                1,
                format!(
                    "branch protection of {base} could not be read (GitHub said: {}), so at least",
                    e.message()
                ),
            ),
        };
        let reviews_path = self.below(node, &["reviews"]);
        if !blockers.is_empty() {
            return Ok(Condition::check(
                "review_approved",
                false,
                format!(
                    "changes requested by {} (see {reviews_path}); the author must address them and the reviewer approve — cannot be satisfied by you",
                    and_list(&blockers)
                ),
            ));
        }
        if (approvers.len() as u64) >= needed {
            let got = if approvers.is_empty() {
                "no approving review yet".to_string()
            } else {
                format!("approved by {}", and_list(&approvers))
            };
            let detail = if needed == 0 {
                format!("{why} {got}")
            } else {
                format!(
                    "{why} {} — {got}",
                    plural(needed, "approving review", "approving reviews")
                )
            };
            return Ok(Condition::check("review_approved", true, detail));
        }
        let author = login(&v["user"]);
        let me = self.me().ok();
        let ask = if me.as_deref() == Some(author.as_str()) {
            format!(
                "you opened it and cannot approve it yourself — ask someone with {}",
                self.ops_path(node, name::REQUEST_REVIEW)
            )
        } else {
            format!(
                "approve it with {} or ask someone with {}",
                self.ops_path(node, name::APPROVE),
                self.ops_path(node, name::REQUEST_REVIEW)
            )
        };
        Ok(Condition::check(
            "review_approved",
            false,
            format!(
                "{why} {}, {} so far (see {reviews_path}); {ask}",
                plural(needed, "approving review", "approving reviews"),
                approvers.len()
            ),
        ))
    }

    /// Write permission of the token's user (collaborator permission API).
    fn can_write(&self, r: &Repo, read: Read) -> Condition {
        let me = match self.me() {
            Ok(me) => me,
            Err(e) => {
                return Condition::check(
                    "can_write",
                    false,
                    format!("cannot tell who the token acts as ({e}); set GITHUB_TOKEN to a token with access to {} and remount", r.full()),
                )
            }
        };
        let path = format!("{}/collaborators/{}/permission", r.api(), seg(&me));
        match self.get_read(&path, read) {
            Ok(p) => {
                let perm = s(&p.body, "permission").to_string();
                let role = s(&p.body, "role_name").to_string();
                let ok = matches!(perm.as_str(), "admin" | "maintain" | "write");
                let shown = if role.is_empty() { perm.clone() } else { role };
                if ok {
                    Condition::check("can_write", true, format!("you are {me}, with {shown} permission on {}", r.full()))
                } else {
                    Condition::check(
                        "can_write",
                        false,
                        format!("you are {me}, with {shown} permission on {}: merging needs write — cannot be satisfied by you (ask an admin of {})", r.full(), r.owner),
                    )
                }
            }
            Err(e) => Condition::check(
                "can_write",
                false,
                format!(
                    "could not read your ({me}) permission on {} (GitHub said: {}) — the token may lack access; see {}",
                    r.full(),
                    e.message(),
                    self.paths.entry(&r.path())
                ),
            ),
        }
    }

    fn not_author_cond(&self, node: &Node, n: u64, v: &Value) -> Condition {
        let author = login(&v["user"]);
        match self.me() {
            Ok(me) if me == author => Condition::check(
                "not_author",
                false,
                format!(
                    "you ({me}) opened PR #{n} and cannot approve your own pull request — ask someone with {}",
                    self.ops_path(node, name::REQUEST_REVIEW)
                ),
            ),
            Ok(me) => Condition::check("not_author", true, format!("{author} opened PR #{n}; you are {me}")),
            Err(e) => Condition::check(
                "not_author",
                false,
                format!("cannot tell who the token acts as ({e}), so not whether you opened PR #{n}"),
            ),
        }
    }

    /// The item's JSON: the pull request itself, not a listing's copy (listings leave out
    /// mergeable).
    fn item_value(&self, r: &Repo, kind: Kind, n: u64, read: Read) -> HostResult<Value> {
        let path = match kind {
            Kind::Issue => format!("{}/issues/{n}", r.api()),
            Kind::Pull => format!("{}/pulls/{n}", r.api()),
        };
        match (read, kind) {
            (Read::Cached, Kind::Pull) => self.client.get_full(&path),
            _ => self.get_read(&path, read),
        }
        .map(|p| p.body.clone())
        .map_err(|e| e.into_host(&format!("reading {} #{n}", kind.dir())))
    }

    /// Close, request a review: the item is open.
    pub(super) fn open_guard(&self, read: Read, node: &Node) -> HostResult<Vec<Condition>> {
        let (r, k, n) = item_of(node)?;
        let v = self.item_value(r, k, n, read)?;
        Ok(vec![self.open_cond(node, k, n, &v), self.token_cond()])
    }

    /// Reopen: the item is closed (and not merged).
    pub(super) fn closed_guard(&self, read: Read, node: &Node) -> HostResult<Vec<Condition>> {
        let (r, k, n) = item_of(node)?;
        let v = self.item_value(r, k, n, read)?;
        Ok(vec![self.closed_cond(node, k, n, &v), self.token_cond()])
    }

    /// Lock (`locked` false: it is not locked yet), unlock (`locked` true).
    pub(super) fn locked_guard(
        &self,
        read: Read,
        node: &Node,
        locked: bool,
    ) -> HostResult<Vec<Condition>> {
        let (r, k, n) = item_of(node)?;
        let v = self.item_value(r, k, n, read)?;
        Ok(vec![
            self.locked_cond(node, n, &v, locked),
            self.token_cond(),
        ])
    }

    pub(super) fn approve_guard(&self, read: Read, node: &Node) -> HostResult<Vec<Condition>> {
        let (r, k, n) = item_of(node)?;
        let v = self.item_value(r, k, n, read)?;
        Ok(vec![
            self.open_cond(node, k, n, &v),
            self.not_author_cond(node, n, &v),
            self.token_cond(),
        ])
    }

    pub(super) fn merge_guard(&self, read: Read, node: &Node) -> HostResult<Vec<Condition>> {
        let (r, k, n) = item_of(node)?;
        let v = self.item_value(r, k, n, read)?;
        let base = s(&v["base"], "ref").to_string();
        let protection = self.protection(r, &base, read);
        Ok(vec![
            self.open_cond(node, k, n, &v),
            self.mergeable_cond(&v),
            self.checks_cond(node, r, &v, &protection, read)?,
            self.review_cond(node, r, n, &v, &protection, read)?,
            self.can_write(r, read),
        ])
    }
}
