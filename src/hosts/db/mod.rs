//! The db host: any SQLite database as a browsable, queryable world.
//!
//! Tree, host-relative: `tables/T/rows/K` (K the row's key, see `keys`), `views/V/rows/N`
//! (1-based positions) and `queries/ID/rows/N` (results of the `query` op, reachable by path,
//! never listed). Everything is read lazily: opening reads nothing but the schema header, row
//! counts are taken when a description is read, listings are bounded by `page_size`, and the
//! schema is re-read at every look so changes made by another process show up at once.
//!
//! Connections: `main` (read-only, or read-write on a `writable` mount) serves browsing and
//! the write ops; a small pool of `readers` (`READERS`), each opened `SQLITE_OPEN_READ_ONLY`
//! with `query_only` and an authorizer that allows nothing but reading, runs every piece of
//! SQL a caller writes (`query`, the `where` of `count` and `export`), so read-only is
//! enforced by SQLite, never by looking at the text, and queries run side by side; `store`
//! is a small database in the state directory that keeps the queries, so `queries/ID`
//! survives a remount. A progress handler interrupts every statement at the host's budget
//! (below the world's call timeout) and a busy timeout bounds every lock wait. Queries can
//! still take that long, so calls run on the runtime's workers, never a FUSE thread.

mod documents;
pub(crate) mod keys;
mod ops;
mod query;
mod schema;
#[cfg(test)]
mod tests;
mod view;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde::Deserialize;
use serde_json::Value;

use crate::host::names::{canonical_number, Paths};
use crate::host::{
    Body, CallOutcome, Caller, Child, DocumentPage, EntryInfo, Guard, Host, HostError, HostResult,
    OpSpec,
};
use crate::hosts::{lock, HostContext};

/// How long a lock on the database may be waited for.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one host call may keep SQLite busy at most; less when the world's call
/// timeout is shorter (the budget stays below it, so the words are ours).
const STATEMENT_BUDGET: Duration = Duration::from_secs(20);
/// Read-only connections for callers' SQL: this many queries run at once, more wait.
const READERS: usize = 4;

/// The `[[host]]` table of a db host (minus `kind` and `path`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DbSettings {
    /// The SQLite file. Relative paths are relative to the launch directory; `{state}`
    /// expands to the state directory (`{state}/tracker-tracker.db`). It must exist.
    pub file: String,
    /// Offer `insert`, `update` and `delete` (default false: a read-only mount, opened with
    /// `SQLITE_OPEN_READ_ONLY`).
    #[serde(default)]
    pub writable: bool,
    /// How many rows (and tables, and referencing rows) a listing shows.
    #[serde(default = "default_page_size")]
    pub page_size: usize,
    /// Tables whose rows are offered to the world's search index (default: none).
    #[serde(default)]
    pub search: Vec<String>,
    /// Title columns by table (`titles = { Track = "Name" }`): with titled names on, a
    /// table's rows list as `KEY TITLE` (`rows/1 For Those About To Rock`).
    #[serde(default)]
    pub titles: std::collections::BTreeMap<String, String>,
}

fn default_page_size() -> usize {
    200
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("page_size must be at least 1")]
    PageSize,
    #[error("database file {0} does not exist (a db host never creates one)")]
    Missing(PathBuf),
    #[error("database file {path}: {message}")]
    Database { path: PathBuf, message: String },
    #[error("cannot create state directory {path}: {source}")]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("query store {path}: {source}")]
    Store {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// A deadline for the statements of one call, checked by SQLite's progress handler.
#[derive(Clone)]
struct Deadline {
    base: Instant,
    /// Milliseconds after `base`; 0 = none.
    at: Arc<AtomicU64>,
    /// How long each call may run, in milliseconds, shared by the host's connections.
    budget_ms: Arc<AtomicU64>,
}

impl Deadline {
    fn new(budget_ms: &Arc<AtomicU64>) -> Self {
        Deadline {
            base: Instant::now(),
            at: Arc::new(AtomicU64::new(0)),
            budget_ms: Arc::clone(budget_ms),
        }
    }

    fn arm(&self) {
        let at = self.base.elapsed().as_millis() as u64 + self.budget_ms.load(Ordering::Relaxed);
        self.at.store(at, Ordering::Relaxed);
    }

    fn install(&self, conn: &mut Connection) -> rusqlite::Result<()> {
        let d = self.clone();
        conn.progress_handler(
            10_000,
            Some(move || {
                let at = d.at.load(Ordering::Relaxed);
                at != 0 && d.base.elapsed().as_millis() as u64 > at
            }),
        )
    }
}

/// A read-only connection for callers' SQL, with its own deadline and the words of what
/// its authorizer refused last.
pub(super) struct Reader {
    conn: Connection,
    deadline: Deadline,
    denied: Arc<Mutex<Option<String>>>,
}

impl Reader {
    fn open(file: &Path, budget_ms: &Arc<AtomicU64>) -> rusqlite::Result<Reader> {
        let mut conn = Connection::open_with_flags(
            file,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update(None, "query_only", "ON")?;
        let deadline = Deadline::new(budget_ms);
        deadline.install(&mut conn)?;
        let denied = Arc::new(Mutex::new(None));
        query::install_authorizer(&mut conn, denied.clone())?;
        Ok(Reader {
            conn,
            deadline,
            denied,
        })
    }

    /// What the authorizer refused last.
    pub(super) fn denied(&self) -> Option<String> {
        lock(&self.denied).take()
    }
}

impl std::ops::Deref for Reader {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// A reader taken from the pool; it goes back when dropped.
pub(super) struct ReaderGuard<'h> {
    host: &'h DbHost,
    reader: Option<Reader>,
}

impl std::ops::Deref for ReaderGuard<'_> {
    type Target = Reader;
    fn deref(&self) -> &Reader {
        // Always Some until drop.
        self.reader.as_ref().expect("reader taken before drop")
    }
}

impl Drop for ReaderGuard<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.reader.take() {
            let mut pool = lock(&self.host.readers);
            pool.push(r);
            self.host.reader_free.notify_one();
        }
    }
}

/// A SQLite database mounted as a host.
pub struct DbHost {
    /// World paths of its entries (`db/chinook/tables/Track/rows/1`), for results.
    paths: Paths,
    file: PathBuf,
    /// The file's name, first part of every ref (`sqlite://chinook.db/Track/1`).
    file_name: String,
    writable: bool,
    page_size: usize,
    /// Tables offered to search (`DbSettings::search`).
    search: Vec<String>,
    /// Title columns by table (`DbSettings::titles`).
    titles: std::collections::BTreeMap<String, String>,
    main: Mutex<Connection>,
    main_deadline: Deadline,
    readers: Mutex<Vec<Reader>>,
    reader_free: std::sync::Condvar,
    /// How long one statement may run, in milliseconds (below the world's call timeout).
    budget_ms: Arc<AtomicU64>,
    store: Mutex<Connection>,
}

/// An entry of the tree, parsed from a path (names decoded, keys still raw).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Root,
    Tables,
    Views,
    Queries,
    Table(String),
    TableRows(String),
    Row(String, String),
    View(String),
    ViewRows(String),
    ViewRow(String, u64),
    Query(i64),
    QueryRows(i64),
    QueryRow(i64, u64),
}

impl Node {
    fn parse(path: &[String]) -> Option<Node> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let name = keys::decode_name;
        // Numbers in paths have one spelling.
        let number = canonical_number::<u64>;
        let id = canonical_number::<i64>;
        Some(match p.as_slice() {
            [] => Node::Root,
            ["tables"] => Node::Tables,
            ["views"] => Node::Views,
            ["queries"] => Node::Queries,
            ["tables", t] => Node::Table(name(t)?),
            ["tables", t, "rows"] => Node::TableRows(name(t)?),
            ["tables", t, "rows", k] => Node::Row(name(t)?, k.to_string()),
            ["views", v] => Node::View(name(v)?),
            ["views", v, "rows"] => Node::ViewRows(name(v)?),
            ["views", v, "rows", n] => Node::ViewRow(name(v)?, number(n)?),
            ["queries", q] => Node::Query(id(q)?),
            ["queries", q, "rows"] => Node::QueryRows(id(q)?),
            ["queries", q, "rows", n] => Node::QueryRow(id(q)?, number(n)?),
            _ => return None,
        })
    }

    fn path(&self) -> Vec<String> {
        let e = keys::encode_name;
        let v = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Node::Root => Vec::new(),
            Node::Tables => v(&["tables"]),
            Node::Views => v(&["views"]),
            Node::Queries => v(&["queries"]),
            Node::Table(t) => v(&["tables", &e(t)]),
            Node::TableRows(t) => v(&["tables", &e(t), "rows"]),
            Node::Row(t, k) => v(&["tables", &e(t), "rows", k]),
            Node::View(n) => v(&["views", &e(n)]),
            Node::ViewRows(n) => v(&["views", &e(n), "rows"]),
            Node::ViewRow(n, i) => v(&["views", &e(n), "rows", &i.to_string()]),
            Node::Query(id) => v(&["queries", &id.to_string()]),
            Node::QueryRows(id) => v(&["queries", &id.to_string(), "rows"]),
            Node::QueryRow(id, n) => v(&["queries", &id.to_string(), "rows", &n.to_string()]),
        }
    }
}

/// SQLite's own words for an error (without rusqlite's wrapping).
fn sqlite_words(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(err, Some(msg)) => {
            if msg.is_empty() {
                err.to_string()
            } else {
                msg.clone()
            }
        }
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

fn error_code(e: &rusqlite::Error) -> Option<ErrorCode> {
    match e {
        rusqlite::Error::SqliteFailure(err, _) => Some(err.code),
        rusqlite::Error::SqlInputError { error, .. } => Some(error.code),
        _ => None,
    }
}

/// Failures of our own statements: timeouts and locks are `TimedOut`, the rest `Failed`
/// with SQLite's error as the source.
fn db_err(e: rusqlite::Error) -> HostError {
    match error_code(&e) {
        Some(ErrorCode::OperationInterrupted) => HostError::TimedOut(
            "the statement ran longer than this host's time budget and was interrupted".into(),
        ),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => HostError::TimedOut(format!(
            "{} (waited {} s for another connection's lock)",
            sqlite_words(&e),
            BUSY_TIMEOUT.as_secs()
        )),
        _ => HostError::failed("database", e),
    }
}

/// Failures of SQL or values a caller wrote: refusals are `Forbidden`, mistakes and
/// constraint violations `InvalidArgs`, always with SQLite's words.
fn user_err(e: rusqlite::Error) -> HostError {
    let words = sqlite_words(&e);
    match (&e, error_code(&e)) {
        (rusqlite::Error::MultipleStatement, _) => {
            HostError::Forbidden("one statement per query".to_string())
        }
        (_, Some(ErrorCode::AuthorizationForStatementDenied | ErrorCode::ReadOnly)) => {
            HostError::Forbidden(format!("{words} (queries run on a read-only connection)"))
        }
        (
            _,
            Some(ErrorCode::Unknown | ErrorCode::ConstraintViolation | ErrorCode::TypeMismatch),
        )
        | (_, Some(ErrorCode::ParameterOutOfRange | ErrorCode::TooBig)) => {
            HostError::InvalidArgs(words)
        }
        (
            rusqlite::Error::InvalidParameterCount(..)
            | rusqlite::Error::InvalidParameterName(_)
            | rusqlite::Error::Empty,
            _,
        ) => HostError::InvalidArgs(words),
        _ => db_err(e),
    }
}

/// `{state}` → the state directory; relative → the launch directory.
fn database_path(file: &str, ctx: &HostContext) -> PathBuf {
    let expanded = file.replace("{state}", &ctx.state_dir.display().to_string());
    let p = PathBuf::from(expanded);
    if p.is_absolute() {
        p
    } else {
        ctx.launch_dir.join(p)
    }
}

fn store_path(mount_path: &str, state_dir: &Path) -> PathBuf {
    state_dir.join(format!(
        "db-{}-queries.db",
        mount_path.trim_matches('/').replace('/', "_")
    ))
}

impl DbHost {
    pub fn open(settings: DbSettings, ctx: &HostContext) -> Result<DbHost, DbError> {
        let mount_path = ctx.mount.as_str();
        if settings.page_size == 0 {
            return Err(DbError::PageSize);
        }
        let file = database_path(&settings.file, ctx);
        if !file.is_file() {
            return Err(DbError::Missing(file));
        }
        let wrap = |e: rusqlite::Error| DbError::Database {
            path: file.clone(),
            message: sqlite_words(&e),
        };
        // Never SQLITE_OPEN_CREATE: a missing file is an error above, never a new database.
        let flags = if settings.writable {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let mut main = Connection::open_with_flags(&file, flags).map_err(wrap)?;
        main.busy_timeout(BUSY_TIMEOUT).map_err(wrap)?;
        main.pragma_update(None, "foreign_keys", "ON")
            .map_err(wrap)?;
        // Reading the schema header is all we do at open: it says whether this is a database.
        main.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map_err(wrap)?;
        for name in &settings.search {
            if schema::table(&main, name).ok().flatten().is_none() {
                return Err(DbError::Database {
                    path: file.clone(),
                    message: format!("search names the table {name:?}, which does not exist"),
                });
            }
        }
        for (table, column) in &settings.titles {
            let t =
                schema::table(&main, table)
                    .ok()
                    .flatten()
                    .ok_or_else(|| DbError::Database {
                        path: file.clone(),
                        message: format!("titles names the table {table:?}, which does not exist"),
                    })?;
            if !t.columns.iter().any(|c| &c.name == column) {
                let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
                return Err(DbError::Database {
                    path: file.clone(),
                    message: format!(
                        "titles names the column {column:?} of table {table:?}, which has none (its columns: {})",
                        names.join(", ")
                    ),
                });
            }
        }
        let budget_ms = Arc::new(AtomicU64::new(
            ctx.wait_within_call(None)
                .unwrap_or(1_000)
                .min(STATEMENT_BUDGET.as_millis() as u64),
        ));
        let main_deadline = Deadline::new(&budget_ms);
        main_deadline.install(&mut main).map_err(wrap)?;

        let readers = (0..READERS)
            .map(|_| Reader::open(&file, &budget_ms))
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(wrap)?;

        std::fs::create_dir_all(&ctx.state_dir).map_err(|source| DbError::StateDir {
            path: ctx.state_dir.clone(),
            source,
        })?;
        let spath = store_path(mount_path, &ctx.state_dir);
        let store = query::open_store(&spath).map_err(|source| DbError::Store {
            path: spath.clone(),
            source,
        })?;

        let file_name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.display().to_string());
        Ok(DbHost {
            paths: ctx.paths(),
            file,
            file_name,
            writable: settings.writable,
            page_size: settings.page_size,
            search: settings.search,
            titles: settings.titles,
            main: Mutex::new(main),
            main_deadline,
            readers: Mutex::new(readers),
            reader_free: std::sync::Condvar::new(),
            budget_ms,
            store: Mutex::new(store),
        })
    }

    /// The browsing (and writing) connection, with a fresh deadline.
    fn main(&self) -> MutexGuard<'_, Connection> {
        // A poisoned lock only means a call panicked; SQLite rolled its statement back.
        let guard = lock(&self.main);
        self.main_deadline.arm();
        guard
    }

    /// A read-only, authorized connection to run a caller's SQL, with a fresh deadline;
    /// when all are busy, the first to come free (within the statement budget).
    fn reader(&self) -> HostResult<ReaderGuard<'_>> {
        let budget = self.budget();
        let pool = lock(&self.readers);
        let (mut pool, wait) = self
            .reader_free
            .wait_timeout_while(pool, budget, |p| p.is_empty())
            .unwrap_or_else(|p| p.into_inner());
        let Some(reader) = pool.pop() else {
            debug_assert!(wait.timed_out());
            return Err(HostError::TimedOut(format!(
                "all {READERS} query connections stayed busy for {:.1} s; try again",
                budget.as_secs_f64()
            )));
        };
        reader.deadline.arm();
        *lock(&reader.denied) = None;
        Ok(ReaderGuard {
            host: self,
            reader: Some(reader),
        })
    }

    fn budget(&self) -> Duration {
        Duration::from_millis(self.budget_ms.load(Ordering::Relaxed))
    }

    #[cfg(test)]
    fn set_budget(&self, budget: Duration) {
        self.budget_ms
            .store(budget.as_millis() as u64, Ordering::Relaxed);
    }

    fn store(&self) -> MutexGuard<'_, Connection> {
        lock(&self.store)
    }

    fn not_found(&self, path: &[String]) -> HostError {
        HostError::NotFound(format!(
            "no entry {} in the database",
            self.paths.entry(path)
        ))
    }

    /// Refs: `sqlite://chinook.db` (root), `sqlite://chinook.db/T` (table or view),
    /// `sqlite://chinook.db/T/K` (row), collections and query results after a `#`.
    fn reference(&self, node: &Node) -> String {
        let base = format!("sqlite://{}", self.file_name);
        let e = keys::encode_name;
        match node {
            Node::Root => base,
            Node::Tables => format!("{base}#tables"),
            Node::Views => format!("{base}#views"),
            Node::Queries => format!("{base}#queries"),
            Node::Table(t) | Node::View(t) => format!("{base}/{}", e(t)),
            Node::TableRows(t) | Node::ViewRows(t) => format!("{base}/{}#rows", e(t)),
            Node::Row(t, k) => format!("{base}/{}/{k}", e(t)),
            Node::ViewRow(v, n) => format!("{base}/{}#rows/{n}", e(v)),
            Node::Query(id) => format!("{base}#queries/{id}"),
            Node::QueryRows(id) => format!("{base}#queries/{id}/rows"),
            Node::QueryRow(id, n) => format!("{base}#queries/{id}/rows/{n}"),
        }
    }
}

impl Host for DbHost {
    fn documents(&self, cursor: Option<&str>, limit: usize) -> HostResult<DocumentPage> {
        if self.search.is_empty() {
            return Ok((Vec::new(), None));
        }
        let conn = lock(&self.main);
        documents::page(&conn, &self.search, cursor, limit)
    }

    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        self.info(&node)
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        let node = self.existing(path)?;
        self.list(&node)
    }

    /// A row (of a table, a view or a stored query) as one JSON object.
    fn body(&self, path: &[String]) -> HostResult<Option<Body>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        if !matches!(node, Node::Row(..) | Node::ViewRow(..) | Node::QueryRow(..))
            || !self.exists(&node)?
        {
            return Ok(None);
        }
        Ok(self.row_json(&node)?.map(Body::bytes))
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        Ok(ops::OPS.specs(&self.at(path)?))
    }

    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard> {
        ops::OPS.guard(self, &Caller::default(), &self.at(path)?, op, args)
    }

    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        ops::OPS.call(self, caller, &self.at(path)?, op, args)
    }

    /// A write keeps its run's name in `wip_runs` in its own transaction: a run found
    /// there committed, one not found changed nothing. Reads keep nothing and cannot tell.
    fn settle(
        &self,
        _path: &[String],
        op: &str,
        run: &str,
    ) -> HostResult<Option<crate::host::Settled>> {
        use crate::host::Settled;
        if !self.writable
            || !matches!(
                op,
                ops::name::INSERT | ops::name::UPDATE | ops::name::DELETE
            )
        {
            return Ok(None);
        }
        let conn = self.main();
        let exists: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [ops::RUNS_TABLE],
                |r| r.get(0),
            )
            .map_err(|e| HostError::failed("database", e))?;
        if !exists {
            return Ok(Some(Settled::NotRun));
        }
        let found: Option<String> = conn
            .query_row(
                &format!("SELECT result FROM {} WHERE run = ?1", ops::RUNS_TABLE),
                [run],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(HostError::failed("database", e)),
            })?;
        Ok(Some(found.map_or(Settled::NotRun, Settled::Done)))
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        self.resolve_ref(reference.trim()).unwrap_or_default()
    }

    /// A statement may run for the whole budget: calls go to the runtime's workers.
    fn bounded_calls(&self) -> bool {
        false
    }

    // `call` evaluates the op's conditions itself and answers Blocked.
    fn checks_guard_in_call(&self) -> bool {
        true
    }

    /// Another process may change the database (and its schema) at any time.
    fn cache_ttl(&self) -> Duration {
        Duration::from_secs(1)
    }
}

impl DbHost {
    /// The existing entry at `path`, as its ops see it.
    fn at(&self, path: &[String]) -> HostResult<ops::At> {
        Ok(ops::At {
            node: self.existing(path)?,
            page_size: self.page_size,
        })
    }

    /// The node at `path`, which must exist.
    fn existing(&self, path: &[String]) -> HostResult<Node> {
        match Node::parse(path) {
            Some(node) if self.exists(&node)? => Ok(node),
            _ => Err(self.not_found(path)),
        }
    }

    fn resolve_ref(&self, reference: &str) -> HostResult<Vec<Vec<String>>> {
        let base = format!("sqlite://{}", self.file_name);
        let Some(rest) = reference.strip_prefix(&base) else {
            return Ok(Vec::new());
        };
        let node = if rest.is_empty() {
            Some(Node::Root)
        } else if let Some(frag) = rest.strip_prefix('#') {
            Node::parse(&split(frag))
        } else if let Some(rest) = rest.strip_prefix('/') {
            let (obj, frag) = match rest.split_once('#') {
                Some((o, f)) => (o, Some(f)),
                None => (rest, None),
            };
            let mut parts = obj.splitn(2, '/');
            let name = parts.next().unwrap_or_default();
            let key = parts.next();
            let Some(decoded) = keys::decode_name(name) else {
                return Ok(Vec::new());
            };
            let is_view = schema::view_exists(&self.main(), &decoded)?;
            let dir = if is_view { "views" } else { "tables" };
            let mut path = vec![dir.to_string(), name.to_string()];
            match (key, frag) {
                (None, None) => {}
                (Some(k), None) if !is_view => path.extend(["rows".to_string(), k.to_string()]),
                (None, Some(f)) => path.extend(split(f)),
                _ => return Ok(Vec::new()),
            }
            Node::parse(&path)
        } else {
            None
        };
        match node {
            Some(node) if self.exists(&node)? => Ok(vec![node.path()]),
            _ => Ok(Vec::new()),
        }
    }
}

fn split(s: &str) -> Vec<String> {
    s.split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}
