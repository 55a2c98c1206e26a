//! Callers' SQL: the read-only connection's authorizer, one-statement preparation, bound
//! parameters, and the query results kept as `queries/ID` entries.
//!
//! Read-only is SQLite's business, never the text's: `reader` is opened read-only with
//! `query_only`, its authorizer denies every action but reading, and a statement SQLite
//! itself does not call read-only is refused too. A query result is never held: it is kept
//! as its SQL and parameters, and every page re-runs the statement and steps past the rows
//! before it (what `OFFSET` would do), so memory stays bounded by one page.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Batch, Connection, ErrorCode, OptionalExtension, Statement};
use serde_json::Value;

use super::schema::{self, Key, Table};
use super::view::{line, plural, truncate};
use super::{db_err, error_code, keys, sqlite_words, user_err, DbHost, Node, Reader};
use crate::host::{CallOutcome, Child, EntryInfo, HostError, HostResult};

/// Pragmas that only read, whatever their argument.
const READ_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
    "collation_list",
    "function_list",
    "module_list",
    "pragma_list",
    "database_list",
    "compile_options",
];

/// Pragmas that read without a value and write with one.
const VALUE_PRAGMAS: &[&str] = &[
    "user_version",
    "schema_version",
    "application_id",
    "page_count",
    "page_size",
    "freelist_count",
    "encoding",
    "foreign_keys",
    "journal_mode",
    "data_version",
    "auto_vacuum",
];

/// Rows a `query` result shows in its text.
const PREVIEW: usize = 20;

/// SQL functions that load code, refused like every other forbidden SQL.
const LOADING_FUNCTIONS: &[&str] = &["load_extension", "fts3_tokenizer"];

fn describe_action(action: &AuthAction<'_>) -> String {
    match action {
        AuthAction::Insert { table_name } => format!("INSERT into {table_name}"),
        AuthAction::Update { table_name, .. } => format!("UPDATE of {table_name}"),
        AuthAction::Delete { table_name } => format!("DELETE from {table_name}"),
        AuthAction::DropTable { table_name } | AuthAction::DropTempTable { table_name } => {
            format!("DROP TABLE {table_name}")
        }
        AuthAction::CreateTable { table_name } | AuthAction::CreateTempTable { table_name } => {
            format!("CREATE TABLE {table_name}")
        }
        AuthAction::Attach { filename } => format!("ATTACH {filename:?}"),
        AuthAction::Detach { database_name } => format!("DETACH {database_name}"),
        AuthAction::Pragma {
            pragma_name,
            pragma_value: Some(v),
        } => format!("PRAGMA {pragma_name} = {v}"),
        AuthAction::Pragma { pragma_name, .. } => format!("PRAGMA {pragma_name}"),
        AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => {
            "a transaction statement".to_string()
        }
        AuthAction::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        AuthAction::Function { function_name } => format!("the function {function_name}()"),
        other => format!("{other:?}"),
    }
}

/// The reader's authorizer: reading is allowed, everything else denied (and remembered in
/// `denied` for the error's words).
pub(super) fn install_authorizer(
    conn: &mut Connection,
    denied: Arc<Mutex<Option<String>>>,
) -> rusqlite::Result<()> {
    conn.authorizer(Some(move |ctx: AuthContext<'_>| {
        let allowed = match &ctx.action {
            AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => true,
            // Loading a shared library runs its code in the daemon.
            AuthAction::Function { function_name } => !LOADING_FUNCTIONS
                .iter()
                .any(|f| function_name.eq_ignore_ascii_case(f)),
            AuthAction::Pragma {
                pragma_name,
                pragma_value,
            } => {
                let name = pragma_name.to_ascii_lowercase();
                READ_PRAGMAS.contains(&name.as_str())
                    || (pragma_value.is_none() && VALUE_PRAGMAS.contains(&name.as_str()))
            }
            _ => false,
        };
        if allowed {
            Authorization::Allow
        } else {
            // The first refusal is the statement's own action (DROP TABLE before the
            // DELETE from sqlite_master it implies).
            let mut first = crate::hosts::lock(&denied);
            if first.is_none() {
                *first = Some(describe_action(&ctx.action));
            }
            Authorization::Deny
        }
    }))
}

const STORE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS queries (
    id INTEGER PRIMARY KEY,
    sql TEXT NOT NULL,
    params TEXT NOT NULL,
    created TEXT NOT NULL,
    row_count INTEGER NOT NULL,
    columns TEXT NOT NULL
);
";

pub(super) fn open_store(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(super::BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(STORE_SCHEMA)?;
    Ok(conn)
}

/// A query as kept in the store.
#[derive(Clone, Debug)]
pub(super) struct Stored {
    pub id: i64,
    pub sql: String,
    pub params: Vec<Value>,
    pub created: String,
    /// Rows when it ran.
    pub rows: u64,
    pub columns: Vec<String>,
}

/// One page of a query's rows, and the table whose rows they are when the result carries
/// that table's whole key (the indexes of the key's columns in the result).
pub(super) struct Page {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<SqlValue>>,
    pub key: Option<(Table, Vec<usize>)>,
}

fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (y, m, d) = crate::calendar::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A JSON argument as an SQL value (bound, never interpolated).
pub(super) fn sql_value(v: &Value, what: &str) -> HostResult<SqlValue> {
    Ok(match v {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => SqlValue::Integer(i),
            (None, Some(f)) => SqlValue::Real(f),
            _ => {
                return Err(HostError::InvalidArgs(format!(
                    "{what}: number {n} is out of range"
                )))
            }
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Array(_) | Value::Object(_) => {
            return Err(HostError::InvalidArgs(format!(
                "{what} must be a string, number, boolean or null (write JSON as a string)"
            )))
        }
    })
}

/// Bind `params` to `?`/`?N` in order, checking their number.
pub(super) fn bind(stmt: &mut Statement<'_>, params: &[Value]) -> HostResult<()> {
    let expected = stmt.parameter_count();
    if params.len() != expected {
        return Err(HostError::InvalidArgs(format!(
            "the SQL has {} but {} given",
            plural(expected as u64, "parameter", "parameters"),
            params.len()
        )));
    }
    for (i, p) in params.iter().enumerate() {
        let v = sql_value(p, &format!("params[{i}]"))?;
        stmt.raw_bind_parameter(i + 1, v).map_err(user_err)?;
    }
    Ok(())
}

fn row_values(r: &rusqlite::Row<'_>, n: usize) -> HostResult<Vec<SqlValue>> {
    (0..n)
        .map(|i| r.get::<_, SqlValue>(i))
        .collect::<Result<Vec<_>, _>>()
        .map_err(db_err)
}

/// A value in a tab-separated line: tabs, newlines and backslashes escaped.
fn tsv(v: &SqlValue) -> String {
    match v {
        SqlValue::Blob(b) => format!("<blob {} bytes>", b.len()),
        other => super::view::full(other)
            .replace('\\', "\\\\")
            .replace('\t', "\\t")
            .replace('\n', "\\n")
            .replace('\r', "\\r"),
    }
}

impl DbHost {
    /// SQLite's words for a failure on `reader`, with what the authorizer refused.
    pub(super) fn reader_err(&self, reader: &Reader, e: rusqlite::Error) -> HostError {
        if error_code(&e) == Some(ErrorCode::OperationInterrupted) {
            return HostError::TimedOut(format!(
                "the statement ran longer than {:.1} s and was interrupted",
                self.budget().as_secs_f64()
            ));
        }
        // A denied function is reported as a plain error whose words say so.
        let denied_function = sqlite_words(&e).contains("not authorized to use function");
        if error_code(&e) == Some(ErrorCode::AuthorizationForStatementDenied) || denied_function {
            if let Some(what) = reader.denied() {
                return HostError::Forbidden(format!(
                    "{}: {what} is not allowed (queries run on a read-only connection that only reads)",
                    sqlite_words(&e)
                ));
            }
        }
        user_err(e)
    }

    /// Prepare exactly one statement that SQLite says only reads.
    pub(super) fn prepare_user<'c>(
        &self,
        conn: &'c Reader,
        sql: &str,
    ) -> HostResult<Statement<'c>> {
        let mut batch = Batch::new(conn, sql);
        let Some(stmt) = batch.next().map_err(|e| self.reader_err(conn, e))? else {
            return Err(HostError::InvalidArgs(
                "the SQL holds no statement".to_string(),
            ));
        };
        match batch.next() {
            Ok(None) => {}
            Ok(Some(_)) => {
                return Err(HostError::Forbidden(
                    "one statement per query: the SQL goes on after the first statement"
                        .to_string(),
                ))
            }
            Err(e) => {
                return Err(HostError::Forbidden(format!(
                    "one statement per query: the SQL goes on after the first statement ({})",
                    sqlite_words(&e)
                )))
            }
        }
        if !stmt.readonly() {
            return Err(HostError::Forbidden(
                "the statement would write (queries run on a read-only connection)".to_string(),
            ));
        }
        Ok(stmt)
    }

    pub(super) fn stored(&self, id: i64) -> HostResult<Option<Stored>> {
        let store = self.store();
        let row = store
            .query_row(
                "SELECT sql, params, created, row_count, columns FROM queries WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()
            .map_err(db_err)?;
        Ok(row.map(|(sql, params, created, rows, columns)| Stored {
            id,
            sql,
            params: serde_json::from_str(&params).unwrap_or_default(),
            created,
            rows: rows.max(0) as u64,
            columns: serde_json::from_str(&columns).unwrap_or_default(),
        }))
    }

    pub(super) fn stored_or_missing(&self, id: i64) -> HostResult<Stored> {
        self.stored(id)?
            .ok_or_else(|| HostError::NotFound(format!("no query {id}")))
    }

    /// Newest queries first: (id, sql).
    pub(super) fn recent_queries(&self, limit: usize) -> HostResult<Vec<(i64, String)>> {
        let store = self.store();
        let mut stmt = store
            .prepare("SELECT id, sql FROM queries ORDER BY id DESC LIMIT ?1")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(db_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
    }

    /// Run `query`: count the rows in one pass, keep the first few for the text, store it.
    pub(super) fn run_query(&self, sql: &str, params: &[Value]) -> HostResult<CallOutcome> {
        let (columns, preview, count) = {
            let conn = self.reader()?;
            let mut stmt = self.prepare_user(&conn, sql)?;
            bind(&mut stmt, params)?;
            let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
            let mut preview = Vec::new();
            let mut count = 0u64;
            let mut rows = stmt.raw_query();
            while let Some(r) = rows.next().map_err(|e| self.reader_err(&conn, e))? {
                count += 1;
                if preview.len() < PREVIEW {
                    preview.push(row_values(r, columns.len())?);
                }
            }
            (columns, preview, count)
        };
        let id = {
            let store = self.store();
            store
                .execute(
                    "INSERT INTO queries (sql, params, created, row_count, columns) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        sql,
                        Value::Array(params.to_vec()).to_string(),
                        now_utc(),
                        count as i64,
                        serde_json::to_string(&columns).unwrap_or_default()
                    ],
                )
                .map_err(db_err)?;
            store.last_insert_rowid()
        };
        let mut text = columns.join("\t");
        text.push('\n');
        for row in &preview {
            text.push_str(&row.iter().map(tsv).collect::<Vec<_>>().join("\t"));
            text.push('\n');
        }
        // Host-relative: the runtime prints the entry's absolute path right after, and a
        // result's lines hold no other path (tools pick paths out of results).
        let rows_path = Node::QueryRows(id).path().join("/");
        if count as usize > preview.len() {
            text.push_str(&format!("({} shown of {count})\n", preview.len()));
        }
        text.push_str(&format!(
            "{}; all at {rows_path} of {}",
            plural(count, "row", "rows"),
            self.paths.mount()
        ));
        Ok(CallOutcome::text(text).discovered(Node::Query(id).path()))
    }

    /// Which table's rows the result's rows are: the first table (of `main`) whose whole key
    /// the result carries, by SQLite's column origins.
    fn key_map(
        &self,
        conn: &Connection,
        stmt: &Statement<'_>,
    ) -> HostResult<Option<(Table, Vec<usize>)>> {
        let mut origins: Vec<(String, Vec<(String, usize)>)> = Vec::new();
        for i in 0..stmt.column_count() {
            let Ok(Some((db, table, origin, ..))) = stmt.column_metadata(i) else {
                continue;
            };
            let (Ok(db), Ok(table), Ok(origin)) = (db.to_str(), table.to_str(), origin.to_str())
            else {
                continue;
            };
            if db != "main" {
                continue;
            }
            match origins.iter_mut().find(|(t, _)| t == table) {
                Some((_, cols)) => cols.push((origin.to_string(), i)),
                None => origins.push((table.to_string(), vec![(origin.to_string(), i)])),
            }
        }
        for (table, cols) in origins {
            let Some(t) = schema::table(conn, &table)? else {
                continue;
            };
            let find = |name: &str| {
                cols.iter()
                    .find(|(o, _)| o.eq_ignore_ascii_case(name))
                    .map(|(_, i)| *i)
            };
            let idx: Option<Vec<usize>> = match &t.key {
                Key::Rowid(_) => ["rowid", "_rowid_", "oid"]
                    .iter()
                    .find_map(|n| find(n))
                    .map(|i| vec![i]),
                Key::Columns(names) => names.iter().map(|n| find(n)).collect(),
            };
            if let Some(idx) = idx {
                return Ok(Some((t, idx)));
            }
        }
        Ok(None)
    }

    /// Rows `offset+1 ..= offset+limit` of a stored query, re-read from the database.
    pub(super) fn page(&self, q: &Stored, offset: u64, limit: usize) -> HostResult<Page> {
        let conn = self.reader()?;
        let mut stmt = self.prepare_user(&conn, &q.sql)?;
        bind(&mut stmt, &q.params)?;
        let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
        let key = self.key_map(&conn, &stmt)?;
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        let mut n = 0u64;
        while out.len() < limit {
            let Some(r) = rows.next().map_err(|e| self.reader_err(&conn, e))? else {
                break;
            };
            n += 1;
            if n > offset {
                out.push(row_values(r, columns.len())?);
            }
        }
        Ok(Page {
            columns,
            rows: out,
            key,
        })
    }

    pub(super) fn page_of(&self, q: &Stored, offset: u64, limit: usize) -> HostResult<Page> {
        self.page(q, offset, limit)
            .map_err(|e| HostError::failed(format!("query {} no longer runs", q.id), e))
    }

    /// The node of a result row: the table's row when the result carries its key.
    fn row_node(&self, id: i64, n: u64, page: &Page, values: &[SqlValue]) -> Node {
        match &page.key {
            Some((t, idx)) => {
                let key: Vec<SqlValue> = idx.iter().map(|i| values[*i].clone()).collect();
                Node::Row(t.name.clone(), keys::encode_key(&key))
            }
            None => Node::QueryRow(id, n),
        }
    }

    pub(super) fn query_info(&self, id: i64) -> HostResult<Option<EntryInfo>> {
        let Some(q) = self.stored(id)? else {
            return Ok(None);
        };
        Ok(Some(EntryInfo {
            indexable: false,
            ..EntryInfo::new(
                format!(
                    "Query {id} · {} · {} · columns {}",
                    truncate(&q.sql.split_whitespace().collect::<Vec<_>>().join(" "), 80),
                    plural(q.rows, "row", "rows"),
                    truncate(&q.columns.join(", "), 200)
                ),
                self.reference(&Node::Query(id)),
            )
        }))
    }

    pub(super) fn query_row_info(&self, id: i64, n: u64) -> HostResult<Option<EntryInfo>> {
        let Some(q) = self.stored(id)? else {
            return Ok(None);
        };
        let Ok(page) = self.page(&q, n - 1, 1) else {
            return Ok(None);
        };
        Ok(page.rows.first().map(|values| {
            let node = self.row_node(id, n, &page, values);
            EntryInfo::new(line(&page.columns, values), self.reference(&node))
        }))
    }

    pub(super) fn query_children(&self, id: i64) -> HostResult<Vec<Child>> {
        let q = self.stored_or_missing(id)?;
        let page = self.page_of(&q, 0, self.page_size)?;
        Ok(page
            .rows
            .iter()
            .enumerate()
            .map(|(i, values)| {
                let n = i as u64 + 1;
                let node = self.row_node(id, n, &page, values);
                Child {
                    name: n.to_string(),
                    info: EntryInfo::new(line(&page.columns, values), self.reference(&node)),
                }
            })
            .collect())
    }

    /// `read_body` of a query: its SQL, parameters, when it ran and its shape.
    pub(super) fn query_body(&self, id: i64) -> HostResult<String> {
        let q = self.stored_or_missing(id)?;
        Ok(format!(
            "query {id}, run {}\nsql: {}\nparams: {}\ncolumns: {}\nrows: {} when it ran; all at {}\n",
            q.created,
            q.sql,
            Value::Array(q.params.clone()),
            q.columns.join(", "),
            q.rows,
            self.paths.entry(&Node::QueryRows(id).path())
        ))
    }

    /// `read_body` of a result row: one `column: value` line each, and the table row it is.
    pub(super) fn query_row_body(&self, id: i64, n: u64) -> HostResult<String> {
        let q = self.stored_or_missing(id)?;
        let page = self.page_of(&q, n - 1, 1)?;
        let values = page
            .rows
            .first()
            .ok_or_else(|| HostError::NotFound(format!("query {id} has no row {n} now")))?;
        let mut out = String::new();
        for (c, v) in page.columns.iter().zip(values) {
            out.push_str(&format!("{c}: {}\n", super::view::full(v)));
        }
        if let node @ Node::Row(..) = self.row_node(id, n, &page, values) {
            out.push_str(&format!("(row {})\n", self.paths.entry(&node.path())));
        }
        Ok(out)
    }
}
