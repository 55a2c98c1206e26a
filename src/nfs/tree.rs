//! A working tree over NFS: its folders, files and links are the backing files (their
//! attributes, bytes, names as bytes), and every change is the world's (`world::working`:
//! the policy at the paths it acts on, a run per change), as through FUSE.
//!
//! NFSv3 has no open and no close: a client's WRITEs to a file are one descriptor's
//! (opened, and judged, at the first WRITE), answered UNSTABLE, and its `write` run is
//! recorded at the client's COMMIT (its `close(2)`), or when the client abandons it (see
//! `WorldNfs::sweep`). The client is the caller (`World::remote_who`).
//!
//! The server holds each tree node it handed out an id for (one reference, an `O_PATH`
//! descriptor in the files host) until it stops: NFS has no FORGET.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;

use nfsserve::context::Client;
use nfsserve::nfs::{
    fattr3, fileid3, ftype3, nfsstat3, nfstime3, sattr3, set_atime, set_gid3, set_mode3, set_mtime,
    set_size3, set_uid3, specdata3,
};
use nfsserve::vfs::{DirEntry, ReadDirResult};

use super::{time_of, Open, WorldNfs, Writing};
use crate::host::tree::{Found, Kind, RenameMode, SetAttr, Stat, TimeSet};
use crate::world::node::{NodeId, TreeRef};
use crate::world::working::{Looked, TreeFile, Who};

/// A working-tree folder's listing, paged by cookie: each name, its id and attributes.
pub(super) type TreePages = Arc<Vec<(Vec<u8>, fileid3, fattr3)>>;

/// The NFS status of a working tree's error: its errno.
pub(super) fn io_status(e: std::io::Error) -> nfsstat3 {
    super::status_of_errno(e.raw_os_error().unwrap_or(libc::EIO))
}

fn ftype(kind: Kind) -> ftype3 {
    match kind {
        Kind::Dir => ftype3::NF3DIR,
        Kind::File => ftype3::NF3REG,
        Kind::Symlink => ftype3::NF3LNK,
        Kind::Fifo => ftype3::NF3FIFO,
        Kind::Socket => ftype3::NF3SOCK,
        Kind::CharDevice => ftype3::NF3CHR,
        Kind::BlockDevice => ftype3::NF3BLK,
    }
}

fn nfs_time(t: &nfstime3) -> std::time::SystemTime {
    std::time::UNIX_EPOCH
        + std::time::Duration::new(u64::from(t.seconds), t.nseconds.min(999_999_999))
}

/// What an NFS SETATTR asks of a tree node.
fn set_attr(a: &sattr3) -> SetAttr {
    SetAttr {
        mode: match a.mode {
            set_mode3::mode(m) => Some(m),
            set_mode3::Void => None,
        },
        uid: match a.uid {
            set_uid3::uid(u) => Some(u),
            set_uid3::Void => None,
        },
        gid: match a.gid {
            set_gid3::gid(g) => Some(g),
            set_gid3::Void => None,
        },
        size: match a.size {
            set_size3::size(s) => Some(s),
            set_size3::Void => None,
        },
        atime: match a.atime {
            set_atime::SET_TO_SERVER_TIME => Some(TimeSet::Now),
            set_atime::SET_TO_CLIENT_TIME(t) => Some(TimeSet::At(nfs_time(&t))),
            set_atime::DONT_CHANGE => None,
        },
        mtime: match a.mtime {
            set_mtime::SET_TO_SERVER_TIME => Some(TimeSet::Now),
            set_mtime::SET_TO_CLIENT_TIME(t) => Some(TimeSet::At(nfs_time(&t))),
            set_mtime::DONT_CHANGE => None,
        },
    }
}

impl WorldNfs {
    /// The tree node of an id, if it is one.
    pub(super) fn tree_node(&self, id: fileid3) -> Result<Option<TreeRef>, nfsstat3> {
        Ok(match self.node(id)? {
            NodeId::Tree(t) => Some(t),
            _ => None,
        })
    }

    /// Who `client` is to the working tree: its uid, and the caller its runs record.
    pub(super) fn who(&self, client: &Client) -> Who {
        let caller = Self::caller(client);
        let session = caller.session;
        self.world.remote_who(session, client.gid, caller)
    }

    /// A backing file's attributes as NFS shows them.
    pub(super) fn tree_fattr(&self, id: fileid3, st: &Stat) -> fattr3 {
        fattr3 {
            ftype: ftype(st.kind),
            mode: u32::from(st.perm),
            nlink: st.nlink,
            uid: st.uid,
            gid: st.gid,
            size: st.size,
            used: st.blocks * 512,
            rdev: specdata3 {
                specdata1: libc::major(u64::from(st.rdev)),
                specdata2: libc::minor(u64::from(st.rdev)),
            },
            fsid: 0x0077_6970,
            fileid: id,
            atime: time_of(st.atime),
            mtime: time_of(st.mtime),
            ctime: time_of(st.ctime),
        }
    }

    /// The id of a tree node the world just handed one more reference of: the server
    /// keeps one per node it knows, so a node it knew already gives the new one back.
    pub(super) fn tree_id(&self, t: TreeRef, dirid: fileid3, name: &OsStr) -> fileid3 {
        let (id, new) = self
            .ids
            .place(NodeId::Tree(t), dirid, &name.to_string_lossy());
        if !new {
            self.world.tree_forget(t, 1);
        }
        id
    }

    /// The id and attributes of what a change just made as `name` in `dir`.
    fn made(&self, dirid: fileid3, dir: TreeRef, name: &OsStr, found: &Found) -> (fileid3, fattr3) {
        let t = TreeRef {
            host: dir.host,
            node: found.node,
        };
        let id = self.tree_id(t, dirid, name);
        (id, self.tree_fattr(id, &found.stat))
    }

    /// `name` in the tree folder `dir` (`NAME@` is its entry).
    pub(super) fn tree_lookup(
        &self,
        dirid: fileid3,
        dir: TreeRef,
        name: &[u8],
    ) -> Result<fileid3, nfsstat3> {
        let name = OsStr::from_bytes(name);
        match self.world.tree_lookup(dir, name).map_err(io_status)? {
            Looked::Tree(t, _) => Ok(self.tree_id(t, dirid, name)),
            Looked::Entry(node) => Ok(self.ids.id(node, dirid, &name.to_string_lossy())),
        }
    }

    pub(super) fn tree_getattr(&self, id: fileid3, t: TreeRef) -> Result<fattr3, nfsstat3> {
        let st = self.world.tree_stat(t).map_err(io_status)?;
        Ok(self.tree_fattr(id, &st))
    }

    pub(super) fn tree_read(
        &self,
        t: TreeRef,
        offset: u64,
        count: u32,
        who: Who,
    ) -> Result<(Vec<u8>, bool), nfsstat3> {
        // NFS has no open to check: every READ is judged by the file's own bits for the
        // client's uid (a client need not ask ACCESS first).
        self.world
            .tree_access(t, libc::R_OK, who)
            .map_err(io_status)?;
        let f = self
            .world
            .tree_open(t, libc::O_RDONLY, who)
            .map_err(io_status)?;
        let bytes = f
            .ensure_open(&self.world)
            .and_then(|()| self.world.tree_read(&f, offset, count));
        self.world.tree_release(&f);
        let bytes = bytes.map_err(io_status)?;
        let size = self.world.tree_stat(t).map_err(io_status)?.size;
        let eof = offset + bytes.len() as u64 >= size;
        Ok((bytes, eof))
    }

    /// A page of the tree folder `dir`: after the entry whose id is `after` (0: the first).
    /// A first page lists the folder (one lookup per name); the pages that follow are
    /// served from that listing while it is recent (`LISTING_KEPT`), so a large folder
    /// costs one pass, not one per page.
    pub(super) fn tree_readdir(
        &self,
        dirid: fileid3,
        dir: TreeRef,
        after: fileid3,
        max: usize,
    ) -> Result<ReadDirResult, nfsstat3> {
        let kept = match after {
            0 => None,
            _ => self.tree_pages.get(&dirid),
        };
        let listing = match kept {
            Some(l) => l,
            None => {
                let mut made = Vec::new();
                for n in self.world.tree_list(dir).map_err(io_status)? {
                    // A name gone since the listing is left out.
                    let Ok(Looked::Tree(t, st)) = self.world.tree_lookup(dir, &n.name) else {
                        continue;
                    };
                    let id = self.tree_id(t, dirid, &n.name);
                    made.push((n.name.into_vec(), id, self.tree_fattr(id, &st)));
                }
                let made = Arc::new(made);
                self.tree_pages.insert(dirid, Arc::clone(&made));
                made
            }
        };
        // A cookie is the id of the last entry the client saw (ids are stable, so a page
        // boundary survives a new listing).
        let from = match after {
            0 => 0,
            after => match listing.iter().position(|(_, id, _)| *id == after) {
                Some(p) => p + 1,
                None => return Err(nfsstat3::NFS3ERR_BAD_COOKIE),
            },
        };
        let entries: Vec<DirEntry> = listing
            .iter()
            .skip(from)
            .take(max)
            .map(|(name, id, attr)| DirEntry {
                fileid: *id,
                name: name.clone().into(),
                attr: *attr,
            })
            .collect();
        let end = from + entries.len() >= listing.len();
        Ok(ReadDirResult { entries, end })
    }

    /// The descriptor `client` writes `t` through, opened (and judged) at its first WRITE.
    pub(super) fn tree_document(
        &self,
        client: &Client,
        id: fileid3,
        t: TreeRef,
    ) -> Result<Arc<TreeFile>, nfsstat3> {
        let key = (client.addr.clone(), id);
        if let Some(o) = self.lock_writing().get_mut(&key) {
            o.deadline = std::time::Instant::now() + super::abandon_after();
            if let Writing::Tree(f) = &o.w {
                return Ok(Arc::clone(f));
            }
            return Err(nfsstat3::NFS3ERR_IO);
        }
        self.sweep();
        let who = self.who(client);
        self.world
            .tree_access(t, libc::W_OK, who)
            .map_err(io_status)?;
        let f = Arc::new(
            self.world
                .tree_open(t, libc::O_WRONLY, who)
                .map_err(io_status)?,
        );
        self.lock_writing().insert(
            key,
            Open {
                w: Writing::Tree(Arc::clone(&f)),
                deadline: std::time::Instant::now() + super::abandon_after(),
            },
        );
        Ok(f)
    }

    pub(super) fn tree_write(
        &self,
        client: &Client,
        id: fileid3,
        t: TreeRef,
        offset: u64,
        data: &[u8],
    ) -> Result<fattr3, nfsstat3> {
        let f = self.tree_document(client, id, t)?;
        let mut done = 0;
        while done < data.len() {
            let n = self
                .world
                .tree_write(&f, offset + done as u64, &data[done..])
                .map_err(io_status)?;
            if n == 0 {
                return Err(nfsstat3::NFS3ERR_IO);
            }
            done += n as usize;
        }
        self.tree_getattr(id, t)
    }

    pub(super) fn tree_setattr(
        &self,
        client: &Client,
        id: fileid3,
        t: TreeRef,
        attr: &sattr3,
    ) -> Result<fattr3, nfsstat3> {
        let set = set_attr(attr);
        if set != SetAttr::default() {
            let st = self
                .world
                .tree_setattr(t, &set, None, self.who(client))
                .map_err(io_status)?;
            return Ok(self.tree_fattr(id, &st));
        }
        self.tree_getattr(id, t)
    }

    pub(super) fn tree_create(
        &self,
        client: &Client,
        dirid: fileid3,
        dir: TreeRef,
        name: &[u8],
        attr: &sattr3,
        exclusive: bool,
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        let name = OsStr::from_bytes(name);
        let who = self.who(client);
        let mode = match attr.mode {
            set_mode3::mode(m) => m & 0o7777,
            set_mode3::Void => 0o644,
        };
        let mut flags = libc::O_CREAT | libc::O_WRONLY;
        if exclusive {
            flags |= libc::O_EXCL;
        }
        let (id, mut st) = match self.world.tree_create(dir, name, mode, flags, who) {
            Ok((found, f)) => {
                self.world.tree_release(&f);
                (self.made(dirid, dir, name, &found).0, found.stat)
            }
            // UNCHECKED: an existing file is opened as it is (and truncated if asked).
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && !exclusive => {
                let id = self.tree_lookup(dirid, dir, name.as_bytes())?;
                let t = self.tree_node(id)?.ok_or(nfsstat3::NFS3ERR_EXIST)?;
                (id, self.world.tree_stat(t).map_err(io_status)?)
            }
            Err(e) => return Err(io_status(e)),
        };
        // What else the client asked of the file (the mode was the create's own).
        let rest = set_attr(&sattr3 {
            mode: set_mode3::Void,
            ..*attr
        });
        if rest != SetAttr::default() {
            if let Some(t) = self.tree_node(id)? {
                st = self
                    .world
                    .tree_setattr(t, &rest, None, who)
                    .map_err(io_status)?;
            }
        }
        Ok((id, self.tree_fattr(id, &st)))
    }

    pub(super) fn tree_mkdir(
        &self,
        client: &Client,
        dirid: fileid3,
        dir: TreeRef,
        name: &[u8],
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        let name = OsStr::from_bytes(name);
        let found = self
            .world
            .tree_mkdir(dir, name, 0o755, self.who(client))
            .map_err(io_status)?;
        Ok(self.made(dirid, dir, name, &found))
    }

    pub(super) fn tree_symlink(
        &self,
        client: &Client,
        dirid: fileid3,
        dir: TreeRef,
        name: &[u8],
        target: &[u8],
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        let name = OsStr::from_bytes(name);
        let found = self
            .world
            .tree_symlink(dir, name, OsStr::from_bytes(target), self.who(client))
            .map_err(io_status)?;
        Ok(self.made(dirid, dir, name, &found))
    }

    /// REMOVE and RMDIR (the server sends both here): a folder is removed as one.
    pub(super) fn tree_remove(
        &self,
        client: &Client,
        dir: TreeRef,
        name: &[u8],
    ) -> Result<(), nfsstat3> {
        let name = OsStr::from_bytes(name);
        let who = self.who(client);
        let is_dir = match self.world.tree_lookup(dir, name).map_err(io_status)? {
            Looked::Tree(t, st) => {
                self.world.tree_forget(t, 1);
                st.kind == Kind::Dir
            }
            Looked::Entry(_) => return Err(nfsstat3::NFS3ERR_ACCES),
        };
        if is_dir {
            self.world.tree_rmdir(dir, name, who)
        } else {
            self.world.tree_unlink(dir, name, who)
        }
        .map_err(io_status)
    }

    pub(super) fn tree_rename(
        &self,
        client: &Client,
        from: (TreeRef, &[u8]),
        to: (TreeRef, &[u8]),
    ) -> Result<(), nfsstat3> {
        self.world
            .tree_rename(
                from.0,
                OsStr::from_bytes(from.1),
                to.0,
                OsStr::from_bytes(to.1),
                RenameMode::Replace,
                self.who(client),
            )
            .map_err(io_status)
    }

    pub(super) fn tree_readlink(&self, t: TreeRef) -> Result<Vec<u8>, nfsstat3> {
        self.world
            .tree_readlink(t)
            .map(OsString::into_vec)
            .map_err(io_status)
    }
}
