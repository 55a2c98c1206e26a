//! The narrow waist: the one interface every host implements.
//!
//! A host answers for the part of the tree mounted at its path. It knows its backend and
//! nothing of FUSE, inodes or the journal. Paths given to a host are relative to its mount
//! point, one `String` per segment (already unescaped: a host never sees `description~`).
//! `op` declares an op once (`Decl`), with its arguments' type, schema and guard.

pub mod diff;
pub mod glob;
pub mod identity;
pub mod names;
pub mod op;
pub mod signal;
pub mod text;
pub mod tree;

use serde_json::Value;

/// What an entry (an object at a path) shows of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    /// One line (at most a short paragraph): what this object is and its state.
    pub description: String,
    /// Identity of the object, one line, e.g. `tracker://demo/issues/42`.
    pub reference: String,
    /// Whether the parent's listing shows it. Non-indexable entries (runs, search hits,
    /// conversations) are reachable by path only, so `find` and indexers stay out.
    pub indexable: bool,
    /// When the entry (its state, content or children) last changed, where the backend
    /// knows it: the entry's `mtime`, so `rsync`, `make` and backups see changes, and the
    /// kernel drops stale listings. `None`: unknown (the mount's start is shown).
    pub modified: Option<std::time::SystemTime>,
    /// A short human title (an issue's title, a row's name column), for titled names
    /// (`42 Crash when config is missing`). `None`: listed by its bare name only.
    pub title: Option<String>,
    /// The description is a listing's short form (what a `statx` tells, not what a look
    /// into the content would): the `description` file asks `Host::entry` for the whole
    /// one when it is read. Everything else (ref, title, modified) is final.
    pub partial: bool,
}

impl EntryInfo {
    /// An indexable entry.
    pub fn new(description: impl Into<String>, reference: impl Into<String>) -> Self {
        EntryInfo {
            description: description.into(),
            reference: reference.into(),
            indexable: true,
            modified: None,
            title: None,
            partial: false,
        }
    }

    /// The entry's short title (see `title`); an empty one is no title.
    pub fn titled(mut self, title: impl Into<String>) -> Self {
        let title = title.into();
        self.title = (!title.trim().is_empty()).then_some(title);
        self
    }

    pub fn modified(mut self, at: Option<std::time::SystemTime>) -> Self {
        self.modified = at;
        self
    }

    /// Its description is a listing's short form (see `partial`).
    pub fn partial(mut self) -> Self {
        self.partial = true;
        self
    }
}

/// One child in a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Child {
    pub name: String,
    pub info: EntryInfo,
}

/// An operation an entry offers.
#[derive(Clone, Debug, PartialEq)]
pub struct OpSpec {
    pub name: String,
    /// One line: what it does, args in brief.
    pub description: String,
    /// JSON Schema of the arguments (an object schema; strict: `additionalProperties: false`).
    pub schema: Value,
    /// JSON Schema of what a call returns, where the host declares one (an MCP tool's
    /// `outputSchema`): shown as `ops/NAME/output_schema` beside `schema`.
    pub output: Option<Value>,
}

impl OpSpec {
    /// The arguments as an object, with only this op's properties and all required ones.
    /// The runtime validates against the full schema before a call; hosts check this much
    /// again because they are also called directly.
    pub fn check_args(&self, args: &Value) -> HostResult<serde_json::Map<String, Value>> {
        let map = match args {
            Value::Object(m) => m.clone(),
            Value::Null => serde_json::Map::new(),
            _ => {
                return Err(HostError::InvalidArgs(
                    "arguments must be a JSON object".to_string(),
                ))
            }
        };
        let props = self.schema.get("properties").and_then(Value::as_object);
        for key in map.keys() {
            if !props.is_some_and(|p| p.contains_key(key)) {
                let allowed: Vec<&str> = props
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                return Err(HostError::InvalidArgs(format!(
                    "unknown argument `{key}` for {} (allowed: {})",
                    self.name,
                    if allowed.is_empty() {
                        "none".to_string()
                    } else {
                        allowed.join(", ")
                    }
                )));
            }
        }
        if let Some(required) = self.schema.get("required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(r) {
                    return Err(HostError::InvalidArgs(format!(
                        "missing argument `{r}` for {}",
                        self.name
                    )));
                }
            }
        }
        Ok(map)
    }
}

/// A strict object schema for an op's arguments: these `properties`, the `required` ones,
/// nothing else.
pub fn object_schema(properties: Value, required: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// One precondition of an operation and whether it holds now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub name: String,
    pub ok: bool,
    /// Why it holds or not. When it fails: how it could be satisfied (a path or an op), or
    /// that it cannot be by you.
    pub detail: String,
    /// A policy of the mount (read-only, inside the root): failing it is EACCES, not EPERM.
    pub policy: bool,
}

impl Condition {
    pub fn check(name: &str, ok: bool, detail: impl Into<String>) -> Self {
        Condition {
            name: name.to_string(),
            ok,
            detail: detail.into(),
            policy: false,
        }
    }

    pub fn policy(name: &str, ok: bool, detail: impl Into<String>) -> Self {
        Condition {
            policy: true,
            ..Condition::check(name, ok, detail)
        }
    }
}

/// The guard of an operation: all conditions must hold for it to run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guard {
    pub conditions: Vec<Condition>,
}

impl Guard {
    pub fn new(conditions: Vec<Condition>) -> Self {
        Guard { conditions }
    }

    pub fn allowed(&self) -> bool {
        self.conditions.iter().all(|c| c.ok)
    }

    /// The first failing condition, policy failures first (they decide EACCES vs EPERM).
    pub fn first_failure(&self) -> Option<&Condition> {
        self.conditions
            .iter()
            .find(|c| !c.ok && c.policy)
            .or_else(|| self.conditions.iter().find(|c| !c.ok))
    }

    /// The text of a `guard` file: `allowed` or `blocked`, then one line per condition.
    pub fn render(&self) -> String {
        let mut out = String::from(if self.allowed() {
            "allowed\n"
        } else {
            "blocked\n"
        });
        for c in &self.conditions {
            let mark = if c.ok { '✓' } else { '✗' };
            // One condition, one line, whatever its words hold.
            out.push_str(&format!(
                "{mark} {}: {}\n",
                names::shown(&c.name),
                names::shown(&c.detail)
            ));
        }
        out
    }
}

/// Who is calling, as the kernel told us.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub pid: u32,
    pub uid: u32,
    /// Kernel session id of the calling process (results are kept per session).
    pub session: u32,
    /// When that session began (see `Session::start`): with the number and the uid, what
    /// no later session can claim (`own_session`).
    pub session_start: u64,
    /// Command line of the calling process, space-separated, best effort.
    pub command: String,
    /// The run this call is, `JOURNAL:ID` (empty outside a journaled call). A host whose
    /// backend is transactional records it in the same transaction as the call's change,
    /// so a run a crash cut off can be settled (`Host::settle`).
    pub run: String,
    /// The run's signal: report progress, learn of a cancel (see `RunSignal`).
    pub signal: RunSignal,
    /// The places the policy judged this call at (`Host::acts_on`), which the host must
    /// act on and no other; `None` when no rule applies.
    pub judged: Option<std::sync::Arc<Vec<Vec<String>>>>,
}

/// A path a call acts on besides its entry (see `Host::acts_on`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// Host-relative path, resolved (no symlink on the way).
    pub path: Vec<String>,
    /// The call acts on everything below it too (removing or renaming a directory).
    pub subtree: bool,
}

impl Place {
    pub fn at(path: Vec<String>) -> Place {
        Place {
            path,
            subtree: false,
        }
    }
}

impl Caller {
    /// The caller's session, as `result` and a run's rights are keyed.
    pub fn own_session(&self) -> Session {
        Session {
            number: self.session,
            start: self.session_start,
            uid: self.uid,
        }
    }
}

/// A terminal session as no later one can pass for it. The kernel hands a session's
/// number out again once every process of it has ended, so the number alone would give a
/// stranger's new session the old one's `result` and runs: the number goes with when the
/// session began and with the caller's uid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Session {
    /// The kernel's session id (its leader's pid).
    pub number: u32,
    /// When the session's leader started, in clock ticks since boot (`/proc/PID/stat`
    /// field 22); 0 when it could not be told (its leader had exited before the daemon
    /// saw any process of it).
    pub start: u64,
    pub uid: u32,
}

impl Session {
    /// Nobody's: a reader that sees no `result` (attributes a listing carries).
    pub const NONE: Session = Session {
        number: 0,
        start: 0,
        uid: u32::MAX,
    };

    /// Whether `other` may be this very terminal session, whoever runs in it now: the
    /// same number, begun at the same time (or either start unknown). The uid is not
    /// compared: a process of the session that changed its uid (`sudo`) is still there.
    pub fn may_be_same_terminal(&self, other: &Session) -> bool {
        self.number == other.number
            && (self.start == other.start || self.start == 0 || other.start == 0)
    }
}

pub use signal::{Progress, RunSignal};

/// How a run cut off by a crash ended, as its host knows it (`Host::settle`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Its change was committed; the host's result text for it.
    Done(String),
    /// Nothing of it was committed.
    NotRun,
}

/// What a successful call returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallOutcome {
    /// Text for `result` (without the discovered paths, which the runtime appends).
    pub result: String,
    /// Host-relative paths of entries the call created or found.
    pub discovered: Vec<Vec<String>>,
    /// Host-relative paths of entries whose description or children changed.
    pub changed: Vec<Vec<String>>,
    /// World paths (`tracker/issues/42`) of other hosts' entries the call found, as a search
    /// does: the runtime prints and links them like `discovered` and adds them to the known
    /// world.
    pub found_elsewhere: Vec<String>,
    /// Content that is not text (an image, audio, a blob), in the order the result names
    /// it: the runtime keeps each as a file of the run (`runs/ID/content/N.EXT`) and
    /// prints its path.
    pub content: Vec<ContentPart>,
}

/// How long a call may run before its caller gets ETIMEDOUT unless the world's settings
/// say otherwise (`call_timeout_ms`), in milliseconds.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 30_000;

/// How many content parts one call keeps (the rest are counted in its `result`): a
/// listing of `content/` and the lookups of its files stay cheap.
pub const CONTENT_PARTS_KEPT: usize = 256;

/// One piece of a call's content kept as a file of its run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentPart {
    /// Its MIME type (`image/png`), which names the file's extension.
    pub mime: String,
    pub bytes: Vec<u8>,
    /// What the host said of it besides (an MCP block's annotations: audience, priority),
    /// one line, shown beside its path.
    pub note: String,
}

/// The extension a MIME type's file gets (`bin` for one not known here).
pub fn extension(mime: &str) -> &'static str {
    let essence = mime.split(';').next().unwrap_or("").trim();
    match essence.to_ascii_lowercase().as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "image/bmp" => "bmp",
        "image/tiff" => "tiff",
        "image/x-icon" | "image/vnd.microsoft.icon" => "ico",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/webm" => "weba",
        "audio/flac" | "audio/x-flac" => "flac",
        "audio/aac" => "aac",
        "video/mp4" => "mp4",
        "video/webm" => "webm",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "application/zip" => "zip",
        "application/gzip" => "gz",
        "text/plain" => "txt",
        "text/html" => "html",
        "text/csv" => "csv",
        "text/markdown" => "md",
        _ => "bin",
    }
}

impl CallOutcome {
    pub fn text(result: impl Into<String>) -> Self {
        CallOutcome {
            result: result.into(),
            ..Default::default()
        }
    }

    pub fn changed(mut self, path: Vec<String>) -> Self {
        self.changed.push(path);
        self
    }

    pub fn discovered(mut self, path: Vec<String>) -> Self {
        self.discovered.push(path);
        self
    }
}

/// An entry's content, as its `body` file shows it (see `Host::body`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    /// True size in bytes.
    pub size: u64,
    /// The whole content when the host has it at hand (bounded); `None`: read by offset
    /// with `Host::read_body` (a file on disk is never read whole into memory).
    pub bytes: Option<std::sync::Arc<[u8]>>,
    /// The op that replaces the whole content, when you may run it now: writing `body`
    /// is a call of it. `None`: the body is read-only (mode `r--`).
    pub write: Option<BodyWrite>,
    /// When the content last changed, where the host knows it.
    pub modified: Option<std::time::SystemTime>,
}

/// Which op a write of `body` calls, and the string argument that receives the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyWrite {
    pub op: String,
    pub arg: String,
}

/// The most a body given whole (`Body::bytes`) holds: such a body is kept in memory and
/// handed to the kernel at `open`, unlike a ranged one. A longer content is cut (see
/// `bounded`).
pub const MAX_WHOLE_BODY: usize = 16 << 20;

/// `bytes` cut to at most `max` bytes when longer: the first bytes (back to a UTF-8
/// character boundary when the content is text), then one line saying it was cut and
/// how long the whole is, so a reader never takes a part for the whole.
pub fn bounded(mut bytes: Vec<u8>, max: usize) -> Vec<u8> {
    if bytes.len() <= max {
        return bytes;
    }
    let marker = format!(
        "\n[body cut here: the content is {} bytes, a body shows at most {max}; the entry's ops read it whole]\n",
        bytes.len()
    );
    let mut keep = max.saturating_sub(marker.len());
    // Do not split a character: back off over an incomplete sequence at the cut.
    if let Err(e) = std::str::from_utf8(&bytes[..keep]) {
        if e.error_len().is_none() {
            keep = e.valid_up_to();
        }
    }
    bytes.truncate(keep);
    bytes.extend_from_slice(&marker.as_bytes()[..marker.len().min(max)]);
    bytes
}

impl Body {
    /// A body given whole, at most `MAX_WHOLE_BODY` bytes (a longer one is cut, with a
    /// closing line that says so).
    pub fn bytes(bytes: impl Into<Vec<u8>>) -> Body {
        let bytes = bounded(bytes.into(), MAX_WHOLE_BODY);
        Body {
            size: bytes.len() as u64,
            bytes: Some(std::sync::Arc::from(bytes)),
            write: None,
            modified: None,
        }
    }

    /// A body of `size` bytes read by offset (`Host::read_body`).
    pub fn ranged(size: u64) -> Body {
        Body {
            size,
            bytes: None,
            write: None,
            modified: None,
        }
    }

    /// Writable through `op`, whose string argument `arg` receives the whole content.
    pub fn written_by(mut self, op: &str, arg: &str) -> Body {
        self.write = Some(BodyWrite {
            op: op.to_string(),
            arg: arg.to_string(),
        });
        self
    }

    pub fn modified(mut self, at: Option<std::time::SystemTime>) -> Body {
        self.modified = at;
        self
    }
}

/// Text a host offers to the world's search index (see `Host::documents`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// Host-relative path of the entry the text belongs to.
    pub path: Vec<String>,
    pub title: String,
    pub text: String,
    /// Changes whenever title or text do (an update time, a hash): the indexer re-reads a
    /// document only when its version changed.
    pub version: String,
}

/// A page of documents and the cursor of the next page (`None`: that was the last).
pub type DocumentPage = (Vec<Document>, Option<String>);

/// Why a host call failed. Each kind has one errno (see `WorldError::errno`).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum HostError {
    /// Arguments are wrong for this object (EINVAL).
    #[error("{0}")]
    InvalidArgs(String),
    /// A guard condition failed when re-checked at call time (EPERM, or EACCES for policy).
    #[error("blocked by guard {}", .0.first_failure().map(|c| format!("{}: {}", c.name, c.detail)).unwrap_or_default())]
    Blocked(Guard),
    /// The mount's policy forbids this (EACCES).
    #[error("{0}")]
    Forbidden(String),
    /// No such entry or operation (ENOENT).
    #[error("{0}")]
    NotFound(String),
    /// The backend failed (EIO).
    #[error("{0}")]
    Backend(String),
    /// The backend did not answer in time (ETIMEDOUT).
    #[error("{0}")]
    TimedOut(String),
    /// A name is longer than a file name may be (ENAMETOOLONG).
    #[error("{0}")]
    NameTooLong(String),
    /// The call stopped because its run was cancelled (ECANCELED).
    #[error("{0}")]
    Cancelled(String),
    /// The backend failed with this error (EIO): what was being done, and the backend's
    /// own error, kept as the source (rusqlite, io, octocrab) for logs and callers.
    #[error("{context}: {source}")]
    Failed {
        context: String,
        #[source]
        source: ErrorSource,
    },
}

impl HostError {
    /// The backend failed at `context` with `source` (EIO), keeping the error itself.
    pub fn failed(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> HostError {
        HostError::Failed {
            context: context.into(),
            source: ErrorSource(std::sync::Arc::new(source)),
        }
    }
}

/// `result.or_failed("tracker database")?`: a backend's error as `HostError::Failed`,
/// with what was being done, keeping the error as its source.
pub trait OrFailed<T> {
    fn or_failed(self, context: &str) -> HostResult<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> OrFailed<T> for Result<T, E> {
    fn or_failed(self, context: &str) -> HostResult<T> {
        self.map_err(|e| HostError::failed(context, e))
    }
}

/// A backend's error as a `HostError`'s source: shared so the error stays `Clone`, equal
/// by its words.
#[derive(Clone, Debug)]
pub struct ErrorSource(pub std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ErrorSource {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for ErrorSource {}

pub type HostResult<T> = Result<T, HostError>;

/// A host: the part of the world mounted at one path.
///
/// Every method is called from many threads at once; reads (`entry`, `children`, `ops`,
/// `guard`) must have no side effects on the backend.
pub trait Host: Send + Sync {
    /// The entry at `path` (empty path: the host's own root), or `None` if there is none.
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>>;

    /// Whether the entry at `path` exists: what the runtime asks where it needs no more
    /// (each entry a call changed, to tell a removal from a change; a path a call found
    /// elsewhere; a resolved ref). A host whose `entry` computes counts or descriptions
    /// can answer this more cheaply.
    fn exists(&self, path: &[String]) -> HostResult<bool> {
        Ok(self.entry(path)?.is_some())
    }

    /// Children of the entry at `path`, in listing order. A large collection returns a
    /// bounded first page; its `description` says how many exist and how to reach the rest
    /// (any valid name is still reachable through `entry`).
    fn children(&self, path: &[String]) -> HostResult<Vec<Child>>;

    /// Operations the entry at `path` offers.
    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>>;

    /// The guard of `op` on `path` now. With `args`, conditions that depend on them are
    /// included (e.g. a target path inside the root).
    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard>;

    /// The guards of several ops of one entry at once (`args` none), in `ops`' order, for
    /// hosts that read an entry's state once for all of them (a walk reads every guard of
    /// an entry in a row). `None`: not offered; the runtime asks `guard` op by op.
    fn guards(&self, _path: &[String], _ops: &[&str]) -> Option<HostResult<Vec<Guard>>> {
        None
    }

    /// Run `op` with validated `args`. The host re-checks its guard atomically with the
    /// change where the backend allows and returns `HostError::Blocked` if it fails.
    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome>;

    /// When the entry at `path` last changed (the `mtime` of it and its files), asked at
    /// every `stat`, so it must be cheap; a host that sets `EntryInfo::modified` answers
    /// the same here. `None` (the default): unknown, the mount's start is shown.
    fn modified(&self, _path: &[String]) -> HostResult<Option<std::time::SystemTime>> {
        Ok(None)
    }

    /// The content of the entry at `path`, shown as its `body` file, or `None` when it has
    /// none (a directory, a collection). Reading it must change nothing: it is not a call.
    fn body(&self, _path: &[String]) -> HostResult<Option<Body>> {
        Ok(None)
    }

    /// What a listing of the entry at `path` needs: its body (an error of its own: a body
    /// the host cannot give now leaves the listing whole) and its children. A host that
    /// reads both in one go (one transaction, one existence check) says so here; by
    /// default `body`, then `children`.
    fn body_and_children(
        &self,
        path: &[String],
    ) -> HostResult<(HostResult<Option<Body>>, Vec<Child>)> {
        let body = self.body(path);
        Ok((body, self.children(path)?))
    }

    /// Up to `size` bytes of a ranged body (`Body::bytes` is `None`) from `offset`; fewer
    /// only at its end.
    fn read_body(&self, path: &[String], _offset: u64, _size: u32) -> HostResult<Vec<u8>> {
        Err(HostError::NotFound(format!(
            "{} has no body to read by offset",
            path.join("/")
        )))
    }

    /// The working tree, for a host whose entries are a real directory (the files host):
    /// its files are then files and its folders hold exactly their children, and each
    /// path's entry (this trait's `entry`, `ops`, …) is reached at `PATH@`.
    fn tree(&self) -> Option<&dyn tree::Tree> {
        None
    }

    /// The indexable text this host offers to search, a page at a time in a stable order,
    /// from `cursor` (`None`: the start). Hosts with nothing to offer keep the default.
    fn documents(&self, _cursor: Option<&str>, _limit: usize) -> HostResult<DocumentPage> {
        Ok((Vec::new(), None))
    }

    /// Host-relative paths where the object with this `ref` appears (empty if not ours).
    fn resolve(&self, _reference: &str) -> Vec<Vec<String>> {
        Vec::new()
    }

    /// Whether every call returns within a bounded time on its own (e.g. an embedded
    /// database with a busy timeout). Such calls run on the caller's thread; others run on a
    /// separate thread so a hung backend costs the caller `call_timeout`, not the mount.
    fn bounded_calls(&self) -> bool {
        false
    }

    /// Whether `call` checks the op's guard itself, atomically with what it changes, and
    /// answers `Blocked` with the guard when it fails. The runtime then does not ask for the
    /// guard before the call (one evaluation per call instead of two); the guard file and
    /// the refusal at open are unchanged.
    fn checks_guard_in_call(&self) -> bool {
        false
    }

    /// How the run `run` (a `Caller::run`) of `op` on `path` ended, for a host that records run ids with its
    /// changes: `Done` when its change committed, `NotRun` when nothing did. `None` (the
    /// default): the host cannot tell, and the run stays `interrupted`.
    fn settle(&self, _path: &[String], _op: &str, _run: &str) -> HostResult<Option<Settled>> {
        Ok(None)
    }

    /// Where a call of `op` on the entry at `path` acts besides the entry itself, resolved
    /// exactly as `call` resolves it: a `path` argument or a symlink's target (beneath
    /// the host's root), a rename's other end, a directory op's whole subtree (then the
    /// entry itself, with `subtree`). The policy judges every place, and `call` acts on no
    /// other (`Caller::judged` names them). `args` is `None` for the guard as its file
    /// shows it. The default: the entry alone.
    fn acts_on(
        &self,
        _path: &[String],
        _op: &str,
        _args: Option<&Value>,
    ) -> HostResult<Vec<Place>> {
        Ok(Vec::new())
    }

    /// The ops on other entries that a call of `op` on `path` also performs (a merge
    /// closes the issues the pull request fixes), as (host-relative path, op name): the
    /// manifest's rules for those apply to this call too. Asked only when the world has
    /// rules; the default: none.
    fn implied_ops(&self, _path: &[String], _op: &str) -> HostResult<Vec<(Vec<String>, String)>> {
        Ok(Vec::new())
    }

    /// The host's own policy for `op` on `path`, applied when no `[[policy]]` rule of the
    /// manifest matches the op (so the manifest can override it). `None`: no opinion.
    fn policy_default(&self, _path: &[String], _op: &str) -> Option<HostDefault> {
        None
    }

    /// Where the host is in its life: hosts that start in the background (a server
    /// process, a connection) say `Starting` until they can answer; `wip mount` waits for
    /// them (up to `startup_wait_ms`) and `wip status` shows it.
    fn readiness(&self) -> Readiness {
        Readiness::Ready
    }

    /// How long the kernel may cache what this host shows without being told of a change.
    /// Hosts whose backend changes behind our back (a directory on disk) keep this short.
    fn cache_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_secs(3600)
    }
}

/// A host's own policy for an op where the manifest has no rule for it (see
/// `Host::policy_default`): the manifest's `[[policy]]` rules come first, so a rule can
/// allow, deny or ask a sign-off for what a host would decide otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostDefault {
    pub allowed: bool,
    /// Why, and (when denied) how the manifest could allow it.
    pub words: String,
}

/// Whether a host can answer now (see `Host::readiness`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Still starting in the background, in a few words.
    Starting(String),
    /// Started once but is down now (restarting with backoff), in a few words.
    Down(String),
}

impl Readiness {
    /// `ready`, `starting: …` or `down: …`, on one line.
    pub fn words(&self) -> String {
        match self {
            Readiness::Ready => "ready".to_string(),
            Readiness::Starting(w) => format!("starting: {w}"),
            Readiness::Down(w) => format!("down: {w}"),
        }
    }
}

/// The world paths the manifest's `hide` rules make absent for every reader, for a host
/// that shows what other hosts hold (search indexes nothing hidden). Cheap to clone.
#[derive(Clone, Default)]
pub struct Hidden(Option<std::sync::Arc<HidesFn>>);

/// Whether a world path is hidden (see `Hidden`).
type HidesFn = dyn Fn(&str) -> bool + Send + Sync;

impl Hidden {
    /// Paths are hidden where `hides` says so (a world path, no leading `/`).
    pub fn new(hides: impl Fn(&str) -> bool + Send + Sync + 'static) -> Hidden {
        Hidden(Some(std::sync::Arc::new(hides)))
    }

    /// Whether the world path `path` (`files/secret/a.txt`, a leading `/` ignored) is hidden.
    pub fn hides(&self, path: &str) -> bool {
        self.0
            .as_ref()
            .is_some_and(|h| h(path.trim_start_matches('/')))
    }
}

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Hidden(rules)"
        } else {
            "Hidden(none)"
        })
    }
}

/// Build a host-relative path from string slices.
pub fn path_of(segments: &[&str]) -> Vec<String> {
    segments.iter().map(|s| s.to_string()).collect()
}

/// Entries of one host that changed on their own, not through a call of this mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostChange {
    /// Index of the host in the world (manifest order).
    pub host: usize,
    /// Host-relative paths of entries whose description or children changed.
    pub paths: Vec<Vec<String>>,
    /// Nodes of its working tree that changed: a directory, and the name in it when one
    /// appeared, went or changed (`None`: the directory itself).
    pub tree: Vec<(tree::NodeNo, Option<std::ffi::OsString>)>,
}

/// A host's way to tell the runtime that entries changed behind the mount's back (a
/// backend's notification, a background job that finished). The runtime journals them in
/// the change feed and drops the kernel's cached copies, as it does for a call's changes.
#[derive(Clone, Debug)]
pub struct Changes {
    host: usize,
    tx: Option<std::sync::mpsc::Sender<HostChange>>,
}

impl Changes {
    /// One sender per host (`for_host`) and the runtime's receiving end.
    pub fn channel() -> (Changes, std::sync::mpsc::Receiver<HostChange>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (
            Changes {
                host: 0,
                tx: Some(tx),
            },
            rx,
        )
    }

    /// Changes that go nowhere: for hosts used without a mount (tests, benchmarks).
    pub fn detached() -> Changes {
        Changes { host: 0, tx: None }
    }

    /// The sender for the host at `index` in manifest order.
    pub fn for_host(&self, index: usize) -> Changes {
        Changes {
            host: index,
            tx: self.tx.clone(),
        }
    }

    /// Report changed entries; never blocks, and is a no-op once the mount is gone.
    pub fn changed(&self, paths: Vec<Vec<String>>) {
        if paths.is_empty() {
            return;
        }
        if let Some(tx) = &self.tx {
            let _ = tx.send(HostChange {
                host: self.host,
                paths,
                tree: Vec::new(),
            });
        }
    }

    /// Report nodes of the host's working tree that changed outside the mount (see
    /// `HostChange::tree`), and the entries at `paths` with them.
    pub fn tree_changed(
        &self,
        nodes: Vec<(tree::NodeNo, Option<std::ffi::OsString>)>,
        paths: Vec<Vec<String>>,
    ) {
        if nodes.is_empty() && paths.is_empty() {
            return;
        }
        if let Some(tx) = &self.tx {
            let _ = tx.send(HostChange {
                host: self.host,
                paths,
                tree: nodes,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_within_the_bound_is_whole() {
        let b = Body::bytes(vec![7u8; MAX_WHOLE_BODY]);
        assert_eq!(b.size, MAX_WHOLE_BODY as u64);
        assert_eq!(bounded(b"abc".to_vec(), 3), b"abc");
    }

    #[test]
    fn a_longer_body_is_cut_with_a_line_that_says_so() {
        let b = Body::bytes(vec![b'x'; MAX_WHOLE_BODY + 10]);
        let bytes = b.bytes.expect("given whole");
        assert_eq!(b.size, bytes.len() as u64);
        assert!(bytes.len() <= MAX_WHOLE_BODY);
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.starts_with("xxxx"));
        assert!(
            text.ends_with(&format!(
                "\n[body cut here: the content is {} bytes, a body shows at most {MAX_WHOLE_BODY}; the entry's ops read it whole]\n",
                MAX_WHOLE_BODY + 10
            )),
            "{}",
            &text[text.len() - 200..]
        );
    }

    #[test]
    fn a_cut_text_keeps_whole_characters() {
        // "é" is two bytes: a cut in its middle backs off before it.
        let text = "é".repeat(200);
        for max in [150, 151] {
            let cut = bounded(text.clone().into_bytes(), max);
            let cut = String::from_utf8(cut).expect("still UTF-8");
            let (head, marker) = cut.split_once('\n').unwrap();
            assert!(text.starts_with(head) && !head.is_empty());
            assert!(marker.starts_with("[body cut here: the content is 400 bytes"));
            assert!(cut.len() <= max);
        }
    }
}
