//! File ids for nodes. NFS handles must outlive the client's caches, so a node's id is a
//! hash of the node itself: the same for the life of the server, and the same again after
//! a restart (a client's handle then names the node it named). Ids the server has not
//! seen since it started are stale until the client looks the name up again.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use crate::world::node::NodeId;

/// The root's id (0 is reserved by NFS).
const ROOT: u64 = 1;

#[derive(Default)]
pub struct Ids {
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    nodes: HashMap<u64, NodeId>,
    /// Where each id was last found (`..`).
    parents: HashMap<u64, u64>,
}

impl Ids {
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

    /// The id of `node`, found in `parent`.
    pub fn id(&self, node: NodeId, parent: u64) -> u64 {
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
        known.nodes.insert(id, node);
        known.parents.insert(id, parent);
        id
    }

    /// The folder `id` was found in (the root's is the root).
    pub fn parent(&self, id: u64) -> u64 {
        self.lock().parents.get(&id).copied().unwrap_or(ROOT)
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
        let id = a.id(n.clone(), ROOT);
        assert_eq!(
            id,
            b.id(n.clone(), ROOT),
            "a restarted server gives the same id"
        );
        assert_eq!(a.node(id), Some(n));
        assert_eq!(a.id(NodeId::Root, ROOT), ROOT);
        assert_eq!(a.node(ROOT), Some(NodeId::Root));
        let ops = NodeId::Ops(Target::Root);
        assert_ne!(a.id(ops, ROOT), id);
        assert_eq!(b.node(12345), None, "an id never handed out is unknown");
    }
}
