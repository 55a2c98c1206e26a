//! A host whose entries are a real directory tree (the files host): the POSIX operations
//! the adapters translate kernel requests into. Nodes are the host's own numbers, one per
//! backing file (device and inode), never path strings: a node stays the same file across
//! renames, and an open file renamed or unlinked keeps working.
//!
//! The world judges every change against the policy and records it as a run before or
//! after calling here; a host implements only the change itself, beneath its root and
//! without following any symlink on the way (every operation is a single name in a
//! directory the host holds open). Errors are the backend's own errno.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::time::SystemTime;

/// The names of the ops whose runs the changes through a working tree are (the files
/// host declares them; the world records them).
pub mod op {
    pub const WRITE: &str = "write";
    pub const CREATE: &str = "create";
    pub const REMOVE: &str = "remove";
    pub const RENAME: &str = "rename";
    pub const LINK: &str = "link";
    pub const MKDIR: &str = "mkdir";
    pub const RMDIR: &str = "rmdir";
    pub const SYMLINK: &str = "symlink";
    pub const MKNOD: &str = "mknod";
    pub const CHMOD: &str = "chmod";
    pub const CHOWN: &str = "chown";
    pub const TRUNCATE: &str = "truncate";
    pub const TOUCH: &str = "touch";
    pub const SETXATTR: &str = "setxattr";
    pub const REMOVEXATTR: &str = "removexattr";
    pub const FALLOCATE: &str = "fallocate";
    pub const COPY_FILE_RANGE: &str = "copy_file_range";
}

/// A node of a tree: the host's number for one backing file, stable while the kernel
/// holds it (and, for the root's device, the file's own inode number).
pub type NodeNo = u64;

/// What kind of file a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl Kind {
    /// The kind of a `st_mode`.
    pub fn of_mode(mode: u32) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDevice,
            libc::S_IFBLK => Kind::BlockDevice,
            _ => Kind::File,
        }
    }

    /// In words, for results.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Dir => "directory",
            Kind::File => "file",
            Kind::Symlink => "symlink",
            Kind::Fifo => "fifo",
            Kind::Socket => "socket",
            Kind::CharDevice => "character device",
            Kind::BlockDevice => "block device",
        }
    }
}

/// A node's attributes, as the backing file has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The number `st_ino` shows (the node's number).
    pub ino: u64,
    pub kind: Kind,
    /// Permission bits (`0o7777`).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    pub blksize: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    pub crtime: SystemTime,
}

/// One name in a directory listing (no reference to the node is taken).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: OsString,
    pub kind: Kind,
    /// The backing file's inode number (informative, as `d_ino` is).
    pub ino: u64,
}

/// Who asks for a change: new files are theirs, and a caller other than the daemon's own
/// user gets the backing file's permission bits checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Creds {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

/// A time to set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSet {
    Now,
    At(SystemTime),
}

/// What a `setattr` changes (`None`: left as it is).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
}

/// How a rename treats what is at its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenameMode {
    /// Replace it (plain `rename(2)`).
    Replace,
    /// Fail with EEXIST if it exists (`RENAME_NOREPLACE`).
    NoReplace,
    /// Swap the two (`RENAME_EXCHANGE`).
    Exchange,
}

/// `statfs` of the file system a tree lives on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FsStat {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// A node found by `lookup`, with one more reference for the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub node: NodeNo,
    pub stat: Stat,
}

/// A before-image: the content a change replaced, kept by the tree for undo, named by its
/// sha256 (content-addressed: the same bytes are kept once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    pub sha256: String,
    pub size: u64,
    /// Made for this change (not there before): `unkeep` may drop it if the change made
    /// nothing.
    pub fresh: bool,
}

/// The working tree of a host. Every method may be called from many threads at once.
pub trait Tree: Send + Sync {
    /// The root directory's node (held for the host's life: no reference to count).
    fn root(&self) -> NodeNo;

    /// `name` in directory `dir`, with one more reference (`forget` gives it back).
    fn lookup(&self, dir: NodeNo, name: &OsStr) -> io::Result<Found>;

    /// Whether `name` is in `dir`, without taking a reference.
    fn exists(&self, dir: NodeNo, name: &OsStr) -> io::Result<bool>;

    /// The kernel dropped `n` references to `node`.
    fn forget(&self, node: NodeNo, n: u64);

    fn stat(&self, node: NodeNo) -> io::Result<Stat>;

    /// The names in directory `dir`, in the order the backing file system gives them.
    fn list(&self, dir: NodeNo) -> io::Result<Vec<DirEntry>>;

    fn readlink(&self, node: NodeNo) -> io::Result<OsString>;

    /// Open the file at `node` with `flags` (`O_ACCMODE`, `O_APPEND`, `O_TRUNC`, …; never
    /// following a symlink).
    fn open(&self, node: NodeNo, flags: i32) -> io::Result<File>;

    /// Create and open the regular file `name` in `dir` (`flags` as `open(2)`'s with
    /// `O_CREAT`), owned by `creds`.
    fn create(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        creds: Creds,
    ) -> io::Result<(Found, File)>;

    fn mkdir(&self, dir: NodeNo, name: &OsStr, mode: u32, creds: Creds) -> io::Result<Found>;

    /// A FIFO, socket, device or empty regular file (`mode` holds the type).
    fn mknod(
        &self,
        dir: NodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        creds: Creds,
    ) -> io::Result<Found>;

    fn symlink(&self, dir: NodeNo, name: &OsStr, target: &OsStr, creds: Creds)
        -> io::Result<Found>;

    /// A hard link to `node` named `name` in `dir`.
    fn link(&self, node: NodeNo, dir: NodeNo, name: &OsStr) -> io::Result<Found>;

    fn unlink(&self, dir: NodeNo, name: &OsStr) -> io::Result<()>;

    fn rmdir(&self, dir: NodeNo, name: &OsStr) -> io::Result<()>;

    fn rename(
        &self,
        dir: NodeNo,
        name: &OsStr,
        to_dir: NodeNo,
        to_name: &OsStr,
        mode: RenameMode,
    ) -> io::Result<()>;

    /// Change what `set` names; through `file` when given (an open descriptor of the node:
    /// `ftruncate` needs no write permission beyond the open's).
    fn setattr(&self, node: NodeNo, set: &SetAttr, file: Option<&File>) -> io::Result<Stat>;

    fn getxattr(&self, node: NodeNo, name: &OsStr) -> io::Result<Vec<u8>>;

    /// The node's xattr names, each ended by a NUL.
    fn listxattr(&self, node: NodeNo) -> io::Result<Vec<u8>>;

    fn setxattr(&self, node: NodeNo, name: &OsStr, value: &[u8], flags: i32) -> io::Result<()>;

    fn removexattr(&self, node: NodeNo, name: &OsStr) -> io::Result<()>;

    fn statfs(&self, node: NodeNo) -> io::Result<FsStat>;

    /// Whether `creds` may `access(2)` the node with `mask` (the backing file's permission
    /// bits for a caller other than the daemon's own user; root may do all but execute a
    /// file no one may execute).
    fn access(&self, node: NodeNo, mask: i32, creds: Creds) -> io::Result<()>;

    /// The path of `node` from the root, by the names the tree last saw it under (`None`:
    /// it is no longer reached from the root). Checked against the disk: every name on
    /// the way still leads to the node recorded.
    fn path_of(&self, node: NodeNo) -> Option<Vec<OsString>>;

    /// The node at `path` if the tree holds it now (no reference taken, nothing opened):
    /// what the kernel may cache of a path an explicit op changed.
    fn node_at(&self, path: &[OsString]) -> Option<NodeNo>;

    /// `name` in `dir` changed outside the mount (the host's watch said so): the tree
    /// checks it against the disk (a name now elsewhere or gone is dropped) and answers the
    /// node it knew under it, whose attributes the kernel must ask again.
    fn refresh(&self, dir: NodeNo, name: &OsStr) -> Option<NodeNo>;

    /// How long the kernel may keep what it was told of nodes without hearing of a change
    /// (long where the host reports every change made outside the mount).
    fn ttl(&self) -> std::time::Duration;

    /// Whether changes at `path` are left out of the journal (a build's output, the
    /// manifest's `unrecorded`): still judged by the policy, never recorded.
    fn unrecorded(&self, _path: &[OsString]) -> bool {
        false
    }

    /// `node` is changing through the mount (a write through its open descriptor, which
    /// never reaches the host): the watch of outside changes does not report it back.
    fn own_change(&self, node: NodeNo);

    /// Whether this tree keeps before-images (`keep_before` above 0).
    fn keeps_before(&self) -> bool {
        false
    }

    /// Keep the content of the regular file `node` as it is now (a copy; a reflink where
    /// the file system offers one). `None`: none kept (not a regular file, or no store).
    fn keep_content(&self, _node: NodeNo) -> io::Result<Option<Kept>> {
        Ok(None)
    }

    /// Keep the content of the regular file `name` in `dir`, about to be unlinked or
    /// replaced: its inode itself where it is the name's alone and on the same file
    /// system (no copy), else a copy.
    fn keep_named(&self, _dir: NodeNo, _name: &OsStr) -> io::Result<Option<Kept>> {
        Ok(None)
    }

    /// A fresh before-image its change did not need (nothing changed).
    fn unkeep(&self, _kept: &Kept) {}

    /// A kept before-image, to read (`NotFound`: dropped by the budget, or never kept).
    fn kept(&self, _sha256: &str) -> io::Result<File> {
        Err(io::Error::from_raw_os_error(libc::ENOENT))
    }

    /// Hold kept images `shas` from the budget while a revert may need them (`false`:
    /// release them).
    fn pin_kept(&self, _shas: &[String], _pin: bool) {}

    /// Where the tree keeps what a revert must finish after a crash (its intent log).
    fn intent_dir(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// What `keep_before` allows, in bytes, for messages.
    fn keep_budget(&self) -> u64 {
        0
    }
}

/// A node's attributes from a `statx` or `stat`, with `ino` as the node shows it.
pub fn stat_of(st: &libc::stat, ino: u64) -> Stat {
    let time = |sec: i64, nsec: i64| {
        let nsec = u32::try_from(nsec.clamp(0, 999_999_999)).unwrap_or(0);
        if sec >= 0 {
            std::time::UNIX_EPOCH + std::time::Duration::new(sec as u64, nsec)
        } else {
            std::time::UNIX_EPOCH - std::time::Duration::new(sec.unsigned_abs(), 0)
                + std::time::Duration::new(0, nsec)
        }
    };
    Stat {
        ino,
        kind: Kind::of_mode(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: u32::try_from(st.st_nlink).unwrap_or(u32::MAX),
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        size: u64::try_from(st.st_size).unwrap_or(0),
        blocks: u64::try_from(st.st_blocks).unwrap_or(0),
        blksize: u32::try_from(st.st_blksize).unwrap_or(4096),
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: time(st.st_ctime, st.st_ctime_nsec),
    }
}
