//! One open `call` file: everything written through one open file description, from open
//! to its last close, is ONE document and ONE call (DESIGN, "One command, one call").
//!
//! bash's builtins write one line per `write(2)`, so a line ending is no sign of the end.
//! A document runs inside `write` only when it cannot grow: a JSON object that parses (or
//! JSON that can never become valid), or a first write of only white space (no arguments).
//! Any other document runs at the last close: the `flush` that the FUSE layer judges to be
//! the descriptor's last one, else `release`; or when the writer reads the descriptor back.
//! Nothing here knows FUSE: every step answers through a callback, now or when the call
//! ends, so no thread waits for a call.

use std::sync::{Arc, Mutex, MutexGuard};

use super::budget::Held;
use super::Pipeline;
use crate::host::Caller;
use crate::world::error::{ErrorKind, WorldError, WorldResult};
use crate::world::node::Target;

/// How a call ended, as its descriptor reports it.
#[derive(Clone, Debug)]
pub struct CallReport {
    /// The run in the journal (0 when even the journal failed).
    pub run: i64,
    /// The text of `result` for this call.
    pub text: Arc<str>,
    pub outcome: Result<(), WorldError>,
}

/// Where a descriptor's answer goes once the call ended.
pub type Done<T> = Box<dyn FnOnce(WorldResult<T>) + Send>;

/// The document of one open file description of `call`.
#[derive(Clone)]
pub struct CallDoc {
    doc: Arc<Doc>,
}

struct Doc {
    calls: Arc<Pipeline>,
    target: Target,
    op: String,
    caller: Caller,
    state: Mutex<State>,
}

struct State {
    /// The document: every byte written so far, at its offset. A byte that arrived before
    /// those ahead of it (`write_at`) stands past zeros until they come.
    buf: Vec<u8>,
    /// `buf`'s share of the daemon's total for documents being written.
    held: Held,
    /// How far from the start the document is whole, and the ranges written past that,
    /// sorted and apart: while there are any, the document is missing bytes.
    filled: u64,
    early: Vec<(u64, u64)>,
    phase: Phase,
    /// The call's errno reached someone (a write, flush or read of this descriptor):
    /// later reads get the words.
    told: bool,
    /// Bytes written through the descriptor, and where reading back began: a reader that
    /// did not seek back reads on from where its writing stopped, and gets the result
    /// from its start just the same.
    written: u64,
    read_base: Option<u64>,
    /// Bytes written after the call ran were reported once (journaled); later ones only
    /// get the errno.
    late_bytes_reported: bool,
    /// The call was started by a close (a flush judged the last, or the release), not by
    /// a write or a read: the opener's own close may still be on its way.
    ran_at_close: bool,
}

enum Phase {
    /// Accepting bytes.
    Open,
    /// The call runs; these wait for its end.
    Running(Vec<Waiter>),
    /// It ran (or was refused): final.
    Done(CallReport),
}

/// Someone waiting for the call on this descriptor to end.
enum Waiter {
    Write(u32, Done<u32>),
    Flush(Done<()>),
    Read(u64, u32, Done<Vec<u8>>),
}

/// Whether a buffer is a document that cannot grow.
#[derive(Debug, PartialEq, Eq)]
pub enum Shape {
    /// Run it now.
    Final,
    /// More may follow: run at the last close.
    Open,
}

/// What the buffer of a `call` is so far: a document that runs now, or one that may grow
/// (the fuzzer drives this, as every write does).
pub fn shape(buf: &[u8]) -> Shape {
    let trimmed = buf.trim_ascii();
    if trimmed.is_empty() {
        // Only a first write can leave the buffer blank (a blank one ran already).
        return Shape::Final;
    }
    if trimmed.first() != Some(&b'{') {
        return Shape::Open;
    }
    match serde_json::from_slice::<serde_json::Value>(trimmed) {
        Ok(_) => Shape::Final,
        // An unfinished object may still be completed by the next write.
        Err(e) if e.is_eof() => Shape::Open,
        // A syntax error never becomes valid: say so now, where bash sees the errno.
        Err(_) => Shape::Final,
    }
}

impl CallDoc {
    pub(in crate::world) fn new(
        calls: Arc<Pipeline>,
        target: Target,
        op: String,
        caller: Caller,
    ) -> CallDoc {
        let held = Held::new(&calls.buffered);
        CallDoc {
            doc: Arc::new(Doc {
                calls,
                target,
                op,
                caller,
                state: Mutex::new(State {
                    buf: Vec::new(),
                    held,
                    filled: 0,
                    early: Vec::new(),
                    phase: Phase::Open,
                    told: false,
                    written: 0,
                    read_base: None,
                    late_bytes_reported: false,
                    ran_at_close: false,
                }),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Callbacks never run under the lock, so a poisoned lock holds a consistent state.
        self.doc.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes arrived, to go after those before. `done` gets the count written, or the
    /// call's errno when the document is complete and ran, or why the bytes were refused.
    pub fn write(&self, data: &[u8], done: impl FnOnce(WorldResult<u32>) + Send + 'static) {
        self.put(None, data, done)
    }

    /// Bytes that belong at `offset` (an NFS client's WRITEs, which may arrive out of
    /// order, or again). They are held at their place, so every byte counts against
    /// `max_call_bytes` (the document reaches at least their end) and the daemon's total,
    /// wherever it lands; the document runs once it is whole and cannot grow, or at its
    /// flush, which refuses it if bytes before some of it never came.
    pub fn write_at(
        &self,
        offset: u64,
        data: &[u8],
        done: impl FnOnce(WorldResult<u32>) + Send + 'static,
    ) {
        self.put(Some(offset), data, done)
    }

    fn put(
        &self,
        at: Option<u64>,
        data: &[u8],
        done: impl FnOnce(WorldResult<u32>) + Send + 'static,
    ) {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let mut st = self.state();
        match &st.phase {
            Phase::Open => {}
            // Bytes the document had when it ran, sent again.
            Phase::Done(_)
                if at.is_some_and(|o| o.saturating_add(data.len() as u64) <= st.written) =>
            {
                drop(st);
                return done(Ok(len));
            }
            Phase::Running(_) => {
                drop(st);
                return done(Err(WorldError::invalid(
                    "this descriptor is running its call; open `call` again for another call",
                )));
            }
            Phase::Done(report) => {
                if data.trim_ascii().is_empty() {
                    // Trailing white space changes no document.
                    st.written += data.len() as u64;
                    drop(st);
                    return done(Ok(len));
                }
                let run = report.run;
                let refused_for_size = match &report.outcome {
                    Err(e) if matches!(e.kind, ErrorKind::TooLarge | ErrorKind::NoSpace) => {
                        Some(e.clone())
                    }
                    _ => None,
                };
                let first = !st.late_bytes_reported;
                st.late_bytes_reported = true;
                drop(st);
                if let Some(e) = refused_for_size {
                    return done(Err(e));
                }
                let e = WorldError::invalid(format!(
                    "this descriptor already ran its call (run {run}); what is written after a complete document is not a call: open `call` again for another call"
                ));
                if first {
                    // Keep the bytes and the words: the late write becomes a run of its own.
                    let raw = String::from_utf8_lossy(data).into_owned();
                    let calls = Arc::clone(&self.doc.calls);
                    calls.record_refusal(
                        &self.doc.target,
                        &self.doc.op,
                        &self.doc.caller,
                        &raw,
                        e.clone(),
                    );
                }
                return done(Err(e));
            }
        }
        if data.is_empty() {
            drop(st);
            return done(Ok(0));
        }
        let max = self.doc.calls.settings().max_call_bytes;
        let offset = at.unwrap_or(st.buf.len() as u64);
        let end = offset.saturating_add(data.len() as u64);
        let grown = if end > max {
            Err(too_large(&self.doc.calls))
        } else {
            let st = &mut *st;
            let need = (end as usize).max(st.buf.len());
            st.held.grow(&mut st.buf, need, max as usize)
        };
        if let Err(e) = grown {
            self.refuse(&mut st, e.clone(), end);
            drop(st);
            return done(Err(e));
        }
        let (from, to) = (offset as usize, end as usize);
        if to > st.buf.len() {
            st.buf.resize(to, 0);
        }
        st.buf[from..to].copy_from_slice(data);
        st.arrived(offset, end);
        if st.early.len() > EARLY_MAX {
            let e = WorldError::new(
                ErrorKind::NoSpace,
                format!(
                    "the document arrived in more than {EARLY_MAX} pieces with gaps between them; nothing was run. Write it in order"
                ),
            );
            self.refuse(&mut st, e.clone(), end);
            drop(st);
            return done(Err(e));
        }
        st.written = st.written.max(end);
        if !st.early.is_empty() || shape(&st.buf) == Shape::Open {
            drop(st);
            return done(Ok(len));
        }
        self.start(st, Waiter::Write(len, Box::new(done)));
    }

    /// Refuse the whole document with `e`, as a run of its own with the words: what it
    /// held is given back, and every later write gets the same answer.
    fn refuse(&self, st: &mut State, e: WorldError, size: u64) {
        let whole = &st.buf[..st.buf.len().min(st.filled as usize)];
        let preview = preview(whole, usize::try_from(size).unwrap_or(usize::MAX));
        st.buf = Vec::new();
        st.early = Vec::new();
        st.filled = 0;
        st.held.release();
        let report = self.doc.calls.record_refusal(
            &self.doc.target,
            &self.doc.op,
            &self.doc.caller,
            &preview,
            e,
        );
        st.phase = Phase::Done(report);
        st.told = true;
    }

    fn pending(st: &State) -> bool {
        matches!(st.phase, Phase::Open) && !st.buf.is_empty()
    }

    /// A close of one of the descriptor's copies. With bytes pending and `last_close()`
    /// true, the document runs and `done` gets its errno; otherwise nothing runs.
    pub fn flush(
        &self,
        last_close: impl FnOnce() -> bool,
        done: impl FnOnce(WorldResult<()>) + Send + 'static,
    ) {
        self.flush_by(last_close, || false, done)
    }

    /// `flush`, told whether the closer is the process that opened the descriptor. When
    /// another copy's close ran the call first (a fork of a multi-threaded caller closing
    /// its inherited copy at `exec`, its FLUSH judged while the opener's was on its way),
    /// the opener's close still gets the call's errno: it waits for the call's end, or
    /// gets its outcome, instead of 0. Other copies' closes get 0 as before, and never
    /// wait for a call that another close started.
    pub fn flush_by(
        &self,
        last_close: impl FnOnce() -> bool,
        by_opener: impl FnOnce() -> bool,
        done: impl FnOnce(WorldResult<()>) + Send + 'static,
    ) {
        let st = self.state();
        let pending = Self::pending(&st);
        let ran_at_close = st.ran_at_close;
        drop(st);
        if !pending {
            return self.after_another_close(ran_at_close, by_opener, done);
        }
        // Asked without the lock: it may take a moment (the FUSE layer looks at /proc).
        if !last_close() {
            return done(Ok(()));
        }
        let st = self.state();
        if !Self::pending(&st) {
            let ran_at_close = st.ran_at_close;
            drop(st);
            return self.after_another_close(ran_at_close, by_opener, done);
        }
        self.start(st, Waiter::Flush(Box::new(done)));
    }

    /// A close that found nothing pending: the opener's, when a close ran the call, hears
    /// the call's outcome (now, or at its end); any other, 0.
    fn after_another_close(
        &self,
        ran_at_close: bool,
        by_opener: impl FnOnce() -> bool,
        done: impl FnOnce(WorldResult<()>) + Send + 'static,
    ) {
        // Asked without the lock: it may read /proc.
        if !ran_at_close || !by_opener() {
            return done(Ok(()));
        }
        let mut guard = self.state();
        let st = &mut *guard;
        let outcome = match &mut st.phase {
            Phase::Running(waiters) => {
                waiters.push(Waiter::Flush(Box::new(done)));
                return;
            }
            Phase::Done(report) => {
                st.told = true;
                report.outcome.clone()
            }
            Phase::Open => Ok(()),
        };
        drop(guard);
        done(outcome)
    }

    /// A read of the descriptor: the result of its call. Reading back pending bytes runs
    /// them first (the writer is done writing); when that call failed, this read gets the
    /// errno and later reads the words.
    pub fn read(
        &self,
        offset: u64,
        size: u32,
        done: impl FnOnce(WorldResult<Vec<u8>>) + Send + 'static,
    ) {
        let mut guard = self.state();
        if matches!(guard.phase, Phase::Open) {
            if guard.buf.is_empty() {
                drop(guard);
                return done(Ok(Vec::new()));
            }
            return self.start(guard, Waiter::Read(offset, size, Box::new(done)));
        }
        let st = &mut *guard;
        let answer = match &mut st.phase {
            Phase::Running(waiters) => {
                waiters.push(Waiter::Read(offset, size, Box::new(done)));
                return;
            }
            Phase::Done(report) => {
                let at = result_offset(&mut st.read_base, st.written, offset);
                answer_read(report, &mut st.told, at, size)
            }
            Phase::Open => Ok(Vec::new()),
        };
        drop(guard);
        done(answer)
    }

    /// The last close: pending bytes run, for nobody (the words reach `result`).
    pub fn release(&self) {
        let st = self.state();
        if Self::pending(&st) {
            self.start(st, Waiter::Flush(Box::new(|_| {})));
        }
    }

    /// Run the buffered document; `first` waits for its end.
    fn start(&self, mut st: MutexGuard<'_, State>, first: Waiter) {
        st.ran_at_close = matches!(first, Waiter::Flush(_));
        if let Some(&(next, _)) = st.early.first() {
            let e = WorldError::invalid(format!(
                "bytes {} to {next} of the document never arrived (its writer wrote past them); nothing was run",
                st.filled
            ));
            let size = st.buf.len() as u64;
            self.refuse(&mut st, e, size);
            let Phase::Done(report) = std::mem::replace(&mut st.phase, Phase::Running(vec![first]))
            else {
                return;
            };
            drop(st);
            return self.finished(report);
        }
        let bytes = std::mem::take(&mut st.buf);
        st.held.release();
        st.phase = Phase::Running(vec![first]);
        drop(st);
        let me = self.clone();
        let d = &self.doc;
        Arc::clone(&d.calls).run_document(
            &d.target,
            &d.op,
            &d.caller,
            &bytes,
            Box::new(move |report| me.finished(report)),
        );
    }

    fn finished(&self, report: CallReport) {
        let mut st = self.state();
        let waiters = match std::mem::replace(&mut st.phase, Phase::Done(report.clone())) {
            Phase::Running(w) => w,
            _ => Vec::new(),
        };
        let mut answers: Vec<Box<dyn FnOnce() + Send>> = Vec::new();
        for w in waiters {
            match w {
                Waiter::Write(len, done) => {
                    st.told = true;
                    let r = report.outcome.clone().map(|()| len);
                    answers.push(Box::new(move || done(r)));
                }
                Waiter::Flush(done) => {
                    st.told = true;
                    let r = report.outcome.clone();
                    answers.push(Box::new(move || done(r)));
                }
                Waiter::Read(offset, size, done) => {
                    let written = st.written;
                    let at = result_offset(&mut st.read_base, written, offset);
                    let r = answer_read(&report, &mut st.told, at, size);
                    answers.push(Box::new(move || done(r)));
                }
            }
        }
        drop(st);
        for a in answers {
            a();
        }
    }
}

/// Where in the result a read at `offset` of the descriptor falls: the first read decides
/// whether the reader went back to 0 (offsets are the result's) or reads on from the end
/// of what it wrote (offsets count from there).
fn result_offset(base: &mut Option<u64>, written: u64, offset: u64) -> u64 {
    let b = *base.get_or_insert(if offset >= written { written } else { 0 });
    offset.saturating_sub(b)
}

/// A read of a finished call: the errno once if nobody heard it yet, else the words.
fn answer_read(
    report: &CallReport,
    told: &mut bool,
    offset: u64,
    size: u32,
) -> WorldResult<Vec<u8>> {
    if let Err(e) = &report.outcome {
        if !*told {
            *told = true;
            return Err(e.clone());
        }
    }
    let bytes = report.text.as_bytes();
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let end = start.saturating_add(size as usize).min(bytes.len());
    Ok(bytes[start..end].to_vec())
}

/// How many pieces a document may hold apart, past a gap (a client writes in order,
/// but for a few WRITEs in flight at once).
const EARLY_MAX: usize = 4096;

impl State {
    /// Bytes `from..to` are in `buf` now: the whole part grows, or the piece waits for
    /// those before it among the early ones (merged with any it touches).
    fn arrived(&mut self, from: u64, to: u64) {
        if from <= self.filled {
            self.filled = self.filled.max(to);
        } else {
            let (mut a, mut b) = (from, to);
            // Sorted and apart, so only neighbours of the new piece can touch it.
            self.early.retain(|&(x, y)| {
                if y < a || x > b {
                    return true;
                }
                a = a.min(x);
                b = b.max(y);
                false
            });
            let at = self.early.partition_point(|&(x, _)| x < a);
            self.early.insert(at, (a, b));
        }
        let reached = self
            .early
            .iter()
            .take_while(|&&(x, _)| x <= self.filled)
            .count();
        for (_, y) in self.early.drain(..reached) {
            self.filled = self.filled.max(y);
        }
    }
}

fn too_large(calls: &Pipeline) -> WorldError {
    let max = calls.settings().max_call_bytes;
    WorldError::new(
        ErrorKind::TooLarge,
        format!(
            "the document is larger than this calls's max_call_bytes ({max} bytes); nothing was run. Send less, or raise max_call_bytes in the manifest's [calls]"
        ),
    )
}

/// The first bytes of a refused document, for its run's `args`.
fn preview(buf: &[u8], total: usize) -> String {
    let head = &buf[..buf.len().min(200)];
    format!("{}… ({total} bytes or more)", String::from_utf8_lossy(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(shape(b"\n"), Shape::Final);
        assert_eq!(shape(b"  \r\n"), Shape::Final);
        assert_eq!(shape(b"{\"a\":1}\n"), Shape::Final);
        assert_eq!(shape(b"{\"a\":\n"), Shape::Open);
        assert_eq!(
            shape(b"{\"a\": \"x\xc3"),
            Shape::Open,
            "a cut UTF-8 character"
        );
        assert_eq!(shape(b"{\"a\": x\n"), Shape::Final, "never valid");
        assert_eq!(shape(b"{\"a\":1} b\n"), Shape::Final, "trailing bytes");
        assert_eq!(shape(b"title=x\n"), Shape::Open);
        assert_eq!(shape(b"fixed in 1.2\n"), Shape::Open);
    }
}
