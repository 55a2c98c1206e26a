//! First-run content: the demo project (a small CLI tool, `demo`, that renames files in bulk
//! from templates) and optional synthetic issues for benchmarks.
//!
//! Pull requests are chosen so that each `merge` guard shows a different state:
//! #51 ready · #50 flaky check + unreviewed (fixes #42) · #52 lint fails for real ·
//! #53 review requested, none given · #54 authored by alex · #12 merged · #55 conflicts.
//! The project itself (people, labels, issues, pull requests) is data: `demo.toml`.

use std::sync::OnceLock;

use serde::Deserialize;

use super::db;
use super::store::{args, Store};
use crate::host::identity::Identity;
use crate::host::{HostError, HostResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Seed {
    Demo,
    None,
}

/// Timestamps of seeded items: item `n` is opened on day `2n` after this date.
fn base_day() -> i64 {
    db::days_from_civil(2026, 8, 2)
}

fn at(day: i64, hour: i64) -> String {
    db::iso(day * 86_400 + hour.rem_euclid(24) * 3600 + 17 * 60)
}

fn opened(n: i64) -> i64 {
    base_day() + 2 * n
}

/// The demo project as `demo.toml` has it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Demo {
    users: Vec<User>,
    labels: Vec<Label>,
    issues: Vec<Issue>,
    pulls: Vec<Pull>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct User {
    name: String,
    role: String,
    full_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Label {
    name: String,
    color: String,
    description: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Issue {
    n: i64,
    title: String,
    author: String,
    /// Who closed it and why, for closed issues.
    closed: Option<Closed>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    assignees: Vec<String>,
    body: String,
    #[serde(default)]
    comments: Vec<Comment>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Closed {
    by: String,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Comment {
    author: String,
    body: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Check {
    name: String,
    status: String,
    summary: String,
    retryable: bool,
    log: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Review {
    author: String,
    state: String,
    body: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pull {
    n: i64,
    title: String,
    author: String,
    head: String,
    /// Who merged it, for merged ones.
    merged_by: Option<String>,
    mergeable: bool,
    conflicts: Option<String>,
    #[serde(default)]
    fixes: Vec<i64>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    checks: Vec<Check>,
    #[serde(default)]
    reviews: Vec<Review>,
    #[serde(default)]
    requested: Vec<String>,
    #[serde(default)]
    comments: Vec<Comment>,
    body: String,
    diff: String,
}

/// The demo project, read once from the data built into the binary.
fn demo_data() -> HostResult<&'static Demo> {
    static DEMO: OnceLock<Result<Demo, toml::de::Error>> = OnceLock::new();
    DEMO.get_or_init(|| toml::from_str(include_str!("demo.toml")))
        .as_ref()
        .map_err(|e| HostError::Backend(format!("the demo project's data is unreadable: {e}")))
}

pub(super) fn seed(conn: &Store, seed: Seed, extra: u64, me: &Identity) -> HostResult<()> {
    match seed {
        Seed::Demo => {
            conn.execute(
                "INSERT INTO project (name, description) VALUES ('demo', ?1)",
                args!["demo: a small command-line tool that renames files in bulk from templates"],
            )?;
            demo(conn)?;
        }
        Seed::None => {
            conn.execute(
                "INSERT INTO project (name, description) VALUES ('demo', 'an empty project')",
                &[],
            )?;
        }
    }
    db::ensure_user(conn, me)?;
    if extra > 0 {
        synthetic(conn, extra, seed == Seed::Demo)?;
    }
    Ok(())
}

fn demo(conn: &Store) -> HostResult<()> {
    let data = demo_data()?;
    for u in &data.users {
        conn.execute(
            "INSERT INTO users (name, role, full_name) VALUES (?1, ?2, ?3)",
            args![&u.name, &u.role, &u.full_name],
        )?;
    }
    for l in &data.labels {
        conn.execute(
            "INSERT INTO labels (name, color, description) VALUES (?1, ?2, ?3)",
            args![&l.name, &l.color, &l.description],
        )?;
    }
    for i in &data.issues {
        let day = opened(i.n);
        let created = at(day, 9 + i.n % 7);
        let (state, closed_at, closed_by, reason) = match &i.closed {
            Some(c) => (
                "closed",
                Some(at(day + 3 * (i.comments.len() as i64 + 1), 16)),
                Some(c.by.as_str()),
                Some(c.reason.as_str()),
            ),
            None => ("open", None, None, None),
        };
        let last = closed_at
            .clone()
            .unwrap_or_else(|| at(day + 3 * i.comments.len() as i64, 15));
        conn.execute(
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at,
                                closed_at, closed_by, close_reason)
             VALUES (?1, 'issue', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            args![
                i.n,
                &i.title,
                &i.body,
                &i.author,
                state,
                &created,
                &last,
                closed_at.as_deref(),
                closed_by,
                reason
            ],
        )?;
        tags(conn, i.n, &i.labels, &i.assignees)?;
        for (k, c) in i.comments.iter().enumerate() {
            let k = k as i64 + 1;
            conn.execute(
                "INSERT INTO comments (number, seq, author, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![i.n, k, &c.author, &c.body, &at(day + 3 * k, 10 + k)],
            )?;
        }
    }
    for p in &data.pulls {
        let day = opened(p.n);
        let created = at(day, 11);
        let (state, closed_at) = match &p.merged_by {
            Some(_) => ("merged", Some(at(day + 2, 17))),
            None => ("open", None),
        };
        let updated = closed_at.clone().unwrap_or_else(|| at(day + 1, 12));
        conn.execute(
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at,
                                closed_at, closed_by, close_reason, head, base, mergeable, conflicts,
                                merge_method, diff)
             VALUES (?1, 'pull', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'main', ?12, ?13, ?14, ?15)",
            args![
                p.n,
                &p.title,
                &p.body,
                &p.author,
                state,
                &created,
                &updated,
                closed_at.as_deref(),
                p.merged_by.as_deref(),
                p.merged_by.as_ref().map(|_| "merged (squash)"),
                &p.head,
                p.mergeable,
                p.conflicts.as_deref(),
                p.merged_by.as_ref().map(|_| "squash"),
                &p.diff,
            ],
        )?;
        tags(conn, p.n, &p.labels, &[])?;
        for issue in &p.fixes {
            conn.execute(
                "INSERT INTO fixes (pull, issue) VALUES (?1, ?2)",
                args![p.n, issue],
            )?;
        }
        for c in &p.checks {
            conn.execute(
                "INSERT INTO checks (number, name, status, summary, log, retryable)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                args![p.n, &c.name, &c.status, &c.summary, &c.log, c.retryable],
            )?;
        }
        for (k, r) in p.reviews.iter().enumerate() {
            let k = k as i64 + 1;
            conn.execute(
                "INSERT INTO reviews (number, seq, author, state, body, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                args![
                    p.n,
                    k,
                    &r.author,
                    &r.state,
                    &r.body,
                    &at(day + 1, 9 + 2 * k)
                ],
            )?;
        }
        for who in &p.requested {
            conn.execute(
                "INSERT INTO review_requests (number, \"user\") VALUES (?1, ?2)",
                args![p.n, who],
            )?;
        }
        for (k, c) in p.comments.iter().enumerate() {
            let k = k as i64 + 1;
            conn.execute(
                "INSERT INTO comments (number, seq, author, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![p.n, k, &c.author, &c.body, &at(day + 1, 8 + k)],
            )?;
        }
    }
    Ok(())
}

fn tags(conn: &Store, n: i64, labels: &[String], assignees: &[String]) -> HostResult<()> {
    for l in labels {
        conn.execute(
            "INSERT INTO item_labels (number, label) VALUES (?1, ?2)",
            args![n, l],
        )?;
    }
    for u in assignees {
        conn.execute(
            "INSERT INTO assignees (number, \"user\") VALUES (?1, ?2)",
            args![n, u],
        )?;
    }
    Ok(())
}

const PARTS: &[&str] = &[
    "template parser",
    "undo log",
    "config loader",
    "dry-run output",
    "glob matcher",
    "progress bar",
    "Windows path handling",
    "EXIF reader",
    "collision check",
    "shell completions",
];
const PROBLEMS: &[&str] = &[
    "panics on empty input",
    "is slow with many files",
    "prints a confusing error",
    "ignores --quiet",
    "leaks file handles",
    "breaks on non-ASCII names",
    "needs better docs",
];
const REPLIES: &[&str] = &[
    "Reproduced on main.",
    "Could you attach the output of `demo --version` and the exact command?",
    "I think this is the same root cause as the config loading bug.",
    "A fix would be welcome; happy to review.",
];

/// `extra` synthetic issues numbered after everything else, each with 0–3 comments, in
/// the caller's transaction (statements cached on SQLite: 100k issues take a few seconds).
fn synthetic(conn: &Store, extra: u64, with_people: bool) -> HostResult<()> {
    let start = conn.int("SELECT coalesce(max(number), 0) FROM items", &[])?;
    let people: Vec<String> = if with_people {
        demo_data()?.users.iter().map(|u| u.name.clone()).collect()
    } else {
        db::user_names(conn)?
    };
    let labels: Vec<String> = if with_people {
        ["bug", "enhancement", "docs", "performance"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let who = |i: u64| -> &str {
        people
            .get(i as usize % people.len().max(1))
            .map(String::as_str)
            .unwrap_or("you")
    };
    let base = db::days_from_civil(2026, 11, 1) * 86_400;
    for i in 0..extra {
        let n = start + 1 + i as i64;
        let part = PARTS[i as usize % PARTS.len()];
        let problem = PROBLEMS[(i as usize / PARTS.len()) % PROBLEMS.len()];
        let title = format!("The {part} {problem} (case {})", i + 1);
        let body = format!(
            "Synthetic issue for benchmarks.\n\nSteps: run `demo rename` on batch {} and watch the {part}.",
            i + 1
        );
        let created = db::iso(base + i as i64 * 7);
        let closed = i % 3 == 2;
        conn.execute(
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at,
                                closed_at, closed_by, close_reason)
             VALUES (?1, 'issue', ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9)",
            args![
                n,
                &title,
                &body,
                who(i),
                if closed { "closed" } else { "open" },
                &created,
                closed.then_some(created.as_str()),
                closed.then(|| who(i + 1)),
                closed.then_some("done"),
            ],
        )?;
        if let Some(l) = labels.get(i as usize % (labels.len() + 1)) {
            conn.execute(
                "INSERT INTO item_labels (number, label) VALUES (?1, ?2)",
                args![n, l],
            )?;
        }
        for k in 0..(i % 4) {
            conn.execute(
                "INSERT INTO comments (number, seq, author, body, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                args![
                    n,
                    k as i64 + 1,
                    who(i + k + 1),
                    REPLIES[((i + k) % REPLIES.len() as u64) as usize],
                    &created,
                ],
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_data_reads_whole() {
        let d = demo_data().unwrap();
        assert_eq!((d.users.len(), d.issues.len(), d.pulls.len()), (6, 48, 7));
        // Every pull request's merge guard shows a different state (see the header).
        let p55 = d.pulls.iter().find(|p| p.n == 55).unwrap();
        assert!(!p55.mergeable && p55.conflicts.is_some());
    }
}
