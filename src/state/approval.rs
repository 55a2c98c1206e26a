//! Pending runs in the journal: a call a policy holds for a person's sign-off, who may
//! decide, until when, and what was decided. The same database as the calls, so a pending
//! run survives a remount and its decision is recorded with the run's new status in one
//! transaction.

use std::time::Duration;

use super::Clean;

/// Status of a run that waits for a person's sign-off.
pub const PENDING: &str = "pending";
/// Status of a run a person denied (it never ran).
pub const DENIED: &str = "denied";
/// Status of a run nobody decided in time (it never ran).
pub const EXPIRED: &str = "expired";

/// What a pending run asks for when it is held.
#[derive(Clone, Debug)]
pub struct NewApproval<'a> {
    pub rule: usize,
    /// The rule in words (`match "…"`), as it was when the run was held.
    pub rule_text: Clean<'a>,
    pub approvers: &'a [u32],
    pub self_approve: bool,
    pub expires_after: Option<Duration>,
}

/// Who decided, as the kernel told the control socket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decider {
    pub uid: u32,
    pub pid: u32,
    pub session: u32,
    pub command: String,
}

/// A run that asked a person's sign-off, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    pub run: i64,
    pub rule: usize,
    pub rule_text: String,
    pub approvers: Vec<u32>,
    pub self_approve: bool,
    pub requested: String,
    pub expires: Option<String>,
    /// `pending`, `approved`, `denied`, `expired` or `interrupted`.
    pub state: String,
    pub decided_at: Option<String>,
    pub decider: Option<Decider>,
    pub reason: Option<String>,
}

/// A pending run that expired, with the op it belongs to.
#[derive(Clone, Debug)]
pub struct Expired {
    pub approval: Approval,
    /// World path of the entry and the op.
    pub path: String,
    pub op: String,
}

/// How a decision changes the run itself.
pub struct RunChange<'a> {
    pub status: &'a str,
    pub errno: i32,
    /// The run's new result (a final one); `None` when the run starts running now.
    pub result: Option<Clean<'a>>,
    /// The guard as evaluated again at the decision.
    pub guard: Option<Clean<'a>>,
}
