//! The known world: every entry looked up by path or discovered by a call, with its ref,
//! kept in the state database across remounts. Lookups are hot (a `find` makes thousands),
//! so they are queued and written in batches by one thread; readers flush the queue first.
//! Where it is kept is the journal's engine (`Journal::write_known` and its readers).

use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use super::{Journal, StateError, StateResult};

/// One known entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KnownEntry {
    pub path: String,
    pub reference: String,
    pub description: String,
    /// In the indexable range: it and every ancestor are indexable.
    pub indexable: bool,
}

enum Msg {
    Record(KnownEntry),
    Flush(mpsc::Sender<()>),
}

pub struct Known {
    tx: Mutex<mpsc::Sender<Msg>>,
    recent: Mutex<Recent>,
    journal: Arc<dyn Journal>,
    _writer: JoinHandle<()>,
}

/// How many queued records one transaction writes at most.
const BATCH: usize = 2048;

/// An entry recorded again unchanged within this time is not written again: every call
/// and lookup of a hot entry would otherwise rewrite the same row. `.wip/known` orders by
/// when an entry was seen, to this precision.
const SEEN_PRECISION: std::time::Duration = std::time::Duration::from_secs(10);
/// How many recent records are remembered for that (hashes and times, about 0.5 MiB).
const RECENT_MAX: usize = 16_384;

/// What was last written for each path lately (hashes), and when.
#[derive(Default)]
struct Recent {
    hasher: std::collections::hash_map::RandomState,
    at: std::collections::HashMap<u64, (u64, std::time::Instant)>,
}

impl Recent {
    /// Whether `entry` must be written: its path's row was not written with the same
    /// content lately.
    fn fresh(&mut self, entry: &KnownEntry) -> bool {
        use std::hash::BuildHasher;
        let key = self.hasher.hash_one(&entry.path);
        let content = self.hasher.hash_one(entry);
        let now = std::time::Instant::now();
        if let Some((c, t)) = self.at.get(&key) {
            if *c == content && now.duration_since(*t) < SEEN_PRECISION {
                return false;
            }
        }
        if self.at.len() >= RECENT_MAX {
            self.at
                .retain(|_, (_, t)| now.duration_since(*t) < SEEN_PRECISION);
            if self.at.len() >= RECENT_MAX {
                self.at.clear();
            }
        }
        self.at.insert(key, (content, now));
        true
    }
}

impl Known {
    /// The known world kept by `journal`'s engine, with its writer thread.
    pub fn open(journal: Arc<dyn Journal>) -> StateResult<Known> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let writer_journal = Arc::clone(&journal);
        let writer = std::thread::Builder::new()
            .name("known-world".into())
            .spawn(move || write_loop(writer_journal.as_ref(), rx))
            .map_err(|e| StateError::new(format!("cannot start the known-world writer: {e}")))?;
        Ok(Known {
            tx: Mutex::new(tx),
            recent: Mutex::default(),
            journal,
            _writer: writer,
        })
    }

    /// Remember an entry (queued; never blocks on the database).
    pub fn record(&self, entry: KnownEntry) {
        if let Ok(mut recent) = self.recent.lock() {
            if !recent.fresh(&entry) {
                return;
            }
        }
        if let Ok(tx) = self.tx.lock() {
            let _ = tx.send(Msg::Record(entry));
        }
    }

    /// Wait until everything recorded so far is written.
    pub fn flush(&self) {
        let (done_tx, done_rx) = mpsc::channel();
        let sent = self
            .tx
            .lock()
            .map(|tx| tx.send(Msg::Flush(done_tx)).is_ok())
            .unwrap_or(false);
        if sent {
            let _ = done_rx.recv_timeout(std::time::Duration::from_secs(10));
        }
    }

    /// Indexable known entries whose path or description holds every word (any case).
    pub fn locate(&self, words: &[String], limit: usize) -> StateResult<Vec<KnownEntry>> {
        self.flush();
        self.journal.locate(words, limit)
    }

    /// Every known path of the object with this ref.
    pub fn paths_of(&self, reference: &str) -> StateResult<Vec<String>> {
        self.flush();
        self.journal.paths_of(reference)
    }

    /// The most recently seen entries, newest first, and how many are known in all.
    pub fn recent(&self, limit: usize) -> StateResult<(Vec<KnownEntry>, i64)> {
        self.flush();
        self.journal.known_recent(limit)
    }
}

/// The `locate` query for either engine: every word (any case) in the path or the
/// description, `%` and `_` taken literally; its text and its `like` patterns, numbered
/// from 1 after `mark` (`?` for SQLite, `$` for PostgreSQL).
pub(super) fn locate_query(
    words: &[String],
    limit: usize,
    indexable: &str,
    like: &str,
    mark: char,
) -> (String, Vec<String>) {
    let mut sql = format!("SELECT path, ref, description, indexable FROM known WHERE {indexable}");
    let mut args: Vec<String> = Vec::new();
    for w in words {
        args.push(format!(
            "%{}%",
            w.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        ));
        let i = args.len();
        sql.push_str(&format!(
            " AND (path {like} {mark}{i} ESCAPE '\\' OR description {like} {mark}{i} ESCAPE '\\')"
        ));
    }
    sql.push_str(&format!(" ORDER BY length(path), path LIMIT {limit}"));
    (sql, args)
}

/// Take what is queued (up to `BATCH`), after the first message.
/// How long the writer gathers records after the first before it writes them: calls one
/// after another then share one transaction instead of one each (each would take the
/// state file's write lock the journal wants next). A flush writes at once.
const GATHER: std::time::Duration = std::time::Duration::from_millis(20);

fn next_batch(first: Msg, rx: &mpsc::Receiver<Msg>) -> Vec<Msg> {
    let deadline = std::time::Instant::now() + GATHER;
    let mut flushing = matches!(first, Msg::Flush(_));
    let mut batch = vec![first];
    while batch.len() < BATCH {
        let got = if flushing {
            rx.try_recv().ok()
        } else {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            rx.recv_timeout(left).ok()
        };
        match got {
            Some(m) => {
                flushing |= matches!(m, Msg::Flush(_));
                batch.push(m);
            }
            None => break,
        }
    }
    batch
}

fn write_loop(journal: &dyn Journal, rx: mpsc::Receiver<Msg>) {
    while let Ok(first) = rx.recv() {
        let mut waiting = Vec::new();
        let mut entries = Vec::new();
        for m in next_batch(first, &rx) {
            match m {
                Msg::Record(e) => entries.push(e),
                Msg::Flush(done) => waiting.push(done),
            }
        }
        // One row once per batch, in path order: two mounts writing overlapping batches
        // then lock rows in the same order and cannot deadlock.
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        entries.dedup_by(|later, earlier| {
            if later.path == earlier.path {
                std::mem::swap(later, earlier);
                true
            } else {
                false
            }
        });
        if !entries.is_empty() {
            if let Err(e) = journal.write_known(&entries) {
                tracing::warn!("known world: {e}");
            }
        }
        for done in waiting {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The known world of a SQLite state file (made if new).
    fn sqlite(db: &std::path::Path) -> Known {
        let (j, _) = crate::state::SqliteJournal::open(db).unwrap();
        Known::open(Arc::new(j)).unwrap()
    }

    fn entry(path: &str, reference: &str, description: &str, indexable: bool) -> KnownEntry {
        KnownEntry {
            path: path.into(),
            reference: reference.into(),
            description: description.into(),
            indexable,
        }
    }

    #[test]
    fn records_locates_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("journal.db");
        {
            let k = sqlite(&db);
            k.record(entry(
                "/t/issues/42",
                "t://42",
                "Issue #42 · Crash when config is missing",
                true,
            ));
            k.record(entry("/s/results/1/hits/1", "t://42", "0.9 · crash", false));
            k.record(entry(
                "/t/issues/7",
                "t://7",
                "Issue #7 · Colours 100%",
                true,
            ));
            let found = k.locate(&["crash".into(), "config".into()], 10).unwrap();
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].path, "/t/issues/42");
            // LIKE wildcards in the query are literal.
            assert_eq!(k.locate(&["100%".into()], 10).unwrap().len(), 1);
            assert_eq!(k.locate(&["_".into()], 10).unwrap().len(), 0);
        }
        let k = sqlite(&db);
        assert_eq!(
            k.paths_of("t://42").unwrap(),
            vec![
                "/s/results/1/hits/1".to_string(),
                "/t/issues/42".to_string()
            ]
        );
        assert_eq!(k.recent(10).unwrap().1, 3);
    }

    #[test]
    fn an_entry_recorded_again_keeps_its_latest_content() {
        let dir = tempfile::tempdir().unwrap();
        let k = sqlite(&dir.path().join("journal.db"));
        // Unchanged records within the precision are not written again; a change, and a
        // change back, always are.
        for description in ["first", "first", "second", "first"] {
            k.record(entry("/t/issues/1", "t://1", description, true));
        }
        let found = k.locate(&["first".into()], 10).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(k.locate(&["second".into()], 10).unwrap().len(), 0);
        assert_eq!(k.recent(10).unwrap().1, 1);
    }
}

#[cfg(test)]
mod shared_tests {
    use super::*;
    use crate::state::pg::{SharedDb, TestDb};

    fn open_shared(db: Arc<SharedDb>) -> Known {
        let (j, _) = crate::state::PgJournal::open(db, "test").unwrap();
        Known::open(Arc::new(j)).unwrap()
    }

    #[test]
    fn two_mounts_share_one_known_world() {
        let db = TestDb::create();
        let a = open_shared(Arc::new(SharedDb::connect(&db.url).unwrap()));
        let b = open_shared(Arc::new(SharedDb::connect(&db.url).unwrap()));
        a.record(KnownEntry {
            path: "/t/issues/42".into(),
            reference: "t://42".into(),
            description: "Issue #42 · Crash when config is missing".into(),
            indexable: true,
        });
        b.record(KnownEntry {
            path: "/s/hits/1".into(),
            reference: "t://42".into(),
            description: "0.9 · crash".into(),
            indexable: false,
        });
        b.record(KnownEntry {
            path: "/t/issues/7".into(),
            reference: "t://7".into(),
            description: "Colours 100%".into(),
            indexable: true,
        });
        a.flush();
        let found = b.locate(&["CRASH".into(), "config".into()], 10).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, "/t/issues/42");
        assert_eq!(a.locate(&["100%".into()], 10).unwrap().len(), 1);
        assert_eq!(a.locate(&["_".into()], 10).unwrap().len(), 0);
        assert_eq!(
            a.paths_of("t://42").unwrap(),
            vec!["/s/hits/1".to_string(), "/t/issues/42".to_string()]
        );
        assert_eq!(a.recent(10).unwrap().1, 3);
    }
}
