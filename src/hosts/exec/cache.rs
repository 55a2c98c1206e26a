//! What the exec host remembers between requests: entries the host described (by `entry` or
//! in a `children` page) for the host's cache lifetime, and the calls that brought the host
//! down. The runtime asks `entry` for the same path many times in a row (a lookup, then
//! `stat`, `cat description`, `ls ops` …, and all of them again after a restart drops the
//! kernel's caches); within the lifetime the host said its answers may be kept, it is asked
//! once.
//!
//! Entries are forgotten, with every ancestor (whose description may count or summarise
//! them), when the host reports them `changed` or a call reports them changed or discovered,
//! and all at once when the connection is dropped or made again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::protocol::WireEntry;

/// Entries kept at most (all are forgotten when full: they live a second or so anyway).
const ENTRIES_MAX: usize = 20_000;

#[derive(Default)]
pub struct EntryCache {
    entries: Mutex<HashMap<Vec<String>, (Instant, WireEntry)>>,
}

impl EntryCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<String>, (Instant, WireEntry)>> {
        crate::hosts::lock(&self.entries)
    }

    /// The entry at `path` if it was described less than `ttl` ago.
    pub fn get(&self, path: &[String], ttl: Duration) -> Option<WireEntry> {
        let map = self.lock();
        let (at, e) = map.get(path)?;
        (at.elapsed() < ttl).then(|| e.clone())
    }

    pub fn put(&self, path: Vec<String>, entry: WireEntry) {
        let mut map = self.lock();
        if map.len() >= ENTRIES_MAX {
            map.clear();
        }
        map.insert(path, (Instant::now(), entry));
    }

    /// Forget these entries and all their ancestors.
    pub fn forget(&self, paths: &[Vec<String>]) {
        let mut map = self.lock();
        for p in paths {
            for n in 0..=p.len() {
                map.remove(&p[..n]);
            }
        }
    }

    pub fn clear(&self) {
        self.lock().clear();
    }
}

/// How often one call brought the host down in a row, and when last.
#[derive(Clone, Debug)]
pub struct Crashes {
    pub times: u32,
    pub last: Instant,
    pub why: String,
}

/// Calls (entry path, op) that brought the host down: each is refused for a backoff that
/// doubles with its crashes in a row, so a call that crashes the host cannot restart it
/// over and over, however often it is retried and whatever other requests succeed meanwhile.
#[derive(Default)]
pub struct CrashLog {
    calls: Mutex<HashMap<(Vec<String>, String), Crashes>>,
}

/// Calls remembered at most (the oldest half is dropped when full).
const CRASHES_MAX: usize = 256;

impl CrashLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Vec<String>, String), Crashes>> {
        crate::hosts::lock(&self.calls)
    }

    /// How long this call is still refused, with its record, if it is.
    pub fn refused(
        &self,
        path: &[String],
        op: &str,
        backoff: impl Fn(u32) -> Duration,
    ) -> Option<(Crashes, Duration)> {
        let map = self.lock();
        let c = map.get(&(path.to_vec(), op.to_string()))?;
        let left = backoff(c.times).saturating_sub(c.last.elapsed());
        (!left.is_zero()).then(|| (c.clone(), left))
    }

    pub fn crashed(&self, path: &[String], op: &str, why: String) {
        let mut map = self.lock();
        if map.len() >= CRASHES_MAX {
            let mut by_age: Vec<(Instant, (Vec<String>, String))> =
                map.iter().map(|(k, c)| (c.last, k.clone())).collect();
            by_age.sort();
            for (_, k) in by_age.into_iter().take(CRASHES_MAX / 2) {
                map.remove(&k);
            }
        }
        let c = map
            .entry((path.to_vec(), op.to_string()))
            .or_insert(Crashes {
                times: 0,
                last: Instant::now(),
                why: String::new(),
            });
        c.times = c.times.saturating_add(1);
        c.last = Instant::now();
        c.why = why;
    }

    /// The call was answered: it no longer crashes the host.
    pub fn answered(&self, path: &[String], op: &str) {
        let mut map = self.lock();
        if !map.is_empty() {
            map.remove(&(path.to_vec(), op.to_string()));
        }
    }

    /// Every call that crashed the host, most recent first.
    pub fn all(&self) -> Vec<((Vec<String>, String), Crashes)> {
        let mut v: Vec<_> = self
            .lock()
            .iter()
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        v.sort_by_key(|(_, c)| std::cmp::Reverse(c.last));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(d: &str) -> WireEntry {
        WireEntry {
            description: d.into(),
            reference: "r".into(),
            indexable: true,
            modified: None,
            kind: None,
            title: None,
        }
    }

    fn p(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn entries_live_their_ttl_and_go_with_their_descendants() {
        let c = EntryCache::default();
        let ttl = Duration::from_secs(3600);
        c.put(p(&[]), entry("root"));
        c.put(p(&["a"]), entry("a"));
        c.put(p(&["a", "b"]), entry("b"));
        c.put(p(&["c"]), entry("c"));
        assert_eq!(c.get(&p(&["a"]), ttl).unwrap().description, "a");
        assert!(c.get(&p(&["a"]), Duration::ZERO).is_none());
        // A change of a/b drops it and its ancestors, not its siblings' subtrees.
        c.forget(&[p(&["a", "b"])]);
        assert!(c.get(&p(&["a", "b"]), ttl).is_none());
        assert!(c.get(&p(&["a"]), ttl).is_none());
        assert!(c.get(&p(&[]), ttl).is_none());
        assert_eq!(c.get(&p(&["c"]), ttl).unwrap().description, "c");
        c.clear();
        assert!(c.get(&p(&["c"]), ttl).is_none());
    }

    #[test]
    fn a_crashing_call_is_refused_for_its_backoff_until_answered() {
        let log = CrashLog::default();
        let long = |n: u32| Duration::from_secs(60 * u64::from(n));
        assert!(log.refused(&p(&["x"]), "op", long).is_none());
        log.crashed(&p(&["x"]), "op", "exited".into());
        log.crashed(&p(&["x"]), "op", "exited again".into());
        let (c, left) = log.refused(&p(&["x"]), "op", long).unwrap();
        assert_eq!((c.times, c.why.as_str()), (2, "exited again"));
        assert!(left > Duration::from_secs(60));
        // Another op, another path: not refused.
        assert!(log.refused(&p(&["x"]), "other", long).is_none());
        assert!(log.refused(&p(&["y"]), "op", long).is_none());
        // A backoff that is over no longer refuses, but the record stays until answered.
        assert!(log.refused(&p(&["x"]), "op", |_| Duration::ZERO).is_none());
        assert_eq!(log.all().len(), 1);
        log.answered(&p(&["x"]), "op");
        assert!(log.all().is_empty());
    }
}
