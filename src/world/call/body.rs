//! One open `body` written to: what the descriptor holds at its last close is the entry's
//! whole new content, and that close runs the host's write op with it (`Body::write`),
//! through the same pipeline as a `call` (validation, policy, guard, journal, run, change
//! feed), so its errno reaches the closing process (`cat`, Python's `close()`, editors).
//!
//! Unlike `call`, a body is a file: writes land at their offset, a truncate shortens it,
//! a descriptor opened without `O_TRUNC` starts from the current content (so `>>` appends),
//! and a descriptor that changed nothing runs nothing. Nothing here knows FUSE.

use std::sync::{Arc, Mutex, MutexGuard};

use super::budget::Held;
use super::doc::{CallReport, Done};
use super::Pipeline;
use crate::host::{BodyWrite, Caller};
use crate::world::error::{ErrorKind, WorldError, WorldResult};
use crate::world::node::{EntryRef, Target};

/// The open body of one file description.
#[derive(Clone)]
pub struct BodyDoc {
    doc: Arc<Doc>,
}

struct Doc {
    calls: Arc<Pipeline>,
    target: Target,
    write: BodyWrite,
    caller: Caller,
    state: Mutex<State>,
}

struct State {
    content: Vec<u8>,
    /// `content`'s share of the daemon's total for documents being written.
    held: Held,
    /// A write was refused (too large, no room): the close answers this and runs
    /// nothing, so a cut document never replaces the body.
    refused: Option<WorldError>,
    /// Changed since it was opened or last ran: the last close runs it.
    dirty: bool,
    /// Opened with `O_APPEND`: every write lands at the end, whatever its offset says (the
    /// kernel's idea of the size may be older than this document).
    append: bool,
    phase: Phase,
}

enum Phase {
    Open,
    /// Its call runs; these closes wait for its end.
    Running(Vec<Done<()>>),
    Ran,
}

impl Pipeline {
    /// Open the body of `e` for writing. A body you may not replace is EACCES; an op whose
    /// guard fails whatever the content (or that a policy forbids) is refused here as for
    /// `call`. Without `truncate` the document starts from the current content; with
    /// `append` every write goes to its end.
    pub fn open_body(
        self: &Arc<Self>,
        e: &EntryRef,
        caller: &Caller,
        truncate: bool,
        append: bool,
    ) -> WorldResult<BodyDoc> {
        let body = self.entries.body_of(e)?;
        let Some(write) = body.write else {
            return Err(WorldError::new(
                ErrorKind::Forbidden,
                format!(
                    "{}/body is read-only: its host cannot replace it, or you may not",
                    self.entries.entry_path(e.host, &e.path)
                ),
            ));
        };
        let target = Target::Entry(e.clone());
        // The same refusals as opening `call` (journaled there); the document is ours.
        self.open_call(&target, &write.op, caller)?;
        let max = self.settings.max_call_bytes;
        let mut held = Held::new(&self.buffered);
        let content = if truncate {
            Vec::new()
        } else if body.size > max {
            return Err(too_large(max));
        } else {
            let mut content = self.entries.body_bytes(e)?;
            content.shrink_to_fit();
            held.adopt(&content)?;
            content
        };
        Ok(BodyDoc {
            doc: Arc::new(Doc {
                calls: Arc::clone(self),
                target,
                write,
                caller: caller.clone(),
                state: Mutex::new(State {
                    content,
                    held,
                    refused: None,
                    // An O_TRUNC open already replaced the content with nothing.
                    dirty: truncate,
                    append,
                    phase: Phase::Open,
                }),
            }),
        })
    }
}

fn too_large(max: u64) -> WorldError {
    WorldError::new(
        ErrorKind::TooLarge,
        format!(
            "a body written through the mount is at most this calls's max_call_bytes ({max} bytes); nothing was run. Raise max_call_bytes in the manifest's [calls], or use the host's own op"
        ),
    )
}

impl BodyDoc {
    fn state(&self) -> MutexGuard<'_, State> {
        // Callbacks never run under the lock, so a poisoned lock holds a consistent state.
        self.doc.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the document takes changes now: not while its call runs, nor once it was
    /// refused (every later change gets the same answer).
    fn changeable(st: &State) -> WorldResult<()> {
        if matches!(st.phase, Phase::Running(_)) {
            return Err(WorldError::invalid(
                "this body's new content is being written by its host; wait for the close to return",
            ));
        }
        match &st.refused {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Bytes written at `offset`; a gap before them reads as zeros, as in a file.
    pub fn write(&self, offset: u64, data: &[u8]) -> WorldResult<u32> {
        let mut st = self.state();
        Self::changeable(&st)?;
        let max = self.doc.calls.settings.max_call_bytes;
        let offset = if st.append {
            st.content.len() as u64
        } else {
            offset
        };
        let end = offset.saturating_add(data.len() as u64);
        if end > max {
            return Err(Self::refuse(&mut st, too_large(max)));
        }
        let (start, end) = (offset as usize, end as usize);
        if st.content.len() < end {
            let st = &mut *st;
            if let Err(e) = st.held.grow(&mut st.content, end, max as usize) {
                return Err(Self::refuse(st, e));
            }
            st.content.resize(end, 0);
        }
        st.content[start..end].copy_from_slice(data);
        st.dirty = true;
        st.phase = Phase::Open;
        Ok(u32::try_from(data.len()).unwrap_or(u32::MAX))
    }

    /// `ftruncate` (or `open(O_TRUNC)` without atomic truncation).
    pub fn truncate(&self, size: u64) -> WorldResult<()> {
        let mut st = self.state();
        Self::changeable(&st)?;
        let max = self.doc.calls.settings.max_call_bytes;
        if size > max {
            return Err(Self::refuse(&mut st, too_large(max)));
        }
        let st = &mut *st;
        if let Err(e) = st.held.grow(&mut st.content, size as usize, max as usize) {
            return Err(Self::refuse(st, e));
        }
        st.content.resize(size as usize, 0);
        st.dirty = true;
        st.phase = Phase::Open;
        Ok(())
    }

    /// A write was refused: the document is dropped (its memory returns now) and the
    /// close will answer `e` without running anything.
    fn refuse(st: &mut State, e: WorldError) -> WorldError {
        st.content = Vec::new();
        st.held.release();
        st.refused = Some(e.clone());
        st.dirty = true;
        e
    }

    /// The size of the document as written so far.
    pub fn size(&self) -> u64 {
        self.state().content.len() as u64
    }

    /// A read through the writing descriptor (`O_RDWR`): the document as it stands.
    pub fn read(&self, offset: u64, size: u32) -> Vec<u8> {
        let st = self.state();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(st.content.len());
        let end = start.saturating_add(size as usize).min(st.content.len());
        st.content[start..end].to_vec()
    }

    /// A close of one of the descriptor's copies: the last one runs a changed document and
    /// `done` gets the call's errno; otherwise nothing runs.
    pub fn flush(
        &self,
        last_close: impl FnOnce() -> bool,
        done: impl FnOnce(WorldResult<()>) + Send + 'static,
    ) {
        let dirty = self.state().dirty;
        // Asked without the lock: it may take a moment (the FUSE layer looks at /proc).
        if !dirty || !last_close() {
            return done(Ok(()));
        }
        self.start(Box::new(done));
    }

    /// The descriptor is gone: a changed document still runs, for nobody (the words reach
    /// the op's `result` and `runs/`).
    pub fn release(&self) {
        if self.state().dirty {
            self.start(Box::new(|_| {}));
        }
    }

    fn start(&self, done: Done<()>) {
        let mut st = self.state();
        if let Phase::Running(waiters) = &mut st.phase {
            return waiters.push(done);
        }
        if !st.dirty {
            drop(st);
            return done(Ok(()));
        }
        st.dirty = false;
        if let Some(e) = st.refused.clone() {
            // Journaled as a refusal of its own, so `result` and `runs/` say why.
            st.phase = Phase::Ran;
            drop(st);
            let d = &self.doc;
            let report = d.calls.record_refusal(
                &d.target,
                &d.write.op,
                &d.caller,
                "(a write to body was refused; the body was not replaced)",
                e,
            );
            return done(report.outcome);
        }
        let content = st.content.clone();
        st.phase = Phase::Running(vec![done]);
        drop(st);
        let d = &self.doc;
        let me = self.clone();
        let reply = Box::new(move |report: CallReport| me.finished(report));
        let calls = Arc::clone(&d.calls);
        let text = match String::from_utf8(content) {
            Ok(t) => t,
            Err(e) => {
                let n = e.as_bytes().len();
                let err = WorldError::invalid(format!(
                    "{} takes text: the new body ({n} bytes) is not UTF-8 (first bad byte at {}); nothing was written",
                    d.write.op,
                    e.utf8_error().valid_up_to()
                ));
                let report = calls.record_refusal(
                    &d.target,
                    &d.write.op,
                    &d.caller,
                    &format!("({n} bytes written to body, not UTF-8)"),
                    err,
                );
                return reply(report);
            }
        };
        let mut args = serde_json::Map::new();
        args.insert(d.write.arg.clone(), serde_json::Value::String(text));
        let bytes = serde_json::Value::Object(args).to_string().into_bytes();
        calls.run_document(&d.target, &d.write.op, &d.caller, &bytes, reply);
    }

    fn finished(&self, report: CallReport) {
        let mut st = self.state();
        let waiters = match std::mem::replace(&mut st.phase, Phase::Ran) {
            Phase::Running(w) => w,
            _ => Vec::new(),
        };
        drop(st);
        for w in waiters {
            w(report.outcome.clone());
        }
    }
}
