//! Operations: their specs (one-line description, strict JSON schema), their guards and what
//! a call does. SQL a caller writes (`query`, the `where` of `count`/`export`) runs on the
//! read-only `reader`; writes run on `main` in one `BEGIN IMMEDIATE` transaction, with
//! values always bound as parameters and SQLite's constraint errors passed on as EINVAL.

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, TransactionBehavior};
use serde_json::{json, Map, Value};

use super::query::{bind, sql_value};
use super::schema::{self, filter, quote, Key, Table};
use super::view::{full, plural, whole_row};
use super::{db_err, user_err, DbHost, Node};
use crate::world::host::{
    object_schema, CallOutcome, Condition, Guard, HostError, HostResult, OpSpec,
};

/// Rows `export` gives by default, and at most.
const EXPORT_DEFAULT: u64 = 1000;
const EXPORT_MAX: u64 = 100_000;
/// Bytes `export` puts in a result at most.
const EXPORT_BYTES: usize = 16 * 1024 * 1024;

/// Names of the ops an entry offers, in the order `ops/` lists them.
pub(super) fn names(node: &Node) -> &'static [&'static str] {
    match node {
        Node::Root => &["schema", "query"],
        Node::Table(_) => &["schema", "count", "export", "insert"],
        Node::Row(..) => &[
            "read_body",
            "references",
            "referenced_by",
            "update",
            "delete",
        ],
        Node::View(_) => &["schema", "count", "export"],
        Node::ViewRow(..) | Node::Query(_) | Node::QueryRow(..) => &["read_body"],
        Node::Tables
        | Node::Views
        | Node::Queries
        | Node::TableRows(_)
        | Node::ViewRows(_)
        | Node::QueryRows(_) => &[],
    }
}

pub(super) fn offered(node: &Node, op: &str) -> HostResult<()> {
    let offered = names(node);
    if offered.contains(&op) {
        Ok(())
    } else if offered.is_empty() {
        Err(HostError::NotFound(format!(
            "no operation {op:?} here (this entry has none)"
        )))
    } else {
        Err(HostError::NotFound(format!(
            "no operation {op:?} here (offered: {})",
            offered.join(", ")
        )))
    }
}

fn params_schema() -> Value {
    json!({
        "type": "array",
        "items": {"type": ["string", "number", "boolean", "null"]},
        "description": "values for ?, ?1, ?2 … in order (bound, never pasted into the SQL)"
    })
}

fn where_schema() -> Value {
    json!({"type": "string", "minLength": 1,
        "description": "SQL condition (runs on the read-only connection), e.g. \"Composer LIKE ?\""})
}

/// SQL text ends at a NUL byte for SQLite: what follows would be silently dropped.
fn no_nul(s: &str, what: &str) -> HostResult<()> {
    if s.contains('\0') {
        return Err(HostError::InvalidArgs(format!(
            "{what} holds a NUL byte, which SQL text cannot hold (SQLite would stop reading there)"
        )));
    }
    Ok(())
}

/// A string argument that becomes SQL text (`sql`, `where`).
fn str_arg<'a>(map: &'a Map<String, Value>, key: &str) -> HostResult<Option<&'a str>> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => {
            no_nul(s, &format!("`{key}`"))?;
            Ok(Some(s))
        }
        Some(_) => Err(HostError::InvalidArgs(format!("`{key}` must be a string"))),
    }
}

fn params_arg(map: &Map<String, Value>) -> HostResult<Vec<Value>> {
    match map.get("params") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => Ok(a.clone()),
        Some(_) => Err(HostError::InvalidArgs(
            "`params` must be an array of values".to_string(),
        )),
    }
}

fn object_arg<'a>(map: &'a Map<String, Value>, key: &str) -> HostResult<&'a Map<String, Value>> {
    match map.get(key) {
        Some(Value::Object(o)) => {
            // Column names are quoted into the statement.
            for column in o.keys() {
                no_nul(column, &format!("column name {column:?} in `{key}`"))?;
            }
            Ok(o)
        }
        _ => Err(HostError::InvalidArgs(format!(
            "`{key}` must be an object of column: value"
        ))),
    }
}

/// A CSV field (RFC 4180 quoting; NULL is empty).
fn csv_field(v: &SqlValue) -> String {
    let s = match v {
        SqlValue::Null => String::new(),
        SqlValue::Blob(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
        other => full(other),
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn csv_text(s: &str) -> String {
    csv_field(&SqlValue::Text(s.to_string()))
}

fn json_value(v: &SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(i) => json!(i),
        SqlValue::Real(f) => json!(f),
        SqlValue::Text(t) => json!(t),
        SqlValue::Blob(b) => json!(b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
    }
}

impl DbHost {
    pub(super) fn spec(&self, node: &Node, op: &str) -> OpSpec {
        let none = || object_schema(json!({}), &[]);
        let what = match node {
            Node::Table(t) => format!("table {t}"),
            Node::View(v) => format!("view {v}"),
            _ => "this".to_string(),
        };
        let (description, schema) = match op {
            "schema" => match node {
                Node::Root => ("All CREATE statements of the database (tables, views, indexes, triggers).".to_string(), none()),
                _ => (format!("The CREATE statement of {what}, with its indexes and triggers."), none()),
            },
            "query" => (
                "query(sql, params?): run one read-only SQL statement (SELECT …) with ? parameters bound from params; the result becomes queries/ID with its rows.".to_string(),
                object_schema(
                    json!({
                        "sql": {"type": "string", "minLength": 1, "description": "one SQL statement that only reads"},
                        "params": params_schema(),
                    }),
                    &["sql"],
                ),
            ),
            "count" => (
                format!("count(where?, params?): how many rows {what} has, or how many match the condition."),
                object_schema(json!({"where": where_schema(), "params": params_schema()}), &[]),
            ),
            "export" => (
                format!("export(format: csv|json, where?, params?, limit?): rows of {what}{} as CSV (with a header) or JSON, at most limit (default {EXPORT_DEFAULT}).",
                    if matches!(node, Node::Table(_)) { " by key" } else { "" }),
                object_schema(
                    json!({
                        "format": {"type": "string", "enum": ["csv", "json"]},
                        "where": where_schema(),
                        "params": params_schema(),
                        "limit": {"type": "integer", "minimum": 1, "maximum": EXPORT_MAX,
                            "description": format!("at most this many rows (default {EXPORT_DEFAULT})")},
                    }),
                    &["format"],
                ),
            ),
            "insert" => (
                format!("insert(values): add a row to {what}; values is an object column: value (missing columns get their defaults)."),
                object_schema(
                    json!({"values": {"type": "object", "description": "column: value",
                        "additionalProperties": {"type": ["string", "number", "boolean", "null"]}}}),
                    &["values"],
                ),
            ),
            "update" => (
                "update(set): change columns of this row; set is an object column: new value.".to_string(),
                object_schema(
                    json!({"set": {"type": "object", "minProperties": 1, "description": "column: new value",
                        "additionalProperties": {"type": ["string", "number", "boolean", "null"]}}}),
                    &["set"],
                ),
            ),
            "delete" => ("Delete this row.".to_string(), none()),
            "read_body" => match node {
                Node::Query(_) => ("The query's SQL, parameters, columns and row count.".to_string(), none()),
                _ => ("The whole row, one `column: value` line each.".to_string(), none()),
            },
            "references" => (
                "Follow this row's foreign keys: the paths of the rows it refers to.".to_string(),
                none(),
            ),
            "referenced_by" => (
                format!("Rows of other tables whose foreign keys point at this row (at most {}).", self.page_size),
                none(),
            ),
            _ => (String::new(), none()),
        };
        OpSpec {
            name: op.to_string(),
            description,
            schema,
        }
    }

    /// The guard of `op`: reading is always allowed; callers' SQL runs on the read-only
    /// connection; writes need a writable mount (a policy: EACCES).
    pub(super) fn conditions(&self, op: &str) -> Guard {
        let can_read = || {
            Condition::check(
                "can_read",
                true,
                format!("{} is open for reading", self.file_name),
            )
        };
        let read_only = || {
            Condition::policy(
                "read_only_connection",
                true,
                "queries run on a read-only connection (SQLite refuses every write)",
            )
        };
        Guard::new(match op {
            "query" => vec![read_only()],
            "count" | "export" => vec![can_read(), read_only()],
            "insert" | "update" | "delete" => vec![if self.writable {
                Condition::policy(
                    "writable",
                    true,
                    format!("{} is mounted writable", self.world_path(&[])),
                )
            } else {
                Condition::policy(
                    "writable",
                    false,
                    format!(
                        "{} is mounted read-only (manifest writable = false); use ops/query to read",
                        self.world_path(&[])
                    ),
                )
            }],
            _ => vec![can_read()],
        })
    }

    pub(super) fn run(
        &self,
        node: &Node,
        op: &str,
        args: &Map<String, Value>,
    ) -> HostResult<CallOutcome> {
        match (op, node) {
            ("schema", Node::Root) => Ok(CallOutcome::text(schema::create_statements(
                &self.main(),
                None,
            )?)),
            ("schema", Node::Table(n) | Node::View(n)) => Ok(CallOutcome::text(
                schema::create_statements(&self.main(), Some(n))?,
            )),
            ("query", _) => {
                let sql = str_arg(args, "sql")?.unwrap_or_default();
                self.run_query(sql, &params_arg(args)?)
            }
            ("count", Node::Table(n) | Node::View(n)) => self.count(n, args),
            ("export", Node::Table(n) | Node::View(n)) => {
                self.export(n, matches!(node, Node::Table(_)), args)
            }
            ("insert", Node::Table(n)) => self.insert(n, object_arg(args, "values")?),
            ("update", Node::Row(t, k)) => self.update(t, k, object_arg(args, "set")?),
            ("delete", Node::Row(t, k)) => self.delete(t, k),
            ("read_body", Node::Row(t, k)) => self.row_body(t, k),
            ("read_body", Node::ViewRow(v, n)) => {
                let (names, values) = super::view::view_row(&self.main(), v, *n)?
                    .ok_or_else(|| HostError::NotFound(format!("view {v} has no row {n}")))?;
                let mut out = String::new();
                for (c, v) in names.iter().zip(&values) {
                    out.push_str(&format!("{c}: {}\n", full(v)));
                }
                Ok(CallOutcome::text(out))
            }
            ("read_body", Node::Query(id)) => Ok(CallOutcome::text(self.query_body(*id)?)),
            ("read_body", Node::QueryRow(id, n)) => {
                Ok(CallOutcome::text(self.query_row_body(*id, *n)?))
            }
            ("references", Node::Row(t, k)) => self.references(t, k),
            ("referenced_by", Node::Row(t, k)) => self.referenced_by(t, k),
            _ => Err(HostError::NotFound(format!("no operation {op:?} here"))),
        }
    }

    /// `SELECT … FROM "T" WHERE (<where>)`, the condition on its own lines so a trailing
    /// `--` comment cannot swallow what follows.
    fn filtered(&self, select: &str, name: &str, args: &Map<String, Value>) -> HostResult<String> {
        Ok(match str_arg(args, "where")? {
            Some(w) => format!("SELECT {select} FROM {} WHERE (\n{w}\n)", quote(name)),
            None => format!("SELECT {select} FROM {}", quote(name)),
        })
    }

    fn count(&self, name: &str, args: &Map<String, Value>) -> HostResult<CallOutcome> {
        let sql = self.filtered("count(*)", name, args)?;
        let conn = self.reader()?;
        let mut stmt = self.prepare_user(&conn, &sql)?;
        bind(&mut stmt, &params_arg(args)?)?;
        let n: i64 = stmt
            .raw_query()
            .next()
            .map_err(|e| self.reader_err(&conn, e))?
            .map(|r| r.get(0))
            .transpose()
            .map_err(db_err)?
            .unwrap_or(0);
        let params = params_arg(args)?;
        let text = match str_arg(args, "where")? {
            Some(w) if !params.is_empty() => format!(
                "{} of {name} where {w} (params {})",
                plural(n.max(0) as u64, "row", "rows"),
                Value::Array(params)
            ),
            Some(w) => format!(
                "{} of {name} where {w}",
                plural(n.max(0) as u64, "row", "rows")
            ),
            None => format!("{} in {name}", plural(n.max(0) as u64, "row", "rows")),
        };
        Ok(CallOutcome::text(text))
    }

    fn export(
        &self,
        name: &str,
        is_table: bool,
        args: &Map<String, Value>,
    ) -> HostResult<CallOutcome> {
        let format = str_arg(args, "format")?.unwrap_or("csv");
        if format != "csv" && format != "json" {
            return Err(HostError::InvalidArgs(format!(
                "format must be csv or json, not {format:?}"
            )));
        }
        let limit = match args.get("limit") {
            None => EXPORT_DEFAULT,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=EXPORT_MAX).contains(&n) => n,
                _ => {
                    return Err(HostError::InvalidArgs(format!(
                        "`limit` must be an integer from 1 to {EXPORT_MAX}"
                    )))
                }
            },
        };
        let conn = self.reader()?;
        let mut sql = self.filtered("*", name, args)?;
        if is_table {
            let t = self.table_of(&conn, name)?;
            sql.push_str(&format!(" ORDER BY {}", t.key_list()));
        }
        // Our own number, one more to tell whether there were more.
        sql.push_str(&format!(" LIMIT {}", limit + 1));
        let mut stmt = self.prepare_user(&conn, &sql)?;
        bind(&mut stmt, &params_arg(args)?)?;
        let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
        let mut out = String::new();
        if format == "csv" {
            out.push_str(
                &columns
                    .iter()
                    .map(|c| csv_text(c))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            out.push('\n');
        } else {
            out.push_str("[\n");
        }
        let mut rows = stmt.raw_query();
        let mut n = 0u64;
        let mut cut = None;
        while let Some(r) = rows.next().map_err(|e| self.reader_err(&conn, e))? {
            if n == limit {
                cut = Some(format!("more rows than the limit {limit}"));
                break;
            }
            if out.len() > EXPORT_BYTES {
                cut = Some(format!("the export reached {} MiB", EXPORT_BYTES >> 20));
                break;
            }
            let values = (0..columns.len())
                .map(|i| r.get::<_, SqlValue>(i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?;
            if format == "csv" {
                out.push_str(&values.iter().map(csv_field).collect::<Vec<_>>().join(","));
                out.push('\n');
            } else {
                let obj: Map<String, Value> = columns
                    .iter()
                    .cloned()
                    .zip(values.iter().map(json_value))
                    .collect();
                if n > 0 {
                    out.push_str(",\n");
                }
                out.push_str(&Value::Object(obj).to_string());
            }
            n += 1;
        }
        if format == "json" {
            out.push_str(if n > 0 { "\n]\n" } else { "]\n" });
        }
        if let Some(why) = cut {
            out.push_str(&format!(
                "# cut after {}: {why}; raise limit (at most {EXPORT_MAX}) or narrow with where\n",
                plural(n, "row", "rows")
            ));
        }
        Ok(CallOutcome::text(out))
    }

    fn row_of(
        &self,
        conn: &rusqlite::Connection,
        table: &str,
        seg: &str,
    ) -> HostResult<(Table, Vec<SqlValue>)> {
        let t = self.table_of(conn, table)?;
        let key = self
            .key_of(&t, seg)
            .ok_or_else(|| HostError::NotFound(format!("no row {seg} in {table}")))?;
        Ok((t, key))
    }

    /// The row at `seg`, which must exist: its table, key and values.
    fn existing_row(
        &self,
        conn: &rusqlite::Connection,
        table: &str,
        seg: &str,
    ) -> HostResult<(Table, Vec<SqlValue>, Vec<SqlValue>)> {
        let (t, key) = self.row_of(conn, table, seg)?;
        let row = whole_row(conn, &t, &key)?
            .ok_or_else(|| HostError::NotFound(format!("no row {seg} in {table}")))?;
        Ok((t, key, row))
    }

    fn row_path(&self, table: &str, key: &[SqlValue]) -> Vec<String> {
        Node::Row(table.to_string(), super::keys::encode_key(key)).path()
    }

    /// A row's `body`: one JSON object, column → value (a rowid table's key first; blobs
    /// as lowercase hex strings), pretty-printed.
    pub(super) fn row_json(&self, node: &Node) -> HostResult<Option<String>> {
        let mut obj = Map::new();
        match node {
            Node::Row(table, seg) => {
                let conn = self.main();
                let (t, key, values) = self.existing_row(&conn, table, seg)?;
                if let Key::Rowid(name) = &t.key {
                    obj.insert(name.clone(), json_value(&key[0]));
                }
                for (c, v) in t.columns.iter().zip(&values) {
                    obj.insert(c.name.clone(), json_value(v));
                }
            }
            Node::ViewRow(v, n) => {
                let Some((names, values)) = super::view::view_row(&self.main(), v, *n)? else {
                    return Ok(None);
                };
                for (c, v) in names.iter().zip(&values) {
                    obj.insert(c.clone(), json_value(v));
                }
            }
            Node::QueryRow(id, n) => {
                let q = self.stored_or_missing(*id)?;
                let page = self.page_of(&q, n - 1, 1)?;
                let Some(values) = page.rows.first() else {
                    return Ok(None);
                };
                for (c, v) in page.columns.iter().zip(values) {
                    obj.insert(c.clone(), json_value(v));
                }
            }
            _ => return Ok(None),
        }
        let text = serde_json::to_string_pretty(&Value::Object(obj))
            .map_err(|e| HostError::Backend(format!("cannot render the row: {e}")))?;
        Ok(Some(format!("{text}\n")))
    }

    fn row_body(&self, table: &str, seg: &str) -> HostResult<CallOutcome> {
        let conn = self.main();
        let (t, key, values) = self.existing_row(&conn, table, seg)?;
        let mut out = String::new();
        if let Key::Rowid(name) = &t.key {
            out.push_str(&format!("{name}: {}\n", full(&key[0])));
        }
        for (c, v) in t.columns.iter().zip(&values) {
            out.push_str(&format!("{}: {}\n", c.name, full(v)));
        }
        Ok(CallOutcome::text(out))
    }

    /// Values of `cols` in a row (`rowid` names the key of a rowid table).
    fn values_of(
        t: &Table,
        key: &[SqlValue],
        row: &[SqlValue],
        cols: &[String],
    ) -> Option<Vec<SqlValue>> {
        cols.iter()
            .map(|c| match &t.key {
                Key::Rowid(r) if r.eq_ignore_ascii_case(c) => key.first().cloned(),
                _ => t
                    .columns
                    .iter()
                    .position(|col| col.name.eq_ignore_ascii_case(c))
                    .and_then(|i| row.get(i).cloned()),
            })
            .collect()
    }

    fn references(&self, table: &str, seg: &str) -> HostResult<CallOutcome> {
        let conn = self.main();
        let (t, key, row) = self.existing_row(&conn, table, seg)?;
        let mut out = CallOutcome::default();
        let mut lines = Vec::new();
        for fk in &t.fks {
            let from = fk.from.join(", ");
            let Some(values) = Self::values_of(&t, &key, &row, &fk.from) else {
                continue;
            };
            if values.iter().any(|v| matches!(v, SqlValue::Null)) {
                lines.push(format!("{from} → {}: NULL, refers to nothing", fk.table));
                continue;
            }
            let Some(target) = schema::actual_table_name(&conn, &fk.table)?
                .and_then(|n| schema::table(&conn, &n).transpose())
                .transpose()?
            else {
                lines.push(format!("{from} → {}: no such table", fk.table));
                continue;
            };
            let to: Vec<String> = match fk.to.iter().cloned().collect::<Option<Vec<String>>>() {
                Some(cols) => cols.iter().map(|c| quote(c)).collect(),
                None => target.key_exprs(),
            };
            let (cond, bound) = filter(&to, &values, 0);
            let sql = format!(
                "SELECT {} FROM {} WHERE {cond} LIMIT 1",
                target.key_list(),
                quote(&target.name)
            );
            let found: Option<Vec<SqlValue>> = {
                let mut stmt = conn.prepare(&sql).map_err(db_err)?;
                let mut rows = stmt.query(params_from_iter(bound.iter())).map_err(db_err)?;
                match rows.next().map_err(db_err)? {
                    Some(r) => Some(
                        (0..target.key_exprs().len())
                            .map(|i| r.get::<_, SqlValue>(i))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(db_err)?,
                    ),
                    None => None,
                }
            };
            let shown: Vec<String> = values.iter().map(full).collect();
            match found {
                Some(k) => {
                    let path = self.row_path(&target.name, &k);
                    lines.push(format!(
                        "{from} = {} → {} row {}",
                        shown.join(", "),
                        target.name,
                        super::keys::encode_key(&k)
                    ));
                    out.discovered.push(path);
                }
                None => lines.push(format!(
                    "{from} = {} → {}: no such row (a dangling reference)",
                    shown.join(", "),
                    target.name
                )),
            }
        }
        out.result = if t.fks.is_empty() {
            format!("table {} has no foreign keys", t.name)
        } else {
            lines.join("\n")
        };
        Ok(out)
    }

    fn referenced_by(&self, table: &str, seg: &str) -> HostResult<CallOutcome> {
        let conn = self.main();
        let (t, key, row) = self.existing_row(&conn, table, seg)?;
        let mut out = CallOutcome::default();
        let mut lines = Vec::new();
        let mut budget = self.page_size;
        for (u, fks) in schema::referencing(&conn, &t.name)? {
            for fk in fks {
                let to: Vec<String> = match fk.to.iter().cloned().collect::<Option<Vec<String>>>() {
                    Some(cols) => cols,
                    None => t.key_names(),
                };
                let Some(values) = Self::values_of(&t, &key, &row, &to) else {
                    continue;
                };
                if values.iter().any(|v| matches!(v, SqlValue::Null)) {
                    continue;
                }
                let from: Vec<String> = fk.from.iter().map(|c| quote(c)).collect();
                let (cond, bound) = filter(&from, &values, 0);
                let total: i64 = conn
                    .query_row(
                        &format!("SELECT count(*) FROM {} WHERE {cond}", quote(&u.name)),
                        params_from_iter(bound.iter()),
                        |r| r.get(0),
                    )
                    .map_err(db_err)?;
                if total == 0 {
                    continue;
                }
                let mut stmt = conn
                    .prepare(&format!(
                        "SELECT {} FROM {} WHERE {cond} ORDER BY {} LIMIT ?{}",
                        u.key_list(),
                        quote(&u.name),
                        u.key_list(),
                        bound.len() + 1
                    ))
                    .map_err(db_err)?;
                let mut params = bound.clone();
                params.push(SqlValue::Integer(budget as i64));
                let mut rows = stmt
                    .query(params_from_iter(params.iter()))
                    .map_err(db_err)?;
                let mut shown = 0usize;
                while let Some(r) = rows.next().map_err(db_err)? {
                    let k = (0..u.key_exprs().len())
                        .map(|i| r.get::<_, SqlValue>(i))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(db_err)?;
                    out.discovered.push(self.row_path(&u.name, &k));
                    shown += 1;
                }
                budget -= shown;
                let mut l = format!(
                    "{}.{}: {}",
                    u.name,
                    fk.from.join(", "),
                    plural(total as u64, "row", "rows")
                );
                if (shown as i64) < total {
                    let cond_words: Vec<String> = fk
                        .from
                        .iter()
                        .zip(&values)
                        .map(|(c, v)| format!("{} = {}", quote(c), sql_literal(v)))
                        .collect();
                    l.push_str(&format!(
                        " ({shown} listed; all with ops/query: SELECT * FROM {} WHERE {})",
                        quote(&u.name),
                        cond_words.join(" AND ")
                    ));
                }
                lines.push(l);
            }
        }
        out.result = if lines.is_empty() {
            format!("no row of another table refers to this row of {}", t.name)
        } else {
            lines.join("\n")
        };
        Ok(out)
    }

    /// `changed` of a write: the table, its rows and the rows touched.
    fn write_outcome(
        &self,
        table: &str,
        text: String,
        rows: &[Vec<String>],
        discovered: Option<Vec<String>>,
    ) -> CallOutcome {
        let mut out = CallOutcome::text(text)
            .changed(Node::Table(table.to_string()).path())
            .changed(Node::TableRows(table.to_string()).path());
        for r in rows {
            if !out.changed.contains(r) {
                out.changed.push(r.clone());
            }
        }
        if let Some(d) = discovered {
            out.discovered.push(d);
        }
        out
    }

    /// Column names and bound values of an object of column: value.
    fn assignments(
        t: &Table,
        values: &Map<String, Value>,
    ) -> HostResult<(Vec<String>, Vec<SqlValue>)> {
        let mut cols = Vec::new();
        let mut bound = Vec::new();
        for (k, v) in values {
            let Some(col) = t.column(k) else {
                let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
                return Err(HostError::InvalidArgs(format!(
                    "table {} has no column {k:?} (columns: {})",
                    t.name,
                    names.join(", ")
                )));
            };
            cols.push(col.name.clone());
            bound.push(sql_value(v, &format!("value of {k}"))?);
        }
        Ok((cols, bound))
    }

    fn check_writable(&self, op: &str) -> HostResult<()> {
        let guard = self.conditions(op);
        if guard.allowed() {
            Ok(())
        } else {
            Err(HostError::Blocked(guard))
        }
    }

    fn insert(&self, table: &str, values: &Map<String, Value>) -> HostResult<CallOutcome> {
        self.check_writable("insert")?;
        let mut conn = self.main();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(user_err)?;
        let t = self.table_of(&tx, table)?;
        let (cols, bound) = Self::assignments(&t, values)?;
        let sql = if cols.is_empty() {
            format!(
                "INSERT INTO {} DEFAULT VALUES RETURNING {}",
                quote(&t.name),
                t.key_list()
            )
        } else {
            format!(
                "INSERT INTO {} ({}) VALUES ({}) RETURNING {}",
                quote(&t.name),
                cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", "),
                (1..=cols.len())
                    .map(|i| format!("?{i}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                t.key_list()
            )
        };
        let n = t.key_exprs().len();
        let key: Vec<SqlValue> = tx
            .query_row(&sql, params_from_iter(bound.iter()), |r| {
                (0..n).map(|i| r.get::<_, SqlValue>(i)).collect()
            })
            .map_err(user_err)?;
        tx.commit().map_err(user_err)?;
        let path = self.row_path(&t.name, &key);
        Ok(self.write_outcome(
            &t.name,
            format!(
                "inserted row {} into {}",
                super::keys::encode_key(&key),
                t.name
            ),
            std::slice::from_ref(&path),
            Some(path.clone()),
        ))
    }

    fn update(&self, table: &str, seg: &str, set: &Map<String, Value>) -> HostResult<CallOutcome> {
        self.check_writable("update")?;
        let mut conn = self.main();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(user_err)?;
        let (t, key) = self.row_of(&tx, table, seg)?;
        let (cols, mut bound) = Self::assignments(&t, set)?;
        if cols.is_empty() {
            return Err(HostError::InvalidArgs("`set` names no column".to_string()));
        }
        let (cond, kb) = t.key_filter(&key, bound.len());
        bound.extend(kb);
        let sql = format!(
            "UPDATE {} SET {} WHERE {cond} RETURNING {}",
            quote(&t.name),
            cols.iter()
                .enumerate()
                .map(|(i, c)| format!("{} = ?{}", quote(c), i + 1))
                .collect::<Vec<_>>()
                .join(", "),
            t.key_list()
        );
        let n = t.key_exprs().len();
        let new_key: Vec<SqlValue> = {
            let mut stmt = tx.prepare(&sql).map_err(user_err)?;
            let mut rows = stmt
                .query(params_from_iter(bound.iter()))
                .map_err(user_err)?;
            match rows.next().map_err(user_err)? {
                Some(r) => (0..n)
                    .map(|i| r.get::<_, SqlValue>(i))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(db_err)?,
                None => return Err(HostError::NotFound(format!("no row {seg} in {table}"))),
            }
        };
        tx.commit().map_err(user_err)?;
        let old = self.row_path(&t.name, &key);
        let new = self.row_path(&t.name, &new_key);
        Ok(self.write_outcome(
            &t.name,
            format!(
                "updated row {} of {}",
                super::keys::encode_key(&new_key),
                t.name
            ),
            &[old, new.clone()],
            Some(new),
        ))
    }

    fn delete(&self, table: &str, seg: &str) -> HostResult<CallOutcome> {
        self.check_writable("delete")?;
        let mut conn = self.main();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(user_err)?;
        let (t, key) = self.row_of(&tx, table, seg)?;
        let (cond, bound) = t.key_filter(&key, 0);
        let n = tx
            .execute(
                &format!("DELETE FROM {} WHERE {cond}", quote(&t.name)),
                params_from_iter(bound.iter()),
            )
            .map_err(user_err)?;
        if n == 0 {
            return Err(HostError::NotFound(format!("no row {seg} in {table}")));
        }
        tx.commit().map_err(user_err)?;
        let path = self.row_path(&t.name, &key);
        Ok(self.write_outcome(
            &t.name,
            format!(
                "deleted row {} of {}",
                super::keys::encode_key(&key),
                t.name
            ),
            &[path],
            None,
        ))
    }
}

/// A value as an SQL literal, only for text shown to the reader (never executed by us).
fn sql_literal(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "NULL".to_string(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => format!("{f:?}"),
        SqlValue::Text(t) => format!("'{}'", t.replace('\'', "''")),
        SqlValue::Blob(b) => format!(
            "x'{}'",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
    }
}
