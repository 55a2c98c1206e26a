//! Operations: their specs (one-line description, strict JSON schema), their guards and what
//! a call does. SQL a caller writes (`query`, the `where` of `count`/`export`) runs on the
//! read-only `reader`; writes run on `main` in one `BEGIN IMMEDIATE` transaction, with
//! values always bound as parameters and SQLite's constraint errors passed on as EINVAL.

use std::borrow::Cow;
use std::sync::LazyLock;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, TransactionBehavior};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::query::{bind, sql_value};
use super::schema::{self, filter, quote, Key, Table};
use super::view::{full, plural, whole_row};
use super::{db_err, user_err, DbHost, Node};
use crate::host::op::{Decl, NoArgs, Ops};
use crate::host::{CallOutcome, Caller, Condition, HostError, HostResult, OrFailed};

/// Rows `export` gives by default, and at most.
const EXPORT_DEFAULT: u64 = 1000;
const EXPORT_MAX: u64 = 100_000;
/// Bytes `export` puts in a result at most.
const EXPORT_BYTES: usize = 16 * 1024 * 1024;

/// What an op is asked of: the entry, and the listing size its description names.
pub(super) struct At {
    pub node: Node,
    pub page_size: usize,
}

/// SQL text a caller writes (`sql`, `where`): it ends at a NUL byte for SQLite, so what
/// followed one would be silently dropped; such text is refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(try_from = "String")]
struct Sql(String);

impl TryFrom<String> for Sql {
    type Error = &'static str;

    fn try_from(s: String) -> Result<Sql, Self::Error> {
        if s.contains('\0') {
            return Err(
                "holds a NUL byte, which SQL text cannot hold (SQLite would stop reading there)",
            );
        }
        Ok(Sql(s))
    }
}

/// Values bound to `?`, `?1`, `?2` … (`null`: none).
#[derive(Debug, Default)]
struct Params(Vec<Value>);

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Params(
            Option::<Vec<Value>>::deserialize(d)?.unwrap_or_default(),
        ))
    }
}

impl JsonSchema for Params {
    fn schema_name() -> Cow<'static, str> {
        "Params".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "type": "array",
            "items": {"type": ["string", "number", "boolean", "null"]},
            "description": "values for ?, ?1, ?2 … in order (bound, never pasted into the SQL)"
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    /// one SQL statement that only reads
    #[schemars(length(min = 1))]
    sql: Sql,
    #[serde(default)]
    params: Params,
}

/// The rows a `count` or `export` looks at: all, or those `where` holds for.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CountArgs {
    /// SQL condition (runs on the read-only connection), e.g. "Composer LIKE ?"
    #[serde(rename = "where", default)]
    #[schemars(length(min = 1))]
    condition: Option<Sql>,
    #[serde(default)]
    params: Params,
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Format {
    Csv,
    Json,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExportArgs {
    format: Format,
    /// SQL condition (runs on the read-only connection), e.g. "Composer LIKE ?"
    #[serde(rename = "where", default)]
    #[schemars(length(min = 1))]
    condition: Option<Sql>,
    #[serde(default)]
    params: Params,
    /// at most this many rows (default 1000)
    #[serde(default = "export_default")]
    #[schemars(range(min = 1, max = EXPORT_MAX))]
    limit: u64,
}

fn export_default() -> u64 {
    EXPORT_DEFAULT
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct InsertArgs {
    /// column: value
    #[schemars(extend("additionalProperties" = {"type": ["string", "number", "boolean", "null"]}))]
    values: Map<String, Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    /// column: new value
    #[schemars(extend(
        "minProperties" = 1,
        "additionalProperties" = {"type": ["string", "number", "boolean", "null"]}
    ))]
    set: Map<String, Value>,
}

/// Reading is always allowed.
fn can_read(h: &DbHost) -> Condition {
    Condition::check(
        "can_read",
        true,
        format!("{} is open for reading", h.file_name),
    )
}

/// Callers' SQL runs on the read-only connection.
fn read_only() -> Condition {
    Condition::policy(
        "read_only_connection",
        true,
        "queries run on a read-only connection (SQLite refuses every write)",
    )
}

/// Writes need a writable mount (a policy: EACCES).
fn writable(h: &DbHost) -> Condition {
    let mount = h.paths.mount();
    if h.writable {
        Condition::policy("writable", true, format!("{mount} is mounted writable"))
    } else {
        Condition::policy(
            "writable",
            false,
            format!(
                "{mount} is mounted read-only (manifest writable = false); use ops/query to read"
            ),
        )
    }
}

/// How an entry names itself in an op's description.
fn what(node: &Node) -> String {
    match node {
        Node::Table(t) => format!("table {t}"),
        Node::View(v) => format!("view {v}"),
        _ => "this".to_string(),
    }
}

/// The table or view an op of one runs on.
fn object(node: &Node) -> HostResult<&str> {
    match node {
        Node::Table(n) | Node::View(n) => Ok(n),
        _ => Err(elsewhere()),
    }
}

/// The table and key of the row an op of a row runs on.
fn row(node: &Node) -> HostResult<(&str, &str)> {
    match node {
        Node::Row(t, k) => Ok((t, k)),
        _ => Err(elsewhere()),
    }
}

/// An op run on an entry that does not offer it (`offers` keeps this from happening).
fn elsewhere() -> HostError {
    HostError::NotFound("this entry does not offer that operation".to_string())
}

/// An op's context: who calls (its run's name is kept with a write, see `record_run`).
type DbDecl<A> = Decl<DbHost, At, Caller, A>;

/// Every op's name, spelled once: the declarations below and the words that point to an
/// op use these.
pub(super) mod name {
    pub const SCHEMA: &str = "schema";
    pub const QUERY: &str = "query";
    pub const COUNT: &str = "count";
    pub const EXPORT: &str = "export";
    pub const INSERT: &str = "insert";
    pub const READ_BODY: &str = "read_body";
    pub const REFERENCES: &str = "references";
    pub const REFERENCED_BY: &str = "referenced_by";
    pub const UPDATE: &str = "update";
    pub const DELETE: &str = "delete";
}

/// Every op of the db host, in the order `ops/` lists them.
pub(super) static OPS: LazyLock<Ops<DbHost, At, Caller>> = LazyLock::new(|| {
    Ops::new(vec![
        DbDecl::<NoArgs> {
            name: name::SCHEMA,
            offers: |at| matches!(at.node, Node::Root | Node::Table(_) | Node::View(_)),
            describe: |at| match at.node {
                Node::Root => "All CREATE statements of the database (tables, views, indexes, triggers).".to_string(),
                _ => format!("The CREATE statement of {}, with its indexes and triggers.", what(&at.node)),
            },
            guard: |h, _, _, _| Ok(vec![can_read(h)]),
            run: |h, _, at, _| {
                let name = match &at.node {
                    Node::Root => None,
                    node => Some(object(node)?),
                };
                Ok(CallOutcome::text(schema::create_statements(&h.main(), name)?))
            },
        }
        .into(),
        DbDecl::<QueryArgs> {
            name: name::QUERY,
            offers: |at| at.node == Node::Root,
            describe: |_| "query(sql, params?): run one read-only SQL statement (SELECT …) with ? parameters bound from params; the result becomes queries/ID with its rows.".to_string(),
            guard: |_, _, _, _| Ok(vec![read_only()]),
            run: |h, _, _, a| h.run_query(&a.sql.0, &a.params.0),
        }
        .into(),
        DbDecl::<CountArgs> {
            name: name::COUNT,
            offers: |at| matches!(at.node, Node::Table(_) | Node::View(_)),
            describe: |at| format!("count(where?, params?): how many rows {} has, or how many match the condition.", what(&at.node)),
            guard: |h, _, _, _| Ok(vec![can_read(h), read_only()]),
            run: |h, _, at, a| h.count(object(&at.node)?, a),
        }
        .into(),
        DbDecl::<ExportArgs> {
            name: name::EXPORT,
            offers: |at| matches!(at.node, Node::Table(_) | Node::View(_)),
            describe: |at| format!(
                "export(format: csv|json, where?, params?, limit?): rows of {}{} as CSV (with a header) or JSON, at most limit (default {EXPORT_DEFAULT}).",
                what(&at.node),
                if matches!(at.node, Node::Table(_)) { " by key" } else { "" }
            ),
            guard: |h, _, _, _| Ok(vec![can_read(h), read_only()]),
            run: |h, _, at, a| h.export(object(&at.node)?, matches!(at.node, Node::Table(_)), a),
        }
        .into(),
        DbDecl::<InsertArgs> {
            name: name::INSERT,
            offers: |at| matches!(at.node, Node::Table(_)),
            describe: |at| format!("insert(values): add a row to {}; values is an object column: value (missing columns get their defaults).", what(&at.node)),
            guard: |h, _, _, _| Ok(vec![writable(h)]),
            run: |h, c, at, a| h.insert(object(&at.node)?, &a.values, &c.run),
        }
        .into(),
        DbDecl::<NoArgs> {
            name: name::READ_BODY,
            offers: |at| matches!(at.node, Node::Row(..) | Node::ViewRow(..) | Node::Query(_) | Node::QueryRow(..)),
            describe: |at| match at.node {
                Node::Query(_) => "The query's SQL, parameters, columns and row count.".to_string(),
                _ => "The whole row, one `column: value` line each.".to_string(),
            },
            guard: |h, _, _, _| Ok(vec![can_read(h)]),
            run: |h, _, at, _| h.read_body(&at.node),
        }
        .into(),
        DbDecl::<NoArgs> {
            name: name::REFERENCES,
            offers: |at| matches!(at.node, Node::Row(..)),
            describe: |_| "Follow this row's foreign keys: the paths of the rows it refers to.".to_string(),
            guard: |h, _, _, _| Ok(vec![can_read(h)]),
            run: |h, _, at, _| {
                let (t, k) = row(&at.node)?;
                h.references(t, k)
            },
        }
        .into(),
        DbDecl::<NoArgs> {
            name: name::REFERENCED_BY,
            offers: |at| matches!(at.node, Node::Row(..)),
            describe: |at| format!("Rows of other tables whose foreign keys point at this row (at most {}).", at.page_size),
            guard: |h, _, _, _| Ok(vec![can_read(h)]),
            run: |h, _, at, _| {
                let (t, k) = row(&at.node)?;
                h.referenced_by(t, k)
            },
        }
        .into(),
        DbDecl::<UpdateArgs> {
            name: name::UPDATE,
            offers: |at| matches!(at.node, Node::Row(..)),
            describe: |_| "update(set): change columns of this row; set is an object column: new value.".to_string(),
            guard: |h, _, _, _| Ok(vec![writable(h)]),
            run: |h, c, at, a| {
                let (t, k) = row(&at.node)?;
                h.update(t, k, &a.set, &c.run)
            },
        }
        .into(),
        DbDecl::<NoArgs> {
            name: name::DELETE,
            offers: |at| matches!(at.node, Node::Row(..)),
            describe: |_| "Delete this row.".to_string(),
            guard: |h, _, _, _| Ok(vec![writable(h)]),
            run: |h, c, at, _| {
                let (t, k) = row(&at.node)?;
                h.delete(t, k, &c.run)
            },
        }
        .into(),
    ])
});

/// Column names are quoted into the statement, where a NUL byte would end it.
fn no_nul_columns(values: &Map<String, Value>, arg: &str) -> HostResult<()> {
    for column in values.keys() {
        if column.contains('\0') {
            return Err(HostError::InvalidArgs(format!(
                "column name {column:?} in `{arg}` holds a NUL byte, which SQL text cannot hold (SQLite would stop reading there)"
            )));
        }
    }
    Ok(())
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
    /// `SELECT … FROM "T" WHERE (<where>)`, the condition on its own lines so a trailing
    /// `--` comment cannot swallow what follows.
    fn filtered(select: &str, name: &str, condition: Option<&Sql>) -> String {
        match condition {
            Some(Sql(w)) => format!("SELECT {select} FROM {} WHERE (\n{w}\n)", quote(name)),
            None => format!("SELECT {select} FROM {}", quote(name)),
        }
    }

    fn count(&self, name: &str, args: CountArgs) -> HostResult<CallOutcome> {
        let sql = Self::filtered("count(*)", name, args.condition.as_ref());
        let conn = self.reader()?;
        let mut stmt = self.prepare_user(&conn, &sql)?;
        bind(&mut stmt, &args.params.0)?;
        let n: i64 = stmt
            .raw_query()
            .next()
            .map_err(|e| self.reader_err(&conn, e))?
            .map(|r| r.get(0))
            .transpose()
            .map_err(db_err)?
            .unwrap_or(0);
        let rows = plural(n.max(0) as u64, "row", "rows");
        let text = match (args.condition, args.params.0) {
            (Some(Sql(w)), params) if !params.is_empty() => format!(
                "{rows} of {name} where {w} (params {})",
                Value::Array(params)
            ),
            (Some(Sql(w)), _) => format!("{rows} of {name} where {w}"),
            (None, _) => format!("{rows} in {name}"),
        };
        Ok(CallOutcome::text(text))
    }

    fn export(&self, name: &str, is_table: bool, args: ExportArgs) -> HostResult<CallOutcome> {
        let limit = args.limit;
        if !(1..=EXPORT_MAX).contains(&limit) {
            return Err(HostError::InvalidArgs(format!(
                "`limit` must be an integer from 1 to {EXPORT_MAX}"
            )));
        }
        let csv = args.format == Format::Csv;
        let conn = self.reader()?;
        let mut sql = Self::filtered("*", name, args.condition.as_ref());
        if is_table {
            let t = self.table_of(&conn, name)?;
            sql.push_str(&format!(" ORDER BY {}", t.key_list()));
        }
        // Our own number, one more to tell whether there were more.
        sql.push_str(&format!(" LIMIT {}", limit + 1));
        let mut stmt = self.prepare_user(&conn, &sql)?;
        bind(&mut stmt, &args.params.0)?;
        let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
        let mut out = String::new();
        if csv {
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
            if csv {
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
        if !csv {
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
        let text =
            serde_json::to_string_pretty(&Value::Object(obj)).or_failed("cannot render the row")?;
        Ok(Some(format!("{text}\n")))
    }

    /// `read_body` of a table's row, a view's row, a query or a query's row.
    fn read_body(&self, node: &Node) -> HostResult<CallOutcome> {
        match node {
            Node::Row(t, k) => self.row_body(t, k),
            Node::ViewRow(v, n) => {
                let (names, values) = super::view::view_row(&self.main(), v, *n)?
                    .ok_or_else(|| HostError::NotFound(format!("view {v} has no row {n}")))?;
                let mut out = String::new();
                for (c, v) in names.iter().zip(&values) {
                    out.push_str(&format!("{c}: {}\n", full(v)));
                }
                Ok(CallOutcome::text(out))
            }
            Node::Query(id) => Ok(CallOutcome::text(self.query_body(*id)?)),
            Node::QueryRow(id, n) => Ok(CallOutcome::text(self.query_row_body(*id, *n)?)),
            _ => Err(elsewhere()),
        }
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
        arg: &str,
    ) -> HostResult<(Vec<String>, Vec<SqlValue>)> {
        no_nul_columns(values, arg)?;
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

    fn insert(
        &self,
        table: &str,
        values: &Map<String, Value>,
        run: &str,
    ) -> HostResult<CallOutcome> {
        let mut conn = self.main();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(user_err)?;
        let t = self.table_of(&tx, table)?;
        let (cols, bound) = Self::assignments(&t, values, "values")?;
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
        let text = format!(
            "inserted row {} into {}",
            super::keys::encode_key(&key),
            t.name
        );
        record_run(&tx, run, &text)?;
        tx.commit().map_err(user_err)?;
        let path = self.row_path(&t.name, &key);
        Ok(self.write_outcome(
            &t.name,
            text,
            std::slice::from_ref(&path),
            Some(path.clone()),
        ))
    }

    fn update(
        &self,
        table: &str,
        seg: &str,
        set: &Map<String, Value>,
        run: &str,
    ) -> HostResult<CallOutcome> {
        let mut conn = self.main();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(user_err)?;
        let (t, key) = self.row_of(&tx, table, seg)?;
        let (cols, mut bound) = Self::assignments(&t, set, "set")?;
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
        let text = format!(
            "updated row {} of {}",
            super::keys::encode_key(&new_key),
            t.name
        );
        record_run(&tx, run, &text)?;
        tx.commit().map_err(user_err)?;
        let old = self.row_path(&t.name, &key);
        let new = self.row_path(&t.name, &new_key);
        Ok(self.write_outcome(&t.name, text, &[old, new.clone()], Some(new)))
    }

    fn delete(&self, table: &str, seg: &str, run: &str) -> HostResult<CallOutcome> {
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
        let text = format!(
            "deleted row {} of {}",
            super::keys::encode_key(&key),
            t.name
        );
        record_run(&tx, run, &text)?;
        tx.commit().map_err(user_err)?;
        let path = self.row_path(&t.name, &key);
        Ok(self.write_outcome(&t.name, text, &[path], None))
    }
}

/// The table where a writable database keeps the runs whose writes it committed, so a run
/// a crash cut off is settled (`DbHost::settle`): made at the first write, one row a write.
pub(super) const RUNS_TABLE: &str = "wip_runs";

/// Keep `run` (a `Caller::run`) and its result in the write's own transaction.
fn record_run(tx: &rusqlite::Transaction<'_>, run: &str, text: &str) -> HostResult<()> {
    if run.is_empty() {
        return Ok(());
    }
    tx.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {RUNS_TABLE} (run TEXT PRIMARY KEY, result TEXT NOT NULL, at TEXT NOT NULL) WITHOUT ROWID"
    ))
    .map_err(db_err)?;
    tx.execute(
        &format!(
            "INSERT OR REPLACE INTO {RUNS_TABLE} (run, result, at) VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ','now'))"
        ),
        rusqlite::params![run, text],
    )
    .map_err(db_err)?;
    Ok(())
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
