//! A working tree's requests: its folders, files and links are the backing files
//! themselves (their attributes, bytes and children), read through FUSE passthrough where
//! the kernel and privileges allow. What a request means is the world's (`world::working`:
//! the policy, the runs); here it is only translated.
//!
//! Passthrough is per inode: the kernel takes one backing file per inode at a time and
//! refuses an open that is neither passthrough nor direct I/O beside it. So an inode's
//! first open registers its backing file (read-only for a reader, read-write for a
//! writer); a writer that meets a read-only backing in use, or a file the daemon cannot
//! open for writing, is served through the daemon with direct I/O, which may stand beside
//! passthrough opens. A read-only backing stays registered after the last close (see
//! `KEPT_BACKINGS`); a read-write one does not (it would hold the file open for writing).

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, Request,
};

use super::{Handle, WorldFs};
use crate::host::tree::{Kind, Stat};
use crate::world::node::{NodeId, TreeRef};
use crate::world::working::{Looked, TreeFile, Who};

/// A working-tree file open through the mount.
pub(super) struct TreeOpen {
    pub file: TreeFile,
    /// The backing file the kernel reads and writes itself, when it does: held while this
    /// open lives (the kernel wants it registered as long as some open of the inode is).
    #[allow(dead_code)]
    pub backing: Option<Arc<BackingId>>,
}

/// The errno of a working tree's error.
pub(super) fn io_errno(request: &'static str, e: &std::io::Error) -> Errno {
    let code = e.raw_os_error().unwrap_or(libc::EIO);
    tracing::trace!(request, errno = code, "{e}");
    Errno::from_i32(code)
}

pub(super) fn who(req: &Request) -> Who {
    Who {
        pid: req.pid(),
        uid: req.uid(),
        gid: req.gid(),
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDevice => FileType::CharDevice,
        Kind::BlockDevice => FileType::BlockDevice,
    }
}

impl WorldFs {
    /// A backing file's attributes, as `stat` shows them through the mount.
    pub(super) fn tree_attr(&self, ino: u64, st: &Stat) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: st.size,
            blocks: st.blocks,
            atime: st.atime,
            mtime: st.mtime,
            ctime: st.ctime,
            crtime: st.crtime,
            kind: file_type(st.kind),
            perm: st.perm,
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
            rdev: st.rdev,
            blksize: st.blksize,
            flags: 0,
        }
    }

    /// A tree node the kernel is told of (one more reference): its inode, asked to be the
    /// backing file's own number.
    pub(super) fn tree_told(&self, t: TreeRef, st: &Stat) -> (FileAttr, Duration) {
        let ino = self.inodes().remember_as(&NodeId::Tree(t), st.ino);
        (self.tree_attr(ino, st), self.world.tree_ttl(t.host))
    }

    /// The kernel did not take a reference it was offered: give it back, here and to the
    /// tree.
    pub(super) fn tree_untold(&self, t: TreeRef, ino: u64) {
        self.inodes().forget(ino, 1);
        self.world.tree_forget(t, 1);
    }

    pub(super) fn tree_lookup(
        &self,
        dir: TreeRef,
        name: &OsStr,
        req: &Request,
        reply: fuser::ReplyEntry,
    ) {
        match self.world.tree_lookup(dir, name) {
            Ok(Looked::Tree(t, st)) => {
                let (attr, ttl) = self.tree_told(t, &st);
                reply.entry(&ttl, &attr, Generation(0));
            }
            // `NAME@`: its name is never cached, so a create or remove needs no word.
            Ok(Looked::Entry(node)) => match self.attr_for(&node, req) {
                Ok(attr) => {
                    let ino = self.inodes().remember(&node);
                    reply.entry_with_ttls(
                        &Self::ttl(&attr),
                        &Duration::ZERO,
                        &self.file_attr(ino, &attr),
                        Generation(0),
                    );
                }
                Err(e) => reply.error(e),
            },
            Err(e) => reply.error(io_errno("lookup", &e)),
        }
    }

    /// The answer to a request that made a node (`mkdir`, `mknod`, `symlink`, `link`).
    pub(super) fn tree_made(
        &self,
        host: usize,
        made: std::io::Result<crate::host::tree::Found>,
        request: &'static str,
        reply: fuser::ReplyEntry,
    ) {
        match made {
            Ok(found) => {
                let t = TreeRef {
                    host,
                    node: found.node,
                };
                let (attr, ttl) = self.tree_told(t, &found.stat);
                reply.entry(&ttl, &attr, Generation(0));
            }
            Err(e) => reply.error(io_errno(request, &e)),
        }
    }

    /// The backing file for a passthrough open of `t` at `ino`: the one in use for the
    /// inode, a kept read-only one, or a new one (`register` hands it to the kernel).
    /// `None`: served through the daemon.
    pub(super) fn tree_backing(
        &self,
        ino: u64,
        t: TreeRef,
        write: bool,
        register: impl FnOnce(&std::fs::File) -> std::io::Result<BackingId>,
    ) -> Option<Arc<BackingId>> {
        if !self.passthrough.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let mut backings = self.backings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((b, writable)) = backings.live(ino) {
            // One backing file per inode while it is open: a writer that finds a
            // read-only one goes through the daemon.
            return (writable || !write).then_some(b);
        }
        if !write {
            if let Some(b) = self.inv.kept.get(&ino) {
                backings.insert(ino, &b, false);
                return Some(b);
            }
        } else {
            self.inv.kept.forget(&ino);
        }
        let file = match self.world.tree_backing(t, write) {
            Ok(f) => f,
            // A running program (ETXTBSY), or a file the daemon may only read.
            Err(e) => {
                tracing::debug!("no backing file: {e}");
                return None;
            }
        };
        match register(&file) {
            Ok(id) => {
                let id = Arc::new(id);
                backings.insert(ino, &id, write);
                if !write {
                    self.inv.kept.insert(ino, Arc::clone(&id));
                }
                Some(id)
            }
            Err(e) => {
                if e.raw_os_error() == Some(libc::EPERM) {
                    self.passthrough
                        .store(false, std::sync::atomic::Ordering::Relaxed);
                    tracing::info!("passthrough refused ({e}): files are read through the daemon");
                } else {
                    tracing::debug!("passthrough backing refused: {e}");
                }
                None
            }
        }
    }

    /// How an open the daemon serves is cached: beside passthrough (which this inode's
    /// other opens may use) only direct I/O may be; otherwise the page cache, kept across
    /// opens (outside changes drop it).
    pub(super) fn tree_flags(&self) -> FopenFlags {
        if self.passthrough.load(std::sync::atomic::Ordering::Relaxed) {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }

    /// The working-tree file open as `fh`.
    pub(super) fn tree_handle(&self, fh: FileHandle) -> Option<Arc<TreeOpen>> {
        match self.handles().get(&fh.0) {
            Some(Handle::Tree(o)) => Some(Arc::clone(o)),
            _ => None,
        }
    }

    /// The working-tree file opened as a new handle.
    pub(super) fn tree_opened(&self, open: TreeOpen) -> u64 {
        self.new_fh(Handle::Tree(Arc::new(open)))
    }
}

/// A working-tree folder's listing, reused by the requests that continue one walk.
pub(super) type TreeListing = Arc<Vec<crate::host::tree::DirEntry>>;

impl WorldFs {
    /// The listing of tree folder `dir` at `ino` for the open folder `fh`: read afresh
    /// when its walk starts (offset 0), reused while it continues (see `listing`: each
    /// open keeps its own).
    fn tree_listing(
        &self,
        ino: u64,
        dir: TreeRef,
        fh: u64,
        offset: u64,
    ) -> Result<TreeListing, Errno> {
        if offset > 0 {
            if let Some(l) = self.tree_listings.get(&(ino, fh)) {
                return Ok(l);
            }
        }
        let listing = Arc::new(
            self.world
                .tree_list(dir)
                .map_err(|e| io_errno("readdir", &e))?,
        );
        self.tree_listings.insert((ino, fh), Arc::clone(&listing));
        Ok(listing)
    }

    pub(super) fn tree_readdir(
        &self,
        ino: u64,
        dir: TreeRef,
        fh: u64,
        offset: u64,
        mut reply: fuser::ReplyDirectory,
    ) {
        let names = match self.tree_listing(ino, dir, fh, offset) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        let mut index = offset as usize;
        while index < 2 {
            let name = if index == 0 { "." } else { ".." };
            if reply.add(INodeNo(ino), (index + 1) as u64, FileType::Directory, name) {
                return reply.ok();
            }
            index += 1;
        }
        for e in names.iter().skip(index - 2) {
            // d_ino is informative only: the backing file's number (never 0).
            if reply.add(
                INodeNo(e.ino.max(1)),
                (index + 1) as u64,
                file_type(e.kind),
                &e.name,
            ) {
                break;
            }
            index += 1;
        }
        reply.ok();
    }

    /// A listing with every name's attributes: each looked up (one reference each, as a
    /// lookup would take).
    pub(super) fn tree_readdirplus(
        &self,
        ino: u64,
        dir: TreeRef,
        fh: u64,
        offset: u64,
        mut reply: fuser::ReplyDirectoryPlus,
    ) {
        let names = match self.tree_listing(ino, dir, fh, offset) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        if offset as usize >= names.len() + 2 {
            return reply.ok();
        }
        let mut index = offset as usize;
        if index < 2 {
            let st = match self.world.tree_stat(dir) {
                Ok(st) => st,
                Err(e) => return reply.error(io_errno("readdirplus", &e)),
            };
            let attr = self.tree_attr(ino, &st);
            // `.` and `..` carry no lookup reference (the kernel does not count them).
            while index < 2 {
                let name = if index == 0 { "." } else { ".." };
                if reply.add(
                    INodeNo(ino),
                    (index + 1) as u64,
                    name,
                    &Duration::ZERO,
                    &attr,
                    Generation(0),
                ) {
                    return reply.ok();
                }
                index += 1;
            }
        }
        for e in names.iter().skip(index - 2) {
            let (t, st) = match self.world.tree_lookup(dir, &e.name) {
                Ok(Looked::Tree(t, st)) => (t, st),
                // Gone since the listing, or hidden: not named.
                _ => {
                    index += 1;
                    continue;
                }
            };
            let (attr, ttl) = self.tree_told(t, &st);
            let full = reply.add(
                attr.ino,
                (index + 1) as u64,
                &e.name,
                &ttl,
                &attr,
                Generation(0),
            );
            if full {
                // The kernel did not take this one: its reference goes back.
                self.tree_untold(t, attr.ino.0);
                break;
            }
            index += 1;
        }
        reply.ok();
    }
}
