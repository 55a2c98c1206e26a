//! Inode numbers for world nodes: one `remember` per entry reply, `forget` frees at zero,
//! the root is never freed, numbers are never reused.

use std::collections::HashMap;

use crate::world::node::NodeId;

pub const ROOT_INO: u64 = 1;

pub struct Inodes {
    by_node: HashMap<NodeId, u64>,
    by_ino: HashMap<u64, (NodeId, u64)>,
    next: u64,
    /// Largest size since the tables were last shrunk.
    peak: usize,
}

impl Default for Inodes {
    fn default() -> Self {
        let mut by_node = HashMap::new();
        let mut by_ino = HashMap::new();
        by_node.insert(NodeId::Root, ROOT_INO);
        by_ino.insert(ROOT_INO, (NodeId::Root, 1));
        Inodes {
            by_node,
            by_ino,
            next: ROOT_INO + 1,
            peak: 1,
        }
    }
}

impl Inodes {
    /// The inode of `node`, with one more kernel reference.
    pub fn remember(&mut self, node: &NodeId) -> u64 {
        if let Some(&ino) = self.by_node.get(node) {
            if let Some(e) = self.by_ino.get_mut(&ino) {
                e.1 += 1;
            }
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.by_node.insert(node.clone(), ino);
        self.by_ino.insert(ino, (node.clone(), 1));
        self.peak = self.peak.max(self.by_ino.len());
        ino
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
        self.peak = self.by_ino.len().max(1);
        true
    }

    /// The kernel dropped `n` references; free the inode at zero.
    pub fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let gone = match self.by_ino.get_mut(&ino) {
            Some(e) => {
                e.1 = e.1.saturating_sub(n);
                e.1 == 0
            }
            None => false,
        };
        if gone {
            if let Some((node, _)) = self.by_ino.remove(&ino) {
                self.by_node.remove(&node);
            }
        }
    }

    pub fn node(&self, ino: u64) -> Option<NodeId> {
        self.by_ino.get(&ino).map(|(n, _)| n.clone())
    }

    /// The inode of `node` if the kernel holds one.
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

    #[test]
    fn forget_frees_and_numbers_are_not_reused() {
        let mut t = Inodes::default();
        let a = t.remember(&NodeId::Wip);
        assert_eq!(t.remember(&NodeId::Wip), a);
        t.forget(a, 1);
        assert_eq!(t.node(a), Some(NodeId::Wip));
        t.forget(a, 1);
        assert_eq!(t.node(a), None);
        let b = t.remember(&NodeId::Wip);
        assert_ne!(a, b);
        t.forget(ROOT_INO, 100);
        assert_eq!(t.node(ROOT_INO), Some(NodeId::Root));
        assert_eq!(t.len(), 2);
    }
}
