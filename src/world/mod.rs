//! The world model: hosts mounted at paths, the virtual files every entry carries
//! (`description`, `ref`, `body`, `ops/NAME/{description,schema,guard,call,result,runs/}`)
//! and the root's own ops.
//!
//! It knows no FUSE and no storage engine: the adapter in `fuse/` asks it for nodes,
//! attributes and bytes and hands what is written into `call` to its pipeline; state is
//! behind `crate::state::Journal`; changes reach the kernel through the `Subscriber` the
//! world is made with. The parts: `World` itself (`tree`: lookup and listing; `content`:
//! attributes, times and bytes of files), `Entries` (the hosts and what they said of
//! their entries), `root_ops` (locate, resolve, events) and `call/`, the call pipeline
//! (`Pipeline`), which reaches the model through `Entries` only.

pub mod call;
mod content;
mod entries;
pub mod error;
pub mod node;
mod readme;
mod root_ops;
pub mod settings;
pub mod titles;
mod tree;
mod undo;
pub mod working;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::host::identity::Identity;
use crate::host::{Host, OpSpec};
use crate::state::{Journal, Known};
use crate::world::settings::WorldSettings;
use call::policy::Policy;
pub use call::{BodyDoc, CallDoc, CallReport, Decided, Person, Pipeline, Verb};
pub use content::Snapshot;
pub use entries::Entries;
use error::{WorldError, WorldResult};
use node::*;

/// Kernel cache lifetime for what never changes (schemas, op descriptions, the README).
pub const STABLE_TTL: Duration = Duration::from_secs(3600);
/// A host whose nodes the kernel may keep at least this long reports its changes (through
/// calls, or on its own): what it said of an entry may be reused for a moment, and its
/// files' pages are kept across opens.
pub const REPORTED_TTL: Duration = Duration::from_secs(60);
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

/// What a world is made of (see `World::new`).
pub struct WorldParts<'a> {
    pub settings: WorldSettings,
    pub identity: Identity,
    pub hosts: Vec<Mounted>,
    /// Where its state (journal, known world, approvals) is.
    pub state: StateAt<'a>,
    pub mount_point: PathBuf,
    /// The manifest's text, shown in `.wip/config`.
    pub config_text: String,
    /// Who hears of its changes.
    pub subscriber: Arc<dyn Subscriber>,
    pub policy: Policy,
}

/// The world: the tree of hosts, entries, ops and runs with their files, and the call
/// pipeline that runs what is written into them.
pub struct World {
    settings: WorldSettings,
    identity: Identity,
    entries: Arc<Entries>,
    journal: Arc<dyn Journal>,
    calls: Arc<Pipeline>,
    config_text: String,
    /// The change feed's cursor when this mount started (`.wip/events` shows what follows).
    events_start: i64,
    started: Instant,
    /// Calls found running at start-up (cut off by a crash) and left interrupted.
    pub interrupted_at_start: usize,
    /// Callers of the working trees' changes lately read from /proc, by (pid, uid).
    callers: crate::cache::TtlCache<(u32, u32), crate::host::Caller>,
    /// Callers of an adapter's remote clients (see `working::REMOTE`).
    remote_callers: std::sync::Mutex<std::collections::HashMap<u32, crate::host::Caller>>,
}

impl World {
    pub fn new(parts: WorldParts<'_>) -> WorldResult<World> {
        let state_dir = parts.state.dir;
        std::fs::create_dir_all(state_dir).map_err(|e| {
            WorldError::backend(format!(
                "cannot create state dir {}: {e}",
                state_dir.display()
            ))
        })?;
        // Who this mount is among others sharing its state (a look at the host name),
        // asked only when state is shared.
        let origin = parts
            .state
            .url
            .map(|_| call::changes::origin(state_dir))
            .unwrap_or_default();
        let crate::state::Opened {
            journal,
            interrupted,
            shared,
        } = crate::state::open(state_dir, parts.state.url, &origin)?;
        // The working tree's runs are written in groups; every read writes them first.
        let grouped = Arc::new(call::record::Grouped::new(journal));
        let journal: Arc<dyn Journal> = grouped.clone();
        let known = Known::open(Arc::clone(&journal))?;
        let policy = Arc::new(parts.policy);
        let entries = Arc::new(Entries::new(
            parts.hosts,
            parts.mount_point,
            known,
            Arc::clone(&policy),
            Arc::clone(&journal),
        ));
        let events_start = journal.last_event()?;
        let calls = Arc::new(Pipeline::new(call::Parts {
            entries: Arc::clone(&entries),
            journal: Arc::clone(&journal),
            grouped,
            subscriber: parts.subscriber,
            settings: parts.settings.clone(),
            state_dir: state_dir.to_path_buf(),
            shared: shared.map(|db| call::changes::OtherMounts::new(db, origin)),
            events_start,
            policy,
        }));
        let settled = calls.settle_interrupted(&interrupted);
        let finished = calls.finish_reverts();
        if finished > 0 {
            tracing::info!(
                reverts = finished,
                "reverts cut off by the last stop were finished"
            );
        }
        if settled > 0 {
            tracing::info!(
                runs = settled,
                "runs cut off by the last stop were settled by their hosts"
            );
        }
        Ok(World {
            settings: parts.settings,
            identity: parts.identity,
            entries,
            journal,
            calls,
            config_text: parts.config_text,
            events_start,
            started: Instant::now(),
            interrupted_at_start: interrupted.len() - settled,
            callers: crate::cache::TtlCache::new(working::CALLER_REUSE, 4096),
            remote_callers: Default::default(),
        })
    }

    /// The call pipeline: open a `call` or `body`, run a document, decide a pending run.
    pub fn calls(&self) -> &Arc<Pipeline> {
        &self.calls
    }

    /// The hosts and what they said of their entries.
    pub fn entries(&self) -> &Entries {
        &self.entries
    }

    pub fn settings(&self) -> &WorldSettings {
        &self.settings
    }

    pub fn journal(&self) -> &dyn Journal {
        &*self.journal
    }

    pub fn hosts(&self) -> &[Mounted] {
        self.entries.hosts()
    }

    pub fn mount_point(&self) -> &Path {
        self.entries.mount_point()
    }

    // ---- paths ----------------------------------------------------------------------

    /// Resolve a world path (`/tracker/issues/42`) to its node, walking from the root.
    pub fn resolve_path(&self, world_path: &str) -> WorldResult<NodeId> {
        let mut node = NodeId::Root;
        let segs: Vec<&str> = world_path.split('/').filter(|s| !s.is_empty()).collect();
        let mut i = 0;
        while i < segs.len() {
            // Into a working tree by a path that names an entry (`files/a/b@/…`): the
            // entry, by its path, without holding the tree's files on the way.
            if let NodeId::Tree(t) = &node {
                if let Some(k) = segs[i..].iter().position(|s| s.ends_with('@')) {
                    if let Some(e) = self.entries.entry_ref_at(&format!(
                        "{}/{}",
                        self.entries.object_path(t.host, &[]),
                        segs[i..=i + k].join("/")
                    )) {
                        if t.node != self.tree_root(t.host).map(|r| r.node).unwrap_or(0) {
                            return Err(WorldError::not_found(
                                "resolved from the tree's root only",
                            ));
                        }
                        node = NodeId::Entry(e);
                        i += k + 1;
                        continue;
                    }
                }
            }
            node = self.lookup(&node, segs[i])?;
            i += 1;
        }
        Ok(node)
    }

    /// A person's decision on a pending run, named by its path in the mount
    /// (`…/ops/OP/runs/ID`: `ops/`, `.ops/` and titled names lead to the same run) or its
    /// id. An approval runs the call and waits for it (at most the call timeout).
    pub fn decide(&self, run_ref: &str, verb: &Verb, who: &Person) -> WorldResult<Decided> {
        let in_tree = |path: &str| match self.resolve_path(path) {
            Ok(
                NodeId::Run(_, _, id)
                | NodeId::RunFile(id, _)
                | NodeId::Discovered(id)
                | NodeId::DiscoveredLink(id, _),
            ) => Some(id),
            _ => None,
        };
        self.calls.decide(run_ref, in_tree, verb, who)
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
