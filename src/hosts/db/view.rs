//! What entries show: descriptions, refs and listings, and how values are written.
//!
//! Listings are bounded by `page_size` and never count; descriptions count rows on demand
//! (`SELECT count(*)`, fast on SQLite's B-trees) when they are read.

use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;

use super::keys::{self, Affinity};
use super::schema::{self, quote, Table};
use super::{db_err, DbHost, Node};
use crate::host::{Child, EntryInfo, HostError, HostResult};

/// Width of a row's one-line description.
const LINE: usize = 120;

pub(super) use crate::host::text::plural;

/// At most `max` characters, with `…` when cut.
pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

pub(super) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A value in full, as `read_body` shows it (blobs as hex, at most 1 KiB of it).
pub(super) fn full(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "NULL".to_string(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => format!("{f:?}"),
        SqlValue::Text(t) => t.clone(),
        SqlValue::Blob(b) if b.len() <= 1024 => format!("x'{}' ({} bytes)", hex(b), b.len()),
        SqlValue::Blob(b) => format!("x'{}…' ({} bytes)", hex(&b[..1024]), b.len()),
    }
}

/// A value on one line, at most `max` characters.
pub(super) fn short(v: &SqlValue, max: usize) -> String {
    match v {
        SqlValue::Blob(b) => format!("<blob {} bytes>", b.len()),
        other => truncate(&full(other).replace(['\n', '\r', '\t'], " "), max),
    }
}

/// `a=1 · b=foo`, cut to one line.
pub(super) fn line(names: &[String], values: &[SqlValue]) -> String {
    let parts: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}={}", short(v, 60)))
        .collect();
    truncate(&parts.join(" · "), LINE)
}

/// The columns that say most about a row: name/title-like first, then e-mail-like, then
/// other words, then numbers and foreign keys; key columns are in the path already.
pub(super) fn telling_columns(t: &Table) -> Vec<String> {
    let rank = |c: &schema::Column| -> u8 {
        let n = c.name.to_ascii_lowercase();
        if n.contains("name") || n.contains("title") {
            0
        } else if n.contains("mail") {
            1
        } else if [
            "subject", "label", "code", "city", "country", "status", "state", "type",
        ]
        .iter()
        .any(|w| n.contains(w))
        {
            2
        } else if t.fk_of(&c.name).is_some() {
            5
        } else if c.affinity == Affinity::Text {
            3
        } else {
            4
        }
    };
    let mut cols: Vec<&schema::Column> = t
        .columns
        .iter()
        .filter(|c| !t.is_key_column(&c.name))
        .collect();
    cols.sort_by_key(|c| rank(c));
    let mut names: Vec<String> = cols.into_iter().take(6).map(|c| c.name.clone()).collect();
    if names.is_empty() {
        // A table of nothing but its key: show the key's columns.
        names = t.key_names();
    }
    names
}

/// `TrackId INTEGER, Name TEXT, AlbumId INTEGER → Album, …`
fn column_list(t: &Table) -> String {
    let cols: Vec<String> = t
        .columns
        .iter()
        .map(|c| {
            let mut s = c.name.clone();
            if !c.decl.is_empty() {
                s.push(' ');
                s.push_str(&c.decl);
            }
            if let Some(fk) = t.fk_of(&c.name) {
                s.push_str(" → ");
                s.push_str(&fk.table);
            }
            s
        })
        .collect();
    let all = cols.join(", ");
    if all.chars().count() <= 600 {
        all
    } else {
        format!(
            "{} (and more: {} columns in all, see ops/schema)",
            truncate(&all, 600),
            t.columns.len()
        )
    }
}

fn count_rows(conn: &Connection, name: &str) -> HostResult<u64> {
    conn.query_row(&format!("SELECT count(*) FROM {}", quote(name)), [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n.max(0) as u64)
    .map_err(db_err)
}

fn read_row(
    conn: &Connection,
    t: &Table,
    key: &[SqlValue],
    cols: &[String],
) -> HostResult<Option<Vec<SqlValue>>> {
    let (filter, params) = t.key_filter(key, 0);
    let list: Vec<String> = cols.iter().map(|c| quote(c)).collect();
    let sql = format!(
        "SELECT {} FROM {} WHERE {filter} LIMIT 1",
        if list.is_empty() {
            "1".to_string()
        } else {
            list.join(", ")
        },
        quote(&t.name)
    );
    let mut stmt = conn.prepare(&sql).map_err(db_err)?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params.iter()))
        .map_err(db_err)?;
    match rows.next().map_err(db_err)? {
        None => Ok(None),
        Some(r) => Ok(Some(
            (0..cols.len())
                .map(|i| r.get::<_, SqlValue>(i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?,
        )),
    }
}

/// Every column of a table row, for `read_body` and the ops.
pub(super) fn whole_row(
    conn: &Connection,
    t: &Table,
    key: &[SqlValue],
) -> HostResult<Option<Vec<SqlValue>>> {
    let cols: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
    read_row(conn, t, key, &cols)
}

/// One row of a view by 1-based position: its column names and values.
pub(super) fn view_row(
    conn: &Connection,
    view: &str,
    n: u64,
) -> HostResult<Option<(Vec<String>, Vec<SqlValue>)>> {
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {} LIMIT 1 OFFSET ?1", quote(view)))
        .map_err(db_err)?;
    let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
    let mut rows = stmt.query([(n - 1) as i64]).map_err(db_err)?;
    match rows.next().map_err(db_err)? {
        None => Ok(None),
        Some(r) => {
            let values = (0..names.len())
                .map(|i| r.get::<_, SqlValue>(i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?;
            Ok(Some((names, values)))
        }
    }
}

impl DbHost {
    pub(super) fn table_of(&self, conn: &Connection, name: &str) -> HostResult<Table> {
        schema::table(conn, name)?
            .ok_or_else(|| HostError::NotFound(format!("no table {name:?} in {}", self.file_name)))
    }

    /// The key a row's path segment names, if it is the canonical name of a key of `t`.
    pub(super) fn key_of(&self, t: &Table, segment: &str) -> Option<Vec<SqlValue>> {
        keys::decode_key(segment, &t.key_affinities())
    }

    fn row_info(&self, node: &Node, line: String) -> EntryInfo {
        EntryInfo::new(line, self.reference(node))
    }

    /// The columns a table row's entry reads: its telling columns, then the manifest's
    /// title column if it is not among them; and where the title is.
    fn row_columns(&self, t: &Table) -> (Vec<String>, usize, Option<usize>) {
        let mut cols = telling_columns(t);
        let shown = cols.len();
        let title = self.titles.get(&t.name).map(|c| {
            cols.iter().position(|x| x == c).unwrap_or_else(|| {
                cols.push(c.clone());
                cols.len() - 1
            })
        });
        (cols, shown, title)
    }

    /// A table row's entry from the values of `row_columns`.
    fn table_row_info(
        &self,
        node: &Node,
        (cols, shown, title): &(Vec<String>, usize, Option<usize>),
        values: &[SqlValue],
    ) -> EntryInfo {
        let info = self.row_info(node, line(&cols[..*shown], &values[..*shown]));
        match title.and_then(|i| values.get(i)) {
            None | Some(SqlValue::Null) | Some(SqlValue::Blob(_)) => info,
            Some(v) => info.titled(full(v)),
        }
    }

    /// The entry at `node`, or `None` if it does not exist.
    pub(super) fn info(&self, node: &Node) -> HostResult<Option<EntryInfo>> {
        let r = self.reference(node);
        let info = |d: String| Ok(Some(EntryInfo::new(d, r.clone())));
        match node {
            Node::Root => {
                let conn = self.main();
                let tables = schema::count(&conn, "table")?;
                let views = schema::count(&conn, "view")?;
                let size = std::fs::metadata(&self.file).map(|m| m.len()).unwrap_or(0);
                info(format!(
                    "SQLite database {} · {}, {} · {} · {}",
                    self.file_name,
                    plural(tables, "table", "tables"),
                    plural(views, "view", "views"),
                    if self.writable { "writable" } else { "read-only" },
                    human_size(size)
                ))
            }
            Node::Tables => {
                let n = schema::count(&self.main(), "table")?;
                info(format!(
                    "{} of {} by name{}; each describes its columns, key and row count, its rows are under tables/T/rows",
                    plural(n, "table", "tables"),
                    self.file_name,
                    if n as usize > self.page_size { format!(" (the first {} listed; any is reachable by name)", self.page_size) } else { String::new() }
                ))
            }
            Node::Views => {
                let n = schema::count(&self.main(), "view")?;
                info(format!(
                    "{} of {} by name{}; rows of a view are listed by position",
                    plural(n, "view", "views"),
                    self.file_name,
                    if n as usize > self.page_size { format!(" (the first {} listed; any is reachable by name)", self.page_size) } else { String::new() }
                ))
            }
            Node::Queries => Ok(Some(EntryInfo {
                indexable: false,
                ..EntryInfo::new(
                    "Results of ops/query, one per query as queries/ID (reachable by path, not listed)",
                    r.clone(),
                )
            })),
            Node::Table(name) => {
                let conn = self.main();
                let Some(t) = schema::table(&conn, name)? else {
                    return Ok(None);
                };
                let rows = count_rows(&conn, name)?;
                info(format!(
                    "table {} · {} · key {} · {}",
                    t.name,
                    plural(rows, "row", "rows"),
                    t.key_names().join(", "),
                    column_list(&t)
                ))
            }
            Node::TableRows(name) => {
                let conn = self.main();
                let Some(t) = schema::table(&conn, name)? else {
                    return Ok(None);
                };
                let rows = count_rows(&conn, name)?;
                let example = self.first_key(&conn, &t)?.unwrap_or_else(|| match t.key_names().len() {
                    1 => "4711".to_string(),
                    n => vec!["1"; n].join(","),
                });
                let keyname = t.key_names().join(", ");
                info(format!(
                    "{} of table {}; the listing shows the first {} by key ({keyname}); any row is reachable by its key: rows/{example}{}",
                    plural(rows, "row", "rows"),
                    t.name,
                    self.page_size.min(rows as usize),
                    if t.key_names().len() > 1 { " (key columns joined by ',', each percent-encoding % , / and NUL)" } else { "" }
                ))
            }
            Node::Row(name, seg) => {
                let conn = self.main();
                let Some(t) = schema::table(&conn, name)? else {
                    return Ok(None);
                };
                let Some(key) = self.key_of(&t, seg) else {
                    return Ok(None);
                };
                let cols = self.row_columns(&t);
                Ok(read_row(&conn, &t, &key, &cols.0)?
                    .map(|values| self.table_row_info(node, &cols, &values)))
            }
            Node::View(name) => {
                let conn = self.main();
                if !schema::view_exists(&conn, name)? {
                    return Ok(None);
                }
                match schema::view_columns(&conn, name) {
                    Ok(cols) => info(format!("view {name} · columns {}", truncate(&cols.join(", "), 600))),
                    Err(e) => info(format!("view {name} · broken: {}", super::sqlite_words(&e))),
                }
            }
            Node::ViewRows(name) => {
                if !schema::view_exists(&self.main(), name)? {
                    return Ok(None);
                }
                info(format!(
                    "rows of view {name} by position; the listing shows the first {}; any row is reachable as rows/N (1-based); ops/count counts them",
                    self.page_size
                ))
            }
            Node::ViewRow(name, n) => {
                let conn = self.main();
                if !schema::view_exists(&conn, name)? {
                    return Ok(None);
                }
                Ok(view_row(&conn, name, *n)?.map(|(names, values)| self.row_info(node, line(&names, &values))))
            }
            Node::Query(id) => Ok(self.query_info(*id)?),
            Node::QueryRows(id) => {
                let Some(q) = self.stored(*id)? else {
                    return Ok(None);
                };
                info(format!(
                    "{} of query {id} (counted when it ran); the listing shows the first {}; any row is reachable as rows/N (1-based), re-read from the database",
                    plural(q.rows, "row", "rows"),
                    self.page_size.min(q.rows as usize)
                ))
            }
            Node::QueryRow(id, n) => self.query_row_info(*id, *n),
        }
    }

    /// The name of the first row by key, as an example path.
    fn first_key(&self, conn: &Connection, t: &Table) -> HostResult<Option<String>> {
        let page = self.key_page(conn, t, &[], 1)?;
        Ok(page.into_iter().next().map(|(k, _)| k))
    }

    /// The first `limit` rows by key: (path name, values of `cols`).
    fn key_page(
        &self,
        conn: &Connection,
        t: &Table,
        cols: &[String],
        limit: usize,
    ) -> HostResult<Vec<(String, Vec<SqlValue>)>> {
        let keys = t.key_exprs();
        let mut select = keys.clone();
        select.extend(cols.iter().map(|c| quote(c)));
        let sql = format!(
            "SELECT {} FROM {} ORDER BY {} LIMIT ?1",
            select.join(", "),
            quote(&t.name),
            keys.join(", ")
        );
        let mut stmt = conn.prepare(&sql).map_err(db_err)?;
        let mut rows = stmt.query([limit as i64]).map_err(db_err)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(db_err)? {
            let values = (0..select.len())
                .map(|i| r.get::<_, SqlValue>(i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?;
            let (key, rest) = values.split_at(keys.len());
            out.push((keys::encode_key(key), rest.to_vec()));
        }
        Ok(out)
    }

    /// Whether `node` exists, without counting anything.
    pub(super) fn exists(&self, node: &Node) -> HostResult<bool> {
        match node {
            Node::Root | Node::Tables | Node::Views | Node::Queries => Ok(true),
            Node::Table(t) | Node::TableRows(t) => Ok(schema::table(&self.main(), t)?.is_some()),
            Node::View(v) | Node::ViewRows(v) => schema::view_exists(&self.main(), v),
            Node::Query(id) | Node::QueryRows(id) => Ok(self.stored(*id)?.is_some()),
            Node::Row(..) | Node::ViewRow(..) | Node::QueryRow(..) => {
                Ok(self.info(node)?.is_some())
            }
        }
    }

    fn child(&self, node: Node, description: String) -> Child {
        let path = node.path();
        Child {
            name: path.last().cloned().unwrap_or_default(),
            info: EntryInfo::new(description, self.reference(&node)),
        }
    }

    /// Children in listing order; bounded by `page_size`.
    pub(super) fn list(&self, node: &Node) -> HostResult<Vec<Child>> {
        Ok(match node {
            Node::Root => {
                let mut queries = self.child(Node::Queries, "query results".to_string());
                queries.info.indexable = false;
                vec![
                    self.child(Node::Tables, "tables".to_string()),
                    self.child(Node::Views, "views".to_string()),
                    queries,
                ]
            }
            Node::Tables => schema::names(&self.main(), "table", self.page_size)?
                .into_iter()
                .map(|t| self.child(Node::Table(t.clone()), format!("table {t}")))
                .collect(),
            Node::Views => schema::names(&self.main(), "view", self.page_size)?
                .into_iter()
                .map(|v| self.child(Node::View(v.clone()), format!("view {v}")))
                .collect(),
            Node::Table(t) => vec![self.child(Node::TableRows(t.clone()), format!("rows of {t}"))],
            Node::View(v) => vec![self.child(Node::ViewRows(v.clone()), format!("rows of {v}"))],
            Node::TableRows(name) => {
                let conn = self.main();
                let t = self.table_of(&conn, name)?;
                let cols = self.row_columns(&t);
                self.key_page(&conn, &t, &cols.0, self.page_size)?
                    .into_iter()
                    .map(|(k, values)| {
                        let node = Node::Row(name.clone(), k);
                        Child {
                            name: node.path().last().cloned().unwrap_or_default(),
                            info: self.table_row_info(&node, &cols, &values),
                        }
                    })
                    .collect()
            }
            Node::ViewRows(name) => {
                let conn = self.main();
                let mut stmt = conn
                    .prepare(&format!("SELECT * FROM {} LIMIT ?1", quote(name)))
                    .map_err(db_err)?;
                let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
                let mut rows = stmt.query([self.page_size as i64]).map_err(db_err)?;
                let mut out = Vec::new();
                let mut n = 0u64;
                while let Some(r) = rows.next().map_err(db_err)? {
                    n += 1;
                    let values = (0..names.len())
                        .map(|i| r.get::<_, SqlValue>(i))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(db_err)?;
                    out.push(self.child(Node::ViewRow(name.clone(), n), line(&names, &values)));
                }
                out
            }
            Node::Queries => self
                .recent_queries(self.page_size)?
                .into_iter()
                .map(|(id, sql)| {
                    let mut c = self.child(
                        Node::Query(id),
                        format!("Query {id} · {}", truncate(&sql, 60)),
                    );
                    c.info.indexable = false;
                    c
                })
                .collect(),
            Node::Query(id) => {
                vec![self.child(Node::QueryRows(*id), format!("rows of query {id}"))]
            }
            Node::QueryRows(id) => self.query_children(*id)?,
            Node::Row(..) | Node::ViewRow(..) | Node::QueryRow(..) => Vec::new(),
        })
    }
}
