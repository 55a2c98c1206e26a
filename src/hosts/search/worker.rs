//! Incremental indexing on one background thread.
//!
//! A pass pages through every source's `documents`, compares each version with the one
//! recorded in the store, writes only what changed, and removes what a source no longer
//! offers. The tantivy commit comes first, the store's record second: a crash in between
//! only makes the next pass rewrite those documents again (a rewrite is a delete by key and
//! an add, so it is idempotent).
//!
//! Callers ask for a pass with `request` and may wait for it with `wait`; a request made
//! while a pass runs is served by the next pass, which starts right after. A pass covers
//! every source or only some (a search refreshes only the sources that are stale).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tantivy::IndexWriter;

use super::index::Engine;
use super::store::{Change, Store};
use crate::host::HostError;
use crate::hosts::Peer;

/// Why a pass failed as a whole (a source's own errors are collected instead).
#[derive(Debug, thiserror::Error)]
enum PassError {
    /// The index at `what` (`""`, `" commit"`, `" merge"`, `" reload"`).
    #[error("search index{what}: {source}")]
    Index {
        what: &'static str,
        source: tantivy::TantivyError,
    },
    #[error("{0}")]
    Store(#[from] HostError),
    #[error("stopped")]
    Stopped,
}

/// The index's error at `what`, for `map_err`.
fn index(what: &'static str) -> impl Fn(tantivy::TantivyError) -> PassError {
    move |source| PassError::Index { what, source }
}

/// What the indexer is doing and has done.
#[derive(Debug, Default)]
pub(super) struct Status {
    /// A pass runs now, started at this instant.
    pub running: Option<Instant>,
    /// Documents read by the running pass so far.
    pub progress: usize,
    /// A pass over every source is wanted (set by `request`, taken by the worker).
    pub pending_all: bool,
    /// A pass over these sources is wanted.
    pub pending_some: BTreeSet<String>,
    /// The wanted pass rebuilds everything.
    pub pending_full: bool,
    /// When each source's last finished indexing started, and how long it took.
    pub per_source: HashMap<String, (Instant, Duration)>,
    pub started: u64,
    pub finished: u64,
    /// When the last finished pass started: everything changed before is in the index.
    pub last_start: Option<Instant>,
    pub last: Option<PassStats>,
    /// Why the last pass failed (entirely or for some sources).
    pub last_error: Option<String>,
    pub shutdown: bool,
}

/// What a pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct PassStats {
    pub read: usize,
    pub written: usize,
    pub removed: usize,
    pub took: Duration,
}

/// The indexer's state, shared by the worker thread and the host.
#[derive(Default)]
pub(super) struct Shared {
    status: Mutex<Status>,
    cv: Condvar,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Status> {
        crate::hosts::lock(&self.status)
    }

    /// Ask for a pass over `sources` (None: all); returns the number the pass that serves
    /// it will have.
    pub(super) fn request(&self, full: bool, sources: Option<Vec<String>>) -> u64 {
        let mut s = self.lock();
        match sources {
            None => s.pending_all = true,
            Some(list) => s.pending_some.extend(list),
        }
        s.pending_full |= full;
        self.cv.notify_all();
        s.started + 1
    }

    /// The pass to wait for so that the index holds everything the `sources` offered when
    /// this is called, if any. A source whose last indexing was quick (under `cheap`) is
    /// read again for every search; a slow one only when its last indexing started more
    /// than `fresh` ago.
    pub(super) fn ensure_fresh(
        &self,
        sources: &[String],
        cheap: Duration,
        fresh: Duration,
    ) -> Option<(u64, bool)> {
        let (stale, worth_waiting): (Vec<String>, bool) = {
            let s = self.lock();
            let stale: Vec<String> = sources
                .iter()
                .filter(|name| match s.per_source.get(*name) {
                    // A slow source is re-read at most every ten times its last pass: a
                    // documentation tree that takes 40 s is not re-walked every 2 s.
                    Some((at, took)) => *took < cheap || at.elapsed() >= fresh.max(*took * 10),
                    None => true,
                })
                .cloned()
                .collect();
            // Wait only for cheap passes (or a first index): a large source (a whole
            // documentation tree) is refreshed in the background, not on every search.
            let worth = stale.iter().all(|name| match s.per_source.get(name) {
                Some((_, took)) => *took < cheap,
                None => true,
            });
            (stale, worth)
        };
        (!stale.is_empty()).then(|| (self.request(false, Some(stale)), worth_waiting))
    }

    /// Wait until pass `n` has finished, at most `timeout`; true if it has.
    pub(super) fn wait(&self, n: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        while s.finished < n && !s.shutdown {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            s = match self.cv.wait_timeout(s, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        s.finished >= n
    }

    pub(super) fn shutdown(&self) {
        self.lock().shutdown = true;
        self.cv.notify_all();
    }

    fn stopping(&self) -> bool {
        self.lock().shutdown
    }
}

/// Everything a pass needs.
pub(super) struct Indexer<'a> {
    pub engine: &'a Engine,
    pub store: &'a Store,
    pub shared: &'a Shared,
    pub sources: &'a [Peer],
    /// What the policy hides: never indexed (and dropped from the index if it was).
    pub hidden: &'a crate::host::Hidden,
    pub page_size: usize,
    pub max_documents: usize,
}

impl Indexer<'_> {
    /// The worker thread's loop: one pass per request, until shutdown.
    pub(super) fn run(&self) {
        loop {
            let (full, only) = {
                let mut s = self.shared.lock();
                while !s.pending_all && s.pending_some.is_empty() && !s.shutdown {
                    s = match self.shared.cv.wait(s) {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    };
                }
                if s.shutdown {
                    return;
                }
                let some = std::mem::take(&mut s.pending_some);
                let only = (!std::mem::take(&mut s.pending_all)).then_some(some);
                s.started += 1;
                s.running = Some(Instant::now());
                s.progress = 0;
                (std::mem::take(&mut s.pending_full), only)
            };
            let started = Instant::now();
            let outcome = self.pass(full, only.as_ref());
            let mut s = self.shared.lock();
            s.running = None;
            s.finished += 1;
            match outcome {
                Ok((mut stats, errors)) => {
                    stats.took = started.elapsed();
                    s.last_start = Some(started);
                    s.last = Some(stats);
                    s.last_error = (!errors.is_empty()).then(|| errors.join("; "));
                }
                Err(e) => {
                    tracing::warn!("search indexing failed: {e}");
                    s.last_error = Some(e.to_string());
                }
            }
            self.shared.cv.notify_all();
        }
    }

    /// One pass over every source. Errors of one source are collected (its documents stay
    /// as they were); errors of the index fail the pass.
    fn pass(
        &self,
        full: bool,
        only: Option<&BTreeSet<String>>,
    ) -> Result<(PassStats, Vec<String>), PassError> {
        // A full rebuild drops everything: it must read every source again.
        let only = only.filter(|_| !full);
        let mut writer: Option<IndexWriter> = None;
        let engine = self.engine;
        let open = |w: &mut Option<IndexWriter>| -> Result<(), PassError> {
            if w.is_none() {
                *w = Some(engine.writer().map_err(index(""))?);
            }
            Ok(())
        };
        let mut stats = PassStats::default();
        let mut errors = Vec::new();
        let mut changes: Vec<Change> = Vec::new();
        let mut timings: Vec<(String, Instant, Duration)> = Vec::new();
        if full {
            open(&mut writer)?;
            if let Some(w) = &writer {
                w.delete_all_documents().map_err(index(""))?;
            }
        }
        // Sources no longer configured.
        let known: Vec<String> = self.store.sources()?;
        let dropped: Vec<String> = known
            .into_iter()
            .filter(|s| !self.sources.iter().any(|p| &p.path == s))
            .collect();
        if !dropped.is_empty() {
            open(&mut writer)?;
            if let Some(w) = &writer {
                for s in &dropped {
                    engine.remove_source(w, s);
                }
            }
        }
        for peer in self.sources {
            if only.is_some_and(|set| !set.contains(&peer.path)) {
                continue;
            }
            let source_start = Instant::now();
            let mut indexed = if full {
                Default::default()
            } else {
                self.store.versions(&peer.path)?
            };
            let mut cursor: Option<String> = None;
            let mut seen = 0usize;
            let complete = loop {
                if self.shared.stopping() {
                    return Err(PassError::Stopped);
                }
                let (docs, next) = match peer.host.documents(cursor.as_deref(), self.page_size) {
                    Ok(page) => page,
                    Err(e) => {
                        errors.push(format!("{}: {e}", peer.path));
                        break false;
                    }
                };
                for doc in docs {
                    if seen >= self.max_documents {
                        break;
                    }
                    seen += 1;
                    stats.read += 1;
                    if self.hidden.hides(
                        &crate::host::names::Paths::of(&peer.path, peer.host.as_ref())
                            .entry(&doc.path),
                    ) {
                        // Left out of `indexed`'s walk: removed below if it was indexed.
                        continue;
                    }
                    let path = doc.path.join("/");
                    if indexed.remove(&path).as_deref() == Some(doc.version.as_str()) {
                        continue;
                    }
                    open(&mut writer)?;
                    if let Some(w) = &writer {
                        engine.put(w, &peer.path, &path, &doc).map_err(index(""))?;
                    }
                    stats.written += 1;
                    changes.push((peer.path.clone(), path, Some(doc.version)));
                }
                self.shared.lock().progress = stats.read;
                match next {
                    Some(c) if seen < self.max_documents => {
                        if cursor.as_deref() == Some(c.as_str()) {
                            errors.push(format!("{}: documents cursor did not advance", peer.path));
                            break false;
                        }
                        cursor = Some(c);
                    }
                    _ => break true,
                }
            };
            // What a complete walk did not meet is gone.
            if complete && !indexed.is_empty() {
                open(&mut writer)?;
                if let Some(w) = &writer {
                    for path in indexed.into_keys() {
                        engine.remove(w, &peer.path, &path);
                        stats.removed += 1;
                        changes.push((peer.path.clone(), path, None));
                    }
                }
            }
            if complete {
                timings.push((peer.path.clone(), source_start, source_start.elapsed()));
            }
        }
        if let Some(mut w) = writer {
            w.commit().map_err(index(" commit"))?;
            // Merge segments now rather than let them pile up pass after pass.
            w.wait_merging_threads().map_err(index(" merge"))?;
            engine.reload().map_err(index(" reload"))?;
        }
        self.store.apply(full, &dropped, &changes)?;
        // Only now is what each source offered searchable.
        let mut s = self.shared.lock();
        for (source, start, took) in timings {
            s.per_source.insert(source, (start, took));
        }
        Ok((stats, errors))
    }
}
