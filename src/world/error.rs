//! The world's one error type: errno plus words, with the cause kept. The errno mapping
//! and the log level of each kind live here and only here.

use std::sync::Arc;

use crate::host::{ErrorSource, HostError};

/// Why something in the world failed, with the words a user reads in `result` and the
/// error it came from (a host's, the database's), kept for the log.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct WorldError {
    pub kind: ErrorKind,
    pub message: String,
    #[source]
    source: Option<ErrorSource>,
}

/// Two errors are the same when a user would read the same: kind and words.
impl PartialEq for WorldError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for WorldError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Arguments do not fit the schema or the object (EINVAL).
    InvalidArgs,
    /// A guard condition is not met (EPERM).
    Blocked,
    /// The mount's policy forbids it (EACCES).
    Forbidden,
    /// No such entry or file (ENOENT).
    NotFound,
    /// The backend failed (EIO).
    Backend,
    /// The call took longer than allowed (ETIMEDOUT).
    TimedOut,
    /// Not something this file supports, e.g. writing `description` (EACCES on open is
    /// decided by the caller; this is for operations a node cannot do at all).
    NotSupported,
    /// The document written into `call` is larger than the world's `max_call_bytes` (EFBIG).
    TooLarge,
    /// The caller is being killed: its wait ends, the call goes on (EINTR). Never a run's
    /// status: the run records the call's own outcome.
    CallerGone,
    /// The daemon's total for documents being written is used up (ENOSPC).
    NoSpace,
    /// A name is longer than a file name may be (255 bytes) (ENAMETOOLONG).
    NameTooLong,
    /// A policy makes the call wait for a person's sign-off: it is a pending run now
    /// (EINPROGRESS).
    Pending,
    /// Someone cancelled the run (`runs/ID/ops/cancel`) and its host stopped it
    /// (ECANCELED).
    Cancelled,
}

impl ErrorKind {
    /// The one errno of each kind.
    pub const fn errno(self) -> i32 {
        match self {
            ErrorKind::InvalidArgs => libc::EINVAL,
            ErrorKind::Blocked => libc::EPERM,
            ErrorKind::Forbidden => libc::EACCES,
            ErrorKind::NotFound => libc::ENOENT,
            ErrorKind::Backend => libc::EIO,
            ErrorKind::TimedOut => libc::ETIMEDOUT,
            ErrorKind::NotSupported => libc::ENOTSUP,
            ErrorKind::TooLarge => libc::EFBIG,
            ErrorKind::CallerGone => libc::EINTR,
            ErrorKind::Pending => libc::EINPROGRESS,
            ErrorKind::NoSpace => libc::ENOSPC,
            ErrorKind::NameTooLong => libc::ENAMETOOLONG,
            ErrorKind::Cancelled => libc::ECANCELED,
        }
    }

    /// How loud a request that failed this way is logged: a backend's failure is the
    /// daemon's to report (warn); the rest (a missing name, a blocked guard, bad
    /// arguments) is the caller's own doing (debug).
    pub const fn level(self) -> tracing::Level {
        match self {
            ErrorKind::Backend => tracing::Level::WARN,
            _ => tracing::Level::DEBUG,
        }
    }

    /// Status word recorded in the journal and shown in `runs/ID/status`.
    pub fn status(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgs => "invalid",
            ErrorKind::Blocked => "blocked",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Backend => "failed",
            ErrorKind::TimedOut => "timed_out",
            ErrorKind::NotSupported => "not_supported",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::CallerGone => "caller_gone",
            ErrorKind::Pending => crate::state::PENDING,
            ErrorKind::NoSpace => "no_space",
            ErrorKind::NameTooLong => "name_too_long",
            ErrorKind::Cancelled => "cancelled",
        }
    }

    /// The kind whose errno a run recorded (a run read back from the journal).
    pub fn of_errno(errno: i32) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.errno() == errno)
    }

    /// Every kind (`tests/errno.rs` holds each to its errno and status word, with a match
    /// that fails to compile when a kind is missing there).
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::InvalidArgs,
        ErrorKind::Blocked,
        ErrorKind::Forbidden,
        ErrorKind::NotFound,
        ErrorKind::Backend,
        ErrorKind::TimedOut,
        ErrorKind::NotSupported,
        ErrorKind::TooLarge,
        ErrorKind::CallerGone,
        ErrorKind::NoSpace,
        ErrorKind::NameTooLong,
        ErrorKind::Pending,
        ErrorKind::Cancelled,
    ];
}

impl WorldError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        WorldError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `source`.
    pub fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(ErrorSource(Arc::new(source)));
        self
    }

    /// The words and every cause below them (`words: cause: cause`), each said once: what
    /// the log shows of a failure.
    pub fn chain(&self) -> String {
        let mut out = self.message.clone();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            let words = e.to_string();
            if !out.contains(&words) {
                out.push_str(": ");
                out.push_str(&words);
            }
            next = e.source();
        }
        out
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        WorldError::new(ErrorKind::NotFound, message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        WorldError::new(ErrorKind::InvalidArgs, message)
    }

    pub fn backend(message: impl Into<String>) -> Self {
        WorldError::new(ErrorKind::Backend, message)
    }

    pub fn errno(&self) -> i32 {
        self.kind.errno()
    }

    /// A working tree's error while doing `what`, as the world's kinds have it (ENOENT,
    /// EACCES, ENAMETOOLONG; EIO for the rest), caused by the error itself.
    pub fn from_io(what: &str, e: std::io::Error) -> Self {
        let kind = match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESTALE) => ErrorKind::NotFound,
            Some(libc::EACCES) | Some(libc::EPERM) => ErrorKind::Forbidden,
            Some(libc::ENAMETOOLONG) => ErrorKind::NameTooLong,
            _ => ErrorKind::Backend,
        };
        WorldError::new(kind, format!("{what}: {e}")).caused_by(e)
    }
}

impl From<HostError> for WorldError {
    fn from(e: HostError) -> Self {
        let kind = match &e {
            HostError::InvalidArgs(_) => ErrorKind::InvalidArgs,
            HostError::Blocked(guard) => {
                if guard.first_failure().is_some_and(|c| c.policy) {
                    ErrorKind::Forbidden
                } else {
                    ErrorKind::Blocked
                }
            }
            HostError::Forbidden(_) => ErrorKind::Forbidden,
            HostError::NotFound(_) => ErrorKind::NotFound,
            HostError::Backend(_) | HostError::Failed { .. } => ErrorKind::Backend,
            HostError::TimedOut(_) => ErrorKind::TimedOut,
            HostError::NameTooLong(_) => ErrorKind::NameTooLong,
            HostError::Cancelled(_) => ErrorKind::Cancelled,
        };
        WorldError::new(kind, e.to_string()).caused_by(e)
    }
}

/// Storage failing is the backend's doing (EIO), its words and cause kept as they are.
impl From<crate::state::StateError> for WorldError {
    fn from(e: crate::state::StateError) -> Self {
        let (message, source) = e.into_parts();
        WorldError {
            kind: ErrorKind::Backend,
            message,
            source,
        }
    }
}

pub type WorldResult<T> = Result<T, WorldError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_failure_keeps_its_cause_to_the_top() {
        let io = std::io::Error::other("disk on fire");
        let host = HostError::failed("cannot read issue 42", io);
        let e = WorldError::from(host);
        assert_eq!(e.kind, ErrorKind::Backend);
        assert_eq!(e.kind.level(), tracing::Level::WARN);
        // The host's error is the source, and its own source (the io error) below it.
        let host_err = std::error::Error::source(&e).expect("the host's error");
        assert!(host_err
            .source()
            .is_some_and(|io| io.to_string() == "disk on fire"));
        assert!(e.chain().ends_with("disk on fire"), "{}", e.chain());
        assert_eq!(e.chain().matches("cannot read issue 42").count(), 1);
        assert_eq!(
            WorldError::not_found("x").kind.level(),
            tracing::Level::DEBUG
        );
    }

    #[test]
    fn a_state_failure_is_eio_with_its_words_and_cause() {
        let io = std::io::Error::other("disk full");
        let e = WorldError::from(crate::state::StateError::new("journal: no room").caused_by(io));
        assert_eq!((e.kind, e.errno()), (ErrorKind::Backend, libc::EIO));
        assert_eq!(e.to_string(), "journal: no room");
        assert_eq!(e.chain(), "journal: no room: disk full");
        // The errnos the state records for runs it settles itself are the world's.
        assert_eq!(crate::state::INTERRUPTED_ERRNO, ErrorKind::Backend.errno());
        assert_eq!(crate::state::EXPIRED_ERRNO, ErrorKind::TimedOut.errno());
    }
}
