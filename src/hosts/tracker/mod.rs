//! The tracker host: an embedded issue tracker (issues, pull requests, comments, checks,
//! reviews, labels, users) on an SQLite file, or on PostgreSQL when its `database` is a
//! `postgresql://…` URL (one schema and one set of queries for both, see `store`), seeded
//! with a small demo project on first run.
//!
//! Items, comments, reviews and checks have a `body` (their text; an item's and your
//! comments' are writable through `edit_body`), and every entry its last change as `mtime`.
//!
//! Tree, host-relative: `issues/N/comments/K`, `pulls/N/{comments,checks,reviews}/…`,
//! `labels/NAME`, `users/NAME`. Issues and pull requests share one number sequence. Every call
//! re-checks its guard inside one write transaction that no other call runs beside (SQLite's
//! `BEGIN IMMEDIATE`; on PostgreSQL an advisory lock), so a guard holds atomically with the
//! change it allows, across threads, processes and mounts sharing the database.

mod body;
mod db;
mod documents;
mod guards;
mod ops;
mod seed;
mod store;
#[cfg(test)]
mod tests;
mod view;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::Connection;
use serde::Deserialize;
use serde_json::Value;

use crate::host::identity::Identity;
use crate::host::names::{canonical_number, Paths};
use crate::host::{
    Body, CallOutcome, Caller, Child, DocumentPage, EntryInfo, Guard, Host, HostError, HostResult,
    OpSpec,
};
use crate::hosts::HostContext;
use crate::state::pg::{is_postgres_url, redact_url, SharedDb};
use ops::{Here, OPS};
use store::Store;

/// The `[[host]]` table of a tracker, minus `kind` and `path`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TrackerSettings {
    /// What a new database is filled with: `demo` (the demo project) or `none` (empty).
    #[serde(default = "default_seed")]
    pub seed: String,
    /// The SQLite file; default `<state_dir>/tracker-<mount path, / as _>.db`. `:memory:`
    /// keeps everything in memory (tests). A `postgresql://…` URL puts the tracker on
    /// PostgreSQL, shared by every mount that names the same database.
    #[serde(default)]
    pub database: Option<PathBuf>,
    /// Synthetic issues (with 0–3 comments each) added when seeding, for benchmarks.
    #[serde(default)]
    pub extra_issues: u64,
    /// Bound on every listing (issues, comments, relation results).
    #[serde(default = "default_page_size")]
    pub page_size: usize,
}

fn default_seed() -> String {
    "demo".to_string()
}

fn default_page_size() -> usize {
    500
}

impl Default for TrackerSettings {
    fn default() -> Self {
        TrackerSettings {
            seed: default_seed(),
            database: None,
            extra_issues: 0,
            page_size: default_page_size(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrackerError {
    #[error("unknown seed {0:?} (known: demo, none)")]
    UnknownSeed(String),
    #[error("page_size must be at least 1")]
    PageSize,
    #[error("cannot create state directory {path}: {source}")]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tracker database {path}: {source}")]
    Database {
        path: String,
        source: rusqlite::Error,
    },
    #[error("tracker database {path}: {source}")]
    Setup { path: String, source: HostError },
    #[error("{0}")]
    Unreachable(String),
}

/// Where the tracker's data lives.
enum Engine {
    /// One connection behind a mutex: SQLite serialises writers anyway, and the mutex
    /// keeps each call's transaction to itself.
    Sqlite(Mutex<Store>),
    /// A pool: reads and calls run side by side, calls serialised by the database.
    Postgres(Arc<SharedDb>),
}

/// The tracker host.
pub struct TrackerHost {
    engine: Engine,
    /// The database as texts show it (a URL's password redacted).
    shown: String,
    /// Where its entries are in the world: every path it prints is built here.
    paths: Paths,
    /// The project's name, first segment of every ref.
    project: String,
    /// Who the mount acts as; the role decides permissions.
    me: Identity,
    page_size: usize,
}

/// Which of the two kinds of numbered item an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
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

    fn db(self) -> &'static str {
        match self {
            Kind::Issue => "issue",
            Kind::Pull => "pull",
        }
    }

    fn from_db(s: &str) -> Option<Kind> {
        match s {
            "issue" => Some(Kind::Issue),
            "pull" => Some(Kind::Pull),
            _ => None,
        }
    }
}

/// An entry of the tree, parsed from a host-relative path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Root,
    Issues,
    Pulls,
    Labels,
    Users,
    Item(Kind, i64),
    Comments(Kind, i64),
    Comment(Kind, i64, i64),
    Checks(i64),
    Check(i64, String),
    Reviews(i64),
    Review(i64, i64),
    Label(String),
    User(String),
}

impl Node {
    /// Whether the node has a body (its text, a check's log); collections have none.
    fn has_body(&self) -> bool {
        matches!(
            self,
            Node::Item(..) | Node::Comment(..) | Node::Review(..) | Node::Check(..)
        )
    }

    fn parse(path: &[String]) -> Option<Node> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let kind = |s: &str| match s {
            "issues" => Some(Kind::Issue),
            "pulls" => Some(Kind::Pull),
            _ => None,
        };
        Some(match p.as_slice() {
            [] => Node::Root,
            ["issues"] => Node::Issues,
            ["pulls"] => Node::Pulls,
            ["labels"] => Node::Labels,
            ["users"] => Node::Users,
            ["labels", name] => Node::Label(name.to_string()),
            ["users", name] => Node::User(name.to_string()),
            [k, n] => Node::Item(kind(k)?, canonical_number(n)?),
            [k, n, "comments"] => Node::Comments(kind(k)?, canonical_number(n)?),
            [k, n, "comments", c] => {
                Node::Comment(kind(k)?, canonical_number(n)?, canonical_number(c)?)
            }
            ["pulls", n, "checks"] => Node::Checks(canonical_number(n)?),
            ["pulls", n, "checks", name] => Node::Check(canonical_number(n)?, name.to_string()),
            ["pulls", n, "reviews"] => Node::Reviews(canonical_number(n)?),
            ["pulls", n, "reviews", r] => Node::Review(canonical_number(n)?, canonical_number(r)?),
            _ => return None,
        })
    }

    fn path(&self) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self {
            Node::Root => Vec::new(),
            Node::Issues => s(&["issues"]),
            Node::Pulls => s(&["pulls"]),
            Node::Labels => s(&["labels"]),
            Node::Users => s(&["users"]),
            Node::Item(k, n) => vec![k.dir().into(), n.to_string()],
            Node::Comments(k, n) => vec![k.dir().into(), n.to_string(), "comments".into()],
            Node::Comment(k, n, c) => vec![
                k.dir().into(),
                n.to_string(),
                "comments".into(),
                c.to_string(),
            ],
            Node::Checks(n) => vec!["pulls".into(), n.to_string(), "checks".into()],
            Node::Check(n, name) => {
                vec!["pulls".into(), n.to_string(), "checks".into(), name.clone()]
            }
            Node::Reviews(n) => vec!["pulls".into(), n.to_string(), "reviews".into()],
            Node::Review(n, r) => vec![
                "pulls".into(),
                n.to_string(),
                "reviews".into(),
                r.to_string(),
            ],
            Node::Label(name) => vec!["labels".into(), name.clone()],
            Node::User(name) => vec!["users".into(), name.clone()],
        }
    }
}

/// What a failed SQLite statement was doing, in its error (`.or_failed(DB)`).
const DB: &str = "tracker database";

/// The SQLite file (or `:memory:`), ready for the schema.
fn open_sqlite(file: &Path, shown: &str) -> Result<Connection, TrackerError> {
    let wrap = |source: rusqlite::Error| TrackerError::Database {
        path: shown.to_string(),
        source,
    };
    let mut conn = if file.as_os_str() == ":memory:" {
        Connection::open_in_memory().map_err(wrap)?
    } else {
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| TrackerError::StateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        Connection::open(file).map_err(wrap)?
    };
    // Other processes (a second daemon, a test) and the tracker's own snapshot readers
    // may share the file: wait rather than fail, in short steps.
    crate::sqlite::wait_when_busy(&mut conn, Duration::from_secs(10)).map_err(wrap)?;
    // Every query is a cached statement; the default cache (16) would re-prepare.
    conn.set_prepared_statement_cache_capacity(256);
    // Plans stay as prepared: SQLite otherwise re-prepares a cached statement whenever a
    // parameter changes to or from 0 or 1 (issue #1, a boolean), a parse per query.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(wrap)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(wrap)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(wrap)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(wrap)?;
    Ok(conn)
}

fn default_database(mount_path: &str, state_dir: &Path) -> PathBuf {
    state_dir.join(format!("tracker-{}.db", mount_path.replace('/', "_")))
}

impl TrackerHost {
    pub fn open(settings: TrackerSettings, ctx: &HostContext) -> Result<TrackerHost, TrackerError> {
        let mount_path = ctx.mount.as_str();
        let seed = match settings.seed.as_str() {
            "demo" => seed::Seed::Demo,
            "none" => seed::Seed::None,
            other => return Err(TrackerError::UnknownSeed(other.to_string())),
        };
        if settings.page_size == 0 {
            return Err(TrackerError::PageSize);
        }
        let file = settings
            .database
            .clone()
            .unwrap_or_else(|| default_database(mount_path, &ctx.state_dir));
        let raw = file.display().to_string();
        let shown = redact_url(&raw);
        let (engine, store) = if is_postgres_url(&raw) {
            let db = SharedDb::connect_as(&raw, "tracker database")
                .map_err(|e| TrackerError::Unreachable(e.to_string()))?;
            let db = Arc::new(db);
            let store = Store::pg(&db).map_err(|source| TrackerError::Setup {
                path: shown.clone(),
                source,
            })?;
            (Some(db), store)
        } else {
            (None, Store::Lite(open_sqlite(&file, &shown)?))
        };

        // Schema, seed and the identity's user in one write transaction (which other
        // openers and calls wait for): a crash or a concurrent opener never sees half a
        // project, and mounts starting together seed once.
        let project = store
            .write(&store::Lock::Whole, None, |tx| {
                db::create_schema(tx)?;
                if db::project_name(tx)?.is_none() {
                    seed::seed(tx, seed, settings.extra_issues, &ctx.identity)?;
                    if tx.engine() == store::Engine::Postgres {
                        // PostgreSQL plans by statistics, which a fresh table lacks until
                        // autovacuum comes by: listings would sort instead of walking
                        // the index.
                        tx.batch("ANALYZE items")?;
                    }
                }
                db::ensure_user(tx, &ctx.identity)?;
                Ok(db::project_name(tx)?.unwrap_or_else(|| "demo".to_string()))
            })
            .map_err(|source| TrackerError::Setup {
                path: shown.clone(),
                source,
            })?;

        Ok(TrackerHost {
            engine: match engine {
                Some(db) => Engine::Postgres(db),
                None => Engine::Sqlite(Mutex::new(store)),
            },
            shown,
            paths: Paths::new(mount_path),
            project,
            me: ctx.identity.clone(),
            page_size: settings.page_size,
        })
    }

    /// Run `f` on the database. On SQLite, in one read transaction (see
    /// `Store::snapshot`); on PostgreSQL outside one (BEGIN and ROLLBACK would double the
    /// round trips of a lookup, and a read that spans two statements sees committed
    /// states only, READ COMMITTED).
    fn read<T>(&self, f: impl Fn(&Store) -> HostResult<T>) -> HostResult<T> {
        self.connection(|conn| conn.snapshot(&f))
    }

    /// Run `f` on a connection for reads (on PostgreSQL, from the pool calls never hold;
    /// a read that met a connection cut before it, as after a restart, is read again on
    /// another: it changes nothing).
    fn connection<T>(&self, f: impl Fn(&Store) -> HostResult<T>) -> HostResult<T> {
        match &self.engine {
            // A call that panicked rolled its transaction back on unwind.
            Engine::Sqlite(conn) => f(&crate::hosts::lock(conn)),
            Engine::Postgres(db) => {
                let mut tries = 0;
                loop {
                    let store = Store::pg_read(db)?;
                    match f(&store) {
                        Err(_) if store.is_closed() && tries < crate::state::pg::READ_RETRIES => {
                            tries += 1
                        }
                        done => return done,
                    }
                }
            }
        }
    }

    /// Run `f` in a call's write transaction that first locks `lock` (see `store`); `run`
    /// is the run record it writes.
    fn write<T>(
        &self,
        lock: &store::Lock,
        run: Option<&str>,
        f: impl FnOnce(&Store) -> HostResult<T>,
    ) -> HostResult<T> {
        match &self.engine {
            Engine::Sqlite(conn) => crate::hosts::lock(conn).write(lock, run, f),
            Engine::Postgres(db) => Store::pg(db)?.write(lock, run, f),
        }
    }

    /// Which engine the tracker is on, for its root's description (the SQLite file is in
    /// `.wip/config`; a URL is short and tells mounts apart, so it is shown, redacted).
    fn engine_words(&self) -> String {
        match &self.engine {
            Engine::Sqlite(_) => "SQLite".to_string(),
            Engine::Postgres(_) => format!("PostgreSQL {}", self.shown),
        }
    }

    /// The node at `path`, which must exist.
    fn existing(&self, conn: &Store, path: &[String]) -> HostResult<Node> {
        match Node::parse(path) {
            Some(node) if db::exists(conn, &node)? => Ok(node),
            _ => Err(HostError::NotFound(format!(
                "no entry {} in the tracker",
                self.paths.entry(path)
            ))),
        }
    }

    fn reference(&self, node: &Node) -> String {
        let path = node.path();
        if path.is_empty() {
            format!("tracker://{}", self.project)
        } else {
            format!("tracker://{}/{}", self.project, path.join("/"))
        }
    }
}

impl Host for TrackerHost {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        self.read(|conn| {
            if !db::exists(conn, &node)? {
                return Ok(None);
            }
            let info = self.info(conn, &node)?;
            Ok(Some(info.modified(self.modified_in(conn, &node)?)))
        })
    }

    fn exists(&self, path: &[String]) -> HostResult<bool> {
        let Some(node) = Node::parse(path) else {
            return Ok(false);
        };
        self.read(|conn| db::exists(conn, &node))
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        self.read(|conn| {
            let node = self.existing(conn, path)?;
            self.list(conn, &node)
        })
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        self.read(|conn| {
            let node = self.existing(conn, path)?;
            Ok(OPS.specs(&Here::unread(node)))
        })
    }

    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard> {
        self.read(|conn| {
            let here = Here::read(conn, self.existing(conn, path)?)?;
            OPS.guard(self, conn, &here, op, args)
        })
    }

    /// A merge closes the open issues the pull request fixes.
    fn implied_ops(&self, path: &[String], op: &str) -> HostResult<Vec<(Vec<String>, String)>> {
        let (Some(Node::Item(Kind::Pull, n)), "merge") = (Node::parse(path), op) else {
            return Ok(Vec::new());
        };
        self.read(|conn| {
            let mut out = Vec::new();
            for issue in db::fixes_of(conn, n)? {
                if db::item(conn, issue)?.is_some_and(|it| it.kind == Kind::Issue && it.is_open()) {
                    out.push((Node::Item(Kind::Issue, issue).path(), "close".to_string()));
                }
            }
            Ok(out)
        })
    }

    fn guards(&self, path: &[String], ops: &[&str]) -> Option<HostResult<Vec<Guard>>> {
        Some(self.read(|conn| {
            // The item is read once for all of the entry's guards.
            let here = Here::read(conn, self.existing(conn, path)?)?;
            ops.iter()
                .map(|op| OPS.guard(self, conn, &here, op, None))
                .collect()
        }))
    }

    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        if OPS.reads_only(op) {
            // Nothing to commit, so no write transaction and no run record: a run cut off
            // by a crash settles as `not_run`, which for a read is the truth.
            return self.read(|conn| {
                let here = Here::read(conn, self.existing(conn, path)?)?;
                OPS.call(self, conn, &here, op, args)
            });
        }
        let lock = match Node::parse(path) {
            Some(Node::Item(Kind::Pull, n)) => store::Lock::PullAndFixes(n),
            Some(
                Node::Item(_, n)
                | Node::Comments(_, n)
                | Node::Comment(_, n, _)
                | Node::Checks(n)
                | Node::Check(n, _)
                | Node::Reviews(n)
                | Node::Review(n, _),
            ) => store::Lock::Item(n),
            _ => store::Lock::Project,
        };
        let run = Some(caller.run.as_str()).filter(|r| !r.is_empty());
        self.write(&lock, run, |tx| {
            let here = Here::read(tx, self.existing(tx, path)?)?;
            let out = OPS.call(self, tx, &here, op, args)?;
            // In the call's transaction: the run committed exactly when its change did.
            if !caller.run.is_empty() {
                db::record_run(tx, &caller.run, &out.result)?;
            }
            Ok(out)
        })
    }

    /// Every call keeps its run's name in `wip_runs` in its own transaction.
    fn settle(
        &self,
        _path: &[String],
        _op: &str,
        run: &str,
    ) -> HostResult<Option<crate::host::Settled>> {
        use crate::host::Settled;
        let found = self.read(|conn| db::run_record(conn, run))?;
        Ok(Some(found.map_or(Settled::NotRun, Settled::Done)))
    }

    fn modified(&self, path: &[String]) -> HostResult<Option<std::time::SystemTime>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        self.read(|conn| self.modified_in(conn, &node))
    }

    fn body(&self, path: &[String]) -> HostResult<Option<Body>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        // Collections have no body: a listing of one asks nothing of the database.
        if !node.has_body() {
            return Ok(None);
        }
        self.read(|conn| {
            // An item's own read says whether it exists (`body_in` checks its kind).
            if !matches!(node, Node::Item(..)) && !db::exists(conn, &node)? {
                return Ok(None);
            }
            self.body_in(conn, &node)
        })
    }

    /// A listing of an item reads its body and children in one snapshot, its existence
    /// checked once.
    fn body_and_children(
        &self,
        path: &[String],
    ) -> HostResult<(HostResult<Option<Body>>, Vec<Child>)> {
        self.read(|conn| {
            let node = self.existing(conn, path)?;
            let body = if node.has_body() {
                self.body_in(conn, &node)
            } else {
                Ok(None)
            };
            Ok((body, self.list(conn, &node)?))
        })
    }

    /// SQLite with a 10 s busy timeout, PostgreSQL with a 10 s lock timeout: every call
    /// ends well within the call timeout.
    fn bounded_calls(&self) -> bool {
        true
    }

    // `OPS.call` checks the guard inside the call's transaction and answers Blocked.
    fn checks_guard_in_call(&self) -> bool {
        true
    }

    /// One document per issue and pull request, by number (see `documents`).
    fn documents(&self, cursor: Option<&str>, limit: usize) -> HostResult<DocumentPage> {
        self.documents_page(cursor, limit)
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        self.read(|conn| Ok(self.resolve_in(conn, reference.trim())))
            .unwrap_or_default()
    }
}

impl TrackerHost {
    fn resolve_in(&self, conn: &Store, reference: &str) -> Vec<Vec<String>> {
        let prefix = format!("tracker://{}", self.project);
        let Some(rest) = reference.strip_prefix(&prefix) else {
            return Vec::new();
        };
        let rest = rest.trim_end_matches('/');
        let segs: Vec<String> = if rest.is_empty() {
            Vec::new()
        } else if let Some(r) = rest.strip_prefix('/') {
            r.split('/').map(str::to_string).collect()
        } else {
            // `tracker://demoX/...` is another project.
            return Vec::new();
        };
        let Some(mut node) = Node::parse(&segs) else {
            return Vec::new();
        };
        // A number is one object whether the ref says issues/ or pulls/: send it where it lives.
        let number = match &node {
            Node::Item(_, n) | Node::Comments(_, n) | Node::Comment(_, n, _) => Some(*n),
            _ => None,
        };
        if let Some(n) = number {
            if let Ok(Some(kind)) = db::item_kind(conn, n) {
                node = match node {
                    Node::Item(_, n) => Node::Item(kind, n),
                    Node::Comments(_, n) => Node::Comments(kind, n),
                    Node::Comment(_, n, c) => Node::Comment(kind, n, c),
                    other => other,
                };
            }
        }
        match db::exists(conn, &node) {
            Ok(true) => vec![node.path()],
            _ => Vec::new(),
        }
    }
}
