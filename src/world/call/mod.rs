//! The call pipeline: from the bytes written into `call` (or `body`) to the host and back.
//! `doc` is one descriptor's document (one command, one call); `args` parses and checks
//! it against the op's schema; `run` journals the run before and after, runs it on the
//! caller's thread or the `pool`, watches its caller's wait and records its outcome and
//! the session's `result`; `live` holds runs in flight (progress, `wait`, `cancel`);
//! `policy` and `approvals` decide what a call may do and hold what needs a person's
//! sign-off; `body` is a `body` written as one call; `attachments` the files a run keeps;
//! `budget` bounds what open documents buffer. The model (the tree, nodes, hosts, guards)
//! is `World`'s; the pipeline's own state is `Calls`.

pub mod approvals;
pub mod args;
pub mod attachments;
pub mod body;
pub mod budget;
pub mod doc;
pub mod live;
pub mod policy;
pub mod pool;
pub(super) mod run;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use approvals::{Decided, Person, Verb};
pub use body::BodyDoc;
pub use doc::{shape, CallDoc, CallReport, Shape};

use super::node::Target;

/// What a session last read back from an op: the latest run, and each session's own.
#[derive(Default)]
pub(super) struct OpResults {
    pub(super) latest: i64,
    pub(super) by_session: HashMap<u32, i64>,
}

/// The pipeline's own state, beside the model: the worker pool and the watch over
/// callers' waits, each session's results, outcomes the journal could not keep, the
/// runs in flight, the policy with its pending runs, and the bound on buffered documents.
pub(super) struct Calls {
    pub(super) pool: pool::Pool,
    pub(super) watch: Arc<run::Watch>,
    pub(super) results: Mutex<HashMap<(Target, String), OpResults>>,
    /// Results of calls whose outcome the journal could not record (shown instead).
    pub(super) unrecorded: Mutex<HashMap<i64, String>>,
    /// What open `call` and `body` descriptors buffer, in total (`max_buffered_bytes`).
    pub(super) buffered: Arc<budget::Budget>,
    /// Runs in flight on this mount: their progress and how to stop them.
    pub(super) live: live::Live,
    /// Runs' numbers among their op's runs, by journal id (see `begin_run`).
    pub(super) seqs: Mutex<HashMap<i64, i64>>,
    /// The policy and what pending runs need (see `approvals`).
    pub(super) approvals: approvals::Approvals,
}
