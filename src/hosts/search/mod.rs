//! The search host: full-text search (BM25, tantivy) over the documents other hosts offer.
//!
//! Tree, host-relative: the root offers `search(query, limit?, source?)` and `reindex(full?)`;
//! `results/ID/` (not listed by `results/`, reachable by id, kept across remounts) is one
//! search, with `hits/1…N/`, best first, whose `ref` is the found object's own ref.
//!
//! Sources are peers: hosts mounted before this one, read through `Host::documents` only.
//! Indexing is incremental (see `worker`): at open on a background thread, so mounting stays
//! instant; on `reindex`; and before every search, for the sources it covers: a source whose
//! last indexing took under 300 ms (the tracker) is read again for every search, so a comment
//! made a moment ago is found; a slower one (a large directory) when its last indexing
//! started more than 2 s ago. A search waits for that at most 5 s, then answers from what is
//! indexed and says so.

mod index;
mod store;
#[cfg(test)]
mod tests;
mod worker;

use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::host::names::{canonical_number, Paths};
use crate::host::op::{Decl, NoArgs, Ops, Text};
use crate::host::text::{one_line, plural};
use crate::host::{
    CallOutcome, Caller, Child, Condition, EntryInfo, Guard, Host, HostError, HostResult, OpSpec,
};
use crate::hosts::{HostContext, Peer};

use index::{Engine, Hit};
use store::{Search, Store};
use worker::{Indexer, Shared};

/// A search first re-reads every source whose last indexing took less than this…
const CHEAP: Duration = Duration::from_millis(300);
/// …and the slower ones when their last indexing started longer ago than this.
const FRESH: Duration = Duration::from_secs(2);
/// How long a search waits for that refresh before answering from what is indexed.
const SEARCH_WAIT: Duration = Duration::from_secs(5);
/// How long `reindex` waits for its pass.
const REINDEX_WAIT: Duration = Duration::from_secs(20);
/// Hits a search keeps unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 10;
/// Characters of a hit's snippet shown in its description.
const DESCRIPTION_SNIPPET: usize = 120;
/// Characters of the indexed text `read_body` adds after the snippet.
const BODY_CHARS: usize = 4000;

/// The `[[host]]` table of a search host, minus `kind` and `path`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// World mount paths of the hosts to index (each must be mounted before this one);
    /// default: every host mounted before it.
    #[serde(default)]
    pub sources: Option<Vec<String>>,
    /// Documents asked of a source per page, the largest `limit` of a search, and the bound
    /// of the `results/` listing.
    #[serde(default = "default_page_size")]
    pub page_size: usize,
    /// Where the index and its SQLite file live; default
    /// `<state_dir>/search-<mount path, / as _>`. Relative to the launch directory.
    #[serde(default)]
    pub index_dir: Option<PathBuf>,
    /// At most this many documents per source are indexed (the first, in source order).
    #[serde(default = "default_max_documents")]
    pub max_documents: usize,
}

fn default_page_size() -> usize {
    50
}

fn default_max_documents() -> usize {
    100_000
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            sources: None,
            page_size: default_page_size(),
            index_dir: None,
            max_documents: default_max_documents(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("page_size must be at least 1")]
    PageSize,
    #[error("max_documents must be at least 1")]
    MaxDocuments,
    #[error("unknown source {name:?}: not a host mounted before this one (known: {known})")]
    UnknownSource { name: String, known: String },
    #[error("source {0:?} is listed twice")]
    DuplicateSource(String),
    #[error("cannot create index directory {path}: {source}")]
    IndexDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("search index {path}: {source}")]
    Index {
        path: PathBuf,
        source: tantivy::TantivyError,
    },
    #[error("search database {path}: {source}")]
    Database {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("cannot start the indexing thread: {0}")]
    Thread(std::io::Error),
}

/// What the host and its indexing thread share.
struct Inner {
    engine: Engine,
    store: Store,
    shared: Shared,
    sources: Vec<Peer>,
    hidden: crate::host::Hidden,
    page_size: usize,
    max_documents: usize,
}

impl Inner {
    fn indexer(&self) -> Indexer<'_> {
        Indexer {
            engine: &self.engine,
            store: &self.store,
            shared: &self.shared,
            sources: &self.sources,
            hidden: &self.hidden,
            page_size: self.page_size,
            max_documents: self.max_documents,
        }
    }
}

/// The search host.
pub struct SearchHost {
    inner: Arc<Inner>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// Where the host is mounted in the world (`search`).
    paths: Paths,
}

/// An entry of the tree, parsed from a host-relative path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Root,
    Results,
    Result(i64),
    Hits(i64),
    Hit(i64, i64),
}

impl Node {
    fn parse(path: &[String]) -> Option<Node> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        Some(match p.as_slice() {
            [] => Node::Root,
            ["results"] => Node::Results,
            ["results", id] => Node::Result(canonical_number(id)?),
            ["results", id, "hits"] => Node::Hits(canonical_number(id)?),
            ["results", id, "hits", n] => Node::Hit(canonical_number(id)?, canonical_number(n)?),
            _ => return None,
        })
    }
}

/// An entry as its ops see it: the node, and the page size their descriptions cite.
#[derive(Clone, Copy, Debug)]
struct At {
    node: Node,
    page_size: usize,
}

/// The arguments of `search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// what to look for (tantivy query syntax)
    query: Text,
    /// how many hits to keep
    #[schemars(range(min = 1))]
    limit: Option<usize>,
    /// search only the documents of this host
    source: Option<String>,
}

/// The arguments of `reindex`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReindexArgs {
    /// drop the index and read everything again
    #[serde(default)]
    full: bool,
}

/// Every op's name, spelled once: the declarations below and the words that point to an
/// op use these.
pub(super) mod name {
    pub const SEARCH: &str = "search";
    pub const REINDEX: &str = "reindex";
    pub const READ_BODY: &str = "read_body";
}

/// Every op of the search host, in the order `ops/` lists them.
static OPS: LazyLock<Ops<SearchHost, At>> = LazyLock::new(|| {
    Ops::new(vec![
        Decl::<SearchHost, At, (), SearchArgs> {
            name: name::SEARCH,
            offers: |at| at.node == Node::Root,
            describe: |at| {
                format!(
                    "Full-text search (BM25; words, \"phrases\", AND/OR/-word, title:word): \
                     query, limit (1–{}, default {DEFAULT_LIMIT}), source (one of the indexed \
                     hosts). Makes results/ID/ with hits/1…N.",
                    at.page_size
                )
            },
            guard: |h, _, _, _| Ok(h.has_sources()),
            run: |h, _, _, args| h.run_search(args),
        }
        .into(),
        Decl::<SearchHost, At, (), ReindexArgs> {
            name: name::REINDEX,
            offers: |at| at.node == Node::Root,
            describe: |_| {
                "Bring the index up to date with every source now (full: rebuild it from \
                 nothing)."
                    .to_string()
            },
            guard: |h, _, _, _| Ok(h.has_sources()),
            run: |h, _, _, args| Ok(h.reindex(args.full)),
        }
        .into(),
        Decl::<SearchHost, At, (), NoArgs> {
            name: name::READ_BODY,
            offers: |at| matches!(at.node, Node::Result(_) | Node::Hit(..)),
            describe: |at| {
                if matches!(at.node, Node::Hit(..)) {
                    "Print the hit's snippet (matched words in **…**) and the indexed text of \
                     the object."
                } else {
                    "Print this search's hits again: rank, score, world path, title."
                }
                .to_string()
            },
            guard: |_, _, _, _| Ok(Vec::new()),
            run: |h, _, at, _| match at.node {
                Node::Hit(id, n) => h.read_hit(id, n),
                Node::Result(id) => h.read_result(id),
                _ => Err(HostError::NotFound(
                    "no operation \"read_body\" here".to_string(),
                )),
            },
        }
        .into(),
    ])
});

fn default_index_dir(mount_path: &str, ctx: &HostContext) -> PathBuf {
    ctx.state_dir.join(format!(
        "search-{}",
        mount_path.trim_matches('/').replace('/', "_")
    ))
}

impl SearchHost {
    pub fn open(settings: SearchSettings, ctx: &HostContext) -> Result<SearchHost, SearchError> {
        let mount_path = ctx.mount.as_str();
        if settings.page_size == 0 {
            return Err(SearchError::PageSize);
        }
        if settings.max_documents == 0 {
            return Err(SearchError::MaxDocuments);
        }
        let sources = match &settings.sources {
            None => ctx.peers.clone(),
            Some(names) => {
                let mut out: Vec<Peer> = Vec::new();
                for name in names {
                    let want = name.trim_matches('/');
                    let Some(peer) = ctx.peers.iter().find(|p| p.path.trim_matches('/') == want)
                    else {
                        let known: Vec<&str> = ctx.peers.iter().map(|p| p.path.as_str()).collect();
                        return Err(SearchError::UnknownSource {
                            name: name.clone(),
                            known: if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            },
                        });
                    };
                    if out.iter().any(|p| p.path == peer.path) {
                        return Err(SearchError::DuplicateSource(name.clone()));
                    }
                    out.push(peer.clone());
                }
                out
            }
        };
        let dir = match &settings.index_dir {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => ctx.launch_dir.join(d),
            None => default_index_dir(mount_path, ctx),
        };
        std::fs::create_dir_all(&dir).map_err(|source| SearchError::IndexDir {
            path: dir.clone(),
            source,
        })?;
        let tantivy_dir = dir.join("tantivy");
        let (engine, fresh) = Engine::open(&tantivy_dir).map_err(|source| SearchError::Index {
            path: tantivy_dir.clone(),
            source,
        })?;
        let db = dir.join("state.db");
        let wrap = |source| SearchError::Database {
            path: db.clone(),
            source,
        };
        // A new index holds nothing, whatever the store remembers.
        let store = Store::open(&db, fresh).map_err(wrap)?;
        let inner = Arc::new(Inner {
            engine,
            store,
            shared: Shared::default(),
            sources,
            hidden: ctx.hidden.clone(),
            page_size: settings.page_size,
            max_documents: settings.max_documents,
        });
        inner.shared.request(false, None);
        let for_worker = Arc::clone(&inner);
        let worker = std::thread::Builder::new()
            .name(format!("wip-search-{}", mount_path.trim_matches('/')))
            .spawn(move || for_worker.indexer().run())
            .map_err(SearchError::Thread)?;
        Ok(SearchHost {
            inner,
            worker: Mutex::new(Some(worker)),
            paths: Paths::new(mount_path),
        })
    }

    fn reference(&self, tail: &str) -> String {
        if tail.is_empty() {
            format!("search://{}", self.paths.mount())
        } else {
            format!("search://{}/{tail}", self.paths.mount())
        }
    }

    fn source_names(&self) -> Vec<String> {
        self.inner.sources.iter().map(|p| p.path.clone()).collect()
    }

    fn search_row(&self, id: i64) -> HostResult<Option<Search>> {
        self.inner.store.search(id)
    }

    /// The node at `path`, which must exist.
    fn existing(&self, path: &[String]) -> HostResult<Node> {
        let missing = || {
            HostError::NotFound(format!(
                "no entry {} in the search host",
                if path.is_empty() {
                    "/".to_string()
                } else {
                    path.join("/")
                }
            ))
        };
        let node = Node::parse(path).ok_or_else(missing)?;
        let exists = match node {
            Node::Root | Node::Results => true,
            Node::Result(id) | Node::Hits(id) => self.search_row(id)?.is_some(),
            Node::Hit(id, n) => self.inner.store.hit(id, n)?.is_some(),
        };
        if exists {
            Ok(node)
        } else {
            Err(missing())
        }
    }

    /// What the indexer has done, for the root's description and results, in words that
    /// say whether a search sees the latest: quick sources are read again before every
    /// search (so they are up to date whenever one runs), slow ones in the background.
    fn index_state(&self) -> String {
        let s = self.inner.shared.lock();
        let queued = s.pending_all || !s.pending_some.is_empty();
        let mut out = match (&s.running, &s.last_start) {
            // How far, and when it will be done, by what the last pass took.
            (Some(started), _) => match &s.last {
                Some(last) if last.read > 0 && !last.took.is_zero() => {
                    let rate = last.read as f64 / last.took.as_secs_f64();
                    let left = last.read.saturating_sub(s.progress) as f64 / rate;
                    format!(
                        "indexing now: {} of about {} documents read in {}, done in about {}",
                        s.progress,
                        last.read,
                        ago(started.elapsed()),
                        ago(Duration::from_secs_f64(left.max(1.0)))
                    )
                }
                _ => format!(
                    "indexing now: {} documents read in {} (the first pass: how many there are is not known yet)",
                    s.progress,
                    ago(started.elapsed())
                ),
            },
            (None, _) if s.finished == 0 => "indexing now (starting)".to_string(),
            // Asked for and not begun: not up to date until it has run.
            (None, Some(_)) if queued => {
                "a pass is about to start: what changed since the last one is not indexed yet".to_string()
            }
            (None, Some(_)) => {
                let (quick, slow): (Vec<&Peer>, Vec<&Peer>) =
                    self.inner.sources.iter().partition(|p| {
                        s.per_source
                            .get(&p.path)
                            .is_some_and(|(_, took)| *took < CHEAP)
                    });
                let mut parts = Vec::new();
                if !quick.is_empty() {
                    parts.push(format!(
                        "up to date: {} {} read again before every search",
                        names(&quick),
                        if quick.len() == 1 { "is" } else { "are" }
                    ));
                }
                for p in slow {
                    let when = match s.per_source.get(&p.path) {
                        Some((at, took)) => {
                            let every = FRESH.max(*took * 10).as_secs().max(1);
                            format!(
                                "{} indexed {} ago, read again in the background at most every {every} s",
                                p.path,
                                ago(at.elapsed())
                            )
                        }
                        None => format!("{} not indexed yet", p.path),
                    };
                    parts.push(when);
                }
                if parts.is_empty() {
                    "up to date (no sources)".to_string()
                } else {
                    parts.join("; ")
                }
            }
            (None, None) => "never indexed".to_string(),
        };
        if let Some(e) = &s.last_error {
            out.push_str(&format!(" · last pass failed: {}", one_line(e, 200)));
        }
        out
    }

    fn root_description(&self) -> HostResult<String> {
        let counts = self.inner.store.counts()?;
        let total: i64 = counts.values().sum();
        let per_source: Vec<String> = self
            .inner
            .sources
            .iter()
            .map(|p| format!("{} {}", p.path, counts.get(&p.path).copied().unwrap_or(0)))
            .collect();
        let from = if per_source.is_empty() {
            "no sources".to_string()
        } else {
            per_source.join(", ")
        };
        Ok(format!(
            "Full-text search (BM25) over {} from {from} · {} · search: echo 'words' > {}",
            plural(total, "document", "documents"),
            self.index_state(),
            self.paths.call::<&str>(&[], "search"),
        ))
    }

    fn result_description(&self, s: &Search) -> String {
        let mut out = format!(
            "Search {} · {:?} · {}",
            s.id,
            s.query,
            plural(s.total, "hit", "hits")
        );
        if s.kept < s.total {
            out.push_str(&format!(", best {} in hits/", s.kept));
        }
        if let Some(src) = &s.source {
            out.push_str(&format!(" · in {src}"));
        }
        out
    }

    /// The world path of a hit's object as the tree shows it: `tracker/issues/42`,
    /// `files/ops~/x.txt`.
    fn hit_target(&self, hit: &Hit) -> String {
        let segments = Self::hit_segments(hit);
        match self.peer(&hit.source) {
            Some(p) => Paths::of(&hit.source, p.host.as_ref()).entry(&segments),
            None => Paths::new(&hit.source).entry(&segments),
        }
    }

    fn peer(&self, source: &str) -> Option<&Peer> {
        self.inner.sources.iter().find(|p| p.path == source)
    }

    fn hit_segments(hit: &Hit) -> Vec<String> {
        if hit.path.is_empty() {
            Vec::new()
        } else {
            hit.path.split('/').map(str::to_string).collect()
        }
    }

    /// The found object's own entry, if it still exists.
    fn hit_entry(&self, hit: &Hit) -> Option<EntryInfo> {
        let peer = self.peer(&hit.source)?;
        peer.host.entry(&Self::hit_segments(hit)).ok().flatten()
    }

    fn hit_info(&self, id: i64, n: i64, hit: &Hit) -> EntryInfo {
        let target = self.hit_entry(hit);
        let gone = if target.is_none() { "gone · " } else { "" };
        // Texts often begin with their title (the tracker's do): do not show it twice.
        let snippet = one_line(&hit.snippet.replace("**", ""), usize::MAX);
        let snippet = snippet
            .strip_prefix(&one_line(&hit.title, usize::MAX))
            .unwrap_or(&snippet);
        let description = format!(
            "{gone}{:.2} · {} · {} · {}",
            hit.score,
            self.hit_target(hit),
            one_line(&hit.title, 100),
            one_line(snippet, DESCRIPTION_SNIPPET),
        );
        let reference = match target {
            Some(info) => info.reference,
            None => self.reference(&format!("results/{id}/hits/{n}")),
        };
        EntryInfo::new(description, reference)
    }

    fn info(&self, node: Node) -> HostResult<Option<EntryInfo>> {
        Ok(Some(match node {
            Node::Root => EntryInfo::new(self.root_description()?, self.reference("")),
            Node::Results => {
                let (_, total) = self.inner.store.searches(0)?;
                EntryInfo::new(
                    format!(
                        "{} so far; each is results/ID/ (not listed here: reach it by id, \
                         as every search's result prints)",
                        plural(total, "search", "searches")
                    ),
                    self.reference("results"),
                )
            }
            Node::Result(id) => {
                let Some(s) = self.search_row(id)? else {
                    return Ok(None);
                };
                let mut info = EntryInfo::new(
                    self.result_description(&s),
                    self.reference(&format!("results/{id}")),
                );
                info.indexable = false;
                info
            }
            Node::Hits(id) => {
                let Some(s) = self.search_row(id)? else {
                    return Ok(None);
                };
                EntryInfo::new(
                    format!(
                        "{} of search {id} ({:?}), best first: hits/1 … hits/{}",
                        plural(s.kept, "hit", "hits"),
                        s.query,
                        s.kept
                    ),
                    self.reference(&format!("results/{id}/hits")),
                )
            }
            Node::Hit(id, n) => {
                let Some(hit) = self.inner.store.hit(id, n)? else {
                    return Ok(None);
                };
                self.hit_info(id, n, &hit)
            }
        }))
    }

    fn list(&self, node: Node) -> HostResult<Vec<Child>> {
        Ok(match node {
            Node::Root => vec![Child {
                name: "results".to_string(),
                info: self
                    .info(Node::Results)?
                    .ok_or_else(|| HostError::Backend("results vanished".to_string()))?,
            }],
            Node::Results => {
                let (rows, _) = self.inner.store.searches(self.inner.page_size)?;
                rows.iter()
                    .map(|s| {
                        let mut info = EntryInfo::new(
                            self.result_description(s),
                            self.reference(&format!("results/{}", s.id)),
                        );
                        info.indexable = false;
                        Child {
                            name: s.id.to_string(),
                            info,
                        }
                    })
                    .collect()
            }
            Node::Result(id) => match self.info(Node::Hits(id))? {
                Some(info) => vec![Child {
                    name: "hits".to_string(),
                    info,
                }],
                None => Vec::new(),
            },
            Node::Hits(id) => self
                .inner
                .store
                .hits(id)?
                .iter()
                .enumerate()
                .map(|(i, hit)| {
                    let n = i as i64 + 1;
                    Child {
                        name: n.to_string(),
                        info: self.hit_info(id, n, hit),
                    }
                })
                .collect(),
            Node::Hit(..) => Vec::new(),
        })
    }

    // ------------------------------------------------------------ ops

    /// The entry `node` as its ops see it.
    fn at(&self, node: Node) -> At {
        At {
            node,
            page_size: self.inner.page_size,
        }
    }

    /// The sources' names and this host's page size in the schemas, which the types
    /// cannot know.
    fn bounded(&self, mut spec: OpSpec) -> OpSpec {
        if let Some(props) = spec.schema["properties"].as_object_mut() {
            if let Some(limit) = props.get_mut("limit") {
                limit["maximum"] = json!(self.inner.page_size);
            }
            if let Some(source) = props.get_mut("source") {
                source["enum"] = json!(self.source_names());
            }
        }
        spec
    }

    fn has_sources(&self) -> Vec<Condition> {
        let names = self.source_names();
        vec![Condition::check(
            "has_sources",
            !names.is_empty(),
            if names.is_empty() {
                "no host to index: list hosts mounted before this one in `sources` \
                 (a setting of the manifest; you cannot change it from here)"
                    .to_string()
            } else {
                format!("indexes {}", names.join(", "))
            },
        )]
    }

    fn run_search(&self, args: SearchArgs) -> HostResult<CallOutcome> {
        let query = args.query.as_str().trim();
        let page = self.inner.page_size;
        let limit = match args.limit {
            None => DEFAULT_LIMIT.min(page),
            Some(n) if (1..=page).contains(&n) => n,
            Some(_) => {
                return Err(HostError::InvalidArgs(format!(
                    "limit: an integer from 1 to {page}"
                )))
            }
        };
        let source = match args.source.as_deref() {
            Some(s) if self.peer(s).is_none() => {
                return Err(HostError::InvalidArgs(format!(
                    "source {s:?}: not an indexed host (indexed: {})",
                    self.source_names().join(", ")
                )))
            }
            other => other,
        };
        self.search(query, limit, source)
    }

    fn reindex(&self, full: bool) -> CallOutcome {
        let n = self.inner.shared.request(full, None);
        let done = self.inner.shared.wait(n, REINDEX_WAIT);
        let s = self.inner.shared.lock();
        let text = match (&s.last, done) {
            (Some(st), true) => format!(
                "indexed: {} read, {} written, {} removed in {} ms{}",
                st.read,
                st.written,
                st.removed,
                st.took.as_millis(),
                s.last_error
                    .as_deref()
                    .map(|e| format!("\nerrors: {e}"))
                    .unwrap_or_default()
            ),
            (None, true) => format!(
                "indexing failed: {}",
                s.last_error.as_deref().unwrap_or("unknown error")
            ),
            (_, false) => format!(
                "still indexing in the background ({} documents read so far); \
                 {} shows when it is done",
                s.progress,
                self.paths.file::<&str>(&[], "description")
            ),
        };
        drop(s);
        CallOutcome::text(text).changed(Vec::new())
    }

    fn read_result(&self, id: i64) -> HostResult<CallOutcome> {
        let hits = self.inner.store.hits(id)?;
        let s = self
            .search_row(id)?
            .ok_or_else(|| HostError::NotFound(format!("no search {id}")))?;
        let mut out = format!("{}\n", self.result_description(&s));
        out.push_str(&self.hit_lines(&hits));
        Ok(CallOutcome::text(out))
    }

    fn read_hit(&self, id: i64, n: i64) -> HostResult<CallOutcome> {
        let hit = self
            .inner
            .store
            .hit(id, n)?
            .ok_or_else(|| HostError::NotFound(format!("no hit {n} in search {id}")))?;
        let mut out = format!(
            "{} — {} (score {:.2})\n\n…{}…\n",
            self.hit_target(&hit),
            hit.title,
            hit.score,
            hit.snippet.trim()
        );
        match self.inner.engine.text_of(&hit.source, &hit.path)? {
            Some(text) => {
                let cut: String = text.chars().take(BODY_CHARS).collect();
                out.push_str("\n--- indexed text");
                if cut.len() < text.len() {
                    out.push_str(&format!(" (first {BODY_CHARS} characters)"));
                }
                out.push_str(" ---\n");
                out.push_str(&cut);
                if !cut.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str("\n(no longer in the index)\n"),
        }
        Ok(CallOutcome::text(out))
    }

    /// `1. 0.87 tracker/issues/42 — Issue #42: …`, one line per hit.
    fn hit_lines(&self, hits: &[Hit]) -> String {
        let mut out = String::new();
        for (i, h) in hits.iter().enumerate() {
            // A file's hit says where in it: the line of its best match.
            let line = match (h.line, self.peer(&h.source)) {
                (Some(n), Some(p)) if p.host.tree().is_some() => format!(" (line {n})"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "{}. {:.2} {}{line} — {}\n",
                i + 1,
                h.score,
                crate::host::names::shown(&self.hit_target(h)),
                crate::host::names::shown(&one_line(&h.title, 120))
            ));
        }
        out
    }

    fn search(&self, query: &str, limit: usize, source: Option<&str>) -> HostResult<CallOutcome> {
        // Refuse bad syntax before waiting for the index.
        let shared = &self.inner.shared;
        self.inner.engine.check(query)?;
        let wanted = match source {
            Some(s) => vec![s.to_string()],
            None => self.source_names(),
        };
        let caught_up = match shared.ensure_fresh(&wanted, CHEAP, FRESH) {
            Some((n, true)) => shared.wait(n, SEARCH_WAIT),
            Some((_, false)) => false,
            None => true,
        };
        let (total, hits) = self.inner.engine.search(query, limit, source)?;
        let id = self.inner.store.add_search(query, source, total, &hits)?;
        let mut out = format!(
            "{} for {query:?}{} (search {id} is {}; each hit is its hits/N, whose ref is the \
             object's)\n",
            plural(total as i64, "hit", "hits"),
            source.map(|s| format!(" in {s}")).unwrap_or_default(),
            self.paths.entry(&["results".to_string(), id.to_string()]),
        );
        if hits.len() < total {
            out.push_str(&format!("best {}:\n", hits.len()));
        }
        out.push_str(&self.hit_lines(&hits));
        if !caught_up {
            out.push_str(&format!(
                "(the index is still catching up: {}; search again for the latest)\n",
                self.index_state()
            ));
        }
        let mut outcome = CallOutcome::text(out)
            .discovered(vec!["results".to_string(), id.to_string()])
            .changed(vec!["results".to_string()]);
        // The hits' own entries, where they live: printed, linked and remembered by the
        // runtime like anything a call discovers.
        outcome.found_elsewhere = hits.iter().map(|h| self.hit_target(h)).collect();
        Ok(outcome)
    }
}

impl Drop for SearchHost {
    fn drop(&mut self) {
        self.inner.shared.shutdown();
        let handle = crate::hosts::lock(&self.worker).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Host for SearchHost {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        match Node::parse(path) {
            Some(node) => self.info(node),
            None => Ok(None),
        }
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        let node = self.existing(path)?;
        self.list(node)
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        let at = self.at(self.existing(path)?);
        Ok(OPS
            .specs(&at)
            .into_iter()
            .map(|s| self.bounded(s))
            .collect())
    }

    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard> {
        let at = self.at(self.existing(path)?);
        OPS.guard(self, &(), &at, op, args)
    }

    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        _caller: &Caller,
    ) -> HostResult<CallOutcome> {
        let at = self.at(self.existing(path)?);
        OPS.call(self, &(), &at, op, args)
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        let prefix = self.reference("");
        let Some(rest) = reference.trim().strip_prefix(&prefix) else {
            return Vec::new();
        };
        let segs: Vec<String> = match rest.strip_prefix('/') {
            Some(r) => r.split('/').map(str::to_string).collect(),
            None if rest.is_empty() => Vec::new(),
            None => return Vec::new(),
        };
        // Hits carry their objects' refs: only our own entries resolve here.
        match self.existing(&segs) {
            Ok(Node::Hit(..)) | Err(_) => Vec::new(),
            Ok(_) => vec![segs],
        }
    }

    /// Searches wait for indexing at most a few seconds: bounded.
    fn bounded_calls(&self) -> bool {
        true
    }

    /// The root's description follows the indexer; results are added by calls.
    fn cache_ttl(&self) -> Duration {
        Duration::from_secs(1)
    }
}

/// Source paths in words: `tracker`, `tracker and files`, `a, b and c`.
fn names(peers: &[&Peer]) -> String {
    let all: Vec<&str> = peers.iter().map(|p| p.path.as_str()).collect();
    match all.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A past time span in words: `12 s`, `17 min`, `3 h`.
fn ago(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h", s / 3600),
    }
}
