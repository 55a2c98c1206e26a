//! Schema and queries of the tracker database. Plain SQL that SQLite and PostgreSQL both
//! read (see `store`), every lookup by primary key or index; listings are
//! `ORDER BY … LIMIT page_size`. `user` is a reserved word in PostgreSQL: always quoted.

use std::collections::BTreeMap;

use super::store::{args, Row, Store};
use super::{Kind, Node};
use crate::host::identity::Identity;
use crate::host::HostResult;

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
-- Newest-first listings walk (kind, number) without sorting (SQLite stores an index on
-- (kind) so already; PostgreSQL needs the number named).
CREATE INDEX IF NOT EXISTS items_kind ON items(kind, number);
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
    \"user\" TEXT NOT NULL,
    PRIMARY KEY (number, \"user\")
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS assignees_by_user ON assignees(\"user\", number);
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
    \"user\" TEXT NOT NULL,
    PRIMARY KEY (number, \"user\")
) WITHOUT ROWID;
-- The runs of the mounts' journals whose calls committed here (`JOURNAL:ID`), written in
-- each call's own transaction: a run a crash cut off is settled by it after a restart.
CREATE TABLE IF NOT EXISTS wip_runs (
    run TEXT PRIMARY KEY,
    result TEXT NOT NULL,
    at TEXT NOT NULL
) WITHOUT ROWID;
-- Which issues a pull request closes when merged ('Fixes #42').
CREATE TABLE IF NOT EXISTS fixes (
    pull INTEGER NOT NULL,
    issue INTEGER NOT NULL,
    PRIMARY KEY (pull, issue)
) WITHOUT ROWID;
";

pub(super) fn create_schema(conn: &Store) -> HostResult<()> {
    conn.batch(&conn.ddl(SCHEMA))?;
    migrate(conn)
}

/// Columns added after the first release, in order: databases made before lack them.
const MIGRATIONS: &[(&str, &str, &str)] = &[("comments", "edited_at", "TEXT")];

fn migrate(conn: &Store) -> HostResult<()> {
    for (table, column, ty) in MIGRATIONS {
        if !conn.has_column(table, column)? {
            conn.batch(&conn.ddl(&format!("ALTER TABLE {table} ADD COLUMN {column} {ty}")))?;
        }
    }
    Ok(())
}

pub(super) fn project_name(conn: &Store) -> HostResult<Option<String>> {
    conn.query_opt("SELECT name FROM project LIMIT 1", &[])?
        .map(|mut r| r.text(0))
        .transpose()
}

/// The mount's user must exist to author comments and reviews.
pub(super) fn ensure_user(conn: &Store, me: &Identity) -> HostResult<()> {
    conn.execute(
        "INSERT INTO users (name, role, full_name) VALUES (?1, ?2, '') ON CONFLICT DO NOTHING",
        args![&me.user, me.role.as_str()],
    )
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

/// How long a committed run's record is kept: a mount that restarts later than this
/// after a crash finds its cut-off runs `not_run` rather than settled.
const RUN_RECORDS_KEPT_DAYS: i64 = 30;

/// Keep `run` and its result in the call's transaction; now and then drop old records.
pub(super) fn record_run(conn: &Store, run: &str, result: &str) -> HostResult<()> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static WRITES: AtomicU32 = AtomicU32::new(0);
    let now_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    conn.execute(
        "INSERT INTO wip_runs (run, result, at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        args![run, result, iso(now_secs)],
    )?;
    if WRITES.fetch_add(1, Ordering::Relaxed).is_multiple_of(1000) {
        let cutoff = iso(now_secs - RUN_RECORDS_KEPT_DAYS * 86_400);
        conn.execute("DELETE FROM wip_runs WHERE at < ?1", args![cutoff])?;
    }
    Ok(())
}

/// The result a committed run left, if it did.
pub(super) fn run_record(conn: &Store, run: &str) -> HostResult<Option<String>> {
    conn.query_opt("SELECT result FROM wip_runs WHERE run = ?1", args![run])?
        .map(|mut r| r.text(0))
        .transpose()
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

fn item_row(mut r: Row) -> HostResult<Item> {
    let kind = r.text(1)?;
    Ok(Item {
        number: r.int(0)?,
        kind: Kind::from_db(&kind).unwrap_or(Kind::Issue),
        title: r.text(2)?,
        body: r.text(3)?,
        author: r.text(4)?,
        state: r.text(5)?,
        created_at: r.text(6)?,
        updated_at: r.text(7)?,
        closed_at: r.opt_text(8)?,
        closed_by: r.opt_text(9)?,
        close_reason: r.opt_text(10)?,
        head: r.opt_text(11)?,
        base: r.opt_text(12)?,
        mergeable: r.flag(13)?,
        conflicts: r.opt_text(14)?,
        merge_method: r.opt_text(15)?,
        diff: r.opt_text(16)?,
    })
}

pub(super) fn item(conn: &Store, number: i64) -> HostResult<Option<Item>> {
    conn.query_opt(
        &format!("SELECT {ITEM_COLUMNS} FROM items WHERE number = ?1"),
        args![number],
    )?
    .map(item_row)
    .transpose()
}

/// The item, which the caller knows exists (checked by `exists` in the same transaction).
pub(super) fn item_req(conn: &Store, number: i64) -> HostResult<Item> {
    item(conn, number)?.ok_or_else(|| {
        crate::host::HostError::NotFound(format!("no issue or pull request #{number}"))
    })
}

pub(super) fn item_kind(conn: &Store, number: i64) -> HostResult<Option<Kind>> {
    let kind = conn
        .query_opt("SELECT kind FROM items WHERE number = ?1", args![number])?
        .map(|mut r| r.text(0))
        .transpose()?;
    Ok(kind.as_deref().and_then(Kind::from_db))
}

/// Newest first, at most `limit`.
pub(super) fn items_newest(conn: &Store, kind: Kind, limit: usize) -> HostResult<Vec<Item>> {
    conn.query(
        &format!("SELECT {ITEM_COLUMNS} FROM items WHERE kind = ?1 ORDER BY number DESC LIMIT ?2"),
        args![kind.db(), limit_of(limit)],
    )?
    .into_iter()
    .map(item_row)
    .collect()
}

/// A listing's bound as a parameter.
pub(super) fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// (total, open, merged) of one kind.
pub(super) fn counts(conn: &Store, kind: Kind) -> HostResult<(i64, i64, i64)> {
    let r = conn.query_one(
        "SELECT count(*),
                coalesce(sum(CASE WHEN state = 'open' THEN 1 ELSE 0 END), 0),
                coalesce(sum(CASE WHEN state = 'merged' THEN 1 ELSE 0 END), 0)
         FROM items WHERE kind = ?1",
        args![kind.db()],
    )?;
    Ok((r.int(0)?, r.int(1)?, r.int(2)?))
}

/// An item's labels, in order (the statement is shared with its test).
pub(super) const LABELS_OF: &str = "SELECT label FROM item_labels WHERE number = ?1 ORDER BY label";

pub(super) fn labels_of(conn: &Store, number: i64) -> HostResult<Vec<String>> {
    conn.strings(LABELS_OF, args![number])
}

pub(super) fn assignees_of(conn: &Store, number: i64) -> HostResult<Vec<String>> {
    conn.strings(
        "SELECT \"user\" FROM assignees WHERE number = ?1 ORDER BY \"user\"",
        args![number],
    )
}

pub(super) fn requested_of(conn: &Store, number: i64) -> HostResult<Vec<String>> {
    conn.strings(
        "SELECT \"user\" FROM review_requests WHERE number = ?1 ORDER BY \"user\"",
        args![number],
    )
}

pub(super) fn fixes_of(conn: &Store, pull: i64) -> HostResult<Vec<i64>> {
    conn.ints(
        "SELECT issue FROM fixes WHERE pull = ?1 ORDER BY issue",
        args![pull],
    )
}

pub(super) fn fixed_by(conn: &Store, issue: i64) -> HostResult<Vec<i64>> {
    conn.ints(
        "SELECT pull FROM fixes WHERE issue = ?1 ORDER BY pull",
        args![issue],
    )
}

pub(super) fn comment_count(conn: &Store, number: i64) -> HostResult<i64> {
    conn.int(
        "SELECT count(*) FROM comments WHERE number = ?1",
        args![number],
    )
}

#[derive(Clone, Debug)]
pub(super) struct Comment {
    pub seq: i64,
    pub author: String,
    pub body: String,
    pub created_at: String,
}

fn comment_row(mut r: Row) -> HostResult<Comment> {
    Ok(Comment {
        seq: r.int(0)?,
        author: r.text(1)?,
        body: r.text(2)?,
        created_at: r.text(3)?,
    })
}

pub(super) fn comments(conn: &Store, number: i64, limit: usize) -> HostResult<Vec<Comment>> {
    conn.query(
        "SELECT seq, author, body, created_at FROM comments WHERE number = ?1
         ORDER BY seq LIMIT ?2",
        args![number, limit_of(limit)],
    )?
    .into_iter()
    .map(comment_row)
    .collect()
}

pub(super) fn comment(conn: &Store, number: i64, seq: i64) -> HostResult<Option<Comment>> {
    conn.query_opt(
        "SELECT seq, author, body, created_at FROM comments WHERE number = ?1 AND seq = ?2",
        args![number, seq],
    )?
    .map(comment_row)
    .transpose()
}

/// Add a comment; returns its number within the item (1, 2, …). Called inside a write
/// transaction, which no other call runs beside (see `store`), so `max + 1` cannot race.
pub(super) fn add_comment(
    conn: &Store,
    number: i64,
    author: &str,
    body: &str,
    at: &str,
) -> HostResult<i64> {
    let seq = conn.int(
        "SELECT coalesce(max(seq), 0) + 1 FROM comments WHERE number = ?1",
        args![number],
    )?;
    conn.execute(
        "INSERT INTO comments (number, seq, author, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        args![number, seq, author, body, at],
    )?;
    touch(conn, number, at)?;
    Ok(seq)
}

pub(super) fn touch(conn: &Store, number: i64, at: &str) -> HostResult<()> {
    conn.execute(
        "UPDATE items SET updated_at = ?2 WHERE number = ?1",
        args![number, at],
    )
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

fn check_row(mut r: Row) -> HostResult<Check> {
    Ok(Check {
        name: r.text(0)?,
        status: r.text(1)?,
        summary: r.text(2)?,
        log: r.text(3)?,
        retryable: r.flag(4)?,
        runs: r.int(5)?,
    })
}

pub(super) fn checks(conn: &Store, number: i64) -> HostResult<Vec<Check>> {
    conn.query(
        "SELECT name, status, summary, log, retryable, runs FROM checks WHERE number = ?1
         ORDER BY name",
        args![number],
    )?
    .into_iter()
    .map(check_row)
    .collect()
}

pub(super) fn check(conn: &Store, number: i64, name: &str) -> HostResult<Option<Check>> {
    conn.query_opt(
        "SELECT name, status, summary, log, retryable, runs FROM checks
         WHERE number = ?1 AND name = ?2",
        args![number, name],
    )?
    .map(check_row)
    .transpose()
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

fn review_row(mut r: Row) -> HostResult<Review> {
    Ok(Review {
        seq: r.int(0)?,
        author: r.text(1)?,
        state: r.text(2)?,
        body: r.text(3)?,
        created_at: r.text(4)?,
    })
}

pub(super) fn reviews(conn: &Store, number: i64, limit: usize) -> HostResult<Vec<Review>> {
    conn.query(
        "SELECT seq, author, state, body, created_at FROM reviews WHERE number = ?1
         ORDER BY seq LIMIT ?2",
        args![number, limit_of(limit)],
    )?
    .into_iter()
    .map(review_row)
    .collect()
}

pub(super) fn review(conn: &Store, number: i64, seq: i64) -> HostResult<Option<Review>> {
    conn.query_opt(
        "SELECT seq, author, state, body, created_at FROM reviews
         WHERE number = ?1 AND seq = ?2",
        args![number, seq],
    )?
    .map(review_row)
    .transpose()
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

pub(super) fn review_state(conn: &Store, pull: &Item) -> HostResult<ReviewState> {
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    let rows = conn.query(
        "SELECT author, state FROM reviews WHERE number = ?1 AND state != 'commented'
         ORDER BY seq",
        args![pull.number],
    )?;
    for mut row in rows {
        let (author, state) = (row.text(0)?, row.text(1)?);
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

fn user_row(mut r: Row) -> HostResult<User> {
    Ok(User {
        name: r.text(0)?,
        role: r.text(1)?,
        full_name: r.text(2)?,
    })
}

pub(super) fn user(conn: &Store, name: &str) -> HostResult<Option<User>> {
    conn.query_opt(
        "SELECT name, role, full_name FROM users WHERE name = ?1",
        args![name],
    )?
    .map(user_row)
    .transpose()
}

pub(super) fn users(conn: &Store, limit: usize) -> HostResult<Vec<User>> {
    conn.query(
        "SELECT name, role, full_name FROM users ORDER BY name LIMIT ?1",
        args![limit_of(limit)],
    )?
    .into_iter()
    .map(user_row)
    .collect()
}

pub(super) fn user_names(conn: &Store) -> HostResult<Vec<String>> {
    conn.strings("SELECT name FROM users ORDER BY name", &[])
}

#[derive(Clone, Debug)]
pub(super) struct Label {
    pub name: String,
    pub description: String,
}

fn label_row(mut r: Row) -> HostResult<Label> {
    Ok(Label {
        name: r.text(0)?,
        description: r.text(1)?,
    })
}

pub(super) fn label(conn: &Store, name: &str) -> HostResult<Option<Label>> {
    conn.query_opt(
        "SELECT name, description FROM labels WHERE name = ?1",
        args![name],
    )?
    .map(label_row)
    .transpose()
}

pub(super) fn labels(conn: &Store, limit: usize) -> HostResult<Vec<Label>> {
    conn.query(
        "SELECT name, description FROM labels ORDER BY name LIMIT ?1",
        args![limit_of(limit)],
    )?
    .into_iter()
    .map(label_row)
    .collect()
}

pub(super) fn label_names(conn: &Store) -> HostResult<Vec<String>> {
    conn.strings("SELECT name FROM labels ORDER BY name", &[])
}

/// Open issues carrying the label (pull requests not counted).
pub(super) fn label_open_issues(conn: &Store, label: &str) -> HostResult<i64> {
    conn.int(
        "SELECT count(*) FROM item_labels l JOIN items i ON i.number = l.number
         WHERE l.label = ?1 AND i.kind = 'issue' AND i.state = 'open'",
        args![label],
    )
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
    conn: &Store,
    label: &str,
    state: &str,
    limit: usize,
) -> HostResult<(Vec<(Kind, i64)>, usize)> {
    let rows = conn.query(
        "SELECT i.kind, i.number, i.state FROM item_labels l JOIN items i ON i.number = l.number
         WHERE l.label = ?1 ORDER BY i.number DESC",
        args![label],
    )?;
    collect_filtered(rows, state, limit)
}

/// Items a user authored or is assigned to, newest first, at most `limit`, with the total.
pub(super) fn items_of_user(
    conn: &Store,
    user: &str,
    state: &str,
    limit: usize,
) -> HostResult<(Vec<(Kind, i64)>, usize)> {
    let rows = conn.query(
        "SELECT kind, number, state FROM items WHERE author = ?1
         UNION
         SELECT i.kind, i.number, i.state FROM assignees a JOIN items i ON i.number = a.number
         WHERE a.\"user\" = ?1
         ORDER BY 2 DESC",
        args![user],
    )?;
    collect_filtered(rows, state, limit)
}

fn collect_filtered(
    rows: Vec<Row>,
    state: &str,
    limit: usize,
) -> HostResult<(Vec<(Kind, i64)>, usize)> {
    let mut out = Vec::new();
    let mut total = 0;
    for mut row in rows {
        let (kind, number, st) = (row.text(0)?, row.int(1)?, row.text(2)?);
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
pub(super) fn exists(conn: &Store, node: &Node) -> HostResult<bool> {
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
