//! What entries show of themselves: one-line descriptions and listings, from GitHub's JSON.

use serde_json::Value;

use super::client::{now_secs, reset_words, seg};
use super::guards::Read;
use super::{encode_name, GithubHost, Kind, Node, Repo, TokenSource};
use crate::host::text::{and_list, flat, plural};
use crate::host::{Child, EntryInfo, HostError, HostResult};
use crate::hosts::lock;

pub(super) fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

pub(super) fn login(v: &Value) -> String {
    v.get("login")
        .and_then(Value::as_str)
        .unwrap_or("someone")
        .to_string()
}

pub(super) fn day(ts: &str) -> &str {
    ts.get(..10).unwrap_or(ts)
}

/// Merged: GitHub says so (`merged`), or the pull request is closed with a merge time.
pub(super) fn is_merged(v: &Value) -> bool {
    v["merged"].as_bool() == Some(true)
        || (s(v, "state") == "closed" && v.get("merged_at").is_some_and(|m| !m.is_null()))
}

/// A check run or a commit status, as the guard and `checks/` see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CheckItem {
    pub name: String,
    /// `check run` or `status`.
    pub kind: &'static str,
    /// `success`, `failure`, `pending`, `neutral`, `skipped`.
    pub outcome: String,
    pub summary: String,
    pub url: String,
    pub body: Value,
}

impl CheckItem {
    pub fn failing(&self) -> bool {
        matches!(
            self.outcome.as_str(),
            "failure" | "error" | "timed_out" | "cancelled" | "action_required" | "startup_failure"
        )
    }
    pub fn pending(&self) -> bool {
        matches!(
            self.outcome.as_str(),
            "pending" | "queued" | "in_progress" | "waiting" | "requested"
        )
    }
}

fn labels_of(v: &Value) -> Vec<String> {
    v["labels"]
        .as_array()
        .map(|a| a.iter().map(|l| s(l, "name").to_string()).collect())
        .unwrap_or_default()
}

fn assignees_of(v: &Value) -> Vec<String> {
    v["assignees"]
        .as_array()
        .map(|a| a.iter().map(login).collect())
        .unwrap_or_default()
}

impl GithubHost {
    pub(super) fn item_label(kind: Kind, n: u64) -> String {
        match kind {
            Kind::Issue => format!("Issue #{n}"),
            Kind::Pull => format!("PR #{n}"),
        }
    }

    /// `Issue #4 · open · Title · bug · 3 comments · by alice` (the tracker's line).
    pub(super) fn item_line(&self, kind: Kind, n: u64, v: &Value) -> String {
        let state = if is_merged(v) {
            "merged".to_string()
        } else {
            s(v, "state").to_string()
        };
        let mut parts = vec![Self::item_label(kind, n), state, flat(s(v, "title"))];
        if v["locked"].as_bool() == Some(true) {
            parts.push("locked".to_string());
        }
        let labels = labels_of(v);
        if !labels.is_empty() {
            parts.push(labels.join(", "));
        }
        if let Some(c) = v["comments"].as_u64() {
            parts.push(plural(c, "comment", "comments"));
        }
        parts.push(format!("by {}", login(&v["user"])));
        if kind == Kind::Pull {
            if v["draft"].as_bool() == Some(true) {
                parts.push("draft".to_string());
            }
            let head = s(&v["head"], "ref");
            let base = s(&v["base"], "ref");
            if !head.is_empty() {
                parts.push(format!("{head} → {base}"));
            }
        }
        let assignees = assignees_of(v);
        if !assignees.is_empty() {
            parts.push(format!("assigned to {}", and_list(&assignees)));
        }
        parts.join(" · ")
    }

    fn token_words(&self) -> String {
        match &self.token {
            TokenSource::Env(v) => format!("token from ${v}"),
            TokenSource::Gh => "token from `gh auth token`".to_string(),
            TokenSource::None => "no token: only public data can be read (GitHub allows 60 anonymous requests an hour) and nothing can be changed; to act as you, set GITHUB_TOKEN (or run `gh auth login`) before mounting, or set token_env in the manifest, and remount".to_string(),
        }
    }

    pub(super) fn rate_words(&self) -> String {
        let r = self.client.rate();
        match (r.remaining, r.limit) {
            (Some(rem), limit) => {
                let mut w = format!(
                    "rate limit: {rem}{} requests left",
                    limit.map(|l| format!(" of {l}")).unwrap_or_default()
                );
                if let Some(reset) = r.reset {
                    let now = now_secs();
                    if reset > now {
                        w.push_str(&format!(", resets at {}", reset_words(reset, now)));
                    }
                }
                w
            }
            (None, _) => "rate limit: not known until the first request".to_string(),
        }
    }

    pub(super) fn repo_json(
        &self,
        r: &Repo,
    ) -> Result<Option<std::sync::Arc<super::client::Page>>, HostError> {
        self.get_opt(&r.api(), false)
    }

    pub(super) fn describe(&self, node: &Node) -> HostResult<String> {
        Ok(match node {
            Node::Root => {
                let mut scope = Vec::new();
                if !self.repos.is_empty() {
                    let names: Vec<String> = self.repos.iter().map(Repo::full).collect();
                    scope.push(format!(
                        "{} ({})",
                        plural(names.len() as u64, "repository", "repositories"),
                        names.join(", ")
                    ));
                }
                if !self.owners.is_empty() {
                    scope.push(format!("every repository of {}", and_list(&self.owners)));
                }
                format!(
                    "GitHub at {} · {} · {} · {} · search with ops/search; results are results/ID (reached by id)",
                    self.base_uri,
                    if scope.is_empty() {
                        "no repositories configured (set repos or owners in the manifest)".to_string()
                    } else {
                        scope.join(" and ")
                    },
                    self.token_words(),
                    self.rate_words()
                )
            }
            Node::Results => {
                let n = lock(&self.searches).len();
                format!(
                    "{} so far; each is results/ID/ (not listed here: reach it by id, as search results print it)",
                    plural(n as u64, "search", "searches")
                )
            }
            Node::Result(id) | Node::Hits(id) => match self.search_run(*id) {
                Some(sr) => format!(
                    "Search {id} for {:?}: {} on GitHub, {} kept in hits/1 … hits/{}",
                    sr.query,
                    plural(sr.total, "hit", "hits"),
                    sr.hits.len(),
                    sr.hits.len()
                ),
                None => format!("no search {id}"),
            },
            Node::Hit(id, k) => match self.search_run(*id).and_then(|sr| sr.hits.get(k - 1).cloned()) {
                Some(h) => {
                    let mut line = format!(
                        "Hit {k} of search {id}: {} {}#{} · {} · {}",
                        if h.kind == Kind::Pull { "PR" } else { "Issue" },
                        h.repo.full(),
                        h.number,
                        h.state,
                        h.title
                    );
                    let target = Node::Item(h.repo.clone(), h.kind, h.number);
                    if self.repo_known(&h.repo) {
                        line.push_str(&format!(" — see {}", self.paths.entry(&target.path())));
                    } else {
                        line.push_str(&format!(
                            " — {} is not mounted here (add it to repos in the manifest)",
                            h.repo.full()
                        ));
                    }
                    line
                }
                None => format!("no hit {k} in search {id}"),
            },
            Node::Owner(o) => {
                let names: Vec<String> = self
                    .repos
                    .iter()
                    .filter(|r| r.owner.eq_ignore_ascii_case(o))
                    .map(|r| r.name.clone())
                    .collect();
                if self.owners.iter().any(|x| x.eq_ignore_ascii_case(o)) {
                    format!(
                        "GitHub owner {o} · every repository of {o} is reachable by name (cd {o}/NAME); ls shows the first {} GitHub lists",
                        self.list_limit
                    )
                } else {
                    format!("GitHub owner {o} · repositories here: {}", names.join(", "))
                }
            }
            Node::Repo(r) => match self.repo_json(r) {
                Ok(Some(p)) => {
                    let v = &p.body;
                    let mut parts = vec![r.full()];
                    let d = flat(s(v, "description"));
                    if !d.is_empty() {
                        parts.push(d);
                    }
                    parts.push(
                        if v["private"].as_bool() == Some(true) {
                            "private"
                        } else {
                            "public"
                        }
                        .to_string(),
                    );
                    if v["archived"].as_bool() == Some(true) {
                        parts.push("archived".to_string());
                    }
                    parts.push(format!("default branch {}", s(v, "default_branch")));
                    parts.push(format!(
                        "{} open issues and pull requests",
                        v["open_issues_count"].as_u64().unwrap_or(0)
                    ));
                    parts.push(format!("★ {}", v["stargazers_count"].as_u64().unwrap_or(0)));
                    parts.join(" · ")
                }
                Ok(None) => format!(
                    "{} · GitHub says Not Found: it does not exist, or the token cannot see it",
                    r.full()
                ),
                Err(e) => format!("{} · could not be read: {e}", r.full()),
            },
            Node::Issues(r) => {
                let open = self
                    .repo_json(r)
                    .ok()
                    .flatten()
                    .and_then(|p| p.body["open_issues_count"].as_u64());
                format!(
                    "Open issues of {}, newest first (the first {} at most; GitHub counts {} open issues and pull requests). Any issue, open or closed, is reachable by number (cd issues/N); pull requests share the numbers and live in pulls/.",
                    r.full(),
                    self.list_limit,
                    open.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
                )
            }
            Node::Pulls(r) => format!(
                "Open pull requests of {}, newest first (the first {} at most). Any pull request, open, closed or merged, is reachable by number (cd pulls/N).",
                r.full(),
                self.list_limit
            ),
            Node::Labels(r) => format!(
                "Labels of {}; each label's ops/issues lists the issues and pull requests carrying it. Names with / are written %2F.",
                r.full()
            ),
            Node::Branches(r) => format!(
                "Branches of {} (the first {} at most); any branch is reachable by name, / written %2F (cd branches/feature%2Fx).",
                r.full(),
                self.list_limit
            ),
            Node::Item(r, k, n) => {
                let p = self
                    .item(r, *k, *n, false)?
                    .ok_or_else(|| HostError::NotFound(format!("no {} #{n} in {}", k.dir(), r.full())))?;
                self.item_line(*k, *n, &p.body)
            }
            Node::Checks(r, n) => {
                let checks = self.checks_of(r, *n)?;
                let failing = checks.iter().filter(|c| c.failing()).count();
                let pending = checks.iter().filter(|c| c.pending()).count();
                format!(
                    "Check runs and commit statuses on the head of PR #{n}: {} ({failing} failing, {pending} pending). Names with / are written %2F.",
                    checks.len()
                )
            }
            Node::Check(r, n, c) => {
                let checks = self.checks_of(r, *n)?;
                let ch = checks
                    .iter()
                    .find(|x| &x.name == c)
                    .ok_or_else(|| HostError::NotFound(format!("no check {c} on PR #{n}")))?;
                let mut line = format!("{} {} on PR #{n} · {}", ch.kind, ch.name, ch.outcome);
                if !ch.summary.is_empty() {
                    line.push_str(&format!(" · {}", flat(&ch.summary)));
                }
                line
            }
            Node::Reviews(r, n) => {
                let reviews = self.reviews_of(r, *n)?;
                let approved = reviews.iter().filter(|v| s(v, "state") == "APPROVED").count();
                format!(
                    "{} on PR #{n} ({approved} approving), oldest first",
                    plural(reviews.len() as u64, "review", "reviews")
                )
            }
            Node::Review(r, n, id) => {
                let reviews = self.reviews_of(r, *n)?;
                let v = reviews
                    .iter()
                    .find(|v| v["id"].as_u64() == Some(*id))
                    .ok_or_else(|| HostError::NotFound(format!("no review {id} on PR #{n}")))?;
                format!(
                    "Review {id} on PR #{n} by {} · {} · {}",
                    login(&v["user"]),
                    s(v, "state").to_lowercase().replace('_', " "),
                    day(s(v, "submitted_at"))
                )
            }
            Node::Files(r, n) => {
                let files = self.files_of(r, *n)?;
                let add: u64 = files.iter().filter_map(|f| f["additions"].as_u64()).sum();
                let del: u64 = files.iter().filter_map(|f| f["deletions"].as_u64()).sum();
                format!(
                    "{} changed in PR #{n} (+{add} −{del}); each file's ops/read_body shows its patch. Paths are written with %2F for /.",
                    plural(files.len() as u64, "file", "files")
                )
            }
            Node::File(r, n, f) => {
                let files = self.files_of(r, *n)?;
                let v = files
                    .iter()
                    .find(|v| s(v, "filename") == f)
                    .ok_or_else(|| HostError::NotFound(format!("no file {f} in PR #{n}")))?;
                format!(
                    "{f} · {} · +{} −{}",
                    s(v, "status"),
                    v["additions"].as_u64().unwrap_or(0),
                    v["deletions"].as_u64().unwrap_or(0)
                )
            }
            Node::Label(r, l) => {
                let p = self
                    .get_opt(&format!("{}/labels/{}", r.api(), seg(l)), false)?
                    .ok_or_else(|| HostError::NotFound(format!("no label {l} in {}", r.full())))?;
                let d = flat(s(&p.body, "description"));
                format!(
                    "Label {l} · #{}{}",
                    s(&p.body, "color"),
                    if d.is_empty() { String::new() } else { format!(" · {d}") }
                )
            }
            Node::Branch(r, b) => {
                let p = self
                    .get_opt(&format!("{}/branches/{}", r.api(), seg(b)), false)?
                    .ok_or_else(|| HostError::NotFound(format!("no branch {b} in {}", r.full())))?;
                let sha = s(&p.body["commit"], "sha");
                format!(
                    "Branch {b} of {} · head {} · {}",
                    r.full(),
                    sha.get(..7).unwrap_or(sha),
                    if p.body["protected"].as_bool() == Some(true) {
                        "protected"
                    } else {
                        "not protected"
                    }
                )
            }
        })
    }

    /// An issue's or pull request's title, for titled names (from the cached item).
    pub(super) fn title_of(&self, node: &Node) -> HostResult<Option<String>> {
        Ok(match node {
            Node::Item(r, k, n) => self
                .item(r, *k, *n, false)?
                .map(|p| flat(s(&p.body, "title"))),
            _ => None,
        })
    }

    fn child(&self, node: Node, description: String) -> Child {
        let path = node.path();
        Child {
            name: path.last().cloned().unwrap_or_default(),
            info: EntryInfo::new(description, self.reference(&node)),
        }
    }

    pub(super) fn list_children(&self, node: &Node) -> HostResult<Vec<Child>> {
        let mut out = Vec::new();
        match node {
            Node::Root => {
                let mut owners: Vec<String> = Vec::new();
                for o in self
                    .repos
                    .iter()
                    .map(|r| r.owner.clone())
                    .chain(self.owners.iter().cloned())
                {
                    if !owners.iter().any(|x| x.eq_ignore_ascii_case(&o)) {
                        owners.push(o);
                    }
                }
                for o in owners {
                    let d = self.describe(&Node::Owner(o.clone()))?;
                    out.push(self.child(Node::Owner(o), d));
                }
                out.push(self.child(Node::Results, self.describe(&Node::Results)?));
            }
            Node::Results | Node::Result(_) | Node::Hits(_) => {
                // Searches and hits are reached by id, never listed (not indexable).
                if let Node::Result(id) = node {
                    let d = self.describe(&Node::Hits(*id))?;
                    let mut c = self.child(Node::Hits(*id), d);
                    c.info.indexable = false;
                    out.push(c);
                }
                if let Node::Hits(id) = node {
                    if let Some(sr) = self.search_run(*id) {
                        for k in 1..=sr.hits.len() {
                            let d = self.describe(&Node::Hit(*id, k))?;
                            let mut c = self.child(Node::Hit(*id, k), d);
                            c.info.indexable = false;
                            out.push(c);
                        }
                    }
                }
            }
            Node::Owner(o) => {
                let mut names: Vec<String> = self
                    .repos
                    .iter()
                    .filter(|r| r.owner.eq_ignore_ascii_case(o))
                    .map(|r| r.name.clone())
                    .collect();
                if self.owners.iter().any(|x| x.eq_ignore_ascii_case(o)) {
                    let (items, _) = self.list(&format!("/users/{}/repos", seg(o)))?;
                    for v in items {
                        let name = s(&v, "name").to_string();
                        if !name.is_empty() {
                            self.client
                                .seed(&format!("/repos/{}/{}", seg(o), seg(&name)), &v);
                            if !names.contains(&name) {
                                names.push(name);
                            }
                        }
                    }
                }
                for n in names {
                    let node = Node::Repo(Repo {
                        owner: o.clone(),
                        name: n,
                    });
                    let d = self.describe(&node)?;
                    out.push(self.child(node, d));
                }
            }
            Node::Repo(r) => {
                for n in [
                    Node::Issues(r.clone()),
                    Node::Pulls(r.clone()),
                    Node::Labels(r.clone()),
                    Node::Branches(r.clone()),
                ] {
                    let d = self.describe(&n)?;
                    out.push(self.child(n, d));
                }
            }
            Node::Issues(r) => {
                let (items, _) = self.list(&format!("{}/issues", r.api()))?;
                for v in items {
                    let Some(n) = v["number"].as_u64() else {
                        continue;
                    };
                    self.client.seed(&format!("{}/issues/{n}", r.api()), &v);
                    if v.get("pull_request").is_some() {
                        continue;
                    }
                    let line = self.item_line(Kind::Issue, n, &v);
                    let mut c = self.child(Node::Item(r.clone(), Kind::Issue, n), line);
                    c.info = c.info.titled(flat(s(&v, "title")));
                    out.push(c);
                }
            }
            Node::Pulls(r) => {
                let (items, _) = self.list(&format!("{}/pulls", r.api()))?;
                for v in items {
                    let Some(n) = v["number"].as_u64() else {
                        continue;
                    };
                    self.client.seed(&format!("{}/pulls/{n}", r.api()), &v);
                    let line = self.item_line(Kind::Pull, n, &v);
                    let mut c = self.child(Node::Item(r.clone(), Kind::Pull, n), line);
                    c.info = c.info.titled(flat(s(&v, "title")));
                    out.push(c);
                }
            }
            Node::Item(r, Kind::Pull, n) => {
                for c in [
                    Node::Checks(r.clone(), *n),
                    Node::Reviews(r.clone(), *n),
                    Node::Files(r.clone(), *n),
                ] {
                    // Counts would cost a request each: the listing says what each holds.
                    let d = match &c {
                        Node::Checks(..) => {
                            format!("Check runs and commit statuses on the head of PR #{n}")
                        }
                        Node::Reviews(..) => format!("Reviews of PR #{n}"),
                        _ => format!("Files changed in PR #{n}"),
                    };
                    out.push(self.child(c, d));
                }
            }
            Node::Item(_, Kind::Issue, _) => {}
            Node::Checks(r, n) => {
                for ch in self.checks_of(r, *n)? {
                    let d = format!("{} {} · {}", ch.kind, ch.name, ch.outcome);
                    out.push(self.child(Node::Check(r.clone(), *n, ch.name), d));
                }
            }
            Node::Reviews(r, n) => {
                for v in self.reviews_of(r, *n)? {
                    let Some(id) = v["id"].as_u64() else { continue };
                    let d = format!(
                        "Review {id} on PR #{n} by {} · {}",
                        login(&v["user"]),
                        s(&v, "state").to_lowercase().replace('_', " ")
                    );
                    out.push(self.child(Node::Review(r.clone(), *n, id), d));
                }
            }
            Node::Files(r, n) => {
                for v in self.files_of(r, *n)? {
                    let f = s(&v, "filename").to_string();
                    if f.is_empty() {
                        continue;
                    }
                    let d = format!("{f} · {}", s(&v, "status"));
                    out.push(self.child(Node::File(r.clone(), *n, f), d));
                }
            }
            Node::Labels(r) => {
                let (items, _) = self.list(&format!("{}/labels", r.api()))?;
                for v in items {
                    let name = s(&v, "name").to_string();
                    if name.is_empty() {
                        continue;
                    }
                    self.client
                        .seed(&format!("{}/labels/{}", r.api(), seg(&name)), &v);
                    let d = format!("Label {name} · #{}", s(&v, "color"));
                    out.push(self.child(Node::Label(r.clone(), name), d));
                }
            }
            Node::Branches(r) => {
                let (items, _) = self.list(&format!("{}/branches", r.api()))?;
                for v in items {
                    let name = s(&v, "name").to_string();
                    if name.is_empty() {
                        continue;
                    }
                    self.client
                        .seed(&format!("{}/branches/{}", r.api(), seg(&name)), &v);
                    let d = format!("Branch {name}");
                    out.push(self.child(Node::Branch(r.clone(), name), d));
                }
            }
            Node::Check(..)
            | Node::Review(..)
            | Node::File(..)
            | Node::Label(..)
            | Node::Branch(..)
            | Node::Hit(..) => {}
        }
        Ok(out)
    }

    /// The head commit of a pull request.
    pub(super) fn head_sha(&self, r: &Repo, n: u64) -> HostResult<String> {
        let p = self
            .item(r, Kind::Pull, n, false)?
            .ok_or_else(|| HostError::NotFound(format!("no pull request #{n} in {}", r.full())))?;
        let sha = s(&p.body["head"], "sha").to_string();
        if sha.is_empty() {
            return Err(HostError::Backend(format!(
                "GitHub shows no head commit for PR #{n}"
            )));
        }
        Ok(sha)
    }

    /// Check runs and commit statuses on the pull request's head.
    pub(super) fn checks_of(&self, r: &Repo, n: u64) -> HostResult<Vec<CheckItem>> {
        let sha = self.head_sha(r, n)?;
        self.checks_at(r, &sha, Read::Cached)
    }

    pub(super) fn checks_at(&self, r: &Repo, sha: &str, read: Read) -> HostResult<Vec<CheckItem>> {
        let get = |path: String| -> HostResult<Option<std::sync::Arc<super::client::Page>>> {
            match self.get_read(&path, read) {
                Ok(p) => Ok(Some(p)),
                Err(e) if e.status() == Some(404) => Ok(None),
                Err(e) => Err(e.into_host(&format!("reading checks of {sha}"))),
            }
        };
        let mut out = Vec::new();
        if let Some(p) = get(format!(
            "{}/commits/{}/check-runs?per_page=100",
            r.api(),
            seg(sha)
        ))? {
            for c in p.body["check_runs"].as_array().cloned().unwrap_or_default() {
                let status = s(&c, "status");
                let outcome = if status == "completed" {
                    s(&c, "conclusion").to_string()
                } else {
                    status.to_string()
                };
                out.push(CheckItem {
                    name: s(&c, "name").to_string(),
                    kind: "check run",
                    outcome,
                    summary: s(&c["output"], "title").to_string(),
                    url: s(&c, "details_url").to_string(),
                    body: c.clone(),
                });
            }
        }
        if let Some(p) = get(format!("{}/commits/{}/status", r.api(), seg(sha)))? {
            for c in p.body["statuses"].as_array().cloned().unwrap_or_default() {
                let name = s(&c, "context").to_string();
                if out.iter().any(|x| x.name == name) {
                    continue;
                }
                out.push(CheckItem {
                    name,
                    kind: "status",
                    outcome: s(&c, "state").to_string(),
                    summary: s(&c, "description").to_string(),
                    url: s(&c, "target_url").to_string(),
                    body: c.clone(),
                });
            }
        }
        Ok(out)
    }

    pub(super) fn reviews_of(&self, r: &Repo, n: u64) -> HostResult<Vec<Value>> {
        Ok(self.list(&format!("{}/pulls/{n}/reviews", r.api()))?.0)
    }

    pub(super) fn files_of(&self, r: &Repo, n: u64) -> HostResult<Vec<Value>> {
        Ok(self.list(&format!("{}/pulls/{n}/files", r.api()))?.0)
    }
}

/// The name a check shows in `checks/`.
pub(super) fn check_path_name(name: &str) -> String {
    encode_name(name)
}
