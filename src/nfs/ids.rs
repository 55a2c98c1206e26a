//! File ids for nodes. NFS handles must outlive the client's caches, so a node's id is a
//! hash of the node itself: the same for the life of the server and the same after a
//! restart. Each id handed out is kept with its world path in the state directory
//! (`nfs-handles`), so that a restarted server knows a client's handle at once: it finds
//! the node again by its path, and takes it if the node still hashes to the id.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use crate::world::node::NodeId;

/// The root's id (0 is reserved by NFS).
const ROOT: u64 = 1;
/// Ids handed out per lookup of a `call` (see `fresh`) have this bit set; the rest of
/// their high half is random per server start, the low half counts.
const FRESH_BIT: u64 = 1 << 63;
/// How many per-lookup ids are known at once (the oldest are forgotten first).
const FRESH_MAX: usize = 65_536;
/// How many saved handles are kept at most: beyond it, the file starts over at the next
/// start (the handles of a walk of a huge tree are not worth keeping forever).
const SAVED_MAX: usize = 1_000_000;

pub struct Ids {
    known: Mutex<Known>,
    /// The high half of this run's per-lookup ids.
    fresh_base: u64,
}

impl Default for Ids {
    fn default() -> Ids {
        Ids::open(None)
    }
}

#[derive(Default)]
struct Known {
    nodes: HashMap<u64, NodeId>,
    /// Where each id was found: its folder's id and its world path.
    places: HashMap<u64, (u64, String)>,
    /// Ids of an earlier run of the server, not seen yet in this one.
    saved: HashMap<u64, (u64, String)>,
    file: Option<std::fs::File>,
    /// Per-lookup ids, oldest first, and the next one's count.
    fresh: std::collections::VecDeque<u64>,
    next_fresh: u32,
}

impl Ids {
    /// Ids kept in `file` (read now, appended to as ids are handed out); `None`: in
    /// memory only.
    pub fn open(file: Option<&Path>) -> Ids {
        let mut known = Known::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for line in text.lines() {
                let mut f = line.splitn(3, '\t');
                let (Some(id), Some(parent), Some(p)) = (f.next(), f.next(), f.next()) else {
                    continue;
                };
                if let (Ok(id), Ok(parent)) =
                    (u64::from_str_radix(id, 16), u64::from_str_radix(parent, 16))
                {
                    known.saved.insert(id, (parent, p.to_string()));
                }
            }
            if known.saved.len() > SAVED_MAX {
                known.saved.clear();
                let _ = std::fs::remove_file(path);
            }
            known.file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| tracing::warn!("nfs: cannot keep handles in {}: {e}", path.display()))
                .ok();
        }
        // Random per start: a handle of an earlier run never names a node of this one.
        let random = {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(std::process::id())
        };
        Ids {
            known: Mutex::new(known),
            fresh_base: FRESH_BIT | (random & 0x7FFF_FFFF_0000_0000),
        }
    }

    /// An id of its own for `node` (a `call` file), different at every lookup: a client
    /// keeps one page cache per file, so two processes writing one `call` at once would
    /// mix their documents in it; with a fresh handle per lookup (the client mounted with
    /// `lookupcache=none` looks the name up at every open) each open writes a file of
    /// its own. Not kept across restarts.
    pub fn fresh(&self, node: NodeId, parent: u64) -> u64 {
        let mut known = self.lock();
        known.next_fresh = known.next_fresh.wrapping_add(1);
        let id = self.fresh_base | u64::from(known.next_fresh);
        known.nodes.insert(id, node);
        let base = known
            .places
            .get(&parent)
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        known.places.insert(id, (parent, format!("{base}/call")));
        known.fresh.push_back(id);
        if known.fresh.len() > FRESH_MAX {
            if let Some(old) = known.fresh.pop_front() {
                known.nodes.remove(&old);
                known.places.remove(&old);
            }
        }
        id
    }

    fn lock(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn root(&self) -> u64 {
        ROOT
    }

    /// The node of an id handed out since the server started.
    pub fn node(&self, id: u64) -> Option<NodeId> {
        if id == ROOT {
            return Some(NodeId::Root);
        }
        self.lock().nodes.get(&id).cloned()
    }

    /// The node of an id, also one an earlier run handed out: found again by its path
    /// (`resolve`), if the node there still hashes to it.
    pub fn revive(&self, id: u64, resolve: impl FnOnce(&str) -> Option<NodeId>) -> Option<NodeId> {
        if let Some(n) = self.node(id) {
            return Some(n);
        }
        let (parent, path) = self.lock().saved.get(&id).cloned()?;
        let node = resolve(&path)?;
        if hash_of(&node) & !FRESH_BIT != id {
            return None;
        }
        let mut known = self.lock();
        known.saved.remove(&id);
        known.nodes.insert(id, node.clone());
        known.places.insert(id, (parent, path));
        Some(node)
    }

    /// The id of `node`, named `name` in the folder `parent`.
    pub fn id(&self, node: NodeId, parent: u64, name: &str) -> u64 {
        self.place(node, parent, name).0
    }

    /// The id of `node`, named `name` in the folder `parent`, and whether it is new.
    pub fn place(&self, node: NodeId, parent: u64, name: &str) -> (u64, bool) {
        if node == NodeId::Root {
            return (ROOT, false);
        }
        let mut id = hash_of(&node) & !FRESH_BIT;
        let mut known = self.lock();
        // Two nodes with one hash (never seen; 2^-64 a pair): the later one probes on.
        loop {
            match known.nodes.get(&id) {
                Some(n) if *n != node => id = id.wrapping_add(1).max(ROOT + 1),
                _ => break,
            }
        }
        if known.nodes.contains_key(&id) {
            return (id, false);
        }
        let base = match parent {
            ROOT => String::new(),
            p => known
                .places
                .get(&p)
                .map(|(_, s)| s.clone())
                .unwrap_or_default(),
        };
        let path = format!("{base}/{name}");
        let is_saved = known.saved.remove(&id).is_some_and(|(_, p)| p == path);
        if !is_saved {
            if let Some(f) = known.file.as_mut() {
                let _ = writeln!(f, "{id:x}\t{parent:x}\t{path}");
            }
        }
        known.nodes.insert(id, node);
        known.places.insert(id, (parent, path));
        (id, true)
    }

    /// The folder `id` was found in (the root's is the root).
    pub fn parent(&self, id: u64) -> u64 {
        self.lock().places.get(&id).map_or(ROOT, |(p, _)| *p)
    }
}

fn hash_of(node: &NodeId) -> u64 {
    // SipHash with fixed keys: the same node hashes the same in every run of this build.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    node.hash(&mut h);
    match h.finish() {
        0 | ROOT => ROOT + 1,
        v => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::node::{EntryRef, Target};

    #[test]
    fn a_node_keeps_its_id_across_tables_and_the_root_is_one() {
        let a = Ids::default();
        let b = Ids::default();
        let n = NodeId::Entry(EntryRef::new(0, vec!["issues".to_string()]));
        let id = a.id(n.clone(), ROOT, "issues");
        assert_eq!(
            id,
            b.id(n.clone(), ROOT, "issues"),
            "a restarted server gives the same id"
        );
        assert_eq!(a.node(id), Some(n));
        assert_eq!(a.id(NodeId::Root, ROOT, ""), ROOT);
        assert_eq!(a.node(ROOT), Some(NodeId::Root));
        let ops = NodeId::Ops(Target::Root);
        assert_ne!(a.id(ops, ROOT, ".ops"), id);
        assert_eq!(b.node(12345), None, "an id never handed out is unknown");
    }

    #[test]
    fn every_lookup_of_a_call_has_its_own_id_for_the_same_node() {
        let ids = Ids::default();
        let call = NodeId::OpFile(
            Target::Root,
            crate::world::node::intern("locate"),
            crate::world::node::OpFile::Call,
        );
        let a = ids.fresh(call.clone(), ROOT);
        let b = ids.fresh(call.clone(), ROOT);
        assert_ne!(a, b);
        assert_eq!(ids.node(a), Some(call.clone()));
        assert_eq!(ids.node(b), Some(call.clone()));
        assert_ne!(
            ids.id(call, ROOT, "call"),
            a,
            "the listed id is another one"
        );
        assert_ne!(
            Ids::default().fresh_base,
            ids.fresh_base,
            "another run, other ids"
        );
    }

    #[test]
    fn a_restart_knows_the_handles_of_the_last_run_by_their_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nfs-handles");
        let issues = NodeId::Entry(EntryRef::new(0, vec!["issues".to_string()]));
        let one = NodeId::Entry(EntryRef::new(
            0,
            vec!["issues".to_string(), "1".to_string()],
        ));
        let (a, b) = {
            let ids = Ids::open(Some(&file));
            let a = ids.id(issues.clone(), ROOT, "tracker");
            (a, ids.id(one.clone(), a, "1"))
        };
        let again = Ids::open(Some(&file));
        assert_eq!(again.node(b), None, "not seen in this run yet");
        let asked = std::cell::RefCell::new(Vec::new());
        let found = again.revive(b, |p| {
            asked.borrow_mut().push(p.to_string());
            Some(one.clone())
        });
        assert_eq!(found, Some(one));
        assert_eq!(asked.into_inner(), vec!["/tracker/1".to_string()]);
        assert_eq!(again.parent(b), a);
        // A path that now leads elsewhere does not revive the handle.
        assert_eq!(again.revive(a, |_| Some(NodeId::Ops(Target::Root))), None);
        assert_eq!(again.revive(999, |_| Some(NodeId::Root)), None);
    }
}
