//! The world model: hosts mounted at paths, the virtual files every entry carries
//! (`description`, `ref`, `ops/NAME/{description,schema,guard,call,result,runs/}`), call
//! semantics (validation, guards, journal, per-session results) and the root's own ops.
//!
//! It knows no FUSE: the adapter in `fuse/` asks it for nodes, attributes and bytes.

pub mod args;
pub mod caller;
pub mod error;
pub mod host;
pub mod journal;
pub mod known;
pub mod names;
pub mod node;
mod pool;
mod readme;
pub mod time;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::manifest::{Identity, WorldSettings};
use error::{ErrorKind, WorldError, WorldResult};
use host::{CallOutcome, Caller, Guard, Host, HostChange, OpSpec};
use journal::{Event, Journal, Run};
use known::{Known, KnownEntry};
use node::*;

/// Kernel cache lifetime for what never changes (schemas, op descriptions, the README).
pub const STABLE_TTL: Duration = Duration::from_secs(3600);
/// How long a guard evaluation is reused (a `stat` then `cat` of `guard` asks once).
const GUARD_CACHE: Duration = Duration::from_millis(500);
/// How long an entry's op list is reused.
const OPS_CACHE: Duration = Duration::from_secs(2);
/// How many runs `runs/` lists (older ones stay reachable by id).
const RUNS_LISTED: usize = 1000;
/// How many calls `.wip/log` shows.
const LOG_LINES: usize = 200;
/// How many known entries `.wip/known` lists (newest first; `ops/locate` searches all).
const KNOWN_SHOWN: usize = 10_000;
/// How many events `.wip/events` shows (those since the mount started; `ops/events` pages).
const EVENTS_SHOWN: usize = 100_000;
/// How many paths `locate` and `events` return at most.
const FOUND_MAX: usize = 200;

/// An entry's ops, shared between the cache and its readers.
pub type OpList = Arc<Vec<OpSpec>>;

/// A host mounted at a path of the world.
pub struct Mounted {
    pub path: Vec<String>,
    pub kind: String,
    pub host: Arc<dyn Host>,
}

/// Receives the nodes a call changed, including calls that finish after their caller
/// gave up waiting (so the kernel's caches can be invalidated then too).
pub type ChangeSink = Arc<dyn Fn(&[NodeId]) + Send + Sync>;

/// What a finished call reports to the FUSE layer.
#[derive(Debug)]
pub struct CallReport {
    pub run: i64,
    /// The text now in `result` for this caller.
    pub text: String,
    pub outcome: Result<(), WorldError>,
}

/// Between a caller and the worker running its call: whichever comes second decides.
/// A call that outlives its caller's timeout is recorded as timed out first, and only then
/// gets its late outcome recorded over it.
#[derive(Default)]
struct Handoff {
    state: Mutex<HandoffState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct HandoffState {
    outcome: Option<WorldResult<Outcome>>,
    abandoned: bool,
    recorded: bool,
}

impl Handoff {
    /// The worker's side: hand the outcome over, or get it back to record late (after the
    /// caller's timeout was recorded).
    fn deliver(&self, outcome: WorldResult<Outcome>) -> Option<WorldResult<Outcome>> {
        let Ok(mut st) = self.state.lock() else {
            return Some(outcome);
        };
        if !st.abandoned {
            st.outcome = Some(outcome);
            self.cv.notify_all();
            return None;
        }
        while !st.recorded {
            st = match self.cv.wait(st) {
                Ok(st) => st,
                Err(_) => break,
            };
        }
        Some(outcome)
    }

    /// The caller's side: the outcome, or `None` after `timeout` (then abandoned).
    fn wait(&self, timeout: Duration) -> Option<WorldResult<Outcome>> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().ok()?;
        loop {
            if let Some(outcome) = st.outcome.take() {
                return Some(outcome);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                st.abandoned = true;
                return None;
            }
            st = match self.cv.wait_timeout(st, left) {
                Ok((st, _)) => st,
                Err(_) => return None,
            };
        }
    }

    fn recorded(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.recorded = true;
            self.cv.notify_all();
        }
    }
}

/// A successful call with every path tied to its host (root ops span hosts).
#[derive(Default)]
struct Outcome {
    result: String,
    discovered: Vec<(usize, Vec<String>)>,
    changed: Vec<(usize, Vec<String>)>,
    /// World paths of entries of other hosts.
    elsewhere: Vec<String>,
}

impl Outcome {
    fn of_host(host: usize, o: CallOutcome) -> Outcome {
        Outcome {
            result: o.result,
            discovered: o.discovered.into_iter().map(|p| (host, p)).collect(),
            changed: o.changed.into_iter().map(|p| (host, p)).collect(),
            elsewhere: o.found_elsewhere,
        }
    }
}

#[derive(Default)]
struct OpResults {
    latest: i64,
    by_session: HashMap<u32, i64>,
}

pub struct World {
    settings: WorldSettings,
    identity: Identity,
    hosts: Vec<Mounted>,
    journal: Journal,
    mount_point: PathBuf,
    config_text: String,
    results: Mutex<HashMap<(Target, String), OpResults>>,
    guards: Mutex<HashMap<(Target, String), (Instant, Guard)>>,
    ops_cache: Mutex<HashMap<Target, (Instant, OpList)>>,
    sink: Mutex<Option<ChangeSink>>,
    pool: pool::Pool,
    known: Known,
    /// Entries seen to be non-indexable: their descendants are out of the indexable range.
    hidden: Mutex<HashSet<EntryRef>>,
    /// Ancestors of discovered entries seen to be indexable (bounded; see `note_ancestors`).
    shown: Mutex<HashSet<EntryRef>>,
    /// The change feed's cursor when this mount started (`.wip/events` shows what follows).
    events_start: i64,
    /// Nodes the kernel currently holds (kept up to date by the FUSE layer).
    pub materialised: AtomicUsize,
    started: Instant,
    /// Calls found running at start-up (cut off by a crash), now marked interrupted.
    pub interrupted_at_start: usize,
}

impl World {
    pub fn new(
        settings: WorldSettings,
        identity: Identity,
        hosts: Vec<Mounted>,
        state_dir: &Path,
        mount_point: PathBuf,
        config_text: String,
    ) -> WorldResult<World> {
        std::fs::create_dir_all(state_dir).map_err(|e| {
            WorldError::backend(format!(
                "cannot create state dir {}: {e}",
                state_dir.display()
            ))
        })?;
        let (journal, interrupted) = Journal::open(&state_dir.join("journal.db"))?;
        let known = Known::open(&state_dir.join("journal.db"))?;
        let events_start = journal.last_event()?;
        Ok(World {
            settings,
            identity,
            hosts,
            journal,
            mount_point,
            config_text,
            results: Mutex::new(HashMap::new()),
            guards: Mutex::new(HashMap::new()),
            ops_cache: Mutex::new(HashMap::new()),
            sink: Mutex::new(None),
            pool: pool::Pool::default(),
            known,
            hidden: Mutex::new(HashSet::new()),
            shown: Mutex::new(HashSet::new()),
            events_start,
            materialised: AtomicUsize::new(0),
            started: Instant::now(),
            interrupted_at_start: interrupted,
        })
    }

    pub fn set_change_sink(&self, sink: ChangeSink) {
        if let Ok(mut s) = self.sink.lock() {
            *s = Some(sink);
        }
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    pub fn hosts(&self) -> &[Mounted] {
        &self.hosts
    }

    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    fn host(&self, entry: &EntryRef) -> WorldResult<&Mounted> {
        self.hosts
            .get(entry.host)
            .ok_or_else(|| WorldError::not_found("no such host"))
    }

    // ---- paths ----------------------------------------------------------------------

    /// World path of a target, e.g. `/tracker/issues/42` (names escaped as in the tree).
    pub fn target_path(&self, target: &Target) -> String {
        match target {
            Target::Root => "/".to_string(),
            Target::Entry(e) => self.entry_path(e.host, &e.path),
        }
    }

    fn entry_path(&self, host: usize, path: &[String]) -> String {
        let mut segs: Vec<String> = self
            .hosts
            .get(host)
            .map(|m| m.path.clone())
            .unwrap_or_default();
        segs.extend(path.iter().map(|s| names::escape(s)));
        format!("/{}", segs.join("/"))
    }

    /// Absolute path in the mounted file system.
    pub fn absolute(&self, world_path: &str) -> String {
        let mount = self.mount_point.display().to_string();
        let mount = mount.trim_end_matches('/');
        if world_path == "/" {
            format!("{mount}/")
        } else {
            format!("{mount}{world_path}")
        }
    }

    /// Add an entry to the known world, with whether it is in the indexable range.
    fn remember(&self, e: &EntryRef, info: &host::EntryInfo) {
        let mut indexable = info.indexable;
        if let Ok(mut hidden) = self.hidden.lock() {
            if !info.indexable {
                hidden.insert(e.clone());
            }
            indexable = indexable
                && !(1..e.path.len()).any(|n| {
                    hidden.contains(&EntryRef {
                        host: e.host,
                        path: e.path[..n].to_vec(),
                    })
                });
        }
        self.known.record(KnownEntry {
            path: self.entry_path(e.host, &e.path),
            reference: info.reference.clone(),
            description: info.description.clone(),
            indexable,
        });
    }

    /// A call can discover an entry before anyone looked up its ancestors: ask the host
    /// about those not seen yet, so an entry under a non-indexable folder stays out of the
    /// indexable range.
    fn note_ancestors(&self, e: &EntryRef) {
        const SHOWN_MAX: usize = 100_000;
        let Some(m) = self.hosts.get(e.host) else {
            return;
        };
        for n in 1..e.path.len() {
            let prefix = EntryRef {
                host: e.host,
                path: e.path[..n].to_vec(),
            };
            if self.hidden.lock().is_ok_and(|h| h.contains(&prefix)) {
                return;
            }
            if self.shown.lock().is_ok_and(|s| s.contains(&prefix)) {
                continue;
            }
            match m.host.entry(&prefix.path) {
                Ok(Some(info)) if !info.indexable => {
                    if let Ok(mut h) = self.hidden.lock() {
                        h.insert(prefix);
                    }
                    return;
                }
                Ok(Some(_)) => {
                    if let Ok(mut s) = self.shown.lock() {
                        if s.len() >= SHOWN_MAX {
                            s.clear();
                        }
                        s.insert(prefix);
                    }
                }
                _ => return,
            }
        }
    }

    /// The host entry at a world path (`tracker/issues/42`), asking its host once rather than
    /// looking up every ancestor (a hit deep in a large directory tree stays cheap).
    fn entry_at(&self, world_path: &str) -> Option<EntryRef> {
        let segs: Vec<&str> = world_path.split('/').filter(|s| !s.is_empty()).collect();
        let (host, m) = self
            .hosts
            .iter()
            .enumerate()
            .filter(|(_, m)| segs.len() >= m.path.len() && segs[..m.path.len()] == m.path[..])
            .max_by_key(|(_, m)| m.path.len())?;
        let path = segs[m.path.len()..]
            .iter()
            .map(|s| names::unescape(s))
            .collect::<Option<Vec<String>>>()?;
        m.host.entry(&path).ok().flatten()?;
        Some(EntryRef { host, path })
    }

    /// Resolve a world path (`/tracker/issues/42`) to its node, walking from the root.
    pub fn resolve_path(&self, world_path: &str) -> WorldResult<NodeId> {
        let mut node = NodeId::Root;
        for seg in world_path.split('/').filter(|s| !s.is_empty()) {
            node = self.lookup(&node, seg)?;
        }
        Ok(node)
    }

    // ---- lookup and listing -------------------------------------------------------

    /// The child `name` of `parent`, or ENOENT.
    pub fn lookup(&self, parent: &NodeId, name: &str) -> WorldResult<NodeId> {
        let missing = || WorldError::not_found(format!("no entry named {name:?} here"));
        if !names::is_valid(name) {
            return Err(missing());
        }
        let found = match parent {
            NodeId::Root => match name {
                "README.md" => Some(NodeId::Readme),
                ".wip" => Some(NodeId::Wip),
                "ops" => Some(NodeId::Ops(Target::Root)),
                _ => by_name(&InfoFile::ALL, name)
                    .map(|f| NodeId::Info(Target::Root, f))
                    .or_else(|| self.branch_child(&[], name)),
            },
            NodeId::Branch(prefix) if name == "description" => {
                Some(NodeId::BranchDescription(prefix.clone()))
            }
            NodeId::Branch(prefix) => self.branch_child(prefix, name),
            NodeId::Entry(e) => {
                if name == "ops" {
                    Some(NodeId::Ops(Target::Entry(e.clone())))
                } else if let Some(f) = by_name(&InfoFile::ALL, name) {
                    Some(NodeId::Info(Target::Entry(e.clone()), f))
                } else {
                    match names::unescape(name) {
                        Some(raw) => {
                            let mut path = e.path.clone();
                            path.push(raw);
                            let m = self.host(e)?;
                            match m.host.entry(&path)? {
                                Some(info) => {
                                    let child = EntryRef { host: e.host, path };
                                    self.remember(&child, &info);
                                    Some(NodeId::Entry(child))
                                }
                                None => None,
                            }
                        }
                        None => None,
                    }
                }
            }
            NodeId::Ops(t) => self
                .ops(t)?
                .iter()
                .find(|o| o.name == name)
                .map(|o| NodeId::Op(t.clone(), o.name.clone())),
            NodeId::Op(t, op) => {
                if name == "runs" {
                    Some(NodeId::Runs(t.clone(), op.clone()))
                } else {
                    by_name(&OpFile::ALL, name).map(|f| NodeId::OpFile(t.clone(), op.clone(), f))
                }
            }
            NodeId::Runs(t, op) => match name.parse::<i64>() {
                Ok(id) => {
                    let path = self.target_path(t);
                    self.journal
                        .get(id)?
                        .filter(|r| r.path == path && &r.op == op)
                        .map(|_| NodeId::Run(t.clone(), op.clone(), id))
                }
                Err(_) => None,
            },
            NodeId::Run(_, _, id) => {
                if name == "discovered" {
                    Some(NodeId::Discovered(*id))
                } else {
                    by_name(&RunFile::ALL, name).map(|f| NodeId::RunFile(*id, f))
                }
            }
            NodeId::Discovered(id) => match name.parse::<usize>() {
                Ok(i) if i >= 1 => self
                    .journal
                    .get(*id)?
                    .filter(|r| i <= r.discovered.len())
                    .map(|_| NodeId::DiscoveredLink(*id, i)),
                _ => None,
            },
            NodeId::Wip => by_name(&WipFile::ALL, name).map(NodeId::WipFile),
            _ => None,
        };
        found.ok_or_else(missing)
    }

    /// A child of the root or a branch: a host mounted exactly there, or a deeper branch.
    fn branch_child(&self, prefix: &[String], name: &str) -> Option<NodeId> {
        let mut path = prefix.to_vec();
        path.push(name.to_string());
        if let Some(i) = self.hosts.iter().position(|m| m.path == path) {
            return Some(NodeId::Entry(EntryRef {
                host: i,
                path: Vec::new(),
            }));
        }
        self.hosts
            .iter()
            .any(|m| m.path.len() > path.len() && m.path.starts_with(&path))
            .then_some(NodeId::Branch(path))
    }

    /// The children a listing shows (non-indexable ones are reachable by name only).
    pub fn list(&self, dir: &NodeId) -> WorldResult<Vec<(String, NodeId)>> {
        let info = |t: &Target| {
            InfoFile::ALL
                .iter()
                .map(|(n, f)| (n.to_string(), NodeId::Info(t.clone(), *f)))
                .collect::<Vec<_>>()
        };
        Ok(match dir {
            NodeId::Root => {
                let mut out = vec![("README.md".to_string(), NodeId::Readme)];
                out.extend(info(&Target::Root));
                out.push(("ops".into(), NodeId::Ops(Target::Root)));
                out.push((".wip".into(), NodeId::Wip));
                out.extend(self.branch_children(&[]));
                out
            }
            NodeId::Branch(prefix) => {
                let mut out = vec![(
                    "description".to_string(),
                    NodeId::BranchDescription(prefix.clone()),
                )];
                out.extend(self.branch_children(prefix));
                out
            }
            NodeId::Entry(e) => {
                let target = Target::Entry(e.clone());
                let mut out = info(&target);
                out.push(("ops".into(), NodeId::Ops(target)));
                let m = self.host(e)?;
                for child in m.host.children(&e.path)? {
                    if !child.info.indexable || !names::is_valid(&child.name) {
                        continue;
                    }
                    let mut path = e.path.clone();
                    path.push(child.name.clone());
                    out.push((
                        names::escape(&child.name),
                        NodeId::Entry(EntryRef { host: e.host, path }),
                    ));
                }
                out
            }
            NodeId::Ops(t) => self
                .ops(t)?
                .iter()
                .map(|o| (o.name.clone(), NodeId::Op(t.clone(), o.name.clone())))
                .collect(),
            NodeId::Op(t, op) => OpFile::ALL
                .iter()
                .map(|(n, f)| (n.to_string(), NodeId::OpFile(t.clone(), op.clone(), *f)))
                .collect(),
            NodeId::Runs(t, op) => self
                .journal
                .runs_of(&self.target_path(t), op, RUNS_LISTED)?
                .into_iter()
                .map(|id| (id.to_string(), NodeId::Run(t.clone(), op.clone(), id)))
                .collect(),
            NodeId::Run(_, _, id) => {
                let mut out: Vec<(String, NodeId)> = RunFile::ALL
                    .iter()
                    .map(|(n, f)| (n.to_string(), NodeId::RunFile(*id, *f)))
                    .collect();
                out.push(("discovered".into(), NodeId::Discovered(*id)));
                out
            }
            NodeId::Discovered(id) => {
                let n = self.run(*id)?.discovered.len();
                (1..=n)
                    .map(|i| (i.to_string(), NodeId::DiscoveredLink(*id, i)))
                    .collect()
            }
            NodeId::Wip => WipFile::ALL
                .iter()
                .map(|(n, f)| (n.to_string(), NodeId::WipFile(*f)))
                .collect(),
            _ => return Err(WorldError::new(ErrorKind::NotSupported, "not a directory")),
        })
    }

    fn branch_children(&self, prefix: &[String]) -> Vec<(String, NodeId)> {
        let mut out: Vec<(String, NodeId)> = Vec::new();
        for m in &self.hosts {
            if m.path.len() > prefix.len() && m.path.starts_with(prefix) {
                let name = m.path[prefix.len()].clone();
                if out.iter().any(|(n, _)| *n == name) {
                    continue;
                }
                if let Some(node) = self.branch_child(prefix, &name) {
                    out.push((name, node));
                }
            }
        }
        out
    }

    // ---- attributes and content ----------------------------------------------------

    /// Caching rule for what a target's host shows.
    fn target_caching(&self, target: &Target) -> Caching {
        match target {
            Target::Root => Caching::Stable(STABLE_TTL),
            Target::Entry(e) => Caching::Stable(
                self.hosts
                    .get(e.host)
                    .map(|m| m.host.cache_ttl())
                    .unwrap_or(STABLE_TTL),
            ),
        }
    }

    pub fn attr(&self, node: &NodeId, session: u32) -> WorldResult<NodeAttr> {
        let dir = |caching| NodeAttr {
            kind: NodeKind::Dir,
            size: 0,
            writable: false,
            caching,
            modified: None,
        };
        Ok(match node {
            NodeId::Root | NodeId::Branch(_) | NodeId::Wip | NodeId::Discovered(_) => {
                dir(Caching::Stable(STABLE_TTL))
            }
            NodeId::Entry(e) => {
                let caching = self.target_caching(&Target::Entry(e.clone()));
                NodeAttr {
                    modified: self.modified(e, caching)?,
                    ..dir(caching)
                }
            }
            NodeId::Ops(t) | NodeId::Op(t, _) => dir(self.target_caching(t)),
            // Its listing is invalidated with every call of the op.
            NodeId::Runs(..) => dir(Caching::Stable(STABLE_TTL)),
            NodeId::Run(..) => dir(Caching::Stable(STABLE_TTL)),
            NodeId::DiscoveredLink(..) => NodeAttr {
                kind: NodeKind::Symlink,
                size: self.readlink(node)?.len() as u64,
                writable: false,
                caching: Caching::Stable(STABLE_TTL),
                modified: None,
            },
            NodeId::OpFile(_, _, OpFile::Call) => NodeAttr {
                kind: NodeKind::File,
                size: 0,
                writable: true,
                caching: self.caching(node)?,
                modified: None,
            },
            _ => {
                let caching = self.file_caching(node)?;
                let modified = match node {
                    NodeId::Info(Target::Entry(e), _) => self.modified(e, caching)?,
                    _ => None,
                };
                NodeAttr {
                    kind: NodeKind::File,
                    size: self.read(node, session)?.len() as u64,
                    writable: false,
                    caching,
                    modified,
                }
            }
        })
    }

    /// The host's modification time of an entry, asked only of hosts whose backend changes
    /// behind our back (short cache TTL): the kernel uses it to drop stale listings.
    fn modified(
        &self,
        e: &EntryRef,
        caching: Caching,
    ) -> WorldResult<Option<std::time::SystemTime>> {
        match caching {
            Caching::Stable(ttl) if ttl >= STABLE_TTL => Ok(None),
            _ => Ok(self.host(e)?.host.entry(&e.path)?.and_then(|i| i.modified)),
        }
    }

    /// How the kernel may cache a file, without computing its content.
    pub fn caching(&self, node: &NodeId) -> WorldResult<Caching> {
        match node {
            NodeId::OpFile(t, _, OpFile::Call) => Ok(Caching::Direct(self.target_caching(t).ttl())),
            _ => self.file_caching(node),
        }
    }

    fn file_caching(&self, node: &NodeId) -> WorldResult<Caching> {
        Ok(match node {
            NodeId::Info(t, _) => self.target_caching(t),
            NodeId::OpFile(t, _, OpFile::Description | OpFile::Schema) => self.target_caching(t),
            // Guards and results change with calls, which invalidate them.
            NodeId::OpFile(t, ..) => Caching::Direct(self.target_caching(t).ttl()),
            NodeId::WipFile(WipFile::Log | WipFile::Stats | WipFile::Known | WipFile::Events) => {
                Caching::Direct(STABLE_TTL)
            }
            // It quotes every host's root description, which may change on its own (a
            // server starting, an index refreshing).
            NodeId::Readme => Caching::Direct(STABLE_TTL),
            NodeId::RunFile(id, _) => {
                // A run's files are final once it finished.
                if self.run(*id)?.status == journal::RUNNING {
                    Caching::Direct(Duration::ZERO)
                } else {
                    Caching::Stable(STABLE_TTL)
                }
            }
            _ => Caching::Stable(STABLE_TTL),
        })
    }

    /// The bytes of a file node, as `session` sees them.
    pub fn read(&self, node: &NodeId, session: u32) -> WorldResult<Vec<u8>> {
        let text = match node {
            NodeId::Readme => readme::render(self),
            NodeId::BranchDescription(prefix) => {
                let held: Vec<String> = self
                    .hosts
                    .iter()
                    .filter(|m| m.path.len() > prefix.len() && m.path.starts_with(prefix))
                    .map(|m| format!("{} ({})", m.path[prefix.len()..].join("/"), m.kind))
                    .collect();
                line(&format!(
                    "Folder of {}: {}",
                    if held.len() == 1 { "one host" } else { "hosts" },
                    held.join(", ")
                ))
            }
            NodeId::Info(Target::Root, InfoFile::Description) => line(&self.description()),
            NodeId::Info(Target::Root, InfoFile::Ref) => {
                line(&format!("wip://{}", self.settings.name))
            }
            NodeId::Info(Target::Entry(e), f) => {
                let info = self
                    .host(e)?
                    .host
                    .entry(&e.path)?
                    .ok_or_else(|| WorldError::not_found("this entry no longer exists"))?;
                match f {
                    InfoFile::Description => line(&info.description),
                    InfoFile::Ref => line(&info.reference),
                }
            }
            NodeId::OpFile(t, op, f) => {
                let spec = self.op_spec(t, op)?;
                match f {
                    OpFile::Description => line(&spec.description),
                    OpFile::Schema => line(
                        &serde_json::to_string_pretty(&spec.schema)
                            .map_err(|e| WorldError::backend(e.to_string()))?,
                    ),
                    OpFile::Guard => self.guard(t, op)?.render(),
                    OpFile::Call => String::new(),
                    OpFile::Result => self.result_for(t, op, session)?,
                }
            }
            NodeId::RunFile(id, f) => {
                let run = self.run(*id)?;
                match f {
                    RunFile::Args => line(&run.args),
                    RunFile::Status => line(&run.status),
                    RunFile::Result => run.result,
                    RunFile::Guard => run.guard,
                    RunFile::Caller => format!(
                        "pid {} · uid {} · session {} · {}\nstarted {}\nfinished {}\n",
                        run.pid,
                        run.uid,
                        run.session,
                        run.command,
                        run.started,
                        run.finished.as_deref().unwrap_or("-")
                    ),
                }
            }
            NodeId::WipFile(WipFile::Log) => self.log_text()?,
            NodeId::WipFile(WipFile::Config) => self.config_text.clone(),
            NodeId::WipFile(WipFile::Known) => self.known_text()?,
            NodeId::WipFile(WipFile::Events) => {
                let mut out = String::new();
                for e in self.journal.events_after(self.events_start, EVENTS_SHOWN)? {
                    out.push_str(&event_line(&e));
                }
                out
            }
            NodeId::WipFile(WipFile::Stats) => format!(
                "materialised_nodes {}\ncalls {}\nuptime_s {}\n",
                self.materialised.load(Ordering::Relaxed),
                self.journal.count()?,
                self.started.elapsed().as_secs()
            ),
            _ => return Err(WorldError::new(ErrorKind::NotSupported, "not a file")),
        };
        Ok(text.into_bytes())
    }

    /// Target of a `discovered/N` link, relative to the link's folder.
    pub fn readlink(&self, node: &NodeId) -> WorldResult<String> {
        let NodeId::DiscoveredLink(id, i) = node else {
            return Err(WorldError::new(ErrorKind::NotSupported, "not a symlink"));
        };
        let run = self.run(*id)?;
        let target = run
            .discovered
            .get(i - 1)
            .ok_or_else(|| WorldError::not_found("no such discovered entry"))?;
        // The link lives in <entry>/ops/<op>/runs/<id>/discovered/.
        let depth = run.path.split('/').filter(|s| !s.is_empty()).count() + 5;
        Ok(format!(
            "{}{}",
            "../".repeat(depth),
            target.trim_start_matches('/')
        ))
    }

    fn run(&self, id: i64) -> WorldResult<Run> {
        self.journal
            .get(id)?
            .ok_or_else(|| WorldError::not_found(format!("no run {id}")))
    }

    pub fn description(&self) -> String {
        let mut text = self
            .settings
            .description
            .clone()
            .unwrap_or_else(|| format!("World `{}`.", self.settings.name));
        let names: Vec<String> = self.hosts.iter().map(|m| m.path.join("/")).collect();
        text.push_str(&format!(
            " Hosts: {}. You act as {} ({}).",
            names.join(", "),
            self.identity.user,
            self.identity.role.as_str()
        ));
        text
    }

    fn known_text(&self) -> WorldResult<String> {
        let (entries, total) = self.known.recent(KNOWN_SHOWN)?;
        let mut out = String::new();
        for e in &entries {
            let mark = if e.indexable { "" } else { " (not indexable)" };
            out.push_str(&format!("{}\t{}{mark}\n", e.path, e.description));
        }
        if total as usize > entries.len() {
            out.push_str(&format!(
                "… {} more known entries; search them all with ops/locate\n",
                total as usize - entries.len()
            ));
        }
        Ok(out)
    }

    fn log_text(&self) -> WorldResult<String> {
        let mut out = String::new();
        for run in self.journal.recent(LOG_LINES)? {
            let first = run.result.lines().next().unwrap_or("");
            out.push_str(&format!(
                "#{} {} {:<11} {} {} args={} pid={} ({}) → {}\n",
                run.id,
                run.started,
                run.status,
                run.path,
                run.op,
                run.args,
                run.pid,
                run.command.split(' ').next().unwrap_or(""),
                first
            ));
        }
        if out.is_empty() {
            out.push_str("no calls yet\n");
        }
        Ok(out)
    }

    // ---- ops, guards, calls -------------------------------------------------------

    /// The ops of a target. A walk asks for them once per op file, so they are kept
    /// briefly (and dropped after every call that changed something).
    pub fn ops(&self, target: &Target) -> WorldResult<OpList> {
        if let Some((at, ops)) = self
            .ops_cache
            .lock()
            .ok()
            .and_then(|c| c.get(target).cloned())
        {
            if at.elapsed() < OPS_CACHE {
                return Ok(ops);
            }
        }
        let ops = Arc::new(match target {
            Target::Root => root_ops(),
            Target::Entry(e) => self.host(e)?.host.ops(&e.path)?,
        });
        if let Ok(mut c) = self.ops_cache.lock() {
            if c.len() >= 1024 {
                // Entries live seconds: dropping all at a bound keeps inserts O(1).
                c.clear();
            }
            c.insert(target.clone(), (Instant::now(), Arc::clone(&ops)));
        }
        Ok(ops)
    }

    fn op_spec(&self, target: &Target, op: &str) -> WorldResult<OpSpec> {
        self.ops(target)?
            .iter()
            .find(|o| o.name == op)
            .cloned()
            .ok_or_else(|| WorldError::not_found(format!("no op {op:?} here")))
    }

    /// The guard as the `guard` file shows it (cached briefly).
    pub fn guard(&self, target: &Target, op: &str) -> WorldResult<Guard> {
        let key = (target.clone(), op.to_string());
        if let Ok(cache) = self.guards.lock() {
            if let Some((at, g)) = cache.get(&key) {
                if at.elapsed() < GUARD_CACHE {
                    return Ok(g.clone());
                }
            }
        }
        let guard = self.evaluate_guard(target, op, None)?;
        if let Ok(mut cache) = self.guards.lock() {
            if cache.len() >= 1024 {
                // Entries live half a second: dropping all at a bound keeps inserts O(1).
                cache.clear();
            }
            cache.insert(key, (Instant::now(), guard.clone()));
        }
        Ok(guard)
    }

    fn evaluate_guard(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
    ) -> WorldResult<Guard> {
        match target {
            Target::Root => Ok(Guard::default()),
            Target::Entry(e) => Ok(self.host(e)?.host.guard(&e.path, op, args)?),
        }
    }

    fn result_for(&self, target: &Target, op: &str, session: u32) -> WorldResult<String> {
        let key = (target.clone(), op.to_string());
        let remembered = self.results.lock().ok().and_then(|r| {
            r.get(&key)
                .map(|o| o.by_session.get(&session).copied().unwrap_or(o.latest))
        });
        let id = match remembered {
            Some(id) => Some(id),
            None => self.journal.latest(&self.target_path(target), op)?,
        };
        match id {
            Some(id) => Ok(self.run(id)?.result),
            None => Ok(String::new()),
        }
    }

    /// The text of one run's result (what `call` returns when read back on its descriptor).
    pub fn run_result(&self, id: i64) -> WorldResult<String> {
        Ok(self.run(id)?.result)
    }

    /// Run `op` on `target` with the raw bytes written into `call`.
    ///
    /// Every outcome, including invalid arguments and blocked guards, becomes a run in the
    /// journal with its words; the error is also returned so the writer gets the errno.
    pub fn call(
        self: &Arc<Self>,
        target: &Target,
        op: &str,
        bytes: &[u8],
        caller: &Caller,
    ) -> CallReport {
        let path = self.target_path(target);
        let spec = match self.op_spec(target, op) {
            Ok(s) => s,
            Err(e) => return self.record_failure(target, op, &path, caller, "", e),
        };
        let args = match args::parse_and_validate(bytes, &spec.schema) {
            Ok(a) => a,
            Err(e) => {
                let raw = String::from_utf8_lossy(bytes).into_owned();
                return self.record_failure(target, op, &path, caller, &raw, e);
            }
        };
        let args_text = args.to_string();
        let guard = match self.evaluate_guard(target, op, Some(&args)) {
            Ok(g) => g,
            Err(e) => return self.record_failure(target, op, &path, caller, &args_text, e),
        };
        let guard_text = guard.render();
        let id = match self
            .journal
            .begin(caller, &path, op, &args_text, &guard_text)
        {
            Ok(id) => id,
            Err(e) => {
                // Without a journal row the call must not run: nothing may go unrecorded.
                return CallReport {
                    run: 0,
                    text: format!("error: {e}\n"),
                    outcome: Err(e),
                };
            }
        };
        let (outcome, abandoned) = if guard.allowed() {
            self.run_with_timeout(target, op, args, caller, id)
        } else {
            (Err(host::HostError::Blocked(guard).into()), None)
        };
        let report = self.complete(target, op, caller.session, id, outcome);
        if let Some(handoff) = abandoned {
            // Only now may a late outcome overwrite the timed-out record.
            handoff.recorded();
        }
        report
    }

    fn record_failure(
        &self,
        target: &Target,
        op: &str,
        path: &str,
        caller: &Caller,
        args: &str,
        error: WorldError,
    ) -> CallReport {
        // Failed before its guard was evaluated: the run records no guard.
        match self.journal.begin(caller, path, op, args, "") {
            Ok(id) => self.complete(target, op, caller.session, id, Err(error)),
            Err(e) => CallReport {
                run: 0,
                text: format!("error: {error} (and the journal failed: {e})\n"),
                outcome: Err(error),
            },
        }
    }

    /// Run the host call on its own thread so a backend that hangs costs the caller
    /// `call_timeout`, not the mount. A late finish is still journaled and invalidated.
    fn run_with_timeout(
        self: &Arc<Self>,
        target: &Target,
        op: &str,
        args: Value,
        caller: &Caller,
        id: i64,
    ) -> (WorldResult<Outcome>, Option<Arc<Handoff>>) {
        let Target::Entry(e) = target else {
            return (self.root_call(op, &args), None);
        };
        let host = match self.host(e) {
            Ok(m) => &m.host,
            Err(err) => return (Err(err), None),
        };
        if host.bounded_calls() {
            // No thread hand-off: two context switches cost more than most calls.
            let outcome = host
                .call(&e.path, op, &args, caller)
                .map(|o| Outcome::of_host(e.host, o))
                .map_err(WorldError::from);
            return (outcome, None);
        }
        let handoff = Arc::new(Handoff::default());
        let world = Arc::clone(self);
        let (entry, op_name, who, slot) = (
            e.clone(),
            op.to_string(),
            caller.clone(),
            Arc::clone(&handoff),
        );
        let spawned = self.pool.run(move || {
            let result = match world.hosts.get(entry.host) {
                Some(m) => m
                    .host
                    .call(&entry.path, &op_name, &args, &who)
                    .map(|o| Outcome::of_host(entry.host, o))
                    .map_err(WorldError::from),
                None => Err(WorldError::not_found("no such host")),
            };
            if let Some(late) = slot.deliver(result) {
                // The caller timed out and recorded so: record the late outcome over it.
                world.finish_late(&Target::Entry(entry), &op_name, id, late);
            }
        });
        if let Err(e) = spawned {
            return (
                Err(WorldError::backend(format!("cannot start the call: {e}"))),
                None,
            );
        }
        let timeout = self.settings.call_timeout();
        match handoff.wait(timeout) {
            Some(result) => (result, None),
            None => (
                Err(WorldError::new(
                    ErrorKind::TimedOut,
                    format!(
                        "timed out after {:.1}s; the call goes on in the background and its outcome will appear in {}",
                        timeout.as_secs_f64(),
                        self.absolute(&format!("{}/ops/{op}/runs/{id}/result", trim_root(&self.target_path(target))))
                    ),
                )),
                Some(handoff),
            ),
        }
    }

    fn finish_late(&self, target: &Target, op: &str, id: i64, outcome: WorldResult<Outcome>) {
        let (_, _, mut nodes) = self.record(
            target,
            op,
            id,
            outcome,
            "(finished after the caller timed out)\n",
        );
        self.forget_guards();
        nodes.extend(Self::changed_by_any_call(target, op));
        // The run itself was final (timed out) and may be cached: it changed.
        nodes.extend(RunFile::ALL.iter().map(|(_, f)| NodeId::RunFile(id, *f)));
        self.publish(&nodes);
    }

    /// Tell the kernel's caches what changed (the FUSE layer's sink), before the caller
    /// hears back, so its next read sees the change.
    fn publish(&self, nodes: &[NodeId]) {
        let sink = self.sink.lock().ok().and_then(|s| s.clone());
        if let Some(sink) = sink {
            sink(nodes);
        }
    }

    /// Write a call's outcome to its run; returns the outcome, its `result` text and the
    /// nodes it changed. A successful text starts with `prefix`.
    fn record(
        &self,
        target: &Target,
        op: &str,
        id: i64,
        outcome: WorldResult<Outcome>,
        prefix: &str,
    ) -> (Result<(), WorldError>, String, Vec<NodeId>) {
        let (status, errno, text, discovered, changed, mut events, result) = match outcome {
            Ok(o) => {
                let (text, discovered, changed, events) = self.render_success(&o);
                let text = format!("{prefix}{text}");
                ("ok", 0, text, discovered, changed, events, Ok(()))
            }
            Err(e) => (
                e.kind.status(),
                e.errno(),
                format!("error: {e}\n"),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Err(e),
            ),
        };
        events.insert(
            0,
            Event {
                kind: "call".into(),
                path: self.target_path(target),
                op: Some(op.to_string()),
                run: Some(id),
                status: Some(status.to_string()),
                ..Default::default()
            },
        );
        if let Err(e) = self
            .journal
            .finish(id, status, errno, &text, &discovered, &events)
        {
            tracing::error!(run = id, "journal: {e}");
        }
        (result, text, changed)
    }

    /// What every call changes, whatever it did: its runs, its result, the log.
    fn changed_by_any_call(target: &Target, op: &str) -> [NodeId; 6] {
        [
            NodeId::Runs(target.clone(), op.to_string()),
            NodeId::OpFile(target.clone(), op.to_string(), OpFile::Result),
            NodeId::WipFile(WipFile::Log),
            NodeId::WipFile(WipFile::Stats),
            NodeId::WipFile(WipFile::Known),
            NodeId::WipFile(WipFile::Events),
        ]
    }

    /// A call changed the world: guards and op lists may differ now.
    fn forget_guards(&self) {
        if let Ok(mut g) = self.guards.lock() {
            g.clear();
        }
        if let Ok(mut o) = self.ops_cache.lock() {
            o.clear();
        }
    }

    /// Result text, discovered world paths and changed nodes of a successful call.
    fn render_success(&self, outcome: &Outcome) -> (String, Vec<String>, Vec<NodeId>, Vec<Event>) {
        let mut text = outcome.result.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let mut discovered = Vec::new();
        let mut found: Vec<(usize, Vec<String>)> = outcome.discovered.clone();
        for p in &outcome.elsewhere {
            match self.entry_at(p) {
                Some(e) => found.push((e.host, e.path)),
                None => tracing::debug!(path = p, "a found path is not an entry"),
            }
        }
        for (h, rel) in &found {
            let world_path = self.entry_path(*h, rel);
            let info = self
                .hosts
                .get(*h)
                .and_then(|m| m.host.entry(rel).ok().flatten());
            let description = match &info {
                Some(i) => {
                    let e = EntryRef {
                        host: *h,
                        path: rel.clone(),
                    };
                    self.note_ancestors(&e);
                    self.remember(&e, i);
                    i.description.clone()
                }
                None => String::new(),
            };
            text.push_str(&format!(
                "{}\t{}\n",
                self.absolute(&world_path),
                description
            ));
            discovered.push(world_path);
        }
        let mut events: Vec<Event> = discovered
            .iter()
            .map(|p| Event {
                kind: "discovered".into(),
                path: p.clone(),
                ..Default::default()
            })
            .collect();
        let (changed, change_events) = self.changed_entries(&outcome.changed);
        events.extend(change_events);
        (text, discovered, changed, events)
    }

    /// The nodes and change-feed events of entries that changed.
    fn changed_entries(&self, entries: &[(usize, Vec<String>)]) -> (Vec<NodeId>, Vec<Event>) {
        let mut changed = Vec::new();
        let mut events = Vec::new();
        for (h, p) in entries {
            let gone = self
                .hosts
                .get(*h)
                .is_some_and(|m| matches!(m.host.entry(p), Ok(None)));
            events.push(Event {
                kind: if gone { "removed" } else { "changed" }.into(),
                path: self.entry_path(*h, p),
                ..Default::default()
            });
            let e = EntryRef {
                host: *h,
                path: p.clone(),
            };
            let target = Target::Entry(e.clone());
            changed.push(NodeId::Info(target.clone(), InfoFile::Description));
            // The set of ops may change with the entry's state (a server's new tools).
            changed.push(NodeId::Ops(target.clone()));
            // The entry's guards depend on its state: their sizes may have changed.
            if let Ok(ops) = self.ops(&target) {
                for o in ops.iter() {
                    changed.push(NodeId::OpFile(
                        target.clone(),
                        o.name.clone(),
                        OpFile::Guard,
                    ));
                }
            }
            if p.is_empty() {
                // The root README quotes every host's root description.
                changed.push(NodeId::Readme);
            }
            changed.push(NodeId::Entry(e));
        }
        (changed, events)
    }

    /// Entries a host reports changed on their own: journal them in the change feed and
    /// drop the kernel's cached copies.
    pub fn host_changed(&self, change: &HostChange) {
        if change.host >= self.hosts.len() {
            return;
        }
        self.forget_guards();
        let entries: Vec<(usize, Vec<String>)> = change
            .paths
            .iter()
            .map(|p| (change.host, p.clone()))
            .collect();
        let (mut nodes, events) = self.changed_entries(&entries);
        if let Err(e) = self.journal.record_events(&events) {
            tracing::error!("journal: {e}");
        }
        nodes.push(NodeId::WipFile(WipFile::Events));
        self.publish(&nodes);
    }

    /// Apply hosts' own changes as they arrive, until every sender is gone.
    pub fn listen_for_host_changes(
        self: &Arc<Self>,
        changes: std::sync::mpsc::Receiver<HostChange>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        let world = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("host-changes".into())
            .spawn(move || {
                while let Ok(change) = changes.recv() {
                    match world.upgrade() {
                        Some(w) => w.host_changed(&change),
                        None => break,
                    }
                }
            })
    }

    fn complete(
        &self,
        target: &Target,
        op: &str,
        session: u32,
        id: i64,
        outcome: WorldResult<Outcome>,
    ) -> CallReport {
        let (result, text, mut changed) = self.record(target, op, id, outcome, "");
        if let Ok(mut results) = self.results.lock() {
            let r = results.entry((target.clone(), op.to_string())).or_default();
            r.latest = id;
            r.by_session.insert(session, id);
        }
        if !changed.is_empty() {
            self.forget_guards();
        }
        changed.extend(Self::changed_by_any_call(target, op));
        self.publish(&changed);
        CallReport {
            run: id,
            text,
            outcome: result,
        }
    }

    // ---- root ops -----------------------------------------------------------------

    fn root_call(&self, op: &str, args: &Value) -> WorldResult<Outcome> {
        let text_arg = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or("").trim();
        match op {
            "resolve" => {
                let reference = text_arg("ref");
                let mut out = Outcome::default();
                for (i, m) in self.hosts.iter().enumerate() {
                    for p in m.host.resolve(reference) {
                        if m.host.entry(&p)?.is_some() {
                            out.discovered.push((i, p));
                        }
                    }
                }
                // Other places the object was seen (search hits, query rows, …).
                for path in self.known.paths_of(reference)? {
                    self.push_known(&mut out, &path);
                }
                if out.discovered.is_empty() {
                    return Err(WorldError::not_found(format!(
                        "no entry has the ref {reference:?} (refs look like the content of any entry's `ref` file)"
                    )));
                }
                out.result = format!("{} path(s) for {reference}:", out.discovered.len());
                Ok(out)
            }
            "locate" => {
                let query = text_arg("query");
                let words: Vec<String> = query.split_whitespace().map(str::to_string).collect();
                if words.is_empty() {
                    return Err(WorldError::invalid(
                        "locate needs a query: words to find in paths and descriptions",
                    ));
                }
                let mut out = Outcome::default();
                for e in self.known.locate(&words, FOUND_MAX)? {
                    self.push_known(&mut out, &e.path);
                }
                out.result = format!(
                    "{} known entr{} match {query:?} (the known world: what was looked at or discovered; .wip/known lists it)",
                    out.discovered.len(),
                    if out.discovered.len() == 1 { "y" } else { "ies" }
                );
                Ok(out)
            }
            "events" => {
                let since = args.get("since").and_then(Value::as_i64).unwrap_or(0);
                let events = self.journal.events_after(since, FOUND_MAX)?;
                let mut text: String = events.iter().map(event_line).collect();
                match events.last() {
                    Some(last) if events.len() == FOUND_MAX => {
                        text.push_str(&format!("… more: call again with since={}\n", last.cursor))
                    }
                    Some(_) => {}
                    None => text.push_str(&format!("no events after {since}\n")),
                }
                Ok(Outcome {
                    result: text,
                    ..Default::default()
                })
            }
            other => Err(WorldError::not_found(format!(
                "no op {other:?} at the root"
            ))),
        }
    }

    /// Add a known world path to a root op's discovered entries, if it still exists.
    fn push_known(&self, out: &mut Outcome, path: &str) {
        if let Ok(NodeId::Entry(e)) = self.resolve_path(path) {
            let item = (e.host, e.path);
            if !out.discovered.contains(&item) {
                out.discovered.push(item);
            }
        }
    }
}

/// One line of the change feed: JSON with its cursor.
fn event_line(e: &Event) -> String {
    let mut line = serde_json::to_string(e).unwrap_or_default();
    line.push('\n');
    line
}

fn trim_root(p: &str) -> &str {
    if p == "/" {
        ""
    } else {
        p
    }
}

/// Text files end with one newline.
fn line(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_string()
    } else {
        format!("{s}\n")
    }
}

fn root_ops() -> Vec<OpSpec> {
    vec![
        OpSpec {
            name: "resolve".into(),
            description: "resolve(ref): every path where the object with this ref appears".into(),
            schema: json!({
                "type": "object",
                "properties": {"ref": {"type": "string", "description": "an object's ref, e.g. tracker://demo/issues/42"}},
                "required": ["ref"],
                "additionalProperties": false
            }),
        },
        OpSpec {
            name: "locate".into(),
            description:
                "locate(query): known, indexable entries whose path or description holds every word"
                    .into(),
            schema: json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "words, any case, all must match"}},
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        OpSpec {
            name: "events".into(),
            description:
                "events(since?): the change feed after a cursor, as JSON lines (resumable)".into(),
            schema: json!({
                "type": "object",
                "properties": {"since": {"type": "integer", "minimum": 0, "description": "the last cursor you saw; 0 for the start"}},
                "additionalProperties": false
            }),
        },
    ]
}
