//! Bodies and times of tracker entries: an issue's or pull request's markdown, a comment's
//! or review's text, a check's log; writable through `edit_body` where you may edit it.
//! An item's time is its last change (`updated_at`, moved by every change of it or its
//! comments); a comment's its last edit.

use super::ops::{Here, OPS};
use super::store::{args, Store};
use super::{db, Node, TrackerHost};
use crate::calendar::parse_iso;
use crate::host::{Body, HostResult};

impl TrackerHost {
    pub(super) fn body_in(&self, conn: &Store, node: &Node) -> HostResult<Option<Body>> {
        let (body, here) = match node {
            Node::Item(k, n) => match db::item(conn, *n)? {
                Some(item) if item.kind == *k => (
                    Body::bytes(item.body.clone()).modified(parse_iso(&item.updated_at)),
                    Here::of_item(item),
                ),
                _ => return Ok(None),
            },
            Node::Comment(_, n, c) => match db::comment(conn, *n, *c)? {
                Some(cm) => (
                    Body::bytes(cm.body).modified(comment_time(conn, *n, *c)?),
                    Here::read(conn, node.clone())?,
                ),
                None => return Ok(None),
            },
            Node::Review(n, r) => match db::review(conn, *n, *r)? {
                Some(rv) => {
                    return Ok(Some(
                        Body::bytes(rv.body).modified(parse_iso(&rv.created_at)),
                    ))
                }
                None => return Ok(None),
            },
            Node::Check(n, name) => match db::check(conn, *n, name)? {
                Some(c) => {
                    return Ok(Some(Body::bytes(c.log).modified(
                        self.modified_in(conn, &Node::Item(super::Kind::Pull, *n))?,
                    )))
                }
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        // Writable when you may run `edit_body` now.
        let editable = OPS.names(&here).contains(&"edit_body")
            && OPS.guard(self, conn, &here, "edit_body", None)?.allowed();
        Ok(Some(if editable {
            body.written_by(super::ops::name::EDIT_BODY, "body")
        } else {
            body
        }))
    }

    /// When an entry last changed, where the tracker records it.
    pub(super) fn modified_in(
        &self,
        conn: &Store,
        node: &Node,
    ) -> HostResult<Option<std::time::SystemTime>> {
        Ok(match node {
            Node::Item(_, n)
            | Node::Comments(_, n)
            | Node::Checks(n)
            | Node::Reviews(n)
            | Node::Check(n, _) => conn
                .query_opt("SELECT updated_at FROM items WHERE number = ?1", args![n])?
                .map(|mut r| r.text(0))
                .transpose()?
                .as_deref()
                .and_then(parse_iso),
            Node::Comment(_, n, c) => comment_time(conn, *n, *c)?,
            Node::Review(n, r) => {
                db::review(conn, *n, *r)?.and_then(|rv| parse_iso(&rv.created_at))
            }
            _ => None,
        })
    }
}

/// A comment's last edit, else its creation.
fn comment_time(conn: &Store, n: i64, c: i64) -> HostResult<Option<std::time::SystemTime>> {
    let at = conn
        .query_opt(
            "SELECT coalesce(edited_at, created_at) FROM comments WHERE number = ?1 AND seq = ?2",
            args![n, c],
        )?
        .map(|mut r| r.text(0))
        .transpose()?;
    Ok(at.as_deref().and_then(parse_iso))
}
