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
/// How many saved handles are kept at most: beyond it, the file starts over at the next
/// start (the handles of a walk of a huge tree are not worth keeping forever).
const SAVED_MAX: usize = 1_000_000;

#[derive(Default)]
pub struct Ids {
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    nodes: HashMap<u64, NodeId>,
    /// Where each id was found: its folder's id and its world path.
    places: HashMap<u64, (u64, String)>,
    /// Ids of an earlier run of the server, not seen yet in this one.
    saved: HashMap<u64, (u64, String)>,
    file: Option<std::fs::File>,
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
        Ids {
            known: Mutex::new(known),
        }
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
        if hash_of(&node) != id {
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
        if node == NodeId::Root {
            return ROOT;
        }
        let mut id = hash_of(&node);
        let mut known = self.lock();
        // Two nodes with one hash (never seen; 2^-64 a pair): the later one probes on.
        loop {
            match known.nodes.get(&id) {
                Some(n) if *n != node => id = id.wrapping_add(1).max(ROOT + 1),
                _ => break,
            }
        }
        if known.nodes.contains_key(&id) {
            return id;
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
        id
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
