//! Schema and queries of the tracker database. Plain SQL, every lookup by primary key or
//! index; listings are `ORDER BY … LIMIT page_size`.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::{Kind, Node, DB};
use crate::manifest::Identity;
use crate::world::host::{HostResult, OrFailed};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS project (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    default_branch TEXT NOT NULL DEFAULT 'main'
);
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    full_name TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS labels (
    name TEXT PRIMARY KEY,
    color TEXT NOT NULL,
    description TEXT NOT NULL
);
-- Issues and pull requests share one number sequence, like GitHub.
CREATE TABLE IF NOT EXISTS items (
    number INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('issue', 'pull')),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    author TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('open', 'closed', 'merged')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    closed_at TEXT,
    closed_by TEXT,
    close_reason TEXT,
    head TEXT,
    base TEXT,
    mergeable INTEGER NOT NULL DEFAULT 1,
    conflicts TEXT,
    merge_method TEXT,
    diff TEXT
);
-- (kind) is stored as (kind, number): newest-first listings walk it without sorting.
CREATE INDEX IF NOT EXISTS items_kind ON items(kind);
CREATE INDEX IF NOT EXISTS items_kind_state ON items(kind, state);
CREATE INDEX IF NOT EXISTS items_author ON items(author);
CREATE TABLE IF NOT EXISTS item_labels (
    number INTEGER NOT NULL,
    label TEXT NOT NULL,
    PRIMARY KEY (number, label)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS item_labels_by_label ON item_labels(label, number);
CREATE TABLE IF NOT EXISTS assignees (
    number INTEGER NOT NULL,
    user TEXT NOT NULL,
    PRIMARY KEY (number, user)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS assignees_by_user ON assignees(user, number);
CREATE TABLE IF NOT EXISTS comments (
    number INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    author TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (number, seq)
) WITHOUT ROWID;
-- retryable: the failure is of the runner (timeout, network), so a rerun passes.
CREATE TABLE IF NOT EXISTS checks (
    number INTEGER NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('success', 'failure', 'pending')),
    summary TEXT NOT NULL,
    log TEXT NOT NULL,
    retryable INTEGER NOT NULL DEFAULT 0,
    runs INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (number, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS reviews (
    number INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    author TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('approved', 'changes_requested', 'commented')),
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (number, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS review_requests (
    number INTEGER NOT NULL,
    user TEXT NOT NULL,
    PRIMARY KEY (number, user)
) WITHOUT ROWID;
-- Which issues a pull request closes when merged ('Fixes #42').
CREATE TABLE IF NOT EXISTS fixes (
    pull INTEGER NOT NULL,
    issue INTEGER NOT NULL,
    PRIMARY KEY (pull, issue)
) WITHOUT ROWID;
";

pub(super) fn create_schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    // Added after the first release: databases made before lack it.
    let has_edited: bool = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('comments') WHERE name = 'edited_at'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !has_edited {
        conn.execute_batch("ALTER TABLE comments ADD COLUMN edited_at TEXT")?;
    }
    Ok(())
}

pub(super) fn project_name(conn: &Connection) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT name FROM project LIMIT 1", [], |r| r.get(0))
        .optional()
}

/// The mount's user must exist to author comments and reviews.
pub(super) fn ensure_user(conn: &Connection, me: &Identity) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT OR IGNORE INTO users (name, role, full_name) VALUES (?1, ?2, '')",
        params![me.user, me.role.as_str()],
    )?;
    Ok(())
}

// ---------------------------------------------------------------- time

pub(super) use crate::calendar::{civil_from_days, days_from_civil};

/// Seconds since the epoch → `2026-10-02T14:03:00Z`.
pub(super) fn iso(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

pub(super) fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    iso(secs)
}

/// The date part of a timestamp.
pub(super) fn day(ts: &str) -> &str {
    ts.get(..10).unwrap_or(ts)
}

// ---------------------------------------------------------------- rows

/// An issue or pull request.
#[derive(Clone, Debug)]
pub(super) struct Item {
    pub number: i64,
    pub kind: Kind,
    pub title: String,
    pub body: String,
    pub author: String,
    /// `open`, `closed` or (pull requests) `merged`.
    pub state: String,
    pub created_at: String,
    pub updated_at: String,
    pub closed_at: Option<String>,
    pub closed_by: Option<String>,
    pub close_reason: Option<String>,
    pub head: Option<String>,
    pub base: Option<String>,
    pub mergeable: bool,
    pub conflicts: Option<String>,
    pub merge_method: Option<String>,
    pub diff: Option<String>,
}

impl Item {
    pub fn is_open(&self) -> bool {
        self.state == "open"
    }

    /// `Issue #42` or `PR #50`.
    pub fn label(&self) -> String {
        match self.kind {
            Kind::Issue => format!("Issue #{}", self.number),
            Kind::Pull => format!("PR #{}", self.number),
        }
    }

    pub fn path(&self) -> Vec<String> {
        Node::Item(self.kind, self.number).path()
    }
}

const ITEM_COLUMNS: &str = "number, kind, title, body, author, state, created_at, updated_at, \
     closed_at, closed_by, close_reason, head, base, mergeable, conflicts, merge_method, diff";

fn item_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Item> {
    let kind: String = r.get(1)?;
    Ok(Item {
        number: r.get(0)?,
        kind: Kind::from_db(&kind).unwrap_or(Kind::Issue),
        title: r.get(2)?,
        body: r.get(3)?,
        author: r.get(4)?,
        state: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        closed_at: r.get(8)?,
        closed_by: r.get(9)?,
        close_reason: r.get(10)?,
        head: r.get(11)?,
        base: r.get(12)?,
        mergeable: r.get(13)?,
        conflicts: r.get(14)?,
        merge_method: r.get(15)?,
        diff: r.get(16)?,
    })
}

pub(super) fn item(conn: &Connection, number: i64) -> HostResult<Option<Item>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {ITEM_COLUMNS} FROM items WHERE number = ?1"
        ))
        .or_failed(DB)?;
    st.query_row([number], item_row).optional().or_failed(DB)
}

/// The item, which the caller knows exists (checked by `exists` in the same transaction).
pub(super) fn item_req(conn: &Connection, number: i64) -> HostResult<Item> {
    item(conn, number)?.ok_or_else(|| {
        crate::world::host::HostError::NotFound(format!("no issue or pull request #{number}"))
    })
}

pub(super) fn item_kind(conn: &Connection, number: i64) -> HostResult<Option<Kind>> {
    let mut st = conn
        .prepare_cached("SELECT kind FROM items WHERE number = ?1")
        .or_failed(DB)?;
    let kind: Option<String> = st
        .query_row([number], |r| r.get(0))
        .optional()
        .or_failed(DB)?;
    Ok(kind.as_deref().and_then(Kind::from_db))
}

/// Newest first, at most `limit`.
pub(super) fn items_newest(conn: &Connection, kind: Kind, limit: usize) -> HostResult<Vec<Item>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {ITEM_COLUMNS} FROM items WHERE kind = ?1 ORDER BY number DESC LIMIT ?2"
        ))
        .or_failed(DB)?;
    let rows = st
        .query_map(params![kind.db(), limit as i64], item_row)
        .or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

/// (total, open, merged) of one kind.
pub(super) fn counts(conn: &Connection, kind: Kind) -> HostResult<(i64, i64, i64)> {
    let mut st = conn
        .prepare_cached(
            "SELECT count(*), coalesce(sum(state = 'open'), 0), coalesce(sum(state = 'merged'), 0)
             FROM items WHERE kind = ?1",
        )
        .or_failed(DB)?;
    st.query_row([kind.db()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .or_failed(DB)
}

fn strings(conn: &Connection, sql: &str, key: impl rusqlite::Params) -> HostResult<Vec<String>> {
    let mut st = conn.prepare_cached(sql).or_failed(DB)?;
    let rows = st.query_map(key, |r| r.get(0)).or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn labels_of(conn: &Connection, number: i64) -> HostResult<Vec<String>> {
    strings(
        conn,
        "SELECT label FROM item_labels WHERE number = ?1 ORDER BY label",
        [number],
    )
}

pub(super) fn assignees_of(conn: &Connection, number: i64) -> HostResult<Vec<String>> {
    strings(
        conn,
        "SELECT user FROM assignees WHERE number = ?1 ORDER BY user",
        [number],
    )
}

pub(super) fn requested_of(conn: &Connection, number: i64) -> HostResult<Vec<String>> {
    strings(
        conn,
        "SELECT user FROM review_requests WHERE number = ?1 ORDER BY user",
        [number],
    )
}

pub(super) fn fixes_of(conn: &Connection, pull: i64) -> HostResult<Vec<i64>> {
    let mut st = conn
        .prepare_cached("SELECT issue FROM fixes WHERE pull = ?1 ORDER BY issue")
        .or_failed(DB)?;
    let rows = st.query_map([pull], |r| r.get(0)).or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn fixed_by(conn: &Connection, issue: i64) -> HostResult<Vec<i64>> {
    let mut st = conn
        .prepare_cached("SELECT pull FROM fixes WHERE issue = ?1 ORDER BY pull")
        .or_failed(DB)?;
    let rows = st.query_map([issue], |r| r.get(0)).or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn comment_count(conn: &Connection, number: i64) -> HostResult<i64> {
    let mut st = conn
        .prepare_cached("SELECT count(*) FROM comments WHERE number = ?1")
        .or_failed(DB)?;
    st.query_row([number], |r| r.get(0)).or_failed(DB)
}

#[derive(Clone, Debug)]
pub(super) struct Comment {
    pub seq: i64,
    pub author: String,
    pub body: String,
    pub created_at: String,
}

fn comment_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Comment> {
    Ok(Comment {
        seq: r.get(0)?,
        author: r.get(1)?,
        body: r.get(2)?,
        created_at: r.get(3)?,
    })
}

pub(super) fn comments(conn: &Connection, number: i64, limit: usize) -> HostResult<Vec<Comment>> {
    let mut st = conn
        .prepare_cached(
            "SELECT seq, author, body, created_at FROM comments WHERE number = ?1
             ORDER BY seq LIMIT ?2",
        )
        .or_failed(DB)?;
    let rows = st
        .query_map(params![number, limit as i64], comment_row)
        .or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn comment(conn: &Connection, number: i64, seq: i64) -> HostResult<Option<Comment>> {
    let mut st = conn
        .prepare_cached(
            "SELECT seq, author, body, created_at FROM comments WHERE number = ?1 AND seq = ?2",
        )
        .or_failed(DB)?;
    st.query_row(params![number, seq], comment_row)
        .optional()
        .or_failed(DB)
}

/// Add a comment; returns its number within the item (1, 2, …). Called inside a write
/// transaction, so `max + 1` cannot race.
pub(super) fn add_comment(
    conn: &Connection,
    number: i64,
    author: &str,
    body: &str,
    at: &str,
) -> HostResult<i64> {
    let seq: i64 = conn
        .prepare_cached("SELECT coalesce(max(seq), 0) + 1 FROM comments WHERE number = ?1")
        .and_then(|mut st| st.query_row([number], |r| r.get(0)))
        .or_failed(DB)?;
    conn.prepare_cached(
        "INSERT INTO comments (number, seq, author, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut st| st.execute(params![number, seq, author, body, at]))
    .or_failed(DB)?;
    touch(conn, number, at)?;
    Ok(seq)
}

pub(super) fn touch(conn: &Connection, number: i64, at: &str) -> HostResult<()> {
    conn.prepare_cached("UPDATE items SET updated_at = ?2 WHERE number = ?1")
        .and_then(|mut st| st.execute(params![number, at]))
        .or_failed(DB)?;
    Ok(())
}

#[derive(Clone, Debug)]
pub(super) struct Check {
    pub name: String,
    /// `success`, `failure` or `pending`.
    pub status: String,
    pub summary: String,
    pub log: String,
    pub retryable: bool,
    pub runs: i64,
}

fn check_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Check> {
    Ok(Check {
        name: r.get(0)?,
        status: r.get(1)?,
        summary: r.get(2)?,
        log: r.get(3)?,
        retryable: r.get(4)?,
        runs: r.get(5)?,
    })
}

pub(super) fn checks(conn: &Connection, number: i64) -> HostResult<Vec<Check>> {
    let mut st = conn
        .prepare_cached(
            "SELECT name, status, summary, log, retryable, runs FROM checks WHERE number = ?1
             ORDER BY name",
        )
        .or_failed(DB)?;
    let rows = st.query_map([number], check_row).or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn check(conn: &Connection, number: i64, name: &str) -> HostResult<Option<Check>> {
    let mut st = conn
        .prepare_cached(
            "SELECT name, status, summary, log, retryable, runs FROM checks
             WHERE number = ?1 AND name = ?2",
        )
        .or_failed(DB)?;
    st.query_row(params![number, name], check_row)
        .optional()
        .or_failed(DB)
}

#[derive(Clone, Debug)]
pub(super) struct Review {
    pub seq: i64,
    pub author: String,
    /// `approved`, `changes_requested` or `commented`.
    pub state: String,
    pub body: String,
    pub created_at: String,
}

fn review_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Review> {
    Ok(Review {
        seq: r.get(0)?,
        author: r.get(1)?,
        state: r.get(2)?,
        body: r.get(3)?,
        created_at: r.get(4)?,
    })
}

pub(super) fn reviews(conn: &Connection, number: i64, limit: usize) -> HostResult<Vec<Review>> {
    let mut st = conn
        .prepare_cached(
            "SELECT seq, author, state, body, created_at FROM reviews WHERE number = ?1
             ORDER BY seq LIMIT ?2",
        )
        .or_failed(DB)?;
    let rows = st
        .query_map(params![number, limit as i64], review_row)
        .or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn review(conn: &Connection, number: i64, seq: i64) -> HostResult<Option<Review>> {
    let mut st = conn
        .prepare_cached(
            "SELECT seq, author, state, body, created_at FROM reviews
             WHERE number = ?1 AND seq = ?2",
        )
        .or_failed(DB)?;
    st.query_row(params![number, seq], review_row)
        .optional()
        .or_failed(DB)
}

/// Where the reviews of a pull request stand.
#[derive(Clone, Debug, Default)]
pub(super) struct ReviewState {
    /// Reviewers whose latest verdict is an approval (the author's own never counts).
    pub approvers: Vec<String>,
    /// Reviewers whose latest verdict asks for changes.
    pub changes_by: Vec<String>,
    /// Review requested from, not yet given.
    pub requested: Vec<String>,
}

impl ReviewState {
    pub fn approved(&self) -> bool {
        !self.approvers.is_empty() && self.changes_by.is_empty()
    }
}

pub(super) fn review_state(conn: &Connection, pull: &Item) -> HostResult<ReviewState> {
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    let mut st = conn
        .prepare_cached(
            "SELECT author, state FROM reviews WHERE number = ?1 AND state != 'commented'
             ORDER BY seq",
        )
        .or_failed(DB)?;
    let rows = st
        .query_map([pull.number], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .or_failed(DB)?;
    for row in rows {
        let (author, state) = row.or_failed(DB)?;
        if author != pull.author {
            latest.insert(author, state);
        }
    }
    let mut rs = ReviewState {
        requested: requested_of(conn, pull.number)?,
        ..Default::default()
    };
    for (who, state) in latest {
        match state.as_str() {
            "approved" => rs.approvers.push(who),
            "changes_requested" => rs.changes_by.push(who),
            _ => {}
        }
    }
    Ok(rs)
}

#[derive(Clone, Debug)]
pub(super) struct User {
    pub name: String,
    pub role: String,
    pub full_name: String,
}

fn user_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<User> {
    Ok(User {
        name: r.get(0)?,
        role: r.get(1)?,
        full_name: r.get(2)?,
    })
}

pub(super) fn user(conn: &Connection, name: &str) -> HostResult<Option<User>> {
    let mut st = conn
        .prepare_cached("SELECT name, role, full_name FROM users WHERE name = ?1")
        .or_failed(DB)?;
    st.query_row([name], user_row).optional().or_failed(DB)
}

pub(super) fn users(conn: &Connection, limit: usize) -> HostResult<Vec<User>> {
    let mut st = conn
        .prepare_cached("SELECT name, role, full_name FROM users ORDER BY name LIMIT ?1")
        .or_failed(DB)?;
    let rows = st.query_map([limit as i64], user_row).or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn user_names(conn: &Connection) -> HostResult<Vec<String>> {
    strings(conn, "SELECT name FROM users ORDER BY name", [])
}

#[derive(Clone, Debug)]
pub(super) struct Label {
    pub name: String,
    pub description: String,
}

fn label_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Label> {
    Ok(Label {
        name: r.get(0)?,
        description: r.get(1)?,
    })
}

pub(super) fn label(conn: &Connection, name: &str) -> HostResult<Option<Label>> {
    let mut st = conn
        .prepare_cached("SELECT name, description FROM labels WHERE name = ?1")
        .or_failed(DB)?;
    st.query_row([name], label_row).optional().or_failed(DB)
}

pub(super) fn labels(conn: &Connection, limit: usize) -> HostResult<Vec<Label>> {
    let mut st = conn
        .prepare_cached("SELECT name, description FROM labels ORDER BY name LIMIT ?1")
        .or_failed(DB)?;
    let rows = st.query_map([limit as i64], label_row).or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

pub(super) fn label_names(conn: &Connection) -> HostResult<Vec<String>> {
    strings(conn, "SELECT name FROM labels ORDER BY name", [])
}

/// Open issues carrying the label (pull requests not counted).
pub(super) fn label_open_issues(conn: &Connection, label: &str) -> HostResult<i64> {
    let mut st = conn
        .prepare_cached(
            "SELECT count(*) FROM item_labels l JOIN items i ON i.number = l.number
             WHERE l.label = ?1 AND i.kind = 'issue' AND i.state = 'open'",
        )
        .or_failed(DB)?;
    st.query_row([label], |r| r.get(0)).or_failed(DB)
}

/// `state` filter of the relation ops: `open`, `closed` (closed or merged) or `all`.
fn state_matches(filter: &str, state: &str) -> bool {
    match filter {
        "open" => state == "open",
        "closed" => state != "open",
        _ => true,
    }
}

/// Items carrying a label, newest first, at most `limit`, with the total that matched.
pub(super) fn items_with_label(
    conn: &Connection,
    label: &str,
    state: &str,
    limit: usize,
) -> HostResult<(Vec<(Kind, i64)>, usize)> {
    let mut st = conn
        .prepare_cached(
            "SELECT i.kind, i.number, i.state FROM item_labels l JOIN items i ON i.number = l.number
             WHERE l.label = ?1 ORDER BY i.number DESC",
        )
        .or_failed(DB)?;
    let rows = st
        .query_map([label], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .or_failed(DB)?;
    collect_filtered(rows, state, limit)
}

/// Items a user authored or is assigned to, newest first, at most `limit`, with the total.
pub(super) fn items_of_user(
    conn: &Connection,
    user: &str,
    state: &str,
    limit: usize,
) -> HostResult<(Vec<(Kind, i64)>, usize)> {
    let mut st = conn
        .prepare_cached(
            "SELECT kind, number, state FROM items WHERE author = ?1
             UNION
             SELECT i.kind, i.number, i.state FROM assignees a JOIN items i ON i.number = a.number
             WHERE a.user = ?1
             ORDER BY 2 DESC",
        )
        .or_failed(DB)?;
    let rows = st
        .query_map([user], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .or_failed(DB)?;
    collect_filtered(rows, state, limit)
}

fn collect_filtered(
    rows: impl Iterator<Item = rusqlite::Result<(String, i64, String)>>,
    state: &str,
    limit: usize,
) -> HostResult<(Vec<(Kind, i64)>, usize)> {
    let mut out = Vec::new();
    let mut total = 0;
    for row in rows {
        let (kind, number, st) = row.or_failed(DB)?;
        if !state_matches(state, &st) {
            continue;
        }
        total += 1;
        if out.len() < limit {
            if let Some(kind) = Kind::from_db(&kind) {
                out.push((kind, number));
            }
        }
    }
    Ok((out, total))
}

/// Whether the entry a node names exists now.
pub(super) fn exists(conn: &Connection, node: &Node) -> HostResult<bool> {
    let is = |n: i64, k: Kind| -> HostResult<bool> { Ok(item_kind(conn, n)? == Some(k)) };
    Ok(match node {
        Node::Root | Node::Issues | Node::Pulls | Node::Labels | Node::Users => true,
        Node::Item(k, n) | Node::Comments(k, n) => is(*n, *k)?,
        Node::Comment(k, n, c) => is(*n, *k)? && comment(conn, *n, *c)?.is_some(),
        Node::Checks(n) | Node::Reviews(n) => is(*n, Kind::Pull)?,
        Node::Check(n, name) => check(conn, *n, name)?.is_some(),
        Node::Review(n, r) => review(conn, *n, *r)?.is_some(),
        Node::Label(name) => label(conn, name)?.is_some(),
        Node::User(name) => user(conn, name)?.is_some(),
    })
}

/// User names for seeding (plain rusqlite errors, before the host exists).
pub(super) fn user_names_raw(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare("SELECT name FROM users ORDER BY name")?;
    let rows = st.query_map([], |r| r.get(0))?;
    rows.collect()
}
