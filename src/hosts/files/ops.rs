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

use std::cell::RefCell;
use std::num::NonZeroU64;
use std::sync::LazyLock;

use crate::host::names::shown;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::host::op::{Decl, NoArgs, Op, Ops};
use crate::host::{CallOutcome, Condition, Guard, HostError, HostResult, OpSpec};

use super::beneath::Kind;
use super::describe::{
    count_lines, format_time, human_size, is_binary, kind_name, mode_string, plural, Counts,
};
use super::resolve::{is_gone, Located, Node};
use super::FilesHost;

/// Reads never take more than this into memory (a FIFO or a huge log could be endless).
const READ_CAP: u64 = 16 * 1024 * 1024;
const READ_CAP_WORDS: &str = "16 MiB";
const DEFAULT_LIMIT: u64 = 2000;

/// What an entry's ops see of it: the entry, and the listing size `list` names.
pub(super) struct Entry {
    pub loc: Located,
    pub page_size: usize,
}

impl Entry {
    pub(super) fn on_dir(&self) -> bool {
        matches!(self.loc.node, Node::Dir { .. })
    }
}

/// The target a call's guard resolved, which its run then acts on (so what was checked is
/// what gets touched), and the places the policy judged the call at, which that target
/// must be one of.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) target: RefCell<Option<Target>>,
    pub(super) judged: Option<std::sync::Arc<Vec<Vec<String>>>>,
}

impl Slot {
    /// A slot for a call the policy judged at `judged` (`Caller::judged`).
    pub(super) fn judged(judged: Option<std::sync::Arc<Vec<Vec<String>>>>) -> Slot {
        Slot {
            target: RefCell::default(),
            judged,
        }
    }
}

/// How an op touches its target, which decides its guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The entry itself, read-only (`list`, `stat`).
    Look,
    Read,
    /// Replace or create the file.
    Write,
    /// Change a file that exists.
    Edit,
}

/// Arguments only a directory's ops take: the file they act on (a file's ops act on it).
const DIR_ONLY: [&str; 2] = ["path", "create_dirs"];

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// file path relative to this directory
    #[serde(default)]
    #[schemars(length(min = 1))]
    path: Option<String>,
    /// first line to show, 1-based (default 1)
    #[serde(default = "first_line")]
    offset: NonZeroU64,
    /// how many lines to show (default 2000)
    #[serde(default = "default_limit")]
    limit: NonZeroU64,
}

fn first_line() -> NonZeroU64 {
    NonZeroU64::MIN
}

fn default_limit() -> NonZeroU64 {
    NonZeroU64::new(DEFAULT_LIMIT).unwrap_or(NonZeroU64::MIN)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// file path relative to this directory
    #[serde(default)]
    #[schemars(length(min = 1))]
    path: Option<String>,
    /// the whole new content of the file
    content: String,
    /// create missing parent directories (default false)
    #[serde(default)]
    create_dirs: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    /// file path relative to this directory
    #[serde(default)]
    #[schemars(length(min = 1))]
    path: Option<String>,
    /// exact text to replace (must occur once unless replace_all)
    #[schemars(length(min = 1))]
    old_string: String,
    /// replacement text
    new_string: String,
    /// replace every occurrence (default false)
    #[serde(default)]
    replace_all: bool,
}

pub(super) type FilesOp = Op<FilesHost, Entry, Slot>;
pub(super) type FilesDecl<A> = Decl<FilesHost, Entry, Slot, A>;

fn read() -> FilesOp {
    FilesDecl::<ReadArgs> {
        name: name::READ,
        offers: |_| true,
        describe: |e| if e.on_dir() {
            "read(path, offset?, limit?): numbered lines of the file at path (relative to here), like cat -n"
        } else {
            "read(offset?, limit?): the file's lines numbered like cat -n, from line offset (default 1), at most limit (default 2000)"
        }.to_string(),
        guard: |h, slot, e, a| {
            let path = a.map(|a| (a.path.as_deref(), false));
            h.checked(e, slot, Access::Read, path)
        },
        run: |h, slot, e, a| h.read(&target(slot, e)?, a.offset.get(), a.limit.get()),
    }
    .into()
}

fn write() -> FilesOp {
    FilesDecl::<WriteArgs> {
        name: name::WRITE,
        offers: |_| true,
        describe: |e| if e.on_dir() {
            "write(path, content, create_dirs?): create or overwrite the file at path (relative to here)"
        } else {
            "write(content): replace the whole file with content (atomic; permissions kept)"
        }.to_string(),
        guard: |h, slot, e, a| {
            let path = a.map(|a| (a.path.as_deref(), a.create_dirs));
            h.checked(e, slot, Access::Write, path)
        },
        run: |h, slot, e, a| h.write(&target(slot, e)?, &a.content, a.create_dirs),
    }
    .into()
}

fn edit() -> FilesOp {
    FilesDecl::<EditArgs> {
        name: name::EDIT,
        offers: |_| true,
        describe: |e| if e.on_dir() {
            "edit(path, old_string, new_string, replace_all?): replace exact text in the file at path (relative to here)"
        } else {
            "edit(old_string, new_string, replace_all?): replace exact text; old_string must occur once unless replace_all"
        }.to_string(),
        guard: |h, slot, e, a| {
            let path = a.map(|a| (a.path.as_deref(), false));
            h.checked(e, slot, Access::Edit, path)
        },
        run: |h, slot, e, a| {
            h.edit(&target(slot, e)?, &a.old_string, &a.new_string, a.replace_all)
        },
    }
    .into()
}

fn stat() -> FilesOp {
    FilesDecl::<NoArgs> {
        name: name::STAT,
        offers: |_| true,
        describe: |e| {
            if e.on_dir() {
                "stat(): entry counts, permissions and modification time of this directory"
            } else {
                "stat(): size, type, permissions, modification time and line count"
            }
            .to_string()
        },
        guard: |h, slot, e, _| h.checked(e, slot, Access::Look, None),
        run: |h, _, e, _| h.stat(&e.loc),
    }
    .into()
}

fn list() -> FilesOp {
    FilesDecl::<NoArgs> {
        name: name::LIST,
        offers: Entry::on_dir,
        describe: |e| {
            format!(
                "list(): entries here, one per line: name, type, size (first {} by name)",
                e.page_size
            )
        },
        guard: |h, slot, e, _| h.checked(e, slot, Access::Look, None),
        run: |h, _, e, _| h.list(&e.loc),
    }
    .into()
}

/// Every op's name, spelled once: the declarations below and the words that point to an
/// op use these (the changes the file system makes are named in `host::tree::op`).
pub(super) mod name {
    pub const READ: &str = "read";
    pub const WRITE: &str = crate::host::tree::op::WRITE;
    pub const EDIT: &str = "edit";
    pub const STAT: &str = "stat";
    pub const LIST: &str = "list";
}

/// A file's ops, in the order `ops/` lists them: those an agent calls, then the changes
/// only the file system makes (their runs and guards are here too). A broken link shows
/// them too, so that their guards can say why they are refused.
static FILE_OPS: LazyLock<Ops<FilesHost, Entry, Slot>> = LazyLock::new(|| {
    let mut ops = vec![read(), write(), edit(), stat()];
    ops.extend(super::changes::file_ops());
    Ops::new(ops)
});

/// A directory's ops: its own, then those on a file at `path` below it, then the changes.
static DIR_OPS: LazyLock<Ops<FilesHost, Entry, Slot>> = LazyLock::new(|| {
    let mut ops = vec![list(), stat(), read(), write(), edit()];
    ops.extend(super::changes::dir_ops());
    Ops::new(ops)
});

/// Every op name a file or a folder has, in listing order (a missing path shows them all).
pub(super) fn all_names() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for table in [&*FILE_OPS, &*DIR_OPS] {
        for name in table.all_names() {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

pub(super) fn ops_of(node: &Node) -> &'static Ops<FilesHost, Entry, Slot> {
    match node {
        Node::Dir { .. } => &DIR_OPS,
        Node::File { .. } | Node::Broken { .. } => &FILE_OPS,
    }
}

/// What `ops/` shows: a directory's `path` is required, a file's ops have none (nor
/// `create_dirs`), which one declaration per op leaves to here.
pub(super) fn specs(e: &Entry) -> Vec<OpSpec> {
    let mut specs = ops_of(&e.loc.node).specs(e);
    for spec in &mut specs {
        if let Some(words) = super::changes::posix_description(&spec.name, e.on_dir()) {
            spec.description = words;
        }
        let Some(props) = spec
            .schema
            .get_mut("properties")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if !props.contains_key("path") {
            continue;
        }
        if e.on_dir() {
            let required = spec.schema["required"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !required.contains(&Value::from("path")) {
                let mut with_path = vec![Value::from("path")];
                with_path.extend(required);
                spec.schema["required"] = Value::Array(with_path);
            }
        } else {
            for arg in DIR_ONLY {
                props.remove(arg);
            }
        }
    }
    specs
}

/// The target the guard resolved; none when a directory's op was given no `path`.
pub(super) fn target(slot: &Slot, e: &Entry) -> HostResult<Target> {
    slot.target.borrow_mut().take().ok_or_else(|| {
        HostError::InvalidArgs(if e.on_dir() {
            "missing argument `path`".to_string()
        } else {
            format!("{}: no file to act on", e.loc.segs.join("/"))
        })
    })
}

/// The file an op acts on, as the guard resolved it.
#[derive(Clone, Debug)]
pub(super) struct Target {
    /// Physical path inside the root (may not exist yet for `write`).
    pub(super) physical: PathBuf,
    pub(super) exists: bool,
    /// World path for messages.
    pub(super) display: String,
    /// Host path as the caller sees it (for `changed` and `discovered`).
    pub(super) view: Option<Vec<String>>,
}

impl Target {
    /// The host paths this target is at: where the caller named it and, after symlinks,
    /// the file itself.
    pub(super) fn places(&self, host: &FilesHost) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        push_unique(&mut out, self.view.clone());
        push_unique(&mut out, host.host_path(&self.physical));
        out
    }
}

/// A guard and the target it checked.
pub(super) struct Plan {
    pub guard: Guard,
    target: Option<Target>,
}

pub(super) fn push_unique(list: &mut Vec<Vec<String>>, path: Option<Vec<String>>) {
    if let Some(p) = path {
        if !list.contains(&p) {
            list.push(p);
        }
    }
}

pub(super) fn parent_of(path: &[String]) -> Option<Vec<String>> {
    path.split_last().map(|(_, p)| p.to_vec())
}

impl FilesHost {
    pub(super) fn exists_condition(&self, t: &Target) -> Condition {
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
    pub(super) fn refuse_special(
        &self,
        t: &Target,
        meta: &fs::Metadata,
        op: &str,
    ) -> HostResult<()> {
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

    pub(super) fn inside(&self, what: &str) -> Condition {
        Condition::policy(
            "inside_root",
            true,
            format!("{what} is inside the root {}", self.root.display()),
        )
    }

    pub(super) fn read_only_condition(&self) -> Condition {
        Condition::policy(
            "writable",
            false,
            "files host is mounted read-only (manifest read_only = true)",
        )
    }

    /// `writable` for a target: the mount's policy, then the OS's permission on the file
    /// (if it exists) and on the directory that receives the temporary file.
    pub(super) fn writable(&self, t: &Target) -> Condition {
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
    pub(super) fn dir_writable(&self, dir: Option<&Path>, what: &str) -> Condition {
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

    /// Resolve a `path` argument given to a directory's op. `Ok(Err(condition))` is a
    /// refusal: the failed `inside_root` policy condition.
    pub(super) fn target_in(
        &self,
        loc: &Located,
        dir: &Path,
        rel: &str,
    ) -> HostResult<Result<Target, Condition>> {
        let outside = |words: String| Ok(Err(Condition::policy("inside_root", false, words)));
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
            return outside(format!(
                "absolute path {rel} refused: give a path relative to {here} (root {root})"
            ));
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
                        return outside(format!("{here}/{rel}: `..` leaves the root {root}"));
                    }
                }
                _ => {}
            }
        }
        let shown = self.display(&view);
        // Then the disk: every symlink on the way must stay inside.
        let walked = self.walk(dir, relp).map_err(|e| self.io_error(&shown, e))?;
        if let Some(problem) = &walked.problem {
            return outside(problem.words(self, &shown));
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

    /// The guard of an op that makes `access` to the entry (or, from a directory, to the
    /// file at `rel` below it), and the target it resolved.
    pub(super) fn plan(
        &self,
        loc: &Located,
        access: Access,
        rel: Option<&str>,
    ) -> HostResult<Plan> {
        let here = self.display(&loc.segs);
        let writes = matches!(access, Access::Write | Access::Edit);
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
                if access != Access::Write {
                    conditions.push(self.exists_condition(&t));
                }
                target = Some(t);
            }
            Node::Dir { real, .. } => match access {
                Access::Look => conditions.push(self.inside(&here)),
                Access::Read | Access::Write | Access::Edit => match rel {
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
                        Err(outside) => {
                            conditions.push(outside);
                            if writes && self.read_only {
                                conditions.push(self.read_only_condition());
                            }
                        }
                        Ok(t) => {
                            conditions.push(self.inside(&t.display));
                            if writes {
                                conditions.push(self.writable(&t));
                            }
                            if access != Access::Write {
                                conditions.push(self.exists_condition(&t));
                            }
                            target = Some(t);
                        }
                    },
                },
            },
        }
        Ok(Plan {
            guard: Guard::new(conditions),
            target,
        })
    }

    /// The guard of an op making `access`; with arguments (`path`, and whether a
    /// directory-only argument was given), the target they name goes to `slot`.
    pub(super) fn checked(
        &self,
        e: &Entry,
        slot: &Slot,
        access: Access,
        args: Option<(Option<&str>, bool)>,
    ) -> HostResult<Vec<Condition>> {
        let (rel, dir_only) = args.unwrap_or_default();
        if !e.on_dir() && (rel.is_some() || dir_only) {
            return Err(HostError::InvalidArgs(format!(
                "{} is a file: its ops act on it and take no {}",
                self.display(&e.loc.segs),
                DIR_ONLY.join(" or ")
            )));
        }
        let plan = self.plan(&e.loc, access, rel)?;
        if let (Some(judged), Some(t)) = (&slot.judged, &plan.target) {
            // What the call touches must be what the policy judged: a symlink swapped in
            // meanwhile leads elsewhere.
            if let Some(place) = t.places(self).iter().find(|p| !judged.contains(p)) {
                return Err(HostError::Forbidden(format!(
                    "{} changed while the call was checked (it now leads to {}): call again",
                    t.display,
                    self.display(place)
                )));
            }
        }
        *slot.target.borrow_mut() = plan.target;
        Ok(plan.guard.conditions)
    }

    /// Where an op of `op` on the entry `e` acts besides the entry itself (see
    /// `Host::acts_on`): the file its `path` argument, or the entry's own symlink, leads
    /// to, resolved beneath the root as the call resolves it.
    pub(super) fn places_of(
        &self,
        e: &Entry,
        op: &str,
        args: Option<&Value>,
    ) -> HostResult<Vec<Vec<String>>> {
        let access = match op {
            name::READ => Access::Read,
            name::WRITE => Access::Write,
            name::EDIT => Access::Edit,
            _ => Access::Look,
        };
        let rel = args.and_then(|a| a.get("path")).and_then(Value::as_str);
        if access == Access::Look || (e.on_dir() && rel.is_none()) || (!e.on_dir() && rel.is_some())
        {
            return Ok(Vec::new());
        }
        let plan = self.plan(&e.loc, access, rel)?;
        Ok(plan
            .target
            .map(|t| t.places(self))
            .unwrap_or_default()
            .into_iter()
            .filter(|p| *p != e.loc.segs)
            .collect())
    }

    fn read(&self, t: &Target, offset: u64, limit: u64) -> HostResult<CallOutcome> {
        let (bytes, capped, meta) = self.read_target(t, name::READ)?;
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
            self.refuse_special(t, m, name::WRITE)?;
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
        let (bytes, capped, meta) = self.read_target(t, name::EDIT)?;
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
            .read_dir_stat(real)
            .map_err(|e| self.io_error(&here, e))?;
        let kinds: Vec<(String, Kind)> = names.iter().map(|(n, s)| (n.clone(), s.kind)).collect();
        let mut out = format!("{}: {}\n", shown(&here), Counts::of(&kinds).words());
        for (name, stat) in names.iter().take(self.page_size) {
            let path = real.join(name);
            let ft = stat.kind;
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
                (ft.name().to_string(), human_size(stat.size))
            };
            // One row per name, whatever the name holds (a newline, a tab, an escape).
            let (name, kind) = (shown(name), shown(&kind));
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
