//! The working tree: an inode store of `O_PATH` handles keyed by the backing file's
//! identity (device, inode), as fuse-backend-rs's passthrough and libfuse's
//! `passthrough_hp` keep theirs. A node is opened once, by a single name in a directory
//! already held, never following a symlink; every later operation acts on that handle
//! (or on one name in a directory handle), so nothing here resolves a path and nothing can
//! lead out of the root, whatever is renamed or swapped meanwhile.
//!
//! Holding the handle also keeps the backing inode alive while the kernel knows the node,
//! so its number cannot be given to another file meanwhile: on the root's device a node's
//! number is the file's own inode number, stable across lookups, forgets and remounts.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::host::tree::{
    stat_of, Creds, DirEntry, Found, FsStat, Kind, NodeNo, RenameMode, SetAttr, Stat, TimeSet,
};

/// Numbers from here on are handed out in order: a node of another device than the root's
/// (a file system mounted below the root), or an inode number too large to be a node's.
const COUNTED: u64 = 1 << 62;

/// One node the kernel knows.
struct Inode {
    fd: Arc<OwnedFd>,
    dev: u64,
    ino: u64,
    kind: Kind,
    /// References the kernel holds (lookups not yet forgotten).
    refs: u64,
    /// The names it was seen under: (directory, name). Several for hard links.
    names: Vec<(NodeNo, OsString)>,
}

#[derive(Default)]
struct Inner {
    by_no: HashMap<NodeNo, Inode>,
    by_id: HashMap<(u64, u64), NodeNo>,
    /// (directory, name) → node, for the names the tree has seen.
    by_name: HashMap<(NodeNo, OsString), NodeNo>,
}

impl Inner {
    fn add_name(&mut self, node: NodeNo, dir: NodeNo, name: &OsStr) {
        let key = (dir, name.to_os_string());
        if let Some(old) = self.by_name.insert(key.clone(), node) {
            if old != node {
                if let Some(i) = self.by_no.get_mut(&old) {
                    i.names.retain(|n| *n != key);
                }
            }
        }
        if let Some(i) = self.by_no.get_mut(&node) {
            if !i.names.contains(&key) {
                i.names.push(key);
            }
        }
    }

    fn drop_name(&mut self, dir: NodeNo, name: &OsStr) -> Option<NodeNo> {
        let key = (dir, name.to_os_string());
        let node = self.by_name.remove(&key)?;
        if let Some(i) = self.by_no.get_mut(&node) {
            i.names.retain(|n| *n != key);
        }
        Some(node)
    }
}

/// The mount point of the world when it lies below the root: hidden, never touched.
#[derive(Clone, Debug)]
pub(super) struct MountPoint {
    /// The directory holding it (device, inode) and its name there.
    pub dir: (u64, u64),
    pub name: OsString,
}

pub(super) struct Store {
    inner: Mutex<Inner>,
    root: NodeNo,
    root_dev: u64,
    next: AtomicU64,
    mount: Option<MountPoint>,
    /// This daemon's own user: a caller who is someone else gets new files made theirs.
    euid: u32,
    /// The bits this process's umask would clear from every file it makes (put back when
    /// the caller asked for them: the kernel already applied the caller's own umask).
    umask: u32,
}

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `/proc/self/fd/N`: the file a descriptor refers to, by name, for the calls that take
/// no descriptor (xattrs, times, a reopen with other flags).
fn proc_path(fd: BorrowedFd<'_>) -> CString {
    // The digits of a descriptor never hold a NUL.
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

/// `fstatat(fd, "", AT_EMPTY_PATH)`: what the handle refers to (not following a link).
fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: a valid descriptor, an empty NUL-terminated path and a buffer of the right
    // size; the kernel fills the buffer on success.
    let rc = unsafe {
        libc::fstatat(
            fd.as_raw_fd(),
            c"".as_ptr(),
            st.as_mut_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(last_error());
    }
    // SAFETY: fstatat succeeded and initialised the buffer.
    Ok(unsafe { st.assume_init() })
}

/// `openat(dir, name, O_PATH | O_NOFOLLOW)`: the name itself, a symlink not followed.
fn open_path(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(errno)
}

/// A name a directory can hold: one component, not `.` or `..`.
fn valid_name(name: &OsStr) -> io::Result<()> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(())
}

impl Store {
    /// The store of the tree at `root` (a directory descriptor, `O_PATH`).
    pub(super) fn new(root: OwnedFd, mount: Option<MountPoint>) -> io::Result<Store> {
        let st = fstat(root.as_fd())?;
        let (dev, ino) = (st.st_dev, st.st_ino);
        let root_no = if ino > 1 && ino < COUNTED {
            ino
        } else {
            COUNTED
        };
        let mut inner = Inner::default();
        inner.by_no.insert(
            root_no,
            Inode {
                fd: Arc::new(root),
                dev,
                ino,
                kind: Kind::Dir,
                refs: u64::MAX / 2,
                names: Vec::new(),
            },
        );
        inner.by_id.insert((dev, ino), root_no);
        // SAFETY: umask only swaps the process's mask; it is put back at once.
        let umask = unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            m
        };
        Ok(Store {
            inner: Mutex::new(inner),
            root: root_no,
            root_dev: dev,
            next: AtomicU64::new(COUNTED + 1),
            mount,
            // SAFETY: geteuid cannot fail.
            euid: unsafe { libc::geteuid() },
            umask: umask & 0o777,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn root(&self) -> NodeNo {
        self.root
    }

    /// The handle of `node` (shared: the node may be forgotten while it is used).
    fn fd(&self, node: NodeNo) -> io::Result<(Arc<OwnedFd>, Kind)> {
        self.lock()
            .by_no
            .get(&node)
            .map(|i| (Arc::clone(&i.fd), i.kind))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))
    }

    fn dir_fd(&self, node: NodeNo) -> io::Result<Arc<OwnedFd>> {
        match self.fd(node)? {
            (fd, Kind::Dir) => Ok(fd),
            _ => Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        }
    }

    /// Whether `name` in `dir` is the world's own mount point (never looked at).
    fn is_mount(&self, dir: NodeNo, name: &OsStr) -> bool {
        let Some(m) = &self.mount else { return false };
        if m.name != name {
            return false;
        }
        self.lock()
            .by_no
            .get(&dir)
            .is_some_and(|i| (i.dev, i.ino) == m.dir)
    }

    /// The node number of a backing file: its own inode number on the root's device.
    fn number(&self, inner: &Inner, dev: u64, ino: u64) -> NodeNo {
        if dev == self.root_dev && ino > 1 && ino < COUNTED && !inner.by_no.contains_key(&ino) {
            ino
        } else {
            self.next.fetch_add(1, Ordering::Relaxed)
        }
    }

    /// Keep `fd` (just opened as `name` in `dir`) as a node with one more reference.
    fn adopt(&self, dir: NodeNo, name: &OsStr, fd: OwnedFd) -> io::Result<Found> {
        let st = fstat(fd.as_fd())?;
        let mut inner = self.lock();
        let node = match inner.by_id.get(&(st.st_dev, st.st_ino)).copied() {
            // The same inode (the store's handle keeps it alive, so its number is not
            // another file's): the new handle goes.
            Some(node) => {
                if let Some(i) = inner.by_no.get_mut(&node) {
                    i.refs += 1;
                }
                node
            }
            None => {
                let node = self.number(&inner, st.st_dev, st.st_ino);
                inner.by_no.insert(
                    node,
                    Inode {
                        fd: Arc::new(fd),
                        dev: st.st_dev,
                        ino: st.st_ino,
                        kind: Kind::of_mode(st.st_mode),
                        refs: 1,
                        names: Vec::new(),
                    },
                );
                inner.by_id.insert((st.st_dev, st.st_ino), node);
                node
            }
        };
        inner.add_name(node, dir, name);
        Ok(Found {
            node,
            stat: stat_of(&st, node),
        })
    }

    pub(super) fn lookup(&self, dir: NodeNo, name: &OsStr) -> io::Result<Found> {
        valid_name(name).map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
        if self.is_mount(dir, name) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let dfd = self.dir_fd(dir)?;
        let fd = open_path(dfd.as_fd(), name)?;
        self.adopt(dir, name, fd)
    }

    pub(super) fn exists(&self, dir: NodeNo, name: &OsStr) -> io::Result<bool> {
        if valid_name(name).is_err() || self.is_mount(dir, name) {
            return Ok(false);
        }
        let dfd = self.dir_fd(dir)?;
        match rustix::fs::statat(dfd.as_fd(), name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(errno(e)),
        }
    }

    pub(super) fn forget(&self, node: NodeNo, n: u64) {
        if node == self.root {
            return;
        }
        let mut inner = self.lock();
        let gone = match inner.by_no.get_mut(&node) {
            Some(i) => {
                i.refs = i.refs.saturating_sub(n);
                i.refs == 0
            }
            None => false,
        };
        if gone {
            if let Some(i) = inner.by_no.remove(&node) {
                inner.by_id.remove(&(i.dev, i.ino));
                for key in i.names {
                    if inner.by_name.get(&key) == Some(&node) {
                        inner.by_name.remove(&key);
                    }
                }
            }
        }
    }

    pub(super) fn stat(&self, node: NodeNo) -> io::Result<Stat> {
        let (fd, _) = self.fd(node)?;
        Ok(stat_of(&fstat(fd.as_fd())?, node))
    }

    pub(super) fn list(&self, dir: NodeNo) -> io::Result<Vec<DirEntry>> {
        let dfd = self.dir_fd(dir)?;
        let fd = rustix::fs::openat(
            dfd.as_fd(),
            ".",
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(errno)?;
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd).map_err(errno)? {
            let Ok(entry) = entry else { continue };
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." || self.is_mount(dir, name) {
                continue;
            }
            let kind = match entry.file_type() {
                rustix::fs::FileType::Directory => Kind::Dir,
                rustix::fs::FileType::Symlink => Kind::Symlink,
                rustix::fs::FileType::Fifo => Kind::Fifo,
                rustix::fs::FileType::Socket => Kind::Socket,
                rustix::fs::FileType::CharacterDevice => Kind::CharDevice,
                rustix::fs::FileType::BlockDevice => Kind::BlockDevice,
                rustix::fs::FileType::RegularFile => Kind::File,
                // The directory does not say: ask the name itself.
                _ => match rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => Kind::of_mode(st.st_mode),
                    Err(_) => continue,
                },
            };
            out.push(DirEntry {
                name: name.to_os_string(),
                kind,
                ino: entry.ino(),
            });
        }
        Ok(out)
    }

    pub(super) fn readlink(&self, node: NodeNo) -> io::Result<OsString> {
        let (fd, _) = self.fd(node)?;
        let target = rustix::fs::readlinkat(fd.as_fd(), "", Vec::new()).map_err(errno)?;
        Ok(OsStr::from_bytes(target.as_bytes()).to_os_string())
    }

    pub(super) fn open(&self, node: NodeNo, flags: i32) -> io::Result<File> {
        let (fd, kind) = self.fd(node)?;
        if kind == Kind::Dir && flags & libc::O_ACCMODE != libc::O_RDONLY {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        // Reopen the very inode the handle holds; never a name.
        let flags = (flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_NOCTTY))
            | libc::O_CLOEXEC;
        let path = proc_path(fd.as_fd());
        // SAFETY: a NUL-terminated path; the returned descriptor is owned below.
        let raw = unsafe { libc::open(path.as_ptr(), flags) };
        if raw < 0 {
            return Err(last_error());
        }
        // SAFETY: open returned a fresh descriptor this function owns.
        Ok(unsafe { File::from_raw_fd(raw) })
    }

    /// Make what was just created (`name` in `dir`, through `fd`) the caller's and give it
    /// the mode asked: the kernel applied the caller's umask, this process's own must not
    /// clear more.
    fn settle_new(&self, fd: BorrowedFd<'_>, mode: u32, creds: Creds, is_link: bool) {
        let path = proc_path(fd);
        if !is_link && mode & self.umask & 0o777 != 0 {
            // SAFETY: a NUL-terminated path.
            unsafe { libc::chmod(path.as_ptr(), mode & 0o7777) };
        }
        if creds.uid != self.euid && self.euid == 0 {
            // A new file of a setgid directory keeps the directory's group.
            // SAFETY: a valid descriptor and an empty NUL-terminated path.
            unsafe {
                libc::fchownat(
                    fd.as_raw_fd(),
                    c"".as_ptr(),
                    creds.uid,
                    u32::MAX,
                    libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                )
            };
        }
    }

    pub(super) fn create(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        creds: Creds,
    ) -> io::Result<(Found, File)> {
        valid_name(name)?;
        if self.is_mount(dir, name) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let dfd = self.dir_fd(dir)?;
        let c = cstr(name)?;
        let flags = (flags | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC) & !libc::O_NOCTTY;
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let raw = unsafe { libc::openat(dfd.as_raw_fd(), c.as_ptr(), flags, mode & 0o7777) };
        if raw < 0 {
            return Err(last_error());
        }
        // SAFETY: openat returned a fresh descriptor this function owns.
        let file = unsafe { File::from_raw_fd(raw) };
        self.settle_new(file.as_fd(), mode, creds, false);
        // The node is the file just opened, whatever the name leads to by now.
        let path = rustix::fs::open(
            proc_path(file.as_fd()).as_c_str(),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(errno)?;
        Ok((self.adopt(dir, name, path)?, file))
    }

    /// Make `name` in `dir` with `make`, then hold it as a node.
    fn make(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        creds: Creds,
        make: impl FnOnce(BorrowedFd<'_>, &CString) -> io::Result<()>,
    ) -> io::Result<Found> {
        valid_name(name)?;
        if self.is_mount(dir, name) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let dfd = self.dir_fd(dir)?;
        let c = cstr(name)?;
        make(dfd.as_fd(), &c)?;
        let fd = open_path(dfd.as_fd(), name)?;
        let is_link = fstat(fd.as_fd()).is_ok_and(|st| Kind::of_mode(st.st_mode) == Kind::Symlink);
        self.settle_new(fd.as_fd(), mode, creds, is_link);
        self.adopt(dir, name, fd)
    }

    pub(super) fn mkdir(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        creds: Creds,
    ) -> io::Result<Found> {
        self.make(dir, name, mode & 0o7777, creds, |d, c| {
            // SAFETY: a valid directory descriptor and a NUL-terminated name.
            let rc = unsafe { libc::mkdirat(d.as_raw_fd(), c.as_ptr(), mode & 0o7777) };
            if rc == 0 {
                Ok(())
            } else {
                Err(last_error())
            }
        })
    }

    pub(super) fn mknod(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        creds: Creds,
    ) -> io::Result<Found> {
        self.make(dir, name, mode & 0o7777, creds, |d, c| {
            // SAFETY: a valid directory descriptor and a NUL-terminated name.
            let rc = unsafe { libc::mknodat(d.as_raw_fd(), c.as_ptr(), mode, u64::from(rdev)) };
            if rc == 0 {
                Ok(())
            } else {
                Err(last_error())
            }
        })
    }

    pub(super) fn symlink(
        &self,
        dir: NodeNo,
        name: &OsStr,
        target: &OsStr,
        creds: Creds,
    ) -> io::Result<Found> {
        let t = cstr(target)?;
        self.make(dir, name, 0o777, creds, |d, c| {
            // SAFETY: NUL-terminated strings and a valid directory descriptor.
            let rc = unsafe { libc::symlinkat(t.as_ptr(), d.as_raw_fd(), c.as_ptr()) };
            if rc == 0 {
                Ok(())
            } else {
                Err(last_error())
            }
        })
    }

    pub(super) fn link(&self, node: NodeNo, dir: NodeNo, name: &OsStr) -> io::Result<Found> {
        valid_name(name)?;
        if self.is_mount(dir, name) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let (fd, _) = self.fd(node)?;
        let dfd = self.dir_fd(dir)?;
        let c = cstr(name)?;
        let from = proc_path(fd.as_fd());
        // Through the handle's name in /proc, followed: the very inode held, without the
        // privilege `AT_EMPTY_PATH` needs.
        // SAFETY: NUL-terminated paths and valid descriptors.
        let rc = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                dfd.as_raw_fd(),
                c.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if rc != 0 {
            return Err(last_error());
        }
        let fd = open_path(dfd.as_fd(), name)?;
        self.adopt(dir, name, fd)
    }

    pub(super) fn unlink(&self, dir: NodeNo, name: &OsStr, flags: i32) -> io::Result<()> {
        valid_name(name)?;
        if self.is_mount(dir, name) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let dfd = self.dir_fd(dir)?;
        let c = cstr(name)?;
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        if unsafe { libc::unlinkat(dfd.as_raw_fd(), c.as_ptr(), flags) } != 0 {
            return Err(last_error());
        }
        self.lock().drop_name(dir, name);
        Ok(())
    }

    pub(super) fn rename(
        &self,
        dir: NodeNo,
        name: &OsStr,
        to_dir: NodeNo,
        to_name: &OsStr,
        mode: RenameMode,
    ) -> io::Result<()> {
        valid_name(name)?;
        valid_name(to_name)?;
        if self.is_mount(dir, name) || self.is_mount(to_dir, to_name) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let from = self.dir_fd(dir)?;
        let to = self.dir_fd(to_dir)?;
        let flags = match mode {
            RenameMode::Replace => rustix::fs::RenameFlags::empty(),
            RenameMode::NoReplace => rustix::fs::RenameFlags::NOREPLACE,
            RenameMode::Exchange => rustix::fs::RenameFlags::EXCHANGE,
        };
        rustix::fs::renameat_with(from.as_fd(), name, to.as_fd(), to_name, flags).map_err(errno)?;
        let mut inner = self.lock();
        let moved = inner.drop_name(dir, name);
        let there = inner.drop_name(to_dir, to_name);
        if let Some(m) = moved {
            inner.add_name(m, to_dir, to_name);
        }
        if let (RenameMode::Exchange, Some(t)) = (mode, there) {
            inner.add_name(t, dir, name);
        }
        Ok(())
    }

    pub(super) fn setattr(
        &self,
        node: NodeNo,
        set: &SetAttr,
        file: Option<&File>,
    ) -> io::Result<Stat> {
        let (fd, kind) = self.fd(node)?;
        let path = proc_path(fd.as_fd());
        if let Some(size) = set.size {
            if kind != Kind::File {
                return Err(io::Error::from_raw_os_error(if kind == Kind::Dir {
                    libc::EISDIR
                } else {
                    libc::EINVAL
                }));
            }
            let len = i64::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
            match file {
                Some(f) => f.set_len(size)?,
                None => {
                    // SAFETY: a NUL-terminated path.
                    if unsafe { libc::truncate(path.as_ptr(), len) } != 0 {
                        return Err(last_error());
                    }
                }
            }
        }
        if let Some(mode) = set.mode {
            if kind == Kind::Symlink {
                return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
            }
            // SAFETY: a NUL-terminated path.
            if unsafe { libc::chmod(path.as_ptr(), mode & 0o7777) } != 0 {
                return Err(last_error());
            }
        }
        if set.uid.is_some() || set.gid.is_some() {
            // SAFETY: a valid descriptor and an empty NUL-terminated path.
            let rc = unsafe {
                libc::fchownat(
                    fd.as_raw_fd(),
                    c"".as_ptr(),
                    set.uid.unwrap_or(u32::MAX),
                    set.gid.unwrap_or(u32::MAX),
                    libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if rc != 0 {
                return Err(last_error());
            }
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let spec = |t: Option<TimeSet>| match t {
                None => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_OMIT,
                },
                Some(TimeSet::Now) => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_NOW,
                },
                Some(TimeSet::At(at)) => {
                    let (sec, nsec) = match at.duration_since(std::time::UNIX_EPOCH) {
                        Ok(d) => (d.as_secs() as i64, i64::from(d.subsec_nanos())),
                        Err(e) => (-(e.duration().as_secs() as i64), 0),
                    };
                    libc::timespec {
                        tv_sec: sec,
                        tv_nsec: nsec,
                    }
                }
            };
            let times = [spec(set.atime), spec(set.mtime)];
            // A symlink's own times: through its directory, the name not followed.
            let rc = if kind == Kind::Symlink {
                -1
            } else {
                // SAFETY: a NUL-terminated path and two timespecs.
                unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) }
            };
            if rc != 0 {
                if kind != Kind::Symlink {
                    return Err(last_error());
                }
                self.at_own_name(node, |d, c| {
                    // SAFETY: a valid directory descriptor, a NUL-terminated name, two timespecs.
                    let rc = unsafe {
                        libc::utimensat(
                            d.as_raw_fd(),
                            c.as_ptr(),
                            times.as_ptr(),
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    };
                    if rc == 0 {
                        Ok(())
                    } else {
                        Err(last_error())
                    }
                })?;
            }
        }
        self.stat(node)
    }

    /// Run `f` on the node's directory and name (for a symlink, whose handle's /proc name
    /// would be followed).
    fn at_own_name<T>(
        &self,
        node: NodeNo,
        f: impl FnOnce(BorrowedFd<'_>, &CString) -> io::Result<T>,
    ) -> io::Result<T> {
        let (dir, name) = {
            let inner = self.lock();
            let i = inner
                .by_no
                .get(&node)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))?;
            i.names
                .first()
                .cloned()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))?
        };
        let dfd = self.dir_fd(dir)?;
        f(dfd.as_fd(), &cstr(&name)?)
    }

    /// An xattr call by name: through /proc for what is not a symlink, through the
    /// directory for a symlink (its own attributes, not its target's).
    fn xattr_path<T>(
        &self,
        node: NodeNo,
        f: impl FnOnce(&CString, bool) -> io::Result<T>,
    ) -> io::Result<T> {
        let (fd, kind) = self.fd(node)?;
        if kind != Kind::Symlink {
            return f(&proc_path(fd.as_fd()), true);
        }
        self.at_own_name(node, |d, c| {
            let mut p = proc_path(d).into_bytes();
            p.push(b'/');
            p.extend_from_slice(c.as_bytes());
            f(&CString::new(p).unwrap_or_default(), false)
        })
    }

    pub(super) fn getxattr(&self, node: NodeNo, name: &OsStr) -> io::Result<Vec<u8>> {
        let n = cstr(name)?;
        self.xattr_path(node, |p, follow| {
            let get = |buf: *mut libc::c_void, len: usize| -> isize {
                // SAFETY: NUL-terminated strings and a buffer of `len` bytes (or none).
                unsafe {
                    if follow {
                        libc::getxattr(p.as_ptr(), n.as_ptr(), buf, len)
                    } else {
                        libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf, len)
                    }
                }
            };
            sized(get)
        })
    }

    pub(super) fn listxattr(&self, node: NodeNo) -> io::Result<Vec<u8>> {
        self.xattr_path(node, |p, follow| {
            sized(|buf, len| {
                // SAFETY: a NUL-terminated path and a buffer of `len` bytes (or none).
                unsafe {
                    if follow {
                        libc::listxattr(p.as_ptr(), buf.cast(), len)
                    } else {
                        libc::llistxattr(p.as_ptr(), buf.cast(), len)
                    }
                }
            })
        })
    }

    pub(super) fn setxattr(
        &self,
        node: NodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
    ) -> io::Result<()> {
        let n = cstr(name)?;
        self.xattr_path(node, |p, follow| {
            // SAFETY: NUL-terminated strings and a value of its length.
            let rc = unsafe {
                if follow {
                    libc::setxattr(
                        p.as_ptr(),
                        n.as_ptr(),
                        value.as_ptr().cast(),
                        value.len(),
                        flags,
                    )
                } else {
                    libc::lsetxattr(
                        p.as_ptr(),
                        n.as_ptr(),
                        value.as_ptr().cast(),
                        value.len(),
                        flags,
                    )
                }
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(last_error())
            }
        })
    }

    pub(super) fn removexattr(&self, node: NodeNo, name: &OsStr) -> io::Result<()> {
        let n = cstr(name)?;
        self.xattr_path(node, |p, follow| {
            // SAFETY: NUL-terminated strings.
            let rc = unsafe {
                if follow {
                    libc::removexattr(p.as_ptr(), n.as_ptr())
                } else {
                    libc::lremovexattr(p.as_ptr(), n.as_ptr())
                }
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(last_error())
            }
        })
    }

    pub(super) fn statfs(&self, node: NodeNo) -> io::Result<FsStat> {
        let (fd, _) = self.fd(node)?;
        let st = rustix::fs::fstatvfs(fd.as_fd()).map_err(errno)?;
        Ok(FsStat {
            blocks: st.f_blocks,
            bfree: st.f_bfree,
            bavail: st.f_bavail,
            files: st.f_files,
            ffree: st.f_ffree,
            bsize: u32::try_from(st.f_bsize).unwrap_or(4096),
            namelen: u32::try_from(st.f_namemax).unwrap_or(255),
            frsize: u32::try_from(st.f_frsize).unwrap_or(4096),
        })
    }

    /// `access(2)` as the daemon's own user may do it (the kernel checks other users'
    /// permission bits itself, see `default_permissions`): execute needs an execute bit.
    pub(super) fn access(&self, node: NodeNo, mask: i32) -> io::Result<()> {
        let st = self.stat(node)?;
        if mask & libc::X_OK != 0 && st.kind != Kind::Dir && st.perm & 0o111 == 0 {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let (fd, _) = self.fd(node)?;
        let path = proc_path(fd.as_fd());
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::access(path.as_ptr(), mask & (libc::R_OK | libc::W_OK | libc::X_OK)) }
            != 0
        {
            return Err(last_error());
        }
        Ok(())
    }

    /// The names from the root to `node`, each checked to still lead where the store
    /// saw it (see `Tree::path_of`).
    pub(super) fn path_of(&self, node: NodeNo) -> Option<Vec<OsString>> {
        let mut names = Vec::new();
        let mut at = node;
        let mut seen = 0;
        let inner = self.lock();
        while at != self.root {
            seen += 1;
            if seen > 4096 {
                return None;
            }
            let i = inner.by_no.get(&at)?;
            // The first name that is still this node's in the store.
            let (dir, name) = i
                .names
                .iter()
                .find(|k| inner.by_name.get(*k) == Some(&at))?
                .clone();
            names.push(name);
            at = dir;
        }
        names.reverse();
        Some(names)
    }

    pub(super) fn node_at(&self, path: &[OsString]) -> Option<NodeNo> {
        let inner = self.lock();
        let mut at = self.root;
        for name in path {
            at = *inner.by_name.get(&(at, name.clone()))?;
        }
        Some(at)
    }

    /// The first name the store saw `node` under: (directory, name).
    pub(super) fn first_name(&self, node: NodeNo) -> Option<(NodeNo, OsString)> {
        self.lock()
            .by_no
            .get(&node)
            .and_then(|i| i.names.first().cloned())
    }

    /// The node `name` in `dir` is known as, if the store holds it.
    pub(super) fn child(&self, dir: NodeNo, name: &OsStr) -> Option<NodeNo> {
        self.lock()
            .by_name
            .get(&(dir, name.to_os_string()))
            .copied()
    }

    /// A name in `dir` changed behind the mount's back: drop it if it no longer leads to
    /// the node the store knew under it; that node, if any.
    pub(super) fn refresh(&self, dir: NodeNo, name: &OsStr) -> Option<NodeNo> {
        let (known, id) = {
            let inner = self.lock();
            let known = *inner.by_name.get(&(dir, name.to_os_string()))?;
            let id = inner.by_no.get(&known).map(|i| (i.dev, i.ino));
            (known, id)
        };
        let now = self
            .dir_fd(dir)
            .ok()
            .and_then(|d| open_path(d.as_fd(), name).ok())
            .and_then(|fd| fstat(fd.as_fd()).ok())
            .map(|st| (st.st_dev, st.st_ino));
        if now != id {
            let mut inner = self.lock();
            if inner.by_name.get(&(dir, name.to_os_string())) == Some(&known) {
                inner.drop_name(dir, name);
            }
        }
        Some(known)
    }

    /// `node`'s name now holds another inode (a copy-up): the node is that file from now
    /// on, under the same number.
    pub(super) fn rehandle_to_name(&self, node: NodeNo) -> io::Result<()> {
        let (dir, name) = self
            .first_name(node)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))?;
        let dfd = self.dir_fd(dir)?;
        let fd = open_path(dfd.as_fd(), &name)?;
        let st = fstat(fd.as_fd())?;
        let mut inner = self.lock();
        let Some(i) = inner.by_no.get_mut(&node) else {
            return Err(io::Error::from_raw_os_error(libc::ESTALE));
        };
        let old = (i.dev, i.ino);
        i.fd = Arc::new(fd);
        i.dev = st.st_dev;
        i.ino = st.st_ino;
        if inner.by_id.get(&old) == Some(&node) {
            inner.by_id.remove(&old);
        }
        inner.by_id.insert((st.st_dev, st.st_ino), node);
        Ok(())
    }

    /// The handle of a directory node, for the watch.
    pub(super) fn dir_handle(&self, node: NodeNo) -> Option<Arc<OwnedFd>> {
        self.dir_fd(node).ok()
    }
}

/// Call `get` twice, as the xattr calls want: once for the size, once for the bytes
/// (again if it grew meanwhile).
fn sized(mut get: impl FnMut(*mut libc::c_void, usize) -> isize) -> io::Result<Vec<u8>> {
    for _ in 0..4 {
        let n = get(std::ptr::null_mut(), 0);
        if n < 0 {
            return Err(last_error());
        }
        let mut buf = vec![0u8; n as usize];
        if buf.is_empty() {
            return Ok(buf);
        }
        let got = get(buf.as_mut_ptr().cast(), buf.len());
        if got >= 0 {
            buf.truncate(got as usize);
            return Ok(buf);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) {
            return Err(last_error());
        }
    }
    Err(io::Error::from_raw_os_error(libc::ERANGE))
}

use super::FilesHost;
use crate::host::tree::{Kept, Tree};

impl FilesHost {
    /// A directory the kernel is shown (looked up or listed): watch it for outside changes.
    fn shown_dir(&self, node: NodeNo) {
        let segs = || {
            let names = if node == self.store.root() {
                Vec::new()
            } else {
                self.store.path_of(node)?
            };
            names
                .iter()
                .map(|n| n.to_str().map(str::to_string))
                .collect::<Option<Vec<String>>>()
        };
        self.watch
            .dir_node(node, segs, || self.store.dir_handle(node));
    }

    /// Overlay: before `node` (a file the root still shares) changes in place, copy it up
    /// and make the node that copy. A shared file with no name left in the layer (removed
    /// while open) is the root's own: never written.
    fn copy_up(&self, node: NodeNo) -> io::Result<()> {
        let Some(layer) = &self.layer else {
            return Ok(());
        };
        let (fd, kind) = self.store.fd(node)?;
        if kind != Kind::File {
            return Ok(());
        }
        let st = fstat(fd.as_fd())?;
        if !layer.is_shared(st.st_dev, st.st_ino) {
            return Ok(());
        }
        let Some((dir, name)) = self.store.first_name(node) else {
            return Err(io::Error::from_raw_os_error(libc::EROFS));
        };
        let dfd = self.store.dir_fd(dir)?;
        self.own(dir, Some(&name));
        layer.copy_up_of(dfd.as_fd(), &name, Some((st.st_dev, st.st_ino)))?;
        self.store.rehandle_to_name(node)
    }

    /// A node the mount itself changes: the watch stays quiet about it, and what the
    /// entries' side resolved before may be stale now.
    fn own(&self, dir: NodeNo, name: Option<&OsStr>) {
        self.watch.own(dir, name);
        self.watch.bump();
    }

    /// What a lookup answered: a directory is watched from then on.
    fn found(&self, found: Found) -> Found {
        if found.stat.kind == Kind::Dir {
            self.shown_dir(found.node);
        }
        found
    }
}

impl Tree for FilesHost {
    fn root(&self) -> NodeNo {
        self.store.root()
    }

    fn lookup(&self, dir: NodeNo, name: &OsStr) -> io::Result<Found> {
        self.shown_dir(dir);
        self.store.lookup(dir, name).map(|f| self.found(f))
    }

    fn exists(&self, dir: NodeNo, name: &OsStr) -> io::Result<bool> {
        self.store.exists(dir, name)
    }

    fn forget(&self, node: NodeNo, n: u64) {
        self.store.forget(node, n);
    }

    fn stat(&self, node: NodeNo) -> io::Result<Stat> {
        self.store.stat(node)
    }

    fn list(&self, dir: NodeNo) -> io::Result<Vec<DirEntry>> {
        self.shown_dir(dir);
        self.store.list(dir)
    }

    fn readlink(&self, node: NodeNo) -> io::Result<OsString> {
        self.store.readlink(node)
    }

    fn open(&self, node: NodeNo, flags: i32) -> io::Result<File> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            self.copy_up(node)?;
            if let Some((dir, name)) = self.store.first_name(node) {
                self.own(dir, Some(&name));
            }
        }
        self.store.open(node, flags)
    }

    fn create(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        creds: Creds,
    ) -> io::Result<(Found, File)> {
        self.own(dir, Some(name));
        self.store.create(dir, name, mode, flags, creds)
    }

    fn mkdir(&self, dir: NodeNo, name: &OsStr, mode: u32, creds: Creds) -> io::Result<Found> {
        self.own(dir, Some(name));
        self.store
            .mkdir(dir, name, mode, creds)
            .map(|f| self.found(f))
    }

    fn mknod(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        creds: Creds,
    ) -> io::Result<Found> {
        self.own(dir, Some(name));
        self.store.mknod(dir, name, mode, rdev, creds)
    }

    fn symlink(
        &self,
        dir: NodeNo,
        name: &OsStr,
        target: &OsStr,
        creds: Creds,
    ) -> io::Result<Found> {
        self.own(dir, Some(name));
        self.store.symlink(dir, name, target, creds)
    }

    fn link(&self, node: NodeNo, dir: NodeNo, name: &OsStr) -> io::Result<Found> {
        self.own(dir, Some(name));
        if let Some((d, n)) = self.store.first_name(node) {
            self.own(d, Some(&n));
        }
        self.store.link(node, dir, name)
    }

    fn unlink(&self, dir: NodeNo, name: &OsStr) -> io::Result<()> {
        self.own(dir, Some(name));
        self.store.unlink(dir, name, 0)
    }

    fn rmdir(&self, dir: NodeNo, name: &OsStr) -> io::Result<()> {
        self.own(dir, Some(name));
        if let Some(child) = self.store.child(dir, name) {
            self.own(child, None);
        }
        self.store.unlink(dir, name, libc::AT_REMOVEDIR)
    }

    fn rename(
        &self,
        dir: NodeNo,
        name: &OsStr,
        to_dir: NodeNo,
        to_name: &OsStr,
        mode: RenameMode,
    ) -> io::Result<()> {
        self.own(dir, Some(name));
        self.own(to_dir, Some(to_name));
        for (d, n) in [(dir, name), (to_dir, to_name)] {
            if let Some(child) = self.store.child(d, n) {
                self.own(child, None);
            }
        }
        self.store.rename(dir, name, to_dir, to_name, mode)
    }

    fn setattr(&self, node: NodeNo, set: &SetAttr, file: Option<&File>) -> io::Result<Stat> {
        self.copy_up(node)?;
        if let Some((dir, name)) = self.store.first_name(node) {
            self.own(dir, Some(&name));
        }
        self.own(node, None);
        self.store.setattr(node, set, file)
    }

    fn getxattr(&self, node: NodeNo, name: &OsStr) -> io::Result<Vec<u8>> {
        self.store.getxattr(node, name)
    }

    fn listxattr(&self, node: NodeNo) -> io::Result<Vec<u8>> {
        self.store.listxattr(node)
    }

    fn setxattr(&self, node: NodeNo, name: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
        self.copy_up(node)?;
        if let Some((dir, n)) = self.store.first_name(node) {
            self.own(dir, Some(&n));
        }
        self.own(node, None);
        self.store.setxattr(node, name, value, flags)
    }

    fn removexattr(&self, node: NodeNo, name: &OsStr) -> io::Result<()> {
        self.copy_up(node)?;
        if let Some((dir, n)) = self.store.first_name(node) {
            self.own(dir, Some(&n));
        }
        self.own(node, None);
        self.store.removexattr(node, name)
    }

    fn statfs(&self, node: NodeNo) -> io::Result<FsStat> {
        self.store.statfs(node)
    }

    fn access(&self, node: NodeNo, mask: i32, _creds: Creds) -> io::Result<()> {
        self.store.access(node, mask)
    }

    fn path_of(&self, node: NodeNo) -> Option<Vec<OsString>> {
        self.store.path_of(node)
    }

    fn node_at(&self, path: &[OsString]) -> Option<NodeNo> {
        self.store.node_at(path)
    }

    fn refresh(&self, dir: NodeNo, name: &OsStr) -> Option<NodeNo> {
        self.store.refresh(dir, name)
    }

    fn ttl(&self) -> std::time::Duration {
        crate::host::Host::cache_ttl(self)
    }

    fn unrecorded(&self, path: &[OsString]) -> bool {
        if self.unrecorded.is_empty() {
            return false;
        }
        let text: Vec<String> = path
            .iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        let text = text.join("/");
        self.unrecorded.iter().any(|g| g.matches(&text))
    }

    fn own_change(&self, node: NodeNo) {
        if let Some((dir, name)) = self.store.first_name(node) {
            self.watch.own(dir, Some(&name));
        }
        self.watch.own(node, None);
    }

    fn keeps_before(&self) -> bool {
        self.before.is_some()
    }

    fn keep_content(&self, node: NodeNo) -> io::Result<Option<Kept>> {
        let Some(store) = &self.before else {
            return Ok(None);
        };
        let (_, kind) = self.store.fd(node)?;
        if kind != Kind::File {
            return Ok(None);
        }
        let file = self.store.open(node, libc::O_RDONLY)?;
        store.keep_copy(&file).map(Some)
    }

    fn keep_named(&self, dir: NodeNo, name: &OsStr) -> io::Result<Option<Kept>> {
        let Some(store) = &self.before else {
            return Ok(None);
        };
        valid_name(name)?;
        let dfd = self.store.dir_fd(dir)?;
        store.keep_named(dfd.as_fd(), name)
    }

    fn unkeep(&self, kept: &Kept) {
        if let Some(store) = &self.before {
            store.unkeep(kept);
        }
    }

    fn kept(&self, sha256: &str) -> io::Result<File> {
        match &self.before {
            Some(store) => store.open_kept(sha256),
            None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }

    fn pin_kept(&self, shas: &[String], pin: bool) {
        if let Some(store) = &self.before {
            store.pin(shas, pin);
        }
    }

    fn intent_dir(&self) -> Option<std::path::PathBuf> {
        self.before.as_ref().map(|s| s.dir().join("intents"))
    }

    fn keep_budget(&self) -> u64 {
        self.before.as_ref().map_or(0, |s| s.budget())
    }
}
