//! Operations of files and directories: their specs, their guards and what they do.
//!
//! A call re-evaluates the guard with its arguments right before acting and acts on the very
//! target the guard resolved, so what was checked is what gets touched (short of a race with
//! another writer on the disk, which no local filesystem lets us close).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};

use crate::world::host::{
    object_schema, CallOutcome, Condition, Guard, HostError, HostResult, OpSpec,
};

use super::describe::{
    count_lines, format_time, human_size, is_binary, kind_name, mode_string, plural, Counts,
};
use super::resolve::{is_gone, Located, Node};
use super::FilesHost;

/// Reads never take more than this into memory (a FIFO or a huge log could be endless).
const READ_CAP: u64 = 16 * 1024 * 1024;
const READ_CAP_WORDS: &str = "16 MiB";
const DEFAULT_LIMIT: u64 = 2000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Edit,
    Stat,
    List,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Edit => "edit",
            Op::Stat => "stat",
            Op::List => "list",
        }
    }
}

const FILE_OPS: [Op; 4] = [Op::Read, Op::Write, Op::Edit, Op::Stat];
const DIR_OPS: [Op; 5] = [Op::List, Op::Stat, Op::Read, Op::Write, Op::Edit];

fn ops_of(node: &Node) -> &'static [Op] {
    match node {
        Node::Dir { .. } => &DIR_OPS,
        // A broken link shows the file ops so that its guards can say why they are refused.
        Node::File { .. } | Node::Broken { .. } => &FILE_OPS,
    }
}

fn spec(op: Op, on_dir: bool, page_size: usize) -> OpSpec {
    let path = json!({"type": "string", "minLength": 1,
        "description": "file path relative to this directory"});
    let offset = json!({"type": "integer", "minimum": 1,
        "description": "first line to show, 1-based (default 1)"});
    let limit = json!({"type": "integer", "minimum": 1,
        "description": "how many lines to show (default 2000)"});
    let content = json!({"type": "string", "description": "the whole new content of the file"});
    let old = json!({"type": "string", "minLength": 1,
        "description": "exact text to replace (must occur once unless replace_all)"});
    let new = json!({"type": "string", "description": "replacement text"});
    let all = json!({"type": "boolean", "description": "replace every occurrence (default false)"});
    let (description, schema) = match (op, on_dir) {
        (Op::Read, false) => (
            "read(offset?, limit?): the file's lines numbered like cat -n, from line offset (default 1), at most limit (default 2000)".to_string(),
            object_schema(json!({"offset": offset, "limit": limit}), &[]),
        ),
        (Op::Read, true) => (
            "read(path, offset?, limit?): numbered lines of the file at path (relative to here), like cat -n".to_string(),
            object_schema(json!({"path": path, "offset": offset, "limit": limit}), &["path"]),
        ),
        (Op::Write, false) => (
            "write(content): replace the whole file with content (atomic; permissions kept)".to_string(),
            object_schema(json!({"content": content}), &["content"]),
        ),
        (Op::Write, true) => (
            "write(path, content, create_dirs?): create or overwrite the file at path (relative to here)".to_string(),
            object_schema(
                json!({"path": path, "content": content, "create_dirs": {"type": "boolean",
                    "description": "create missing parent directories (default false)"}}),
                &["path", "content"],
            ),
        ),
        (Op::Edit, false) => (
            "edit(old_string, new_string, replace_all?): replace exact text; old_string must occur once unless replace_all".to_string(),
            object_schema(
                json!({"old_string": old, "new_string": new, "replace_all": all}),
                &["old_string", "new_string"],
            ),
        ),
        (Op::Edit, true) => (
            "edit(path, old_string, new_string, replace_all?): replace exact text in the file at path (relative to here)".to_string(),
            object_schema(
                json!({"path": path, "old_string": old, "new_string": new, "replace_all": all}),
                &["path", "old_string", "new_string"],
            ),
        ),
        (Op::Stat, false) => (
            "stat(): size, type, permissions, modification time and line count".to_string(),
            object_schema(json!({}), &[]),
        ),
        (Op::Stat, true) => (
            "stat(): entry counts, permissions and modification time of this directory".to_string(),
            object_schema(json!({}), &[]),
        ),
        (Op::List, _) => (
            format!("list(): entries here, one per line: name, type, size (first {page_size} by name)"),
            object_schema(json!({}), &[]),
        ),
    };
    OpSpec {
        name: op.name().to_string(),
        description,
        schema,
    }
}

/// The file an op acts on, as the guard resolved it.
#[derive(Clone, Debug)]
pub(super) struct Target {
    /// Physical path inside the root (may not exist yet for `write`).
    physical: PathBuf,
    exists: bool,
    /// World path for messages.
    display: String,
    /// Host path as the caller sees it (for `changed` and `discovered`).
    view: Option<Vec<String>>,
}

/// A guard and the target it checked.
pub(super) struct Plan {
    pub guard: Guard,
    target: Option<Target>,
}

fn str_arg<'a>(map: &'a Map<String, Value>, key: &str) -> HostResult<Option<&'a str>> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(HostError::InvalidArgs(format!("`{key}` must be a string"))),
    }
}

fn required_str<'a>(map: &'a Map<String, Value>, key: &str) -> HostResult<&'a str> {
    str_arg(map, key)?.ok_or_else(|| HostError::InvalidArgs(format!("missing argument `{key}`")))
}

fn line_arg(map: &Map<String, Value>, key: &str, default: u64) -> HostResult<u64> {
    match map.get(key) {
        None => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(n),
            _ => Err(HostError::InvalidArgs(format!(
                "`{key}` must be an integer ≥ 1"
            ))),
        },
    }
}

fn bool_arg(map: &Map<String, Value>, key: &str) -> HostResult<bool> {
    match map.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(HostError::InvalidArgs(format!(
            "`{key}` must be true or false"
        ))),
    }
}

fn push_unique(list: &mut Vec<Vec<String>>, path: Option<Vec<String>>) {
    if let Some(p) = path {
        if !list.contains(&p) {
            list.push(p);
        }
    }
}

fn parent_of(path: &[String]) -> Option<Vec<String>> {
    path.split_last().map(|(_, p)| p.to_vec())
}

impl FilesHost {
    fn exists_condition(&self, t: &Target) -> Condition {
        if !t.exists {
            return Condition::check(
                "exists",
                false,
                format!("{} does not exist (write creates it)", t.display),
            );
        }
        match self.beneath.metadata(&t.physical) {
            Ok(m) if m.is_dir() => Condition::check(
                "exists",
                false,
                format!("{} is a directory, not a file: use its list op", t.display),
            ),
            Ok(_) => Condition::check("exists", true, format!("{} exists", t.display)),
            Err(e) => Condition::check("exists", false, format!("{}: {e}", t.display)),
        }
    }

    /// The refusal of what is not a regular file (a FIFO would block the open, a device
    /// could act on it), or of a file with several hard links when the settings ask.
    fn refuse_special(&self, t: &Target, meta: &fs::Metadata, op: &str) -> HostResult<()> {
        let ft = meta.file_type();
        if ft.is_dir() {
            return Err(HostError::InvalidArgs(format!(
                "{} is a directory: use its list op",
                t.display
            )));
        }
        if !ft.is_file() {
            return Err(HostError::InvalidArgs(format!(
                "{} is a {}: {op} works on regular files only",
                t.display,
                kind_name(&ft)
            )));
        }
        if self.refuse_hard_links && meta.nlink() > 1 {
            return Err(HostError::Forbidden(format!(
                "{} has {} hard links: refused (refuse_hard_links = true; a hard link may share a file outside the root)",
                t.display,
                meta.nlink()
            )));
        }
        Ok(())
    }

    /// The content of the regular file of a target, at most `READ_CAP` bytes.
    fn read_target(&self, t: &Target, op: &str) -> HostResult<(Vec<u8>, bool, fs::Metadata)> {
        match self
            .beneath
            .read_capped(&t.physical, READ_CAP)
            .map_err(|e| self.io_error(&t.display, e))?
        {
            Ok((bytes, capped, meta)) => {
                self.refuse_special(t, &meta, op)?;
                Ok((bytes, capped, meta))
            }
            Err(meta) => {
                self.refuse_special(t, &meta, op)?;
                Err(HostError::Backend(format!(
                    "{}: not a regular file",
                    t.display
                )))
            }
        }
    }

    pub(super) fn op_specs(&self, node: &Node) -> Vec<OpSpec> {
        let on_dir = matches!(node, Node::Dir { .. });
        ops_of(node)
            .iter()
            .map(|&op| spec(op, on_dir, self.page_size))
            .collect()
    }

    fn op_named(&self, loc: &Located, name: &str) -> HostResult<Op> {
        let ops = ops_of(&loc.node);
        ops.iter()
            .copied()
            .find(|o| o.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
                HostError::NotFound(format!(
                    "{} has no op {name:?} (ops: {})",
                    self.display(&loc.segs),
                    names.join(", ")
                ))
            })
    }

    fn inside(&self, what: &str) -> Condition {
        Condition::policy(
            "inside_root",
            true,
            format!("{what} is inside the root {}", self.root.display()),
        )
    }

    fn read_only_condition(&self) -> Condition {
        Condition::policy(
            "writable",
            false,
            "files host is mounted read-only (manifest read_only = true)",
        )
    }

    /// `writable` for a target: the mount's policy, then the OS's permission on the file
    /// (if it exists) and on the directory that receives the temporary file.
    fn writable(&self, t: &Target) -> Condition {
        if self.read_only {
            return self.read_only_condition();
        }
        if t.exists && !self.beneath.may_write(&t.physical) {
            return Condition::policy(
                "writable",
                false,
                format!("{} is not writable by wip (permission denied)", t.display),
            );
        }
        // The nearest existing directory gets the temporary file (or the new directories).
        let mut dir = t.physical.parent().map(Path::to_path_buf);
        while let Some(d) = &dir {
            if !d.starts_with(&self.root) || self.beneath.lstat(d).is_ok() {
                break;
            }
            dir = d.parent().map(Path::to_path_buf);
        }
        self.dir_writable(dir.as_deref(), &t.display)
    }

    /// `writable` once the file itself is fine: the directory that receives it.
    fn dir_writable(&self, dir: Option<&Path>, what: &str) -> Condition {
        if self.read_only {
            return self.read_only_condition();
        }
        if let Some(d) = dir {
            if !self.beneath.may_write(d) {
                return Condition::policy(
                    "writable",
                    false,
                    format!(
                        "directory {} is not writable by wip (permission denied)",
                        self.display_physical(d)
                    ),
                );
            }
        }
        Condition::policy(
            "writable",
            true,
            format!("the mount is read-write and {what} is writable"),
        )
    }

    /// Resolve a `path` argument given to a directory's op. `Ok(Err(words))` is a refusal
    /// by the `inside_root` policy.
    fn target_in(
        &self,
        loc: &Located,
        dir: &Path,
        rel: &str,
    ) -> HostResult<Result<Target, String>> {
        let here = self.display(&loc.segs);
        let root = self.root.display();
        if rel.is_empty() {
            return Err(HostError::InvalidArgs("`path` is empty".to_string()));
        }
        if rel.contains('\0') {
            return Err(HostError::InvalidArgs(
                "`path` contains a NUL byte".to_string(),
            ));
        }
        let relp = Path::new(rel);
        if relp.is_absolute() {
            return Ok(Err(format!(
                "absolute path {rel} refused: give a path relative to {here} (root {root})"
            )));
        }
        // The text first: a `..` must never climb above the root, whatever the disk says.
        let mut view = loc.segs.clone();
        let mut climbs = false;
        for c in relp.components() {
            match c {
                Component::Normal(n) => view.push(n.to_string_lossy().into_owned()),
                Component::ParentDir => {
                    climbs = true;
                    if view.pop().is_none() {
                        return Ok(Err(format!("{here}/{rel}: `..` leaves the root {root}")));
                    }
                }
                _ => {}
            }
        }
        let shown = self.display(&view);
        // Then the disk: every symlink on the way must stay inside.
        let walked = self.walk(dir, relp).map_err(|e| self.io_error(&shown, e))?;
        if let Some(problem) = &walked.problem {
            return Ok(Err(problem.words(self, &shown)));
        }
        // After a `..` through a symlinked directory the text no longer names the file:
        // name it by where it is.
        let view = if climbs {
            self.host_path(&walked.path)
        } else {
            Some(view)
        };
        let display = match &view {
            Some(v) => self.display(v),
            None => shown,
        };
        Ok(Ok(Target {
            physical: walked.path,
            exists: walked.exists,
            display,
            view,
        }))
    }

    /// The guard of `op` on the entry, with the conditions `args` decide when given.
    pub(super) fn plan(&self, loc: &Located, op: &str, args: Option<&Value>) -> HostResult<Plan> {
        let op = self.op_named(loc, op)?;
        let here = self.display(&loc.segs);
        let writes = matches!(op, Op::Write | Op::Edit);
        let mut conditions = Vec::new();
        let mut target = None;
        match &loc.node {
            Node::Broken {
                target: to, why, ..
            } => {
                let root = self.root.display().to_string();
                let mut detail = format!("{here} is a symlink → {} that {why}", to.display());
                if !why.contains(&root) {
                    detail.push_str(&format!(" (root {root})"));
                }
                conditions.push(Condition::policy("inside_root", false, detail));
                if writes && self.read_only {
                    conditions.push(self.read_only_condition());
                }
            }
            Node::File { real, .. } => {
                conditions.push(self.inside(&here));
                let t = Target {
                    physical: real.clone(),
                    exists: self.beneath.lstat(real).is_ok(),
                    display: here,
                    view: Some(loc.segs.clone()),
                };
                if writes {
                    conditions.push(self.writable(&t));
                }
                if matches!(op, Op::Read | Op::Edit | Op::Stat) {
                    conditions.push(self.exists_condition(&t));
                }
                target = Some(t);
            }
            Node::Dir { real, .. } => match op {
                Op::List | Op::Stat => conditions.push(self.inside(&here)),
                Op::Read | Op::Write | Op::Edit => {
                    let rel = args.and_then(|a| a.get("path")).and_then(Value::as_str);
                    match rel {
                        None => {
                            conditions.push(Condition::policy(
                                "inside_root",
                                true,
                                format!(
                                    "{here} is inside the root {}; `path` is checked when given",
                                    self.root.display()
                                ),
                            ));
                            if writes {
                                conditions.push(self.dir_writable(Some(real), &here));
                            }
                        }
                        Some(rel) => match self.target_in(loc, real, rel)? {
                            Err(words) => {
                                conditions.push(Condition::policy("inside_root", false, words));
                                if writes && self.read_only {
                                    conditions.push(self.read_only_condition());
                                }
                            }
                            Ok(t) => {
                                conditions.push(self.inside(&t.display));
                                if writes {
                                    conditions.push(self.writable(&t));
                                }
                                if matches!(op, Op::Read | Op::Edit) {
                                    conditions.push(self.exists_condition(&t));
                                }
                                target = Some(t);
                            }
                        },
                    }
                }
            },
        }
        Ok(Plan {
            guard: Guard::new(conditions),
            target,
        })
    }

    /// Run `op`: parse the arguments, re-check the guard with them, act.
    pub(super) fn run(&self, loc: &Located, op: &str, args: &Value) -> HostResult<CallOutcome> {
        let kind = self.op_named(loc, op)?;
        let spec = spec(kind, matches!(loc.node, Node::Dir { .. }), self.page_size);
        let map = spec.check_args(args)?;
        // A `path` that is not a string would otherwise read as "no path" to the guard.
        str_arg(&map, "path")?;
        let plan = self.plan(loc, op, Some(&Value::Object(map.clone())))?;
        if !plan.guard.allowed() {
            return Err(HostError::Blocked(plan.guard));
        }
        let target = || {
            plan.target
                .clone()
                .ok_or_else(|| HostError::InvalidArgs("missing argument `path`".to_string()))
        };
        match kind {
            Op::Stat => self.stat(loc),
            Op::List => self.list(loc),
            Op::Read => self.read(
                &target()?,
                line_arg(&map, "offset", 1)?,
                line_arg(&map, "limit", DEFAULT_LIMIT)?,
            ),
            Op::Write => self.write(
                &target()?,
                required_str(&map, "content")?,
                bool_arg(&map, "create_dirs")?,
            ),
            Op::Edit => self.edit(
                &target()?,
                required_str(&map, "old_string")?,
                required_str(&map, "new_string")?,
                bool_arg(&map, "replace_all")?,
            ),
        }
    }

    fn read(&self, t: &Target, offset: u64, limit: u64) -> HostResult<CallOutcome> {
        let (bytes, capped, meta) = self.read_target(t, "read")?;
        if is_binary(&bytes) {
            return Ok(CallOutcome::text(format!(
                "{} is a binary file ({}): read shows text only\n",
                t.display,
                human_size(meta.len().max(bytes.len() as u64))
            )));
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        if total == 0 {
            return Ok(CallOutcome::text(format!("{} is empty\n", t.display)));
        }
        let start = usize::try_from(offset - 1).unwrap_or(usize::MAX);
        if start >= total {
            return Err(HostError::InvalidArgs(format!(
                "offset {offset} is past the end of {} ({})",
                t.display,
                plural(total, "line", "lines")
            )));
        }
        let end = start
            .saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
            .min(total);
        let mut out = String::new();
        for (i, line) in lines[start..end].iter().enumerate() {
            out.push_str(&format!("{:>6}\t{line}\n", start + i + 1));
        }
        if end < total {
            out.push_str(&format!(
                "… {} more {}: read with offset={}\n",
                total - end,
                if total - end == 1 { "line" } else { "lines" },
                end + 1
            ));
        }
        if capped {
            out.push_str(&format!(
                "… {} is larger than {READ_CAP_WORDS}: only its first {READ_CAP_WORDS} were read\n",
                t.display
            ));
        }
        Ok(CallOutcome::text(out))
    }

    fn write(&self, t: &Target, content: &str, create_dirs: bool) -> HostResult<CallOutcome> {
        let existing = match self.beneath.lstat(&t.physical) {
            Ok(m) => Some(m),
            Err(e) if is_gone(&e) => None,
            Err(e) => return Err(self.io_error(&t.display, e)),
        };
        if let Some(m) = &existing {
            if m.is_dir() {
                return Err(HostError::InvalidArgs(format!(
                    "{} is a directory: write needs a file path",
                    t.display
                )));
            }
            self.refuse_special(t, m, "write")?;
        }
        let mut new_dir = None;
        if existing.is_none() {
            let parent = t.physical.parent().ok_or_else(|| {
                HostError::InvalidArgs(format!("{} has no parent directory", t.display))
            })?;
            match self.beneath.metadata(parent) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(HostError::InvalidArgs(format!(
                        "{} is not a directory",
                        self.display_physical(parent)
                    )))
                }
                Err(e) if is_gone(&e) => {
                    if !create_dirs {
                        return Err(HostError::InvalidArgs(format!(
                            "directory {} does not exist: set create_dirs to create it",
                            self.display_physical(parent)
                        )));
                    }
                    // Remember the topmost new directory: its parent's listing changes.
                    new_dir = self
                        .beneath
                        .create_dirs(parent)
                        .map_err(|e| self.io_error(&self.display_physical(parent), e))?;
                }
                Err(e) => return Err(self.io_error(&self.display_physical(parent), e)),
            }
        }
        self.atomic_write(&t.physical, content.as_bytes(), existing.as_ref())
            .map_err(|e| self.io_error(&t.display, e))?;
        let created = existing.is_none();
        let words = format!(
            "{} {}: {}, {}\n",
            if created { "created" } else { "wrote" },
            t.display,
            plural(content.len(), "byte", "bytes"),
            plural(count_lines(content.as_bytes()), "line", "lines")
        );
        let mut outcome = CallOutcome::text(words);
        let physical = self.host_path(&t.physical);
        push_unique(&mut outcome.changed, t.view.clone());
        push_unique(&mut outcome.changed, physical.clone());
        if created {
            push_unique(&mut outcome.changed, t.view.as_deref().and_then(parent_of));
            push_unique(
                &mut outcome.changed,
                physical.as_deref().and_then(parent_of),
            );
        }
        if let Some(top) = new_dir {
            push_unique(
                &mut outcome.changed,
                self.host_path(&top).as_deref().and_then(parent_of),
            );
        }
        push_unique(&mut outcome.discovered, t.view.clone().or(physical));
        Ok(outcome)
    }

    fn edit(&self, t: &Target, old: &str, new: &str, replace_all: bool) -> HostResult<CallOutcome> {
        if old.is_empty() {
            return Err(HostError::InvalidArgs(
                "old_string is empty: give the exact text to replace".to_string(),
            ));
        }
        if old == new {
            return Err(HostError::InvalidArgs(
                "old_string and new_string are the same: nothing to change".to_string(),
            ));
        }
        let (bytes, capped, meta) = self.read_target(t, "edit")?;
        if capped {
            return Err(HostError::InvalidArgs(format!(
                "{} is larger than {READ_CAP_WORDS}: edit works on smaller files",
                t.display
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            HostError::InvalidArgs(format!(
                "{} is not UTF-8 text: edit works on text files",
                t.display
            ))
        })?;
        let n = text.matches(old).count();
        if n == 0 {
            return Err(HostError::InvalidArgs(format!(
                "old_string not found in {}",
                t.display
            )));
        }
        if n > 1 && !replace_all {
            return Err(HostError::InvalidArgs(format!(
                "old_string occurs {n} times in {}; add context to make it unique or set replace_all",
                t.display
            )));
        }
        let out = if replace_all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        self.atomic_write(&t.physical, out.as_bytes(), Some(&meta))
            .map_err(|e| self.io_error(&t.display, e))?;
        let mut outcome = CallOutcome::text(format!(
            "replaced {} in {}\n",
            plural(n, "occurrence", "occurrences"),
            t.display
        ));
        push_unique(&mut outcome.changed, t.view.clone());
        push_unique(&mut outcome.changed, self.host_path(&t.physical));
        Ok(outcome)
    }

    fn stat(&self, loc: &Located) -> HostResult<CallOutcome> {
        let here = self.display(&loc.segs);
        let (real, link) = match &loc.node {
            Node::Dir { real, link } | Node::File { real, link } => (real, link),
            Node::Broken { .. } => {
                return Err(HostError::Forbidden(format!(
                    "{here} is a symlink that is not followed"
                )))
            }
        };
        let meta = self
            .beneath
            .metadata(real)
            .map_err(|e| self.io_error(&here, e))?;
        let ft = meta.file_type();
        let mut out = format!("path: {here}\ndisk path: {}\n", real.display());
        out.push_str(&format!("type: {}", kind_name(&ft)));
        if let Some(l) = link {
            out.push_str(&format!(" (symlink → {})", l.display()));
        }
        out.push('\n');
        if ft.is_dir() {
            let counts = match self.read_dir_sorted(real) {
                Ok(names) => Counts::of(&names).words(),
                Err(e) => format!("unreadable: {e}"),
            };
            out.push_str(&format!("entries: {counts}\n"));
        } else {
            out.push_str(&format!(
                "size: {} ({})\n",
                plural(meta.len() as usize, "byte", "bytes"),
                human_size(meta.len())
            ));
        }
        out.push_str(&format!("permissions: {}\n", mode_string(&meta)));
        if let Ok(t) = meta.modified() {
            out.push_str(&format!("modified: {}\n", format_time(t)));
        }
        if ft.is_file() {
            let lines = if meta.len() > READ_CAP {
                format!("not counted (larger than {READ_CAP_WORDS})")
            } else {
                match self.beneath.read_capped(real, READ_CAP) {
                    Ok(Ok((bytes, _, _))) if is_binary(&bytes) => "none (binary)".to_string(),
                    Ok(Ok((bytes, _, _))) => count_lines(&bytes).to_string(),
                    Ok(Err(m)) => format!("none ({})", kind_name(&m.file_type())),
                    Err(e) => format!("unreadable: {e}"),
                }
            };
            out.push_str(&format!("lines: {lines}\n"));
        }
        Ok(CallOutcome::text(out))
    }

    fn list(&self, loc: &Located) -> HostResult<CallOutcome> {
        let here = self.display(&loc.segs);
        let Node::Dir { real, .. } = &loc.node else {
            return Err(HostError::InvalidArgs(format!("{here} is not a directory")));
        };
        let names = self
            .read_dir_sorted(real)
            .map_err(|e| self.io_error(&here, e))?;
        let mut out = format!("{here}: {}\n", Counts::of(&names).words());
        for (name, ft) in names.iter().take(self.page_size) {
            let path = real.join(name);
            let (kind, size) = if ft.is_symlink() {
                let to = self
                    .beneath
                    .read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|e| format!("? ({e})"));
                (format!("symlink → {to}"), "-".to_string())
            } else if ft.is_dir() {
                ("directory".to_string(), "-".to_string())
            } else {
                let size = self
                    .beneath
                    .lstat(&path)
                    .map(|m| human_size(m.len()))
                    .unwrap_or_else(|_| "?".to_string());
                (kind_name(ft).to_string(), size)
            };
            out.push_str(&format!("{name}\t{kind}\t{size}\n"));
        }
        if names.len() > self.page_size {
            out.push_str(&format!(
                "… {} more {} not shown (page_size {}): reach them by name, e.g. read with path=NAME\n",
                names.len() - self.page_size,
                if names.len() - self.page_size == 1 { "entry" } else { "entries" },
                self.page_size
            ));
        }
        Ok(CallOutcome::text(out))
    }

    /// Replace `path` atomically (see `Beneath::write_atomic`), with a temporary name no
    /// other write of this process uses.
    pub(super) fn atomic_write(
        &self,
        path: &Path,
        bytes: &[u8],
        existing: Option<&fs::Metadata>,
    ) -> io::Result<()> {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".wip-write-{}-{n}.tmp", std::process::id());
        self.beneath.write_atomic(path, &tmp, bytes, existing)
    }
}
