//! Conversations and messages of one agents host, in SQLite in the state directory, so they
//! survive remounts. A turn that was running when the daemon stopped is marked
//! `interrupted` at the next open: never silently lost, never shown as still working.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension};

use crate::host::{HostError, HostResult, OrFailed};

/// Where a conversation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// The agent is answering the last user message.
    Working,
    /// The last turn ended with an answer.
    Done,
    /// The last turn ended without one (non-zero exit, invalid output, timed out).
    Failed,
    /// Someone cancelled the last turn.
    Cancelled,
    /// The daemon stopped while the agent was answering.
    Interrupted,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Working => "working",
            State::Done => "done",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
            State::Interrupted => "interrupted",
        }
    }

    fn parse(s: &str) -> State {
        match s {
            "working" => State::Working,
            "done" => State::Done,
            "cancelled" => State::Cancelled,
            "interrupted" => State::Interrupted,
            // Anything unknown (a future version's state) reads as a failure, never as done.
            _ => State::Failed,
        }
    }
}

/// One conversation's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    pub id: i64,
    pub state: State,
    /// Why it failed (or how it was cancelled/interrupted); empty otherwise.
    pub detail: String,
    /// How many messages it holds.
    pub messages: i64,
    /// The first user message (for the description).
    pub question: String,
    pub created: String,
    pub updated: String,
}

/// One message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub n: i64,
    pub role: String,
    pub content: String,
    pub created: String,
}

pub struct Store {
    conn: Mutex<Connection>,
}

/// What a failed statement says it was at.
const STORE: &str = "conversation store";

const CONVERSATION_COLUMNS: &str = "c.id, c.state, c.detail, c.created, c.updated, \
     (SELECT count(*) FROM messages m WHERE m.conversation = c.id), \
     COALESCE((SELECT content FROM messages m WHERE m.conversation = c.id ORDER BY n LIMIT 1), '')";

fn conversation_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Conversation> {
    let state: String = r.get(1)?;
    Ok(Conversation {
        id: r.get(0)?,
        state: State::parse(&state),
        detail: r.get(2)?,
        created: r.get(3)?,
        updated: r.get(4)?,
        messages: r.get(5)?,
        question: r.get(6)?,
    })
}

impl Store {
    /// Open (or create) the store; returns it and how many turns were marked interrupted.
    pub fn open(path: &Path) -> rusqlite::Result<(Store, usize)> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS conversations (
                 id INTEGER PRIMARY KEY AUTOINCREMENT,
                 state TEXT NOT NULL,
                 detail TEXT NOT NULL DEFAULT '',
                 created TEXT NOT NULL DEFAULT (datetime('now')),
                 updated TEXT NOT NULL DEFAULT (datetime('now'))
             );
             CREATE TABLE IF NOT EXISTS messages (
                 conversation INTEGER NOT NULL REFERENCES conversations(id),
                 n INTEGER NOT NULL,
                 role TEXT NOT NULL,
                 content TEXT NOT NULL,
                 created TEXT NOT NULL DEFAULT (datetime('now')),
                 PRIMARY KEY (conversation, n)
             );",
        )?;
        let interrupted = conn.execute(
            "UPDATE conversations SET state = 'interrupted', \
             detail = 'the daemon stopped while the agent was answering', \
             updated = datetime('now') WHERE state = 'working'",
            [],
        )?;
        Ok((
            Store {
                conn: Mutex::new(conn),
            },
            interrupted,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (transactions roll back).
        crate::hosts::lock(&self.conn)
    }

    /// A new conversation, working on its first user message; returns its id.
    pub fn create(&self, message: &str) -> HostResult<i64> {
        let mut conn = self.lock();
        let tx = conn.transaction().or_failed(STORE)?;
        tx.execute("INSERT INTO conversations (state) VALUES ('working')", [])
            .or_failed(STORE)?;
        let id = tx.last_insert_rowid();
        tx.execute(
            "INSERT INTO messages (conversation, n, role, content) VALUES (?1, 1, 'user', ?2)",
            params![id, message],
        )
        .or_failed(STORE)?;
        tx.commit().or_failed(STORE)?;
        Ok(id)
    }

    /// Add a user message to a conversation that is not working and mark it working, in
    /// one transaction (the guard `not_working`, checked again atomically). Returns the new
    /// message's number, or the conversation as it stands if it is working.
    pub fn reply(&self, id: i64, message: &str) -> HostResult<Result<i64, Conversation>> {
        let mut conn = self.lock();
        let tx = conn.transaction().or_failed(STORE)?;
        let conv = tx
            .query_row(
                &format!("SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?1"),
                [id],
                conversation_row,
            )
            .optional()
            .or_failed(STORE)?
            .ok_or_else(|| HostError::NotFound(format!("no conversation {id}")))?;
        if conv.state == State::Working {
            return Ok(Err(conv));
        }
        let n = conv.messages + 1;
        tx.execute(
            "INSERT INTO messages (conversation, n, role, content) VALUES (?1, ?2, 'user', ?3)",
            params![id, n, message],
        )
        .or_failed(STORE)?;
        tx.execute(
            "UPDATE conversations SET state = 'working', detail = '', updated = datetime('now') \
             WHERE id = ?1",
            [id],
        )
        .or_failed(STORE)?;
        tx.commit().or_failed(STORE)?;
        Ok(Ok(n))
    }

    /// TurnEnd a turn: store the answer (if any) and the conversation's new state.
    pub fn finish(
        &self,
        id: i64,
        state: State,
        detail: &str,
        answer: Option<&str>,
    ) -> HostResult<()> {
        let mut conn = self.lock();
        let tx = conn.transaction().or_failed(STORE)?;
        if let Some(text) = answer {
            tx.execute(
                "INSERT INTO messages (conversation, n, role, content) VALUES (?1, \
                 (SELECT COALESCE(max(n), 0) + 1 FROM messages WHERE conversation = ?1), \
                 'agent', ?2)",
                params![id, text],
            )
            .or_failed(STORE)?;
        }
        tx.execute(
            "UPDATE conversations SET state = ?2, detail = ?3, updated = datetime('now') \
             WHERE id = ?1",
            params![id, state.as_str(), detail],
        )
        .or_failed(STORE)?;
        tx.commit().or_failed(STORE)
    }

    pub fn conversation(&self, id: i64) -> HostResult<Option<Conversation>> {
        self.lock()
            .query_row(
                &format!("SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?1"),
                [id],
                conversation_row,
            )
            .optional()
            .or_failed(STORE)
    }

    /// The newest `limit` conversations, newest first, and how many exist.
    pub fn conversations(&self, limit: usize) -> HostResult<(Vec<Conversation>, i64)> {
        let conn = self.lock();
        let total: i64 = conn
            .query_row("SELECT count(*) FROM conversations", [], |r| r.get(0))
            .or_failed(STORE)?;
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {CONVERSATION_COLUMNS} FROM conversations c ORDER BY c.id DESC LIMIT ?1"
            ))
            .or_failed(STORE)?;
        let rows = stmt
            .query_map([limit as i64], conversation_row)
            .or_failed(STORE)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .or_failed(STORE)?;
        Ok((rows, total))
    }

    /// How many conversations exist and how many are working.
    pub fn counts(&self) -> HostResult<(i64, i64)> {
        self.lock()
            .query_row(
                "SELECT count(*), COALESCE(sum(state = 'working'), 0) FROM conversations",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .or_failed(STORE)
    }

    pub fn messages(&self, id: i64) -> HostResult<Vec<Message>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT n, role, content, created FROM messages WHERE conversation = ?1 \
                 ORDER BY n",
            )
            .or_failed(STORE)?;
        let rows = stmt
            .query_map([id], |r| {
                Ok(Message {
                    n: r.get(0)?,
                    role: r.get(1)?,
                    content: r.get(2)?,
                    created: r.get(3)?,
                })
            })
            .or_failed(STORE)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .or_failed(STORE)?;
        Ok(rows)
    }

    pub fn message(&self, id: i64, n: i64) -> HostResult<Option<Message>> {
        self.lock()
            .query_row(
                "SELECT n, role, content, created FROM messages \
                 WHERE conversation = ?1 AND n = ?2",
                params![id, n],
                |r| {
                    Ok(Message {
                        n: r.get(0)?,
                        role: r.get(1)?,
                        content: r.get(2)?,
                        created: r.get(3)?,
                    })
                },
            )
            .optional()
            .or_failed(STORE)
    }

    /// Mark working conversations interrupted (the host is going away with turns running).
    pub fn interrupt(&self, ids: &[i64]) {
        let conn = self.lock();
        for id in ids {
            if let Err(e) = conn.execute(
                "UPDATE conversations SET state = 'interrupted', \
                 detail = 'the daemon stopped while the agent was answering', \
                 updated = datetime('now') WHERE id = ?1 AND state = 'working'",
                [id],
            ) {
                tracing::warn!(conversation = id, "cannot mark interrupted: {e}");
            }
        }
    }
}
