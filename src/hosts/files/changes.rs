//! The ops that change the tree besides `write` and `edit`, for agents that call ops
//! rather than run programs: `remove`, `rename`, `mkdir`, `symlink`, `chmod`, `truncate`,
//! `touch` — each what the same change through the file system does, and a run of the same
//! op. The changes only the file system makes (`create`, `link`, `chown`, xattrs, …) are
//! declared too, so their guards and runs are at every path; calling one says how it is
//! made.
//!
//! Every change acts from a descriptor of the folder that holds the name (resolved
//! beneath the root, links not followed), on that one name: a symlink is removed or renamed
//! itself, never what it leads to.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::host::op::NoArgs;
use crate::host::tree::op;
use crate::host::{CallOutcome, Condition, HostError, HostResult};

use super::describe::plural;
use super::ops::{parent_of, push_unique, target, Access, Entry, FilesDecl, FilesOp, Slot, Target};
use super::resolve::{is_gone, Located, Node};
use super::FilesHost;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RemoveArgs {
    /// a folder and everything in it (default false: a folder must be empty)
    #[serde(default)]
    recursive: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RenameArgs {
    /// the new path, relative to the folder this entry is in (`../b.txt`, `sub/a.txt`)
    #[schemars(length(min = 1))]
    to: String,
    /// fail if something is there already (default false: a file there is replaced)
    #[serde(default)]
    no_replace: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MkdirArgs {
    /// the new folder's path, relative to this folder
    #[schemars(length(min = 1))]
    path: String,
    /// make missing parent folders too, and accept one that exists (as mkdir -p)
    #[serde(default)]
    parents: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SymlinkArgs {
    /// the link's path, relative to this folder
    #[schemars(length(min = 1))]
    path: String,
    /// what it points to, as ln -s takes it (kept as written)
    #[schemars(length(min = 1))]
    target: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChmodArgs {
    /// permission bits in octal, as chmod takes them (`755`, `0644`)
    #[schemars(length(min = 1))]
    mode: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TruncateArgs {
    /// the new size in bytes
    size: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TouchArgs {
    /// the modification time to set, `YYYY-MM-DDTHH:MM:SSZ` (default: now)
    #[serde(default)]
    mtime: Option<String>,
}

fn errno_of(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

fn remove() -> FilesOp {
    FilesDecl::<RemoveArgs> {
        name: op::REMOVE,
        offers: |_| true,
        describe: |e| if e.on_dir() {
            "remove(recursive?): remove this folder (empty, or with everything in it when recursive), as rmdir or rm -r"
        } else {
            "remove(): remove this file (a symlink itself, not what it leads to), as rm"
        }.to_string(),
        guard: |h, _, e, _| Ok(h.change_conditions(e)),
        run: |h, _, e, a| h.remove(e, a.recursive),
    }
    .into()
}

fn rename() -> FilesOp {
    FilesDecl::<RenameArgs> {
        name: op::RENAME,
        offers: |_| true,
        describe: |_| {
            "rename(to, no_replace?): move this entry to `to` (relative to the folder it is in), as mv; a file there is replaced unless no_replace".to_string()
        },
        guard: |h, slot, e, a| {
            let mut c = h.change_conditions(e);
            if let Some(a) = a {
                c.extend(h.destination(e, slot, &a.to)?);
            }
            Ok(c)
        },
        run: |h, slot, e, a| h.rename_to(e, &target(slot, e)?, a.no_replace),
    }
    .into()
}

fn mkdir() -> FilesOp {
    FilesDecl::<MkdirArgs> {
        name: op::MKDIR,
        offers: Entry::on_dir,
        describe: |_| "mkdir(path, parents?): make the folder at path (relative to here), as mkdir or mkdir -p".to_string(),
        guard: |h, slot, e, a| h.checked(e, slot, Access::Write, a.map(|a| (Some(a.path.as_str()), false))),
        run: |h, slot, _, a| h.make_dir(&target_of(slot)?, a.parents),
    }
    .into()
}

fn symlink() -> FilesOp {
    FilesDecl::<SymlinkArgs> {
        name: op::SYMLINK,
        offers: Entry::on_dir,
        describe: |_| "symlink(path, target): make a symlink at path (relative to here) that points to target, as ln -s".to_string(),
        guard: |h, slot, e, a| h.checked(e, slot, Access::Write, a.map(|a| (Some(a.path.as_str()), false))),
        run: |h, slot, _, a| h.make_link(&target_of(slot)?, &a.target),
    }
    .into()
}

fn chmod() -> FilesOp {
    FilesDecl::<ChmodArgs> {
        name: op::CHMOD,
        offers: |_| true,
        describe: |_| {
            "chmod(mode): set the permission bits (octal: 755, 0644), as chmod".to_string()
        },
        guard: |h, slot, e, _| h.checked(e, slot, Access::Edit, None),
        run: |h, slot, e, a| h.set_mode(e, slot, &a.mode),
    }
    .into()
}

fn truncate() -> FilesOp {
    FilesDecl::<TruncateArgs> {
        name: op::TRUNCATE,
        offers: |e: &Entry| !e.on_dir(),
        describe: |_| {
            "truncate(size): cut or extend the file to size bytes, as truncate -s".to_string()
        },
        guard: |h, slot, e, _| h.checked(e, slot, Access::Edit, None),
        run: |h, slot, e, a| h.set_size(&target(slot, e)?, a.size),
    }
    .into()
}

fn touch() -> FilesOp {
    FilesDecl::<TouchArgs> {
        name: op::TOUCH,
        offers: |_| true,
        describe: |_| "touch(mtime?): set the modification (and access) time, now unless mtime is given, as touch".to_string(),
        guard: |h, slot, e, _| h.checked(e, slot, Access::Edit, None),
        run: |h, slot, e, a| h.set_time(e, slot, a.mtime.as_deref()),
    }
    .into()
}

/// A change only the file system makes: its guard and runs are here, a call says how it
/// is made (`posix_description` words each).
fn through_the_mount(name: &'static str) -> FilesOp {
    FilesDecl::<NoArgs> {
        name,
        offers: |_| true,
        describe: |_| "a change made through the file system (see its runs/)".to_string(),
        guard: |h, _, e, _| Ok(h.change_conditions(e)),
        run: |_, _, _, _| {
            Err(HostError::InvalidArgs(
                "this change is made by programs through the mount, not by a call; its runs are listed in runs/ and its guard says whether the policy allows it"
                    .to_string(),
            ))
        },
    }
    .into()
}

/// What `ops/NAME/description` says of a change only the file system makes.
pub(super) fn posix_description(name: &str, on_dir: bool) -> Option<String> {
    // A folder's `symlink` is the explicit op; a file's is how the file came to be.
    const OWN: &[(&str, &str)] = &[(op::SYMLINK, "making this symlink (ln -s)")];
    let own: &[(&str, &str)] = if on_dir { &[] } else { OWN };
    POSIX_ONLY
        .iter()
        .chain(own)
        .find(|(n, _)| *n == name)
        .map(|(n, how)| {
            format!(
                "{n}: {how}, through the mount, is a run of this op (see runs/); it is not called"
            )
        })
}

/// The changes only the file system makes, with the programs that make them.
const POSIX_ONLY: &[(&str, &str)] = &[
    (op::CREATE, "creating a file (open with O_CREAT, cp, tar x)"),
    (op::LINK, "a hard link (ln)"),
    (op::CHOWN, "a change of owner (chown)"),
    (op::SETXATTR, "setting an extended attribute (setfattr)"),
    (
        op::REMOVEXATTR,
        "removing an extended attribute (setfattr -x)",
    ),
    (op::FALLOCATE, "allocating space (fallocate)"),
    (
        op::COPY_FILE_RANGE,
        "a copy inside the file system (cp --reflink, copy_file_range)",
    ),
    (op::MKNOD, "making a FIFO, socket or device (mkfifo, mknod)"),
    (op::RMDIR, "removing an empty folder (rmdir)"),
];

fn posix_only(dirs: bool) -> Vec<FilesOp> {
    POSIX_ONLY
        .iter()
        .filter(|(name, _)| dirs || *name != op::RMDIR)
        .map(|(name, _)| through_the_mount(name))
        .collect()
}

/// A file's change ops, after read, write, edit and stat.
pub(super) fn file_ops() -> Vec<FilesOp> {
    let mut ops = vec![remove(), rename(), chmod(), truncate(), touch()];
    ops.extend(posix_only(false));
    // A symlink's own making is a run at its path (`ln -s`), seen there.
    ops.push(through_the_mount(op::SYMLINK));
    ops
}

/// A folder's change ops, after list, stat, read, write and edit.
pub(super) fn dir_ops() -> Vec<FilesOp> {
    let mut ops = vec![mkdir(), symlink(), remove(), rename(), chmod(), touch()];
    ops.extend(posix_only(true));
    ops
}

/// The target a folder's op resolved from its `path`.
fn target_of(slot: &Slot) -> HostResult<Target> {
    slot.target
        .borrow_mut()
        .take()
        .ok_or_else(|| HostError::InvalidArgs("missing argument `path`".to_string()))
}

/// `0644`, parsed from what chmod takes.
fn parse_mode(mode: &str) -> HostResult<u32> {
    let digits = mode.trim().trim_start_matches("0o");
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o7777 && !digits.is_empty())
        .ok_or_else(|| {
            HostError::InvalidArgs(format!(
                "mode {mode:?} is not permission bits in octal (e.g. 755 or 0644)"
            ))
        })
}

impl FilesHost {
    /// The conditions of a change to the entry itself: inside the root and writable.
    pub(super) fn change_conditions(&self, e: &Entry) -> Vec<Condition> {
        let here = self.display(&e.loc.segs);
        let mut out = Vec::new();
        match &e.loc.node {
            Node::Broken { .. } => out.push(self.inside(&here)),
            Node::Dir { real, .. } | Node::File { real, .. } => {
                out.push(self.inside(&here));
                out.push(self.dir_writable(real.parent(), &here));
            }
        }
        if e.loc.segs.is_empty() {
            out.push(Condition::check(
                "not_root",
                false,
                format!("{here} is the root of the files host: it is not removed or renamed through the mount"),
            ));
        }
        out
    }

    /// Where the entry's own name is: its folder (resolved beneath the root) and the name
    /// there, never followed.
    fn own_name(&self, e: &Entry) -> HostResult<(PathBuf, std::ffi::OsString)> {
        let here = self.display(&e.loc.segs);
        let Some((last, parent)) = e.loc.segs.split_last() else {
            return Err(HostError::InvalidArgs(format!(
                "{here} is the root of the files host"
            )));
        };
        let dir = match self.located(parent)?.node {
            Node::Dir { real, .. } => real,
            _ => return Err(HostError::NotFound(format!("{here}: its folder is gone"))),
        };
        Ok((dir, last.into()))
    }

    /// A descriptor of the folder `dir` (beneath the root) to act on one name in it.
    fn folder(&self, dir: &Path, what: &str) -> HostResult<std::os::fd::OwnedFd> {
        self.beneath.dir(dir).map_err(|e| self.io_error(what, e))
    }

    fn remove(&self, e: &Entry, recursive: bool) -> HostResult<CallOutcome> {
        let here = self.display(&e.loc.segs);
        let (dir, name) = self.own_name(e)?;
        let fd = self.folder(&dir, &here)?;
        let st = rustix::fs::statat(&fd, &name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|err| self.io_error(&here, errno_of(err)))?;
        let is_dir =
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
        let removed = if is_dir {
            if recursive {
                remove_tree(fd.as_fd(), &name).map_err(|err| self.io_error(&here, err))?
            } else {
                rustix::fs::unlinkat(&fd, &name, rustix::fs::AtFlags::REMOVEDIR).map_err(|err| {
                    if err == rustix::io::Errno::NOTEMPTY {
                        HostError::InvalidArgs(format!(
                            "{here} is not empty: remove it with recursive=true, or what is in it first"
                        ))
                    } else {
                        self.io_error(&here, errno_of(err))
                    }
                })?;
                1
            }
        } else {
            rustix::fs::unlinkat(&fd, &name, rustix::fs::AtFlags::empty())
                .map_err(|err| self.io_error(&here, errno_of(err)))?;
            1
        };
        self.watch.bump();
        let words = if is_dir {
            format!("removed {here} ({})\n", plural(removed, "entry", "entries"))
        } else {
            format!("removed {here}\n")
        };
        let mut out = CallOutcome::text(words);
        push_unique(&mut out.changed, Some(e.loc.segs.clone()));
        push_unique(&mut out.changed, parent_of(&e.loc.segs));
        Ok(out)
    }

    /// Resolve a rename's destination (relative to the entry's folder) into the slot.
    fn destination(&self, e: &Entry, slot: &Slot, to: &str) -> HostResult<Vec<Condition>> {
        let (dir, _) = self.own_name(e)?;
        let parent = Located {
            segs: parent_of(&e.loc.segs).unwrap_or_default(),
            node: Node::Dir {
                real: dir.clone(),
                link: None,
            },
        };
        match self.target_in(&parent, &dir, to)? {
            Err(outside) => Ok(vec![outside]),
            Ok(t) => {
                let mut c = vec![self.inside(&t.display), self.writable(&t)];
                if let Some(judged) = &slot.judged {
                    if let Some(place) = t.places(self).iter().find(|p| !judged.contains(p)) {
                        return Err(HostError::Forbidden(format!(
                            "{} changed while the call was checked (it now leads to {}): call again",
                            t.display,
                            self.display(place)
                        )));
                    }
                }
                if t.exists && t.physical == self.own_name(e).map(|(d, n)| d.join(n))? {
                    c.push(Condition::check(
                        "moves",
                        false,
                        format!("{} is already there", t.display),
                    ));
                }
                *slot.target.borrow_mut() = Some(t);
                Ok(c)
            }
        }
    }

    fn rename_to(&self, e: &Entry, to: &Target, no_replace: bool) -> HostResult<CallOutcome> {
        let here = self.display(&e.loc.segs);
        let (dir, name) = self.own_name(e)?;
        let (Some(to_dir), Some(to_name)) = (to.physical.parent(), to.physical.file_name()) else {
            return Err(HostError::InvalidArgs(format!(
                "{}: no folder to move into",
                to.display
            )));
        };
        let from = self.folder(&dir, &here)?;
        let into = self.folder(to_dir, &to.display)?;
        let flags = if no_replace {
            rustix::fs::RenameFlags::NOREPLACE
        } else {
            rustix::fs::RenameFlags::empty()
        };
        let replaced =
            rustix::fs::statat(&into, to_name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok();
        rustix::fs::renameat_with(&from, &name, &into, to_name, flags).map_err(
            |err| match err {
                rustix::io::Errno::EXIST => {
                    HostError::InvalidArgs(format!("{} exists (no_replace is set)", to.display))
                }
                other => self.io_error(&format!("{here} → {}", to.display), errno_of(other)),
            },
        )?;
        self.watch.bump();
        let mut out = CallOutcome::text(match replaced {
            Some(st) => format!(
                "renamed {here} to {}, replacing what was there ({})\n",
                to.display,
                plural(st.st_size as usize, "byte", "bytes")
            ),
            None => format!("renamed {here} to {}\n", to.display),
        });
        let to_path = self.host_path(&to.physical);
        for p in [
            Some(e.loc.segs.clone()),
            parent_of(&e.loc.segs),
            to_path.clone(),
            to_path.as_deref().and_then(parent_of),
        ] {
            push_unique(&mut out.changed, p);
        }
        push_unique(&mut out.discovered, to_path);
        Ok(out)
    }

    fn make_dir(&self, t: &Target, parents: bool) -> HostResult<CallOutcome> {
        if t.exists {
            let is_dir = self.beneath.metadata(&t.physical).is_ok_and(|m| m.is_dir());
            if parents && is_dir {
                return Ok(CallOutcome::text(format!("{} exists already\n", t.display)));
            }
            return Err(HostError::InvalidArgs(format!(
                "{} exists already",
                t.display
            )));
        }
        let top = if parents {
            self.beneath
                .create_dirs(&t.physical)
                .map_err(|e| self.io_error(&t.display, e))?
        } else {
            let (Some(dir), Some(name)) = (t.physical.parent(), t.physical.file_name()) else {
                return Err(HostError::InvalidArgs(format!(
                    "{}: no folder to make it in",
                    t.display
                )));
            };
            let fd = self.folder(dir, &t.display).map_err(|e| match e {
                HostError::NotFound(_) => HostError::InvalidArgs(format!(
                    "folder {} does not exist: set parents to make it too",
                    self.display_physical(dir)
                )),
                other => other,
            })?;
            rustix::fs::mkdirat(&fd, name, rustix::fs::Mode::from_raw_mode(0o777))
                .map_err(|e| self.io_error(&t.display, errno_of(e)))?;
            Some(t.physical.clone())
        };
        self.watch.bump();
        let mut out = CallOutcome::text(format!("made directory {}\n", t.display));
        let made = self.host_path(&t.physical);
        push_unique(&mut out.changed, made.as_deref().and_then(parent_of));
        if let Some(top) = top {
            push_unique(
                &mut out.changed,
                self.host_path(&top).as_deref().and_then(parent_of),
            );
        }
        push_unique(&mut out.discovered, made);
        Ok(out)
    }

    fn make_link(&self, t: &Target, points_to: &str) -> HostResult<CallOutcome> {
        let (Some(dir), Some(name)) = (t.physical.parent(), t.physical.file_name()) else {
            return Err(HostError::InvalidArgs(format!(
                "{}: no folder to make it in",
                t.display
            )));
        };
        let fd = self.folder(dir, &t.display)?;
        rustix::fs::symlinkat(points_to, &fd, name).map_err(|e| match e {
            rustix::io::Errno::EXIST => {
                HostError::InvalidArgs(format!("{} exists already", t.display))
            }
            other => self.io_error(&t.display, errno_of(other)),
        })?;
        self.watch.bump();
        let mut out = CallOutcome::text(format!("made symlink {} → {points_to}\n", t.display));
        let made = self.host_path(&t.physical);
        push_unique(&mut out.changed, made.as_deref().and_then(parent_of));
        push_unique(&mut out.discovered, made);
        Ok(out)
    }

    /// The file a change of attributes acts on: the entry, or the file its symlink leads
    /// to (as chmod and touch follow a link).
    fn attr_target(&self, e: &Entry, slot: &Slot) -> HostResult<Target> {
        if let Some(t) = slot.target.borrow_mut().take() {
            return Ok(t);
        }
        match &e.loc.node {
            Node::Dir { real, .. } => Ok(Target {
                physical: real.clone(),
                exists: true,
                display: self.display(&e.loc.segs),
                view: Some(e.loc.segs.clone()),
            }),
            _ => target(slot, e),
        }
    }

    fn set_mode(&self, e: &Entry, slot: &Slot, mode: &str) -> HostResult<CallOutcome> {
        let bits = parse_mode(mode)?;
        let t = self.attr_target(e, slot)?;
        let (dir, name) = split(&t)?;
        let fd = self.folder(dir, &t.display)?;
        self.copy_up_named(fd.as_fd(), name, &t.physical)
            .map_err(|err| self.io_error(&t.display, err))?;
        rustix::fs::chmodat(
            &fd,
            name,
            rustix::fs::Mode::from_raw_mode(bits),
            rustix::fs::AtFlags::empty(),
        )
        .map_err(|err| self.io_error(&t.display, errno_of(err)))?;
        self.watch.bump();
        let mut out = CallOutcome::text(format!("mode of {} set to {bits:04o}\n", t.display));
        push_unique(&mut out.changed, t.view.clone());
        push_unique(&mut out.changed, self.host_path(&t.physical));
        Ok(out)
    }

    fn set_size(&self, t: &Target, size: u64) -> HostResult<CallOutcome> {
        let (dir, name) = split(t)?;
        let fd = self.folder(dir, &t.display)?;
        self.copy_up_named(fd.as_fd(), name, &t.physical)
            .map_err(|err| self.io_error(&t.display, err))?;
        let file = self
            .beneath
            .open_at(
                &t.physical,
                rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NOFOLLOW,
                rustix::fs::Mode::empty(),
            )
            .map_err(|e| self.io_error(&t.display, e))?;
        std::fs::File::from(file)
            .set_len(size)
            .map_err(|e| self.io_error(&t.display, e))?;
        self.watch.bump();
        let mut out = CallOutcome::text(format!(
            "truncated {} to {}\n",
            t.display,
            plural(size as usize, "byte", "bytes")
        ));
        push_unique(&mut out.changed, t.view.clone());
        push_unique(&mut out.changed, self.host_path(&t.physical));
        Ok(out)
    }

    fn set_time(&self, e: &Entry, slot: &Slot, mtime: Option<&str>) -> HostResult<CallOutcome> {
        let t = self.attr_target(e, slot)?;
        let when = match mtime {
            None => None,
            Some(text) => Some(crate::calendar::parse_iso(text).ok_or_else(|| {
                HostError::InvalidArgs(format!(
                    "mtime {text:?} is not a time: write YYYY-MM-DDTHH:MM:SSZ"
                ))
            })?),
        };
        let spec = match when {
            None => rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_NOW,
            },
            Some(at) => {
                let d = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                rustix::fs::Timespec {
                    tv_sec: d.as_secs() as i64,
                    tv_nsec: i64::from(d.subsec_nanos()),
                }
            }
        };
        let (dir, name) = split(&t)?;
        let fd = self.folder(dir, &t.display)?;
        self.copy_up_named(fd.as_fd(), name, &t.physical)
            .map_err(|err| self.io_error(&t.display, err))?;
        rustix::fs::utimensat(
            &fd,
            name,
            &rustix::fs::Timestamps {
                last_access: spec,
                last_modification: spec,
            },
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|err| self.io_error(&t.display, errno_of(err)))?;
        self.watch.bump();
        let mut out = CallOutcome::text(format!("times of {} set\n", t.display));
        push_unique(&mut out.changed, t.view.clone());
        push_unique(&mut out.changed, self.host_path(&t.physical));
        Ok(out)
    }

    /// Where a change of `op` on the entry acts besides the entry (`Host::acts_on` for the
    /// change ops): a folder removed whole, both ends of a rename.
    pub(super) fn change_places(
        &self,
        e: &Entry,
        op_name: &str,
        args: Option<&Value>,
    ) -> HostResult<Option<Vec<crate::host::Place>>> {
        let place = |path: Vec<String>, subtree: bool| crate::host::Place { path, subtree };
        Ok(Some(match op_name {
            op::REMOVE => {
                let recursive = args
                    .and_then(|a| a.get("recursive"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                vec![place(e.loc.segs.clone(), e.on_dir() && recursive)]
            }
            op::RENAME => {
                let mut out = vec![place(e.loc.segs.clone(), e.on_dir())];
                if let Some(to) = args.and_then(|a| a.get("to")).and_then(Value::as_str) {
                    let slot = Slot::default();
                    self.destination(e, &slot, to)?;
                    let resolved = slot.target.borrow_mut().take();
                    for p in resolved.map(|t| t.places(self)).unwrap_or_default() {
                        out.push(place(p, e.on_dir()));
                    }
                }
                out
            }
            _ => return Ok(None),
        }))
    }
}

/// A target's folder and name.
fn split(t: &Target) -> HostResult<(&Path, &OsStr)> {
    match (t.physical.parent(), t.physical.file_name()) {
        (Some(d), Some(n)) => Ok((d, n)),
        _ => Err(HostError::InvalidArgs(format!(
            "{} is the root of the files host",
            t.display
        ))),
    }
}

/// Remove the folder `name` in `dir` and everything in it, one name at a time from
/// descriptors (a symlink inside is removed itself, never followed); how many entries went.
fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<usize> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_of)?;
    let mut removed = 0;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&fd).map_err(errno_of)? {
        let entry = entry.map_err(errno_of)?;
        let n = entry.file_name().to_bytes();
        if n == b"." || n == b".." {
            continue;
        }
        names.push((CString::from(entry.file_name()), entry.file_type()));
    }
    for (n, kind) in names {
        let child = OsStr::from_bytes(n.as_bytes());
        let is_dir = match kind {
            rustix::fs::FileType::Directory => true,
            rustix::fs::FileType::Unknown => {
                rustix::fs::statat(&fd, child, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| {
                        rustix::fs::FileType::from_raw_mode(st.st_mode)
                            == rustix::fs::FileType::Directory
                    })
                    .unwrap_or(false)
            }
            _ => false,
        };
        if is_dir {
            removed += remove_tree(fd.as_fd(), child)?;
        } else {
            match rustix::fs::unlinkat(&fd, child, AtFlags::empty()) {
                Ok(()) => removed += 1,
                Err(e) if is_gone(&errno_of(e)) => {}
                Err(e) => return Err(errno_of(e)),
            }
        }
    }
    drop(fd);
    let _ = dir.as_raw_fd();
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR).map_err(errno_of)?;
    Ok(removed + 1)
}
