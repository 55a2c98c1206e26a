//! The call pipeline: from the bytes written into `call` (or `body`) to the host and back.
//! `doc` is one descriptor's document (one command, one call); `args` parses and checks
//! it against the op's schema; `run` journals the run before and after, runs it on the
//! caller's thread or the `pool`, watches its caller's wait and records its outcome and
//! the session's `result`; `live` holds runs in flight (progress, `wait`, `cancel`);
//! `policy` (the rules, and the guard a call meets) and `approvals` decide what a call may do and hold what needs a person's
//! sign-off; `body` is a `body` written as one call; `attachments` the files a run keeps;
//! `budget` bounds what open documents buffer; `runs` what runs and results show;
//! `changes` the changes that come from outside a call (a host's own, other mounts').
//!
//! `Pipeline` (in `run`) owns all of it. It reaches the model through `Entries` (the hosts and what
//! they said) and storage through the `Journal` trait, and tells the kernel's caches what
//! changed through the `Subscriber` it was made with.

pub mod approvals;
pub mod args;
pub mod attachments;
pub mod body;
pub mod budget;
pub(super) mod changes;
pub mod doc;
pub mod live;
pub mod policy;
pub mod pool;
pub mod record;
pub(super) mod run;
mod runs;

pub use approvals::{Decided, Person, Verb};
pub use body::BodyDoc;
pub use doc::{shape, CallDoc, CallReport, Shape};
pub(in crate::world) use run::Parts;
pub use run::Pipeline;
