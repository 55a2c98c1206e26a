//! One small time-bounded cache, for answers that are asked for many times in a row (a
//! walk reads an op's `guard`, `schema` and `description` one after another) but must not
//! be kept long. Entries live `ttl`; at `max` entries the cache is emptied rather than
//! managed, which keeps every insert O(1) for caches whose entries live seconds.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct TtlCache<K, V> {
    ttl: Duration,
    max: usize,
    map: Mutex<HashMap<K, (Instant, V)>>,
    /// When expired entries were last dropped: a large cache does not keep a walk's
    /// answers (and their memory) long after they expired.
    swept: Mutex<Instant>,
    clock: Clock,
}

/// Where a cache reads the time: the real clock, or (tests) one moved by hand, so a
/// verdict about expiry does not depend on how busy the machine is.
#[derive(Clone, Default)]
pub struct Clock(Option<std::sync::Arc<Mutex<Instant>>>);

impl Clock {
    /// A clock that stands still until `advance`d.
    pub fn manual() -> Clock {
        Clock(Some(std::sync::Arc::new(Mutex::new(Instant::now()))))
    }

    pub fn now(&self) -> Instant {
        match &self.0 {
            None => Instant::now(),
            Some(t) => *t.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Move a manual clock on (the real one moves by itself).
    pub fn advance(&self, by: Duration) {
        if let Some(t) = &self.0 {
            *t.lock().unwrap_or_else(|p| p.into_inner()) += by;
        }
    }
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn new(ttl: Duration, max: usize) -> Self {
        Self::with_clock(ttl, max, Clock::default())
    }

    pub fn with_clock(ttl: Duration, max: usize, clock: Clock) -> Self {
        TtlCache {
            ttl,
            max: max.max(1),
            map: Mutex::new(HashMap::new()),
            swept: Mutex::new(clock.now()),
            clock,
        }
    }

    /// The value for `key` if it was stored less than `ttl` ago.
    pub fn get(&self, key: &K) -> Option<V> {
        let now = self.clock.now();
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, v)| v.clone())
    }

    pub fn insert(&self, key: K, value: V) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.max {
            map.clear();
        }
        let now = self.clock.now();
        if let Ok(mut swept) = self.swept.try_lock() {
            // Every few lifetimes: O(n) once per period keeps inserts O(1) amortized.
            if now.duration_since(*swept) > self.ttl * 4 {
                map.retain(|_, (at, _)| now.duration_since(*at) < self.ttl);
                *swept = now;
            }
        }
        map.insert(key, (now, value));
    }

    /// The cached value, or `make()`'s, which is stored when it succeeds.
    pub fn get_or_try<E>(&self, key: K, make: impl FnOnce() -> Result<V, E>) -> Result<V, E> {
        if let Some(v) = self.get(&key) {
            return Ok(v);
        }
        let v = make()?;
        self.insert(key, v.clone());
        Ok(v)
    }

    /// Drop one key's answer (it is known to be stale).
    pub fn forget(&self, key: &K) {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    pub fn clear(&self) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_entries_are_swept_on_a_later_insert() {
        let clock = Clock::manual();
        let c: TtlCache<u32, u32> =
            TtlCache::with_clock(Duration::from_millis(10), 1000, clock.clone());
        for k in 0..100 {
            c.insert(k, k);
        }
        clock.advance(Duration::from_millis(50));
        c.insert(1000, 1);
        let len = c.map.lock().map(|m| m.len()).unwrap_or(0);
        assert_eq!(len, 1, "the expired answers are gone");
    }

    #[test]
    fn entries_expire_and_the_bound_empties() {
        let clock = Clock::manual();
        let c: TtlCache<u32, u32> =
            TtlCache::with_clock(Duration::from_millis(30), 2, clock.clone());
        c.insert(1, 10);
        assert_eq!(c.get(&1), Some(10));
        c.insert(2, 20);
        c.insert(3, 30);
        assert_eq!(c.get(&1), None, "the bound emptied the cache");
        assert_eq!(c.get(&3), Some(30));
        clock.advance(Duration::from_millis(29));
        assert_eq!(c.get(&3), Some(30), "not yet expired");
        clock.advance(Duration::from_millis(1));
        assert_eq!(c.get(&3), None, "expired");
        let made: Result<u32, ()> = c.get_or_try(4, || Ok(40));
        assert_eq!(made, Ok(40));
        let again: Result<u32, ()> = c.get_or_try(4, || Err(()));
        assert_eq!(again, Ok(40), "served from the cache");
        c.forget(&4);
        assert_eq!(c.get(&4), None, "forgotten");
        c.insert(5, 50);
        c.clear();
        assert_eq!(c.get(&5), None);
    }
}
