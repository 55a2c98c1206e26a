//! The github host: GitHub repositories, issues and pull requests as a world, through
//! GitHub's REST API (octocrab), with the tracker host's vocabulary.
//!
//! Tree, host-relative: `OWNER/REPO/{issues/N, pulls/N/{checks,reviews,files}/…, labels/NAME,
//! branches/NAME}` and `results/ID/hits/K` (searches; reachable by id, not listed). Nothing is
//! fetched at mount time; a listing is GitHub's first pages (bounded), any number resolves by
//! path. Names holding `/` or `%` (branches, files, checks) are written with `%2F` / `%25`.
//! Reads go through a TTL cache revalidated with ETags; guards come from GitHub's own state
//! and are read again, fresh, right before the change they allow.

mod client;
mod guards;
mod ops;
#[cfg(test)]
mod tests;
mod tree;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::calendar::parse_iso;
use crate::host::names::Paths;
use crate::host::{
    Body, CallOutcome, Caller, Child, EntryInfo, Guard, Host, HostError, HostResult, OpSpec,
};
use crate::hosts::{lock, HostContext};
use client::Client;
use guards::Read;
use ops::OPS;

pub use client::{github_message, next_link, reset_words, GhError};

/// The `[[host]]` table of a github host, minus `kind` and `path`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GithubSettings {
    /// Repositories shown, as `owner/name`.
    #[serde(default)]
    pub repos: Vec<String>,
    /// Owners (users or organisations) all of whose repositories are reachable.
    #[serde(default)]
    pub owners: Vec<String>,
    /// The API root: `https://api.github.com`, a GitHub Enterprise `https://HOST/api/v3`, or
    /// a local replay server in tests.
    #[serde(default = "default_base_uri")]
    pub base_uri: String,
    /// The environment variable holding the token.
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// Ask `gh auth token` when that variable is unset or empty.
    #[serde(default = "default_true")]
    pub gh: bool,
    /// How long a GitHub answer is reused without asking again (then revalidated by ETag).
    #[serde(default = "default_ttl")]
    pub cache_ttl_secs: u64,
    /// Items per page asked of GitHub (at most 100; 30, GitHub's default, is not sent).
    #[serde(default = "default_per_page")]
    pub per_page: u32,
    /// At most this many entries in one listing (GitHub's pages are followed up to it).
    #[serde(default = "default_list_limit")]
    pub list_limit: usize,
    /// Every request's deadline.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
}

fn default_base_uri() -> String {
    "https://api.github.com".to_string()
}
fn default_token_env() -> String {
    "GITHUB_TOKEN".to_string()
}
fn default_true() -> bool {
    true
}
fn default_ttl() -> u64 {
    45
}
fn default_per_page() -> u32 {
    100
}
fn default_list_limit() -> usize {
    100
}
fn default_timeout() -> u64 {
    15
}

#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    #[error("repos entry {0:?} is not owner/name")]
    BadRepo(String),
    #[error("owner {0:?} is not a GitHub login")]
    BadOwner(String),
    #[error("an owner named \"results\" would hide the search results folder")]
    ResultsOwner,
    #[error("per_page must be 1..=100 and list_limit at least 1")]
    Paging,
    #[error("{0}")]
    Client(#[from] client::ClientError),
}

/// Where the token came from (never the token itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    Env(String),
    Gh,
    None,
}

/// A repository, as `owner/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Repo {
    pub owner: String,
    pub name: String,
}

impl Repo {
    fn api(&self) -> String {
        format!(
            "/repos/{}/{}",
            client::seg(&self.owner),
            client::seg(&self.name)
        )
    }
    fn full(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
    fn path(&self) -> Vec<String> {
        vec![self.owner.clone(), self.name.clone()]
    }
}

/// Issues and pull requests share the tracker's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Issue,
    Pull,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Issue => "issues",
            Kind::Pull => "pulls",
        }
    }
}

/// An entry of the tree, parsed from a host-relative path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Root,
    Results,
    Result(u64),
    Hits(u64),
    Hit(u64, usize),
    Owner(String),
    Repo(Repo),
    Issues(Repo),
    Pulls(Repo),
    Labels(Repo),
    Branches(Repo),
    Item(Repo, Kind, u64),
    Checks(Repo, u64),
    Check(Repo, u64, String),
    Reviews(Repo, u64),
    Review(Repo, u64, u64),
    Files(Repo, u64),
    File(Repo, u64, String),
    Label(Repo, String),
    Branch(Repo, String),
}

fn number(s: &str) -> Option<u64> {
    crate::host::names::canonical_number(s)
}

/// Names with `/` (branches, paths, check names) in one path segment: `%2F`, and `%` as `%25`.
pub fn encode_name(s: &str) -> String {
    s.replace('%', "%25").replace('/', "%2F")
}

pub fn decode_name(s: &str) -> Option<String> {
    let out = s
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%25", "%");
    // Only the one spelling `encode_name` makes is a name.
    (encode_name(&out) == s).then_some(out)
}

impl Node {
    fn parse(path: &[String]) -> Option<Node> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let repo = |o: &str, r: &str| Repo {
            owner: o.to_string(),
            name: r.to_string(),
        };
        Some(match p.as_slice() {
            [] => Node::Root,
            ["results"] => Node::Results,
            ["results", id] => Node::Result(number(id)?),
            ["results", id, "hits"] => Node::Hits(number(id)?),
            ["results", id, "hits", k] => {
                Node::Hit(number(id)?, crate::host::names::canonical_number(k)?)
            }
            [o] => Node::Owner(o.to_string()),
            [o, r] => Node::Repo(repo(o, r)),
            [o, r, "issues"] => Node::Issues(repo(o, r)),
            [o, r, "pulls"] => Node::Pulls(repo(o, r)),
            [o, r, "labels"] => Node::Labels(repo(o, r)),
            [o, r, "branches"] => Node::Branches(repo(o, r)),
            [o, r, "issues", n] => Node::Item(repo(o, r), Kind::Issue, number(n)?),
            [o, r, "pulls", n] => Node::Item(repo(o, r), Kind::Pull, number(n)?),
            [o, r, "pulls", n, "checks"] => Node::Checks(repo(o, r), number(n)?),
            [o, r, "pulls", n, "checks", c] => Node::Check(repo(o, r), number(n)?, decode_name(c)?),
            [o, r, "pulls", n, "reviews"] => Node::Reviews(repo(o, r), number(n)?),
            [o, r, "pulls", n, "reviews", id] => Node::Review(repo(o, r), number(n)?, number(id)?),
            [o, r, "pulls", n, "files"] => Node::Files(repo(o, r), number(n)?),
            [o, r, "pulls", n, "files", f] => Node::File(repo(o, r), number(n)?, decode_name(f)?),
            [o, r, "labels", l] => Node::Label(repo(o, r), decode_name(l)?),
            [o, r, "branches", b] => Node::Branch(repo(o, r), decode_name(b)?),
            _ => return None,
        })
    }

    fn path(&self) -> Vec<String> {
        let with = |r: &Repo, rest: &[String]| {
            let mut p = r.path();
            p.extend(rest.iter().cloned());
            p
        };
        let s = |x: &str| x.to_string();
        match self {
            Node::Root => vec![],
            Node::Results => vec![s("results")],
            Node::Result(id) => vec![s("results"), id.to_string()],
            Node::Hits(id) => vec![s("results"), id.to_string(), s("hits")],
            Node::Hit(id, k) => vec![s("results"), id.to_string(), s("hits"), k.to_string()],
            Node::Owner(o) => vec![o.clone()],
            Node::Repo(r) => r.path(),
            Node::Issues(r) => with(r, &[s("issues")]),
            Node::Pulls(r) => with(r, &[s("pulls")]),
            Node::Labels(r) => with(r, &[s("labels")]),
            Node::Branches(r) => with(r, &[s("branches")]),
            Node::Item(r, k, n) => with(r, &[s(k.dir()), n.to_string()]),
            Node::Checks(r, n) => with(r, &[s("pulls"), n.to_string(), s("checks")]),
            Node::Check(r, n, c) => {
                with(r, &[s("pulls"), n.to_string(), s("checks"), encode_name(c)])
            }
            Node::Reviews(r, n) => with(r, &[s("pulls"), n.to_string(), s("reviews")]),
            Node::Review(r, n, id) => with(
                r,
                &[s("pulls"), n.to_string(), s("reviews"), id.to_string()],
            ),
            Node::Files(r, n) => with(r, &[s("pulls"), n.to_string(), s("files")]),
            Node::File(r, n, f) => {
                with(r, &[s("pulls"), n.to_string(), s("files"), encode_name(f)])
            }
            Node::Label(r, l) => with(r, &[s("labels"), encode_name(l)]),
            Node::Branch(r, b) => with(r, &[s("branches"), encode_name(b)]),
        }
    }
}

/// One search and what it found.
#[derive(Clone, Debug)]
struct SearchRun {
    id: u64,
    query: String,
    total: u64,
    hits: Vec<Hit>,
}

#[derive(Clone, Debug)]
struct Hit {
    repo: Repo,
    kind: Kind,
    number: u64,
    title: String,
    state: String,
}

pub struct GithubHost {
    client: Client,
    /// Where the host's entries are in the world, for every path it prints.
    paths: Paths,
    base_uri: String,
    repos: Vec<Repo>,
    owners: Vec<String>,
    token: TokenSource,
    has_token: bool,
    per_page: u32,
    list_limit: usize,
    ttl: Duration,
    searches: Mutex<Vec<SearchRun>>,
    /// The token's user, once asked (`GET /user`).
    login: Mutex<Option<String>>,
}

fn valid_login(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The token: the environment variable, else `gh auth token` (bounded: 5 s).
fn find_token(env: &str, gh: bool) -> (Option<String>, TokenSource) {
    if let Ok(t) = std::env::var(env) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            return (Some(t), TokenSource::Env(env.to_string()));
        }
    }
    if gh {
        if let Some(t) = gh_token() {
            return (Some(t), TokenSource::Gh);
        }
    }
    (None, TokenSource::None)
}

fn gh_token() -> Option<String> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new("gh");
    cmd.args(["auth", "token"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: plain_signals is async-signal-safe.
    unsafe { cmd.pre_exec(crate::children::plain_signals) };
    let mut child = cmd.spawn().ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                tracing::warn!(
                    "`gh auth token` did not answer within 5 s; going on without a token"
                );
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let mut out = String::new();
    use std::io::Read;
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let t = out.trim().to_string();
    (!t.is_empty()).then_some(t)
}

impl GithubHost {
    pub fn open(settings: GithubSettings, ctx: &HostContext) -> Result<GithubHost, GithubError> {
        // The token is the daemon's alone: no child of another host inherits it.
        crate::secrets::withhold_env(&settings.token_env);
        let (token, source) = find_token(&settings.token_env, settings.gh);
        Self::with_token(ctx.paths(), settings, token, source)
    }

    /// Open with a given token (tests, and `open` once the token is found), printing paths
    /// with `paths`.
    pub fn with_token(
        paths: Paths,
        settings: GithubSettings,
        token: Option<String>,
        source: TokenSource,
    ) -> Result<GithubHost, GithubError> {
        let mut repos = Vec::new();
        for r in &settings.repos {
            match r.trim().split_once('/') {
                Some((o, n)) if valid_login(o) && valid_login(n) => repos.push(Repo {
                    owner: o.to_string(),
                    name: n.to_string(),
                }),
                _ => return Err(GithubError::BadRepo(r.clone())),
            }
        }
        for o in &settings.owners {
            if !valid_login(o) {
                return Err(GithubError::BadOwner(o.clone()));
            }
        }
        if settings.owners.iter().any(|o| o == "results")
            || repos.iter().any(|r| r.owner == "results")
        {
            return Err(GithubError::ResultsOwner);
        }
        if settings.per_page == 0 || settings.per_page > 100 || settings.list_limit == 0 {
            return Err(GithubError::Paging);
        }
        let ttl = Duration::from_secs(settings.cache_ttl_secs);
        let client = Client::new(
            settings.base_uri.trim_end_matches('/'),
            token.as_deref(),
            ttl,
            Duration::from_secs(settings.timeout_secs.max(1)),
        )?;
        Ok(GithubHost {
            client,
            paths,
            base_uri: settings.base_uri.trim_end_matches('/').to_string(),
            repos,
            owners: settings.owners,
            has_token: token.is_some(),
            token: source,
            per_page: settings.per_page,
            list_limit: settings.list_limit,
            ttl,
            searches: Mutex::new(Vec::new()),
            login: Mutex::new(None),
        })
    }

    fn reference(&self, node: &Node) -> String {
        match node {
            Node::Root => "github://".to_string(),
            other => format!("github://{}", other.path().join("/")),
        }
    }

    /// Whether the manifest puts this owner in the world.
    fn owner_known(&self, owner: &str) -> bool {
        self.owners.iter().any(|o| o.eq_ignore_ascii_case(owner))
            || self
                .repos
                .iter()
                .any(|r| r.owner.eq_ignore_ascii_case(owner))
    }

    /// Whether the manifest puts this repository in the world.
    fn repo_known(&self, repo: &Repo) -> bool {
        self.owners
            .iter()
            .any(|o| o.eq_ignore_ascii_case(&repo.owner))
            || self.repos.iter().any(|r| {
                r.owner.eq_ignore_ascii_case(&repo.owner) && r.name.eq_ignore_ascii_case(&repo.name)
            })
    }

    fn configured(&self, repo: &Repo) -> bool {
        self.repos.contains(repo)
    }

    /// A GET, with 404 as `None`.
    fn get_opt(&self, path: &str, full: bool) -> HostResult<Option<Arc<client::Page>>> {
        let r = if full {
            self.client.get_full(path)
        } else {
            self.client.get(path)
        };
        match r {
            Ok(p) => Ok(Some(p)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e.into_host(&format!("reading {path}"))),
        }
    }

    /// The start of the current cache window: entries report it as their modification time,
    /// so the kernel drops its listings and contents once per TTL and asks again (which
    /// costs a 304 when GitHub has nothing new).
    fn window(&self) -> std::time::SystemTime {
        let ttl = self.ttl.as_secs().max(1);
        let now = client::now_secs();
        std::time::UNIX_EPOCH + Duration::from_secs(now - now % ttl)
    }

    /// The first page's URL: `per_page` is sent unless it is GitHub's own default (30).
    fn paged(&self, path: &str) -> String {
        if self.per_page == 30 {
            return path.to_string();
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}per_page={}", self.per_page)
    }

    /// Every item of a paged listing, following `Link: next` up to the list limit.
    fn list(&self, first: &str) -> HostResult<(Vec<Value>, bool)> {
        let mut out = Vec::new();
        let mut next = Some(self.paged(first));
        let mut more = false;
        while let Some(url) = next.take() {
            if out.len() >= self.list_limit {
                more = true;
                break;
            }
            let page = self
                .client
                .get(&url)
                .map_err(|e| e.into_host(&format!("listing {first}")))?;
            let items = match &page.body {
                Value::Array(a) => a.clone(),
                Value::Object(o) => o
                    .values()
                    .find_map(|v| v.as_array().cloned())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            out.extend(items);
            next = page.next.clone();
        }
        if out.len() > self.list_limit {
            out.truncate(self.list_limit);
            more = true;
        }
        Ok((out, more))
    }

    fn exists(&self, node: &Node) -> HostResult<bool> {
        Ok(match node {
            Node::Root | Node::Results => true,
            Node::Result(id) | Node::Hits(id) => self.search_run(*id).is_some(),
            Node::Hit(id, k) => self
                .search_run(*id)
                .is_some_and(|s| *k >= 1 && *k <= s.hits.len()),
            Node::Owner(o) => self.owner_known(o),
            Node::Repo(r)
            | Node::Issues(r)
            | Node::Pulls(r)
            | Node::Labels(r)
            | Node::Branches(r) => self.repo_exists(r)?,
            Node::Item(r, k, n) => self.repo_known(r) && self.item(r, *k, *n, false)?.is_some(),
            Node::Checks(r, n) | Node::Reviews(r, n) | Node::Files(r, n) => {
                self.repo_known(r) && self.item(r, Kind::Pull, *n, false)?.is_some()
            }
            Node::Check(r, n, c) => {
                self.repo_known(r) && self.checks_of(r, *n)?.iter().any(|x| &x.name == c)
            }
            Node::Review(r, n, id) => {
                self.repo_known(r)
                    && self
                        .reviews_of(r, *n)?
                        .iter()
                        .any(|v| v["id"].as_u64() == Some(*id))
            }
            Node::File(r, n, f) => {
                self.repo_known(r)
                    && self
                        .files_of(r, *n)?
                        .iter()
                        .any(|v| v["filename"].as_str() == Some(f.as_str()))
            }
            Node::Label(r, l) => {
                self.repo_known(r)
                    && self
                        .get_opt(&format!("{}/labels/{}", r.api(), client::seg(l)), false)?
                        .is_some()
            }
            Node::Branch(r, b) => {
                self.repo_known(r)
                    && self
                        .get_opt(&format!("{}/branches/{}", r.api(), client::seg(b)), false)?
                        .is_some()
            }
        })
    }

    /// A configured repository exists whatever GitHub says (its description carries the
    /// error); one reached through `owners` exists if GitHub shows it.
    fn repo_exists(&self, r: &Repo) -> HostResult<bool> {
        if !self.repo_known(r) {
            return Ok(false);
        }
        if self.configured(r) {
            return Ok(true);
        }
        Ok(self.get_opt(&r.api(), false)?.is_some())
    }

    /// The issue or pull request (GitHub serves pull requests at /issues/N too: those are
    /// not issues here, as in the tracker).
    fn item(
        &self,
        r: &Repo,
        kind: Kind,
        n: u64,
        full: bool,
    ) -> HostResult<Option<Arc<client::Page>>> {
        match kind {
            Kind::Issue => {
                let p = self.get_opt(&format!("{}/issues/{n}", r.api()), full)?;
                Ok(p.filter(|p| p.body.get("pull_request").is_none()))
            }
            Kind::Pull => self.get_opt(&format!("{}/pulls/{n}", r.api()), full),
        }
    }

    /// The text of a body and when it last changed (GitHub's timestamp).
    fn body_of(&self, node: &Node) -> HostResult<Option<(String, Option<String>)>> {
        Ok(match node {
            Node::Item(r, k, n) => self.item(r, *k, *n, true)?.map(|p| {
                (
                    tree::s(&p.body, "body").to_string(),
                    Some(tree::s(&p.body, "updated_at").to_string()),
                )
            }),
            Node::Review(r, n, id) => self
                .reviews_of(r, *n)?
                .into_iter()
                .find(|v| v["id"].as_u64() == Some(*id))
                .map(|v| {
                    (
                        tree::s(&v, "body").to_string(),
                        Some(tree::s(&v, "submitted_at").to_string()),
                    )
                }),
            Node::File(r, n, f) => self
                .files_of(r, *n)?
                .into_iter()
                .find(|v| tree::s(v, "filename") == f)
                .map(|v| (ops::file_patch(&v), None)),
            _ => None,
        })
    }

    fn search_run(&self, id: u64) -> Option<SearchRun> {
        lock(&self.searches).iter().find(|s| s.id == id).cloned()
    }

    fn existing(&self, path: &[String]) -> HostResult<Node> {
        match Node::parse(path) {
            Some(node) if self.exists(&node)? => Ok(node),
            _ => Err(HostError::NotFound(format!(
                "no entry {} in the github host",
                if path.is_empty() {
                    "/".to_string()
                } else {
                    path.join("/")
                }
            ))),
        }
    }
}

impl Host for GithubHost {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        if !self.exists(&node)? {
            return Ok(None);
        }
        let mut info = EntryInfo::new(self.describe(&node)?, self.reference(&node));
        if let Some(title) = self.title_of(&node)? {
            info = info.titled(title);
        }
        if let Node::Hit(id, k) = &node {
            if let Some(h) = self
                .search_run(*id)
                .and_then(|s| s.hits.get(k - 1).cloned())
            {
                info.reference = self.reference(&Node::Item(h.repo, h.kind, h.number));
            }
        }
        info.modified = Some(self.window());
        info.indexable = !matches!(node, Node::Result(_) | Node::Hits(_) | Node::Hit(..));
        Ok(Some(info))
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        let node = self.existing(path)?;
        self.list_children(&node)
    }

    /// Entries show the start of the cache window (see `window`), as `entry` does.
    fn modified(&self, _path: &[String]) -> HostResult<Option<std::time::SystemTime>> {
        Ok(Some(self.window()))
    }

    /// An issue's or pull request's body (markdown), a review's text, a changed file's
    /// patch; read from the same cached pages (with ETags) as the rest.
    fn body(&self, path: &[String]) -> HostResult<Option<Body>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        // The stored bytes, no more: a body without a final newline reads back without one.
        Ok(self.body_of(&node)?.map(|(text, at)| {
            Body::bytes(text).modified(at.as_deref().and_then(parse_iso).or(Some(self.window())))
        }))
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        let node = self.existing(path)?;
        Ok(OPS.specs(&node))
    }

    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard> {
        let node = self.existing(path)?;
        OPS.guard(self, &Read::Cached, &node, op, args)
    }

    /// Guards are read again, fresh from GitHub, right before the change they allow.
    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        _caller: &Caller,
    ) -> HostResult<CallOutcome> {
        let node = self.existing(path)?;
        OPS.call(self, &Read::Fresh, &node, op, args)
    }

    /// HTTP calls are bounded by the client's own deadline, but the runtime should still
    /// run them on its pool with the call timeout (a slow GitHub must not hold a FUSE
    /// thread).
    fn bounded_calls(&self) -> bool {
        false
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        let Some(rest) = reference.trim().strip_prefix("github://") else {
            return Vec::new();
        };
        let segs: Vec<String> = rest
            .trim_end_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let Some(node) = Node::parse(&segs) else {
            return Vec::new();
        };
        // A number is one object whether the ref says issues/ or pulls/.
        let node = match node {
            Node::Item(r, Kind::Issue, n)
                if matches!(self.item(&r, Kind::Issue, n, false), Ok(None)) =>
            {
                Node::Item(r, Kind::Pull, n)
            }
            other => other,
        };
        match self.exists(&node) {
            Ok(true) => vec![node.path()],
            _ => Vec::new(),
        }
    }

    fn cache_ttl(&self) -> Duration {
        self.ttl
    }
}
