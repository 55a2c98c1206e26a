//! What the database holds, read from `sqlite_master` and the schema pragmas at every look:
//! tables (columns, key, foreign keys) and views. Nothing is cached, so a schema change made
//! by another process shows up at the next look; each read is a few B-tree lookups.

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::keys::{self, Affinity};
use super::{db_err, HostResult};

/// A column of a table.
#[derive(Clone, Debug)]
pub(super) struct Column {
    pub name: String,
    /// Declared type, as written (`NVARCHAR(120)`), possibly empty.
    pub decl: String,
    pub affinity: Affinity,
}

/// A foreign key: `from` columns of this table point at `to` columns of `table` (`None`: the
/// referenced table's primary key).
#[derive(Clone, Debug)]
pub(super) struct ForeignKey {
    pub table: String,
    pub from: Vec<String>,
    pub to: Vec<Option<String>>,
}

/// How rows of a table are named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Key {
    /// No declared primary key: the rowid, under this name (`rowid`, or `_rowid_`/`oid`
    /// when a column shadows it).
    Rowid(String),
    /// The declared primary key's columns, in key order.
    Columns(Vec<String>),
}

#[derive(Clone, Debug)]
pub(super) struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    pub key: Key,
    pub fks: Vec<ForeignKey>,
}

/// `"name"` with embedded quotes doubled.
pub(super) fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// Objects SQLite keeps for itself (`sqlite_sequence`, `sqlite_stat1`) are not shown.
const USER_OBJECTS: &str = "name NOT LIKE 'sqlite\\_%' ESCAPE '\\'";

impl Table {
    /// Names of the key's columns (or the rowid's name).
    pub fn key_names(&self) -> Vec<String> {
        match &self.key {
            Key::Rowid(name) => vec![name.clone()],
            Key::Columns(cols) => cols.clone(),
        }
    }

    /// SQL expressions of the key, in order.
    pub fn key_exprs(&self) -> Vec<String> {
        match &self.key {
            Key::Rowid(name) => vec![name.clone()],
            Key::Columns(cols) => cols.iter().map(|c| quote(c)).collect(),
        }
    }

    pub fn key_list(&self) -> String {
        self.key_exprs().join(", ")
    }

    pub fn key_affinities(&self) -> Vec<Affinity> {
        match &self.key {
            Key::Rowid(_) => vec![Affinity::Integer],
            Key::Columns(cols) => cols
                .iter()
                .map(|c| self.column(c).map_or(Affinity::Blob, |col| col.affinity))
                .collect(),
        }
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }

    pub fn is_key_column(&self, name: &str) -> bool {
        self.key_names()
            .iter()
            .any(|k| k.eq_ignore_ascii_case(name))
    }

    /// `WHERE` clause (without the keyword) selecting the row with this key, and its
    /// parameters. NULL components compare with `IS NULL`.
    /// `first` is the number of parameters bound before these.
    pub fn key_filter(&self, key: &[Value], first: usize) -> (String, Vec<Value>) {
        filter(&self.key_exprs(), key, first)
    }

    /// The foreign key whose single `from` column is `column`, for the `→ Table` marks.
    pub fn fk_of(&self, column: &str) -> Option<&ForeignKey> {
        self.fks
            .iter()
            .find(|fk| fk.from.len() == 1 && fk.from[0].eq_ignore_ascii_case(column))
    }
}

/// `a = ?1 AND b IS NULL` for these SQL expressions and values; parameters numbered after
/// `first` already bound.
pub(super) fn filter(exprs: &[String], values: &[Value], first: usize) -> (String, Vec<Value>) {
    let mut clauses = Vec::new();
    let mut bound = Vec::new();
    for (expr, v) in exprs.iter().zip(values) {
        if matches!(v, Value::Null) {
            clauses.push(format!("{expr} IS NULL"));
        } else {
            bound.push(v.clone());
            clauses.push(format!("{expr} = ?{}", first + bound.len()));
        }
    }
    (clauses.join(" AND "), bound)
}

/// The table named exactly `name` (case-sensitive, as the path spells it), if there is one.
pub(super) fn table(conn: &Connection, name: &str) -> HostResult<Option<Table>> {
    let exists: Option<String> = conn
        .query_row(
            &format!("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1 AND {USER_OBJECTS}"),
            [name],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    let Some(name) = exists else {
        return Ok(None);
    };
    let mut columns = Vec::new();
    let mut pk: Vec<(i64, String)> = Vec::new();
    {
        let mut stmt = conn
            .prepare("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")
            .map_err(db_err)?;
        let mut rows = stmt.query([&name]).map_err(db_err)?;
        while let Some(r) = rows.next().map_err(db_err)? {
            let col: String = r.get(0).map_err(db_err)?;
            let decl: String = r
                .get::<_, Option<String>>(1)
                .map_err(db_err)?
                .unwrap_or_default();
            let pos: i64 = r.get(2).map_err(db_err)?;
            if pos > 0 {
                pk.push((pos, col.clone()));
            }
            columns.push(Column {
                affinity: keys::affinity(&decl),
                name: col,
                decl,
            });
        }
    }
    pk.sort();
    let key = if pk.is_empty() {
        let taken = |n: &str| columns.iter().any(|c| c.name.eq_ignore_ascii_case(n));
        let name = ["rowid", "_rowid_", "oid"]
            .into_iter()
            .find(|n| !taken(n))
            .unwrap_or("rowid");
        Key::Rowid(name.to_string())
    } else {
        Key::Columns(pk.into_iter().map(|(_, c)| c).collect())
    };
    let mut fks: Vec<(i64, ForeignKey)> = Vec::new();
    {
        let mut stmt = conn
            .prepare(
                "SELECT id, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?1) ORDER BY id, seq",
            )
            .map_err(db_err)?;
        let mut rows = stmt.query([&name]).map_err(db_err)?;
        while let Some(r) = rows.next().map_err(db_err)? {
            let id: i64 = r.get(0).map_err(db_err)?;
            let table: String = r.get(1).map_err(db_err)?;
            let from: String = r.get(2).map_err(db_err)?;
            let to: Option<String> = r.get(3).map_err(db_err)?;
            match fks.last_mut() {
                Some((last, fk)) if *last == id => {
                    fk.from.push(from);
                    fk.to.push(to);
                }
                _ => fks.push((
                    id,
                    ForeignKey {
                        table,
                        from: vec![from],
                        to: vec![to],
                    },
                )),
            }
        }
    }
    // pragma_foreign_key_list numbers keys from the last declared: show them as written.
    fks.reverse();
    Ok(Some(Table {
        name,
        columns,
        key,
        fks: fks.into_iter().map(|(_, fk)| fk).collect(),
    }))
}

/// The actual name of the table `name` refers to, ignoring case as SQLite does (foreign
/// keys may spell it differently).
pub(super) fn actual_table_name(conn: &Connection, name: &str) -> HostResult<Option<String>> {
    conn.query_row(
        &format!("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1 COLLATE NOCASE AND {USER_OBJECTS}"),
        [name],
        |r| r.get(0),
    )
    .optional()
    .map_err(db_err)
}

/// Names of tables or views (`kind`), by name, at most `limit`.
pub(super) fn names(conn: &Connection, kind: &str, limit: usize) -> HostResult<Vec<String>> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT name FROM sqlite_master WHERE type = ?1 AND {USER_OBJECTS} ORDER BY name LIMIT ?2"
        ))
        .map_err(db_err)?;
    let rows = stmt
        .query_map(params![kind, limit as i64], |r| r.get::<_, String>(0))
        .map_err(db_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
}

/// How many tables or views (`kind`) there are.
pub(super) fn count(conn: &Connection, kind: &str) -> HostResult<u64> {
    conn.query_row(
        &format!("SELECT count(*) FROM sqlite_master WHERE type = ?1 AND {USER_OBJECTS}"),
        [kind],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n.max(0) as u64)
    .map_err(db_err)
}

/// Whether a view named exactly `name` exists.
pub(super) fn view_exists(conn: &Connection, name: &str) -> HostResult<bool> {
    conn.query_row(
        &format!(
            "SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?1 AND {USER_OBJECTS}"
        ),
        [name],
        |_| Ok(()),
    )
    .optional()
    .map(|o| o.is_some())
    .map_err(db_err)
}

/// Names of a view's columns, or SQLite's error if it cannot be prepared (a broken view).
pub(super) fn view_columns(conn: &Connection, name: &str) -> rusqlite::Result<Vec<String>> {
    let stmt = conn.prepare(&format!("SELECT * FROM {}", quote(name)))?;
    Ok(stmt.column_names().map(|c| c.to_string()).collect())
}

/// The CREATE statement of one object, or of every object (`None`) with its indexes and
/// triggers, in the order they were created.
pub(super) fn create_statements(conn: &Connection, name: Option<&str>) -> HostResult<String> {
    let mut out = String::new();
    let mut push = |sql: String| {
        out.push_str(sql.trim_end_matches(';'));
        out.push_str(";\n");
    };
    match name {
        Some(name) => {
            let mut stmt = conn
                .prepare(
                    "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND (name = ?1 OR (tbl_name = ?1 AND type IN ('index', 'trigger'))) ORDER BY name <> ?1, rowid",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map([name], |r| r.get::<_, String>(0))
                .map_err(db_err)?;
            for sql in rows {
                push(sql.map_err(db_err)?);
            }
        }
        None => {
            let mut stmt = conn
                .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
                .map_err(db_err)?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(db_err)?;
            for sql in rows {
                push(sql.map_err(db_err)?);
            }
        }
    }
    Ok(out)
}

/// Tables with a foreign key into `target`: (table, its foreign keys into `target`).
pub(super) fn referencing(
    conn: &Connection,
    target: &str,
) -> HostResult<Vec<(Table, Vec<ForeignKey>)>> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT DISTINCT m.name FROM sqlite_master m, pragma_foreign_key_list(m.name) f
             WHERE m.type = 'table' AND {} AND f.\"table\" = ?1 COLLATE NOCASE ORDER BY m.name",
            USER_OBJECTS.replace("name", "m.name")
        ))
        .map_err(db_err)?;
    let names = stmt
        .query_map([target], |r| r.get::<_, String>(0))
        .map_err(db_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db_err)?;
    let mut out = Vec::new();
    for name in names {
        if let Some(t) = table(conn, &name)? {
            let fks: Vec<ForeignKey> = t
                .fks
                .iter()
                .filter(|fk| fk.table.eq_ignore_ascii_case(target))
                .cloned()
                .collect();
            if !fks.is_empty() {
                out.push((t, fks));
            }
        }
    }
    Ok(out)
}
