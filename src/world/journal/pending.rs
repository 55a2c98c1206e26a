//! Pending runs in the journal: a call a policy holds for a person's sign-off, who may
//! decide, until when, and what was decided. The same database as the calls, so a pending
//! run survives a remount and its decision is recorded with the run's new status in one
//! transaction.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::{insert_events, Event, SqliteJournal, RUNNING};
use crate::world::error::{WorldError, WorldResult};

/// Status of a run that waits for a person's sign-off.
pub const PENDING: &str = "pending";
/// Status of a run a person denied (it never ran).
pub const DENIED: &str = "denied";
/// Status of a run nobody decided in time (it never ran).
pub const EXPIRED: &str = "expired";

/// The approvals table; a pending run whose call row is no longer pending (cut off between
/// the two writes by a crash) is marked `interrupted`.
pub(super) fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS approvals(
           run INTEGER PRIMARY KEY,
           rule INTEGER NOT NULL, rule_text TEXT NOT NULL,
           approvers TEXT NOT NULL, self_approve INTEGER NOT NULL,
           requested TEXT NOT NULL, expires TEXT,
           state TEXT NOT NULL,
           decided_at TEXT, decider_uid INTEGER, decider_pid INTEGER,
           decider_session INTEGER, decider_command TEXT, reason TEXT);
         CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals(state, run);",
    )?;
    conn.execute(
        "UPDATE approvals SET state = 'interrupted'
         WHERE state = ?1 AND run NOT IN (SELECT id FROM calls WHERE status = ?1)",
        [PENDING],
    )?;
    Ok(())
}

/// What a pending run asks for when it is held.
#[derive(Clone, Debug)]
pub struct NewApproval<'a> {
    pub rule: usize,
    /// The rule in words (`match "…"`), as it was when the run was held.
    pub rule_text: &'a str,
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
    pub result: Option<&'a str>,
    /// The guard as evaluated again at the decision.
    pub guard: Option<&'a str>,
}

const COLUMNS: &str = "run, rule, rule_text, approvers, self_approve, requested, expires, state,
    decided_at, decider_uid, decider_pid, decider_session, decider_command, reason";

fn row_to_approval(r: &rusqlite::Row<'_>) -> rusqlite::Result<Approval> {
    let approvers: String = r.get(3)?;
    let uid: Option<u32> = r.get(9)?;
    Ok(Approval {
        run: r.get(0)?,
        rule: r.get::<_, i64>(1)? as usize,
        rule_text: r.get(2)?,
        approvers: serde_json::from_str(&approvers).unwrap_or_default(),
        self_approve: r.get(4)?,
        requested: r.get(5)?,
        expires: r.get(6)?,
        state: r.get(7)?,
        decided_at: r.get(8)?,
        decider: match uid {
            Some(uid) => Some(Decider {
                uid,
                pid: r.get::<_, Option<u32>>(10)?.unwrap_or(0),
                session: r.get::<_, Option<u32>>(11)?.unwrap_or(0),
                command: r.get::<_, Option<String>>(12)?.unwrap_or_default(),
            }),
            None => None,
        },
        reason: r.get(13)?,
    })
}

impl SqliteJournal {
    /// Hold run `run` for a person's sign-off, with its `pending` event.
    pub fn hold(&self, run: i64, new: &NewApproval<'_>, event: &Event) -> WorldResult<Approval> {
        let approvers = serde_json::to_string(new.approvers)
            .map_err(|e| WorldError::backend(format!("journal: {e}")))?;
        let expires_ms = new.expires_after.map(|d| d.as_millis() as f64);
        {
            let mut conn = self.conn()?;
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO approvals(run, rule, rule_text, approvers, self_approve, requested, expires, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ','now'),
                   CASE WHEN ?6 IS NULL THEN NULL
                        ELSE strftime('%Y-%m-%dT%H:%M:%fZ','now', '+' || (?6 / 1000.0) || ' seconds') END,
                   ?7)",
                params![
                    run,
                    new.rule as i64,
                    new.rule_text,
                    approvers,
                    new.self_approve,
                    expires_ms,
                    PENDING
                ],
            )?;
            insert_events(&tx, std::slice::from_ref(event))?;
            tx.commit()?;
        }
        self.approval(run)?
            .ok_or_else(|| WorldError::backend("journal: the approval just written is gone"))
    }

    /// The approval record of a run, if it asked for one.
    pub fn approval(&self, run: i64) -> WorldResult<Option<Approval>> {
        let conn = self.conn()?;
        let mut st =
            conn.prepare_cached(&format!("SELECT {COLUMNS} FROM approvals WHERE run = ?1"))?;
        Ok(st.query_row([run], row_to_approval).optional()?)
    }

    /// Runs waiting for a decision, oldest first, at most `limit`.
    pub fn pending_approvals(&self, limit: usize) -> WorldResult<Vec<Approval>> {
        let conn = self.conn()?;
        let mut st = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE state = ?1 ORDER BY run LIMIT ?2"
        ))?;
        let rows = st.query_map(params![PENDING, limit as i64], row_to_approval)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Record a decision (`approved` or `denied`) on a pending run, the run's change and the
    /// events, in one transaction. `false` when the run is no longer pending (someone else
    /// decided first, or it expired): nothing is written then.
    pub fn decide(
        &self,
        run: i64,
        state: &str,
        who: &Decider,
        reason: Option<&str>,
        change: &RunChange<'_>,
        events: &[Event],
    ) -> WorldResult<bool> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let n = tx.execute(
            "UPDATE approvals SET state = ?2, decided_at = strftime('%Y-%m-%dT%H:%M:%fZ','now'),
               decider_uid = ?3, decider_pid = ?4, decider_session = ?5, decider_command = ?6,
               reason = ?7
             WHERE run = ?1 AND state = ?8",
            params![
                run,
                state,
                who.uid,
                who.pid,
                who.session,
                who.command,
                reason,
                PENDING
            ],
        )?;
        if n == 0 {
            return Ok(false);
        }
        update_run(&tx, run, change)?;
        insert_events(&tx, events)?;
        tx.commit()?;
        Ok(true)
    }

    /// Expire the pending runs whose time is up: each gets status `expired`, the result
    /// `result_of` gives it, and an `expired` event. Returns what expired.
    pub fn expire_due(&self, result_of: impl Fn(&Approval) -> String) -> WorldResult<Vec<Expired>> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let due: Vec<Expired> = {
            let mut st = tx.prepare_cached(&format!(
                "SELECT {COLUMNS}, calls.path, calls.op FROM approvals JOIN calls ON calls.id = approvals.run
                 WHERE state = ?1 AND expires IS NOT NULL
                   AND expires <= strftime('%Y-%m-%dT%H:%M:%fZ','now') ORDER BY run"
            ))?;
            let rows = st.query_map([PENDING], |r| {
                Ok(Expired {
                    approval: row_to_approval(r)?,
                    path: r.get(14)?,
                    op: r.get(15)?,
                })
            })?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        for x in &due {
            let a = &x.approval;
            tx.execute(
                "UPDATE approvals SET state = ?2, decided_at = expires WHERE run = ?1",
                params![a.run, EXPIRED],
            )?;
            let text = result_of(a);
            update_run(
                &tx,
                a.run,
                &RunChange {
                    status: EXPIRED,
                    errno: super::EXPIRED_ERRNO,
                    result: Some(&text),
                    guard: None,
                },
            )?;
            let event = Event::of_run(EXPIRED, &x.path, &x.op, a.run, EXPIRED);
            insert_events(&tx, &[event])?;
        }
        tx.commit()?;
        Ok(due)
    }

    /// How long until the next pending run expires (zero if one is due), if any will.
    pub fn next_expiry(&self) -> WorldResult<Option<Duration>> {
        let ms: Option<f64> = self.conn()?.query_row(
            "SELECT (julianday(min(expires)) - julianday('now')) * 86400000.0
             FROM approvals WHERE state = ?1 AND expires IS NOT NULL",
            [PENDING],
            |r| r.get(0),
        )?;
        Ok(ms.map(|ms| Duration::from_millis(ms.max(0.0).ceil() as u64)))
    }
}

fn update_run(
    tx: &rusqlite::Transaction,
    run: i64,
    change: &RunChange<'_>,
) -> rusqlite::Result<()> {
    match change.result {
        Some(result) => tx.execute(
            "UPDATE calls SET status = ?2, errno = ?3, result = ?4, guard = coalesce(?5, guard),
               finished = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?1",
            params![run, change.status, change.errno, result, change.guard],
        )?,
        None => tx.execute(
            "UPDATE calls SET status = ?2, errno = ?3, guard = coalesce(?4, guard), finished = NULL
             WHERE id = ?1",
            params![run, change.status, change.errno, change.guard],
        )?,
    };
    debug_assert!(change.result.is_some() || change.status == RUNNING);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::host::Caller;
    use crate::world::journal::Journal;

    fn journal() -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(&dir.path().join("journal.db")).unwrap();
        (dir, j)
    }

    fn held(j: &Journal, expires_after: Option<Duration>) -> i64 {
        let id = j
            .begin(&Caller::default(), "/t", "merge", "{}", "blocked")
            .unwrap()
            .id;
        j.finish(id, PENDING, libc::EINPROGRESS, "error: waits", &[], &[])
            .unwrap();
        let new = NewApproval {
            rule: 2,
            rule_text: "match \"t/ops/merge\"",
            approvers: &[0, 4242],
            self_approve: false,
            expires_after,
        };
        let ev = Event {
            kind: "pending".into(),
            path: "/t".into(),
            run: Some(id),
            ..Default::default()
        };
        let a = j.hold(id, &new, &ev).unwrap();
        assert_eq!(a.state, PENDING);
        assert_eq!(a.approvers, vec![0, 4242]);
        assert_eq!(a.expires.is_some(), expires_after.is_some());
        id
    }

    #[test]
    fn one_decision_per_pending_run() {
        let (_d, j) = journal();
        let id = held(&j, None);
        assert_eq!(j.pending_approvals(10).unwrap().len(), 1);
        let who = Decider {
            uid: 0,
            pid: 7,
            session: 7,
            command: "wip deny".into(),
        };
        let change = RunChange {
            status: DENIED,
            errno: libc::EACCES,
            result: Some("error: denied"),
            guard: None,
        };
        assert!(j
            .decide(id, "denied", &who, Some("no"), &change, &[])
            .unwrap());
        assert!(!j.decide(id, "approved", &who, None, &change, &[]).unwrap());
        let a = j.approval(id).unwrap().unwrap();
        assert_eq!(a.state, "denied");
        assert_eq!(a.decider, Some(who));
        assert_eq!(a.reason.as_deref(), Some("no"));
        assert_eq!(j.get(id).unwrap().unwrap().status, DENIED);
        assert!(j.pending_approvals(10).unwrap().is_empty());
        assert_eq!(j.next_expiry().unwrap(), None);
    }

    #[test]
    fn pending_runs_survive_a_reopen_and_expire_when_due() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let (j, _) = Journal::open(&path).unwrap();
        let later = held(&j, Some(Duration::from_secs(3600)));
        let due = held(&j, Some(Duration::from_millis(1)));
        drop(j);
        let (j, interrupted) = Journal::open(&path).unwrap();
        assert!(interrupted.is_empty(), "pending runs are not running ones");
        assert_eq!(j.get(later).unwrap().unwrap().status, PENDING);
        // The 1 ms one is due by now or very soon; the wait is bounded.
        let mut expired = Vec::new();
        for _ in 0..200 {
            expired = j.expire_due(|_| "error: expired".into()).unwrap();
            if !expired.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            expired.iter().map(|x| x.approval.run).collect::<Vec<_>>(),
            vec![due]
        );
        assert_eq!(
            (expired[0].path.as_str(), expired[0].op.as_str()),
            ("/t", "merge")
        );
        assert_eq!(j.get(due).unwrap().unwrap().status, EXPIRED);
        assert_eq!(j.approval(due).unwrap().unwrap().state, EXPIRED);
        assert_eq!(j.get(later).unwrap().unwrap().status, PENDING);
        let next = j.next_expiry().unwrap().unwrap();
        assert!(next <= Duration::from_secs(3600) && next > Duration::from_secs(3000));
        let events = j.events_after(0, 10).unwrap();
        assert_eq!(events.iter().filter(|e| e.kind == "expired").count(), 1);
    }
}
