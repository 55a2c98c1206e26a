//! The world model: hosts mounted at paths, the virtual files every entry carries
//! (`description`, `ref`, `body`, `ops/NAME/{description,schema,guard,call,result,runs/}`)
//! and the root's own ops.
//!
//! It knows no FUSE and no storage engine: the adapter in `fuse/` asks it for nodes,
//! attributes and bytes and hands it what is written into `call`; state is behind
//! `crate::state::Journal`; changes reach the kernel through the `Subscriber` the world is
//! made with. The parts: `tree` (lookup and listing), `content` (attributes, times and
//! bytes of files), `root_ops` (locate, resolve, events), `remote` (other mounts'
//! changes) and `call/`, the call pipeline with its own state (`Calls`).

pub mod cache;
pub mod call;
mod content;
pub mod error;
pub mod node;
mod readme;
mod remote;
mod root_ops;
pub mod settings;
pub mod titles;
mod tree;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::host::{self, names, Guard, Host, HostChange, OpSpec};
use crate::state::Journal;
use crate::state::{Known, KnownEntry};
use crate::world::settings::{Identity, WorldSettings};
use cache::TtlCache;
use call::{approvals, budget, live, pool, run, Calls};
pub use call::{BodyDoc, CallDoc, CallReport, Decided, Person, Verb};
pub use content::Snapshot;
use error::{ErrorKind, WorldError, WorldResult};
use node::*;

/// Kernel cache lifetime for what never changes (schemas, op descriptions, the README).
pub const STABLE_TTL: Duration = Duration::from_secs(3600);
/// A host whose nodes the kernel may keep at least this long reports its changes (through
/// calls, or on its own): what it said of an entry may be reused for a moment, and its
/// files' pages are kept across opens.
pub const REPORTED_TTL: Duration = Duration::from_secs(60);
/// How long a guard evaluation is reused (a `stat` then `cat` of `guard` asks once).
const GUARD_CACHE: Duration = Duration::from_millis(500);
/// How long an entry's op list is reused.
const OPS_CACHE: Duration = Duration::from_secs(2);
/// How long what a host said of an entry (in a listing or a lookup) is reused for its
/// `description`, `ref` and attributes: a walk asks for each of them right after listing
/// the parent, and the kernel asks again after any read (it drops a file's attributes
/// then). Only hosts that report every change are cached (see `keeps_infos`), as long as
/// the kernel may keep their nodes; any call's change and any host change empty it.
const INFO_CACHE: Duration = REPORTED_TTL;
/// How long a body a host gave is reused: a listing shows `body` and every later `stat`
/// sizes it (the kernel asks again after each read), so as long as entry infos.
const BODY_CACHE: Duration = INFO_CACHE;
/// How long an entry a call removed keeps its ops' results and runs at its path.
const GONE_KEEP: Duration = Duration::from_secs(600);
/// Bound of the entry-info cache (a listing of a large collection fills it at once).
const INFO_CACHE_MAX: usize = 200_000;
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

/// Who hears of the world's changes: the FUSE layer's kernel-cache invalidator, given to
/// the world when it is made (no adapter reaches into the world afterwards).
pub trait Subscriber: Send + Sync {
    /// These nodes changed, by a call (also one that ends after its caller gave up
    /// waiting) or a host: drop what the kernel cached of them, before the caller hears
    /// back, so its next read sees the change.
    fn changed(&self, nodes: &[NodeId]);

    /// How many nodes the kernel holds now (`.wip/stats`).
    fn held(&self) -> usize;
}

/// No kernel behind the world (tests, benchmarks in-process): nothing to tell.
pub struct Unsubscribed;

impl Subscriber for Unsubscribed {
    fn changed(&self, _nodes: &[NodeId]) {}

    fn held(&self) -> usize {
        0
    }
}

/// Where a world keeps its state: SQLite in `dir`, or the PostgreSQL database `url`
/// names, shared with every mount that uses it (mount-local files stay in `dir`).
#[derive(Clone, Copy)]
pub struct StateAt<'a> {
    pub dir: &'a Path,
    pub url: Option<&'a str>,
}

pub struct World {
    settings: WorldSettings,
    identity: Identity,
    hosts: Vec<Mounted>,
    journal: Arc<dyn Journal>,
    mount_point: PathBuf,
    config_text: String,
    guards: TtlCache<(Target, String), Guard>,
    ops_cache: TtlCache<Target, OpList>,
    infos: TtlCache<EntryRef, host::EntryInfo>,
    /// When entries last changed, reused like `infos` (every node of an entry shows it).
    mtimes: TtlCache<EntryRef, Option<std::time::SystemTime>>,
    /// Entries' bodies as their hosts last gave them, reused like `infos` (a listing shows
    /// `body` and the next `stat` sizes it).
    bodies: TtlCache<EntryRef, host::Body>,
    /// Entries a call of their own removed, with the ops that ran: the caller can still
    /// read `ENTRY/ops/NAME/result` (and `runs/`) at the path it used, for a while.
    gone: TtlCache<EntryRef, Arc<Vec<String>>>,
    subscriber: Arc<dyn Subscriber>,
    /// The call pipeline's own state.
    calls: Calls,
    known: Known,
    /// Entries seen to be non-indexable: their descendants are out of the indexable range.
    hidden: Mutex<HashSet<EntryRef>>,
    /// Ancestors of discovered entries seen to be indexable (bounded; see `note_ancestors`).
    shown: Mutex<HashSet<EntryRef>>,
    /// The change feed's cursor when this mount started (`.wip/events` shows what follows).
    events_start: i64,
    started: Instant,
    /// Calls found running at start-up (cut off by a crash), now marked interrupted.
    pub interrupted_at_start: usize,
    /// The shared state database and this mount's origin in it, when state is shared.
    shared: Option<remote::OtherMounts>,
    /// The state directory (runs' content files live under it).
    state_dir: PathBuf,
}

impl World {
    /// A world whose state (journal, known world, approvals) is where `state` says, and
    /// whose changes `subscriber` hears.
    pub fn new(
        settings: WorldSettings,
        identity: Identity,
        hosts: Vec<Mounted>,
        state: StateAt<'_>,
        mount_point: PathBuf,
        config_text: String,
        subscriber: Arc<dyn Subscriber>,
    ) -> WorldResult<World> {
        let state_dir = state.dir;
        std::fs::create_dir_all(state_dir).map_err(|e| {
            WorldError::backend(format!(
                "cannot create state dir {}: {e}",
                state_dir.display()
            ))
        })?;
        // Who this mount is among others sharing its state (a look at the host name),
        // asked only when state is shared.
        let origin = state
            .url
            .map(|_| remote::origin(state_dir))
            .unwrap_or_default();
        let crate::state::Opened {
            journal,
            interrupted,
            shared,
        } = crate::state::open(state_dir, state.url, &origin)?;
        let known = Known::open(Arc::clone(&journal))?;
        let shared = shared.map(|db| remote::OtherMounts::new(db, origin));
        let events_start = journal.last_event()?;
        let max_call_threads = settings.max_call_threads;
        let buffered = budget::Budget::new(settings.max_buffered_bytes);
        let mut world = World {
            settings,
            identity,
            hosts,
            journal,
            mount_point,
            config_text,
            guards: TtlCache::new(GUARD_CACHE, 1024),
            ops_cache: TtlCache::new(OPS_CACHE, 1024),
            infos: TtlCache::new(INFO_CACHE, INFO_CACHE_MAX),
            mtimes: TtlCache::new(INFO_CACHE, INFO_CACHE_MAX),
            bodies: TtlCache::new(BODY_CACHE, 20_000),
            gone: TtlCache::new(GONE_KEEP, 4096),
            subscriber,
            calls: Calls {
                pool: pool::Pool::new(max_call_threads),
                watch: Arc::default(),
                results: Mutex::new(HashMap::new()),
                unrecorded: Mutex::new(HashMap::new()),
                buffered,
                live: live::Live::default(),
                seqs: Mutex::new(HashMap::new()),
                approvals: approvals::Approvals::default(),
            },
            known,
            hidden: Mutex::new(HashSet::new()),
            shown: Mutex::new(HashSet::new()),
            events_start,
            started: Instant::now(),
            interrupted_at_start: interrupted.len(),
            shared,
            state_dir: state_dir.to_path_buf(),
        };
        let settled = world.settle_interrupted(&interrupted);
        world.interrupted_at_start = interrupted.len() - settled;
        if settled > 0 {
            tracing::info!(
                runs = settled,
                "runs cut off by the last stop were settled by their hosts"
            );
        }
        Ok(world)
    }

    /// Runs a crash cut off, settled where their host can tell: a transactional host kept
    /// each run's id with its change (`Caller::run`), so a run it knows is `ok` with the
    /// result the host recorded, and one it does not know changed nothing (`not_run`).
    /// Runs of hosts that cannot tell stay `interrupted`. Returns how many were settled.
    fn settle_interrupted(&self, ids: &[i64]) -> usize {
        let mut settled = 0;
        for &id in ids {
            let Ok(Some(run)) = self.journal.get(id) else {
                continue;
            };
            let Some(e) = self.entry_ref_at(&run.path) else {
                continue;
            };
            let Some(m) = self.hosts.get(e.host) else {
                continue;
            };
            let key = format!("{}:{id}", self.journal.id());
            let (status, errno, text) = match m.host.settle(&e.path, &run.op, &key) {
                Ok(Some(host::Settled::Done(result))) => (
                    "ok",
                    0,
                    format!(
                        "(settled after a restart: the daemon stopped before it recorded this call's outcome, and {} says the call's change was made)\n{}",
                        m.path.join("/"),
                        line(&result)
                    ),
                ),
                Ok(Some(host::Settled::NotRun)) => (
                    crate::state::NOT_RUN,
                    // Nothing ran, as a call stopped before it started: ECANCELED.
                    ErrorKind::Cancelled.errno(),
                    format!(
                        "error: not run: the daemon stopped before this call's change was made ({} has no record of it); nothing changed, and calling again is safe\n",
                        m.path.join("/")
                    ),
                ),
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(run = id, "cannot settle an interrupted run: {err}");
                    continue;
                }
            };
            match self
                .journal
                .settle(id, status, errno, &crate::state::Clean::new(&text))
            {
                Ok(true) => settled += 1,
                Ok(false) => {}
                Err(err) => tracing::warn!(run = id, "cannot settle an interrupted run: {err}"),
            }
        }
        settled
    }

    pub fn settings(&self) -> &WorldSettings {
        &self.settings
    }

    pub fn journal(&self) -> &dyn Journal {
        self.journal.as_ref()
    }

    pub fn hosts(&self) -> &[Mounted] {
        &self.hosts
    }

    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    pub(crate) fn host(&self, entry: &EntryRef) -> WorldResult<&Mounted> {
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
            Target::Run(id) => match self.journal.get(*id) {
                Ok(Some(run)) => self.run_world_path(&run),
                // Only a run that exists has a node; a journal that fails says so later.
                _ => format!("/.wip/runs/{id}"),
            },
        }
    }

    pub(crate) fn entry_path(&self, host: usize, path: &[String]) -> String {
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
    pub(crate) fn remember(&self, e: &EntryRef, info: &host::EntryInfo) {
        let mut indexable = info.indexable;
        if let Ok(mut hidden) = self.hidden.lock() {
            if !info.indexable {
                hidden.insert(e.clone());
            }
            indexable = indexable
                && !(1..e.path.len())
                    .any(|n| hidden.contains(&EntryRef::new(e.host, &e.path[..n])));
        }
        self.known.record(KnownEntry {
            path: self.entry_path(e.host, &e.path),
            reference: info.reference.clone(),
            description: crate::secrets::scrub(&info.description).into_owned(),
            indexable,
        });
    }

    /// What the host says of an entry, reused for a moment after a listing or lookup said
    /// it (`None`: it does not exist; never cached).
    pub(crate) fn entry_info(&self, e: &EntryRef) -> WorldResult<Option<host::EntryInfo>> {
        self.reused(&self.infos, e, |h| h.entry(&e.path))
    }

    /// What the host says of an entry with its whole description: a listing's short form
    /// (`EntryInfo::partial`) is replaced by what `Host::entry` says now.
    pub(crate) fn full_info(&self, e: &EntryRef) -> WorldResult<Option<host::EntryInfo>> {
        match self.entry_info(e)? {
            Some(info) if info.partial => {
                let full = self.host(e)?.host.entry(&e.path)?;
                if let Some(f) = &full {
                    self.note_info(e, f);
                }
                Ok(full)
            }
            other => Ok(other),
        }
    }

    /// What `cache` holds for `e`, else what `ask` gets from its host, kept when the host's
    /// answers may be reused (`keeps_infos`; `None` is never kept).
    pub(crate) fn reused<T: Clone>(
        &self,
        cache: &TtlCache<EntryRef, T>,
        e: &EntryRef,
        ask: impl FnOnce(&dyn Host) -> host::HostResult<Option<T>>,
    ) -> WorldResult<Option<T>> {
        if let Some(v) = cache.get(e) {
            return Ok(Some(v));
        }
        let found = ask(self.host(e)?.host.as_ref())?;
        if let Some(v) = &found {
            if self.keeps_infos(e) {
                cache.insert(e.clone(), v.clone());
            }
        }
        Ok(found)
    }

    /// Keep what a host just said of an entry (see `entry_info`), for hosts that report
    /// every change (see `keeps_infos`): others change behind the mount's back (GitHub's
    /// rate limit, an unwatched directory) and are asked each time.
    pub(crate) fn note_info(&self, e: &EntryRef, info: &host::EntryInfo) {
        if self.keeps_infos(e) {
            self.infos.insert(e.clone(), info.clone());
        }
    }

    /// Whether what `e`'s host says of it may be reused for a moment: only for hosts that
    /// report every change (their kernel cache lifetime is long, see `REPORTED_TTL`).
    pub(crate) fn keeps_infos(&self, e: &EntryRef) -> bool {
        self.hosts
            .get(e.host)
            .is_some_and(|m| m.host.cache_ttl() >= REPORTED_TTL)
    }

    /// A call can discover an entry before anyone looked up its ancestors: ask the host
    /// about those not seen yet, so an entry under a non-indexable folder stays out of the
    /// indexable range.
    pub(crate) fn note_ancestors(&self, e: &EntryRef) {
        const SHOWN_MAX: usize = 100_000;
        let Some(m) = self.hosts.get(e.host) else {
            return;
        };
        for n in 1..e.path.len() {
            let prefix = EntryRef::new(e.host, &e.path[..n]);
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
    pub(crate) fn entry_at(&self, world_path: &str) -> Option<EntryRef> {
        let e = self.entry_ref_at(world_path)?;
        self.hosts
            .get(e.host)?
            .host
            .exists(&e.path)
            .ok()?
            .then_some(e)
    }

    /// The host entry a world path names, without asking whether it exists.
    pub(crate) fn entry_ref_at(&self, world_path: &str) -> Option<EntryRef> {
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
        Some(EntryRef::new(host, path))
    }

    /// Resolve a world path (`/tracker/issues/42`) to its node, walking from the root.
    pub fn resolve_path(&self, world_path: &str) -> WorldResult<NodeId> {
        let mut node = NodeId::Root;
        for seg in world_path.split('/').filter(|s| !s.is_empty()) {
            node = self.lookup(&node, seg)?;
        }
        Ok(node)
    }

    // ---- ops, guards, calls -------------------------------------------------------

    /// The ops of a target. A walk asks for them once per op file, so they are kept
    /// briefly (and dropped after every call that changed something).
    pub fn ops(&self, target: &Target) -> WorldResult<OpList> {
        let ops: WorldResult<OpList> = self.ops_cache.get_or_try(target.clone(), || {
            Ok(Arc::new(match target {
                Target::Root => root_ops::root_ops(),
                Target::Entry(e) => self.host(e)?.host.ops(&e.path)?,
                Target::Run(_) => live::run_ops(),
            }))
        });
        match (ops, target) {
            // Never cached: the host's own answer comes back with the entry.
            (Err(err), Target::Entry(e)) if err.kind == ErrorKind::NotFound => {
                self.gone_ops(e).ok_or(err)
            }
            (other, _) => other,
        }
    }

    /// The ops of an entry a call of its own removed: those that ran, each saying so, so
    /// that `ops/NAME/result` and `ops/NAME/runs/` stay readable at the path.
    fn gone_ops(&self, e: &EntryRef) -> Option<OpList> {
        let ran = self.gone.get(e)?;
        Some(Arc::new(
            ran.iter()
                .map(|op| host::OpSpec {
                    output: None,
                    name: op.clone(),
                    description: format!(
                        "{op}: this entry no longer exists (a call of {op} removed it); its result and runs stay readable here for a while"
                    ),
                    schema: serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
                })
                .collect(),
        ))
    }

    /// Whether `e` is an entry a call of its own removed (and the host has no entry there).
    pub(crate) fn is_gone(&self, e: &EntryRef) -> bool {
        self.gone.get(e).is_some()
    }

    /// After a call on `e` that succeeded: when the entry is no longer there, remember it.
    pub(crate) fn note_if_gone(&self, e: &EntryRef, op: &str) {
        if e.path.is_empty() {
            return;
        }
        let Ok(m) = self.host(e) else { return };
        if !matches!(m.host.exists(&e.path), Ok(false)) {
            return;
        }
        let mut ran: Vec<String> = self.gone.get(e).map(|r| r.to_vec()).unwrap_or_default();
        if !ran.iter().any(|o| o == op) {
            ran.push(op.to_string());
        }
        self.gone.insert(e.clone(), Arc::new(ran));
    }

    pub(crate) fn op_spec(&self, target: &Target, op: &str) -> WorldResult<OpSpec> {
        self.ops(target)?
            .iter()
            .find(|o| o.name == op)
            .cloned()
            .ok_or_else(|| WorldError::not_found(format!("no op {op:?} here")))
    }

    /// The guard as the `guard` file shows it (cached briefly).
    pub fn guard(&self, target: &Target, op: &str) -> WorldResult<Guard> {
        if let Target::Run(_) = target {
            // A run's state changes on its own (it ends): never reused.
            return self.evaluate_guard(target, op, None);
        }
        let key = (target.clone(), op.to_string());
        if let Some(g) = self.guards.get(&key) {
            return Ok(g);
        }
        if let Some(g) = self.all_guards(target, op) {
            return Ok(g);
        }
        self.guards
            .get_or_try(key, || self.evaluate_guard(target, op, None))
    }

    /// Ask a host that can for the guards of all of the entry's ops at once and keep them
    /// (a walk or a file manager reads each op's `guard` in turn): `op`'s guard, or `None`
    /// when the host does not batch or failed (then `op` is asked alone).
    fn all_guards(&self, target: &Target, op: &str) -> Option<Guard> {
        let Target::Entry(e) = target else {
            return None;
        };
        let ops = self.ops(target).ok()?;
        let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
        let guards = self.host(e).ok()?.host.guards(&e.path, &names)?.ok()?;
        let mut wanted = None;
        for (name, mut guard) in names.iter().zip(guards) {
            self.apply_policy(target, name, None, None, &mut guard);
            if *name == op {
                wanted = Some(guard.clone());
            }
            self.guards
                .insert((target.clone(), name.to_string()), guard);
        }
        wanted
    }

    /// The host's guard, then the policy's lines.
    pub(crate) fn evaluate_guard(
        &self,
        target: &Target,
        op: &str,
        args: Option<&Value>,
    ) -> WorldResult<Guard> {
        let mut guard = self.host_guard(target, op, args)?;
        self.apply_policy(target, op, args, None, &mut guard);
        Ok(guard)
    }

    fn host_guard(&self, target: &Target, op: &str, args: Option<&Value>) -> WorldResult<Guard> {
        match target {
            Target::Root => Ok(Guard::default()),
            Target::Entry(e) => Ok(self.host(e)?.host.guard(&e.path, op, args)?),
            Target::Run(id) => self.run_guard(*id, op),
        }
    }

    /// Entries a host reports changed on their own: journal them in the change feed and
    /// drop the kernel's cached copies.
    pub fn host_changed(&self, change: &HostChange) {
        if change.host >= self.hosts.len() {
            return;
        }
        self.forget_cached_state();
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
}

/// Text files end with one newline.
fn line(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_string()
    } else {
        format!("{s}\n")
    }
}

#[cfg(test)]
mod tests;
