//! Changes that come from outside a call: a host's own (a watched directory, a server's
//! new tools), applied as they arrive; and other mounts' of the same world: when state is shared on PostgreSQL, every change-feed
//! write notifies the others, and each mount reads what followed its last cursor and drops
//! the kernel's copies of what those events touched (so `cat` on one machine sees a call
//! made on another, and `tail -f .wip/events` shows it).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::run::changed_by_any_call;
use super::Pipeline;
use crate::host::HostChange;
use crate::state::pg::{Heard, SharedDb, EVENTS_CHANNEL};
use crate::state::Event;
use crate::world::node::*;

/// How many events one catch-up step reads.
const CATCH_UP_BATCH: usize = 1000;

/// This mount among the others sharing its state: the database, who it is there, and how
/// far it has applied their changes.
pub(in crate::world) struct OtherMounts {
    db: Arc<SharedDb>,
    /// This mount in the shared journal: its host name and state directory.
    origin: String,
    /// The change feed's cursor up to which this mount has applied others' changes.
    applied: Mutex<Option<i64>>,
}

impl OtherMounts {
    pub(in crate::world) fn new(db: Arc<SharedDb>, origin: String) -> OtherMounts {
        OtherMounts {
            db,
            origin,
            applied: Mutex::new(None),
        }
    }
}

/// Who this mount is in a shared journal: one state directory serves one daemon at a
/// time, so the host name and the state directory name one mount across restarts.
pub(in crate::world) fn origin(state_dir: &Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    let dir = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    format!("{host}:{}", dir.display())
}

impl Pipeline {
    /// Entries a host reports changed on their own: journal them in the change feed and
    /// drop the kernel's cached copies.
    pub fn host_changed(&self, change: &HostChange) {
        if change.host >= self.entries.hosts().len() {
            return;
        }
        self.forget_cached_state();
        let entries: Vec<(usize, Vec<String>)> = change
            .paths
            .iter()
            .map(|p| (change.host, p.clone()))
            .collect();
        let (mut nodes, mut events) = self.entries.changed_entries(&entries);
        // A working tree's folders and names: the kernel asks them again.
        if let Some(tree) = self.entries.hosts()[change.host].host.tree() {
            for (dir, name) in &change.tree {
                let dir = TreeRef {
                    host: change.host,
                    node: *dir,
                };
                nodes.push(NodeId::Tree(dir));
                if let Some(name) = name {
                    if let Some(node) = tree.refresh(dir.node, name) {
                        nodes.push(NodeId::Tree(TreeRef {
                            host: change.host,
                            node,
                        }));
                    }
                    nodes.push(NodeId::TreeName(dir, name.clone()));
                }
            }
        }
        // What is hidden changes for nobody who reads the feed.
        events.retain(|e| !self.entries.hides_path(&e.path));
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

    /// Where shared state lives, if it is shared (the URL without its password).
    pub fn shared_state(&self) -> Option<&str> {
        self.shared.as_ref().map(|s| s.db.shown())
    }

    /// Hear other mounts' changes and apply them, until the world is gone. Does nothing
    /// when state is not shared.
    pub fn listen_to_other_mounts(
        self: &Arc<Self>,
    ) -> std::io::Result<Option<std::thread::JoinHandle<()>>> {
        let Some(shared) = &self.shared else {
            return Ok(None);
        };
        if let Ok(mut applied) = shared.applied.lock() {
            *applied = Some(self.events_start);
        }
        let me = shared.origin.clone();
        let world = Arc::downgrade(self);
        shared
            .db
            .listen(EVENTS_CHANNEL, move |heard| {
                let Some(w) = world.upgrade() else {
                    return false;
                };
                match heard {
                    Heard::From(origin) if origin == me => {}
                    Heard::Quiet => {}
                    Heard::From(_) | Heard::Connected => w.apply_other_mounts_changes(),
                }
                true
            })
            .map(Some)
    }

    /// Read the feed past what was applied and drop the kernel's copies of what it names.
    /// This mount's own events among them are applied twice, which is harmless.
    fn apply_other_mounts_changes(&self) {
        let Some(shared) = &self.shared else {
            return;
        };
        let Ok(mut applied) = shared.applied.lock() else {
            return;
        };
        let mut cursor = applied.unwrap_or(self.events_start);
        loop {
            let events = match self.journal.events_after(cursor, CATCH_UP_BATCH) {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!("cannot read other mounts' changes: {e}");
                    break;
                }
            };
            let Some(last) = events.last() else {
                break;
            };
            cursor = last.cursor;
            let mut nodes = Vec::new();
            for e in &events {
                self.nodes_of_event(e, &mut nodes);
            }
            nodes.extend(
                [
                    WipFile::Log,
                    WipFile::Stats,
                    WipFile::Known,
                    WipFile::Events,
                    WipFile::Pending,
                ]
                .map(NodeId::WipFile),
            );
            let mut seen = HashSet::new();
            nodes.retain(|n| seen.insert(n.clone()));
            self.forget_cached_state();
            self.publish(&nodes);
            if events.len() < CATCH_UP_BATCH {
                break;
            }
        }
        *applied = Some(cursor);
    }

    /// The nodes an event from the feed makes stale.
    fn nodes_of_event(&self, e: &Event, nodes: &mut Vec<NodeId>) {
        let entry = self.entries.entry_ref_at(&e.path);
        match e.kind.as_str() {
            "changed" | "removed" => {
                if let Some(entry) = entry {
                    self.entries
                        .entry_changed_nodes(entry.host, &entry.path, nodes);
                    if e.kind == "removed" {
                        nodes.push(NodeId::EntryName(entry));
                    }
                }
            }
            "discovered" => {
                if let Some(entry) = entry {
                    if let Some((_, parent)) = entry.path.split_last() {
                        nodes.push(NodeId::Entry(EntryRef::new(entry.host, parent)));
                    }
                    nodes.push(NodeId::EntryName(entry.clone()));
                    nodes.push(NodeId::Entry(entry));
                }
            }
            // A call or a decision on a run: its op's runs and result, and the run itself.
            _ => {
                let target = if e.path == "/" {
                    Some(Target::Root)
                } else {
                    entry.map(Target::Entry)
                };
                if let (Some(target), Some(op)) = (target, &e.op) {
                    nodes.extend(changed_by_any_call(&target, op));
                }
                if let Some(run) = e.run {
                    nodes.extend(RunFile::ALL.iter().map(|(_, f)| NodeId::RunFile(run, *f)));
                }
            }
        }
    }
}
