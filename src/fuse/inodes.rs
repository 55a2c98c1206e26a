//! Inode numbers for world nodes: one `remember` per entry reply, `forget` frees at zero,
//! the root is never freed, numbers are never reused. A working tree's node asks for its
//! own number (the backing file's inode number: `st_ino` is the inode, stable across
//! remounts, as git expects) and gets it while no other node holds it; every other node
//! is numbered from `COUNTED` up, apart from any a backing file has.
//!
//! A writable node (`call`) has at most one open writer per inode: the kernel holds an
//! inode's lock while a write waits for its call, so a second writer of the same inode
//! would wait in uninterruptible sleep for the first call to end. A second writer's open
//! is therefore refused with ESTALE, which makes the kernel walk the path again, and a
//! lookup of a busy writable node answers a fresh inode. Lookups reserve what they answer
//! for the asking process briefly (another process opening it meanwhile is sent to walk
//! again too), so a retry always finds its inode free: the kernel retries only once.

use std::collections::HashMap;
use std::sync::Arc;

/// A fast hash: these tables are hashed on every kernel request. foldhash's per-process
/// random seed still keeps collisions unpredictable for names a backend chooses.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::time::{Duration, Instant};

use crate::world::node::NodeId;

pub const ROOT_INO: u64 = 1;

/// Where the numbers of nodes that ask for none start (far above a file's inode number).
pub const COUNTED: u64 = 1 << 63;

/// How long a lookup's answer is kept for the process that asked (its open follows).
const RESERVATION: Duration = Duration::from_secs(2);

pub struct Inodes {
    /// The newest inode of each node. Both tables share one copy of each node.
    by_node: Map<Arc<NodeId>, u64>,
    by_ino: Map<u64, Slot>,
    /// Writers and reservations of writable inodes (call and body files): few, so kept
    /// apart and every other inode's slot stays two words.
    writing: Map<u64, Writing>,
    next: u64,
    /// Largest size since the tables were last shrunk.
    peak: usize,
}

struct Slot {
    node: Arc<NodeId>,
    lookups: u64,
}

impl Slot {
    fn new(node: Arc<NodeId>) -> Slot {
        Slot { node, lookups: 1 }
    }
}

#[derive(Default)]
struct Writing {
    /// Open descriptors writing through this inode.
    writers: u32,
    /// The process a lookup answered this inode to, and when.
    reserved: Option<(u32, Instant)>,
}

impl Writing {
    fn reserved_for_other(&self, pid: u32) -> bool {
        self.reserved
            .is_some_and(|(p, at)| p != pid && at.elapsed() < RESERVATION)
    }
}

impl Default for Inodes {
    fn default() -> Self {
        let mut by_node = Map::default();
        let mut by_ino = Map::default();
        let root = Arc::new(NodeId::Root);
        by_node.insert(Arc::clone(&root), ROOT_INO);
        by_ino.insert(ROOT_INO, Slot::new(root));
        Inodes {
            by_node,
            by_ino,
            writing: Map::default(),
            next: COUNTED,
            peak: 1,
        }
    }
}

impl Inodes {
    /// The inode of `node`, with one more kernel reference.
    pub fn remember(&mut self, node: &NodeId) -> u64 {
        if let Some(&ino) = self.by_node.get(node) {
            if let Some(s) = self.by_ino.get_mut(&ino) {
                s.lookups += 1;
                return ino;
            }
        }
        self.fresh(node)
    }

    /// The inode a lookup by process `pid` answers for a writable node: the newest one
    /// unless it is being written or was just answered to another process; then the one
    /// this process was just given, or a fresh one.
    pub fn remember_writable(&mut self, node: &NodeId, pid: u32) -> u64 {
        let newest = self.by_node.get(node).copied();
        let idle = |ino: &u64| {
            self.writing
                .get(ino)
                .is_none_or(|w| w.writers == 0 && !w.reserved_for_other(pid))
        };
        let free = newest.filter(|ino| self.by_ino.contains_key(ino) && idle(ino));
        let mine = || {
            self.writing
                .iter()
                .find(|(ino, w)| {
                    w.writers == 0
                        && w.reserved
                            .is_some_and(|(p, at)| p == pid && at.elapsed() < RESERVATION)
                        && self.by_ino.get(ino).is_some_and(|s| *s.node == *node)
                })
                .map(|(ino, _)| *ino)
        };
        let ino = match free.or_else(mine) {
            Some(ino) => {
                if let Some(s) = self.by_ino.get_mut(&ino) {
                    s.lookups += 1;
                }
                ino
            }
            None => self.fresh(node),
        };
        self.writing.entry(ino).or_default().reserved = Some((pid, Instant::now()));
        ino
    }

    /// The inode of a node that asks for number `wanted` (a working tree's), with one
    /// more kernel reference: `wanted` unless another node holds it.
    pub fn remember_as(&mut self, node: &NodeId, wanted: u64) -> u64 {
        if let Some(&ino) = self.by_node.get(node) {
            if let Some(s) = self.by_ino.get_mut(&ino) {
                s.lookups += 1;
                return ino;
            }
        }
        if wanted == ROOT_INO
            || wanted == 0
            || wanted >= COUNTED
            || self.by_ino.contains_key(&wanted)
        {
            return self.fresh(node);
        }
        self.take(node, wanted)
    }

    fn fresh(&mut self, node: &NodeId) -> u64 {
        let ino = self.next;
        self.next += 1;
        self.take(node, ino)
    }

    fn take(&mut self, node: &NodeId, ino: u64) -> u64 {
        let node = Arc::new(node.clone());
        self.by_node.insert(Arc::clone(&node), ino);
        self.by_ino.insert(ino, Slot::new(node));
        self.peak = self.peak.max(self.by_ino.len());
        ino
    }

    /// Process `pid` starts writing through `ino`; false if another descriptor already
    /// does, or a lookup just answered it to another process (whose retry it is).
    pub fn open_writer(&mut self, ino: u64, pid: u32) -> bool {
        if !self.by_ino.contains_key(&ino) {
            return true;
        }
        let w = self.writing.entry(ino).or_default();
        if w.writers > 0 || w.reserved_for_other(pid) {
            return false;
        }
        w.writers = 1;
        w.reserved = None;
        true
    }

    pub fn close_writer(&mut self, ino: u64) {
        if let Some(w) = self.writing.get_mut(&ino) {
            w.writers = w.writers.saturating_sub(1);
            if w.writers == 0 && w.reserved.is_none() {
                self.writing.remove(&ino);
            }
        }
    }

    /// After the kernel dropped most of what it held (memory pressure, `drop_caches`),
    /// give the memory back: shrink the tables and return freed heap to the system.
    /// Returns whether it shrank.
    pub fn shrink_if_mostly_free(&mut self) -> bool {
        if self.peak < 4096 || self.by_ino.len() * 4 > self.peak {
            return false;
        }
        self.by_node.shrink_to_fit();
        self.by_ino.shrink_to_fit();
        self.writing.shrink_to_fit();
        self.peak = self.by_ino.len().max(1);
        true
    }

    /// The kernel dropped `n` references; free the inode at zero.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let gone = match self.by_ino.get_mut(&ino) {
            Some(s) => {
                s.lookups = s.lookups.saturating_sub(n);
                s.lookups == 0
            }
            None => false,
        };
        if gone {
            self.writing.remove(&ino);
            if let Some(s) = self.by_ino.remove(&ino) {
                if self.by_node.get(&*s.node) == Some(&ino) {
                    self.by_node.remove(&*s.node);
                }
            }
        }
    }

    pub fn node(&self, ino: u64) -> Option<Arc<NodeId>> {
        self.by_ino.get(&ino).map(|s| Arc::clone(&s.node))
    }

    /// The inode of `node` if the kernel holds one (the newest, for writable nodes).
    pub fn known(&self, node: &NodeId) -> Option<u64> {
        self.by_node.get(node).copied()
    }

    pub fn len(&self) -> usize {
        self.by_ino.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_ino.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::node::{OpFile, Target};

    #[test]
    fn forget_frees_and_numbers_are_not_reused() {
        let mut t = Inodes::default();
        let a = t.remember(&NodeId::Wip);
        assert_eq!(t.remember(&NodeId::Wip), a);
        t.forget(a, 1);
        assert_eq!(t.node(a), Some(Arc::new(NodeId::Wip)));
        t.forget(a, 1);
        assert_eq!(t.node(a), None);
        let b = t.remember(&NodeId::Wip);
        assert_ne!(a, b);
        assert!(
            a >= COUNTED && b >= COUNTED,
            "far from any file's inode number"
        );
        t.forget(ROOT_INO, 100);
        assert_eq!(t.node(ROOT_INO), Some(Arc::new(NodeId::Root)));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_tree_node_keeps_its_own_number_unless_taken() {
        use crate::world::node::TreeRef;
        let mut t = Inodes::default();
        let f = |node| NodeId::Tree(TreeRef { host: 0, node });
        assert_eq!(t.remember_as(&f(1234), 1234), 1234);
        assert_eq!(
            t.remember_as(&f(1234), 1234),
            1234,
            "the same node, the same number"
        );
        // Another host's node with the same backing number gets a number of its own.
        let other = NodeId::Tree(TreeRef {
            host: 1,
            node: 1234,
        });
        let o = t.remember_as(&other, 1234);
        assert!(o >= COUNTED);
        // Forgotten, the number is the file's again at the next lookup.
        t.forget(1234, 2);
        assert_eq!(t.node(1234), None);
        assert_eq!(t.remember_as(&f(1234), 1234), 1234);
        assert!(
            t.remember_as(&f(1), 1) >= COUNTED,
            "never the root's number"
        );
    }

    fn call() -> NodeId {
        NodeId::OpFile(
            Target::Root,
            crate::world::node::intern("locate"),
            OpFile::Call,
        )
    }

    #[test]
    fn a_busy_writable_node_gets_a_fresh_inode_per_process() {
        let mut t = Inodes::default();
        let x = t.remember_writable(&call(), 10);
        assert_eq!(
            t.remember_writable(&call(), 10),
            x,
            "same process, same inode"
        );
        assert!(t.open_writer(x, 10));
        assert!(!t.open_writer(x, 10), "a second writer is refused");
        // Two processes retry while x is written: each gets its own inode, also when it
        // asks twice (the kernel's revalidation, then its lookup).
        let y = t.remember_writable(&call(), 20);
        let z = t.remember_writable(&call(), 30);
        assert!(x != y && y != z && x != z);
        assert_eq!(t.remember_writable(&call(), 20), y);
        assert_eq!(t.remember_writable(&call(), 30), z);
        // Another process with y in its cached dentry may not take it from 20.
        assert!(!t.open_writer(y, 30));
        assert!(t.open_writer(y, 20));
        assert!(t.open_writer(z, 30));
        t.close_writer(x);
        assert!(t.open_writer(x, 50), "free again once its writer closed");
        // The revalidation's answer is forgotten before the lookup comes: still fresh.
        let w = t.remember_writable(&call(), 40);
        t.forget(w, 1);
        let w2 = t.remember_writable(&call(), 40);
        assert!(t.open_writer(w2, 40));
    }

    #[test]
    fn an_idle_writable_node_keeps_its_inode() {
        let mut t = Inodes::default();
        let x = t.remember_writable(&call(), 10);
        assert!(t.open_writer(x, 10));
        t.close_writer(x);
        // The open took the reservation: anyone's next lookup gets the same inode.
        assert_eq!(t.remember_writable(&call(), 10), x);
        assert!(t.open_writer(x, 10));
        t.close_writer(x);
        assert_eq!(
            t.remember_writable(&call(), 11),
            x,
            "reserved for 10, who opened it"
        );
        assert_eq!(t.known(&call()), Some(x));
    }
}
