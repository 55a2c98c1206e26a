//! World-level tests of the call pipeline with a small in-memory host: documents, one call
//! per descriptor, timeouts, late finishes, per-session results, limits and errnos, in
//! milliseconds and without FUSE.

mod mcp_schemas;
mod model;
mod places;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::node::{intern, EntryRef, Target};
use super::{CallDoc, Mounted, World};
use crate::host::identity::Identity;
use crate::host::*;
use crate::world::settings::WorldSettings;

/// A host with one root entry and a few ops:
/// `note(text)` keeps its text; `close` needs the entry open; `meet(n)` waits until `n`
/// calls are inside the host at once (so it proves calls run side by side); `sleep(ms)`;
/// `drop`, which the host's own policy denies by default; `set_body(text)` replaces the
/// root's `body`, which is writable through it while the entry is open.
#[derive(Default)]
pub(super) struct MemHost {
    notes: Mutex<Vec<String>>,
    pub(super) body: Mutex<String>,
    pub(super) closed: AtomicBool,
    inside: Mutex<usize>,
    met: Condvar,
    pub(super) calls: AtomicUsize,
    /// Whether it says its `call` checks the guard (`close` does), and how often it was
    /// asked for a guard.
    pub(super) checks_in_call: AtomicBool,
    pub(super) guard_asks: AtomicUsize,
}

impl Host for MemHost {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        Ok(path
            .is_empty()
            .then(|| EntryInfo::new("a host in memory", "mem://root")))
    }

    fn children(&self, _path: &[String]) -> HostResult<Vec<Child>> {
        Ok(Vec::new())
    }

    fn ops(&self, _path: &[String]) -> HostResult<Vec<OpSpec>> {
        let op = |name: &str, props: Value, required: &[&str]| OpSpec {
            name: name.into(),
            description: format!("{name}: for tests"),
            schema: object_schema(props, required),
            output: None,
        };
        Ok(vec![
            op("note", json!({"text": {"type": "string"}}), &["text"]),
            op("close", json!({}), &[]),
            op("meet", json!({"n": {"type": "integer"}}), &["n"]),
            op("sleep", json!({"ms": {"type": "integer"}}), &["ms"]),
            op(
                "steps",
                json!({"n": {"type": "integer"}, "ms": {"type": "integer"}}),
                &["n", "ms"],
            ),
            op("drop", json!({}), &[]),
            op("set_body", json!({"text": {"type": "string"}}), &["text"]),
        ])
    }

    fn body(&self, path: &[String]) -> HostResult<Option<Body>> {
        if !path.is_empty() {
            return Ok(None);
        }
        let body = Body::bytes(self.body.lock().unwrap().clone());
        Ok(Some(if self.closed.load(Ordering::SeqCst) {
            body
        } else {
            body.written_by("set_body", "text")
        }))
    }

    fn policy_default(
        &self,
        _path: &[String],
        op: &str,
    ) -> Option<super::call::policy::HostDefault> {
        (op == "drop").then(|| super::call::policy::HostDefault {
            allowed: false,
            words: "the host never drops by default".into(),
        })
    }

    fn guard(&self, _path: &[String], op: &str, _args: Option<&Value>) -> HostResult<Guard> {
        self.guard_asks.fetch_add(1, Ordering::SeqCst);
        let open = !self.closed.load(Ordering::SeqCst);
        Ok(Guard::new(match op {
            "close" | "set_body" => vec![Condition::check(
                "open",
                open,
                if open { "open" } else { "already closed" },
            )],
            _ => Vec::new(),
        }))
    }

    fn checks_guard_in_call(&self) -> bool {
        self.checks_in_call.load(Ordering::SeqCst)
    }

    fn call(
        &self,
        _path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match op {
            "note" => {
                let text = args["text"].as_str().unwrap_or_default().to_string();
                let mut notes = self.notes.lock().unwrap();
                notes.push(text);
                Ok(CallOutcome::text(format!("noted {}", notes.len())))
            }
            "close" => {
                if self.closed.swap(true, Ordering::SeqCst) {
                    return Err(HostError::Blocked(Guard::new(vec![Condition::check(
                        "open",
                        false,
                        "already closed",
                    )])));
                }
                Ok(CallOutcome::text("closed"))
            }
            "meet" => {
                let n = args["n"].as_u64().unwrap_or(1) as usize;
                let mut inside = self.inside.lock().unwrap();
                *inside += 1;
                self.met.notify_all();
                let (inside, timeout) = self
                    .met
                    .wait_timeout_while(inside, Duration::from_secs(10), |i| *i < n)
                    .unwrap();
                drop(inside);
                if timeout.timed_out() {
                    return Err(HostError::Backend(format!("never {n} calls at once")));
                }
                Ok(CallOutcome::text("met"))
            }
            "sleep" => {
                std::thread::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0)));
                Ok(CallOutcome::text("slept"))
            }
            // `n` steps of `ms`, each reported; it stops at a cancel (the host's hook
            // wakes it), as a long operation of a real backend does.
            "steps" => {
                let n = args["n"].as_u64().unwrap_or(1);
                let ms = args["ms"].as_u64().unwrap_or(10);
                let stop = Arc::new((Mutex::new(false), Condvar::new()));
                let hook = Arc::clone(&stop);
                caller.signal.on_cancel(move || {
                    *hook.0.lock().unwrap() = true;
                    hook.1.notify_all();
                });
                for k in 1..=n {
                    let stopped = stop.0.lock().unwrap();
                    let (stopped, _) = stop
                        .1
                        .wait_timeout_while(stopped, Duration::from_millis(ms), |s| !*s)
                        .unwrap();
                    if *stopped {
                        return Err(HostError::Cancelled(format!("stopped at step {k} of {n}")));
                    }
                    drop(stopped);
                    caller
                        .signal
                        .progress(k as f64, Some(n as f64), Some(format!("step {k}")));
                }
                Ok(CallOutcome::text(format!("{n} steps done")))
            }
            "drop" => Ok(CallOutcome::text("dropped")),
            "set_body" => {
                let text = args["text"].as_str().unwrap_or_default().to_string();
                let n = text.len();
                *self.body.lock().unwrap() = text;
                Ok(CallOutcome::text(format!("body set ({n} bytes)")).changed(Vec::new()))
            }
            _ => Err(HostError::NotFound(op.into())),
        }
    }
}

pub(super) struct Fixture {
    pub(super) world: Arc<World>,
    pub(super) host: Arc<MemHost>,
    pub(super) _state: tempfile::TempDir,
}

fn world_with(settings: WorldSettings) -> Fixture {
    let host = Arc::new(MemHost::default());
    let state = tempfile::tempdir().unwrap();
    let world = mem_world(settings, &host, state.path(), Default::default());
    Fixture {
        world,
        host,
        _state: state,
    }
}

/// A world of `host` on `state` with a policy.
pub(super) fn mem_world(
    settings: WorldSettings,
    host: &Arc<MemHost>,
    state: &std::path::Path,
    policy: super::call::policy::Policy,
) -> Arc<World> {
    let world = World::new(super::WorldParts {
        settings,
        identity: Identity::default(),
        hosts: vec![Mounted {
            path: vec!["mem".into()],
            kind: "mem".into(),
            host: host.clone(),
        }],
        state: super::StateAt {
            dir: state,
            url: None,
        },
        mount_point: "/mnt/w".into(),
        config_text: String::new(),
        subscriber: Arc::new(super::Unsubscribed),
        policy,
    })
    .unwrap();
    Arc::new(world)
}

fn world() -> Fixture {
    world_with(WorldSettings::default())
}

pub(super) fn root() -> Target {
    Target::Entry(entry())
}

pub(super) fn caller(session: u32) -> Caller {
    Caller {
        pid: std::process::id(),
        uid: 0,
        session,
        command: "test".into(),
        ..Default::default()
    }
}

/// What session `session` of `caller` reads as (`result` is its own).
pub(super) fn reader(session: u32) -> Session {
    caller(session).own_session()
}

pub(super) fn open(f: &Fixture, op: &str, session: u32) -> CallDoc {
    f.world
        .calls()
        .open_call(&root(), op, &caller(session))
        .unwrap()
}

/// Write and wait for the descriptor's answer.
pub(super) fn write(doc: &CallDoc, bytes: &[u8]) -> Result<u32, i32> {
    let (tx, rx) = mpsc::channel();
    doc.write(bytes, move |r| tx.send(r.map_err(|e| e.errno())).unwrap());
    rx.recv_timeout(Duration::from_secs(20)).unwrap()
}

pub(super) fn flush(doc: &CallDoc, last: bool) -> Result<(), i32> {
    let (tx, rx) = mpsc::channel();
    doc.flush(|| last, move |r| tx.send(r.map_err(|e| e.errno())).unwrap());
    rx.recv_timeout(Duration::from_secs(20)).unwrap()
}

/// A close by a copy that is (or is not) the opener's, judged the last (or not).
fn flush_by(doc: &CallDoc, last: bool, by_opener: bool) -> Result<(), i32> {
    let (tx, rx) = mpsc::channel();
    doc.flush_by(
        || last,
        || by_opener,
        move |r| tx.send(r.map_err(|e| e.errno())).unwrap(),
    );
    rx.recv_timeout(Duration::from_secs(20)).unwrap()
}

fn read(doc: &CallDoc) -> Result<String, i32> {
    let (tx, rx) = mpsc::channel();
    doc.read(0, 1 << 20, move |r| {
        tx.send(r.map_err(|e| e.errno())).unwrap()
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap()
        .map(|b| String::from_utf8(b).unwrap())
}

pub(super) fn result(f: &Fixture, op: &str, session: u32) -> String {
    f.world
        .calls()
        .result_for(&root(), op, reader(session))
        .unwrap()
}

pub(super) fn notes(f: &Fixture) -> Vec<String> {
    f.host.notes.lock().unwrap().clone()
}

#[test]
fn lines_written_one_by_one_are_one_document_run_at_the_last_close() {
    let f = world();
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, b"first line\n"), Ok(11));
    assert_eq!(write(&doc, b"second line\n"), Ok(12));
    // A copy of the descriptor closing (a forked child) runs nothing.
    assert_eq!(flush(&doc, false), Ok(()));
    assert!(notes(&f).is_empty());
    assert_eq!(flush(&doc, true), Ok(()));
    assert_eq!(notes(&f), vec!["first line\nsecond line".to_string()]);
    // Further closes and the release run nothing more.
    assert_eq!(flush(&doc, true), Ok(()));
    doc.release();
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 1);
    assert_eq!(f.world.journal().count().unwrap(), 1);
}

#[test]
fn key_value_lines_written_separately_keep_every_field() {
    let f = world();
    let doc = open(&f, "meet", 1);
    assert_eq!(write(&doc, b"n=1\n"), Ok(4));
    assert_eq!(flush(&doc, true), Ok(()));
    assert_eq!(result(&f, "meet", 1), "met\n");
}

#[test]
fn a_json_object_runs_inside_the_write_and_later_bytes_are_refused() {
    let f = world();
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, b"{\"text\":"), Ok(8), "unfinished JSON waits");
    assert!(notes(&f).is_empty());
    assert_eq!(write(&doc, b"\"x\"}\n"), Ok(5));
    assert_eq!(notes(&f), vec!["x".to_string()]);
    // White space after the document changes nothing; anything else is EINVAL, journaled
    // once with its bytes and words.
    assert_eq!(write(&doc, b"\n"), Ok(1));
    assert_eq!(write(&doc, b"more\n"), Err(libc::EINVAL));
    assert_eq!(write(&doc, b"and more\n"), Err(libc::EINVAL));
    assert_eq!(notes(&f).len(), 1);
    assert_eq!(f.world.journal().count().unwrap(), 2);
    let r = result(&f, "note", 1);
    assert!(r.contains("already ran its call"), "{r}");
    // Reading back gives this descriptor's own call's result.
    assert_eq!(read(&doc), Ok("noted 1\n".to_string()));
}

#[test]
fn json_that_can_never_be_valid_fails_in_the_write() {
    let f = world();
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, b"{\"text\": nope}\n"), Err(libc::EINVAL));
    assert!(result(&f, "note", 1).contains("not valid JSON"));
    // Unfinished JSON fails at the last close.
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, b"{\"text\":\n"), Ok(9));
    assert_eq!(flush(&doc, true), Err(libc::EINVAL));
    assert!(notes(&f).is_empty());
}

#[test]
fn the_openers_close_hears_the_errno_of_a_call_another_copys_close_ran() {
    let f = world();
    // A fork of a multi-threaded caller closes its inherited copy at exec, and its FLUSH
    // is judged the last while the opener's own close is on its way: the opener's close
    // still gets the errno (it used to get 0); any other copy's close gets 0.
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, b"{\"text\":\n"), Ok(9));
    assert_eq!(flush_by(&doc, true, false), Err(libc::EINVAL));
    assert_eq!(flush_by(&doc, true, true), Err(libc::EINVAL));
    assert_eq!(flush_by(&doc, false, true), Err(libc::EINVAL));
    assert_eq!(flush_by(&doc, true, false), Ok(()));
    assert!(notes(&f).is_empty());
    // A call that ran inside its write told its writer there: a later close gets 0.
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, b"{\"text\": nope}\n"), Err(libc::EINVAL));
    assert_eq!(flush_by(&doc, true, true), Ok(()));
    assert_eq!(f.world.journal().count().unwrap(), 2);
}

#[test]
fn a_blank_first_write_runs_with_no_arguments() {
    let f = world();
    let doc = open(&f, "close", 1);
    assert_eq!(write(&doc, b"\n"), Ok(1));
    assert_eq!(result(&f, "close", 1), "closed\n");
    // An op that needs arguments fails in the write, where bash sees it.
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, b"\n"), Err(libc::EINVAL));
}

#[test]
fn an_op_blocked_whatever_the_arguments_is_refused_at_open_and_journaled() {
    let f = world();
    f.host.closed.store(true, Ordering::SeqCst);
    let err = match f.world.calls().open_call(&root(), "close", &caller(7)) {
        Err(e) => e,
        Ok(_) => panic!("opened"),
    };
    assert_eq!(err.errno(), libc::EPERM);
    assert!(err.message.contains("already closed"), "{}", err.message);
    let r = result(&f, "close", 7);
    assert!(
        r.starts_with("error: blocked by guard open: already closed"),
        "{r}"
    );
    let run = f.world.journal().recent(1).unwrap().remove(0);
    assert_eq!(run.status, "blocked");
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn opening_and_closing_without_writing_runs_nothing() {
    let f = world();
    let doc = open(&f, "close", 1);
    assert_eq!(flush(&doc, true), Ok(()));
    doc.release();
    assert_eq!(read(&doc), Ok(String::new()));
    assert_eq!(f.world.journal().count().unwrap(), 0);
}

#[test]
fn bytes_no_flush_ran_run_at_release() {
    let f = world();
    let doc = open(&f, "note", 1);
    write(&doc, b"never flushed").unwrap();
    doc.release();
    // Nobody waits for it: it runs on a worker.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while notes(&f).is_empty() {
        assert!(std::time::Instant::now() < deadline, "never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(notes(&f), vec!["never flushed".to_string()]);
}

fn read_at(doc: &CallDoc, offset: u64, size: u32) -> String {
    let (tx, rx) = mpsc::channel();
    doc.read(offset, size, move |r| {
        tx.send(r.map_err(|e| e.errno())).unwrap()
    });
    String::from_utf8(rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap()).unwrap()
}

#[test]
fn reading_back_without_seeking_gets_the_result_from_its_start() {
    let f = world();
    // Written 5 bytes, then read on from position 5 in chunks of 3.
    let doc = open(&f, "note", 1);
    write(&doc, b"hello").unwrap();
    assert_eq!(read_at(&doc, 5, 3), "not");
    assert_eq!(read_at(&doc, 8, 3), "ed ");
    assert_eq!(read_at(&doc, 11, 10), "1\n");
    // Seeking back to 0 first: the offsets are the result's.
    let doc = open(&f, "note", 1);
    write(&doc, b"again").unwrap();
    assert_eq!(read_at(&doc, 0, 4), "note");
    assert_eq!(read_at(&doc, 4, 2), "d ");
    assert_eq!(read_at(&doc, 6, 10), "2\n");
}

#[test]
fn reading_back_runs_the_document_and_a_failure_answers_with_its_errno_once() {
    let f = world();
    let doc = open(&f, "note", 1);
    write(&doc, b"read me back\n").unwrap();
    assert_eq!(read(&doc), Ok("noted 1\n".to_string()));
    f.host.closed.store(false, Ordering::SeqCst);
    let doc = open(&f, "meet", 1);
    write(&doc, b"n=x\n").unwrap();
    assert_eq!(read(&doc), Err(libc::EINVAL));
    let words = read(&doc).unwrap();
    assert!(
        words.starts_with("error: n=x: expected a integer") || words.starts_with("error:"),
        "{words}"
    );
}

#[test]
fn a_document_past_max_call_bytes_is_refused_at_once_and_nothing_runs() {
    let f = world_with(WorldSettings {
        max_call_bytes: 100,
        ..WorldSettings::default()
    });
    let doc = open(&f, "note", 1);
    assert_eq!(write(&doc, &[b'a'; 60]), Ok(60));
    assert_eq!(write(&doc, &[b'b'; 60]), Err(libc::EFBIG));
    assert_eq!(
        write(&doc, b"c"),
        Err(libc::EFBIG),
        "nothing more is buffered"
    );
    assert_eq!(flush(&doc, true), Ok(()));
    doc.release();
    assert!(notes(&f).is_empty());
    let r = result(&f, "note", 1);
    assert!(r.contains("max_call_bytes (100 bytes)"), "{r}");
    let run = f.world.journal().recent(1).unwrap().remove(0);
    assert_eq!(run.status, "too_large");
    assert!(
        run.args.len() < 300,
        "the run keeps a preview, not the payload"
    );
}

/// Write `bytes` at `offset` (an NFS WRITE) and wait for the answer.
fn write_at(doc: &CallDoc, offset: u64, bytes: &[u8]) -> Result<u32, i32> {
    let (tx, rx) = mpsc::channel();
    doc.write_at(offset, bytes, move |r| {
        tx.send(r.map_err(|e| e.errno())).unwrap()
    });
    rx.recv_timeout(Duration::from_secs(20)).unwrap()
}

#[test]
fn pieces_out_of_order_count_wherever_they_land_and_run_only_once_whole() {
    let f = world_with(WorldSettings {
        max_call_bytes: 1000,
        max_buffered_bytes: 3000,
        ..WorldSettings::default()
    });
    // Past max_call_bytes, wherever it starts: no such document fits.
    let far = open(&f, "note", 1);
    assert_eq!(write_at(&far, 1 << 30, b"x"), Err(libc::EFBIG));
    assert_eq!(write_at(&far, 1 << 31, b"x"), Err(libc::EFBIG));
    assert_eq!(write_at(&far, u64::MAX, b"x"), Err(libc::EFBIG));
    assert!(result(&f, "note", 1).contains("max_call_bytes"));
    // In order or not, a whole document is one call; a piece sent again changes nothing.
    let doc = open(&f, "note", 1);
    assert_eq!(write_at(&doc, 6, b"world\n"), Ok(6));
    assert_eq!(write_at(&doc, 6, b"world\n"), Ok(6));
    assert_eq!(write_at(&doc, 0, b"hello "), Ok(6));
    assert_eq!(flush(&doc, true), Ok(()));
    assert_eq!(notes(&f), vec!["hello world".to_string()]);
    // A piece past a gap holds the document up to its end: three fill the total.
    let held: Vec<CallDoc> = (0..4).map(|_| open(&f, "note", 2)).collect();
    let answers: Vec<_> = held.iter().map(|d| write_at(d, 900, b"y")).collect();
    assert_eq!(answers[..3], [Ok(1), Ok(1), Ok(1)], "{answers:?}");
    assert_eq!(answers[3], Err(libc::ENOSPC), "{answers:?}");
    // A document still missing bytes at its close never runs, and gives its share back.
    assert_eq!(flush(&held[0], true), Err(libc::EINVAL));
    assert!(
        result(&f, "note", 2).contains("bytes 0 to 900 of the document never arrived"),
        "{}",
        result(&f, "note", 2)
    );
    let again = open(&f, "note", 2);
    assert_eq!(write_at(&again, 900, b"y"), Ok(1));
    drop(held);
    drop(again);
    assert_eq!(notes(&f).len(), 1, "nothing incomplete ran");
    // Gaps without end: refused before the ranges pile up.
    let f = world_with(WorldSettings {
        max_call_bytes: 100_000,
        ..WorldSettings::default()
    });
    let holes = open(&f, "note", 3);
    let last = (0..5000)
        .map(|i| write_at(&holes, 10 + 2 * i, b"z"))
        .find(|r| r.is_err());
    assert_eq!(last, Some(Err(libc::ENOSPC)));
}

#[test]
fn calls_of_one_op_run_side_by_side() {
    let f = world();
    let n = 6;
    let (tx, rx) = mpsc::channel();
    for _ in 0..n {
        let doc = open(&f, "meet", 1);
        let tx = tx.clone();
        doc.write(format!("{{\"n\":{n}}}").as_bytes(), move |r| {
            tx.send(r.map_err(|e| e.errno())).unwrap()
        });
    }
    for _ in 0..n {
        // Each write reports its 7 bytes only once all six met inside the host.
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), Ok(7));
    }
}

/// Wait (bounded) until the host has been called: a call is inside it.
fn until_a_call_is_inside(f: &Fixture) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while f.host.calls.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no call reached the host"
        );
        std::thread::yield_now();
    }
}

/// Wait (bounded) until run `id` is no longer running; returns it.
fn ended(f: &Fixture, id: i64) -> crate::state::Run {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let run = f.world.journal().get(id).unwrap().unwrap();
        if run.status != "running" {
            return run;
        }
        assert!(std::time::Instant::now() < deadline, "never ended: {run:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The text of a file of the tree at `path`, as session `session` reads it.
fn file(f: &Fixture, path: &str, session: u32) -> String {
    let node = f.world.resolve_path(path).unwrap();
    String::from_utf8(f.world.read(&node, reader(session)).unwrap()).unwrap()
}

/// Call an op of run `id` (`wait`, `cancel`) as `who`: errno or the result text.
fn run_op(
    f: &Fixture,
    id: i64,
    op: &str,
    args: &[u8],
    who: &Caller,
) -> Result<String, (i32, String)> {
    let r = f.world.calls().call(&Target::Run(id), op, args, who);
    match r.outcome {
        Ok(()) => Ok(r.text.to_string()),
        Err(e) => Err((e.errno(), r.text.to_string())),
    }
}

#[test]
fn a_call_past_the_timeout_answers_etimedout_and_goes_on_as_a_run() {
    let f = world_with(WorldSettings {
        call_timeout_ms: 100,
        ..WorldSettings::default()
    });
    let doc = open(&f, "sleep", 1);
    assert_eq!(write(&doc, b"{\"ms\":600}"), Err(libc::ETIMEDOUT));
    // The caller's result names the run and its two ops while it runs.
    let r = result(&f, "sleep", 1);
    let dir = "/mnt/w/mem/ops/sleep/runs/1";
    assert!(r.starts_with("running: sleep on /mem"), "{r}");
    assert!(r.contains(&format!("run: {dir}\n")), "{r}");
    assert!(r.contains(&format!("echo > {dir}/ops/wait/call")), "{r}");
    assert!(r.contains(&format!("echo > {dir}/ops/cancel/call")), "{r}");
    let id = f.world.journal().recent(1).unwrap()[0].id;
    assert_eq!(
        f.world.journal().get(id).unwrap().unwrap().status,
        "running"
    );
    assert_eq!(file(&f, "/mem/ops/sleep/runs/1/status", 1), "running\n");
    let d = file(&f, "/mem/ops/sleep/runs/1/description", 1);
    assert!(
        d.starts_with("Run 1 of sleep on /mem by pid") && d.contains("running for"),
        "{d}"
    );
    // Its outcome is the run's own, recorded when it ends.
    let run = ended(&f, id);
    assert_eq!(
        (run.status.as_str(), run.result.as_str()),
        ("ok", "slept\n")
    );
    assert_eq!(result(&f, "sleep", 1), "slept\n");
    let d = file(&f, "/mem/ops/sleep/runs/1/description", 1);
    assert!(d.contains("· ok after 0."), "{d}");
}

#[test]
fn runs_count_per_op_from_one() {
    let f = world();
    for text in ["a", "b"] {
        let doc = open(&f, "note", 1);
        assert!(write(&doc, format!("{{\"text\":\"{text}\"}}").as_bytes()).is_ok());
    }
    let doc = open(&f, "close", 1);
    assert!(write(&doc, b"{}").is_ok());
    let names = |op: &str| -> Vec<String> {
        let node = f
            .world
            .resolve_path(&format!("/mem/ops/{op}/runs"))
            .unwrap();
        let mut n: Vec<String> = f
            .world
            .list(&node)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        n.sort();
        n
    };
    assert_eq!(names("note"), ["1", "2"]);
    assert_eq!(names("close"), ["1"]);
    assert_eq!(
        file(&f, "/mem/ops/note/runs/2/args", 1),
        "{\"text\":\"b\"}\n"
    );
    assert_eq!(file(&f, "/mem/ops/close/runs/1/result", 1), "closed\n");
    assert!(f.world.resolve_path("/mem/ops/close/runs/2").is_err());
    assert!(
        f.world.resolve_path("/mem/ops/close/runs/01").is_err(),
        "one spelling per run"
    );
    // The change feed names runs the same way.
    let feed = file(&f, "/.wip/events", 1);
    assert!(feed.contains(r#""op":"close","run":1,"#), "{feed}");
}

#[test]
fn a_long_run_shows_progress_and_can_be_waited_on_and_cancelled() {
    let f = world_with(WorldSettings {
        call_timeout_ms: 300,
        ..WorldSettings::default()
    });
    let doc = open(&f, "steps", 1);
    assert_eq!(write(&doc, b"{\"n\":200,\"ms\":20}"), Err(libc::ETIMEDOUT));
    let id = f.world.journal().recent(1).unwrap()[0].id;
    // Progress advances while it runs.
    let first = file(&f, "/mem/ops/steps/runs/1/progress", 1);
    std::thread::sleep(Duration::from_millis(100));
    let later = file(&f, "/mem/ops/steps/runs/1/progress", 1);
    assert!(
        first.ends_with("/200 step ") || first.contains("/200 step"),
        "{first}"
    );
    let step = |p: &str| p.split('/').next().unwrap().parse::<u32>().unwrap();
    assert!(step(&later) > step(&first), "{first} then {later}");
    assert!(
        later.ends_with('\n') && later.lines().count() == 1,
        "{later}"
    );
    // wait: still running after its own timeout, in words that say how to go on.
    let (errno, text) = run_op(&f, id, "wait", b"{\"timeout_ms\":50}", &caller(1)).unwrap_err();
    assert_eq!(errno, libc::ETIMEDOUT, "{text}");
    assert!(
        text.contains("run 1 is still running") && text.contains("ops/wait/call"),
        "{text}"
    );
    // Another uid in another session may not cancel it; the guard says who may.
    let stranger = Caller {
        uid: 4242,
        session: 77,
        ..caller(77)
    };
    let guard = file(&f, "/mem/ops/steps/runs/1/ops/cancel/guard", 1);
    assert!(
        guard.contains("its host can stop it") && guard.contains("its own session (1)"),
        "{guard}"
    );
    let (errno, text) = run_op(&f, id, "cancel", b"", &stranger).unwrap_err();
    assert_eq!(errno, libc::EPERM, "{text}");
    assert_eq!(
        f.world.journal().get(id).unwrap().unwrap().status,
        "running"
    );
    // The mount's owner, from another session, may.
    let owner = Caller {
        uid: unsafe { libc::geteuid() },
        ..caller(2)
    };
    let text = run_op(&f, id, "cancel", b"\n", &owner).unwrap();
    assert!(text.starts_with("run 1 was cancelled: "), "{text}");
    let run = ended(&f, id);
    assert_eq!(
        (run.status.as_str(), run.errno),
        ("cancelled", libc::ECANCELED)
    );
    assert!(run.result.contains("stopped at step"), "{}", run.result);
    // Cancelling again says it had ended; wait returns its end, with its errno.
    let guard = file(&f, "/mem/ops/steps/runs/1/ops/cancel/guard", 1);
    assert!(guard.contains("already ended cancelled"), "{guard}");
    let (errno, text) = run_op(&f, id, "wait", b"", &caller(3)).unwrap_err();
    assert_eq!(errno, libc::ECANCELED, "{text}");
    assert!(text.contains("run 1 ended cancelled"), "{text}");
    // The last progress stays readable.
    assert!(file(&f, "/mem/ops/steps/runs/1/progress", 1).contains("/200 step"));
    // The run's own ops are runs too, numbered per op.
    assert!(f
        .world
        .resolve_path("/mem/ops/steps/runs/1/ops/wait/runs/2/result")
        .is_ok());
}

#[test]
fn wait_returns_the_result_of_a_run_that_ends_while_it_waits() {
    let f = world_with(WorldSettings {
        call_timeout_ms: 2000,
        ..WorldSettings::default()
    });
    let f = Arc::new(f);
    let doc = open(&f, "steps", 1);
    let (tx, rx) = mpsc::channel();
    doc.write(b"{\"n\":5,\"ms\":100}", move |r| {
        tx.send(r.map_err(|e| e.errno())).unwrap()
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let id = loop {
        if let Some(r) = f.world.journal().recent(1).unwrap().first() {
            break r.id;
        }
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    };
    let started = std::time::Instant::now();
    let text = run_op(&f, id, "wait", b"", &caller(2)).unwrap();
    assert_eq!(text, "5 steps done\n");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "woken at the end, not polled late"
    );
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Ok(16));
}

#[test]
fn a_run_its_host_cannot_stop_says_so_and_goes_on() {
    let f = world_with(WorldSettings {
        call_timeout_ms: 100,
        ..WorldSettings::default()
    });
    let doc = open(&f, "sleep", 1);
    assert_eq!(write(&doc, b"{\"ms\":400}"), Err(libc::ETIMEDOUT));
    let id = f.world.journal().recent(1).unwrap()[0].id;
    let guard = file(&f, "/mem/ops/sleep/runs/1/ops/cancel/guard", 1);
    assert!(guard.contains("cannot stop a call once it runs"), "{guard}");
    let (errno, text) = run_op(&f, id, "cancel", b"", &caller(1)).unwrap_err();
    assert_eq!(errno, libc::EPERM, "{text}");
    assert_eq!(ended(&f, id).status, "ok");
}

#[test]
fn a_call_cancelled_while_it_waits_for_a_worker_never_runs() {
    let f = world_with(WorldSettings {
        call_timeout_ms: 5000,
        max_call_threads: 1,
        ..WorldSettings::default()
    });
    let first = open(&f, "sleep", 1);
    let (tx, rx) = mpsc::channel();
    first.write(b"{\"ms\":1000}", move |r| {
        tx.send(r.map_err(|e| e.errno())).unwrap()
    });
    until_a_call_is_inside(&f);
    // The second waits for the only worker; its caller waits too.
    let second = open(&f, "steps", 2);
    let (tx2, rx2) = mpsc::channel();
    second.write(b"{\"n\":1,\"ms\":1}", move |r| {
        tx2.send(r.map_err(|e| e.errno())).unwrap()
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let id = loop {
        let runs = f.world.journal().recent(1).unwrap();
        if runs.first().is_some_and(|r| r.op == "steps") {
            break runs[0].id;
        }
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    };
    let guard = file(&f, "/mem/ops/steps/runs/1/ops/cancel/guard", 2);
    assert!(guard.contains("its host can stop it"), "{guard}");
    let text = run_op(&f, id, "cancel", b"", &caller(2)).unwrap();
    assert!(text.contains("never ran"), "{text}");
    assert_eq!(
        rx2.recv_timeout(Duration::from_secs(5)).unwrap(),
        Err(libc::ECANCELED)
    );
    assert_eq!(ended(&f, id).status, "cancelled");
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Ok(11));
    // The host saw the first call only.
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_call_waiting_for_a_worker_times_out_and_never_runs() {
    let f = world_with(WorldSettings {
        call_timeout_ms: 300,
        max_call_threads: 1,
        ..WorldSettings::default()
    });
    let first = open(&f, "sleep", 1);
    let (tx, rx) = mpsc::channel();
    first.write(b"{\"ms\":1500}", move |r| {
        tx.send(r.map_err(|e| e.errno())).unwrap()
    });
    // Wait (bounded) until the first call is inside the host, so the second one queues.
    until_a_call_is_inside(&f);
    let second = open(&f, "note", 2);
    assert_eq!(
        write(&second, b"{\"text\":\"queued\"}"),
        Err(libc::ETIMEDOUT)
    );
    let r = result(&f, "note", 2);
    assert!(
        r.contains("waiting for a free worker") && r.contains("did not run"),
        "{r}"
    );
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        Err(libc::ETIMEDOUT)
    );
    // The first finishes late; the queued one never runs.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while f
        .world
        .journal()
        .recent(2)
        .unwrap()
        .iter()
        .any(|r| r.op == "sleep" && r.status != "ok")
    {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every worker idle and nothing queued: the queued call's job was taken and ended
    // (a verdict that does not depend on how long a loaded machine takes to get there).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let p = f.world.calls().pool_stats();
        if p.queued == 0 && p.idle == p.threads {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pool never went idle"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(notes(&f).is_empty(), "the timed-out queued call ran");
}

#[test]
fn results_are_per_session_even_interleaved_on_one_op() {
    let f = world();
    let a = open(&f, "note", 100);
    let b = open(&f, "note", 200);
    write(&a, b"from a\n").unwrap();
    write(&b, b"from b\n").unwrap();
    flush(&b, true).unwrap();
    flush(&a, true).unwrap();
    // a's call finished last, yet each session sees its own.
    assert_eq!(result(&f, "note", 100), "noted 2\n");
    assert_eq!(result(&f, "note", 200), "noted 1\n");
    // A session that made no call sees the latest.
    assert_eq!(result(&f, "note", 300), "noted 2\n");
}

/// A session as `who` is: number, start and uid.
fn session(number: u32, start: u64, uid: u32) -> Caller {
    Caller {
        uid,
        session: number,
        session_start: start,
        ..caller(number)
    }
}

fn note_as(f: &Fixture, who: &Caller, text: &str) {
    let doc = f.world.calls().open_call(&root(), "note", who).unwrap();
    write(&doc, format!("{{\"text\":\"{text}\"}}").as_bytes()).unwrap();
}

fn result_as(f: &Fixture, who: &Caller) -> String {
    f.world
        .calls()
        .result_for(&root(), "note", who.own_session())
        .unwrap()
}

#[test]
fn a_session_without_a_call_reads_only_its_own_uids_latest_and_a_reused_number_is_another_session()
{
    let f = world();
    let (first, second) = (session(100, 10, 0), session(200, 20, 0));
    note_as(&f, &first, "a");
    note_as(&f, &second, "b");
    assert_eq!(result_as(&f, &first), "noted 1\n");
    // Session 100 again, begun later (its number handed out again), as another user: not
    // the first one's result, nor anyone else's.
    assert_eq!(result_as(&f, &session(100, 99, 1001)), "");
    // The same, of the first one's uid: its uid's latest, not the first session's own.
    assert_eq!(result_as(&f, &session(100, 99, 0)), "noted 2\n");
    // Once uid 1001 called, its sessions without a call read that.
    note_as(&f, &session(300, 30, 1001), "c");
    assert_eq!(result_as(&f, &session(100, 99, 1001)), "noted 3\n");
    assert_eq!(result_as(&f, &session(400, 40, 0)), "noted 2\n");
    assert_eq!(
        f.world
            .calls()
            .result_for(&root(), "note", Session::NONE)
            .unwrap(),
        "",
        "nobody's session reads nothing"
    );
}

#[test]
fn a_later_session_given_a_runs_session_number_may_not_cancel_it() {
    let f = world_with(WorldSettings {
        call_timeout_ms: 300,
        ..WorldSettings::default()
    });
    // Not the mount's owner: only its session may cancel.
    let agent = session(1, 10, 4242);
    let doc = f.world.calls().open_call(&root(), "steps", &agent).unwrap();
    assert_eq!(write(&doc, b"{\"n\":200,\"ms\":20}"), Err(libc::ETIMEDOUT));
    let id = f.world.journal().recent(1).unwrap()[0].id;
    let later = session(1, 11, 4242);
    let (errno, text) = run_op(&f, id, "cancel", b"", &later).unwrap_err();
    assert_eq!(errno, libc::EPERM, "{text}");
    assert!(text.contains("not to this one"), "{text}");
    assert_eq!(
        f.world.journal().get(id).unwrap().unwrap().status,
        "running"
    );
    let text = run_op(&f, id, "cancel", b"", &agent).unwrap();
    assert!(text.starts_with("run 1 was cancelled: "), "{text}");
}

#[test]
fn bounded_hosts_answer_on_the_callers_thread() {
    // Which thread answers a write: the caller's for the root's ops (bounded: SQLite), a
    // worker's for a host whose calls may block (MemHost is not bounded).
    let f = world();
    let answered_on = |doc: &CallDoc, bytes: &'static [u8]| {
        let (tx, rx) = mpsc::channel();
        doc.write(bytes, move |r| {
            tx.send((std::thread::current().id(), r.map_err(|e| e.errno())))
                .unwrap()
        });
        rx.recv_timeout(Duration::from_secs(20)).unwrap()
    };
    let here = std::thread::current().id();
    let doc = f
        .world
        .calls()
        .open_call(&Target::Root, "locate", &caller(1))
        .unwrap();
    let (thread, r) = answered_on(&doc, b"{\"query\":\"nothing-like-this\"}");
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        thread, here,
        "a bounded call answers on its caller's thread"
    );
    let doc = open(&f, "note", 1);
    let (thread, r) = answered_on(&doc, b"{\"text\":\"x\"}");
    assert!(r.is_ok(), "{r:?}");
    assert_ne!(thread, here, "a call that may block runs on a worker");
}

#[test]
fn every_nodes_kind_and_size_agree_with_its_attributes_and_content() {
    // readdir takes the type from `kind` alone and the kernel trusts attr sizes: a walk of
    // the whole tree (runs included, after a call) must find both true everywhere.
    let f = world();
    let doc = open(&f, "note", 1);
    write(&doc, b"text=hello\n").unwrap();
    flush(&doc, true).unwrap();
    let mut todo = vec![super::node::NodeId::Root];
    let mut seen = 0;
    while let Some(node) = todo.pop() {
        seen += 1;
        let attr = f.world.attr(&node, reader(1)).unwrap();
        assert_eq!(f.world.kind(&node), attr.kind, "{node:?}");
        match attr.kind {
            super::node::NodeKind::Dir => {
                for (_, child) in f.world.list(&node).unwrap() {
                    todo.push(child);
                }
            }
            super::node::NodeKind::File if !attr.writable => {
                let bytes = f.world.read(&node, reader(1)).unwrap();
                assert_eq!(attr.size, bytes.len() as u64, "{node:?}");
            }
            super::node::NodeKind::Symlink => {
                let target = f.world.readlink(&node).unwrap();
                assert_eq!(attr.size, target.len() as u64, "{node:?}");
                // `ops` leads to `.ops`: walk on through it, as `find -L` does.
                if let super::node::NodeId::OpsLink(t) = &node {
                    assert_eq!(target, ".ops");
                    todo.push(super::node::NodeId::Ops(t.clone()));
                }
            }
            _ => {}
        }
    }
    assert!(seen > 40, "walked {seen} nodes");
}

#[test]
fn a_host_that_checks_its_guard_in_the_call_is_not_asked_before_it() {
    let asks = |f: &Fixture| f.host.guard_asks.load(Ordering::SeqCst);
    let run_guard = |f: &Fixture, run: i64| {
        let node = super::node::NodeId::RunFile(run, super::node::RunFile::Guard);
        String::from_utf8(f.world.read(&node, reader(1)).unwrap()).unwrap()
    };
    // A host that does not: asked once before the call, and the run keeps its answer.
    let f = world();
    let r = f.world.calls().call(&root(), "close", b"\n", &caller(1));
    assert!(r.outcome.is_ok());
    assert_eq!(asks(&f), 1);
    assert_eq!(run_guard(&f, r.run), "allowed\n✓ open: open\n");

    // One that does: not asked; the host's own refusal is the errno and the words.
    let f = world();
    f.host.checks_in_call.store(true, Ordering::SeqCst);
    let r = f.world.calls().call(&root(), "close", b"\n", &caller(1));
    assert!(r.outcome.is_ok());
    assert_eq!(
        asks(&f),
        0,
        "the runtime asked for the guard before the call"
    );
    assert!(run_guard(&f, r.run).contains("checked by the host as the call ran"));
    let again = f.world.calls().call(&root(), "close", b"\n", &caller(1));
    assert_eq!(again.outcome.map_err(|e| e.errno()), Err(libc::EPERM));
    assert!(again.text.contains("already closed"), "{}", again.text);
    // Opening `call` still reads the guard, so bash hears the refusal at open.
    let before = asks(&f);
    let refused = f.world.calls().open_call(&root(), "close", &caller(1));
    assert_eq!(refused.err().map(|e| e.errno()), Some(libc::EPERM));
    assert_eq!(asks(&f), before + 1);
}

/// A collection `items/` whose members have titles (one has none, one is named like a
/// reserved name), and a root op `find` that discovers `items/1`.
struct Shelf;

impl Shelf {
    const ITEMS: [(&'static str, &'static str); 4] = [
        ("1", "Crash when config is missing"),
        (
            "2",
            "A title/with a slash that goes on for much longer than sixty bytes do",
        ),
        ("3", ""),
        ("ops", "Named like a reserved name"),
    ];
}

impl Host for Shelf {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        Ok(match path {
            [] => Some(EntryInfo::new("a shelf", "shelf://")),
            [items] if items == "items" => Some(EntryInfo::new("items", "shelf://items")),
            [items, n] if items == "items" => {
                Shelf::ITEMS.iter().find(|(k, _)| k == n).map(|(k, t)| {
                    EntryInfo::new(format!("item {k}"), format!("shelf://{k}")).titled(*t)
                })
            }
            _ => None,
        })
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        Ok(match path {
            [] => vec![Child {
                name: "items".into(),
                info: EntryInfo::new("items", "shelf://items"),
            }],
            [items] if items == "items" => Shelf::ITEMS
                .iter()
                .map(|(k, _)| Child {
                    name: k.to_string(),
                    info: self.entry(&path_of(&["items", k])).unwrap().unwrap(),
                })
                .collect(),
            _ => Vec::new(),
        })
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        Ok(if path.is_empty() {
            vec![OpSpec {
                name: "find".into(),
                description: "find: for tests".into(),
                schema: object_schema(json!({}), &[]),
                output: None,
            }]
        } else {
            Vec::new()
        })
    }

    fn guard(&self, _path: &[String], _op: &str, _args: Option<&Value>) -> HostResult<Guard> {
        Ok(Guard::default())
    }

    fn call(&self, _: &[String], _: &str, _: &Value, _: &Caller) -> HostResult<CallOutcome> {
        Ok(CallOutcome::text("found").discovered(path_of(&["items", "1"])))
    }
}

fn shelf(titled: bool) -> (Arc<World>, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let world = World::new(super::WorldParts {
        settings: WorldSettings {
            titled,
            ..WorldSettings::default()
        },
        identity: Identity::default(),
        hosts: vec![Mounted {
            path: vec!["shelf".into()],
            kind: "shelf".into(),
            host: Arc::new(Shelf),
        }],
        state: super::StateAt {
            dir: state.path(),
            url: None,
        },
        mount_point: "/mnt/w".into(),
        config_text: String::new(),
        subscriber: Arc::new(super::Unsubscribed),
        policy: Default::default(),
    })
    .unwrap();
    (Arc::new(world), state)
}

fn listed(world: &World, path: &str) -> Vec<String> {
    let dir = world.resolve_path(path).unwrap();
    let skip = ["description", "ref", "ops"];
    world
        .list(&dir)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !skip.contains(&n.as_str()))
        .collect()
}

#[test]
fn titled_names_list_titles_and_the_bare_name_is_the_same_node() {
    let (plain, _s1) = shelf(false);
    assert_eq!(listed(&plain, "/shelf/items"), vec!["1", "2", "3", "ops~"]);
    assert!(
        plain
            .resolve_path("/shelf/items/1 Crash when config is missing")
            .is_err(),
        "without titled names a titled name is no name"
    );

    let (w, _s2) = shelf(true);
    let names = listed(&w, "/shelf/items");
    assert_eq!(names[0], "1 Crash when config is missing");
    assert!(names[1].starts_with("2 A title∕with a slash"), "{names:?}");
    assert!(names[1].len() <= super::titles::MAX_BYTES && names[1].ends_with('…'));
    assert_eq!(names[2], "3", "no title: the bare name");
    assert_eq!(names[3], "ops~ Named like a reserved name");
    for (name, bare) in names.iter().zip(["1", "2", "3", "ops~"]) {
        let by_title = w.resolve_path(&format!("/shelf/items/{name}")).unwrap();
        let by_bare = w.resolve_path(&format!("/shelf/items/{bare}")).unwrap();
        assert_eq!(by_title, by_bare, "{name} and {bare} are one node");
        let ref_file = w
            .lookup(&by_title, "ref")
            .and_then(|n| w.read(&n, Session::NONE))
            .unwrap();
        let key = if bare == "ops~" { "ops" } else { bare };
        assert_eq!(
            String::from_utf8(ref_file).unwrap(),
            format!("shelf://{key}\n")
        );
    }
    // A title that is not the entry's, or cut elsewhere, names nothing.
    for wrong in [
        "1 Crash",
        "1 Crash when config is missing ",
        "9 Crash",
        "1 Other",
    ] {
        assert!(
            w.resolve_path(&format!("/shelf/items/{wrong}")).is_err(),
            "{wrong:?} resolved"
        );
    }
}

#[test]
fn with_titled_names_results_and_discovered_links_print_canonical_paths() {
    let (w, _s) = shelf(true);
    w.resolve_path("/shelf/items/1 Crash when config is missing")
        .unwrap();
    let target = Target::Entry(EntryRef::new(0, Vec::new()));
    let report = w.calls().call(&target, "find", b"\n", &caller(1));
    assert!(report.outcome.is_ok(), "{}", report.text);
    assert_eq!(&*report.text, "found\n/mnt/w/shelf/items/1\titem 1\n");
    let link = w
        .resolve_path(&format!("/shelf/ops/find/runs/{}/discovered/1", report.run))
        .unwrap();
    assert_eq!(
        w.readlink(&link).unwrap(),
        "../../../../../../shelf/items/1"
    );
    let known = String::from_utf8(
        w.read(
            &super::node::NodeId::WipFile(super::node::WipFile::Known),
            Session::NONE,
        )
        .unwrap(),
    )
    .unwrap();
    assert!(known.contains("/shelf/items/1\t"), "{known}");
    assert!(!known.contains("Crash when"), "{known}");
}

// ---- bodies -----------------------------------------------------------------------

fn entry() -> EntryRef {
    EntryRef::new(0, Vec::new())
}

fn body_flush(doc: &super::BodyDoc, last: bool) -> Result<(), i32> {
    let (tx, rx) = mpsc::channel();
    doc.flush(|| last, move |r| tx.send(r.map_err(|e| e.errno())).unwrap());
    rx.recv_timeout(Duration::from_secs(20)).unwrap()
}

#[test]
fn reading_a_body_is_not_a_call() {
    use super::node::NodeId;
    let f = world();
    *f.host.body.lock().unwrap() = "some text\n".into();
    let node = f.world.lookup(&NodeId::Entry(entry()), "body").unwrap();
    assert_eq!(node, NodeId::Body(entry()));
    let listed: Vec<String> = f
        .world
        .list(&NodeId::Entry(entry()))
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(listed, ["description", "ref", "body", "ops"]);
    let attr = f.world.attr(&node, Session::NONE).unwrap();
    assert_eq!(attr.size, 10);
    assert!(attr.writable);
    let snap = f.world.snapshot(&node, Session::NONE).unwrap();
    assert_eq!(f.world.read_at(&node, &snap, 5, 100).unwrap(), b"text\n");
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 0);
    assert_eq!(f.world.journal().count().unwrap(), 0);
    assert_eq!(
        f.world.journal().last_event().unwrap(),
        0,
        "no change feed event"
    );
}

#[test]
fn writing_a_body_is_one_journaled_call_of_its_write_op() {
    let f = world();
    *f.host.body.lock().unwrap() = "old\n".into();
    let doc = f
        .world
        .calls()
        .open_body(&entry(), &caller(3), true, false)
        .unwrap();
    assert_eq!(doc.write(0, b"new "), Ok(4));
    assert_eq!(doc.write(4, b"text\n"), Ok(5));
    assert_eq!(doc.size(), 9);
    // A copy of the descriptor closing runs nothing.
    assert_eq!(body_flush(&doc, false), Ok(()));
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 0);
    assert_eq!(body_flush(&doc, true), Ok(()));
    doc.release();
    assert_eq!(*f.host.body.lock().unwrap(), "new text\n");
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 1);
    let run = f.world.journal().recent(1).unwrap().remove(0);
    assert_eq!((run.op.as_str(), run.status.as_str()), ("set_body", "ok"));
    assert_eq!(run.args, r#"{"text":"new text\n"}"#);
    assert!(run.guard.starts_with("allowed"), "{}", run.guard);
    assert_eq!(result(&f, "set_body", 3), "body set (9 bytes)\n");
}

#[test]
fn a_body_opened_without_truncating_starts_from_its_content() {
    let f = world();
    *f.host.body.lock().unwrap() = "one\n".into();
    // `>>` appends at the end of what is there.
    let doc = f
        .world
        .calls()
        .open_body(&entry(), &caller(1), false, true)
        .unwrap();
    assert_eq!(doc.read(0, 100), b"one\n");
    // Whatever offset the kernel thinks the end is at.
    doc.write(1, b"two\n").unwrap();
    assert_eq!(body_flush(&doc, true), Ok(()));
    assert_eq!(*f.host.body.lock().unwrap(), "one\ntwo\n");
    // Opened and closed without a change, it runs nothing.
    let untouched = f
        .world
        .calls()
        .open_body(&entry(), &caller(1), false, false)
        .unwrap();
    assert_eq!(body_flush(&untouched, true), Ok(()));
    untouched.release();
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 1);
    // An O_TRUNC open and close empties it: that is a change.
    let emptied = f
        .world
        .calls()
        .open_body(&entry(), &caller(1), true, false)
        .unwrap();
    assert_eq!(body_flush(&emptied, true), Ok(()));
    assert_eq!(*f.host.body.lock().unwrap(), "");
}

#[test]
fn a_body_you_may_not_replace_is_read_only_and_refused_at_open() {
    use super::node::NodeId;
    let f = world();
    f.host.closed.store(true, Ordering::SeqCst);
    assert!(
        !f.world
            .attr(&NodeId::Body(entry()), Session::NONE)
            .unwrap()
            .writable
    );
    let err = f
        .world
        .calls()
        .open_body(&entry(), &caller(1), true, false)
        .err()
        .unwrap();
    assert_eq!(err.errno(), libc::EACCES);
    assert!(err.message.contains("read-only"), "{}", err.message);
}

#[test]
fn a_body_that_is_not_text_is_refused_with_words_and_journaled() {
    let f = world();
    let doc = f
        .world
        .calls()
        .open_body(&entry(), &caller(1), true, false)
        .unwrap();
    doc.write(0, &[0xff, 0xfe, b'x']).unwrap();
    assert_eq!(body_flush(&doc, true), Err(libc::EINVAL));
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 0);
    let r = result(&f, "set_body", 1);
    assert!(r.contains("not UTF-8"), "{r}");
}

#[test]
fn nodes_show_when_what_they_show_last_changed() {
    use super::node::{NodeId, OpFile, WipFile};
    let f = world();
    let result_node = NodeId::OpFile(root(), intern("note"), OpFile::Result);
    assert_eq!(
        f.world.attr(&result_node, reader(1)).unwrap().modified,
        None
    );
    let before = std::time::SystemTime::now() - Duration::from_secs(1);
    let report = f.world.calls().call(&root(), "note", b"x", &caller(1));
    assert!(report.outcome.is_ok());
    let at = |n: &NodeId| f.world.attr(n, reader(1)).unwrap().modified.unwrap();
    assert!(at(&result_node) >= before);
    assert!(at(&NodeId::Runs(root(), intern("note"))) >= before);
    assert!(at(&NodeId::Run(root(), intern("note"), report.run)) >= before);
    assert!(at(&NodeId::WipFile(WipFile::Log)) >= before);
    assert!(at(&NodeId::WipFile(WipFile::Events)) >= before);
}

#[test]
fn xattrs_are_the_description_and_the_ref() {
    use super::node::{NodeId, OpFile};
    let f = world();
    let x = f.world.xattrs(&NodeId::Entry(entry())).unwrap();
    assert_eq!(
        x,
        vec![
            ("user.xdg.comment", "a host in memory".to_string()),
            ("user.wip.ref", "mem://root".to_string())
        ]
    );
    let op = f
        .world
        .xattrs(&NodeId::OpFile(root(), intern("note"), OpFile::Call))
        .unwrap();
    assert_eq!(op[0], ("user.xdg.comment", "note: for tests".to_string()));
}

#[test]
fn a_call_whose_outcome_the_shared_journal_could_not_record_says_so() {
    let db = crate::state::pg::TestDb::create();
    let host = Arc::new(MemHost::default());
    let state = tempfile::tempdir().unwrap();
    let world = World::new(super::WorldParts {
        settings: WorldSettings::default(),
        identity: Identity::default(),
        hosts: vec![Mounted {
            path: vec!["mem".into()],
            kind: "mem".into(),
            host: host.clone(),
        }],
        state: super::StateAt {
            dir: state.path(),
            url: Some(&db.url),
        },
        mount_point: "/mnt/w".into(),
        config_text: String::new(),
        subscriber: Arc::new(super::Unsubscribed),
        policy: Default::default(),
    })
    .unwrap();
    let f = Fixture {
        world: Arc::new(world),
        host,
        _state: state,
    };
    let doc = open(&f, "sleep", 1);
    // The connection the call was journaled on is cut while the host works.
    let cut = std::thread::scope(|s| {
        // Cut once the call is inside the host (journaled, not yet finished), however
        // long a loaded machine took to get there.
        let cutter = s.spawn(|| {
            until_a_call_is_inside(&f);
            db.cut_connections();
        });
        let written = write(&doc, br#"{"ms": 800}"#);
        cutter.join().unwrap();
        written
    });
    assert!(cut.is_ok(), "the call itself ran: {cut:?}");
    let told = read(&doc).unwrap();
    assert!(told.starts_with("slept\n"), "{told}");
    assert!(
        told.contains("warning: this outcome could not be recorded in the journal"),
        "{told}"
    );
    // `result` shows the same words, once the pool has connected again.
    let mut shown = None;
    for _ in 0..32 {
        if let Ok(text) = f.world.calls().result_for(&root(), "sleep", reader(1)) {
            shown = Some(text);
            break;
        }
    }
    assert_eq!(shown.as_deref(), Some(told.as_str()));
}

/// Children whose titled names collide: `1` titled `apple` would be listed as `1 apple`,
/// which is another child's bare name.
struct Fruit;

impl Host for Fruit {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        Ok(match path {
            [] => Some(EntryInfo::new("fruit", "fruit://")),
            [n] if ["1", "1 apple", "2"].contains(&n.as_str()) => Some(self.info(n)),
            _ => None,
        })
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        Ok(if path.is_empty() {
            ["1", "1 apple", "2"]
                .iter()
                .map(|n| Child {
                    name: n.to_string(),
                    info: self.info(n),
                })
                .collect()
        } else {
            Vec::new()
        })
    }

    fn ops(&self, _path: &[String]) -> HostResult<Vec<OpSpec>> {
        Ok(Vec::new())
    }

    fn guard(&self, _path: &[String], _op: &str, _args: Option<&Value>) -> HostResult<Guard> {
        Ok(Guard::default())
    }

    fn call(&self, _: &[String], op: &str, _: &Value, _: &Caller) -> HostResult<CallOutcome> {
        Err(HostError::NotFound(op.into()))
    }
}

impl Fruit {
    fn info(&self, name: &str) -> EntryInfo {
        let e = EntryInfo::new(format!("fruit {name}"), format!("fruit://{name}"));
        match name {
            "1" => e.titled("apple"),
            "2" => e.titled("pear"),
            _ => e,
        }
    }
}

#[test]
fn a_titled_name_that_would_collide_keeps_its_bare_name() {
    let state = tempfile::tempdir().unwrap();
    let world = World::new(super::WorldParts {
        settings: WorldSettings {
            titled: true,
            ..WorldSettings::default()
        },
        identity: Identity::default(),
        hosts: vec![Mounted {
            path: vec!["fruit".into()],
            kind: "fruit".into(),
            host: Arc::new(Fruit),
        }],
        state: super::StateAt {
            dir: state.path(),
            url: None,
        },
        mount_point: "/mnt/w".into(),
        config_text: String::new(),
        subscriber: Arc::new(super::Unsubscribed),
        policy: Default::default(),
    })
    .unwrap();
    let dir = world.resolve_path("/fruit").unwrap();
    let mut names: Vec<String> = world
        .list(&dir)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !["description", "ref", "ops"].contains(&n.as_str()))
        .collect();
    names.sort();
    // `1` keeps its bare name (its titled one is taken); `2` shows its title.
    assert_eq!(names, ["1", "1 apple", "2 pear"]);
    let desc = |p: &str| {
        let node = world.resolve_path(&format!("{p}/description")).unwrap();
        String::from_utf8(world.read(&node, Session::NONE).unwrap()).unwrap()
    };
    assert_eq!(desc("/fruit/1 apple"), "fruit 1 apple\n");
    assert_eq!(desc("/fruit/1"), "fruit 1\n");
    assert_eq!(desc("/fruit/2 pear"), "fruit 2\n");
    assert_eq!(desc("/fruit/2"), "fruit 2\n");
}
