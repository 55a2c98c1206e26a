//! Overlay mode (`overlay = true`): the root is never written through the mount. Programs
//! work in a layer in the state directory, made when the host first opens as a tree of its
//! own whose folders are new and whose files are hard links to the root's (a copy where
//! the state directory is on another file system). A change lands there:
//!
//! - a new file, a removal, a rename (of a folder too), a hard link: in the layer only
//!   (its folders are its own, so there is nothing like a whiteout or an opaque folder to
//!   keep);
//! - a change to a file the layer still shares with the root (a write, a truncate, a
//!   chmod, an xattr) copies it up first: a copy is made beside it and renamed over its
//!   name, and the node the kernel holds is that copy from then on, with the same `st_ino`
//!   (until a remount). A reader that opened the file before keeps reading the root's
//!   bytes, as with overlayfs.
//!
//! `diff` shows the layer against the root; `apply` writes each change to the root (a
//! file through a temporary name renamed over the old one, so it is old or new, never
//! torn; the old one kept as a before-image) and refuses, path by path, what the root
//! changed meanwhile (unless `force`); `discard` puts the root's files back in the layer.
//! An outside change to a root file the layer still shares shows through (the same inode);
//! one that replaces a root file does not, and is a conflict for `apply`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use serde_json::{json, Value};

use super::FilesHost;
use crate::host::diff::{read_file, unified, Content};
use crate::host::{CallOutcome, Caller, Condition, Guard, HostError, HostResult, OpSpec, Settled};

/// What the root held at a path when the layer was made (or last applied).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Base {
    /// `f` file, `d` folder, `l` symlink, `o` other.
    kind: char,
    ino: u64,
    size: u64,
    mtime_ns: i64,
}

pub struct Layer {
    lower: PathBuf,
    upper: PathBuf,
    dir: PathBuf,
    /// Root inodes the layer still links ((dev, ino)): a change to one copies it up first.
    shared: Mutex<HashSet<(u64, u64)>>,
    base: Mutex<BTreeMap<String, Base>>,
    counter: AtomicU64,
    /// Paths below the root never shown: the world's mount point, and the layer itself
    /// when the state directory lies inside the root.
    skip: Vec<PathBuf>,
}

/// One difference between the layer and the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Added(String),
    Removed(String),
    Modified(String),
}

impl Change {
    pub fn path(&self) -> &str {
        match self {
            Change::Added(p) | Change::Removed(p) | Change::Modified(p) => p,
        }
    }
}

fn base_of(m: &fs::Metadata) -> Base {
    let ft = m.file_type();
    Base {
        kind: if ft.is_dir() {
            'd'
        } else if ft.is_file() {
            'f'
        } else if ft.is_symlink() {
            'l'
        } else {
            'o'
        },
        ino: m.ino(),
        size: m.len(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
    }
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

fn is_temp(name: &OsStr) -> bool {
    let b = name.as_bytes();
    b.starts_with(b".wip-copy-up-") || b.starts_with(b".wip-apply-")
}

/// Put `meta`'s owner (where allowed), mode and times on `path` (not following a link).
fn settle_attrs(path: &Path, meta: &fs::Metadata) {
    let _ = std::os::unix::fs::lchown(path, Some(meta.uid()), Some(meta.gid()));
    if !meta.file_type().is_symlink() {
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(meta.mode() & 0o7777));
    }
    let times = [
        libc::timespec {
            tv_sec: meta.atime(),
            tv_nsec: meta.atime_nsec(),
        },
        libc::timespec {
            tv_sec: meta.mtime(),
            tv_nsec: meta.mtime_nsec(),
        },
    ];
    if let Ok(c) = CString::new(path.as_os_str().as_bytes()) {
        // SAFETY: a NUL-terminated path and two timespecs.
        unsafe {
            libc::utimensat(
                libc::AT_FDCWD,
                c.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
    }
}

/// Copy `from`'s extended attributes to `to` (best effort: a file system without them).
fn copy_xattrs(from: &Path, to: &Path) {
    let (Ok(f), Ok(t)) = (
        CString::new(from.as_os_str().as_bytes()),
        CString::new(to.as_os_str().as_bytes()),
    ) else {
        return;
    };
    let mut names = vec![0u8; 64 * 1024];
    // SAFETY: valid paths and a buffer of its length.
    let n = unsafe { libc::llistxattr(f.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return;
    }
    for name in names[..n as usize]
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
    {
        let Ok(cname) = CString::new(name) else {
            continue;
        };
        let mut value = vec![0u8; 64 * 1024];
        // SAFETY: as above.
        let v = unsafe {
            libc::lgetxattr(
                f.as_ptr(),
                cname.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if v >= 0 {
            // SAFETY: as above.
            unsafe {
                libc::lsetxattr(
                    t.as_ptr(),
                    cname.as_ptr(),
                    value.as_ptr().cast(),
                    v as usize,
                    0,
                )
            };
        }
    }
}

impl Layer {
    /// The layer of `lower` kept at `dir`: made now if it is not there whole (a stop while
    /// it was made starts it again).
    pub fn open(dir: &Path, lower: &Path, skip: Option<&Path>) -> io::Result<Layer> {
        let upper = dir.join("tree");
        let layer = Layer {
            lower: lower.to_path_buf(),
            upper: upper.clone(),
            dir: dir.to_path_buf(),
            shared: Mutex::new(HashSet::new()),
            base: Mutex::new(BTreeMap::new()),
            counter: AtomicU64::new(0),
            skip: Vec::new(),
        };
        fs::create_dir_all(dir)?;
        let mut layer = layer;
        layer.skip = skip
            .map(Path::to_path_buf)
            .into_iter()
            .chain(fs::canonicalize(dir).ok())
            .collect();
        let ready = dir.join("ready");
        if ready.exists() {
            let text = fs::read(dir.join("base.json"))?;
            let base: BTreeMap<String, Base> =
                serde_json::from_slice(&text).map_err(io::Error::other)?;
            *layer.lock_base() = base;
        } else {
            if upper.exists() {
                fs::remove_dir_all(&upper)?;
            }
            let meta = fs::metadata(lower)?;
            fs::create_dir(&upper)?;
            let mut base = BTreeMap::new();
            layer.farm(lower, &upper, "", &mut base)?;
            settle_attrs(&upper, &meta);
            *layer.lock_base() = base;
            layer.save_base()?;
            File::create(&ready)?.sync_all()?;
            File::open(dir)?.sync_all()?;
        }
        layer.learn_shared();
        Ok(layer)
    }

    fn lock_base(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Base>> {
        self.base.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_shared(&self) -> std::sync::MutexGuard<'_, HashSet<(u64, u64)>> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The merged view's directory (served as the tree).
    pub fn upper(&self) -> &Path {
        &self.upper
    }

    pub fn lower(&self) -> &Path {
        &self.lower
    }

    fn save_base(&self) -> io::Result<()> {
        let text = serde_json::to_vec(&*self.lock_base()).map_err(io::Error::other)?;
        let tmp = self.dir.join("base.json.tmp");
        let mut f = File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        fs::rename(tmp, self.dir.join("base.json"))
    }

    /// Which of the layer's files are still the root's own inodes.
    fn learn_shared(&self) {
        let base = self.lock_base().clone();
        let mut shared = self.lock_shared();
        shared.clear();
        for (path, _) in base.iter().filter(|(_, b)| b.kind == 'f') {
            if let (Ok(u), Ok(l)) = (
                fs::symlink_metadata(self.upper.join(path)),
                fs::symlink_metadata(self.lower.join(path)),
            ) {
                if u.dev() == l.dev() && u.ino() == l.ino() {
                    shared.insert((u.dev(), u.ino()));
                }
            }
        }
    }

    /// Make `upper` hold what `lower` holds: folders of its own, files linked.
    fn farm(
        &self,
        lower: &Path,
        upper: &Path,
        rel: &str,
        base: &mut BTreeMap<String, Base>,
    ) -> io::Result<()> {
        for entry in fs::read_dir(lower)? {
            let entry = entry?;
            let name = entry.file_name();
            let from = entry.path();
            if self.skip.contains(&from) {
                continue;
            }
            let Some(name_s) = name.to_str() else {
                tracing::warn!(
                    "overlay: {} is not UTF-8; left out of the layer",
                    from.display()
                );
                continue;
            };
            let to = upper.join(&name);
            let path = join(rel, name_s);
            let meta = fs::symlink_metadata(&from)?;
            let ft = meta.file_type();
            if ft.is_dir() {
                fs::create_dir(&to)?;
                self.farm(&from, &to, &path, base)?;
                settle_attrs(&to, &meta);
            } else if ft.is_file() {
                if fs::hard_link(&from, &to).is_err() {
                    fs::copy(&from, &to)?;
                    settle_attrs(&to, &meta);
                }
            } else if ft.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
                settle_attrs(&to, &meta);
            } else {
                tracing::warn!(
                    "overlay: {} is a special file; left out of the layer",
                    from.display()
                );
                continue;
            }
            base.insert(path, base_of(&meta));
        }
        Ok(())
    }

    /// Whether the file `(dev, ino)` is still the root's (a change copies it up first).
    pub fn is_shared(&self, dev: u64, ino: u64) -> bool {
        self.lock_shared().contains(&(dev, ino))
    }

    /// Copy up `name` in the layer's folder `dir` if it is a file the root still shares:
    /// a copy beside it, renamed over it. `true` if it did.
    pub fn copy_up_at(&self, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<bool> {
        self.copy_up_of(dir, name, None)
    }

    /// `copy_up_at`, refused unless `name` still holds the inode `expected` (dev, ino).
    pub fn copy_up_of(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        expected: Option<(u64, u64)>,
    ) -> io::Result<bool> {
        let c = CString::new(name.as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a zeroed stat is valid; fstatat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor, a NUL-terminated name.
        if unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        if expected.is_some_and(|e| e != (st.st_dev, st.st_ino)) {
            return Err(io::Error::other(format!(
                "{} is no longer the file the mount knows under that name",
                name.to_string_lossy()
            )));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || !self.is_shared(st.st_dev, st.st_ino) {
            return Ok(false);
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let temp =
            CString::new(format!(".wip-copy-up-{}-{n}", std::process::id())).unwrap_or_default();
        // SAFETY: as above; each descriptor is owned below.
        let src = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if src < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor.
        let mut src = unsafe { File::from_raw_fd(src) };
        // SAFETY: as above.
        let dst = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                temp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        };
        if dst < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor.
        let mut dst = unsafe { File::from_raw_fd(dst) };
        let copied = (|| {
            io::copy(&mut src, &mut dst)?;
            // SAFETY: a valid descriptor; owner where allowed, then the mode and times.
            unsafe {
                libc::fchown(dst.as_raw_fd(), st.st_uid, st.st_gid);
                libc::fchmod(dst.as_raw_fd(), st.st_mode & 0o7777);
            }
            let times = [
                libc::timespec {
                    tv_sec: st.st_atime,
                    tv_nsec: st.st_atime_nsec,
                },
                libc::timespec {
                    tv_sec: st.st_mtime,
                    tv_nsec: st.st_mtime_nsec,
                },
            ];
            // SAFETY: a valid descriptor and two timespecs.
            unsafe { libc::futimens(dst.as_raw_fd(), times.as_ptr()) };
            // SAFETY: valid descriptors and names.
            if unsafe {
                libc::renameat(dir.as_raw_fd(), temp.as_ptr(), dir.as_raw_fd(), c.as_ptr())
            } != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })();
        if let Err(e) = copied {
            // SAFETY: as above.
            unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
            return Err(e);
        }
        Ok(true)
    }

    // ---- diff, apply, discard -------------------------------------------------------

    /// Every difference between the layer and the root, parents before children.
    pub fn changes(&self) -> io::Result<Vec<Change>> {
        let mut out = Vec::new();
        self.compare("", &mut out)?;
        Ok(out)
    }

    fn names(&self, dir: &Path) -> io::Result<BTreeMap<OsString, fs::Metadata>> {
        let mut out = BTreeMap::new();
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for e in entries {
            let e = e?;
            let name = e.file_name();
            if is_temp(&name) || self.skip.iter().any(|s| *s == e.path()) {
                continue;
            }
            if name.to_str().is_none() {
                continue;
            }
            out.insert(name, fs::symlink_metadata(e.path())?);
        }
        Ok(out)
    }

    fn compare(&self, rel: &str, out: &mut Vec<Change>) -> io::Result<()> {
        let up = self.names(&self.upper.join(rel))?;
        let low = self.names(&self.lower.join(rel))?;
        let all: std::collections::BTreeSet<&OsString> = up.keys().chain(low.keys()).collect();
        for name in all {
            let path = join(rel, &name.to_string_lossy());
            match (up.get(name), low.get(name)) {
                (Some(u), None) => {
                    out.push(Change::Added(path.clone()));
                    if u.is_dir() {
                        self.compare(&path, out)?;
                    }
                }
                (None, Some(_)) => out.push(Change::Removed(path)),
                (Some(u), Some(l)) => {
                    let (ud, ld) = (u.is_dir(), l.is_dir());
                    if ud && ld {
                        if u.mode() & 0o7777 != l.mode() & 0o7777 {
                            out.push(Change::Modified(path.clone()));
                        }
                        self.compare(&path, out)?;
                    } else if ud != ld || u.file_type().is_symlink() != l.file_type().is_symlink() {
                        out.push(Change::Removed(path.clone()));
                        out.push(Change::Added(path.clone()));
                        if ud {
                            self.compare(&path, out)?;
                        }
                    } else if !self.same_file(&path, u, l)? {
                        out.push(Change::Modified(path));
                    }
                }
                (None, None) => {}
            }
        }
        Ok(())
    }

    fn same_file(&self, path: &str, u: &fs::Metadata, l: &fs::Metadata) -> io::Result<bool> {
        if u.dev() == l.dev() && u.ino() == l.ino() {
            return Ok(true);
        }
        if u.file_type().is_symlink() {
            return Ok(
                fs::read_link(self.upper.join(path))? == fs::read_link(self.lower.join(path))?
            );
        }
        if u.len() != l.len() || u.mode() & 0o7777 != l.mode() & 0o7777 {
            return Ok(false);
        }
        Ok(fs::read(self.upper.join(path))? == fs::read(self.lower.join(path))?)
    }

    fn content(root: &Path, path: &str) -> Content {
        let p = root.join(path);
        match fs::symlink_metadata(&p) {
            Err(_) => Content::Absent,
            Ok(m) if m.is_dir() => Content::Dir,
            Ok(m) if m.file_type().is_symlink() => match fs::read_link(&p) {
                Ok(t) => Content::Link(t.to_string_lossy().into_owned()),
                Err(e) => Content::Unreadable(e.to_string()),
            },
            Ok(m) if m.is_file() => match File::open(&p) {
                Ok(f) => read_file(f, m.len(), m.mode() & 0o7777),
                Err(e) => Content::Unreadable(e.to_string()),
            },
            Ok(_) => Content::Unreadable("a special file".into()),
        }
    }

    /// Every file and link below `rel` in `root`, by path.
    fn files_below(root: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(root.join(rel)) else {
            return;
        };
        let mut names: Vec<_> = entries.flatten().collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let path = join(rel, &name);
            match e.file_type() {
                Ok(t) if t.is_dir() => Self::files_below(root, &path, out),
                Ok(_) => out.push(path),
                Err(_) => {}
            }
        }
    }

    /// The pending changes as a unified diff (the root against the layer), limited to
    /// paths below `under`.
    pub fn diff(&self, under: &str, hidden: &dyn Fn(&str) -> bool) -> io::Result<String> {
        let mut out = String::new();
        for c in self.changes()? {
            let p = c.path();
            if !under.is_empty() && p != under && !p.starts_with(&format!("{under}/")) {
                continue;
            }
            if hidden(p) {
                continue;
            }
            if let Change::Modified(_) = c {
                let (b, n) = (Self::content(&self.lower, p), Self::content(&self.upper, p));
                if matches!((&b, &n), (Content::Dir, Content::Dir)) {
                    let mode = |root: &Path| {
                        fs::metadata(root.join(p))
                            .map(|m| m.mode() & 0o7777)
                            .unwrap_or(0)
                    };
                    out.push_str(&format!(
                        "diff --git a/{p} b/{p}\nold mode 40{:03o}\nnew mode 40{:03o}\n",
                        mode(&self.lower),
                        mode(&self.upper)
                    ));
                    continue;
                }
                unified(&mut out, p, &b, &n);
            } else if matches!(c, Change::Removed(_)) && self.lower.join(p).is_dir() {
                // A removed folder: each file it held, deleted.
                let mut files = Vec::new();
                Self::files_below(&self.lower, p, &mut files);
                for f in files.into_iter().filter(|f| !hidden(f)) {
                    unified(
                        &mut out,
                        &f,
                        &Self::content(&self.lower, &f),
                        &Content::Absent,
                    );
                }
            } else {
                let b = if matches!(c, Change::Added(_)) {
                    Content::Absent
                } else {
                    Self::content(&self.lower, p)
                };
                let n = if matches!(c, Change::Removed(_)) {
                    Content::Absent
                } else {
                    Self::content(&self.upper, p)
                };
                unified(&mut out, p, &b, &n);
            }
        }
        Ok(out)
    }

    /// Paths of `changes` the root changed since the layer was made (or last applied):
    /// each with what is different.
    pub fn conflicts(&self, changes: &[Change]) -> Vec<String> {
        let base = self.lock_base();
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for c in changes {
            let p = c.path();
            if !seen.insert(p.to_string()) {
                continue;
            }
            let now = fs::symlink_metadata(self.lower.join(p))
                .ok()
                .map(|m| base_of(&m));
            let was = base.get(p);
            let differs = match (was, &now) {
                (None, None) => false,
                (Some(w), Some(n)) if w.kind == 'd' && n.kind == 'd' => false,
                (Some(w), Some(n)) => w != n,
                _ => true,
            };
            if differs {
                out.push(match (was, now) {
                    (None, Some(_)) => format!("{p} (made in the root since)"),
                    (Some(_), None) => format!("{p} (removed from the root since)"),
                    _ => format!("{p} (changed in the root since)"),
                });
            }
        }
        out
    }

    /// Write one change to the root: `keep` keeps what it replaces there first.
    pub fn apply_one(
        &self,
        c: &Change,
        keep: &dyn Fn(&Path, &OsStr) -> Option<String>,
    ) -> io::Result<String> {
        let p = c.path();
        let up = self.upper.join(p);
        let low = self.lower.join(p);
        let parent = low.parent().unwrap_or(&self.lower).to_path_buf();
        let name = low.file_name().map(OsStr::to_os_string).unwrap_or_default();
        let words = match c {
            Change::Removed(_) => {
                let kept = keep(&parent, &name);
                match fs::symlink_metadata(&low) {
                    Ok(m) if m.is_dir() => fs::remove_dir_all(&low)?,
                    Ok(_) => fs::remove_file(&low)?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                format!(
                    "removed {p}{}",
                    kept.map(|s| format!(" (before-image {s})"))
                        .unwrap_or_default()
                )
            }
            Change::Added(_) | Change::Modified(_) => {
                let m = fs::symlink_metadata(&up)?;
                if m.is_dir() {
                    match fs::symlink_metadata(&low) {
                        Ok(l) if l.is_dir() => {}
                        _ => fs::create_dir(&low)?,
                    }
                    settle_attrs(&low, &m);
                    format!("folder {p}")
                } else {
                    let n = self.counter.fetch_add(1, Ordering::Relaxed);
                    let temp = parent.join(format!(".wip-apply-{}-{n}", std::process::id()));
                    if m.file_type().is_symlink() {
                        std::os::unix::fs::symlink(fs::read_link(&up)?, &temp)?;
                    } else {
                        let mut src = File::open(&up)?;
                        let mut dst = fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(&temp)?;
                        io::copy(&mut src, &mut dst)?;
                        dst.sync_all()?;
                        copy_xattrs(&up, &temp);
                    }
                    settle_attrs(&temp, &m);
                    let kept = if low.exists() {
                        keep(&parent, &name)
                    } else {
                        None
                    };
                    if let Err(e) = fs::rename(&temp, &low) {
                        let _ = fs::remove_file(&temp);
                        return Err(e);
                    }
                    format!(
                        "{} {p}{}",
                        if matches!(c, Change::Added(_)) {
                            "wrote new"
                        } else {
                            "wrote"
                        },
                        kept.map(|s| format!(" (before-image {s})"))
                            .unwrap_or_default()
                    )
                }
            }
        };
        // What the root holds now is the base the next apply compares with.
        let mut base = self.lock_base();
        match fs::symlink_metadata(&low) {
            Ok(m) => {
                base.insert(p.to_string(), base_of(&m));
            }
            Err(_) => {
                base.retain(|k, _| k != p && !k.starts_with(&format!("{p}/")));
            }
        }
        Ok(words)
    }

    /// The base after an apply or discard: kept on disk.
    pub fn settle_base(&self) -> io::Result<()> {
        self.save_base()?;
        self.learn_shared();
        Ok(())
    }

    /// Put the root's version of one change back in the layer (a discard).
    pub fn discard_one(&self, c: &Change) -> io::Result<()> {
        let p = c.path();
        let up = self.upper.join(p);
        let low = self.lower.join(p);
        match c {
            Change::Added(_) => match fs::symlink_metadata(&up) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&up),
                Ok(_) => fs::remove_file(&up),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            },
            Change::Removed(_) | Change::Modified(_) => {
                let m = fs::symlink_metadata(&low)?;
                if m.is_dir() {
                    match fs::symlink_metadata(&up) {
                        Ok(u) if u.is_dir() => {}
                        Ok(_) => {
                            fs::remove_file(&up)?;
                            fs::create_dir(&up)?;
                        }
                        Err(_) => fs::create_dir(&up)?,
                    }
                    if matches!(c, Change::Removed(_)) {
                        let mut base = self.lock_base().clone();
                        self.farm(&low, &up, p, &mut base)?;
                        *self.lock_base() = base;
                    }
                    settle_attrs(&up, &m);
                    return Ok(());
                }
                let parent = up.parent().unwrap_or(&self.upper).to_path_buf();
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                let temp = parent.join(format!(".wip-copy-up-{}-{n}", std::process::id()));
                if m.file_type().is_symlink() {
                    std::os::unix::fs::symlink(fs::read_link(&low)?, &temp)?;
                } else if fs::hard_link(&low, &temp).is_err() {
                    fs::copy(&low, &temp)?;
                    settle_attrs(&temp, &m);
                }
                if let Ok(u) = fs::symlink_metadata(&up) {
                    if u.is_dir() {
                        fs::remove_dir_all(&up)?;
                    }
                }
                fs::rename(&temp, &up)?;
                self.lock_base().insert(p.to_string(), base_of(&m));
                Ok(())
            }
        }
    }

    /// Where an apply in progress notes its run (`settle` after a stop reads it).
    pub fn progress_path(&self) -> PathBuf {
        self.dir.join("apply.progress")
    }

    /// How many root files the layer shares now (tests, descriptions).
    pub fn shared_count(&self) -> usize {
        self.lock_shared().len()
    }

    /// The root's base entries (tests).
    #[cfg(test)]
    fn base_len(&self) -> usize {
        self.lock_base().len()
    }
}

/// A map from path to its lowest changes: the folders that a removal covers whole need no
/// more lines for what they held.
pub fn coalesce(changes: Vec<Change>) -> Vec<Change> {
    let mut removed: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for c in changes {
        if let Change::Removed(p) = &c {
            if removed.iter().any(|r| p.starts_with(&format!("{r}/"))) {
                continue;
            }
            removed.push(p.clone());
        }
        out.push(c);
    }
    out
}

/// Paths of the layer's changes, counted by kind, for a result's first line.
pub fn summary(changes: &[Change]) -> String {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for c in changes {
        *counts
            .entry(match c {
                Change::Added(_) => "added",
                Change::Removed(_) => "removed",
                Change::Modified(_) => "modified",
            })
            .or_default() += 1;
    }
    let mut parts: Vec<String> = ["added", "modified", "removed"]
        .iter()
        .filter_map(|k| counts.get(k).map(|n| format!("{n} {k}")))
        .collect();
    if parts.is_empty() {
        parts.push("no changes".into());
    }
    parts.join(", ")
}

// ---- the host's ops on an overlay ------------------------------------------------------

pub const APPLY: &str = "apply";
pub const DISCARD: &str = "discard";
pub const DIFF: &str = "diff";

/// Paths a result names one by one (the rest are counted).
const NAMED: usize = 100;

impl FilesHost {
    pub(super) fn is_overlay_op(&self, op: &str) -> bool {
        self.layer.is_some() && matches!(op, APPLY | DISCARD | DIFF)
    }

    pub(super) fn ops_of_root(&self) -> HostResult<Vec<OpSpec>> {
        Ok(match self.locate(&[])? {
            Some(loc) => super::ops::specs(&super::ops::Entry {
                loc,
                page_size: self.page_size,
            }),
            None => Vec::new(),
        })
    }

    pub(super) fn overlay_specs(&self) -> Vec<OpSpec> {
        let root = self
            .layer
            .as_ref()
            .map(|l| l.lower().display().to_string())
            .unwrap_or_default();
        vec![
            OpSpec {
                output: None,
                name: DIFF.into(),
                description: format!("diff(under?): the layer's pending changes against {root}, as git diff --no-index prints them"),
                schema: json!({
                    "type": "object",
                    "properties": {"under": {"type": "string", "description": "only paths below this folder (relative to the root)"}},
                    "additionalProperties": false
                }),
            },
            OpSpec {
                output: None,
                name: APPLY.into(),
                description: format!("apply(force?): write the layer's changes to {root}, each file whole (old or new, never torn), the replaced ones kept as before-images; refused, naming them, where the root changed since the layer was made, unless force"),
                schema: json!({
                    "type": "object",
                    "properties": {"force": {"type": "boolean", "description": "overwrite what the root changed meanwhile (default false)"}},
                    "additionalProperties": false
                }),
            },
            OpSpec {
                output: None,
                name: DISCARD.into(),
                description: format!("discard(): drop the layer's changes: the tree is {root} again"),
                schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
            },
        ]
    }

    fn layer(&self) -> HostResult<&Layer> {
        self.layer
            .as_ref()
            .ok_or_else(|| HostError::NotFound("this files host is not an overlay".into()))
    }

    pub(super) fn overlay_guard(&self, op: &str, args: Option<&Value>) -> HostResult<Guard> {
        let layer = self.layer()?;
        let changes = coalesce(
            layer
                .changes()
                .map_err(|e| HostError::Backend(e.to_string()))?,
        );
        let mut c = vec![Condition::check(
            "pending",
            op == DIFF || !changes.is_empty(),
            format!("the layer holds {}", summary(&changes)),
        )];
        if op == APPLY {
            // Without arguments (the `guard` file, a call's open) the conflicts are named
            // but refuse nothing yet: `force` decides, with the call's arguments.
            let force = match args {
                None => true,
                Some(a) => a.get("force").and_then(Value::as_bool).unwrap_or(false),
            };
            let conflicts = layer.conflicts(&changes);
            c.push(Condition::check(
                "no_conflict",
                conflicts.is_empty() || force,
                if conflicts.is_empty() {
                    format!("{} is as the layer found it", layer.lower().display())
                } else {
                    format!(
                        "{} changed in the root since the layer was made{}: {}",
                        conflicts.len(),
                        match args {
                            None => "; apply refuses them unless force=true",
                            Some(_) if force => " (force: overwritten)",
                            Some(_) => "; apply with force=true overwrites them",
                        },
                        conflicts
                            .iter()
                            .take(10)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
            ));
        }
        Ok(Guard::new(c))
    }

    pub(super) fn overlay_call(
        &self,
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        let layer = self.layer()?;
        let io = |e: io::Error| HostError::Backend(e.to_string());
        match op {
            DIFF => {
                let under = args.get("under").and_then(Value::as_str).unwrap_or("");
                let under = under.trim_matches('/');
                if under.split('/').any(|s| s == "..") {
                    return Err(HostError::InvalidArgs(
                        "under: a folder below the root, without ..".into(),
                    ));
                }
                let hidden = |p: &str| self.hidden.hides(&format!("{}/{p}", self.mount));
                let text = layer.diff(under, &hidden).map_err(io)?;
                Ok(CallOutcome::text(if text.is_empty() {
                    "no pending changes: the layer is the root\n".to_string()
                } else {
                    text
                }))
            }
            APPLY => {
                let force = args.get("force").and_then(Value::as_bool).unwrap_or(false);
                let changes = coalesce(layer.changes().map_err(io)?);
                if changes.is_empty() {
                    return Ok(CallOutcome::text(
                        "nothing to apply: the layer is the root\n",
                    ));
                }
                let conflicts = layer.conflicts(&changes);
                if !conflicts.is_empty() && !force {
                    return Err(HostError::Blocked(Guard::new(vec![Condition::check(
                        "no_conflict",
                        false,
                        format!(
                            "{} changed in the root since the layer was made (nothing was applied): {}; apply with force=true overwrites them",
                            conflicts.len(),
                            conflicts.join(", ")
                        ),
                    )])));
                }
                // A stop half-way is settled from this note (see `settle`).
                let progress = layer.progress_path();
                let _ = fs::write(&progress, format!("{}\n0 {}\n", caller.run, changes.len()));
                let keep = |dir: &Path, name: &OsStr| -> Option<String> {
                    let store = self.before.as_ref()?;
                    let d = File::open(dir).ok()?;
                    use std::os::fd::AsFd;
                    store
                        .keep_named(d.as_fd(), name)
                        .ok()
                        .flatten()
                        .map(|k| k.sha256)
                };
                let mut lines = Vec::new();
                // Removals deepest first would not matter: a removed folder goes whole.
                for (i, c) in changes.iter().enumerate() {
                    let words = layer.apply_one(c, &keep).map_err(|e| {
                        HostError::Backend(format!(
                            "apply stopped at {} ({e}) after {i} of {} changes; what was written stays, run apply again for the rest",
                            c.path(),
                            changes.len()
                        ))
                    })?;
                    let _ = fs::write(
                        &progress,
                        format!("{}\n{} {}\n", caller.run, i + 1, changes.len()),
                    );
                    lines.push(words);
                }
                layer.settle_base().map_err(io)?;
                let _ = fs::remove_file(&progress);
                let mut text = format!(
                    "applied {} to {}\n",
                    summary(&changes),
                    layer.lower().display()
                );
                for l in lines.iter().take(NAMED) {
                    text.push_str(&format!("  {l}\n"));
                }
                if lines.len() > NAMED {
                    text.push_str(&format!("  … and {} more\n", lines.len() - NAMED));
                }
                Ok(CallOutcome::text(text))
            }
            DISCARD => {
                let changes = coalesce(layer.changes().map_err(io)?);
                let mut out = CallOutcome::text(format!(
                    "discarded {}: the tree is {} again\n",
                    summary(&changes),
                    layer.lower().display()
                ));
                for c in changes.iter().rev() {
                    layer.discard_one(c).map_err(io)?;
                    let segs: Vec<String> = c.path().split('/').map(str::to_string).collect();
                    if let Some((_, parent)) = segs.split_last() {
                        out.changed.push(parent.to_vec());
                    }
                    out.changed.push(segs);
                }
                layer.settle_base().map_err(io)?;
                Ok(out)
            }
            other => Err(HostError::NotFound(format!("no op {other:?} here"))),
        }
    }

    /// An `apply` a stop cut off: each file it wrote is whole; say how far it got.
    pub(super) fn overlay_settle(&self, op: &str, run: &str) -> HostResult<Option<Settled>> {
        let Some(layer) = &self.layer else {
            return Ok(None);
        };
        if op != APPLY {
            return Ok(None);
        }
        let Ok(text) = fs::read_to_string(layer.progress_path()) else {
            return Ok(Some(Settled::NotRun));
        };
        let mut lines = text.lines();
        if lines.next() != Some(run) {
            return Ok(Some(Settled::NotRun));
        }
        let (done, of) = lines
            .next()
            .and_then(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .unwrap_or_default();
        let _ = fs::remove_file(layer.progress_path());
        let _ = layer.settle_base();
        Ok(Some(Settled::Done(format!(
            "applied {done} of {of} changes before the stop, each file whole (old or new); the rest are still in the layer: apply again"
        ))))
    }

    /// Copy up the file `name` in the tree's folder `dir` before a change to it in place
    /// (an explicit op); the node the kernel may hold for it is that copy from then on.
    pub(super) fn copy_up_named(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        name: &OsStr,
        path: &Path,
    ) -> io::Result<()> {
        let Some(layer) = &self.layer else {
            return Ok(());
        };
        if !layer.copy_up_at(dir, name)? {
            return Ok(());
        }
        let segs: Option<Vec<OsString>> = self
            .host_path(path)
            .map(|s| s.into_iter().map(OsString::from).collect());
        if let Some(node) = segs.and_then(|s| self.store.node_at(&s)) {
            self.store.rehandle_to_name(node)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) {
        fs::create_dir_all(root.join("src")).unwrap();
        fs::write(root.join("src/a.rs"), "one\n").unwrap();
        fs::write(root.join("README"), "hello\n").unwrap();
        std::os::unix::fs::symlink("README", root.join("link")).unwrap();
    }

    #[test]
    fn a_layer_links_the_roots_files_and_copies_up_before_a_change() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        tree(&root);
        let l = Layer::open(&d.path().join("layer"), &root, None).unwrap();
        assert_eq!(l.base_len(), 4);
        assert_eq!(l.shared_count(), 2);
        assert!(l.changes().unwrap().is_empty());
        let dir = File::open(l.upper().join("src")).unwrap();
        use std::os::fd::AsFd;
        assert!(l.copy_up_at(dir.as_fd(), OsStr::new("a.rs")).unwrap());
        fs::write(l.upper().join("src/a.rs"), "two\n").unwrap();
        assert_eq!(fs::read_to_string(root.join("src/a.rs")).unwrap(), "one\n");
        fs::remove_file(l.upper().join("README")).unwrap();
        fs::write(l.upper().join("new"), "n\n").unwrap();
        let changes = l.changes().unwrap();
        assert_eq!(
            changes,
            [
                Change::Removed("README".into()),
                Change::Added("new".into()),
                Change::Modified("src/a.rs".into())
            ]
        );
        let diff = l.diff("", &|_| false).unwrap();
        assert!(
            diff.contains("-one\n+two\n") && diff.contains("deleted file mode 100644"),
            "{diff}"
        );
        // Reopened, it is the same layer.
        drop(l);
        let l = Layer::open(&d.path().join("layer"), &root, None).unwrap();
        assert_eq!(l.changes().unwrap().len(), 3);
        assert!(l.conflicts(&changes).is_empty());
        fs::write(root.join("src/a.rs"), "outside\n").unwrap();
        assert_eq!(
            l.conflicts(&changes),
            ["src/a.rs (changed in the root since)"]
        );
        // Discarded: the layer is the root again.
        for c in &changes {
            l.discard_one(c).unwrap();
        }
        l.settle_base().unwrap();
        assert!(l.changes().unwrap().is_empty());
    }

    #[test]
    fn a_layer_kept_inside_its_root_leaves_itself_out() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        tree(&root);
        let l = Layer::open(&root.join(".state/overlay/files"), &root, None).unwrap();
        assert!(l.upper().join("src/a.rs").exists());
        assert!(!l.upper().join(".state/overlay/files/tree").exists());
        assert!(l.changes().unwrap().is_empty(), "{:?}", l.changes());
    }
}
