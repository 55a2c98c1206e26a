//! The tracker's offer to search: one document per issue and per pull request, by number.
//!
//! Text is the title, the body, every comment and every review body. The version joins the
//! update time, the state and the comment and review counts, so a comment, a review, a close
//! or a merge each give a new version.

use super::db::limit_of;
use super::store::{args, Store};
use super::{Kind, Node, TrackerHost};
use crate::host::names::canonical_number;
use crate::host::{Document, DocumentPage, HostError, HostResult};

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

fn items_after(conn: &Store, after: i64, limit: usize) -> HostResult<Vec<Row>> {
    conn.query(
        "SELECT number, kind, title, body, state, updated_at FROM items
         WHERE number > ?1 ORDER BY number LIMIT ?2",
        args![after, limit_of(limit)],
    )?
    .into_iter()
    .map(|mut r| {
        let kind = r.text(1)?;
        Ok(Row {
            number: r.int(0)?,
            kind: Kind::from_db(&kind).unwrap_or(Kind::Issue),
            title: r.text(2)?,
            body: r.text(3)?,
            state: r.text(4)?,
            updated_at: r.text(5)?,
        })
    })
    .collect()
}

/// Comment and review counts of an item, and its comments then reviews as text, in order.
fn discussion(conn: &Store, number: i64) -> HostResult<(usize, usize, Vec<String>)> {
    let mut out = Vec::new();
    let comments = conn.query(
        "SELECT author, body FROM comments WHERE number = ?1 ORDER BY seq",
        args![number],
    )?;
    let reviews = conn.query(
        "SELECT author, state, body FROM reviews WHERE number = ?1 ORDER BY seq",
        args![number],
    )?;
    let (nc, nr) = (comments.len(), reviews.len());
    for mut r in comments {
        out.push(format!("{}: {}", r.text(0)?, r.text(1)?));
    }
    for mut r in reviews {
        let (author, state, body) = (r.text(0)?, r.text(1)?, r.text(2)?);
        out.push(format!("{author} ({}): {body}", state.replace('_', " ")));
    }
    Ok((nc, nr, out))
}

fn document(conn: &Store, row: Row) -> HostResult<Document> {
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
