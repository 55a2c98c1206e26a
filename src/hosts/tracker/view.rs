//! What entries show of themselves: one-line descriptions, refs and listings.

use super::store::Store;

use super::db::{self, Item};
use super::{Kind, Node, TrackerHost};
pub(super) use crate::host::text::{and_list, plural};
use crate::host::{Child, EntryInfo, HostResult};

/// The first words of a text on one line, at most about `max` characters.
pub(super) fn excerpt(text: &str, max: usize) -> String {
    let flat: Vec<&str> = text.split_whitespace().collect();
    let mut out = String::new();
    for word in flat {
        let extra = if out.is_empty() { 0 } else { 1 } + word.chars().count();
        if out.chars().count() + extra > max {
            if out.is_empty() {
                out = word.chars().take(max).collect();
            }
            out.push('…');
            return out;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

impl TrackerHost {
    pub(super) fn info(&self, conn: &Store, node: &Node) -> HostResult<EntryInfo> {
        if let Node::Item(_, n) = node {
            let item = db::item_req(conn, *n)?;
            return self.item_info(conn, &item);
        }
        let description = self.describe(conn, node)?;
        Ok(EntryInfo::new(description, self.reference(node)))
    }

    /// An issue or pull request: its line, its ref, and its title for titled names.
    fn item_info(&self, conn: &Store, item: &Item) -> HostResult<EntryInfo> {
        let node = Node::Item(item.kind, item.number);
        // The time too: a walk then asks no entry of a listing when it changed.
        Ok(
            EntryInfo::new(self.item_line(conn, item)?, self.reference(&node))
                .titled(item.title.clone())
                .modified(crate::calendar::parse_iso(&item.updated_at)),
        )
    }

    fn describe(&self, conn: &Store, node: &Node) -> HostResult<String> {
        let page = self.page_size;
        Ok(match node {
            Node::Root => {
                let (issues, open, _) = db::counts(conn, Kind::Issue)?;
                let (pulls, pulls_open, _) = db::counts(conn, Kind::Pull)?;
                format!(
                    "Issue tracker · project {} · {} ({open} open) · {} ({pulls_open} open) · on {} · you are {} ({})",
                    self.project,
                    plural(issues, "issue", "issues"),
                    plural(pulls, "pull request", "pull requests"),
                    self.engine_words(),
                    self.me.user,
                    self.me.role.as_str()
                )
            }
            Node::Issues => {
                let (total, open, _) = db::counts(conn, Kind::Issue)?;
                format!(
                    "{} in {} ({open} open, {} closed), newest first. {} Any issue is reachable by number (cd issues/N); pull requests share the numbers and live in pulls/.",
                    plural(total, "issue", "issues"),
                    self.project,
                    total - open,
                    shown(total, page, "newest")
                )
            }
            Node::Pulls => {
                let (total, open, merged) = db::counts(conn, Kind::Pull)?;
                format!(
                    "{} in {} ({open} open, {merged} merged, {} closed), newest first. {} Any is reachable by number (cd pulls/N).",
                    plural(total, "pull request", "pull requests"),
                    self.project,
                    total - open - merged,
                    shown(total, page, "newest")
                )
            }
            Node::Labels => {
                let n = db::label_names(conn)?.len();
                format!(
                    "{} in {}; each label's ops/issues lists the issues and pull requests carrying it.",
                    plural(n as i64, "label", "labels"),
                    self.project
                )
            }
            Node::Users => {
                let n = db::user_names(conn)?.len();
                format!(
                    "{} in {}; you are {} ({}). Each user's ops/issues lists what they opened or are assigned.",
                    plural(n as i64, "person", "people"),
                    self.project,
                    self.me.user,
                    self.me.role.as_str()
                )
            }
            Node::Item(_, n) => {
                let item = db::item_req(conn, *n)?;
                self.item_line(conn, &item)?
            }
            Node::Comments(kind, n) => {
                let count = db::comment_count(conn, *n)?;
                format!(
                    "{} on {}, oldest first. {} Any comment is reachable by number.",
                    plural(count, "comment", "comments"),
                    item_name(*kind, *n),
                    shown(count, page, "first")
                )
            }
            Node::Comment(_, n, c) => match db::comment(conn, *n, *c)? {
                Some(cm) => format!(
                    "Comment {c} on #{n} · {} · {} · {}",
                    cm.author,
                    db::day(&cm.created_at),
                    excerpt(&cm.body, 60)
                ),
                None => format!("Comment {c} on #{n}"),
            },
            Node::Checks(n) => {
                let checks = db::checks(conn, *n)?;
                let failing: Vec<String> = checks
                    .iter()
                    .filter(|c| c.status == "failure")
                    .map(|c| c.name.clone())
                    .collect();
                let pending = checks.iter().filter(|c| c.status == "pending").count();
                let passing = checks.iter().filter(|c| c.status == "success").count();
                let mut s = format!(
                    "{} on PR #{n}: {passing} passing",
                    plural(checks.len() as i64, "check", "checks")
                );
                if !failing.is_empty() {
                    s.push_str(&format!(
                        ", {} failing ({})",
                        failing.len(),
                        failing.join(", ")
                    ));
                }
                if pending > 0 {
                    s.push_str(&format!(", {pending} pending"));
                }
                s
            }
            Node::Check(n, name) => match db::check(conn, *n, name)? {
                Some(c) => format!("Check {} · {} · {}", c.name, c.status, c.summary),
                None => format!("Check {name}"),
            },
            Node::Reviews(n) => {
                let pull = db::item_req(conn, *n)?;
                let reviews = db::reviews(conn, *n, usize::MAX)?;
                let rs = db::review_state(conn, &pull)?;
                let mut s = if reviews.is_empty() {
                    format!("No reviews yet on PR #{n}")
                } else {
                    format!(
                        "{} on PR #{n}: {}",
                        plural(reviews.len() as i64, "review", "reviews"),
                        review_phrase(&rs, &pull)
                    )
                };
                if !rs.requested.is_empty() {
                    s.push_str(&format!(
                        "; review requested from {}",
                        and_list(&rs.requested)
                    ));
                }
                s
            }
            Node::Review(n, r) => match db::review(conn, *n, *r)? {
                Some(rv) => format!(
                    "Review {r} · {} · {}",
                    rv.author,
                    rv.state.replace('_', " ")
                ),
                None => format!("Review {r} on PR #{n}"),
            },
            Node::Label(name) => match db::label(conn, name)? {
                Some(l) => format!(
                    "Label {} · {} · {}",
                    l.name,
                    plural(
                        db::label_open_issues(conn, name)?,
                        "open issue",
                        "open issues"
                    ),
                    l.description
                ),
                None => format!("Label {name}"),
            },
            Node::User(name) => match db::user(conn, name)? {
                Some(u) => {
                    let you = u.name == self.me.user;
                    // The mount's identity acts with the manifest's role: show that one.
                    let role = if you {
                        self.me.role.as_str().to_string()
                    } else {
                        u.role.clone()
                    };
                    let mut s = format!("{} · {role}", u.name);
                    if !u.full_name.is_empty() {
                        s.push_str(&format!(" · {}", u.full_name));
                    }
                    if you {
                        s.push_str(" · you");
                    }
                    s
                }
                None => name.clone(),
            },
        })
    }

    /// The one-line description of an issue or pull request.
    pub(super) fn item_line(&self, conn: &Store, item: &Item) -> HostResult<String> {
        let mut parts = vec![item.label(), item.state.clone(), item.title.clone()];
        match item.kind {
            Kind::Issue => {
                let labels = db::labels_of(conn, item.number)?;
                if !labels.is_empty() {
                    parts.push(labels.join(", "));
                }
                parts.push(plural(
                    db::comment_count(conn, item.number)?,
                    "comment",
                    "comments",
                ));
                let assignees = db::assignees_of(conn, item.number)?;
                if !assignees.is_empty() {
                    parts.push(format!("assigned to {}", and_list(&assignees)));
                }
            }
            Kind::Pull => {
                parts.push(format!("by {}", item.author));
                if item.state == "merged" {
                    parts.push(format!(
                        "merged by {} on {}",
                        item.closed_by.as_deref().unwrap_or("someone"),
                        db::day(item.closed_at.as_deref().unwrap_or(""))
                    ));
                } else {
                    let checks = db::checks(conn, item.number)?;
                    let passing = checks.iter().filter(|c| c.status == "success").count();
                    parts.push(format!("checks {passing}/{} passing", checks.len()));
                    let rs = db::review_state(conn, item)?;
                    parts.push(review_phrase(&rs, item));
                    if !item.mergeable {
                        parts.push("merge conflicts".to_string());
                    }
                }
            }
        }
        Ok(parts.join(" · "))
    }

    pub(super) fn list(&self, conn: &Store, node: &Node) -> HostResult<Vec<Child>> {
        let page = self.page_size;
        let child = |n: Node, name: String| -> HostResult<Child> {
            let info = self.info(conn, &n)?;
            let info = match info.modified {
                Some(_) => info,
                None => info.modified(self.modified_in(conn, &n)?),
            };
            Ok(Child { name, info })
        };
        let mut out = Vec::new();
        match node {
            Node::Root => {
                for (n, name) in [
                    (Node::Issues, "issues"),
                    (Node::Pulls, "pulls"),
                    (Node::Labels, "labels"),
                    (Node::Users, "users"),
                ] {
                    out.push(child(n, name.to_string())?);
                }
            }
            Node::Issues | Node::Pulls => {
                let kind = if *node == Node::Issues {
                    Kind::Issue
                } else {
                    Kind::Pull
                };
                for item in db::items_newest(conn, kind, page)? {
                    out.push(Child {
                        name: item.number.to_string(),
                        info: self.item_info(conn, &item)?,
                    });
                }
            }
            Node::Labels => {
                for l in db::labels(conn, page)? {
                    out.push(child(Node::Label(l.name.clone()), l.name)?);
                }
            }
            Node::Users => {
                for u in db::users(conn, page)? {
                    out.push(child(Node::User(u.name.clone()), u.name)?);
                }
            }
            Node::Item(kind, n) => {
                out.push(child(Node::Comments(*kind, *n), "comments".into())?);
                if *kind == Kind::Pull {
                    out.push(child(Node::Checks(*n), "checks".into())?);
                    out.push(child(Node::Reviews(*n), "reviews".into())?);
                }
            }
            Node::Comments(kind, n) => {
                for c in db::comments(conn, *n, page)? {
                    out.push(child(Node::Comment(*kind, *n, c.seq), c.seq.to_string())?);
                }
            }
            Node::Checks(n) => {
                for c in db::checks(conn, *n)?.into_iter().take(page) {
                    out.push(child(Node::Check(*n, c.name.clone()), c.name)?);
                }
            }
            Node::Reviews(n) => {
                for r in db::reviews(conn, *n, page)? {
                    out.push(child(Node::Review(*n, r.seq), r.seq.to_string())?);
                }
            }
            Node::Comment(..)
            | Node::Check(..)
            | Node::Review(..)
            | Node::Label(_)
            | Node::User(_) => {}
        }
        Ok(out)
    }
}

/// `#42` for issues, `PR #50` for pull requests.
pub(super) fn item_name(kind: Kind, n: i64) -> String {
    match kind {
        Kind::Issue => format!("issue #{n}"),
        Kind::Pull => format!("PR #{n}"),
    }
}

/// What a listing of `total` shows with a bound of `page`.
fn shown(total: i64, page: usize, which: &str) -> String {
    if total <= page as i64 {
        "All are listed.".to_string()
    } else {
        format!("The listing shows the {which} {page}.")
    }
}

/// Where a pull request's review stands, in a few words.
pub(super) fn review_phrase(rs: &db::ReviewState, pull: &Item) -> String {
    if pull.state == "merged" {
        "merged".to_string()
    } else if !rs.changes_by.is_empty() {
        format!("changes requested by {}", and_list(&rs.changes_by))
    } else if !rs.approvers.is_empty() {
        format!("approved by {}", and_list(&rs.approvers))
    } else if !rs.requested.is_empty() {
        format!("review requested from {}", and_list(&rs.requested))
    } else {
        "review required".to_string()
    }
}
