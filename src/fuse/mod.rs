//! The fuser adapter: inodes, attributes, open files and kernel cache invalidation. It
//! knows the world model (`NodeId`, `World`, `CallDoc`), never a backend, and no call
//! semantics: what is written into `call` goes to the world's `CallDoc`, which answers
//! through a callback; replies travel into it, so no FUSE thread waits for a call.
//!
//! Caching: stable nodes get long TTLs, kept page and directory caches, and explicit
//! invalidation when a call reports a change; volatile files (`guard`, `result`, `call`)
//! use direct I/O so every reader sees the present (and their own session's) content.
//! Every open renders a file once and serves reads by offset from that snapshot.

pub mod fusermount;
pub mod holders;
pub mod inodes;
mod tree;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime};

use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, Notifier, OpenAccMode, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite,
    Request, Session, SessionACL, WriteFlags,
};

use crate::host::names;
use crate::host::Caller;
// fuser's `Session` is the kernel connection; this one is a caller's terminal session.
use crate::cache::TtlCache;
use crate::host::Session as CallerSession;
use crate::world::error::WorldError;
use crate::world::node::{Caching, EntryRef, NodeAttr, NodeId, NodeKind, OpFile};
use crate::world::{BodyDoc, CallDoc, Snapshot, World};
use inodes::{Inodes, ROOT_INO};

/// A stable node cached at least this long also keeps its page and directory caches
/// across opens (its host reports every change, and we invalidate).
const KEEP_CACHE_MIN_TTL: Duration = crate::world::REPORTED_TTL;
/// `st_blksize` of `call`: bash's builtins buffer by it, so a large payload arrives in
/// few writes rather than hundreds of 512-byte ones.
const CALL_BLKSIZE: u32 = 1 << 20;
const MAX_WRITE: u32 = 1 << 20;
/// How long a listing is reused by `readdir` calls continuing one walk (offset > 0).
const LISTING_REUSE: Duration = Duration::from_secs(5);

/// How many bodies' backing files stay registered after their last close, so that the
/// next open of the same body (a second `grep -r`, `cat` again) costs neither an open of
/// the file nor its registration. Each is a file the kernel keeps open for us (not one of
/// the daemon's descriptors).
const KEPT_BACKINGS: usize = 16_384;
/// And for how long at most: a change the host reports drops a body's at once (see
/// `Invalidator::invalidate`); this bounds what a change it could not report shows, as
/// the attributes' lifetime does.
const KEPT_BACKING_TTL: Duration = crate::world::REPORTED_TTL;

/// How long a request thread waits for the names it dropped to be gone from the kernel's
/// cache before it answers anyway (see `Invalidator::invalidate`).
const NAMES_DROPPED_WAIT: Duration = Duration::from_millis(100);

/// Names to drop from the kernel's cache (parent inode, name), and who waits for it.
type NameDrop = (
    Vec<(u64, std::ffi::OsString)>,
    std::sync::mpsc::SyncSender<()>,
);

/// Shared by the file system and the world's change sink.
#[derive(Clone)]
pub struct Invalidator {
    inodes: Arc<Mutex<Inodes>>,
    notifier: Arc<OnceLock<Notifier>>,
    /// The thread that drops names (`inval_entry`), which takes the parent directory's
    /// lock: a lookup in that directory holds it while it waits for this daemon's answer,
    /// so a request thread dropping names itself could wait for a lookup that waits for
    /// it, and with every thread so caught the mount hangs (and no signal ends it).
    names: Arc<OnceLock<Mutex<std::sync::mpsc::Sender<NameDrop>>>>,
    /// Backing files of bodies kept registered after their last close, by inode.
    kept: Arc<TtlCache<u64, Arc<BackingId>>>,
}

impl Default for Invalidator {
    fn default() -> Self {
        Invalidator {
            inodes: Arc::default(),
            notifier: Arc::default(),
            names: Arc::default(),
            kept: Arc::new(TtlCache::new(KEPT_BACKING_TTL, KEPT_BACKINGS)),
        }
    }
}

impl Invalidator {
    /// Tell the kernel to drop what it cached of these nodes (attributes, pages, listings)
    /// and the names of entries that appeared, went or were replaced (`EntryName`): one
    /// removed or replaced is looked up again.
    pub fn invalidate(&self, nodes: &[NodeId]) {
        let Some(notifier) = self.notifier.get() else {
            return;
        };
        let (inos, names): (Vec<u64>, Vec<(u64, std::ffi::OsString)>) = match self.inodes.lock() {
            Ok(t) => (
                nodes
                    .iter()
                    .filter_map(|n| {
                        let ino = t.known(n)?;
                        // A changed file may be another file now: its next open opens it.
                        if matches!(n, NodeId::Body(_) | NodeId::Tree(_)) {
                            self.kept.forget(&ino);
                        }
                        Some(ino)
                    })
                    .collect(),
                nodes
                    .iter()
                    .filter_map(|n| match n {
                        NodeId::EntryName(e) => {
                            let (last, parent) = e.path.split_last()?;
                            let parent = NodeId::Entry(EntryRef::new(e.host, parent));
                            Some((t.known(&parent)?, names::escape(last).into()))
                        }
                        NodeId::TreeName(dir, name) => {
                            Some((t.known(&NodeId::Tree(*dir))?, name.clone()))
                        }
                        _ => None,
                    })
                    .collect(),
            ),
            Err(_) => return,
        };
        for ino in inos {
            // ENOENT means the kernel already forgot it: nothing to drop.
            if let Err(e) = notifier.inval_inode(INodeNo(ino), 0, 0) {
                tracing::trace!(ino, "inval_inode: {e}");
            }
        }
        if names.is_empty() {
            return;
        }
        let Some(Ok(tx)) = self.names.get().map(Mutex::lock) else {
            return;
        };
        let (done_tx, done) = std::sync::mpsc::sync_channel(1);
        if tx.send((names, done_tx)).is_ok() {
            drop(tx);
            // Usually done at once, so what the caller does next sees the change; when a
            // lookup holds the directory, answering it comes first.
            let _ = done.recv_timeout(NAMES_DROPPED_WAIT);
        }
    }

    pub fn set_notifier(&self, notifier: Notifier) {
        let (tx, rx) = std::sync::mpsc::channel::<NameDrop>();
        let names = notifier.clone();
        let spawned = std::thread::Builder::new()
            .name("fuse-names".into())
            .spawn(move || {
                for (drops, done) in rx {
                    for (parent, name) in drops {
                        if let Err(e) = names.inval_entry(INodeNo(parent), &name) {
                            tracing::trace!(parent, ?name, "inval_entry: {e}");
                        }
                    }
                    let _ = done.try_send(());
                }
            });
        match spawned {
            Ok(_) => {
                let _ = self.names.set(Mutex::new(tx));
            }
            Err(e) => tracing::warn!("no thread to drop changed names with ({e}): they expire"),
        }
        let _ = self.notifier.set(notifier);
    }
}

/// The world tells its changes to the invalidator it was made with.
impl crate::world::Subscriber for Invalidator {
    fn changed(&self, nodes: &[NodeId]) {
        self.invalidate(nodes);
    }

    fn held(&self) -> usize {
        self.inodes.lock().map(|t| t.len()).unwrap_or(0)
    }
}

enum Handle {
    /// A `call` opened for writing: its document.
    Call {
        doc: CallDoc,
        ino: u64,
        opened: holders::Opened,
    },
    /// A `body` opened for writing: the new content, run at the last close.
    Body {
        doc: BodyDoc,
        ino: u64,
        opened: holders::Opened,
    },
    File {
        node: NodeId,
        session: CallerSession,
        /// Rendered at the first read (and again when read from the start).
        snapshot: Option<Snapshot>,
        live: bool,
    },
    /// A working tree's file (`world::working`), read and written by the kernel itself
    /// where passthrough serves it: its backing id lives as long as some open of the inode
    /// does.
    Tree(Arc<tree::TreeOpen>),
}

/// Backing files of the working trees' files open through passthrough, one per inode
/// while it is open (the kernel wants the same backing file for every open of an inode),
/// with whether it was opened for writing.
#[derive(Default)]
struct Backings {
    by_ino: HashMap<u64, (std::sync::Weak<BackingId>, bool)>,
    /// The size at which gone entries are swept out next: kept backing files keep theirs
    /// alive, so a sweep at every registration would walk thousands of them each time.
    sweep_at: usize,
}

impl Backings {
    fn insert(&mut self, ino: u64, id: &Arc<BackingId>, writable: bool) {
        if self.by_ino.len() >= self.sweep_at {
            self.by_ino.retain(|_, (w, _)| w.strong_count() > 0);
            self.sweep_at = (self.by_ino.len() * 2).max(64);
        }
        self.by_ino.insert(ino, (Arc::downgrade(id), writable));
    }

    /// The backing file an open of `ino` uses now, and whether it may be written.
    fn live(&self, ino: u64) -> Option<(Arc<BackingId>, bool)> {
        let (w, writable) = self.by_ino.get(&ino)?;
        Some((w.upgrade()?, *writable))
    }
}

/// A directory's listing, reused by the `readdir` calls that continue one walk.
type Listing = Arc<Vec<(String, NodeId)>>;

pub struct WorldFs {
    world: Arc<World>,
    /// Passthrough was granted at `init`, and no backing open has been refused since.
    passthrough: std::sync::atomic::AtomicBool,
    backings: Mutex<Backings>,
    inv: Invalidator,
    handles: Mutex<HashMap<u64, Handle>>,
    /// Listings being paged through, by folder and open (see `listing`).
    listings: TtlCache<(u64, u64), Listing>,
    tree_listings: TtlCache<(u64, u64), tree::TreeListing>,
    next_fh: AtomicU64,
    uid: u32,
    gid: u32,
    start: SystemTime,
    /// Where the mount is and its id, for the last-close check (`holders`).
    mount: PathBuf,
    mnt_id: OnceLock<Option<u64>>,
}

/// The errno a failed request answers, logged once here with its words and their causes,
/// as mountpoint-s3's `fuse_error!` does, at its kind's level (`ErrorKind::level`).
fn errno(request: &'static str, e: &WorldError) -> Errno {
    let code = e.errno();
    if e.kind.level() == tracing::Level::WARN {
        tracing::warn!(request, errno = code, "{}", e.chain());
    } else {
        tracing::debug!(request, errno = code, "{}", e.chain());
    }
    Errno::from_i32(code)
}

/// A request refused for a reason of the mount itself (no such kernel op here), logged
/// like `errno`'s.
fn refused(request: &'static str, code: Errno) -> Errno {
    tracing::debug!(request, errno = ?code, "refused");
    code
}

impl WorldFs {
    /// The file system of `world`, which tells its changes to `inv` (the invalidator it
    /// was made with).
    pub fn new(world: Arc<World>, inv: Invalidator) -> WorldFs {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mount = world.mount_point().to_path_buf();
        WorldFs {
            world,
            passthrough: std::sync::atomic::AtomicBool::new(false),
            backings: Mutex::new(Backings::default()),
            inv,
            handles: Mutex::new(HashMap::new()),
            listings: TtlCache::new(LISTING_REUSE, 256),
            tree_listings: TtlCache::new(LISTING_REUSE, 256),
            next_fh: AtomicU64::new(1),
            uid,
            gid,
            start: SystemTime::now(),
            mount,
            mnt_id: OnceLock::new(),
        }
    }

    fn inodes(&self) -> MutexGuard<'_, Inodes> {
        // A panic while holding the lock leaves a consistent table (no partial updates).
        self.inv.inodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handles(&self) -> MutexGuard<'_, HashMap<u64, Handle>> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn node(&self, ino: INodeNo) -> Result<Arc<NodeId>, Errno> {
        self.inodes()
            .node(ino.0)
            .ok_or_else(|| refused("node", Errno::ENOENT))
    }

    fn session_of(req: &Request) -> CallerSession {
        crate::proc::session(req.pid(), req.uid())
    }

    fn file_attr(&self, ino: u64, a: &NodeAttr) -> FileAttr {
        let kind = match a.kind {
            NodeKind::Dir => FileType::Directory,
            NodeKind::File => FileType::RegularFile,
            NodeKind::Symlink => FileType::Symlink,
        };
        let (perm, nlink) = a.perm_and_links();
        FileAttr {
            ino: INodeNo(ino),
            size: a.size,
            blocks: a.size.div_ceil(512),
            atime: a.modified.unwrap_or(self.start),
            mtime: a.modified.unwrap_or(self.start),
            // Nothing changes a node's attributes but a change of the node itself.
            ctime: a.modified.unwrap_or(self.start),
            crtime: self.start,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: if a.writable { CALL_BLKSIZE } else { 4096 },
            flags: 0,
        }
    }

    /// Attributes as the requesting process sees them (a `result` is its session's).
    fn attr_for(&self, node: &NodeId, req: &Request) -> Result<NodeAttr, Errno> {
        let session = if matches!(node, NodeId::OpFile(_, _, OpFile::Result)) {
            Self::session_of(req)
        } else {
            CallerSession::NONE
        };
        self.world
            .attr(node, session)
            .map_err(|e| errno("attr_for", &e))
    }

    fn ttl(a: &NodeAttr) -> Duration {
        a.caching.ttl()
    }

    fn keeps_cache(caching: Caching) -> bool {
        matches!(caching, Caching::Stable(ttl) if ttl >= KEEP_CACHE_MIN_TTL)
    }

    fn new_fh(&self, h: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles().insert(fh, h);
        fh
    }

    /// The working-tree folder at `ino`, if it is one.
    fn tree_dir(&self, ino: INodeNo) -> Option<crate::world::node::TreeRef> {
        match self.node(ino).ok().as_deref() {
            Some(NodeId::Tree(t)) => Some(*t),
            _ => None,
        }
    }

    fn call_doc(&self, fh: FileHandle) -> Option<(CallDoc, u64, holders::Opened)> {
        match self.handles().get(&fh.0) {
            Some(Handle::Call { doc, ino, opened }) => Some((doc.clone(), *ino, *opened)),
            _ => None,
        }
    }

    fn body_doc(&self, fh: FileHandle) -> Option<(BodyDoc, u64, holders::Opened)> {
        match self.handles().get(&fh.0) {
            Some(Handle::Body { doc, ino, opened }) => Some((doc.clone(), *ino, *opened)),
            _ => None,
        }
    }

    /// Whether no related process holds another copy of the descriptor (see `holders`).
    fn last_close(&self, pid: u32, ino: u64, opened: holders::Opened) -> bool {
        let mnt_id = *self.mnt_id.get_or_init(|| holders::mount_id(&self.mount));
        !holders::still_open(pid, opened, ino, &self.mount, mnt_id)
    }

    /// The listing of directory `ino` for the open folder `fh`: computed afresh when its
    /// walk starts (offset 0) and reused while it continues, so a long listing is not
    /// recomputed per 4 KiB of replies. Each open pages through its own (sharing one per
    /// folder, a walk went on in another's and skipped or repeated names while the folder
    /// changed).
    fn listing(&self, ino: INodeNo, fh: u64, offset: u64) -> Result<Listing, Errno> {
        if offset > 0 {
            if let Some(l) = self.listings.get(&(ino.0, fh)) {
                return Ok(l);
            }
        }
        let node = self.node(ino)?;
        let listing: Listing = Arc::new(self.world.list(&node).map_err(|e| errno("listing", &e))?);
        self.listings.insert((ino.0, fh), Arc::clone(&listing));
        Ok(listing)
    }

    /// Serve a read of an open file from its snapshot (rendered now if needed).
    fn read_file(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let (node, session, snapshot, live) = match self.handles().get(&fh) {
            Some(Handle::File {
                node,
                session,
                snapshot,
                live,
            }) => (node.clone(), *session, snapshot.clone(), *live),
            _ => return Err(refused("read_file", Errno::EBADF)),
        };
        let fresh = match &snapshot {
            // A live file read from the start again (a reload) is rendered again.
            Some(_) if live && offset == 0 => Some(self.world.snapshot(&node, session)),
            Some(s) if live && offset >= s.bytes.len() as u64 => {
                // Past the end of an append-only file (`tail -f`): what came since.
                self.world.extend(s).transpose()
            }
            Some(_) => None,
            None => Some(self.world.snapshot(&node, session)),
        };
        let snap = match fresh {
            Some(r) => {
                let s = r.map_err(|e| errno("read_file", &e))?;
                if let Some(Handle::File { snapshot, .. }) = self.handles().get_mut(&fh) {
                    *snapshot = Some(s.clone());
                }
                s
            }
            None => snapshot.ok_or_else(|| refused("read_file", Errno::EBADF))?,
        };
        self.world
            .read_at(&node, &snap, offset, size)
            .map_err(|e| errno("read_file", &e))
    }
}

impl Filesystem for WorldFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // A working tree's file served through the daemon beside passthrough opens of the
        // same inode is direct I/O: mmap of it must still work (git, linkers, SQLite).
        let wanted = InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_CACHE_SYMLINKS
            | InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP;
        let supported = config.capabilities() & wanted;
        if let Err(missing) = config.add_capabilities(supported) {
            tracing::debug!("capabilities not granted: {missing:?}");
        }
        // A working tree's files are read and written by the kernel itself (6.9+,
        // CAP_SYS_ADMIN to register a backing file; without it the first open falls back
        // for good). Depth 2: the backing file may sit on an overlay, nothing stacks on
        // this mount.
        if config.capabilities().contains(InitFlags::FUSE_PASSTHROUGH)
            && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
            && config.set_max_stack_depth(2).is_ok()
        {
            self.passthrough.store(true, Ordering::Relaxed);
        }
        if let Err(nearest) = config.set_max_write(MAX_WRITE) {
            let _ = config.set_max_write(nearest);
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let parent_node = match self.node(parent) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        if let NodeId::Tree(dir) = &*parent_node {
            return self.tree_lookup(*dir, name, req, reply);
        }
        let result = (|| {
            let parent = parent_node;
            let name = name
                .to_str()
                .ok_or_else(|| refused("lookup", Errno::ENOENT))?;
            let node = self
                .world
                .lookup(&parent, name)
                .map_err(|e| errno("lookup", &e))?;
            if let NodeId::Tree(t) = &node {
                let st = self
                    .world
                    .tree_stat(*t)
                    .map_err(|e| tree::io_errno("lookup", &e))?;
                return Ok(Err(self.tree_told(*t, &st)));
            }
            let attr = self.attr_for(&node, req)?;
            let mut table = self.inodes();
            let ino = if attr.writable {
                table.remember_writable(&node, req.pid())
            } else {
                table.remember(&node)
            };
            Ok::<_, Errno>(Ok((ino, attr)))
        })();
        match result {
            Ok(Ok((ino, attr))) => reply.entry(
                &Self::ttl(&attr),
                &self.file_attr(ino, &attr),
                Generation(0),
            ),
            Ok(Err((attr, ttl))) => reply.entry(&ttl, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut table = self.inodes();
        let tree = match table.node(ino.0).as_deref() {
            Some(NodeId::Tree(t)) => Some(*t),
            _ => None,
        };
        table.forget(ino.0, nlookup);
        if table.node(ino.0).is_none() {
            // Never asked for again: its backing file need not stay registered.
            self.inv.kept.forget(&ino.0);
        }
        let shrunk = table.shrink_if_mostly_free();
        drop(table);
        // The tree counts the kernel's references as this table does.
        if let Some(t) = tree {
            self.world.tree_forget(t, nlookup);
        }
        if shrunk {
            // SAFETY: malloc_trim only returns free heap pages to the system.
            unsafe { libc::malloc_trim(0) };
        }
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            return match self.world.tree_stat(*t) {
                Ok(st) => reply.attr(&self.world.tree_ttl(t.host), &self.tree_attr(ino.0, &st)),
                Err(e) => reply.error(tree::io_errno("getattr", &e)),
            };
        }
        let result = self.node(ino).and_then(|node| {
            let mut attr = self.attr_for(&node, req)?;
            // A body being written is as long as what its writer wrote so far.
            if let Some((doc, _, _)) = fh.and_then(|fh| self.body_doc(fh)) {
                attr.size = doc.size();
            }
            Ok(attr)
        });
        match result {
            Ok(attr) => reply.attr(&Self::ttl(&attr), &self.file_attr(ino.0, &attr)),
            Err(e) => reply.error(e),
        }
    }

    /// Only a body's size changes here (through its open descriptor). A mode, owner or
    /// time that would differ is EPERM: it cannot take effect (one that is already so
    /// succeeds, as `cp -p` and editors expect).
    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<fuser::TimeOrNow>,
        mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            let time = |t: Option<fuser::TimeOrNow>| {
                t.map(|t| match t {
                    fuser::TimeOrNow::Now => crate::host::tree::TimeSet::Now,
                    fuser::TimeOrNow::SpecificTime(at) => crate::host::tree::TimeSet::At(at),
                })
            };
            let set = crate::host::tree::SetAttr {
                mode,
                uid,
                gid,
                size,
                atime: time(atime),
                mtime: time(mtime),
            };
            let open = fh.and_then(|fh| self.tree_handle(fh));
            return match self.world.tree_setattr(
                *t,
                &set,
                open.as_ref().map(|o| &o.file),
                tree::who(req),
            ) {
                Ok(st) => reply.attr(&self.world.tree_ttl(t.host), &self.tree_attr(ino.0, &st)),
                Err(e) => reply.error(tree::io_errno("setattr", &e)),
            };
        }
        let result = self.node(ino).and_then(|node| {
            let attr = self.attr_for(&node, req)?;
            let shown = self.file_attr(ino.0, &attr);
            let same_time = |t: Option<fuser::TimeOrNow>| match t {
                None => true,
                Some(fuser::TimeOrNow::SpecificTime(t)) => t == shown.mtime,
                Some(fuser::TimeOrNow::Now) => false,
            };
            if mode.is_some_and(|m| m & 0o7777 != u32::from(shown.perm))
                || uid.is_some_and(|u| u != shown.uid)
                || gid.is_some_and(|g| g != shown.gid)
                || !same_time(atime)
                || !same_time(mtime)
            {
                return Err(refused("setattr", Errno::EPERM));
            }
            let Some(size) = size else {
                return Ok(attr);
            };
            if let Some((doc, _, _)) = fh.and_then(|fh| self.body_doc(fh)) {
                doc.truncate(size).map_err(|e| errno("setattr", &e))?;
                return Ok(NodeAttr { size, ..attr });
            }
            match (&*node, size) {
                // `> call` truncates first: a no-op, the document starts with the write.
                (NodeId::OpFile(_, _, OpFile::Call), 0) => Ok(attr),
                // A body changes only through a descriptor open for writing.
                (NodeId::Body(_), _) if attr.writable => Err(refused("setattr", Errno::EPERM)),
                _ => Err(refused("setattr", Errno::EACCES)),
            }
        });
        match result {
            Ok(attr) => reply.attr(&Self::ttl(&attr), &self.file_attr(ino.0, &attr)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            use std::os::unix::ffi::OsStrExt;
            return match self.world.tree_readlink(*t) {
                Ok(target) => reply.data(target.as_bytes()),
                Err(e) => reply.error(tree::io_errno("readlink", &e)),
            };
        }
        match self
            .node(ino)
            .and_then(|n| self.world.readlink(&n).map_err(|e| errno("readlink", &e)))
        {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            let t = *t;
            let file = match self.world.tree_open(t, flags.0, tree::who(req)) {
                Ok(f) => f,
                Err(e) => return reply.error(tree::io_errno("open", &e)),
            };
            // A writer may have made the node another file (an overlay's copy-up): the
            // read-only backing kept for the old one goes.
            if file.writable() {
                self.inv.kept.forget(&ino.0);
            }
            // A writer whose before-image is taken at its first write is served here.
            let backing = if file.writes_through_daemon() {
                None
            } else {
                self.tree_backing(ino.0, t, file.writable(), |f| reply.open_backing(f))
            };
            if let Some(b) = backing {
                let fh = self.tree_opened(tree::TreeOpen {
                    file,
                    backing: Some(Arc::clone(&b)),
                });
                return reply.opened_passthrough(FileHandle(fh), FopenFlags::FOPEN_NOFLUSH, &b);
            }
            if let Err(e) = file.ensure_open(&self.world) {
                self.world.tree_release(&file);
                return reply.error(tree::io_errno("open", &e));
            }
            let fh = self.tree_opened(tree::TreeOpen {
                file,
                backing: None,
            });
            return reply.opened(
                FileHandle(fh),
                FopenFlags::FOPEN_NOFLUSH | self.tree_flags(),
            );
        }
        let result = (|| {
            let node = self.node(ino)?;
            let caching = self.world.caching(&node).map_err(|e| errno("open", &e))?;
            let writing = !matches!(flags.acc_mode(), OpenAccMode::O_RDONLY);
            if let (NodeId::OpFile(target, op, OpFile::Call), true) = (&*node, writing) {
                // One writer per inode: a second one walks the path again (ESTALE) and
                // gets an inode of its own, instead of waiting for the kernel's lock.
                if !self.inodes().open_writer(ino.0, req.pid()) {
                    return Err(refused("open", Errno::ESTALE));
                }
                let caller = Caller::from_pid(req.pid(), req.uid());
                let doc = match self.world.calls().open_call(target, op, &caller) {
                    Ok(doc) => doc,
                    Err(e) => {
                        self.inodes().close_writer(ino.0);
                        return Err(errno("open a call", &e));
                    }
                };
                let fh = self.new_fh(Handle::Call {
                    doc,
                    ino: ino.0,
                    opened: holders::Opened::now(req.pid()),
                });
                return Ok((fh, FopenFlags::FOPEN_DIRECT_IO));
            }
            if let (NodeId::Body(entry), true) = (&*node, writing) {
                if !self.inodes().open_writer(ino.0, req.pid()) {
                    return Err(refused("open", Errno::ESTALE));
                }
                let caller = Caller::from_pid(req.pid(), req.uid());
                let truncate = flags.0 & libc::O_TRUNC != 0;
                let append = flags.0 & libc::O_APPEND != 0;
                let doc = match self
                    .world
                    .calls()
                    .open_body(entry, &caller, truncate, append)
                {
                    Ok(doc) => doc,
                    Err(e) => {
                        self.inodes().close_writer(ino.0);
                        return Err(errno("open a body to write", &e));
                    }
                };
                let fh = self.new_fh(Handle::Body {
                    doc,
                    ino: ino.0,
                    opened: holders::Opened::now(req.pid()),
                });
                return Ok((fh, FopenFlags::FOPEN_DIRECT_IO));
            }
            if writing {
                return Err(refused("open", Errno::EACCES));
            }
            // Only `result` differs per session; reading /proc costs on every open.
            let session = if matches!(*node, NodeId::OpFile(_, _, OpFile::Result)) {
                Self::session_of(req)
            } else {
                CallerSession::NONE
            };
            let fh = self.new_fh(Handle::File {
                node: (*node).clone(),
                session,
                snapshot: None,
                live: matches!(caching, Caching::Direct(_)),
            });
            // Nothing to flush on a read-only file: spare the kernel that round trip.
            let flags = FopenFlags::FOPEN_NOFLUSH
                | match caching {
                    Caching::Direct(_) => FopenFlags::FOPEN_DIRECT_IO,
                    _ if Self::keeps_cache(caching) => FopenFlags::FOPEN_KEEP_CACHE,
                    _ => FopenFlags::empty(),
                };
            Ok((fh, flags))
        })();
        match result {
            Ok((fh, flags)) => reply.opened(FileHandle(fh), flags),
            Err(e) => reply.error(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if let Some(open) = self.tree_handle(fh) {
            return match self.world.tree_read(&open.file, offset, size) {
                Ok(bytes) => reply.data(&bytes),
                Err(e) => reply.error(tree::io_errno("read", &e)),
            };
        }
        if let Some((doc, _, _)) = self.call_doc(fh) {
            return doc.read(offset, size, move |r| match r {
                Ok(bytes) => reply.data(&bytes),
                Err(e) => reply.error(errno("read", &e)),
            });
        }
        if let Some((doc, _, _)) = self.body_doc(fh) {
            return reply.data(&doc.read(offset, size));
        }
        match self.read_file(fh.0, offset, size) {
            Ok(bytes) => reply.data(&bytes),
            Err(e) => reply.error(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if let Some(open) = self.tree_handle(fh) {
            return match self.world.tree_write(&open.file, offset, data) {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(tree::io_errno("write", &e)),
            };
        }
        if let Some((doc, _, _)) = self.body_doc(fh) {
            return match doc.write(offset, data) {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(errno("write", &e)),
            };
        }
        let Some((doc, _, _)) = self.call_doc(fh) else {
            return reply.error(refused("write", Errno::EBADF));
        };
        doc.write(data, move |r| match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno("write", &e)),
        });
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let pid = req.pid();
        if let Some((doc, ino, opened)) = self.body_doc(fh) {
            return doc.flush(
                || self.last_close(pid, ino, opened),
                move |r| match r {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(errno("flush", &e)),
                },
            );
        }
        let Some((doc, ino, opened)) = self.call_doc(fh) else {
            return reply.ok();
        };
        doc.flush_by(
            || self.last_close(pid, ino, opened),
            || opened.by_opener(pid),
            move |r| match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno("flush", &e)),
            },
        );
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let handle = self.handles().remove(&fh.0);
        match handle {
            Some(Handle::Call { doc, ino, .. }) => {
                self.inodes().close_writer(ino);
                // Bytes no flush ran still run: nothing written is lost (the words reach
                // `result`).
                doc.release();
            }
            Some(Handle::Body { doc, ino, .. }) => {
                self.inodes().close_writer(ino);
                doc.release();
            }
            // The write run (if it wrote) is recorded now: the closing program does not
            // wait for this answer.
            Some(Handle::Tree(open)) => self.world.tree_release(&open.file),
            _ => {}
        }
        reply.ok();
    }

    /// Directories need no handle, but how the kernel may cache their listings differs:
    /// the world's folders keep theirs (FOPEN_CACHE_DIR with KEEP_CACHE) until we
    /// invalidate them, which is what makes a warm `find` cost no listing round trips; a
    /// working tree's folders are listed afresh at every open, because the kernel's
    /// cached listing went stale while many processes changed one folder at once (eight
    /// agents renaming in one folder: a glob of one's own files missed some). Answering
    /// ENOSYS instead (no OPENDIR at all) is per connection, so it would cost the tree
    /// that freshness.
    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let flags = match self.node(ino).as_deref() {
            Ok(NodeId::Tree(_)) => FopenFlags::empty(),
            _ => FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
        };
        // A handle of its own per open, so that each walk pages through its own listing.
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        reply.opened(FileHandle(fh), flags);
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.listings.forget(&(ino.0, fh.0));
        self.tree_listings.forget(&(ino.0, fh.0));
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if let Ok(NodeId::Tree(dir)) = self.node(ino).as_deref() {
            return self.tree_readdir(ino.0, *dir, fh.0, offset, reply);
        }
        let entries = match self.listing(ino, fh.0, offset) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        let mut all: Vec<(String, u64, FileType)> = vec![
            (".".into(), ino.0, FileType::Directory),
            ("..".into(), ROOT_INO, FileType::Directory),
        ];
        for (name, node) in entries.iter().cloned() {
            let kind = match self.world.kind(&node) {
                NodeKind::Dir => FileType::Directory,
                NodeKind::Symlink => FileType::Symlink,
                NodeKind::File => FileType::RegularFile,
            };
            // d_ino is informative only; a known inode or a stable stand-in (never 0).
            let d_ino = self.inodes().known(&node).unwrap_or(u64::MAX);
            all.push((name, d_ino, kind));
        }
        for (i, (name, d_ino, kind)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(d_ino), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        if let Ok(NodeId::Tree(dir)) = self.node(ino).as_deref() {
            return self.tree_readdirplus(ino.0, *dir, fh.0, offset, reply);
        }
        let entries = match self.listing(ino, fh.0, offset) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        // The end of the listing (every walk's second request of each directory): an
        // empty answer, without the directory's own attributes.
        if offset as usize >= entries.len() + 2 {
            return reply.ok();
        }
        let dir_attr = match self.node(ino).and_then(|n| {
            self.world
                .attr(&n, CallerSession::NONE)
                .map_err(|e| errno("readdirplus", &e))
        }) {
            Ok(a) => a,
            Err(e) => return reply.error(e),
        };
        let mut index = offset as usize;
        // `.` and `..` carry no lookup reference (the kernel does not count them).
        while index < 2 {
            let attr = self.file_attr(ino.0, &dir_attr);
            let name = if index == 0 { "." } else { ".." };
            if reply.add(
                INodeNo(ino.0),
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
        for (name, node) in entries.iter().skip(index - 2) {
            // A working tree's root: the folder itself, as a lookup of it tells.
            if let NodeId::Tree(t) = node {
                let Ok(st) = self.world.tree_stat(*t) else {
                    index += 1;
                    continue;
                };
                let (attr, ttl) = self.tree_told(*t, &st);
                if reply.add(
                    attr.ino,
                    (index + 1) as u64,
                    name,
                    &ttl,
                    &attr,
                    Generation(0),
                ) {
                    self.tree_untold(*t, attr.ino.0);
                    break;
                }
                index += 1;
                continue;
            }
            let (attr, ttl) = match self.world.listing_attr(node) {
                Ok(Some(a)) => (a, Self::ttl(&a)),
                // Costly attributes: named with a stand-in that expires at once, so the
                // kernel asks (getattr, or lookup) when someone looks at the node.
                Ok(None) => (
                    NodeAttr {
                        kind: self.world.kind(node),
                        size: 0,
                        writable: false,
                        caching: Caching::Direct(Duration::ZERO),
                        modified: None,
                    },
                    Duration::ZERO,
                ),
                Err(_) => {
                    index += 1;
                    continue;
                }
            };
            let child = self.inodes().remember(node);
            let full = reply.add(
                INodeNo(child),
                (index + 1) as u64,
                name,
                &ttl,
                &self.file_attr(child, &attr),
                Generation(0),
            );
            if full {
                // The kernel did not take this one: give its reference back.
                self.inodes().forget(child, 1);
                break;
            }
            index += 1;
        }
        reply.ok();
    }

    // A working tree's folders take every change (judged and recorded by the world); the
    // rest of the tree is the hosts' to shape: creating, removing or renaming by hand is
    // refused with EACCES (changes are made by calling ops).
    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        match self.tree_dir(parent) {
            Some(dir) => {
                let made = self.world.tree_mknod(dir, name, mode, rdev, tree::who(req));
                self.tree_made(dir.host, made, "mknod", reply)
            }
            None => reply.error(refused("mknod", Errno::EACCES)),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        match self.tree_dir(parent) {
            Some(dir) => {
                let made = self.world.tree_mkdir(dir, name, mode, tree::who(req));
                self.tree_made(dir.host, made, "mkdir", reply)
            }
            None => reply.error(refused("mkdir", Errno::EACCES)),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.tree_dir(parent) {
            Some(dir) => match self.world.tree_unlink(dir, name, tree::who(req)) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(tree::io_errno("unlink", &e)),
            },
            None => reply.error(refused("unlink", Errno::EACCES)),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.tree_dir(parent) {
            Some(dir) => match self.world.tree_rmdir(dir, name, tree::who(req)) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(tree::io_errno("rmdir", &e)),
            },
            None => reply.error(refused("rmdir", Errno::EACCES)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        match self.tree_dir(parent) {
            Some(dir) => {
                let made =
                    self.world
                        .tree_symlink(dir, link_name, target.as_os_str(), tree::who(req));
                self.tree_made(dir.host, made, "symlink", reply)
            }
            None => reply.error(refused("symlink", Errno::EACCES)),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (Some(from), Some(to)) = (self.tree_dir(parent), self.tree_dir(newparent)) else {
            // Into or out of a working tree, or between two: another file system.
            let code = if self.tree_dir(parent).is_some() || self.tree_dir(newparent).is_some() {
                Errno::EXDEV
            } else {
                Errno::EACCES
            };
            return reply.error(refused("rename", code));
        };
        let mode = if flags.contains(fuser::RenameFlags::RENAME_EXCHANGE) {
            crate::host::tree::RenameMode::Exchange
        } else if flags.contains(fuser::RenameFlags::RENAME_NOREPLACE) {
            crate::host::tree::RenameMode::NoReplace
        } else if flags.is_empty() {
            crate::host::tree::RenameMode::Replace
        } else {
            // RENAME_WHITEOUT is an overlay's own.
            return reply.error(refused("rename", Errno::EINVAL));
        };
        match self
            .world
            .tree_rename(from, name, to, newname, mode, tree::who(req))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(tree::io_errno("rename", &e)),
        }
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let node = self.node(ino).ok();
        match (node.as_deref(), self.tree_dir(newparent)) {
            (Some(NodeId::Tree(t)), Some(dir)) => {
                let made = self.world.tree_link(*t, dir, newname, tree::who(req));
                self.tree_made(dir.host, made, "link", reply)
            }
            (Some(NodeId::Tree(_)), None) | (_, Some(_)) => {
                reply.error(refused("link", Errno::EXDEV))
            }
            _ => reply.error(refused("link", Errno::EACCES)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: fuser::ReplyCreate,
    ) {
        let Some(dir) = self.tree_dir(parent) else {
            return reply.error(refused("create", Errno::EACCES));
        };
        let (found, file) = match self
            .world
            .tree_create(dir, name, mode, flags, tree::who(req))
        {
            Ok(made) => made,
            Err(e) => return reply.error(tree::io_errno("create", &e)),
        };
        let t = crate::world::node::TreeRef {
            host: dir.host,
            node: found.node,
        };
        let (attr, ttl) = self.tree_told(t, &found.stat);
        let backing = self.tree_backing(attr.ino.0, t, file.writable(), |f| reply.open_backing(f));
        match backing {
            Some(b) => {
                let fh = self.tree_opened(tree::TreeOpen {
                    file,
                    backing: Some(Arc::clone(&b)),
                });
                reply.created_passthrough(
                    &ttl,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::FOPEN_NOFLUSH,
                    &b,
                );
            }
            None => {
                let fh = self.tree_opened(tree::TreeOpen {
                    file,
                    backing: None,
                });
                reply.created(
                    &ttl,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::FOPEN_NOFLUSH | self.tree_flags(),
                );
            }
        }
    }

    /// `user.xdg.comment` (the description) and `user.wip.ref` (the ref), read-only.
    fn getxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: fuser::ReplyXattr,
    ) {
        // A working tree's file passes its own xattrs through.
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            return match self.world.tree_getxattr(*t, name) {
                Ok(v) => xattr_reply(&v, size, reply),
                Err(e) => reply.error(tree::io_errno("getxattr", &e)),
            };
        }
        // The kernel asks for `security.capability` before writes: answer without a
        // round trip to any host.
        let wanted = match name.to_str() {
            Some(n) if n.starts_with("user.") => n,
            _ => return reply.error(refused("getxattr", Errno::NO_XATTR)),
        };
        let value = self
            .node(ino)
            .and_then(|n| self.world.xattrs(&n).map_err(|e| errno("getxattr", &e)))
            .map(|attrs| {
                attrs
                    .into_iter()
                    .find(|(n, _)| *n == wanted)
                    .map(|(_, v)| v)
            });
        match value {
            Ok(Some(v)) => xattr_reply(v.as_bytes(), size, reply),
            Ok(None) => reply.error(refused("getxattr", Errno::NO_XATTR)),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: fuser::ReplyXattr) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            return match self.world.tree_listxattr(*t) {
                Ok(v) => xattr_reply(&v, size, reply),
                Err(e) => reply.error(tree::io_errno("listxattr", &e)),
            };
        }
        match self.node(ino) {
            Ok(node) => {
                let mut names = Vec::new();
                for n in self.world.xattr_names(&node) {
                    names.extend_from_slice(n.as_bytes());
                    names.push(0);
                }
                xattr_reply(&names, size, reply);
            }
            Err(e) => reply.error(e),
        }
    }

    /// The truth from the node's attributes: only what is writable may be written, and
    /// nothing here is executable but directories.
    fn access(&self, req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            return match self.world.tree_access(*t, mask.bits(), tree::who(req)) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(tree::io_errno("access", &e)),
            };
        }
        let result = self.node(ino).and_then(|node| self.attr_for(&node, req));
        match result {
            Ok(attr) => {
                let denied = (mask.contains(fuser::AccessFlags::W_OK) && !attr.writable)
                    || (mask.contains(fuser::AccessFlags::X_OK) && attr.kind != NodeKind::Dir);
                if denied {
                    reply.error(refused("access", Errno::EACCES));
                } else {
                    reply.ok();
                }
            }
            Err(e) => reply.error(e),
        }
    }

    /// A working tree's file: synced, with every run recorded so far. Elsewhere nothing
    /// to make durable: a call's outcome is journaled before it is answered.
    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.tree_handle(fh) {
            Some(open) => match self.world.tree_fsync(&open.file, datasync) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(tree::io_errno("fsync", &e)),
            },
            None => reply.ok(),
        }
    }

    /// A working tree's folder: its runs so far are made durable (`fsync` of a folder is
    /// how programs make a rename in it durable).
    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.world.sync_runs() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno("fsyncdir", &e)),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: fuser::ReplyStatfs) {
        let tree = match self.node(ino).as_deref() {
            Ok(NodeId::Tree(t)) => Some(*t),
            // The mount's root and virtual nodes: the first working tree's file system, if
            // any (`df` of the mount).
            _ => self.world.first_tree(),
        };
        match tree.map(|t| self.world.tree_statfs(t)) {
            Some(Ok(st)) => reply.statfs(
                st.blocks, st.bfree, st.bavail, st.files, st.ffree, st.bsize, st.namelen, st.frsize,
            ),
            Some(Err(e)) => reply.error(tree::io_errno("statfs", &e)),
            None => reply.statfs(0, 0, 0, 0, 0, 512, 255, 0),
        }
    }

    /// A working tree's file sets its own (a run); elsewhere they show what the host says
    /// and cannot be set.
    #[allow(clippy::too_many_arguments)]
    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            return match self
                .world
                .tree_setxattr(*t, name, value, flags, tree::who(req))
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(tree::io_errno("setxattr", &e)),
            };
        }
        reply.error(refused("setxattr", Errno::EPERM));
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Ok(NodeId::Tree(t)) = self.node(ino).as_deref() {
            return match self.world.tree_removexattr(*t, name, tree::who(req)) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(tree::io_errno("removexattr", &e)),
            };
        }
        reply.error(refused("removexattr", Errno::EPERM));
    }

    #[allow(clippy::too_many_arguments)]
    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(open) = self.tree_handle(fh) else {
            return reply.error(refused("fallocate", Errno::EOPNOTSUPP));
        };
        let (Ok(offset), Ok(length)) = (i64::try_from(offset), i64::try_from(length)) else {
            return reply.error(refused("fallocate", Errno::EFBIG));
        };
        match self
            .world
            .tree_fallocate(&open.file, mode, offset, length, tree::who(req))
        {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(tree::io_errno("fallocate", &e)),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        let Some(open) = self.tree_handle(fh) else {
            return reply.error(refused("lseek", Errno::ENOSYS));
        };
        if let Err(e) = open.file.ensure_open(&self.world) {
            return reply.error(tree::io_errno("lseek", &e));
        }
        match self.world.tree_lseek(&open.file, offset, whence) {
            Ok(at) => reply.offset(at),
            Err(e) => reply.error(tree::io_errno("lseek", &e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn copy_file_range(
        &self,
        req: &Request,
        _ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        _ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let (Some(from), Some(to)) = (self.tree_handle(fh_in), self.tree_handle(fh_out)) else {
            return reply.error(refused("copy_file_range", Errno::EXDEV));
        };
        if from.file.t.host != to.file.t.host {
            return reply.error(refused("copy_file_range", Errno::EXDEV));
        }
        let (Ok(oi), Ok(oo)) = (i64::try_from(offset_in), i64::try_from(offset_out)) else {
            return reply.error(refused("copy_file_range", Errno::EFBIG));
        };
        if let Err(e) = from.file.ensure_open(&self.world) {
            return reply.error(tree::io_errno("copy_file_range", &e));
        }
        match self
            .world
            .tree_copy_range(&from.file, oi, &to.file, oo, len, tree::who(req))
        {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(tree::io_errno("copy_file_range", &e)),
        }
    }

    /// No file here is a terminal or a device: ENOTTY, as a regular file answers (Python
    /// asks `TCGETS` on every `open()`), without a warning per request.
    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(refused("ioctl", Errno::ENOTTY));
    }
}

/// An xattr value or name list: its size when asked for 0 bytes, ERANGE when too small.
fn xattr_reply(bytes: &[u8], size: u32, reply: fuser::ReplyXattr) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    if size == 0 {
        reply.size(len);
    } else if size < len {
        reply.error(refused("ioctl", Errno::ERANGE));
    } else {
        reply.data(bytes);
    }
}

/// Mount `world` at `mountpoint`; returns once the kernel finished the handshake. When this
/// process may not open `/dev/fuse` (a normal user), `fusermount3` mounts instead.
/// `allow_other` lets other users in (for a normal user, `/etc/fuse.conf` must say
/// `user_allow_other`).
pub fn mount(
    world: Arc<World>,
    inv: Invalidator,
    mountpoint: &Path,
    threads: usize,
    allow_other: bool,
) -> std::io::Result<Session<WorldFs>> {
    let fs = WorldFs::new(Arc::clone(&world), inv.clone());
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName("wip".into()),
        MountOption::Subtype("wip".into()),
        MountOption::NoAtime,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    config.acl = if allow_other {
        // Other users reach the working trees' files: the kernel checks their permission
        // bits against each caller, as on the backing file system (the daemon may be root).
        config.mount_options.push(MountOption::DefaultPermissions);
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(threads.max(1));
    let session = match Session::new(fs, mountpoint, &config) {
        Ok(s) => s,
        Err(e) if fusermount::denied(&e) && fusermount::helper().is_some() => {
            tracing::info!("cannot mount through /dev/fuse ({e}): asking fusermount3");
            let mut options: Vec<String> =
                ["fsname=wip", "subtype=wip", "noatime", "nodev", "nosuid"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
            if allow_other {
                options.push("allow_other".into());
            }
            let dev = fusermount::mount(mountpoint, &options)?;
            let fs = WorldFs::new(Arc::clone(&world), inv.clone());
            Session::from_fd(fs, dev, config.acl, config)?
        }
        Err(e) => return Err(e),
    };
    inv.set_notifier(session.notifier());
    Ok(session)
}
