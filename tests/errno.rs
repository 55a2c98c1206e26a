//! Errors are errno plus words: one table of every way a call fails and the errno the
//! writer gets, from the world's own kinds, through what hosts report (a guard condition,
//! a policy), to GitHub's answers. The same mapping through a mount is in tests/github.rs.

use wip::host::{Condition, Guard, HostError};
use wip::hosts::github::GhError;
use wip::world::error::{ErrorKind, WorldError};

/// Every kind, as the library lists them. A kind added to `ErrorKind` fails to compile
/// in `expected` below, whose match has no catch-all: then add it there and to the list.
const ALL: [ErrorKind; 13] = ErrorKind::ALL;

/// The contract (README, docs/SEMANTICS.md): errno and the run's status word.
fn expected(kind: ErrorKind) -> (i32, &'static str) {
    match kind {
        ErrorKind::InvalidArgs => (libc::EINVAL, "invalid"),
        ErrorKind::Blocked => (libc::EPERM, "blocked"),
        ErrorKind::Forbidden => (libc::EACCES, "forbidden"),
        ErrorKind::NotFound => (libc::ENOENT, "not_found"),
        ErrorKind::Backend => (libc::EIO, "failed"),
        ErrorKind::TimedOut => (libc::ETIMEDOUT, "timed_out"),
        ErrorKind::NotSupported => (libc::ENOTSUP, "not_supported"),
        ErrorKind::TooLarge => (libc::EFBIG, "too_large"),
        ErrorKind::CallerGone => (libc::EINTR, "caller_gone"),
        ErrorKind::Pending => (libc::EINPROGRESS, "pending"),
        ErrorKind::NoSpace => (libc::ENOSPC, "no_space"),
        ErrorKind::NameTooLong => (libc::ENAMETOOLONG, "name_too_long"),
        ErrorKind::Cancelled => (libc::ECANCELED, "cancelled"),
    }
}

#[test]
fn every_kind_has_its_errno_and_status_word() {
    let mut errnos = Vec::new();
    for kind in ALL {
        let (errno, status) = expected(kind);
        assert_eq!(kind.errno(), errno, "{kind:?}");
        assert_eq!(kind.status(), status, "{kind:?}");
        let e = WorldError::new(kind, "the words");
        assert_eq!(e.errno(), errno, "{kind:?}");
        assert_eq!(e.to_string(), "the words", "the words are kept as given");
        errnos.push(errno);
    }
    errnos.sort();
    errnos.dedup();
    assert_eq!(errnos.len(), ALL.len(), "one errno per kind, none shared");
    assert_eq!(WorldError::invalid("x").errno(), libc::EINVAL);
    assert_eq!(WorldError::not_found("x").errno(), libc::ENOENT);
    assert_eq!(WorldError::backend("x").errno(), libc::EIO);
}

fn world(e: HostError) -> (i32, String) {
    let w = WorldError::from(e);
    (w.errno(), w.to_string())
}

#[test]
fn what_hosts_report_becomes_errno_plus_words() {
    let table: Vec<(HostError, i32, &str)> = vec![
        (
            HostError::InvalidArgs("unknown label \"bogus\"".into()),
            libc::EINVAL,
            "unknown label \"bogus\"",
        ),
        (
            HostError::Blocked(Guard::new(vec![
                Condition::check("open", true, "Issue #42 is open"),
                Condition::check("checks_passing", false, "1 of 3 checks failing (lint)"),
            ])),
            libc::EPERM,
            "blocked by guard checks_passing: 1 of 3 checks failing (lint)",
        ),
        // A failing policy condition is EACCES, even when a plain condition fails too:
        // no change of state would let the call through.
        (
            HostError::Blocked(Guard::new(vec![
                Condition::check("open", false, "Issue #42 is already closed"),
                Condition::policy("writable", false, "the mount is read-only"),
            ])),
            libc::EACCES,
            "blocked by guard writable: the mount is read-only",
        ),
        (
            HostError::Forbidden("outside the root: /etc/passwd".into()),
            libc::EACCES,
            "outside the root: /etc/passwd",
        ),
        (
            HostError::NotFound("no issue #99".into()),
            libc::ENOENT,
            "no issue #99",
        ),
        (
            HostError::Backend("tracker database: disk I/O error".into()),
            libc::EIO,
            "tracker database: disk I/O error",
        ),
        (
            HostError::TimedOut("no answer within 5 s".into()),
            libc::ETIMEDOUT,
            "no answer within 5 s",
        ),
    ];
    for (e, errno, words) in table {
        let what = format!("{e:?}");
        assert_eq!(world(e), (errno, words.to_string()), "{what}");
    }
    // The journal's own failures (SQLite) are the backend's: EIO, named as the journal's.
    let busy = rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
        Some("database is locked".into()),
    );
    let w = WorldError::from(wip::state::StateError::from(busy));
    assert_eq!(
        (w.errno(), w.to_string()),
        (libc::EIO, "journal: database is locked".to_string())
    );
}

#[test]
fn githubs_answers_map_to_errnos_with_githubs_words() {
    let status = |status: u16, message: &str| GhError::Status {
        status,
        message: message.to_string(),
    };
    let what = "merge of octo/hello#7";
    let table: Vec<(GhError, i32, String)> = vec![
        (
            status(401, "Bad credentials"),
            libc::EACCES,
            format!("{what}: GitHub rejected the credentials (Bad credentials); set GITHUB_TOKEN to a valid token or run `gh auth login`, then remount"),
        ),
        (
            status(403, "Resource not accessible by integration"),
            libc::EACCES,
            format!("{what}: GitHub refused (Resource not accessible by integration)"),
        ),
        (
            status(404, "Not Found"),
            libc::ENOENT,
            format!("{what}: GitHub says Not Found (Not Found)"),
        ),
        (
            status(405, "Pull Request is not mergeable"),
            libc::EPERM,
            format!("blocked by guard github_accepts: GitHub refused the {what} (405): Pull Request is not mergeable"),
        ),
        (
            status(409, "Head branch was modified"),
            libc::EPERM,
            format!("blocked by guard github_accepts: GitHub refused the {what} (409): Head branch was modified"),
        ),
        (
            status(422, "Validation Failed (Label color invalid)"),
            libc::EINVAL,
            format!("{what}: GitHub rejected it: Validation Failed (Label color invalid)"),
        ),
        (
            GhError::RateLimited(
                "GitHub rate limit exhausted; resets at 17:00:00 UTC (in 3 min)".into(),
            ),
            libc::ETIMEDOUT,
            format!("{what}: GitHub rate limit exhausted; resets at 17:00:00 UTC (in 3 min)"),
        ),
        (
            GhError::Timeout("GitHub did not answer within 15 s".into()),
            libc::ETIMEDOUT,
            format!("{what}: GitHub did not answer within 15 s"),
        ),
        (
            GhError::Transport("cannot reach GitHub: connection refused".into()),
            libc::EIO,
            format!("{what}: cannot reach GitHub: connection refused"),
        ),
    ];
    for (e, errno, words) in table {
        let shown = format!("{e:?}");
        assert_eq!(world(e.into_host(what)), (errno, words), "{shown}");
    }
    // GitHub failing on its side is the backend failing: EIO, whatever 5xx it is.
    for code in [500, 502, 503, 504] {
        let (errno, words) = world(status(code, "Server Error").into_host(what));
        assert_eq!(errno, libc::EIO, "{code}");
        assert_eq!(
            words,
            format!("{what}: GitHub answered {code}: Server Error")
        );
    }
}
