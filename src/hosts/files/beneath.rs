//! Every access to the disk, made from a directory descriptor of the root.
//!
//! A path checked and then opened again by name can be raced: swap a checked directory with a
//! symlink to outside between the two and the open follows it. So nothing here opens a path
//! by name from `/`. Each access resolves the physical path (symlinks already resolved by the
//! walk in `resolve`) from the root's descriptor with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, or, on kernels without `openat2`, one component at a time with
//! `O_NOFOLLOW`. A symlink swapped in after the check makes the open fail (ELOOP); it is never
//! followed. What is read, listed, described or written is what the descriptor refers to.

use std::ffi::OsString;
use std::fs::{self, File, Metadata};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};

/// What `read_capped` finds: the bytes, whether there was more, and the file's metadata;
/// or, for anything but a regular file, its metadata only.
pub(super) type Capped = Result<(Vec<u8>, bool, Metadata), Metadata>;

/// The root directory, held open.
#[derive(Debug)]
pub(super) struct Beneath {
    fd: OwnedFd,
    root: PathBuf,
    /// Cleared the first time the kernel answers ENOSYS to `openat2`.
    has_openat2: AtomicBool,
}

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn outside(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is not below the root", path.display()),
    )
}

/// `openat(dir, name)` of one component, never following a symlink there.
fn open_component(dir: BorrowedFd<'_>, name: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )
    .map_err(errno)
}

/// What kind of thing a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Dir,
    File,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Unknown,
}

impl Kind {
    fn of(t: rustix::fs::FileType) -> Kind {
        use rustix::fs::FileType as T;
        match t {
            T::Directory => Kind::Dir,
            T::RegularFile => Kind::File,
            T::Symlink => Kind::Symlink,
            T::Fifo => Kind::Fifo,
            T::Socket => Kind::Socket,
            T::CharacterDevice => Kind::CharDevice,
            T::BlockDevice => Kind::BlockDevice,
            _ => Kind::Unknown,
        }
    }

    pub(super) fn is_dir(self) -> bool {
        self == Kind::Dir
    }

    pub(super) fn is_file(self) -> bool {
        self == Kind::File
    }

    pub(super) fn is_symlink(self) -> bool {
        self == Kind::Symlink
    }

    /// In words.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Dir => "directory",
            Kind::File => "file",
            Kind::Symlink => "symlink",
            Kind::Fifo => "fifo",
            Kind::Socket => "socket",
            Kind::CharDevice => "character device",
            Kind::BlockDevice => "block device",
            Kind::Unknown => "special file",
        }
    }
}

/// What one `statx` of a name in a listing tells.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stat {
    pub kind: Kind,
    pub size: u64,
}

/// `statx` of `name` in the directory `dir`, the name itself (a single component, links
/// not followed: nothing is resolved on the way). `None`: it vanished.
fn stat_at(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> Option<Stat> {
    use rustix::fs::{FileType, StatxFlags};
    let st = rustix::fs::statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::TYPE | StatxFlags::SIZE,
    )
    .ok()?;
    Some(Stat {
        kind: Kind::of(FileType::from_raw_mode(u32::from(st.stx_mode))),
        size: st.stx_size,
    })
}

/// The metadata of what `fd` refers to (an `O_PATH` descriptor works: std uses `statx`),
/// in one `statx`: the descriptor is lent to a `File` that is never dropped, not duplicated.
fn meta_of(fd: &OwnedFd) -> io::Result<Metadata> {
    use std::os::fd::FromRawFd;
    // SAFETY: the File borrows a descriptor that stays open for this call and is never
    // closed through it (ManuallyDrop).
    let file = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(fd.as_raw_fd()) });
    file.metadata()
}

impl Beneath {
    pub(super) fn open(root: &Path) -> io::Result<Beneath> {
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)?;
        Ok(Beneath {
            fd,
            root: root.to_path_buf(),
            has_openat2: AtomicBool::new(true),
        })
    }

    /// The root's descriptor.
    pub(super) fn root_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether a physical path is the root or below it (by text: the walk made it physical).
    pub(super) fn contains(&self, physical: &Path) -> bool {
        physical.starts_with(&self.root)
    }

    fn rel<'a>(&self, physical: &'a Path) -> io::Result<&'a Path> {
        let rel = physical
            .strip_prefix(&self.root)
            .map_err(|_| outside(physical))?;
        // A physical path has no `.` or `..`: refuse rather than trust one.
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(outside(physical));
        }
        Ok(rel)
    }

    /// Open `physical` (below the root) with `flags`, following no symlink on the way. With
    /// `O_PATH | O_NOFOLLOW` a symlink at the end is opened itself.
    pub(super) fn open_at(
        &self,
        physical: &Path,
        flags: OFlags,
        mode: Mode,
    ) -> io::Result<OwnedFd> {
        let rel = self.rel(physical)?;
        let flags = flags | OFlags::CLOEXEC;
        if rel.as_os_str().is_empty() {
            return rustix::fs::openat(&self.fd, ".", flags, mode).map_err(errno);
        }
        if self.has_openat2.load(Ordering::Relaxed) {
            let how =
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
            let mut tries = 0;
            loop {
                match rustix::fs::openat2(&self.fd, rel, flags, mode, how) {
                    Ok(fd) => return Ok(fd),
                    Err(rustix::io::Errno::NOSYS) => {
                        self.has_openat2.store(false, Ordering::Relaxed);
                        break;
                    }
                    // A rename elsewhere raced the lookup: the kernel asks to try again.
                    Err(rustix::io::Errno::AGAIN) if tries < 3 => tries += 1,
                    Err(e) => return Err(errno(e)),
                }
            }
        }
        // No openat2: one component at a time, each opened with O_NOFOLLOW.
        let mut parts: Vec<&Path> = rel.iter().map(Path::new).collect();
        let last = parts.pop().ok_or_else(|| outside(physical))?;
        let mut cur: Option<OwnedFd> = None;
        for part in parts {
            let dir = cur.as_ref().map_or(self.fd.as_fd(), |f| f.as_fd());
            cur = Some(open_component(dir, part, OFlags::PATH | OFlags::DIRECTORY)?);
        }
        let dir = cur.as_ref().map_or(self.fd.as_fd(), |f| f.as_fd());
        rustix::fs::openat(dir, last, flags | OFlags::NOFOLLOW, mode).map_err(errno)
    }

    /// The directory at `physical`, as a descriptor to use with `*at` calls.
    pub(super) fn dir(&self, physical: &Path) -> io::Result<OwnedFd> {
        self.open_at(physical, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
    }

    /// `lstat` of `physical`, below the root.
    pub(super) fn lstat(&self, physical: &Path) -> io::Result<Metadata> {
        let fd = self.open_at(physical, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty())?;
        meta_of(&fd)
    }

    /// `lstat` for the walk that resolves symlinks: below the root through the root's
    /// descriptor; above it (an absolute symlink target passes through `/`) by name, which
    /// only decides where a link leads; every access is then made below the root.
    pub(super) fn lstat_any(&self, path: &Path) -> io::Result<Metadata> {
        if self.contains(path) {
            self.lstat(path)
        } else {
            fs::symlink_metadata(path)
        }
    }

    /// The target of the symlink at `physical`.
    pub(super) fn read_link(&self, physical: &Path) -> io::Result<PathBuf> {
        let fd = self.open_at(physical, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty())?;
        let target = rustix::fs::readlinkat(&fd, "", Vec::new()).map_err(errno)?;
        Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
    }

    pub(super) fn read_link_any(&self, path: &Path) -> io::Result<PathBuf> {
        if self.contains(path) {
            self.read_link(path)
        } else {
            fs::read_link(path)
        }
    }

    /// `stat` of a directory or file reached without symlinks (what the walk resolved).
    pub(super) fn metadata(&self, physical: &Path) -> io::Result<Metadata> {
        self.lstat(physical)
    }

    /// The names in the directory at `physical`, with their kinds (never following links):
    /// from the directory itself (`d_type`), a `statx` only where it does not say.
    pub(super) fn read_dir(&self, physical: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        self.list(physical, |fd, name, d_type| match Kind::of(d_type) {
            Kind::Unknown => stat_at(fd, name).map(|s| s.kind),
            known => Some(known),
        })
    }

    /// The names in the directory at `physical` with what one `statx` each tells of them
    /// (of the name itself, links not followed).
    pub(super) fn read_dir_stat(&self, physical: &Path) -> io::Result<Vec<(OsString, Stat)>> {
        self.list(physical, |fd, name, _| stat_at(fd, name))
    }

    fn list<T>(
        &self,
        physical: &Path,
        mut each: impl FnMut(BorrowedFd<'_>, &std::ffi::CStr, rustix::fs::FileType) -> Option<T>,
    ) -> io::Result<Vec<(OsString, T)>> {
        let fd = self.open_at(physical, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        let dir = rustix::fs::Dir::read_from(&fd).map_err(errno)?;
        let mut out = Vec::new();
        for entry in dir {
            // An unreadable entry ends nothing: the rest are still listed.
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            // Vanished since the listing: not listed.
            let Some(v) = each(fd.as_fd(), name, entry.file_type()) else {
                continue;
            };
            out.push((OsString::from_vec(name.to_bytes().to_vec()), v));
        }
        Ok(out)
    }

    /// Open the regular file at `physical` for reading. Anything else (a FIFO, whose open
    /// would block; a device, whose open may act) is never opened: `Ok(Err(meta))`.
    pub(super) fn open_regular(
        &self,
        physical: &Path,
    ) -> io::Result<Result<(File, Metadata), Metadata>> {
        let path_fd = self.open_at(physical, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty())?;
        let meta = meta_of(&path_fd)?;
        if !meta.is_file() {
            return Ok(Err(meta));
        }
        // Reopen the very inode the O_PATH descriptor pins, by its descriptor.
        let file = File::open(format!("/proc/self/fd/{}", path_fd.as_raw_fd()))?;
        Ok(Ok((file, meta)))
    }

    /// At most `cap` bytes of the regular file at `physical`, and whether there was more.
    pub(super) fn read_capped(&self, physical: &Path, cap: u64) -> io::Result<Capped> {
        let (file, meta) = match self.open_regular(physical)? {
            Ok(found) => found,
            Err(meta) => return Ok(Err(meta)),
        };
        let mut bytes = Vec::new();
        file.take(cap + 1).read_to_end(&mut bytes)?;
        let capped = bytes.len() as u64 > cap;
        bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
        Ok(Ok((bytes, capped, meta)))
    }

    /// Whether this process may write what is at `physical` (the OS's answer).
    pub(super) fn may_write(&self, physical: &Path) -> bool {
        let Ok(fd) = self.open_at(physical, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty()) else {
            return false;
        };
        // Asked of the inode the descriptor pins (faccessat2 with AT_EMPTY_PATH is newer).
        let by_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
        rustix::fs::access(by_fd.as_str(), rustix::fs::Access::WRITE_OK).is_ok()
    }

    /// Create the directory `physical` and its missing parents, each below the root and
    /// without following links. Returns the topmost directory it made, if any.
    pub(super) fn create_dirs(&self, physical: &Path) -> io::Result<Option<PathBuf>> {
        let rel = self.rel(physical)?;
        let mut cur = self.fd.try_clone()?;
        let mut at = self.root.clone();
        let mut top = None;
        for part in rel.iter().map(Path::new) {
            at.push(part);
            let next = match open_component(cur.as_fd(), part, OFlags::PATH | OFlags::DIRECTORY) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match rustix::fs::mkdirat(&cur, part, Mode::from_raw_mode(0o777)) {
                        Ok(()) => {
                            top.get_or_insert_with(|| at.clone());
                        }
                        // Made by someone else meanwhile: fine, it is opened below.
                        Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(errno(e)),
                    }
                    open_component(cur.as_fd(), part, OFlags::PATH | OFlags::DIRECTORY)?
                }
                Err(e) => return Err(e),
            };
            cur = next;
        }
        Ok(top)
    }

    /// Replace the file at `physical` by writing `tmp_name` beside it (in the same directory,
    /// opened once) and renaming it over, so readers never see half a file. An existing
    /// file's permissions (and owner, where we may) are kept. On failure the temporary file
    /// is removed.
    pub(super) fn write_atomic(
        &self,
        physical: &Path,
        tmp_name: &str,
        bytes: &[u8],
        existing: Option<&Metadata>,
    ) -> io::Result<()> {
        let (Some(parent), Some(name)) = (physical.parent(), physical.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no parent directory",
            ));
        };
        let dir = self.dir(parent)?;
        let fd = rustix::fs::openat(
            &dir,
            tmp_name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        )
        .map_err(errno)?;
        let result = (|| {
            let mut f = File::from(fd);
            f.write_all(bytes)?;
            if let Some(m) = existing {
                // Keeping the owner needs privileges we may not have; the content matters more.
                let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
                f.set_permissions(m.permissions())?;
            }
            f.sync_all()?;
            drop(f);
            rustix::fs::renameat(&dir, tmp_name, &dir, name).map_err(errno)
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp_name, AtFlags::empty());
        }
        result
    }
}
