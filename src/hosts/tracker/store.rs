//! The tracker's database, on either engine: an SQLite file (the embedded default) or
//! PostgreSQL (when `database` is a `postgresql://…` URL, so mounts on many machines share
//! one tracker).
//!
//! Every query of the tracker is written once, in SQL both engines read, with `?N`
//! parameters (rewritten to `$N` for PostgreSQL), and runs through `Store`: a thin enum
//! over a rusqlite connection and a pooled `postgres` client, taking engine-neutral
//! parameters (`P`) and returning rows read by index (`Row`). A thin layer rather than an
//! ORM or a second copy of the queries: the tracker's SQL is small and plain, so the only
//! differences are the parameter marks, the DDL's types (`BIGINT`, byte-order text) and
//! how a column's presence is asked, and those live here alone.
//!
//! On SQLite a call's transaction serialises with every other call on the file
//! (`BEGIN IMMEDIATE`). On PostgreSQL a call first locks the rows it acts on (`Lock`):
//! its issue or pull request (`SELECT … FOR UPDATE`; a pull request with the issues its
//! merge closes), or the project's row for what is numbered among items (a new issue). So
//! the guard it checks is the state it changes, across mounts; `max + 1` numbering of an
//! item's comments and reviews, and of items, happens under the row that owns the
//! numbers; and calls on different issues run side by side. Row locks need no retry
//! loop, where `SERIALIZABLE` would fail one of two racing merges with 40001 and have to
//! run it again. The first run's schema and seed take an advisory lock of the whole
//! tracker (`TRACKER_LOCK`), so mounts starting together seed once.
//!
//! A COMMIT whose answer is lost (a restart, a cut) may or may not have committed: the
//! call's run record (`wip_runs`, written in the transaction) tells, read from a new
//! connection once the old session is gone (`committed`), so the caller hears the truth.

use std::cell::RefCell;
use std::sync::Arc;

use postgres::types::{ToSql, Type};
use rusqlite::types::{ToSqlOutput, ValueRef};

use super::DB;
use crate::host::{HostError, HostResult, OrFailed};
use crate::state::pg::{PgClient, SharedDb};

/// The advisory lock the first run's schema and seeding hold until they commit. Distinct
/// from the shared state's locks, so a tracker and the state may share a database.
const TRACKER_LOCK: i64 = 0x7769_705f_7472_6b72;

/// How long a call waits for another mount's call before it fails (SQLite's busy timeout).
const LOCK_WAIT: &str = "10s";

/// How long a call whose COMMIT went unanswered waits to learn whether it committed (its
/// old session ends within the server's `idle_in_transaction_session_timeout`).
const COMMIT_UNKNOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// What a write transaction locks first, on PostgreSQL (SQLite locks the whole file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Lock {
    /// The whole tracker: every other writer that asks for it waits (the schema and seed).
    Whole,
    /// An item's row (an issue or pull request): what a call on it or below it changes.
    Item(i64),
    /// A pull request's row and those of the issues it fixes (a merge closes them).
    PullAndFixes(i64),
    /// The project's row: what is numbered among all items (a new issue).
    Project,
}

impl Lock {
    /// The statements that take the lock (numbers only, so no parameters are needed).
    fn sql(&self) -> String {
        match self {
            Lock::Whole => format!("SELECT pg_advisory_xact_lock({TRACKER_LOCK})"),
            Lock::Item(n) => format!("SELECT 1 FROM items WHERE number = {n} FOR UPDATE"),
            Lock::PullAndFixes(n) => format!(
                "SELECT 1 FROM items WHERE number = {n} FOR UPDATE; \
                 SELECT 1 FROM items WHERE number IN (SELECT issue FROM fixes WHERE pull = {n}) \
                 ORDER BY number FOR UPDATE"
            ),
            Lock::Project => "SELECT 1 FROM project FOR UPDATE".to_string(),
        }
    }
}

/// A query parameter, on either engine.
#[derive(Clone, Copy, Debug)]
pub(super) enum P<'a> {
    Int(i64),
    Text(&'a str),
    /// A NULL text (the tracker's nullable columns are all text).
    Null,
}

/// What can be a parameter: integers, flags, text, optional text, and references to them.
pub(super) trait Arg {
    fn arg(&self) -> P<'_>;
}

impl Arg for i64 {
    fn arg(&self) -> P<'_> {
        P::Int(*self)
    }
}

impl Arg for bool {
    fn arg(&self) -> P<'_> {
        P::Int(i64::from(*self))
    }
}

impl Arg for str {
    fn arg(&self) -> P<'_> {
        P::Text(self)
    }
}

impl Arg for String {
    fn arg(&self) -> P<'_> {
        P::Text(self)
    }
}

impl<T: Arg + ?Sized> Arg for Option<&T> {
    fn arg(&self) -> P<'_> {
        self.map_or(P::Null, |v| v.arg())
    }
}

impl Arg for Option<String> {
    fn arg(&self) -> P<'_> {
        self.as_deref().map_or(P::Null, P::Text)
    }
}

impl<T: Arg + ?Sized> Arg for &T {
    fn arg(&self) -> P<'_> {
        (**self).arg()
    }
}

/// `args![a, b, …]`: the parameters `?1, ?2, …` of a statement.
macro_rules! args {
    ($($e:expr),* $(,)?) => {
        &[$($crate::hosts::tracker::store::Arg::arg(&$e)),*][..]
    };
}
pub(super) use args;

impl rusqlite::ToSql for P<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            P::Int(v) => ValueRef::Integer(*v),
            P::Text(s) => ValueRef::Text(s.as_bytes()),
            P::Null => ValueRef::Null,
        }))
    }
}

/// A column's value as the tracker reads it.
#[derive(Clone, Debug, PartialEq)]
enum V {
    Null,
    Int(i64),
    Text(String),
}

/// One result row, read by column index.
#[derive(Debug)]
pub(super) struct Row(Vec<V>);

fn column_error(i: usize, want: &str, got: &V) -> HostError {
    HostError::Backend(format!(
        "{DB}: column {i} of a result is {got:?}, where {want} was expected"
    ))
}

impl Row {
    pub fn int(&self, i: usize) -> HostResult<i64> {
        match self.0.get(i) {
            Some(V::Int(v)) => Ok(*v),
            other => Err(column_error(i, "an integer", other.unwrap_or(&V::Null))),
        }
    }

    /// An integer column used as a flag (SQLite has no booleans; neither does the schema).
    pub fn flag(&self, i: usize) -> HostResult<bool> {
        self.int(i).map(|v| v != 0)
    }

    pub fn text(&mut self, i: usize) -> HostResult<String> {
        match self.0.get_mut(i) {
            Some(V::Text(s)) => Ok(std::mem::take(s)),
            other => Err(column_error(i, "text", other.map_or(&V::Null, |v| &*v))),
        }
    }

    pub fn opt_text(&mut self, i: usize) -> HostResult<Option<String>> {
        match self.0.get_mut(i) {
            Some(V::Null) => Ok(None),
            Some(V::Text(s)) => Ok(Some(std::mem::take(s))),
            other => Err(column_error(
                i,
                "text or null",
                other.map_or(&V::Null, |v| &*v),
            )),
        }
    }
}

/// Which engine a store is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Engine {
    Sqlite,
    Postgres,
}

/// A connection to the tracker's database. `Pg` holds a pooled client for one read or one
/// call; `RefCell` because the host's code passes `&Store` down (the op table's context)
/// while the `postgres` client needs `&mut` per statement, and no statement runs inside
/// another (rows are read out whole).
pub(super) enum Store {
    Lite(rusqlite::Connection),
    Pg {
        /// Boxed: a pooled client is several times the size of a rusqlite connection.
        client: RefCell<Box<PgClient>>,
        db: Arc<SharedDb>,
    },
}

impl Store {
    /// A connection for a call (its write transaction).
    pub fn pg(db: &Arc<SharedDb>) -> HostResult<Store> {
        let client = db.client().map_err(|e| HostError::Backend(e.to_string()))?;
        Ok(Store::Pg {
            client: RefCell::new(Box::new(client)),
            db: Arc::clone(db),
        })
    }

    /// A connection for a read: from the read pool, which calls never hold.
    pub fn pg_read(db: &Arc<SharedDb>) -> HostResult<Store> {
        let client = db.reader().map_err(|e| HostError::Backend(e.to_string()))?;
        Ok(Store::Pg {
            client: RefCell::new(Box::new(client)),
            db: Arc::clone(db),
        })
    }

    /// Whether the connection is gone (a PostgreSQL one that was cut).
    pub fn is_closed(&self) -> bool {
        match self {
            Store::Lite(_) => false,
            Store::Pg { client, .. } => client.borrow().is_closed(),
        }
    }

    pub fn engine(&self) -> Engine {
        match self {
            Store::Lite(_) => Engine::Sqlite,
            Store::Pg { .. } => Engine::Postgres,
        }
    }

    fn pg_error(db: &SharedDb, e: &postgres::Error) -> HostError {
        HostError::Backend(db.error("a tracker query", e).to_string())
    }

    /// Every row of a query.
    pub fn query(&self, sql: &str, args: &[P<'_>]) -> HostResult<Vec<Row>> {
        self.rows(sql, args, usize::MAX)
    }

    /// The first row of a query, if any.
    pub fn query_opt(&self, sql: &str, args: &[P<'_>]) -> HostResult<Option<Row>> {
        Ok(self.rows(sql, args, 1)?.pop())
    }

    /// The first row of a query that always has one (an aggregate).
    pub fn query_one(&self, sql: &str, args: &[P<'_>]) -> HostResult<Row> {
        self.query_opt(sql, args)?
            .ok_or_else(|| HostError::Backend(format!("{DB}: a query returned no row: {sql}")))
    }

    /// The integer a query that always returns one row answers (`count(*)`, `max + 1`).
    pub fn int(&self, sql: &str, args: &[P<'_>]) -> HostResult<i64> {
        self.query_one(sql, args)?.int(0)
    }

    /// The first column of every row, as text.
    pub fn strings(&self, sql: &str, args: &[P<'_>]) -> HostResult<Vec<String>> {
        self.query(sql, args)?
            .into_iter()
            .map(|mut r| r.text(0))
            .collect()
    }

    /// The first column of every row, as integers.
    pub fn ints(&self, sql: &str, args: &[P<'_>]) -> HostResult<Vec<i64>> {
        self.query(sql, args)?.iter().map(|r| r.int(0)).collect()
    }

    /// A statement that returns no rows.
    pub fn execute(&self, sql: &str, args: &[P<'_>]) -> HostResult<()> {
        match self {
            Store::Lite(conn) => {
                conn.prepare_cached(sql)
                    .and_then(|mut st| st.execute(rusqlite::params_from_iter(args.iter())))
                    .or_failed(DB)?;
                Ok(())
            }
            Store::Pg { .. } => self.rows(sql, args, 0).map(drop),
        }
    }

    fn rows(&self, sql: &str, args: &[P<'_>], limit: usize) -> HostResult<Vec<Row>> {
        match self {
            Store::Lite(conn) => {
                let mut st = conn.prepare_cached(sql).or_failed(DB)?;
                let n = st.column_count();
                let mut rows = st
                    .query(rusqlite::params_from_iter(args.iter()))
                    .or_failed(DB)?;
                let mut out = Vec::new();
                while out.len() < limit {
                    let Some(r) = rows.next().or_failed(DB)? else {
                        break;
                    };
                    let mut row = Vec::with_capacity(n);
                    for i in 0..n {
                        row.push(match r.get_ref(i).or_failed(DB)? {
                            ValueRef::Null => V::Null,
                            ValueRef::Integer(v) => V::Int(v),
                            // The schema has no real columns; an expression might.
                            ValueRef::Real(f) => V::Int(f as i64),
                            ValueRef::Text(t) | ValueRef::Blob(t) => {
                                V::Text(String::from_utf8_lossy(t).into_owned())
                            }
                        });
                    }
                    out.push(Row(row));
                }
                Ok(out)
            }
            Store::Pg { client, db } => {
                static NO_TEXT: Option<&str> = None;
                let params: Vec<(&(dyn ToSql + Sync), Type)> = args
                    .iter()
                    .map(|a| match a {
                        P::Int(v) => (v as &(dyn ToSql + Sync), Type::INT8),
                        P::Text(s) => (s as &(dyn ToSql + Sync), Type::TEXT),
                        P::Null => (&NO_TEXT as &(dyn ToSql + Sync), Type::TEXT),
                    })
                    .collect();
                // One round trip: the statement is parsed, bound and run in one message.
                let rows = client
                    .borrow_mut()
                    .query_typed(&pg_sql(sql), &params)
                    .map_err(|e| Self::pg_error(db, &e))?;
                rows.iter()
                    .take(limit)
                    .map(|r| pg_row(r).map_err(|e| Self::pg_error(db, &e)))
                    .collect()
            }
        }
    }

    /// Statements without parameters, many at once (the schema).
    pub fn batch(&self, sql: &str) -> HostResult<()> {
        match self {
            Store::Lite(conn) => conn.execute_batch(sql).or_failed(DB),
            Store::Pg { client, db } => client
                .borrow_mut()
                .batch_execute(sql)
                .map_err(|e| Self::pg_error(db, &e)),
        }
    }

    /// DDL written for SQLite, as this engine reads it: on PostgreSQL integers are 64-bit,
    /// text sorts by bytes (as SQLite's does, whatever the database's locale), and
    /// `WITHOUT ROWID` (a storage choice of SQLite's) goes.
    pub fn ddl(&self, sql: &str) -> String {
        match self.engine() {
            Engine::Sqlite => sql.to_string(),
            Engine::Postgres => sql
                .replace("INTEGER", "BIGINT")
                .replace(" TEXT", " TEXT COLLATE \"C\"")
                .replace(" WITHOUT ROWID", ""),
        }
    }

    /// Whether `table` has `column` (how a migration knows it is due).
    pub fn has_column(&self, table: &str, column: &str) -> HostResult<bool> {
        let sql = match self.engine() {
            Engine::Sqlite => "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
            Engine::Postgres => {
                "SELECT count(*) FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = ?1 AND column_name = ?2"
            }
        };
        Ok(self.int(sql, args![table, column])? > 0)
    }

    /// Run `f` in a write transaction that first takes `lock` (see the module's doc),
    /// committed if `f` succeeds and rolled back otherwise, also when `f` panics. `run`
    /// is the run record `f` writes, if any: when the COMMIT's answer is lost, it tells
    /// whether the transaction committed.
    pub fn write<T>(
        &self,
        lock: &Lock,
        run: Option<&str>,
        f: impl FnOnce(&Store) -> HostResult<T>,
    ) -> HostResult<T> {
        let mut backend = None;
        match self {
            Store::Lite(_) => self.batch("BEGIN IMMEDIATE")?,
            Store::Pg { client, db } => {
                // One round trip: the transaction, its lock wait, its lock, and which
                // server process holds it (to know when that session is gone).
                let begun = client.borrow_mut().simple_query(&format!(
                    "BEGIN; SET LOCAL lock_timeout = '{LOCK_WAIT}'; {}; SELECT pg_backend_pid()",
                    lock.sql()
                ));
                match begun {
                    Ok(messages) => {
                        backend = messages.iter().rev().find_map(|m| match m {
                            postgres::SimpleQueryMessage::Row(r) => {
                                r.get(0).and_then(|p| p.parse::<i32>().ok())
                            }
                            _ => None,
                        })
                    }
                    Err(e) => {
                        // The lock timed out inside the transaction: end it before the
                        // connection goes back to the pool.
                        let _ = self.batch("ROLLBACK");
                        return Err(Self::pg_error(db, &e));
                    }
                }
            }
        }
        let open = Open(self);
        let value = f(self)?;
        std::mem::forget(open);
        if let Err(e) = self.batch("COMMIT") {
            // SQLite keeps the transaction open when COMMIT fails (busy); end it.
            let _ = self.batch("ROLLBACK");
            if let (Store::Pg { db, .. }, Some(run), Some(backend)) = (self, run, backend) {
                return match committed(db, backend, run) {
                    Some(true) => {
                        tracing::warn!("{DB}: the COMMIT of run {run} went unanswered, and it did commit");
                        Ok(value)
                    }
                    Some(false) => Err(HostError::Backend(format!(
                        "{e}; the change was not made (the tracker has no record of it)"
                    ))),
                    None => Err(HostError::Backend(format!(
                        "{e}; whether the change was made is not known: look at the entry before calling again"
                    ))),
                };
            }
            return Err(e);
        }
        Ok(value)
    }

    /// Run `f`, a read of several statements, on one snapshot. On SQLite every statement
    /// outside a transaction takes and drops the file's shared lock (two `fcntl`s and a
    /// `fstat`), the most of a listing's cost; a deferred transaction takes it once. On
    /// PostgreSQL the statements run as they are (a transaction would add round trips).
    pub fn snapshot<T>(&self, f: impl FnOnce(&Store) -> HostResult<T>) -> HostResult<T> {
        let Store::Lite(conn) = self else {
            return f(self);
        };
        if !conn.is_autocommit() {
            // Already inside a call's transaction.
            return f(self);
        }
        conn.prepare_cached("BEGIN")
            .and_then(|mut st| st.execute([]))
            .or_failed(DB)?;
        let open = Open(self);
        let value = f(self);
        std::mem::forget(open);
        // A read transaction has nothing to commit: ending it cannot lose anything.
        conn.prepare_cached("COMMIT")
            .and_then(|mut st| st.execute([]))
            .or_failed(DB)?;
        value
    }
}

/// Whether the transaction of the server session `backend`, whose COMMIT went
/// unanswered, committed: once that session is no longer inside a transaction (the server
/// ends an idle one within seconds, a restart ends them all), its run record `run` is
/// there or not. `None` when the database did not tell within `COMMIT_UNKNOWN_WAIT`.
pub(super) fn committed(db: &Arc<SharedDb>, backend: i32, run: &str) -> Option<bool> {
    let deadline = std::time::Instant::now() + COMMIT_UNKNOWN_WAIT;
    while std::time::Instant::now() < deadline {
        let answer = (|| -> HostResult<Option<bool>> {
            let store = Store::pg_read(db)?;
            let open = store.int(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ?1
                 AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')",
                args![i64::from(backend)],
            )?;
            if open > 0 {
                return Ok(None);
            }
            Ok(Some(super::db::run_record(&store, run)?.is_some()))
        })();
        match answer {
            Ok(Some(known)) => return Some(known),
            Ok(None) => {}
            Err(e) => tracing::debug!("{DB}: cannot tell yet whether run {run} committed: {e}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    None
}

/// Rolls back a write transaction that did not reach its commit.
struct Open<'a>(&'a Store);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.batch("ROLLBACK") {
            tracing::warn!("{e}");
        }
    }
}

/// `?N` parameters as PostgreSQL writes them (`$N`); string literals are left alone.
fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push('$');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

fn pg_row(r: &postgres::Row) -> Result<Row, postgres::Error> {
    let mut row = Vec::with_capacity(r.len());
    for (i, col) in r.columns().iter().enumerate() {
        let t = col.type_();
        let v = if *t == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?.map_or(V::Null, V::Int)
        } else if *t == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?
                .map_or(V::Null, |v| V::Int(v.into()))
        } else if *t == Type::INT2 {
            r.try_get::<_, Option<i16>>(i)?
                .map_or(V::Null, |v| V::Int(v.into()))
        } else if *t == Type::BOOL {
            r.try_get::<_, Option<bool>>(i)?
                .map_or(V::Null, |v| V::Int(v.into()))
        } else {
            // Text, and anything else the server can send as text; a type `String` cannot
            // take is an error with the column's type in its words.
            r.try_get::<_, Option<String>>(i)?.map_or(V::Null, V::Text)
        };
        row.push(v);
    }
    Ok(Row(row))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_rewritten_outside_literals_only() {
        assert_eq!(
            pg_sql("SELECT a FROM t WHERE x = ?1 AND y = '?2' AND z = ?12"),
            "SELECT a FROM t WHERE x = $1 AND y = '?2' AND z = $12"
        );
    }
}
