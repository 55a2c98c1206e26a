//! Undo for a working tree: every change through the mount is a run that kept what it
//! replaced (its before-image, `Tree::keep_*`) and what it left (size, time, inode), so it
//! can be reversed.
//!
//! - `runs/ID/ops/undo` reverses one run, if its path has not changed since (a later run
//!   there, or a change outside the mount, blocks it, named).
//! - `ROOT@/ops/revert` reverses every run since a point (a run, an event, a time), of one
//!   session or all, newest first, as one run; an intent log in the store finishes it at
//!   the next start if the daemon stops half-way.
//! - `ROOT@/ops/diff` prints, for each path those runs touched, its content before the
//!   first of them against now, as `git diff --no-index` does.
//!
//! Each reversed run gets an `undo` run of its own (`runs/ID/ops/undo/runs/1`), which is
//! how a later undo, revert or diff knows it is undone. An undo is not itself undone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::call::run::RoutedOutcome;
use super::call::Pipeline;
use super::error::{ErrorKind, WorldError, WorldResult};
use crate::host::diff::{unified, Content, DIFF_MAX};
use crate::host::tree::{op, Creds, Kind, NodeNo, RenameMode, SetAttr, Stat, TimeSet, Tree};
use crate::host::{Caller, Condition, Guard, OpSpec};
use crate::state::{Ended, Run};

pub const UNDO: &str = "undo";
pub const REVERT: &str = "revert";
pub const DIFF: &str = "diff";

/// How many runs a revert or a diff reads at most.
const RUNS_MAX: usize = 500_000;
/// How many paths a revert's result names (the rest are counted).
const NAMED_MAX: usize = 50;

/// A pause after each step of a revert, in ms: `WIP_REVERT_STEP_DELAY_MS` (the tests'
/// way to stop a daemon half-way through one; 0 otherwise).
fn step_delay() -> std::time::Duration {
    std::env::var("WIP_REVERT_STEP_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(std::time::Duration::from_millis)
        .unwrap_or_default()
}

/// Whether runs of `op` are changes undo reverses and counts: not reads, not these ops'
/// own runs, not `fallocate` and `copy_file_range` (their bytes are the descriptor's `write`
/// run, recorded at its close), and not xattr changes (their old values are not kept: an
/// undo or revert leaves xattrs as they are).
fn is_change(op: &str) -> bool {
    !matches!(
        op,
        "read"
            | "stat"
            | "list"
            | UNDO
            | REVERT
            | DIFF
            | op::FALLOCATE
            | op::COPY_FILE_RANGE
            | op::SETXATTR
            | op::REMOVEXATTR
    )
}

/// The changes of a working tree since a point (done, not undone), oldest first, indexed
/// by the paths they touched.
#[derive(Default)]
struct Changes {
    runs: Vec<TreeRun>,
    by_path: BTreeMap<Vec<String>, Vec<usize>>,
    /// Some run since was undone (a file it removed may be back as a new inode).
    any_undone: bool,
}

impl Changes {
    /// The changes after `r` at its paths, above them or below them, oldest first.
    fn later(&self, r: &TreeRun) -> Vec<usize> {
        let mut out = std::collections::BTreeSet::new();
        for p in r.touched() {
            for n in 0..=p.len() {
                if let Some(v) = self.by_path.get(&p[..n]) {
                    out.extend(v.iter().copied());
                }
            }
            for (k, v) in self.by_path.range(p.clone()..) {
                if !within(k, &p) {
                    break;
                }
                out.extend(v.iter().copied());
            }
        }
        out.into_iter()
            .filter(|&i| self.runs[i].run.id > r.run.id)
            .collect()
    }
}

/// A path in a working tree, by its names (as runs keep them).
type TPath = Vec<String>;

fn shown(p: &[String]) -> String {
    if p.is_empty() {
        ".".into()
    } else {
        p.join("/")
    }
}

fn split(path: &str) -> TPath {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `a` is `b` or lies below it.
fn within(a: &[String], b: &[String]) -> bool {
    a.len() >= b.len() && a[..b.len()] == *b
}

/// One step of reversing a run, on the tree (kept in the intent log as it is).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
enum Step {
    /// Put back a regular file's bytes (a kept image; none: empty) and attributes, in place
    /// when a file is there, else as a new file.
    Restore {
        path: TPath,
        was: Value,
    },
    /// Remove what a run made (`dir`: an empty folder).
    Remove {
        path: TPath,
        dir: bool,
    },
    MakeDir {
        path: TPath,
        was: Value,
    },
    MakeLink {
        path: TPath,
        was: Value,
    },
    /// Rename back (`exchange`: swap back).
    Rename {
        from: TPath,
        to: TPath,
        exchange: bool,
    },
    /// Put back attributes a `chmod`, `chown` or `touch` changed.
    Attrs {
        path: TPath,
        was: Value,
        op: String,
    },
}

impl Step {
    /// The op the policy judges this step as, and where.
    fn judged(&self) -> (&'static str, Vec<&TPath>) {
        match self {
            Step::Restore { path, .. } => (op::WRITE, vec![path]),
            Step::Remove { path, dir: false } => (op::REMOVE, vec![path]),
            Step::Remove { path, dir: true } => (op::RMDIR, vec![path]),
            Step::MakeDir { path, .. } => (op::MKDIR, vec![path]),
            Step::MakeLink { path, .. } => (op::SYMLINK, vec![path]),
            Step::Rename { from, to, .. } => (op::RENAME, vec![to, from]),
            Step::Attrs { path, op, .. } => match op.as_str() {
                "chown" => (op::CHOWN, vec![path]),
                "touch" => (op::TOUCH, vec![path]),
                _ => (op::CHMOD, vec![path]),
            },
        }
    }

    fn sha(&self) -> Option<String> {
        match self {
            Step::Restore { was, .. } => was
                .get("sha256")
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => None,
        }
    }

    fn words(&self) -> String {
        match self {
            Step::Restore { path, was } => format!(
                "restored {} ({} bytes)",
                shown(path),
                was.get("size").and_then(Value::as_u64).unwrap_or(0)
            ),
            Step::Remove { path, dir } => format!(
                "removed {}{}",
                if *dir { "folder " } else { "" },
                shown(path)
            ),
            Step::MakeDir { path, .. } => format!("made folder {}", shown(path)),
            Step::MakeLink { path, was } => format!(
                "made symlink {} → {}",
                shown(path),
                was.get("target").and_then(Value::as_str).unwrap_or("")
            ),
            Step::Rename { from, to, exchange } => format!(
                "{} {} {} {}",
                if *exchange { "exchanged" } else { "renamed" },
                shown(from),
                if *exchange { "and" } else { "back to" },
                shown(to)
            ),
            Step::Attrs { path, op, .. } => format!("put back the {op} of {}", shown(path)),
        }
    }
}

/// A run of a working tree: its host and path, and what its args say.
struct TreeRun {
    run: Run,
    host: usize,
    path: TPath,
    args: Value,
}

impl TreeRun {
    /// Every path the run changed (a rename: both ends).
    fn touched(&self) -> Vec<TPath> {
        let mut out = vec![self.path.clone()];
        if self.run.op == op::RENAME {
            if let Some(from) = self.args.get("from").and_then(Value::as_str) {
                out.push(split(from));
            }
        }
        out
    }

    /// The steps that reverse it, newest effect first; `Err`: why it cannot be.
    fn inverse(&self) -> Result<Vec<Step>, String> {
        let a = &self.args;
        // Runs keep names as text: a name that was not UTF-8 cannot be named again.
        if self
            .touched()
            .iter()
            .flatten()
            .any(|n| n.contains('\u{FFFD}'))
        {
            return Err(
                "its path has a name that is not UTF-8, which runs keep only approximately".into(),
            );
        }
        let path = self.path.clone();
        let before = a.get("before").filter(|v| !v.is_null());
        let kept = |v: Option<&Value>| -> Result<Value, String> {
            let Some(v) = v else {
                return Err("it was recorded without a before-image (a run of an explicit op, or a change made while keep_before was 0 or at an unrecorded path)".into());
            };
            if let Some(why) = v.get("missing").and_then(Value::as_str) {
                return Err(format!("its before-image was not kept: {why}"));
            }
            Ok(v.clone())
        };
        let made_again = |path: TPath, v: &Value| -> Result<Step, String> {
            match v.get("kind").and_then(Value::as_str) {
                Some("file") => Ok(Step::Restore {
                    path,
                    was: kept(Some(v))?,
                }),
                Some("symlink") => Ok(Step::MakeLink {
                    path,
                    was: v.clone(),
                }),
                Some("directory") => Ok(Step::MakeDir {
                    path,
                    was: v.clone(),
                }),
                Some(kind) => Err(format!("a removed {kind} cannot be made again")),
                None => Err("what it removed was not recorded".into()),
            }
        };
        match self.run.op.as_str() {
            op::WRITE | op::TRUNCATE => {
                if a.get("content").is_some() {
                    return Err("it is a run of the explicit write op, which keeps no before-image; write the old content back instead".into());
                }
                Ok(vec![Step::Restore {
                    path,
                    was: kept(before)?,
                }])
            }
            op::CREATE | op::MKNOD | op::SYMLINK | op::LINK => {
                Ok(vec![Step::Remove { path, dir: false }])
            }
            op::MKDIR => Ok(vec![Step::Remove { path, dir: true }]),
            op::REMOVE => match before {
                Some(v) => Ok(vec![made_again(path, v)?]),
                None => Err(kept(None).unwrap_err()),
            },
            op::RMDIR => Ok(vec![Step::MakeDir {
                path,
                was: before.cloned().unwrap_or(json!({})),
            }]),
            op::RENAME => {
                let from = a.get("from").and_then(Value::as_str).map(split);
                let Some(from) = from else {
                    return Err("where it came from was not recorded".into());
                };
                let exchange = a.get("exchange").and_then(Value::as_bool) == Some(true);
                let mut steps = vec![Step::Rename {
                    from: path.clone(),
                    to: from,
                    exchange,
                }];
                if !exchange {
                    if let Some(r) = a.get("replaced").filter(|v| !v.is_null()) {
                        let r = r.get("before").unwrap_or(r);
                        steps.push(made_again(path, r)?);
                    }
                }
                Ok(steps)
            }
            op::CHMOD | op::CHOWN | op::TOUCH => match before {
                Some(v) => Ok(vec![Step::Attrs {
                    path,
                    was: v.clone(),
                    op: self.run.op.clone(),
                }]),
                None => Err(kept(None).unwrap_err()),
            },
            op::FALLOCATE | op::COPY_FILE_RANGE => Err(
                "its bytes are part of the write run its descriptor recorded at its close: undo that run".into(),
            ),
            op::SETXATTR | op::REMOVEXATTR => {
                Err("the attribute's earlier value is not kept".into())
            }
            other => Err(format!("runs of {other} are not changes undo can reverse")),
        }
    }

    /// What the run left at its paths, as it must still be for the undo: `Some(state)`
    /// there, `None` absent.
    fn left(&self) -> Vec<(TPath, Option<Value>)> {
        let after = self.args.get("after").filter(|v| !v.is_null()).cloned();
        match self.run.op.as_str() {
            op::REMOVE | op::RMDIR => vec![(self.path.clone(), None)],
            op::RENAME => {
                let mut out = vec![(self.path.clone(), Some(after.unwrap_or(Value::Null)))];
                let exchange = self.args.get("exchange").and_then(Value::as_bool) == Some(true);
                if !exchange {
                    if let Some(from) = self.args.get("from").and_then(Value::as_str) {
                        out.push((split(from), None));
                    }
                }
                out
            }
            _ => vec![(self.path.clone(), Some(after.unwrap_or(Value::Null)))],
        }
    }
}

/// An undo's or a revert's plan, as its intent log keeps it.
#[derive(Serialize, Deserialize)]
struct Intent {
    /// The revert's journal id.
    run: i64,
    host: usize,
    /// World paths and ops of the runs it reverses (their `undo` runs are recorded at the
    /// end), newest first.
    runs: Vec<(String, String, i64)>,
    steps: Vec<Step>,
    caller: CallerLite,
}

#[derive(Clone, Serialize, Deserialize)]
struct CallerLite {
    pid: u32,
    uid: u32,
    gid: u32,
    session: u32,
    session_start: u64,
    command: String,
}

impl CallerLite {
    fn of(c: &Caller) -> CallerLite {
        CallerLite {
            pid: c.pid,
            uid: c.uid,
            gid: gid_of(c.pid).unwrap_or(c.uid),
            session: c.session,
            session_start: c.session_start,
            command: c.command.clone(),
        }
    }

    fn caller(&self) -> Caller {
        Caller {
            pid: self.pid,
            uid: self.uid,
            session: self.session,
            session_start: self.session_start,
            command: self.command.clone(),
            ..Caller::default()
        }
    }

    fn creds(&self) -> Creds {
        Creds {
            uid: self.uid,
            gid: self.gid,
            pid: self.pid,
        }
    }
}

/// The real group of process `pid`, from /proc.
fn gid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Gid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The ops of a run of a working tree's change: `undo`.
pub(super) fn undo_op() -> OpSpec {
    OpSpec {
        output: None,
        name: UNDO.into(),
        description: "undo(): reverse this change (put back what it replaced, remove what it made), if its path has not changed since; itself a run".into(),
        schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
    }
}

fn since_schema() -> Value {
    json!({
        "description": "where to start: a run (its folder's path, or its ref wip-run://…), an event id of .wip/events (a number), or a time (ISO 8601, e.g. 2026-12-06T10:00:00Z)",
        "type": ["string", "integer"]
    })
}

fn session_schema() -> Value {
    json!({
        "description": "only the runs of this session (its number, as runs show it), or \"mine\" for the caller's own",
        "type": ["string", "integer"]
    })
}

/// The ops the world gives a working tree's root: `revert` and `diff`.
pub(super) fn root_ops() -> Vec<OpSpec> {
    vec![
        OpSpec {
            output: None,
            name: REVERT.into(),
            description: "revert(since, session?): undo every change through the mount since a run, an event or a time (of one session, or all), newest first, as one run; blocked, naming them, by paths changed since in other ways".into(),
            schema: json!({
                "type": "object",
                "properties": {"since": since_schema(), "session": session_schema()},
                "required": ["since"],
                "additionalProperties": false
            }),
        },
        OpSpec {
            output: None,
            name: DIFF.into(),
            description: "diff(since?, session?, under?): a unified diff, for each path the changes since then touched, of its content before the first of them against now (as git diff --no-index prints); `wip diff DIR` prints the same".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "since": since_schema(),
                    "session": session_schema(),
                    "under": {"type": "string", "description": "only paths below this folder of the tree (relative to its root)"}
                },
                "additionalProperties": false
            }),
        },
    ]
}

/// References a walk took from the tree, given back when it ends.
struct Walk<'a> {
    tree: &'a dyn Tree,
    held: Vec<NodeNo>,
}

impl Drop for Walk<'_> {
    fn drop(&mut self) {
        for n in self.held.drain(..) {
            self.tree.forget(n, 1);
        }
    }
}

impl<'a> Walk<'a> {
    fn new(tree: &'a dyn Tree) -> Walk<'a> {
        Walk {
            tree,
            held: Vec::new(),
        }
    }

    /// The node at `path` (the root for none), never through a symlink.
    fn node(&mut self, path: &[String]) -> io::Result<(NodeNo, Stat)> {
        let mut node = self.tree.root();
        let mut st = self.tree.stat(node)?;
        for name in path {
            if st.kind != Kind::Dir {
                return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            let found = self.tree.lookup(node, OsStr::new(name))?;
            self.held.push(found.node);
            node = found.node;
            st = found.stat;
        }
        Ok((node, st))
    }

    /// What is at `path` now (`None`: nothing).
    fn stat(&mut self, path: &[String]) -> io::Result<Option<Stat>> {
        match self.node(path) {
            Ok((_, st)) => Ok(Some(st)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The folder holding `path`, and the name in it.
    fn parent<'p>(&mut self, path: &'p [String]) -> io::Result<(NodeNo, &'p OsStr)> {
        let Some((name, dir)) = path.split_last() else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        let (node, st) = self.node(dir)?;
        if st.kind != Kind::Dir {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        Ok((node, OsStr::new(name.as_str())))
    }
}

fn num(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

fn time_of(ns: i64) -> std::time::SystemTime {
    if ns >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns as u64)
    } else {
        std::time::UNIX_EPOCH - std::time::Duration::from_nanos(ns.unsigned_abs())
    }
}

fn mode_of(v: &Value) -> Option<u32> {
    v.get("mode")
        .and_then(Value::as_str)
        .and_then(|m| u32::from_str_radix(m, 8).ok())
}

/// Whether `st` is what a run left (`want`): same kind of thing, size and time (a folder:
/// its inode only, as its time moves with its children), and inode unless `same_ino` is
/// waived (a later run put the file back as a new inode).
fn matches(st: &Stat, want: &Value, check_ino: bool) -> bool {
    if want.is_null() {
        return true;
    }
    let ino_ok = !check_ino || num(want, "ino").is_none_or(|i| i as u64 == st.ino);
    if st.kind == Kind::Dir {
        return ino_ok;
    }
    ino_ok
        && num(want, "size").is_none_or(|s| s as u64 == st.size)
        && num(want, "mtime_ns").is_none_or(|t| t == super::working::ns(st.mtime))
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

/// One undo or revert at a time: two at once could interleave their steps on one path.
static UNDOING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    UNDOING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Check that a kept image's bytes still hash to its name.
fn verify_image(tree: &dyn Tree, sha: &str) -> io::Result<()> {
    use sha2::Digest;
    let check = |mut f: std::fs::File| -> io::Result<()> {
        let mut h = sha2::Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        let got: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        if got != sha {
            return Err(io::Error::other(format!(
                "the before-image {sha} no longer holds the bytes it kept (a program that held the removed file open wrote to it)"
            )));
        }
        Ok(())
    };
    check(tree.kept(sha)?)
}

/// Copy a kept image into `out` (from its start, `out` emptied first).
fn copy_image(tree: &dyn Tree, sha: &str, out: &std::fs::File) -> io::Result<u64> {
    let mut src = tree.kept(sha)?;
    out.set_len(0)?;
    let mut dst = out;
    let n = io::copy(&mut src, &mut dst)?;
    dst.flush()?;
    Ok(n)
}

/// Put back `was`'s mode, owner (where allowed) and times on `node`.
/// Put back `was`'s owner, then mode (a chown clears setuid and setgid), then times. An
/// owner only root may give back is skipped unless `owner_required`; the rest fail loudly.
fn put_attrs(
    tree: &dyn Tree,
    node: NodeNo,
    was: &Value,
    (mode, owner, times): (bool, bool, bool),
    owner_required: bool,
) -> io::Result<()> {
    if owner {
        let set = SetAttr {
            uid: num(was, "uid").map(|u| u as u32),
            gid: num(was, "gid").map(|g| g as u32),
            ..Default::default()
        };
        if set != SetAttr::default() {
            let current = tree.stat(node)?;
            let same = set.uid.is_none_or(|u| u == current.uid)
                && set.gid.is_none_or(|g| g == current.gid);
            if !same {
                match tree.setattr(node, &set, None) {
                    Err(e) if !owner_required && e.raw_os_error() == Some(libc::EPERM) => {
                        tracing::debug!("owner not put back: {e}");
                    }
                    other => {
                        other?;
                    }
                }
            }
        }
    }
    let mut set = SetAttr::default();
    if mode {
        set.mode = mode_of(was);
    }
    if times {
        set.atime = num(was, "atime_ns").map(|t| TimeSet::At(time_of(t)));
        set.mtime = num(was, "mtime_ns").map(|t| TimeSet::At(time_of(t)));
    }
    if set != SetAttr::default() {
        tree.setattr(node, &set, None)?;
    }
    Ok(())
}

/// Do one step; done already counts as done (an intent replayed after a crash).
fn apply(tree: &dyn Tree, step: &Step, creds: Creds) -> io::Result<()> {
    let mut w = Walk::new(tree);
    match step {
        Step::Restore { path, was } => {
            let (dir, name) = w.parent(path)?;
            let sha = was.get("sha256").and_then(Value::as_str);
            if let Some(sha) = sha {
                verify_image(tree, sha)?;
            }
            let mode = mode_of(was).unwrap_or(0o644);
            // A new file is written through the descriptor that made it (its mode may not
            // let anyone open it for writing again, as git's objects).
            let (node, file) = match tree.lookup(dir, name) {
                Ok(f) => {
                    w.held.push(f.node);
                    if f.stat.kind != Kind::File {
                        return Err(io::Error::other(format!(
                            "{} is a {} now, not a file",
                            shown(path),
                            f.stat.kind.name()
                        )));
                    }
                    tree.own_change(f.node);
                    let file = match tree.open(f.node, libc::O_WRONLY) {
                        // A read-only file of the daemon's user: writable for the
                        // restore, its recorded mode put back after.
                        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                            let set = SetAttr {
                                mode: Some(u32::from(f.stat.perm) | 0o200),
                                ..Default::default()
                            };
                            tree.setattr(f.node, &set, None)?;
                            tree.open(f.node, libc::O_WRONLY)?
                        }
                        other => other?,
                    };
                    (f.node, file)
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    let (found, file) =
                        tree.create(dir, name, mode, libc::O_WRONLY | libc::O_EXCL, creds)?;
                    w.held.push(found.node);
                    tree.own_change(found.node);
                    (found.node, file)
                }
                Err(e) => return Err(e),
            };
            match sha {
                Some(sha) => {
                    copy_image(tree, sha, &file)?;
                }
                None => file.set_len(0)?,
            }
            drop(file);
            put_attrs(tree, node, was, (true, true, true), false)
        }
        Step::Remove { path, dir } => {
            let (parent, name) = match w.parent(path) {
                Ok(p) => p,
                // Its folder is gone already: so is it (a replayed step).
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
                Err(e) => return Err(e),
            };
            let r = if *dir {
                tree.rmdir(parent, name)
            } else {
                tree.unlink(parent, name)
            };
            match r {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Err(io::Error::other(
                    format!("{} holds files made since", shown(path)),
                )),
                other => other,
            }
        }
        Step::MakeDir { path, was } => {
            let (parent, name) = w.parent(path)?;
            let mode = mode_of(was).unwrap_or(0o755);
            match tree.mkdir(parent, name, mode, creds) {
                Ok(found) => {
                    w.held.push(found.node);
                    put_attrs(tree, found.node, was, (false, true, false), false)
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Step::MakeLink { path, was } => {
            let (parent, name) = w.parent(path)?;
            let target = was
                .get("target_hex")
                .and_then(Value::as_str)
                .and_then(hex_bytes)
                .map(|b| OsString::from(OsStr::from_bytes(&b)))
                .or_else(|| {
                    was.get("target")
                        .and_then(Value::as_str)
                        .map(OsString::from)
                })
                .ok_or_else(|| io::Error::other("the link's target was not recorded"))?;
            match tree.symlink(parent, name, &target, creds) {
                Ok(found) => {
                    w.held.push(found.node);
                    Ok(())
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Step::Rename { from, to, exchange } => {
            let (fd, fname) = w.parent(from)?;
            let (td, tname) = w.parent(to)?;
            let mode = if *exchange {
                RenameMode::Exchange
            } else {
                RenameMode::NoReplace
            };
            match tree.rename(fd, fname, td, tname, mode) {
                // Replayed: it is back where it was already.
                Err(e)
                    if e.raw_os_error() == Some(libc::ENOENT)
                        && !*exchange
                        && tree.exists(td, tname).unwrap_or(false) =>
                {
                    Ok(())
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    Err(io::Error::other(format!("{} exists again", shown(to))))
                }
                other => other,
            }
        }
        Step::Attrs { path, was, op } => {
            let (node, _) = w.node(path)?;
            match op.as_str() {
                "chown" => put_attrs(tree, node, was, (false, true, false), true),
                "touch" => put_attrs(tree, node, was, (false, false, true), false),
                _ => put_attrs(tree, node, was, (true, false, false), false),
            }
        }
    }
}

fn blocked(words: String) -> WorldError {
    WorldError::new(ErrorKind::Blocked, words)
}

/// Where a revert or diff starts, and whose runs.
struct Selection {
    first: i64,
    session: Option<u32>,
    under: TPath,
}

impl Pipeline {
    // ---- which runs -------------------------------------------------------------------

    fn tree_run(&self, run: Run) -> Option<TreeRun> {
        let (host, path) = self.entries.tree_entry(&run.path)?;
        let args = serde_json::from_str(&run.args).unwrap_or(Value::Null);
        Some(TreeRun {
            run,
            host,
            path,
            args,
        })
    }

    fn tree_of(&self, host: usize) -> WorldResult<&dyn Tree> {
        self.entries
            .hosts()
            .get(host)
            .and_then(|m| m.host.tree())
            .ok_or_else(|| WorldError::not_found("no such working tree"))
    }

    fn root_path(&self, host: usize) -> String {
        self.entries
            .hosts()
            .get(host)
            .map(|m| format!("/{}", m.path.join("/")))
            .unwrap_or_default()
    }

    /// The runs of host `host` from journal id `first` on, oldest first.
    fn runs_since(&self, host: usize, first: i64) -> WorldResult<Vec<Run>> {
        let root = self.root_path(host);
        let below = crate::state::below(&root);
        let at = (format!("{root}@"), format!("{root}@0"));
        let runs = self
            .journal
            .runs_from(first, (&below.0, &below.1), (&at.0, &at.1), RUNS_MAX)?;
        if runs.len() >= RUNS_MAX {
            return Err(WorldError::new(
                ErrorKind::TooLarge,
                format!("more than {RUNS_MAX} runs since that point: start later"),
            ));
        }
        Ok(runs)
    }

    /// The journal ids of runs an `undo` reversed, among `runs`.
    fn undone_among(&self, runs: &[Run]) -> HashSet<i64> {
        let by_place: HashMap<(String, String, i64), i64> = runs
            .iter()
            .map(|r| ((r.path.clone(), r.op.clone(), r.seq), r.id))
            .collect();
        let mut undone = HashSet::new();
        for r in runs.iter().filter(|r| r.op == UNDO && r.status == "ok") {
            // `ENTRY/ops/OP/runs/SEQ`
            let Some((head, seq)) = r.path.rsplit_once("/runs/") else {
                continue;
            };
            let Some((entry, op)) = head.rsplit_once("/ops/") else {
                continue;
            };
            let Ok(seq) = seq.parse::<i64>() else {
                continue;
            };
            if let Some(id) = by_place.get(&(entry.to_string(), op.to_string(), seq)) {
                undone.insert(*id);
            }
        }
        undone
    }

    /// The run an `undo` of run `id` recorded, if one did.
    fn undone_by(&self, run: &Run) -> WorldResult<Option<Run>> {
        let at = self.run_world_path(run);
        let Some(id) = self.journal.latest(&at, UNDO)? else {
            return Ok(None);
        };
        Ok(self.journal.get(id)?.filter(|u| u.status == "ok"))
    }

    /// The changes of host `host` from journal id `first` on, parsed once and indexed.
    fn changes_since(&self, host: usize, first: i64) -> WorldResult<Changes> {
        let runs = self.runs_since(host, first)?;
        let undone = self.undone_among(&runs);
        let mut c = Changes {
            any_undone: !undone.is_empty(),
            ..Default::default()
        };
        for r in runs {
            if r.status != "ok" || !is_change(&r.op) || undone.contains(&r.id) {
                continue;
            }
            let Some(t) = self.tree_run(r) else { continue };
            // A write whose file was removed before its close is no change to the tree.
            if t.host != host || t.args.get("gone").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let i = c.runs.len();
            for p in t.touched() {
                c.by_path.entry(p).or_default().push(i);
            }
            c.runs.push(t);
        }
        Ok(c)
    }

    fn run_shown(&self, run: &Run) -> String {
        crate::host::names::shown(&self.entries.absolute(&self.run_world_path(run))).into_owned()
    }

    /// Why run `r` cannot be undone now (`None`: it can): later runs there, a change made
    /// outside the mount, a before-image the budget dropped.
    fn undo_blocker(&self, r: &TreeRun) -> WorldResult<Option<String>> {
        let tree = self.tree_of(r.host)?;
        if let Some(u) = self.undone_by(&r.run)? {
            return Ok(Some(format!(
                "run {} was undone already ({})",
                r.run.seq,
                self.run_shown(&u)
            )));
        }
        let steps = match r.inverse() {
            Ok(s) => s,
            Err(why) => return Ok(Some(why)),
        };
        for s in &steps {
            if let Some(sha) = s.sha() {
                if tree.kept(&sha).is_err() {
                    return Ok(Some(format!(
                        "its before-image was dropped to keep within keep_before ({}; the oldest go first)",
                        crate::host::text::bytes(tree.keep_budget())
                    )));
                }
            }
        }
        let changes = self.changes_since(r.host, r.run.id + 1)?;
        let later: Vec<&TreeRun> = changes
            .later(r)
            .into_iter()
            .map(|i| &changes.runs[i])
            .collect();
        if !later.is_empty() {
            let named: Vec<String> = later
                .iter()
                .rev()
                .take(5)
                .map(|x| {
                    format!(
                        "{} ({} {})",
                        self.run_shown(&x.run),
                        x.run.op,
                        shown(&x.path)
                    )
                })
                .collect();
            return Ok(Some(format!(
                "its path changed since: {}{}; undo {} first",
                named.join(", "),
                if later.len() > 5 {
                    format!(" and {} more", later.len() - 5)
                } else {
                    String::new()
                },
                if later.len() == 1 {
                    "it"
                } else {
                    "them, newest first,"
                }
            )));
        }
        // Undone later runs may have put a file back as a new inode.
        if let Some(why) = self.changed_outside(tree, r, !changes.any_undone)? {
            return Ok(Some(why));
        }
        for s in &steps {
            if let Some(why) = self.step_refused(r.host, s) {
                return Ok(Some(why));
            }
        }
        Ok(None)
    }

    /// Whether what `r` left is still there as it left it (as far as runs record: a
    /// descriptor still open records its write at its close).
    fn changed_outside(
        &self,
        tree: &dyn Tree,
        r: &TreeRun,
        check_ino: bool,
    ) -> WorldResult<Option<String>> {
        let mut w = Walk::new(tree);
        for (path, want) in r.left() {
            let now = w
                .stat(&path)
                .map_err(|e| WorldError::backend(e.to_string()))?;
            let ok = match (&now, &want) {
                (None, None) => true,
                (Some(st), Some(want)) => matches(st, want, check_ino),
                _ => false,
            };
            if !ok {
                return Ok(Some(format!(
                    "{} changed since run {} in a way no run records yet (outside the mount, or through a descriptor still open: {}); undoing would lose that change",
                    shown(&path),
                    r.run.seq,
                    match (&now, &want) {
                        (None, _) => "it is gone".to_string(),
                        (Some(st), None) => format!("a {} is there again", st.kind.name()),
                        (Some(st), Some(_)) => format!("now {} bytes, modified {}", st.size, crate::calendar::iso(st.mtime)),
                    }
                )));
            }
        }
        Ok(None)
    }

    /// Why `caller` may not reverse `runs` (`None`: it may): a change is reversed by the
    /// user who made it, the mount's owner or root, never by another user (the daemon
    /// acts with its own rights).
    fn not_yours<'r>(
        &self,
        caller: &Caller,
        runs: impl IntoIterator<Item = &'r TreeRun>,
    ) -> Option<String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let owner = unsafe { libc::geteuid() };
        if caller.uid == owner || caller.uid == 0 {
            return None;
        }
        let other = runs.into_iter().find(|r| r.run.uid != caller.uid)?;
        Some(format!(
            "{} ({} {}) was made by uid {}; only that user, the mount's owner (uid {owner}) or root may undo it (a revert of your own: session \"mine\")",
            self.run_shown(&other.run),
            other.run.op,
            shown(&other.path),
            other.run.uid
        ))
    }

    /// The policy's refusal of a step, in words.
    fn step_refused(&self, host: usize, s: &Step) -> Option<String> {
        let (op, places) = s.judged();
        let places: Vec<(Vec<String>, bool)> =
            places.into_iter().map(|p| (p.clone(), false)).collect();
        for (p, _) in &places {
            if self.entries.policy_hides()
                && self
                    .entries
                    .is_hidden(&crate::world::node::EntryRef::new(host, p.clone()))
            {
                return Some(format!("{}: the path is hidden by the policy", shown(p)));
            }
        }
        self.judge_change(host, op, &places, &json!({}))
            .err()
            .map(|why| format!("{op} {} refused: {why}", shown(&places[0].0)))
    }

    // ---- undo -----------------------------------------------------------------------

    pub(in crate::world) fn undo_guard(&self, id: i64) -> WorldResult<Guard> {
        let run = self.run(id)?;
        let Some(r) = self.tree_run(run) else {
            return Err(WorldError::not_found("no op \"undo\" here"));
        };
        let blocker = self.undo_blocker(&r)?;
        Ok(Guard::new(vec![Condition::check(
            "unchanged",
            blocker.is_none(),
            blocker.unwrap_or_else(|| {
                format!(
                    "{} is as run {} left it: undo puts back what it replaced",
                    shown(&r.path),
                    r.run.seq
                )
            }),
        )]))
    }

    pub(in crate::world) fn undo_run(
        &self,
        id: i64,
        caller: &Caller,
    ) -> WorldResult<RoutedOutcome> {
        let run = self.run(id)?;
        let Some(r) = self.tree_run(run) else {
            return Err(WorldError::not_found("no op \"undo\" here"));
        };
        let _one = one_at_a_time();
        if let Some(why) = self.not_yours(caller, [&r]) {
            return Err(blocked(format!("blocked by guard caller: {why}")));
        }
        if let Some(why) = self.undo_blocker(&r)? {
            return Err(blocked(format!("blocked by guard unchanged: {why}")));
        }
        let steps = r.inverse().map_err(blocked)?;
        let tree = self.tree_of(r.host)?;
        let who = CallerLite::of(caller);
        let mut done = Vec::new();
        for s in &steps {
            apply(tree, s, who.creds()).map_err(|e| {
                WorldError::backend(format!(
                    "undo of run {} stopped at `{}`: {e}{}",
                    r.run.seq,
                    s.words(),
                    if done.is_empty() {
                        String::new()
                    } else {
                        format!(" (done before it: {})", done.join("; "))
                    }
                ))
            })?;
            done.push(s.words());
        }
        let changed = self.changed_of(r.host, &steps);
        Ok(RoutedOutcome {
            result: format!(
                "undid run {} ({} {}): {}\n",
                r.run.seq,
                r.run.op,
                shown(&r.path),
                done.join("; ")
            ),
            changed,
            ..Default::default()
        })
    }

    fn changed_of(&self, host: usize, steps: &[Step]) -> Vec<(usize, Vec<String>)> {
        let mut out = Vec::new();
        for s in steps {
            let (_, places) = s.judged();
            for p in places {
                out.push((host, p.clone()));
            }
        }
        out
    }

    // ---- since ------------------------------------------------------------------------

    fn selection(
        &self,
        host: usize,
        args: &Value,
        caller: &Caller,
        required: bool,
    ) -> WorldResult<Selection> {
        let first = match args.get("since") {
            None | Some(Value::Null) if !required => 0,
            None | Some(Value::Null) => {
                return Err(WorldError::invalid(
                    "since: give a run, an event id or a time",
                ))
            }
            Some(Value::Number(n)) => self.since_event(n.as_i64().unwrap_or(-1))?,
            Some(Value::String(s)) => self.since_text(host, s.trim())?,
            Some(other) => {
                return Err(WorldError::invalid(format!(
                    "since: {other} is not a run, an event id or a time"
                )))
            }
        };
        let session = match args.get("session") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == "mine" => Some(caller.session),
            Some(Value::String(s)) => Some(s.trim().parse::<u32>().map_err(|_| {
                WorldError::invalid(format!(
                    "session: {s:?} is not a session number or \"mine\""
                ))
            })?),
            Some(Value::Number(n)) => Some(
                n.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        WorldError::invalid(format!("session: {n} is not a session number"))
                    })?,
            ),
            Some(other) => {
                return Err(WorldError::invalid(format!(
                    "session: {other} is not a session number or \"mine\""
                )))
            }
        };
        let under = args
            .get("under")
            .and_then(Value::as_str)
            .map(split)
            .unwrap_or_default();
        if under.iter().any(|n| n == "..") {
            return Err(WorldError::invalid(
                "under: a folder below the tree's root, without ..",
            ));
        }
        Ok(Selection {
            first,
            session,
            under,
        })
    }

    /// The first run at or after event `cursor` of the change feed.
    fn since_event(&self, cursor: i64) -> WorldResult<i64> {
        if cursor < 0 {
            return Err(WorldError::invalid("since: an event id is a number from 0"));
        }
        let mut at = cursor - 1;
        loop {
            let events = self.journal.events_after(at, 200)?;
            let Some(last) = events.last() else {
                return Err(WorldError::not_found(format!(
                    "since: no run was recorded at or after event {cursor}"
                )));
            };
            for e in &events {
                if let (true, Some(op), Some(seq)) = (e.kind == "call", &e.op, e.run) {
                    if let Some(id) = self.journal.numbered(&e.path, op, seq)? {
                        return Ok(id);
                    }
                }
            }
            at = last.cursor;
        }
    }

    fn since_text(&self, host: usize, s: &str) -> WorldResult<i64> {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return self.since_event(s.parse().unwrap_or(i64::MAX));
        }
        if let Some(rest) = s.strip_prefix("wip-run://") {
            let id = rest
                .rsplit('/')
                .next()
                .and_then(|i| i.parse::<i64>().ok())
                .ok_or_else(|| WorldError::invalid(format!("since: {s:?} is not a run's ref")))?;
            return Ok(id);
        }
        if s.contains("/runs/") {
            return self.since_run_path(host, s);
        }
        if let Some(t) = crate::calendar::parse_iso(s) {
            let iso = crate::calendar::iso(t);
            return Ok(self.journal.first_run_at(&iso)?.unwrap_or(i64::MAX));
        }
        Err(WorldError::invalid(format!(
            "since: {s:?} is not a run (its folder, e.g. files/README.md@/ops/write/runs/1), an event id or a time (2026-12-06T10:00:00Z)"
        )))
    }

    /// A run named by its folder's path: absolute in the mount, from the mount's root, or
    /// from the tree's root; through `PATH@` or `ROOT@/paths/PATH`.
    fn since_run_path(&self, host: usize, s: &str) -> WorldResult<i64> {
        let mount = self.entries.mount_point().to_string_lossy().into_owned();
        let rel = s
            .strip_prefix(mount.trim_end_matches('/'))
            .unwrap_or(s)
            .trim_end_matches('/');
        let bad = || {
            WorldError::invalid(format!(
                "since: {s:?} is not a run's folder (PATH@/ops/NAME/runs/N)"
            ))
        };
        let (head, seq) = rel.rsplit_once("/runs/").ok_or_else(bad)?;
        let (entry, op) = head.rsplit_once("/ops/").ok_or_else(bad)?;
        let seq: i64 = seq.parse().map_err(|_| bad())?;
        let entry = entry.trim_start_matches("./").trim_start_matches('/');
        // `ROOT@/paths/P` is the entry of `ROOT/P`.
        let entry = match entry.split_once("@/paths/") {
            Some((root, p)) => format!("{root}/{p}@"),
            None => entry.to_string(),
        };
        let root = self.root_path(host);
        for candidate in [format!("/{entry}"), format!("{root}/{entry}")] {
            if let Some(id) = self.journal.numbered(&candidate, op, seq)? {
                return Ok(id);
            }
        }
        Err(WorldError::not_found(format!("since: no run at {s}")))
    }

    /// The changes since the selection's start, and which of them it covers (indices,
    /// oldest first).
    fn selected(&self, host: usize, sel: &Selection) -> WorldResult<(Changes, Vec<usize>)> {
        let changes = self.changes_since(host, sel.first)?;
        let chosen = changes
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| sel.session.is_none_or(|s| r.run.session == s))
            .filter(|(_, r)| r.touched().iter().any(|p| within(p, &sel.under)))
            .map(|(i, _)| i)
            .collect();
        Ok((changes, chosen))
    }

    // ---- revert -----------------------------------------------------------------------

    /// Whether `op` on `e` is one the world gives a working tree's root.
    pub(in crate::world) fn is_tree_root_op(
        &self,
        e: &crate::world::node::EntryRef,
        op: &str,
    ) -> bool {
        e.path.is_empty()
            && matches!(op, REVERT | DIFF)
            && self.entries.is_tree(e.host)
            && !self
                .entries
                .hosts()
                .get(e.host)
                .and_then(|m| m.host.ops(&[]).ok())
                .is_some_and(|ops| ops.iter().any(|o| o.name == op))
    }

    pub(in crate::world) fn tree_root_call(
        &self,
        host: usize,
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> WorldResult<RoutedOutcome> {
        match op {
            REVERT => self.revert(host, args, caller),
            _ => self.diff(host, args, caller),
        }
    }

    /// The guard of `revert` and `diff` at a working tree's root.
    pub(in crate::world) fn tree_root_guard(
        &self,
        host: usize,
        op: &str,
        args: Option<&Value>,
    ) -> WorldResult<Guard> {
        let tree = self.tree_of(host)?;
        let mut c = vec![Condition::check(
            "keeps_before",
            tree.keeps_before(),
            if tree.keeps_before() {
                format!(
                    "changes keep what they replace (keep_before {})",
                    crate::host::text::bytes(tree.keep_budget())
                )
            } else {
                "keep_before is 0: changes keep nothing to put back".to_string()
            },
        )];
        if op == DIFF {
            c[0] = Condition::check("journal", true, "every change through the mount is a run");
        }
        if let (REVERT, Some(args)) = (op, args) {
            let caller = Caller::default();
            match self.revert_plan(host, args, &caller) {
                Ok(plan) => c.push(Condition::check(
                    "unchanged",
                    true,
                    format!(
                        "{} runs to reverse, none changed since in another way",
                        plan.runs.len()
                    ),
                )),
                Err(e) => c.push(Condition::check(
                    "unchanged",
                    false,
                    e.message
                        .strip_prefix("blocked by guard unchanged: ")
                        .unwrap_or(&e.message)
                        .to_string(),
                )),
            }
        }
        Ok(Guard::new(c))
    }

    /// What a revert would do: its runs newest first and their steps; `Err` if any cannot
    /// be reversed (named).
    fn revert_plan(&self, host: usize, args: &Value, caller: &Caller) -> WorldResult<Intent> {
        let tree = self.tree_of(host)?;
        if !tree.keeps_before() {
            return Err(blocked("blocked by guard keeps_before: keep_before is 0, so changes kept nothing to put back".into()));
        }
        let sel = self.selection(host, args, caller, true)?;
        let (changes, chosen_at) = self.selected(host, &sel)?;
        let chosen: Vec<&TreeRun> = chosen_at.iter().map(|&i| &changes.runs[i]).collect();
        // Runs left out (another session's, or outside `under`) that changed the same
        // paths after a chosen one: reverting would undo across them.
        if chosen.len() < changes.runs.len() {
            let chosen_set: HashSet<usize> = chosen_at.iter().copied().collect();
            for r in chosen.iter().rev() {
                let other = changes
                    .later(r)
                    .into_iter()
                    .find(|i| !chosen_set.contains(i))
                    .map(|i| &changes.runs[i]);
                let Some(x) = other else { continue };
                return Err(blocked(format!(
                    "blocked by guard unchanged: {} was changed after run {} by {} ({} {}), which this revert leaves out; revert with that session too, or undo it first",
                    shown(&r.path),
                    r.run.seq,
                    self.run_shown(&x.run),
                    x.run.op,
                    shown(&x.path)
                )));
            }
        }
        if let Some(why) = self.not_yours(caller, chosen.iter().copied()) {
            return Err(blocked(format!("blocked by guard caller: {why}")));
        }
        let mut newest: HashMap<TPath, i64> = HashMap::new();
        for r in &chosen {
            for p in r.touched() {
                newest.insert(p, r.run.id);
            }
        }
        let mut steps = Vec::new();
        let mut undoes = Vec::new();
        let mut w_checked: HashSet<TPath> = HashSet::new();
        for r in chosen.iter().rev() {
            let s = r.inverse().map_err(|why| {
                blocked(format!(
                    "blocked by guard unchanged: {} ({} {}) cannot be undone: {why}",
                    self.run_shown(&r.run),
                    r.run.op,
                    shown(&r.path)
                ))
            })?;
            // The newest run at each path must find it as it left it.
            if r.touched()
                .iter()
                .any(|p| newest.get(p) == Some(&r.run.id) && w_checked.insert(p.clone()))
            {
                if let Some(why) = self.changed_outside(tree, r, !changes.any_undone)? {
                    return Err(blocked(format!("blocked by guard unchanged: {why}")));
                }
            }
            for step in &s {
                if let Some(sha) = step.sha() {
                    if tree.kept(&sha).is_err() {
                        return Err(blocked(format!(
                            "blocked by guard unchanged: the before-image of {} ({} {}) was dropped to keep within keep_before ({}; the oldest go first)",
                            self.run_shown(&r.run),
                            r.run.op,
                            shown(&r.path),
                            crate::host::text::bytes(tree.keep_budget())
                        )));
                    }
                }
                if let Some(why) = self.step_refused(host, step) {
                    return Err(blocked(format!("blocked by policy: {why}")));
                }
            }
            steps.extend(s);
            undoes.push((r.run.path.clone(), r.run.op.clone(), r.run.seq));
        }
        Ok(Intent {
            run: 0,
            host,
            runs: undoes,
            steps,
            caller: CallerLite::of(caller),
        })
    }

    pub(in crate::world) fn revert(
        &self,
        host: usize,
        args: &Value,
        caller: &Caller,
    ) -> WorldResult<RoutedOutcome> {
        let _one = one_at_a_time();
        let mut intent = self.revert_plan(host, args, caller)?;
        if intent.runs.is_empty() {
            return Ok(RoutedOutcome {
                result: "nothing to revert: no change through the mount since then\n".into(),
                ..Default::default()
            });
        }
        intent.run = caller_run_id(caller).unwrap_or(0);
        let tree = self.tree_of(host)?;
        let shas: Vec<String> = intent.steps.iter().filter_map(Step::sha).collect();
        tree.pin_kept(&shas, true);
        let log = self.write_intent(tree, &intent);
        let outcome = self.carry_out(tree, &intent, 0, log.as_deref());
        tree.pin_kept(&shas, false);
        outcome
    }

    /// Keep the plan where a restart finds it; `None`: it could not be written (the revert
    /// goes on, said in the log).
    fn write_intent(&self, tree: &dyn Tree, intent: &Intent) -> Option<PathBuf> {
        let dir = tree.intent_dir()?;
        let write = || -> io::Result<PathBuf> {
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(format!("{}.json", intent.run));
            let tmp = dir.join(format!("{}.json.tmp", intent.run));
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&serde_json::to_vec(intent).map_err(io::Error::other)?)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&dir)?.sync_all()?;
            Ok(path)
        };
        match write() {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::error!(
                    "revert's intent log not written ({e}): a crash now would leave it half done"
                );
                None
            }
        }
    }

    /// Do the steps from `from` on, noting progress beside the intent log; the reversed
    /// runs get their `undo` runs; the log goes when all is done.
    fn carry_out(
        &self,
        tree: &dyn Tree,
        intent: &Intent,
        from: usize,
        log: Option<&Path>,
    ) -> WorldResult<RoutedOutcome> {
        let progress = log.map(|l| l.with_extension("done"));
        let creds = intent.caller.creds();
        let mut named = Vec::new();
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        let delay = step_delay();
        for (i, s) in intent.steps.iter().enumerate().skip(from) {
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            if let Err(e) = apply(tree, s, creds) {
                // Stopped on the tree's own refusal (not a crash): said here, in full, and
                // never replayed blindly at a later start.
                if let Some(l) = log {
                    let _ = std::fs::remove_file(l);
                }
                if let Some(p) = &progress {
                    let _ = std::fs::remove_file(p);
                }
                return Err(WorldError::backend(format!(
                    "revert stopped at step {} of {} (`{}`): {e}; the {} steps before it were done ({}), the rest were not: the tree is part reverted, and the runs not reverted are still undoable one by one",
                    i + 1,
                    intent.steps.len(),
                    s.words(),
                    i,
                    intent.steps[..i]
                        .iter()
                        .rev()
                        .take(5)
                        .map(Step::words)
                        .collect::<Vec<_>>()
                        .join("; ")
                )));
            }
            if let Some(p) = &progress {
                // Whole or not at all: a kill mid-write must not read as step 0.
                let tmp = p.with_extension("done.tmp");
                if std::fs::write(&tmp, (i + 1).to_string()).is_ok() {
                    let _ = std::fs::rename(&tmp, p);
                }
            }
            let kind = match s {
                Step::Restore { .. } => "restored",
                Step::Remove { .. } => "removed",
                Step::MakeDir { .. } => "folders made",
                Step::MakeLink { .. } => "links made",
                Step::Rename { .. } => "renamed back",
                Step::Attrs { .. } => "attributes put back",
            };
            *counts.entry(kind).or_default() += 1;
            if named.len() < NAMED_MAX {
                named.push(s.words());
            }
        }
        // Each reversed run says so at its own `ops/undo`.
        let caller = intent.caller.caller();
        let revert_at = format!("{}@/ops/{REVERT}", self.root_path(intent.host));
        for (path, op, seq) in &intent.runs {
            self.grouped.push(Ended {
                caller: caller.clone(),
                path: super::call::live::run_path(path, op, *seq),
                op: UNDO.into(),
                args: json!({"revert": revert_at, "revert_run": intent.run}).to_string(),
                guard: String::new(),
                status: "ok".into(),
                errno: 0,
                result: format!(
                    "undone by a revert ({revert_at}, journal run {})\n",
                    intent.run
                ),
            });
        }
        self.grouped.flush();
        if let Some(l) = log {
            let _ = std::fs::remove_file(l);
        }
        if let Some(p) = &progress {
            let _ = std::fs::remove_file(p);
        }
        let changed = self.changed_of(intent.host, &intent.steps);
        let mut result = format!(
            "reverted {} runs, newest first: {}\n",
            intent.runs.len(),
            counts
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for n in &named {
            result.push_str(&format!("  {n}\n"));
        }
        if intent.steps.len() > named.len() {
            result.push_str(&format!(
                "  … and {} more steps\n",
                intent.steps.len() - named.len()
            ));
        }
        Ok(RoutedOutcome {
            result,
            changed,
            ..Default::default()
        })
    }

    /// Reverts a stop cut off: finish each from its intent log and settle its run.
    pub(in crate::world) fn finish_reverts(&self) -> usize {
        let mut finished = 0;
        for (host, m) in self.entries.hosts().iter().enumerate() {
            let Some(tree) = m.host.tree() else { continue };
            let Some(dir) = tree.intent_dir() else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.extension().and_then(|x| x.to_str()) != Some("json") {
                    continue;
                }
                let Ok(text) = std::fs::read(&path) else {
                    continue;
                };
                let Ok(intent) = serde_json::from_slice::<Intent>(&text) else {
                    tracing::warn!("an unreadable revert intent log: {}", path.display());
                    continue;
                };
                if intent.host != host {
                    continue;
                }
                let from = std::fs::read_to_string(path.with_extension("done"))
                    .ok()
                    .and_then(|t| t.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                let shas: Vec<String> = intent.steps.iter().filter_map(Step::sha).collect();
                tree.pin_kept(&shas, true);
                let outcome = self.carry_out(tree, &intent, from, Some(&path));
                tree.pin_kept(&shas, false);
                let (status, errno, words) = match outcome {
                    Ok(o) => (
                        "ok",
                        0,
                        format!(
                            "(finished after a restart: the daemon stopped after {from} of {} steps; the rest were done at the next start, from the revert's intent log)\n{}",
                            intent.steps.len(),
                            o.result
                        ),
                    ),
                    Err(e) => ("error", libc::EIO, format!("error: {}\n", e.message)),
                };
                if intent.run > 0 {
                    let _ = self.journal.settle(
                        intent.run,
                        status,
                        errno,
                        &crate::state::Clean::owned(words),
                    );
                }
                tracing::info!(
                    run = intent.run,
                    "a revert cut off by the last stop was finished"
                );
                finished += 1;
            }
        }
        finished
    }

    // ---- diff -------------------------------------------------------------------------

    pub(in crate::world) fn diff(
        &self,
        host: usize,
        args: &Value,
        caller: &Caller,
    ) -> WorldResult<RoutedOutcome> {
        let tree = self.tree_of(host)?;
        let sel = self.selection(host, args, caller, false)?;
        let (changes, chosen) = self.selected(host, &sel)?;
        // What each path was before the first chosen run, walking the runs back from now.
        let mut was: BTreeMap<TPath, Was> = BTreeMap::new();
        for &i in chosen.iter().rev() {
            backward(&mut was, &changes.runs[i]);
        }
        let mut out = String::new();
        let mut w = Walk::new(tree);
        let hides = self.entries.policy_hides();
        for (path, before) in &was {
            if !within(path, &sel.under) {
                continue;
            }
            // What a policy hides is no part of a diff, whenever its runs were made.
            if hides
                && self
                    .entries
                    .is_hidden(&crate::world::node::EntryRef::new(host, path.clone()))
            {
                continue;
            }
            let before = resolve(&was, path).unwrap_or_else(|| before.clone());
            let before = match before {
                Was::Now(p) => match read_now(tree, &mut w, &p) {
                    Ok(c) => c,
                    Err(e) => Content::Unreadable(e.to_string()),
                },
                Was::Absent | Was::Alias(_) => Content::Absent,
                Was::Dir => Content::Dir,
                Was::Image(v) => image_content(tree, &v),
                Was::Link(t) => Content::Link(t),
            };
            let now =
                read_now(tree, &mut w, path).unwrap_or_else(|e| Content::Unreadable(e.to_string()));
            unified(&mut out, &shown(path), &before, &now);
        }
        if out.is_empty() {
            out = format!(
                "no difference: {} changes since then, and each path is as it was\n",
                chosen.len()
            );
        }
        Ok(RoutedOutcome {
            result: out,
            ..Default::default()
        })
    }
}

/// The journal id of the run a call is (`Caller::run`: `JOURNAL:ID`).
fn caller_run_id(caller: &Caller) -> Option<i64> {
    caller.run.rsplit(':').next()?.parse().ok()
}

/// What a path held before the runs a diff covers.
#[derive(Clone, Debug)]
enum Was {
    /// As it is now at this path.
    Now(TPath),
    /// A folder moved: what is below it is now below this path.
    Alias(TPath),
    Absent,
    Dir,
    /// A kept image (the args' `before`).
    Image(Value),
    Link(String),
}

/// What a path held, through the folders renamed above it.
fn resolve(was: &BTreeMap<TPath, Was>, path: &TPath) -> Option<Was> {
    if let Some(w) = was.get(path) {
        return Some(w.clone());
    }
    for n in (0..path.len()).rev() {
        match was.get(&path[..n].to_vec()) {
            Some(Was::Alias(p)) => {
                let mut q = p.clone();
                q.extend_from_slice(&path[n..]);
                return Some(Was::Now(q));
            }
            Some(Was::Absent) => return Some(Was::Absent),
            Some(Was::Now(p)) => {
                let mut q = p.clone();
                q.extend_from_slice(&path[n..]);
                return Some(Was::Now(q));
            }
            Some(_) => return Some(Was::Absent),
            None => {}
        }
    }
    None
}

/// Step back over run `r`: what its paths held before it.
fn backward(was: &mut BTreeMap<TPath, Was>, r: &TreeRun) {
    let a = &r.args;
    let before = a.get("before").filter(|v| !v.is_null());
    let from_before = |v: Option<&Value>| -> Was {
        match v {
            Some(v) => match v.get("kind").and_then(Value::as_str) {
                Some("symlink") => Was::Link(
                    v.get("target")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                ),
                Some("directory") => Was::Dir,
                _ => Was::Image(v.clone()),
            },
            None => Was::Image(json!({"missing": "no before-image was kept"})),
        }
    };
    match r.run.op.as_str() {
        op::WRITE | op::TRUNCATE => {
            was.insert(r.path.clone(), from_before(before));
        }
        op::REMOVE => {
            was.insert(r.path.clone(), from_before(before));
        }
        op::CREATE | op::MKNOD | op::SYMLINK | op::LINK | op::MKDIR => {
            // Below a made folder nothing was.
            let below: Vec<TPath> = was.keys().filter(|k| within(k, &r.path)).cloned().collect();
            for k in below {
                was.remove(&k);
            }
            was.insert(r.path.clone(), Was::Absent);
        }
        op::RMDIR => {
            was.insert(r.path.clone(), Was::Dir);
        }
        op::RENAME => {
            let Some(from) = a.get("from").and_then(Value::as_str).map(split) else {
                return;
            };
            let to = r.path.clone();
            // Before the rename, `from` held what `to` holds after it.
            let moved = resolve(was, &to).unwrap_or_else(|| Was::Now(to.clone()));
            let below: Vec<(TPath, Was)> = was
                .iter()
                .filter(|(k, _)| within(k, &to) && **k != to)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (k, _) in &below {
                was.remove(k);
            }
            for (k, v) in below {
                let mut n = from.clone();
                n.extend_from_slice(&k[to.len()..]);
                was.insert(n, v);
            }
            was.insert(
                from,
                match moved {
                    Was::Now(p) => Was::Alias(p),
                    other => other,
                },
            );
            let replaced = a.get("replaced").filter(|v| !v.is_null());
            was.insert(
                to,
                match replaced {
                    Some(v) => from_before(v.get("before").or(Some(v))),
                    None => Was::Absent,
                },
            );
        }
        _ => {}
    }
}

fn read_now(tree: &dyn Tree, w: &mut Walk<'_>, path: &[String]) -> io::Result<Content> {
    let Some(st) = w.stat(path)? else {
        return Ok(Content::Absent);
    };
    match st.kind {
        Kind::Dir => Ok(Content::Dir),
        Kind::Symlink => {
            let (node, _) = w.node(path)?;
            Ok(Content::Link(
                tree.readlink(node)?.to_string_lossy().into_owned(),
            ))
        }
        Kind::File if st.size > DIFF_MAX => Ok(Content::TooLarge(st.size)),
        Kind::File => {
            let (node, _) = w.node(path)?;
            let mut f = tree.open(node, libc::O_RDONLY)?;
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)?;
            Ok(Content::Bytes(buf, u32::from(st.perm)))
        }
        other => Ok(Content::Unreadable(format!("a {}", other.name()))),
    }
}

fn image_content(tree: &dyn Tree, v: &Value) -> Content {
    if let Some(why) = v.get("missing").and_then(Value::as_str) {
        return Content::Unreadable(format!("its earlier content was not kept: {why}"));
    }
    let mode = mode_of(v).unwrap_or(0o644);
    let Some(sha) = v.get("sha256").and_then(Value::as_str) else {
        return Content::Bytes(Vec::new(), mode);
    };
    let size = v.get("size").and_then(Value::as_u64).unwrap_or(0);
    if size > DIFF_MAX {
        return Content::TooLarge(size);
    }
    match tree.kept(sha) {
        Ok(mut f) => {
            let mut buf = Vec::new();
            match f.read_to_end(&mut buf) {
                Ok(_) => Content::Bytes(buf, mode),
                Err(e) => Content::Unreadable(e.to_string()),
            }
        }
        Err(_) => Content::Unreadable("its before-image was dropped (keep_before)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: &str, path: &str, args: Value) -> TreeRun {
        TreeRun {
            run: Run {
                id: 1,
                started: String::new(),
                finished: None,
                pid: 0,
                uid: 0,
                session: 0,
                session_start: 0,
                command: String::new(),
                path: String::new(),
                op: op.into(),
                args: args.to_string(),
                guard: String::new(),
                status: "ok".into(),
                errno: 0,
                result: String::new(),
                discovered: Vec::new(),
                seq: 1,
            },
            host: 0,
            path: split(path),
            args,
        }
    }

    #[test]
    fn each_change_has_its_reverse_and_the_rest_say_why_not() {
        let w = run(
            "write",
            "a.txt",
            json!({"before": {"sha256": "ab", "size": 3}}),
        );
        assert!(matches!(&w.inverse().unwrap()[..], [Step::Restore { .. }]));
        let r = run(
            "rename",
            "b",
            json!({"from": "a", "to": "b", "replaced": {"kind": "file", "size": 1, "before": {"kind": "file", "sha256": "cd", "size": 1}}}),
        );
        let steps = r.inverse().unwrap();
        assert!(
            matches!(&steps[0], Step::Rename { from, to, exchange: false } if *from == split("b") && *to == split("a"))
        );
        assert!(matches!(&steps[1], Step::Restore { path, .. } if *path == split("b")));
        assert!(run("mkdir", "d", json!({})).inverse().is_ok());
        let e = run("write", "x", json!({"path": "x", "content": "y"}))
            .inverse()
            .unwrap_err();
        assert!(e.contains("explicit"), "{e}");
        let e = run("write", "x", json!({"before": {"missing": "disk full"}}))
            .inverse()
            .unwrap_err();
        assert!(e.contains("disk full"), "{e}");
        assert!(run("setxattr", "x", json!({})).inverse().is_err());
    }

    #[test]
    fn a_diff_walks_back_over_renames_and_removals() {
        let mut was = BTreeMap::new();
        // Oldest first: write a, rename dir d → e, remove e/f.
        let runs = [
            run(
                "write",
                "a",
                json!({"before": {"kind": "file", "sha256": "00", "size": 1}}),
            ),
            run("rename", "e", json!({"from": "d", "to": "e"})),
            run(
                "remove",
                "e/f",
                json!({"before": {"kind": "file", "sha256": "11", "size": 2}}),
            ),
        ];
        for r in runs.iter().rev() {
            backward(&mut was, r);
        }
        assert!(matches!(resolve(&was, &split("a")), Some(Was::Image(_))));
        assert!(matches!(resolve(&was, &split("e")), Some(Was::Absent)));
        // d/f was the removed file; d/g is what e/g holds now.
        assert!(matches!(resolve(&was, &split("d/f")), Some(Was::Image(v)) if v["sha256"] == "11"));
        assert!(matches!(resolve(&was, &split("d/g")), Some(Was::Now(p)) if p == split("e/g")));
    }
}
