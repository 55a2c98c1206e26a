//! The daemon's total bound on documents being written: every open `call` or `body`
//! descriptor buffers what it was sent until its call runs (at its offset, wherever that
//! is, so a byte past a gap holds the gap too), and together they hold at most
//! `max_buffered_bytes` (a descriptor alone at most `max_call_bytes`). A write past the
//! total is refused with ENOSPC and words; what a descriptor held returns at its close.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::world::error::{ErrorKind, WorldError};

/// The shared total.
#[derive(Debug)]
pub struct Budget {
    used: AtomicU64,
    max: u64,
}

impl Budget {
    pub fn new(max: u64) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicU64::new(0),
            max,
        })
    }

    /// Bytes held by all open descriptors now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn take(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|t| *t <= self.max)
            })
            .is_ok()
    }

    fn give(&self, n: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(n))
            });
    }

    fn full(&self, wanted: u64) -> WorldError {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        WorldError::new(
            ErrorKind::NoSpace,
            format!(
                "the daemon already holds {:.1} MiB of documents that open descriptors are writing, and this one would need {:.1} MiB more (max_buffered_bytes = {} bytes, the total for all writers); nothing was run. Close other writers and try again, or raise max_buffered_bytes in the manifest's [world]",
                mib(self.used()),
                mib(wanted),
                self.max
            ),
        )
    }
}

/// What one descriptor holds of the budget: its buffer's capacity.
#[derive(Debug)]
pub struct Held {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Held {
    pub fn new(budget: &Arc<Budget>) -> Held {
        Held {
            budget: Arc::clone(budget),
            bytes: 0,
        }
    }

    /// Make room for `buf` to hold `len` bytes: its capacity grows (at most doubling, never
    /// past `cap`) only once the budget granted it, so the budget counts real memory.
    pub fn grow(&mut self, buf: &mut Vec<u8>, len: usize, cap: usize) -> Result<(), WorldError> {
        if len <= buf.capacity() {
            return Ok(());
        }
        let target = len.max(buf.capacity().saturating_mul(2)).min(cap.max(len));
        let more = (target - buf.capacity()) as u64;
        if !self.budget.take(more) {
            return Err(self.budget.full(more));
        }
        self.bytes += more;
        buf.reserve_exact(target - buf.len());
        // The allocator may round up; whatever it gave beyond counts too.
        let extra = (buf.capacity() - target) as u64;
        if extra > 0 && self.budget.take(extra) {
            self.bytes += extra;
        }
        Ok(())
    }

    /// Count a buffer made elsewhere (a body's current content), or refuse it.
    pub fn adopt(&mut self, buf: &[u8]) -> Result<(), WorldError> {
        let n = buf.len() as u64;
        if !self.budget.take(n) {
            return Err(self.budget.full(n));
        }
        self.bytes += n;
        Ok(())
    }

    /// The buffer was emptied and its memory given back.
    pub fn release(&mut self) {
        self.budget.give(self.bytes);
        self.bytes = 0;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_share_one_total_and_give_it_back() {
        let budget = Budget::new(100);
        let (mut a, mut b) = (Held::new(&budget), Held::new(&budget));
        let (mut x, mut y) = (Vec::new(), Vec::new());
        a.grow(&mut x, 60, 80).unwrap();
        assert!(budget.used() >= 60 && x.capacity() >= 60);
        let e = b.grow(&mut y, 50, 80).unwrap_err();
        assert_eq!(e.errno(), libc::ENOSPC);
        assert!(e.message.contains("max_buffered_bytes = 100 bytes"), "{e}");
        assert_eq!(y.capacity(), 0, "nothing was allocated for a refused write");
        drop(a);
        drop(x);
        assert_eq!(budget.used(), 0);
        b.grow(&mut y, 50, 80).unwrap();
        b.release();
        assert_eq!(budget.used(), 0);
    }
}
