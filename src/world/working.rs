//! A working tree (`Host::tree`), as the adapters' POSIX requests reach it: files are
//! files, folders hold exactly their children, and every path's entry is at the unlisted
//! `PATH@`. Reads go to the tree; every change is judged by the policy at the paths it acts
//! on (both ends of a rename, a link's two names), refused with EACCES and the rule's words
//! (recorded as a refused run), or made and recorded as a run of the files host's op of that
//! name, queued for the journal's next group commit (`call::record`).
//!
//! A failed change (EEXIST, ENOENT, ENOTEMPTY from the backing file system) made nothing and
//! is no run: builds and `git` try many such.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::node::{intern, EntryRef, NodeId, OpFile, Target, TreeRef};
use super::World;
use crate::host::names;
use crate::host::tree::{
    Creds, DirEntry, Found, FsStat, Kept, Kind, RenameMode, SetAttr, Stat, TimeSet, Tree,
};
use crate::host::Caller;
use crate::state::Ended;

use crate::host::tree::op;

/// What a name in a working-tree folder leads to.
pub enum Looked {
    /// A file of the tree (the host holds one more reference for the kernel).
    Tree(TreeRef, Stat),
    /// The unlisted entry of a path (`NAME@`): never cached as a name by the kernel.
    Entry(NodeId),
}

/// Who makes a request, as the kernel tells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Who {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// The bit that marks a `Who::pid` as a client of an adapter without processes here (an
/// NFS client): its caller is the one the adapter named (`World::remote_who`).
pub const REMOTE: u32 = 0x8000_0000;

/// How many remote clients' callers are kept (the oldest are forgotten past it).
const REMOTE_MAX: usize = 4096;

impl Who {
    fn creds(self) -> Creds {
        Creds {
            uid: self.uid,
            gid: self.gid,
            pid: self.pid,
        }
    }
}

/// How long a caller read from /proc is reused for the runs it makes (a `tar x` makes
/// four a file): attribution, not rights, hangs on it.
pub(super) const CALLER_REUSE: Duration = Duration::from_secs(1);
/// Files up to this size are copied (their before-image) at a writable open; larger ones at
/// their first write through the daemon.
const EAGER_MAX: u64 = 8 << 20;
/// Files up to this size get the sha256 of what a `write` run left, hashed when the run is
/// recorded; larger ones record size and time only.
const HASH_MAX: u64 = 16 << 20;

/// A file of a working tree open through the mount: one open descriptor.
pub struct TreeFile {
    pub t: TreeRef,
    flags: i32,
    /// The descriptor's own file, opened when first needed (a read that passthrough
    /// serves needs none).
    file: OnceLock<Result<File, i32>>,
    /// Opened for writing: what its last close records.
    writing: Option<Writing>,
}

struct Writing {
    caller: Caller,
    path: Option<Vec<OsString>>,
    /// Size and time of the file at open (`None`: it was created by this open).
    before: Option<(u64, SystemTime)>,
    /// Written through the daemon (passthrough writes never reach it).
    wrote: AtomicBool,
    /// The file as this open made it (created by it), for undo.
    created: Option<Stat>,
    /// The before-image of what this descriptor changes: taken at open (`O_TRUNC`) or at
    /// its first change through the daemon (`lazy`); `Err`: none could be kept, why.
    image: OnceLock<Result<(Kept, Stat), String>>,
    /// The image is taken at the first change: this open's writes go through the daemon.
    lazy: bool,
}

impl TreeFile {
    pub fn writable(&self) -> bool {
        self.writing.is_some()
    }

    /// Whether this open's writes must reach the daemon (no passthrough): its before-image
    /// is taken at its first change, which passthrough would hide.
    pub fn writes_through_daemon(&self) -> bool {
        self.writing.as_ref().is_some_and(|w| w.lazy)
    }
}

/// No before-image for this change.
fn nothing(_: &mut Value) -> Vec<Kept> {
    Vec::new()
}

/// Nanoseconds since the epoch (negative before it).
pub(super) fn ns(t: SystemTime) -> i64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// What a change left at its path, as undo compares it (never by hashing).
pub(super) fn state_of(s: &Stat) -> Value {
    json!({"ino": s.ino, "size": s.size, "mtime_ns": ns(s.mtime)})
}

/// What a path was before a change, as undo restores it (with `sha256` where its bytes
/// were kept).
fn was_of(s: &Stat) -> Value {
    json!({
        "kind": s.kind.name(),
        "mode": mode_words(u32::from(s.perm)),
        "uid": s.uid,
        "gid": s.gid,
        "size": s.size,
        "atime_ns": ns(s.atime),
        "mtime_ns": ns(s.mtime),
    })
}

/// `args.before` of an attribute change: the attributes it replaces.
fn was(tree: &dyn Tree, t: TreeRef, args: &mut Value) -> Vec<Kept> {
    if let Ok(s) = tree.stat(t.node) {
        args["before"] = was_of(&s);
    }
    Vec::new()
}

/// A kept image in the args: its sha256 with the attributes it is restored with.
fn image_value(kept: &Result<(Kept, Stat), String>) -> Value {
    match kept {
        Ok((k, s)) => {
            let mut v = was_of(s);
            v["sha256"] = json!(k.sha256);
            v["size"] = json!(k.size);
            v
        }
        Err(why) => json!({"missing": why}),
    }
}

fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// `0644`: a mode for people.
fn mode_words(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

fn lossy(path: &[OsString]) -> Vec<String> {
    path.iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

fn child_path(dir: &[OsString], name: &OsStr) -> Vec<OsString> {
    let mut p = dir.to_vec();
    p.push(name.to_os_string());
    p
}

fn iso(t: SystemTime) -> String {
    crate::calendar::iso(t)
}

impl World {
    /// The working tree of host `host`.
    fn tree(&self, host: usize) -> io::Result<&dyn Tree> {
        self.hosts()
            .get(host)
            .and_then(|m| m.host.tree())
            .ok_or_else(|| err(libc::ENOENT))
    }

    /// The root folder of the working tree of host `host`, if it is one.
    pub fn tree_root(&self, host: usize) -> Option<TreeRef> {
        let tree = self.hosts().get(host)?.host.tree()?;
        Some(TreeRef {
            host,
            node: tree.root(),
        })
    }

    /// The first host that is a working tree (what `df` of the mount shows).
    pub fn first_tree(&self) -> Option<TreeRef> {
        (0..self.hosts().len()).find_map(|h| self.tree_root(h))
    }

    /// Every run recorded so far, made durable (`fsync` of a folder).
    pub fn sync_runs(&self) -> super::error::WorldResult<()> {
        self.calls.grouped.flush();
        Ok(self.journal.sync()?)
    }

    /// How long the kernel may keep what it was told of the tree of `host`.
    pub fn tree_ttl(&self, host: usize) -> Duration {
        self.tree(host).map(|t| t.ttl()).unwrap_or(Duration::ZERO)
    }

    fn remote_callers(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u32, Caller>> {
        self.remote_callers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Who a client of an adapter without processes here is (an NFS client: `session`
    /// is its own number, `caller` what its runs record).
    pub fn remote_who(&self, session: u32, gid: u32, caller: Caller) -> Who {
        let who = Who {
            pid: session | REMOTE,
            uid: caller.uid,
            gid,
        };
        let mut known = self.remote_callers();
        if known.len() >= REMOTE_MAX && !known.contains_key(&who.pid) {
            known.clear();
        }
        known.insert(who.pid, caller);
        who
    }

    /// The path of a node from its tree's root (checked against the disk).
    fn path(&self, t: TreeRef) -> io::Result<Vec<OsString>> {
        let tree = self.tree(t.host)?;
        if t.node == tree.root() {
            return Ok(Vec::new());
        }
        tree.path_of(t.node).ok_or_else(|| err(libc::ESTALE))
    }

    /// Whether a `hide` rule covers the tree path `path` of host `host`.
    fn hidden(&self, host: usize, path: &[OsString]) -> bool {
        self.entries.policy_hides() && self.entries.is_hidden(&EntryRef::new(host, lossy(path)))
    }

    // ---- reads ---------------------------------------------------------------------

    /// `name` in the folder `dir`: a file of the tree, or the unlisted entry `NAME@`
    /// (`.@` the folder's own, `..@` its parent's). A real file named `x@` wins over the
    /// entry of `x`, which is then `x@@`'s... no: `files@/paths/x`; `x@@` is the entry of
    /// the real `x@`.
    pub fn tree_lookup(&self, dir: TreeRef, name: &OsStr) -> io::Result<Looked> {
        let tree = self.tree(dir.host)?;
        let hides = self.entries.policy_hides();
        let dir_path = if hides { Some(self.path(dir)?) } else { None };
        if let Some(p) = &dir_path {
            if self.hidden(dir.host, &child_path(p, name)) {
                return Err(err(libc::ENOENT));
            }
        }
        match tree.lookup(dir.node, name) {
            Ok(Found { node, stat }) => Ok(Looked::Tree(
                TreeRef {
                    host: dir.host,
                    node,
                },
                stat,
            )),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                let Some(base) = name.as_bytes().strip_suffix(b"@") else {
                    return Err(e);
                };
                let base = OsStr::from_bytes(base);
                let dir_path = match dir_path {
                    Some(p) => p,
                    None => self.path(dir)?,
                };
                let entry = match base.as_bytes() {
                    b"" => return Err(e),
                    b"." => dir_path,
                    b".." => match dir_path.split_last() {
                        Some((_, parent)) => parent.to_vec(),
                        // Above the root is no entry of this host.
                        None => return Err(e),
                    },
                    _ => {
                        let p = child_path(&dir_path, base);
                        if !tree.exists(dir.node, base)? || self.hidden(dir.host, &p) {
                            return Err(e);
                        }
                        p
                    }
                };
                // An entry is named by UTF-8 names only.
                let segs = entry
                    .iter()
                    .map(|n| n.to_str().map(str::to_string))
                    .collect::<Option<Vec<String>>>()
                    .ok_or(e)?;
                Ok(Looked::Entry(NodeId::Entry(EntryRef::new(dir.host, segs))))
            }
            Err(e) => Err(e),
        }
    }

    /// The kernel dropped `n` references to a tree node.
    pub fn tree_forget(&self, t: TreeRef, n: u64) {
        if let Ok(tree) = self.tree(t.host) {
            tree.forget(t.node, n);
        }
    }

    pub fn tree_stat(&self, t: TreeRef) -> io::Result<Stat> {
        self.tree(t.host)?.stat(t.node)
    }

    /// The names in a folder of the tree, what a policy hides left out.
    pub fn tree_list(&self, dir: TreeRef) -> io::Result<Vec<DirEntry>> {
        let mut names = self.tree(dir.host)?.list(dir.node)?;
        if self.entries.policy_hides() {
            let path = self.path(dir)?;
            names.retain(|n| !self.hidden(dir.host, &child_path(&path, &n.name)));
        }
        Ok(names)
    }

    pub fn tree_readlink(&self, t: TreeRef) -> io::Result<OsString> {
        self.tree(t.host)?.readlink(t.node)
    }

    pub fn tree_getxattr(&self, t: TreeRef, name: &OsStr) -> io::Result<Vec<u8>> {
        self.tree(t.host)?.getxattr(t.node, name)
    }

    pub fn tree_listxattr(&self, t: TreeRef) -> io::Result<Vec<u8>> {
        self.tree(t.host)?.listxattr(t.node)
    }

    pub fn tree_statfs(&self, t: TreeRef) -> io::Result<FsStat> {
        self.tree(t.host)?.statfs(t.node)
    }

    /// `access(2)`, truly: writing is refused where the policy would refuse a write.
    pub fn tree_access(&self, t: TreeRef, mask: i32, who: Who) -> io::Result<()> {
        self.tree(t.host)?.access(t.node, mask, who.creds())?;
        if mask & libc::W_OK != 0 {
            let path = self.path(t)?;
            let kind = self.tree_stat(t)?.kind;
            let op = if kind == Kind::Dir {
                op::CREATE
            } else {
                op::WRITE
            };
            if self
                .judge(t.host, op, &[(path, false)], &json!({}))
                .is_err()
            {
                return Err(err(libc::EACCES));
            }
        }
        Ok(())
    }

    // ---- the judge and the record ----------------------------------------------------

    /// The policy's decision on a change `op` at `places` (tree paths, and whether all
    /// below is acted on): `Err` with the refusal's words.
    fn judge(
        &self,
        host: usize,
        op: &str,
        places: &[(Vec<OsString>, bool)],
        args: &Value,
    ) -> Result<(), super::call::policy::ChangeRefused> {
        let places: Vec<(Vec<String>, bool)> = places.iter().map(|(p, s)| (lossy(p), *s)).collect();
        self.calls.judge_change(host, op, &places, args)
    }

    /// The caller of process `pid`, read from /proc (reused for a moment).
    fn caller_of(&self, who: Who) -> Caller {
        if who.pid & REMOTE != 0 {
            let known = self.remote_callers().get(&who.pid).cloned();
            return known.unwrap_or_else(|| Caller {
                uid: who.uid,
                command: format!("a remote client (uid {})", who.uid),
                ..Caller::default()
            });
        }
        let key = (who.pid, who.uid);
        if let Some(c) = self.callers.get(&key) {
            return c;
        }
        let c = Caller::from_pid(who.pid, who.uid);
        self.callers.insert(key, c.clone());
        c
    }

    /// Record a run of `op` at the tree path `path` of `host`: its outcome, with `errno`
    /// (0: it was made).
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        host: usize,
        path: &[OsString],
        op: &str,
        caller: Caller,
        args: Value,
        errno: i32,
        words: String,
    ) {
        if errno == 0 && self.tree(host).is_ok_and(|t| t.unrecorded(path)) {
            return;
        }
        let e = EntryRef::new(host, lossy(path));
        let target = Target::Entry(e.clone());
        let entry_path = self.entries.entry_path(host, &e.path);
        let status = if errno == 0 { "ok" } else { "refused" };
        let result = crate::secrets::scrub(&names::printable(&format!(
            "{}{words}\n",
            if errno == 0 { "" } else { "error: " }
        )))
        .into_owned();
        if op == op::RENAME {
            // The moved file's creation, if held back, comes before its move.
            if let Some(from) = args.get("from").and_then(Value::as_str) {
                let from: Vec<String> = from.split('/').map(str::to_string).collect();
                self.calls
                    .grouped
                    .release(&self.entries.entry_path(host, &from));
            }
        }
        let run = Ended {
            caller,
            path: entry_path,
            op: op.to_string(),
            args: args.to_string(),
            guard: String::new(),
            status: status.to_string(),
            errno,
            result,
        };
        // A file just made, still empty, may vanish again at once (a lock file, an
        // editor's probe): its run waits a moment for that (see `tree_unlink`).
        if errno == 0 && op == op::CREATE {
            self.calls.grouped.hold(run);
        } else {
            self.calls.grouped.push(run);
        }
        // What the kernel may hold of the entry's runs and result, and of the entry.
        self.calls.forget_cached_state();
        self.calls.publish(&[
            NodeId::Runs(target.clone(), intern(op)),
            NodeId::OpFile(target.clone(), intern(op), OpFile::Result),
            NodeId::OpFile(target.clone(), intern(op), OpFile::Guard),
            NodeId::Info(target, super::node::InfoFile::Description),
        ]);
    }

    /// Judge a change, make it, record it: `keep` keeps what it is about to replace (its
    /// before-images, named in the args), `act` makes it; `words` says what it did (and
    /// may add to the args what the change left, for undo).
    #[allow(clippy::too_many_arguments)]
    fn change<T>(
        &self,
        host: usize,
        op: &str,
        places: &[(Vec<OsString>, bool)],
        who: Who,
        mut args: Value,
        keep: impl FnOnce(&mut Value) -> Vec<Kept>,
        act: impl FnOnce() -> io::Result<T>,
        words: impl FnOnce(&T, &mut Value) -> String,
    ) -> io::Result<T> {
        let Some((at, _)) = places.first() else {
            return Err(err(libc::EINVAL));
        };
        for (p, _) in places {
            if self.hidden(host, p) {
                let why = format!(
                    "{op} {}: the path is hidden by the policy",
                    self.shown(host, p)
                );
                self.record(host, at, op, self.caller_of(who), args, libc::EACCES, why);
                return Err(err(libc::EACCES));
            }
        }
        if let Err(why) = self.judge(host, op, places, &args) {
            let words = format!("{op} {} refused: {why}", self.shown(host, at));
            self.record(host, at, op, self.caller_of(who), args, libc::EACCES, words);
            return Err(err(libc::EACCES));
        }
        let recorded = self
            .tree(host)
            .is_ok_and(|t| t.keeps_before() && !t.unrecorded(at));
        let kept = if recorded {
            keep(&mut args)
        } else {
            Vec::new()
        };
        let done = match act() {
            Ok(done) => done,
            Err(e) => {
                if let Ok(tree) = self.tree(host) {
                    kept.iter().for_each(|k| tree.unkeep(k));
                }
                return Err(e);
            }
        };
        let words = words(&done, &mut args);
        self.record(host, at, op, self.caller_of(who), args, 0, words);
        Ok(done)
    }

    /// A tree path as results print it (absolute, in the mount).
    fn shown(&self, host: usize, path: &[OsString]) -> String {
        let world = self.entries.object_path(host, &lossy(path));
        names::shown(&self.entries.absolute(&world)).into_owned()
    }

    // ---- changes -------------------------------------------------------------------

    pub fn tree_create(
        &self,
        dir: TreeRef,
        name: &OsStr,
        mode: u32,
        flags: i32,
        who: Who,
    ) -> io::Result<(Found, TreeFile)> {
        let tree = self.tree(dir.host)?;
        let path = child_path(&self.path(dir)?, name);
        let caller = self.caller_of(who);
        let (found, file) = self.change(
            dir.host,
            op::CREATE,
            &[(path.clone(), false)],
            who,
            json!({"mode": mode_words(mode)}),
            nothing,
            || tree.create(dir.node, name, mode, flags, who.creds()),
            |(found, _), args| {
                args["after"] = state_of(&found.stat);
                format!(
                    "created {} (mode {})",
                    self.shown(dir.host, &path),
                    mode_words(mode)
                )
            },
        )?;
        let t = TreeRef {
            host: dir.host,
            node: found.node,
        };
        let writing = (flags & libc::O_ACCMODE != libc::O_RDONLY).then(|| Writing {
            caller,
            path: Some(path),
            before: None,
            wrote: AtomicBool::new(false),
            created: Some(found.stat),
            image: OnceLock::new(),
            lazy: false,
        });
        let f = TreeFile {
            t,
            flags,
            file: OnceLock::from(Ok(file)),
            writing,
        };
        Ok((found, f))
    }

    pub fn tree_mkdir(&self, dir: TreeRef, name: &OsStr, mode: u32, who: Who) -> io::Result<Found> {
        let tree = self.tree(dir.host)?;
        let path = child_path(&self.path(dir)?, name);
        self.change(
            dir.host,
            op::MKDIR,
            &[(path.clone(), false)],
            who,
            json!({"mode": mode_words(mode)}),
            nothing,
            || tree.mkdir(dir.node, name, mode, who.creds()),
            |found, args| {
                args["after"] = state_of(&found.stat);
                format!(
                    "made directory {} (mode {})",
                    self.shown(dir.host, &path),
                    mode_words(mode)
                )
            },
        )
    }

    pub fn tree_mknod(
        &self,
        dir: TreeRef,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        who: Who,
    ) -> io::Result<Found> {
        let tree = self.tree(dir.host)?;
        let path = child_path(&self.path(dir)?, name);
        let kind = Kind::of_mode(mode);
        // `mknod` of a regular file is how some programs create one.
        let op = if kind == Kind::File {
            op::CREATE
        } else {
            op::MKNOD
        };
        self.change(
            dir.host,
            op,
            &[(path.clone(), false)],
            who,
            json!({"kind": kind.name(), "mode": mode_words(mode), "rdev": rdev}),
            nothing,
            || tree.mknod(dir.node, name, mode, rdev, who.creds()),
            |found, args| {
                args["after"] = state_of(&found.stat);
                format!(
                    "made {} {} (mode {})",
                    kind.name(),
                    self.shown(dir.host, &path),
                    mode_words(mode)
                )
            },
        )
    }

    pub fn tree_symlink(
        &self,
        dir: TreeRef,
        name: &OsStr,
        target: &OsStr,
        who: Who,
    ) -> io::Result<Found> {
        let tree = self.tree(dir.host)?;
        let path = child_path(&self.path(dir)?, name);
        let shown_target = target.to_string_lossy().into_owned();
        self.change(
            dir.host,
            op::SYMLINK,
            &[(path.clone(), false)],
            who,
            json!({"target": shown_target}),
            nothing,
            || tree.symlink(dir.node, name, target, who.creds()),
            |found, args| {
                args["after"] = state_of(&found.stat);
                format!(
                    "made symlink {} → {shown_target}",
                    self.shown(dir.host, &path)
                )
            },
        )
    }

    /// A hard link: judged at the file's own path and the new name.
    pub fn tree_link(&self, t: TreeRef, dir: TreeRef, name: &OsStr, who: Who) -> io::Result<Found> {
        if t.host != dir.host {
            return Err(err(libc::EXDEV));
        }
        let tree = self.tree(dir.host)?;
        let path = child_path(&self.path(dir)?, name);
        let from = self.path(t)?;
        let from_shown = self.shown(t.host, &from);
        self.change(
            dir.host,
            op::LINK,
            &[(path.clone(), false), (from.clone(), false)],
            who,
            json!({"to": String::from_utf8_lossy(&lossy(&from).join("/").into_bytes())}),
            nothing,
            || tree.link(t.node, dir.node, name),
            |found, args| {
                args["after"] = state_of(&found.stat);
                format!("linked {} to {from_shown}", self.shown(dir.host, &path))
            },
        )
    }

    pub fn tree_unlink(&self, dir: TreeRef, name: &OsStr, who: Who) -> io::Result<()> {
        let tree = self.tree(dir.host)?;
        let path = child_path(&self.path(dir)?, name);
        let what = tree
            .lookup(dir.node, name)
            .map(|f| {
                tree.forget(f.node, 1);
                f.stat
            })
            .ok();
        // An empty file whose creation is still held back goes with it, unrecorded: it
        // came and went, and nothing changed (`git status`'s index.lock).
        let entry_path = self.entries.entry_path(dir.host, &lossy(&path));
        let may_vanish = what.is_some_and(|s| s.kind == Kind::File && s.size == 0)
            && self.calls.grouped.holds(&entry_path, op::CREATE)
            && !self.hidden(dir.host, &path)
            && self
                .judge(dir.host, op::REMOVE, &[(path.clone(), false)], &json!({}))
                .is_ok();
        if may_vanish {
            tree.unlink(dir.node, name)?;
            if self.calls.grouped.retract(&entry_path, op::CREATE) {
                return Ok(());
            }
            // Its creation was written meanwhile: so is its removal.
            let words = format!("removed {} (0 bytes)", self.shown(dir.host, &path));
            let mut args = json!({"kind": "file", "size": 0});
            if let Some(s) = &what {
                args["before"] = was_of(s);
            }
            self.record(
                dir.host,
                &path,
                op::REMOVE,
                self.caller_of(who),
                args,
                0,
                words,
            );
            return Ok(());
        }
        self.change(
            dir.host,
            op::REMOVE,
            &[(path.clone(), false)],
            who,
            match &what {
                Some(s) => json!({"kind": s.kind.name(), "size": s.size}),
                None => json!({}),
            },
            |args| self.keep_removed(tree, dir, name, what.as_ref(), args, "before"),
            || tree.unlink(dir.node, name),
            |_, _| match &what {
                Some(s) if s.kind == Kind::File => {
                    format!("removed {} ({} bytes)", self.shown(dir.host, &path), s.size)
                }
                Some(s) => format!("removed {} {}", s.kind.name(), self.shown(dir.host, &path)),
                None => format!("removed {}", self.shown(dir.host, &path)),
            },
        )
    }

    /// Remove an empty folder; one that holds only what a policy hides looks empty and is
    /// refused (its hidden paths would otherwise decide the answer).
    pub fn tree_rmdir(&self, dir: TreeRef, name: &OsStr, who: Who) -> io::Result<()> {
        let tree = self.tree(dir.host)?;
        let path = child_path(&self.path(dir)?, name);
        if self.entries.policy_hides() {
            if let Ok(found) = tree.lookup(dir.node, name) {
                let names = tree.list(found.node);
                tree.forget(found.node, 1);
                let hides = names.is_ok_and(|n| {
                    n.iter()
                        .any(|c| self.hidden(dir.host, &child_path(&path, &c.name)))
                });
                if hides {
                    let words = format!(
                        "rmdir {} refused: it holds paths the policy hides",
                        self.shown(dir.host, &path)
                    );
                    self.record(
                        dir.host,
                        &path,
                        op::RMDIR,
                        self.caller_of(who),
                        json!({}),
                        libc::EACCES,
                        words,
                    );
                    return Err(err(libc::EACCES));
                }
            }
        }
        self.change(
            dir.host,
            op::RMDIR,
            &[(path.clone(), false)],
            who,
            json!({}),
            |args| {
                if let Ok(found) = tree.lookup(dir.node, name) {
                    tree.forget(found.node, 1);
                    args["before"] = was_of(&found.stat);
                }
                Vec::new()
            },
            || tree.rmdir(dir.node, name),
            |_, _| format!("removed directory {}", self.shown(dir.host, &path)),
        )
    }

    /// A rename: judged at both ends (for a folder, everything below each), one run on the
    /// source path naming the destination and what it replaced.
    pub fn tree_rename(
        &self,
        dir: TreeRef,
        name: &OsStr,
        to_dir: TreeRef,
        to_name: &OsStr,
        mode: RenameMode,
        who: Who,
    ) -> io::Result<()> {
        if dir.host != to_dir.host {
            return Err(err(libc::EXDEV));
        }
        let tree = self.tree(dir.host)?;
        let from = child_path(&self.path(dir)?, name);
        let to = child_path(&self.path(to_dir)?, to_name);
        let stat_of = |d: TreeRef, n: &OsStr| {
            tree.lookup(d.node, n)
                .map(|f| {
                    tree.forget(f.node, 1);
                    f.stat
                })
                .ok()
        };
        let moving = stat_of(dir, name);
        let replaced = if mode == RenameMode::NoReplace {
            None
        } else {
            stat_of(to_dir, to_name)
        };
        let dirs = |s: &Option<Stat>| s.is_some_and(|s| s.kind == Kind::Dir);
        // The run is the moved file's, at where it now is (and names where it was).
        let places = [
            (to.clone(), dirs(&moving) || dirs(&replaced)),
            (from.clone(), dirs(&moving)),
        ];
        let to_shown = self.shown(dir.host, &to);
        let mut args = json!({"from": lossy(&from).join("/"), "to": lossy(&to).join("/")});
        if let Some(r) = &replaced {
            args["replaced"] = json!({"kind": r.kind.name(), "size": r.size});
        }
        if mode == RenameMode::Exchange {
            args["exchange"] = json!(true);
        }
        self.change(
            dir.host,
            op::RENAME,
            &places,
            who,
            args,
            |args| match (&replaced, mode) {
                (Some(r), RenameMode::Replace) => {
                    let mut sub = args["replaced"].take();
                    let kept =
                        self.keep_removed(tree, to_dir, to_name, Some(r), &mut sub, "before");
                    args["replaced"] = sub;
                    kept
                }
                _ => Vec::new(),
            },
            || tree.rename(dir.node, name, to_dir.node, to_name, mode),
            |_, args| {
                if let Ok(found) = tree.lookup(to_dir.node, to_name) {
                    tree.forget(found.node, 1);
                    args["after"] = state_of(&found.stat);
                }
                match (&replaced, mode) {
                    (Some(_), RenameMode::Exchange) => {
                        format!("exchanged {} and {to_shown}", self.shown(dir.host, &from))
                    }
                    (Some(r), _) => format!(
                        "renamed {} to {to_shown}, replacing a {} of {} bytes",
                        self.shown(dir.host, &from),
                        r.kind.name(),
                        r.size
                    ),
                    (None, _) => format!("renamed {} to {to_shown}", self.shown(dir.host, &from)),
                }
            },
        )
    }

    /// Attributes: each kind a run of its own op (`truncate`, `chmod`, `chown`, `touch`),
    /// judged and recorded in that order; the first refused stops the rest.
    pub fn tree_setattr(
        &self,
        t: TreeRef,
        set: &SetAttr,
        file: Option<&TreeFile>,
        who: Who,
    ) -> io::Result<Stat> {
        let tree = self.tree(t.host)?;
        let path = self.path(t)?;
        let places = [(path.clone(), false)];
        let shown = self.shown(t.host, &path);
        let own_file = file.and_then(|f| f.file().ok());
        let mut last = None;
        if let Some(size) = set.size {
            let only = SetAttr {
                size: Some(size),
                ..Default::default()
            };
            last = Some(self.change(
                t.host,
                op::TRUNCATE,
                &places,
                who,
                json!({"size": size}),
                |args| self.keep_in_place(tree, t, file, args),
                || tree.setattr(t.node, &only, own_file),
                |s, args| {
                    args["after"] = state_of(s);
                    format!("truncated {shown} to {size} bytes")
                },
            )?);
            if let Some(w) = file.and_then(|f| f.writing.as_ref()) {
                w.wrote.store(true, Ordering::Relaxed);
            }
        }
        if let Some(mode) = set.mode {
            let only = SetAttr {
                mode: Some(mode),
                ..Default::default()
            };
            last = Some(self.change(
                t.host,
                op::CHMOD,
                &places,
                who,
                json!({"mode": mode_words(mode)}),
                |args| was(tree, t, args),
                || tree.setattr(t.node, &only, None),
                |s, args| {
                    args["after"] = state_of(s);
                    format!("mode of {shown} set to {}", mode_words(mode))
                },
            )?);
        }
        if set.uid.is_some() || set.gid.is_some() {
            let only = SetAttr {
                uid: set.uid,
                gid: set.gid,
                ..Default::default()
            };
            last = Some(self.change(
                t.host,
                op::CHOWN,
                &places,
                who,
                json!({"uid": set.uid, "gid": set.gid}),
                |args| was(tree, t, args),
                || tree.setattr(t.node, &only, None),
                |s, args| {
                    args["after"] = state_of(s);
                    format!(
                        "owner of {shown} set to {}{}",
                        set.uid.map(|u| format!("uid {u}")).unwrap_or_default(),
                        set.gid.map(|g| format!(" gid {g}")).unwrap_or_default()
                    )
                },
            )?);
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let only = SetAttr {
                atime: set.atime,
                mtime: set.mtime,
                ..Default::default()
            };
            let time = |t: Option<TimeSet>| match t {
                None => Value::Null,
                Some(TimeSet::Now) => json!("now"),
                Some(TimeSet::At(at)) => json!(iso(at)),
            };
            last = Some(self.change(
                t.host,
                op::TOUCH,
                &places,
                who,
                json!({"atime": time(set.atime), "mtime": time(set.mtime)}),
                |args| was(tree, t, args),
                || tree.setattr(t.node, &only, None),
                |s, args| {
                    args["after"] = state_of(s);
                    format!("times of {shown} set (modified {})", iso(s.mtime))
                },
            )?);
        }
        match last {
            Some(s) => Ok(s),
            None => tree.stat(t.node),
        }
    }

    pub fn tree_setxattr(
        &self,
        t: TreeRef,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        who: Who,
    ) -> io::Result<()> {
        let tree = self.tree(t.host)?;
        let path = self.path(t)?;
        let shown_name = name.to_string_lossy().into_owned();
        self.change(
            t.host,
            op::SETXATTR,
            &[(path.clone(), false)],
            who,
            json!({"name": shown_name, "size": value.len()}),
            nothing,
            || tree.setxattr(t.node, name, value, flags),
            |_, _| {
                format!(
                    "set xattr {shown_name} of {} ({} bytes)",
                    self.shown(t.host, &path),
                    value.len()
                )
            },
        )
    }

    pub fn tree_removexattr(&self, t: TreeRef, name: &OsStr, who: Who) -> io::Result<()> {
        let tree = self.tree(t.host)?;
        let path = self.path(t)?;
        let shown_name = name.to_string_lossy().into_owned();
        self.change(
            t.host,
            op::REMOVEXATTR,
            &[(path.clone(), false)],
            who,
            json!({"name": shown_name}),
            nothing,
            || tree.removexattr(t.node, name),
            |_, _| {
                format!(
                    "removed xattr {shown_name} of {}",
                    self.shown(t.host, &path)
                )
            },
        )
    }

    // ---- open files ------------------------------------------------------------------

    /// Open a file of the tree: for writing (or `O_TRUNC`) only where the policy lets a
    /// `write` run there; the caller is taken now (the last close carries none).
    pub fn tree_open(&self, t: TreeRef, flags: i32, who: Who) -> io::Result<TreeFile> {
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        if !writes {
            return Ok(TreeFile {
                t,
                flags,
                file: OnceLock::new(),
                writing: None,
            });
        }
        let tree = self.tree(t.host)?;
        let path = self.path(t)?;
        if self.hidden(t.host, &path) {
            return Err(err(libc::ENOENT));
        }
        let caller = self.caller_of(who);
        if let Err(why) = self.judge(t.host, op::WRITE, &[(path.clone(), false)], &json!({})) {
            let words = format!("write {} refused: {why}", self.shown(t.host, &path));
            self.record(
                t.host,
                &path,
                op::WRITE,
                caller,
                json!({}),
                libc::EACCES,
                words,
            );
            return Err(err(libc::EACCES));
        }
        let st = tree.stat(t.node)?;
        let keeps = st.kind == Kind::File && tree.keeps_before() && !tree.unrecorded(&path);
        let image = OnceLock::new();
        // Kept now (the open stays passthrough): before a truncation that is the open's
        // own, and for a file small enough to copy at every writable open (SQLite's `-shm`
        // must stay mappable beside its other opens). A larger file is kept at its first
        // write, which then comes through the daemon.
        if keeps && (flags & libc::O_TRUNC != 0 || st.size <= EAGER_MAX) {
            let _ = image.set(keep_now(tree, t, st));
        }
        let file = match tree.open(t.node, flags) {
            Ok(f) => f,
            Err(e) => {
                if let Some(Ok((k, _))) = image.get() {
                    tree.unkeep(k);
                }
                return Err(e);
            }
        };
        tree.own_change(t.node);
        Ok(TreeFile {
            t,
            flags,
            file: OnceLock::from(Ok(file)),
            writing: Some(Writing {
                caller,
                path: Some(path),
                before: Some((st.size, st.mtime)),
                wrote: AtomicBool::new(false),
                created: None,
                lazy: keeps && image.get().is_none(),
                image,
            }),
        })
    }

    /// A file to hand the kernel as the backing file of a node (FUSE passthrough): read
    /// and write where the daemon may, else read only; `writable` asks for the former.
    pub fn tree_backing(&self, t: TreeRef, writable: bool) -> io::Result<File> {
        let tree = self.tree(t.host)?;
        tree.open(
            t.node,
            if writable {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            },
        )
    }

    /// What one descriptor did, recorded at its last close: a `write` run when the file's
    /// size or time moved, or the daemon wrote through it.
    pub fn tree_release(&self, f: &TreeFile) {
        let Some(w) = &f.writing else { return };
        let Ok(tree) = self.tree(f.t.host) else {
            return;
        };
        let Ok(st) = tree.stat(f.t.node) else { return };
        // A lazy writer is seen whole by the daemon: it changed the file only if it wrote
        // (another descriptor's change is that one's run).
        let moved = if w.lazy {
            w.wrote.load(Ordering::Relaxed)
        } else {
            w.before != Some((st.size, st.mtime)) || w.wrote.load(Ordering::Relaxed)
        };
        // Created by this open: its `create` run is recorded; a write run only for bytes.
        let created_empty = w.before.is_none() && st.size == 0;
        if !moved || created_empty {
            if let Some(Ok((k, _))) = w.image.get() {
                tree.unkeep(k);
            }
            return;
        }
        tree.own_change(f.t.node);
        let now_at = self.path(f.t).ok();
        // No name leads to it any more (removed while open; a removal's before-image may
        // hold its inode, so its link count does not tell).
        let gone = now_at.is_none() || st.nlink == 0;
        let path = match (now_at, &w.path) {
            (Some(p), _) => p,
            (None, Some(p)) => p.clone(),
            (None, None) => return,
        };
        let mut args = json!({"size": st.size, "mtime": iso(st.mtime)});
        if gone {
            // Removed while open: its removal (recorded before this close) kept what it
            // held; these bytes are in no file of the tree.
            args["gone"] = json!(true);
        } else if tree.keeps_before() && !tree.unrecorded(&path) {
            args["before"] = match (w.image.get(), &w.created) {
                (Some(image), _) => image_value(image),
                (None, Some(created)) => {
                    let mut v = was_of(created);
                    v["size"] = json!(0);
                    v["empty"] = json!(true);
                    v
                }
                (None, None) => {
                    json!({"missing": "the file changed where the daemon could not see it first (a write through a shared mapping, or another descriptor)"})
                }
            };
            args["after"] = state_of(&st);
        }
        // Hashed at the last close, which the closing program does not wait for.
        let digest = if st.size <= HASH_MAX {
            tree.open(f.t.node, libc::O_RDONLY)
                .ok()
                .and_then(|file| sha256_of(&file, st.size))
        } else {
            None
        };
        match &digest {
            Some(d) => args["sha256"] = json!(d),
            None if st.size > HASH_MAX => {
                args["sha256"] = json!(format!("not computed (larger than {} MiB)", HASH_MAX >> 20))
            }
            None => {}
        }
        let words = format!(
            "wrote {}: {} bytes, modified {}{}",
            self.shown(f.t.host, &path),
            st.size,
            iso(st.mtime),
            digest.map(|d| format!(", sha256 {d}")).unwrap_or_default()
        );
        self.record(f.t.host, &path, op::WRITE, w.caller.clone(), args, 0, words);
    }

    /// Make the file and every run recorded so far durable (`fsync(2)`).
    pub fn tree_fsync(&self, f: &TreeFile, datasync: bool) -> io::Result<()> {
        let file = f.file()?;
        if datasync {
            file.sync_data()?;
        } else {
            file.sync_all()?;
        }
        self.calls.grouped.flush();
        self.journal.sync().map_err(|e| {
            tracing::error!("journal: {e}");
            err(libc::EIO)
        })
    }

    /// `fallocate(2)` through an open descriptor: a run of its own.
    pub fn tree_fallocate(
        &self,
        f: &TreeFile,
        mode: i32,
        offset: i64,
        length: i64,
        who: Who,
    ) -> io::Result<()> {
        let path = self.path(f.t)?;
        let file = f.file()?;
        let r = self.change(
            f.t.host,
            op::FALLOCATE,
            &[(path.clone(), false)],
            who,
            json!({"mode": mode, "offset": offset, "length": length}),
            |_| {
                self.image_now(f);
                Vec::new()
            },
            || {
                use std::os::fd::AsRawFd;
                // SAFETY: a valid descriptor; the kernel checks the ranges.
                let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, length) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            },
            |_, _| {
                format!(
                    "allocated {length} bytes at {offset} of {}",
                    self.shown(f.t.host, &path)
                )
            },
        );
        if r.is_ok() {
            if let Some(w) = &f.writing {
                w.wrote.store(true, Ordering::Relaxed);
            }
        }
        r
    }

    /// `copy_file_range(2)` between two open descriptors of the tree: a run on the
    /// destination.
    #[allow(clippy::too_many_arguments)]
    pub fn tree_copy_range(
        &self,
        from: &TreeFile,
        offset_in: i64,
        to: &TreeFile,
        offset_out: i64,
        len: u64,
        who: Who,
    ) -> io::Result<u32> {
        let path = self.path(to.t)?;
        let src = self.path(from.t).unwrap_or_default();
        let (fin, fout) = (from.file()?, to.file()?);
        let n = self.change(
            to.t.host,
            op::COPY_FILE_RANGE,
            &[(path.clone(), false)],
            who,
            json!({"from": lossy(&src).join("/"), "offset_in": offset_in, "offset_out": offset_out, "length": len}),
            |_| {
                self.image_now(to);
                Vec::new()
            },
            || {
                use std::os::fd::AsRawFd;
                let (mut oi, mut oo) = (offset_in, offset_out);
                let len = usize::try_from(len).unwrap_or(usize::MAX).min(1 << 30);
                // SAFETY: valid descriptors and offsets this call owns.
                let n = unsafe {
                    libc::copy_file_range(fin.as_raw_fd(), &mut oi, fout.as_raw_fd(), &mut oo, len, 0)
                };
                if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as u32) }
            },
            |n, _| format!("copied {n} bytes into {}", self.shown(to.t.host, &path)),
        )?;
        if let Some(w) = &to.writing {
            w.wrote.store(true, Ordering::Relaxed);
        }
        Ok(n)
    }

    /// Read through the daemon (no passthrough for this file).
    pub fn tree_read(&self, f: &TreeFile, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let file = f.file()?;
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        while got < buf.len() {
            match file.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// Write through the daemon (no passthrough for this file).
    pub fn tree_write(&self, f: &TreeFile, offset: u64, data: &[u8]) -> io::Result<u32> {
        let Some(w) = &f.writing else {
            return Err(err(libc::EBADF));
        };
        let file = f.file()?;
        self.image_now(f);
        let n = if f.flags & libc::O_APPEND != 0 {
            use std::io::Write;
            (&*file).write(data)?
        } else {
            file.write_at(data, offset)?
        };
        w.wrote.store(true, Ordering::Relaxed);
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// `lseek(2)` for `SEEK_DATA` / `SEEK_HOLE` on an open descriptor.
    pub fn tree_lseek(&self, f: &TreeFile, offset: i64, whence: i32) -> io::Result<i64> {
        use std::os::fd::AsRawFd;
        let file = f.file()?;
        // SAFETY: a valid descriptor.
        let n = unsafe { libc::lseek(file.as_raw_fd(), offset, whence) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n)
        }
    }
}

/// Keep the bytes of `t` now, with its attributes `st`.
fn keep_now(tree: &dyn Tree, t: TreeRef, st: Stat) -> Result<(Kept, Stat), String> {
    match tree.keep_content(t.node) {
        Ok(Some(k)) => Ok((k, st)),
        Ok(None) => Err("not a regular file".into()),
        Err(e) => {
            tracing::warn!("before-image not kept: {e}");
            Err(format!("it could not be kept: {e}"))
        }
    }
}

impl World {
    /// The before-image of an open descriptor taken lazily: at its first change.
    fn image_now(&self, f: &TreeFile) {
        let Some(w) = &f.writing else { return };
        if !w.lazy {
            return;
        }
        w.image.get_or_init(|| {
            let tree = self.tree(f.t.host).map_err(|e| e.to_string())?;
            let st = tree.stat(f.t.node).map_err(|e| e.to_string())?;
            keep_now(tree, f.t, st)
        });
    }

    /// `args[key]`: what `name` in `dir` (about to be removed or replaced) was, with its
    /// bytes kept when it is a regular file, its target when a symlink.
    fn keep_removed(
        &self,
        tree: &dyn Tree,
        dir: TreeRef,
        name: &OsStr,
        what: Option<&Stat>,
        args: &mut Value,
        key: &str,
    ) -> Vec<Kept> {
        let Some(st) = what else { return Vec::new() };
        let mut v = was_of(st);
        let mut kept = Vec::new();
        match st.kind {
            Kind::File => match tree.keep_named(dir.node, name) {
                Ok(Some(k)) => {
                    v["sha256"] = json!(k.sha256);
                    v["size"] = json!(k.size);
                    kept.push(k);
                }
                Ok(None) => v["missing"] = json!("it was no longer a regular file"),
                Err(e) => {
                    tracing::warn!("before-image not kept: {e}");
                    v["missing"] = json!(format!("it could not be kept: {e}"));
                }
            },
            Kind::Symlink => {
                if let Ok(found) = tree.lookup(dir.node, name) {
                    if let Ok(target) = tree.readlink(found.node) {
                        v["target"] = json!(target.to_string_lossy());
                        v["target_hex"] = json!(hex(target.as_bytes()));
                    }
                    tree.forget(found.node, 1);
                }
            }
            _ => {}
        }
        args[key] = v;
        kept
    }

    /// `args.before` of a truncate: the descriptor's own image (its write run keeps it),
    /// else the bytes now.
    fn keep_in_place(
        &self,
        tree: &dyn Tree,
        t: TreeRef,
        file: Option<&TreeFile>,
        args: &mut Value,
    ) -> Vec<Kept> {
        if let Some(f) = file.filter(|f| f.writing.is_some()) {
            self.image_now(f);
            if let Some(image) = f.writing.as_ref().and_then(|w| w.image.get()) {
                args["before"] = image_value(image);
                return Vec::new();
            }
        }
        let Ok(st) = tree.stat(t.node) else {
            return Vec::new();
        };
        let image = keep_now(tree, t, st);
        args["before"] = image_value(&image);
        match image {
            Ok((k, _)) => vec![k],
            Err(_) => Vec::new(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl TreeFile {
    /// The descriptor's own file, opened at the first need.
    fn file(&self) -> io::Result<&File> {
        match self.file.get() {
            Some(Ok(f)) => Ok(f),
            Some(Err(code)) => Err(err(*code)),
            None => Err(err(libc::EBADF)),
        }
    }

    /// Open the descriptor's own file now, through `world` (a read the daemon serves).
    pub fn ensure_open(&self, world: &World) -> io::Result<()> {
        let opened = self.file.get_or_init(|| {
            world
                .tree(self.t.host)
                .and_then(|t| t.open(self.t.node, self.flags & !libc::O_TRUNC))
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
        });
        match opened {
            Ok(_) => Ok(()),
            Err(code) => Err(err(*code)),
        }
    }
}

/// The sha256 of the first `size` bytes of `file`, in lowercase hex (`None`: unreadable).
fn sha256_of(file: &File, size: u64) -> Option<String> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut at = 0u64;
    while at < size {
        // Never past `size`: the file may have grown since (another writer's bytes).
        let want = usize::try_from(size - at).map_or(buf.len(), |left| left.min(buf.len()));
        let n = file.read_at(&mut buf[..want], at).ok()?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
