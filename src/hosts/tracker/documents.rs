//! The tracker's offer to search: one document per issue and per pull request, by number.
//!
//! Text is the title, the body, every comment and every review body. The version joins the
//! update time, the state and the comment and review counts, so a comment, a review, a close
//! or a merge each give a new version.

use rusqlite::{params, Connection};

use super::{Kind, Node, TrackerHost, DB};
use crate::world::host::{Document, DocumentPage, HostError, HostResult, OrFailed};
use crate::world::names::canonical_number;

/// An item's own columns, as search needs them.
struct Row {
    number: i64,
    kind: Kind,
    title: String,
    body: String,
    state: String,
    updated_at: String,
}

impl TrackerHost {
    /// Items with a number above `cursor`, at most `limit`, by number.
    pub(super) fn documents_page(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> HostResult<DocumentPage> {
        let after = match cursor {
            None => 0,
            Some(c) => canonical_number(c).ok_or_else(|| {
                HostError::InvalidArgs(format!(
                    "bad documents cursor {c:?}: an item number expected"
                ))
            })?,
        };
        let limit = limit.max(1);
        self.read(|conn| {
            let rows = items_after(conn, after, limit)?;
            let full = rows.len() >= limit;
            let next = rows.last().filter(|_| full).map(|r| r.number.to_string());
            let mut docs = Vec::with_capacity(rows.len());
            for row in rows {
                docs.push(document(conn, row)?);
            }
            Ok((docs, next))
        })
    }
}

fn items_after(conn: &Connection, after: i64, limit: usize) -> HostResult<Vec<Row>> {
    let mut st = conn
        .prepare_cached(
            "SELECT number, kind, title, body, state, updated_at FROM items
             WHERE number > ?1 ORDER BY number LIMIT ?2",
        )
        .or_failed(DB)?;
    let rows = st
        .query_map(
            params![after, i64::try_from(limit).unwrap_or(i64::MAX)],
            |r| {
                let kind: String = r.get(1)?;
                Ok(Row {
                    number: r.get(0)?,
                    kind: Kind::from_db(&kind).unwrap_or(Kind::Issue),
                    title: r.get(2)?,
                    body: r.get(3)?,
                    state: r.get(4)?,
                    updated_at: r.get(5)?,
                })
            },
        )
        .or_failed(DB)?;
    rows.collect::<Result<_, _>>().or_failed(DB)
}

/// Comment and review counts of an item, and its comments then reviews as text, in order.
fn discussion(conn: &Connection, number: i64) -> HostResult<(usize, usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut st = conn
        .prepare_cached("SELECT author, body FROM comments WHERE number = ?1 ORDER BY seq")
        .or_failed(DB)?;
    let comments: Vec<(String, String)> = st
        .query_map([number], |r| Ok((r.get(0)?, r.get(1)?)))
        .or_failed(DB)?
        .collect::<Result<_, _>>()
        .or_failed(DB)?;
    let mut st = conn
        .prepare_cached("SELECT author, state, body FROM reviews WHERE number = ?1 ORDER BY seq")
        .or_failed(DB)?;
    let reviews: Vec<(String, String, String)> = st
        .query_map([number], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .or_failed(DB)?
        .collect::<Result<_, _>>()
        .or_failed(DB)?;
    for (author, body) in &comments {
        out.push(format!("{author}: {body}"));
    }
    for (author, state, body) in &reviews {
        out.push(format!("{author} ({}): {body}", state.replace('_', " ")));
    }
    Ok((comments.len(), reviews.len(), out))
}

fn document(conn: &Connection, row: Row) -> HostResult<Document> {
    let (comments, reviews, discussion) = discussion(conn, row.number)?;
    let label = match row.kind {
        Kind::Issue => format!("Issue #{}", row.number),
        Kind::Pull => format!("PR #{}", row.number),
    };
    let title = format!("{label}: {}", row.title);
    let mut text = format!("{title}\n\n{}", row.body);
    for part in discussion {
        text.push_str("\n\n");
        text.push_str(&part);
    }
    Ok(Document {
        path: Node::Item(row.kind, row.number).path(),
        title,
        text,
        version: format!("{}|{}|c{comments}|r{reviews}", row.updated_at, row.state),
    })
}
