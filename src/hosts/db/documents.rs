//! Rows offered to the world's search index (`Host::documents`), for the tables a manifest
//! names in `search`: one document per row, paged by table and offset.

use std::hash::{Hash, Hasher};

use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;

use super::schema::{self, quote};
use super::{db_err, keys, view};
use crate::host::{Document, DocumentPage, HostError, HostResult};

/// The cursor `TABLE_INDEX:OFFSET` → its parts (`None`: the start).
fn parse_cursor(cursor: Option<&str>) -> HostResult<(usize, usize)> {
    let Some(c) = cursor else {
        return Ok((0, 0));
    };
    c.split_once(':')
        .and_then(|(t, o)| Some((t.parse().ok()?, o.parse().ok()?)))
        .ok_or_else(|| HostError::InvalidArgs(format!("bad documents cursor {c:?}")))
}

/// A page of row documents of `tables`, from `cursor`.
pub(super) fn page(
    conn: &Connection,
    tables: &[String],
    cursor: Option<&str>,
    limit: usize,
) -> HostResult<DocumentPage> {
    let (mut table_index, mut offset) = parse_cursor(cursor)?;
    let mut docs = Vec::new();
    while table_index < tables.len() && docs.len() < limit {
        let Some(t) = schema::table(conn, &tables[table_index])? else {
            // Dropped since: nothing to offer from it.
            table_index += 1;
            offset = 0;
            continue;
        };
        let keys_sql = t.key_exprs();
        let cols: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
        let col_sql: Vec<String> = cols.iter().map(|c| quote(c)).collect();
        let sql = format!(
            "SELECT {}, {} FROM {} ORDER BY {} LIMIT ?1 OFFSET ?2",
            keys_sql.join(", "),
            col_sql.join(", "),
            quote(&t.name),
            keys_sql.join(", ")
        );
        let want = limit - docs.len();
        let telling = view::telling_columns(&t);
        let mut st = conn.prepare_cached(&sql).map_err(db_err)?;
        let mut rows = st
            .query(rusqlite::params![want as i64, offset as i64])
            .map_err(db_err)?;
        let mut read = 0;
        while let Some(r) = rows.next().map_err(db_err)? {
            let k = keys_sql.len();
            let values = (0..k + cols.len())
                .map(|i| r.get::<_, SqlValue>(i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?;
            let (key, row) = values.split_at(k);
            let shown: Vec<SqlValue> = telling
                .iter()
                .map(|name| {
                    cols.iter()
                        .position(|c| c == name)
                        .map(|i| row[i].clone())
                        .unwrap_or(SqlValue::Null)
                })
                .collect();
            let name = keys::encode_key(key);
            let text: String = cols
                .iter()
                .zip(row)
                .map(|(c, v)| format!("{c}: {}\n", view::full(v)))
                .collect();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut h);
            docs.push(Document {
                path: vec![
                    "tables".to_string(),
                    keys::encode_name(&t.name),
                    "rows".to_string(),
                    name.clone(),
                ],
                title: format!("{} {name}: {}", t.name, view::line(&telling, &shown)),
                text,
                version: format!("{:016x}", h.finish()),
            });
            read += 1;
        }
        offset += read;
        if read < want {
            table_index += 1;
            offset = 0;
        }
    }
    let next = (table_index < tables.len()).then(|| format!("{table_index}:{offset}"));
    Ok((docs, next))
}
