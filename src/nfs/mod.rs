//! The world over NFSv3, for machines without FUSE: a sibling of `fuse/` that asks the
//! same world for nodes, attributes and bytes, hands what is written into `call` and
//! `body` to the same pipeline, and knows no host.
//!
//! NFSv3 has no open and no close. A client writes a file's data with WRITE and ends it
//! with COMMIT when the file is closed (close-to-open consistency). So a `call` (or
//! `body`) written by a client is one document per client and file: its WRITEs are
//! answered UNSTABLE and buffered, and the document runs at the COMMIT (a JSON object,
//! or a lone newline, runs at its WRITE as through FUSE); the call's errno is the
//! COMMIT's status, which the client's `close(2)` reports. An ACCESS check of a `call`
//! whose guard fails whatever the arguments denies writing. A client (its address and
//! uid) is one session: `result` shows its own last call. Who may be a client at all:
//! `access`. docs/SEMANTICS.md, "NFS".

mod access;
mod ids;
pub mod serve;
mod tree;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use nfsserve::context::{current_client, Client};
use nfsserve::nfs::{
    fattr3, fileid3, filename3, ftype3, nfspath3, nfsstat3, nfsstring, nfstime3, sattr3, set_size3,
    specdata3,
};
use nfsserve::vfs::{DirEntry, NFSFileSystem, ReadDirResult, VFSCapabilities};

use crate::cache::TtlCache;
use crate::host::{Caller, Session};
use crate::world::error::{WorldError, WorldResult};
use crate::world::node::{NodeAttr, NodeId, NodeKind, OpFile};
use crate::world::{BodyDoc, CallDoc, World};
pub use access::Access;
use access::Peer;
use ids::Ids;

/// ACCESS3 bits (RFC 1813): what writing needs.
const ACCESS3_READ: u32 = 0x0001;
const ACCESS3_LOOKUP: u32 = 0x0002;
const ACCESS3_MODIFY: u32 = 0x0004;
const ACCESS3_EXTEND: u32 = 0x0008;
const ACCESS3_DELETE: u32 = 0x0010;
const ACCESS3_EXECUTE: u32 = 0x0020;

/// The world as an NFSv3 file system.
pub struct WorldNfs {
    world: Arc<World>,
    ids: Ids,
    access: Access,
    /// The connections open now, by the number the server gave each.
    peers: Mutex<HashMap<u64, Connection>>,
    /// Documents being written, one per client and file, until their COMMIT.
    writing: Mutex<HashMap<(String, fileid3), Open>>,
    /// The last listing of each folder read page by page (see `listing`).
    listings: TtlCache<fileid3, Pages>,
    /// The same for a working tree's folders: names as bytes, ids and attributes.
    tree_pages: TtlCache<fileid3, tree::TreePages>,
    started: SystemTime,
}

/// A listing and its entries' ids, shared by the pages read from it.
type Pages = (Arc<Vec<(String, NodeId)>>, Arc<Vec<fileid3>>);

/// How long a listing serves the pages that follow its first (a client reads a large
/// folder in many READDIRPLUS calls; listing it anew for each would cost the folder once
/// per page). A first page always lists afresh.
const LISTING_KEPT: Duration = Duration::from_secs(5);
/// How many folders' listings are kept at most.
const LISTINGS_MAX: usize = 64;

/// An open connection: who is at its other end, and the refusals already logged.
struct Connection {
    addr: std::net::SocketAddr,
    peer: Result<Peer, access::Unknown>,
    /// (uid, flavor) of requests refused and logged once (at most `WARNED_MAX`).
    warned: Vec<(u32, u32)>,
}

/// A client refused again and again is logged once per uid and flavor, for a few.
const WARNED_MAX: usize = 8;

/// A document being written, and until when it waits for its client.
struct Open {
    w: Writing,
    deadline: Instant,
}

/// How long a document may wait for its client's next WRITE or COMMIT before it counts as
/// abandoned (the client crashed or went away) and runs, as a killed writer's does through
/// FUSE. `WIP_NFS_ABANDON_MS` sets it (the tests' short wait).
fn abandon_after() -> Duration {
    std::env::var("WIP_NFS_ABANDON_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(600), Duration::from_millis)
}

/// How long a document waits once its client's connection ended: long enough for a
/// client that reconnects from its port (the kernel's does) to go on with it.
fn departed_after() -> Duration {
    abandon_after().min(Duration::from_secs(30))
}

/// How often documents are looked at for abandoned ones (see `WorldNfs::sweep`).
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// A document a client is writing (a call's holds its WRITEs at their offsets, within
/// the budget: `CallDoc::write_at`).
#[derive(Clone)]
enum Writing {
    Call(CallDoc),
    Body(BodyDoc),
    /// A working tree's file, written through one descriptor (see `tree`).
    Tree(Arc<crate::world::working::TreeFile>),
}

impl WorldNfs {
    /// `handles`: where ids handed out are kept across restarts (see `ids`).
    pub fn new(world: Arc<World>, handles: Option<&std::path::Path>, access: Access) -> WorldNfs {
        WorldNfs {
            world,
            ids: Ids::open(handles),
            access,
            peers: Mutex::new(HashMap::new()),
            writing: Mutex::new(HashMap::new()),
            listings: TtlCache::new(LISTING_KEPT, LISTINGS_MAX),
            tree_pages: TtlCache::new(LISTING_KEPT, LISTINGS_MAX),
            started: SystemTime::now(),
        }
    }

    /// The node of a handle: one of this run, or of an earlier one found again by its path.
    fn node(&self, id: fileid3) -> Result<NodeId, nfsstat3> {
        self.ids
            .revive(id, |path| self.world.resolve_path(path).ok())
            .ok_or(nfsstat3::NFS3ERR_STALE)
    }

    /// Who asks, as the world's pipeline records a caller: the client's uid, and a
    /// session of its own per client (its address and uid).
    fn caller(client: &Client) -> Caller {
        Caller {
            // The daemon itself waits for the call: an NFS client has no process here.
            pid: std::process::id(),
            uid: client.uid,
            session: session_of(client).number,
            session_start: 0,
            command: format!("NFS client {} (uid {})", client.addr, client.uid),
            run: String::new(),
            signal: Default::default(),
            judged: None,
        }
    }

    fn attr_of(&self, id: fileid3, a: &NodeAttr) -> fattr3 {
        let ftype = match a.kind {
            NodeKind::Dir => ftype3::NF3DIR,
            NodeKind::File => ftype3::NF3REG,
            NodeKind::Symlink => ftype3::NF3LNK,
        };
        let (perm, nlink) = a.perm_and_links();
        let mode = u32::from(perm);
        let t = time_of(a.modified.unwrap_or(self.started));
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        fattr3 {
            ftype,
            mode,
            nlink,
            uid,
            gid,
            size: a.size,
            used: a.size,
            rdev: specdata3::default(),
            // "wip" in ASCII: one file system for the whole world.
            fsid: 0x0077_6970,
            fileid: id,
            atime: t,
            mtime: t,
            ctime: t,
        }
    }

    fn getattr_now(&self, id: fileid3, session: Session) -> Result<fattr3, nfsstat3> {
        let node = self.node(id)?;
        if let NodeId::Tree(t) = node {
            return self.tree_getattr(id, t);
        }
        let attr = self.world.attr(&node, session).map_err(status)?;
        Ok(self.attr_of(id, &attr))
    }

    /// The document `client` writes into `id`, opened at its first WRITE (or a
    /// truncating SETATTR), where the pipeline refuses what it refuses at an open.
    fn document(&self, client: &Client, id: fileid3, truncate: bool) -> Result<Writing, nfsstat3> {
        let key = (client.addr.clone(), id);
        if let Some(o) = self.lock_writing().get_mut(&key) {
            o.deadline = Instant::now() + abandon_after();
            return Ok(o.w.clone());
        }
        self.sweep();
        let node = self.node(id)?;
        let caller = Self::caller(client);
        let calls = self.world.calls();
        let w = match &node {
            NodeId::OpFile(target, op, OpFile::Call) => {
                Writing::Call(calls.open_call(target, op, &caller).map_err(status)?)
            }
            NodeId::Body(e) => Writing::Body(
                calls
                    .open_body(e, &caller, truncate, false)
                    .map_err(status)?,
            ),
            _ => return Err(nfsstat3::NFS3ERR_ACCES),
        };
        self.lock_writing().insert(
            key,
            Open {
                w: w.clone(),
                deadline: Instant::now() + abandon_after(),
            },
        );
        Ok(w)
    }

    /// Run the documents whose clients stopped writing them without a COMMIT (see
    /// `abandon_after`, `departed_after`): each runs once, for nobody, as at a killed
    /// writer's last close (one still missing bytes is refused), and what it held is
    /// freed. Done at every new document and every `SWEEP_EVERY`.
    pub fn sweep(&self) {
        let now = Instant::now();
        let stale: Vec<Writing> = {
            let mut writing = self.lock_writing();
            let keys: Vec<(String, fileid3)> = writing
                .iter()
                .filter(|(_, o)| o.deadline <= now)
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter()
                .filter_map(|k| writing.remove(k).map(|o| o.w))
                .collect()
        };
        for w in stale {
            match w {
                Writing::Call(doc) => doc.release(),
                Writing::Body(doc) => doc.release(),
                Writing::Tree(f) => self.world.tree_release(&f),
            }
        }
    }

    /// The client at `addr` went away: its documents wait `departed_after` at most.
    fn departed(&self, addr: &str) {
        let deadline = Instant::now() + departed_after();
        for ((a, _), o) in self.lock_writing().iter_mut() {
            if a == addr {
                o.deadline = o.deadline.min(deadline);
            }
        }
    }

    /// The listing of folder `dirid`: made now for a first page (`fresh`), else the one
    /// its first page made, while it is recent.
    fn listing(&self, dirid: fileid3, dir: &NodeId, fresh: bool) -> Result<Pages, nfsstat3> {
        if !fresh {
            if let Some(pages) = self.listings.get(&dirid) {
                return Ok(pages);
            }
        }
        let entries = Arc::new(self.world.list(dir).map_err(status)?);
        let ids: Arc<Vec<fileid3>> = Arc::new(
            entries
                .iter()
                .map(|(name, node)| self.ids.id(node.clone(), dirid, name))
                .collect(),
        );
        self.listings
            .insert(dirid, (Arc::clone(&entries), Arc::clone(&ids)));
        Ok((entries, ids))
    }

    fn lock_peers(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Connection>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_writing(&self) -> std::sync::MutexGuard<'_, HashMap<(String, fileid3), Open>> {
        self.writing.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn forget_document(&self, client: &Client, id: fileid3) -> Option<Writing> {
        self.lock_writing()
            .remove(&(client.addr.clone(), id))
            .map(|o| o.w)
    }

    /// Feed a WRITE to a call document at its offset.
    async fn write_call(
        &self,
        client: &Client,
        id: fileid3,
        offset: u64,
        data: &[u8],
    ) -> Result<(), nfsstat3> {
        let doc = match self.lock_writing().get(&(client.addr.clone(), id)) {
            Some(Open {
                w: Writing::Call(doc),
                ..
            }) => doc.clone(),
            _ => return Err(nfsstat3::NFS3ERR_IO),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        doc.write_at(offset, data, move |r| {
            let _ = tx.send(r);
        });
        match rx.await {
            Ok(Ok(_)) => Ok(()),
            // The document ran at this WRITE and failed, or was refused: it stays, so
            // the client's later WRITEs get the same answer (and start no other call)
            // until it truncates the file or COMMITs.
            Ok(Err(e)) => Err(status(e)),
            Err(_) => Err(nfsstat3::NFS3ERR_IO),
        }
    }
}

/// A client's session: its address and uid, kept apart from the kernel's session ids
/// (the high bit is set).
fn session_of(client: &Client) -> Session {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    client.addr.hash(&mut h);
    client.uid.hash(&mut h);
    Session {
        number: (h.finish() as u32) | 0x8000_0000,
        start: 0,
        uid: client.uid,
    }
}

fn time_of(t: SystemTime) -> nfstime3 {
    let d = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    nfstime3 {
        seconds: d.as_secs() as u32,
        nseconds: d.subsec_nanos(),
    }
}

/// The NFS status of a world error: its errno where NFSv3 has it, else EIO (docs:
/// SEMANTICS.md, "NFS").
pub fn status(e: WorldError) -> nfsstat3 {
    tracing::debug!("nfs: {}", e.chain());
    status_of_errno(e.errno())
}

fn status_of_errno(errno: i32) -> nfsstat3 {
    match errno {
        libc::EPERM => nfsstat3::NFS3ERR_PERM,
        libc::ENOENT => nfsstat3::NFS3ERR_NOENT,
        libc::EACCES => nfsstat3::NFS3ERR_ACCES,
        libc::EEXIST => nfsstat3::NFS3ERR_EXIST,
        libc::ENOTDIR => nfsstat3::NFS3ERR_NOTDIR,
        libc::EISDIR => nfsstat3::NFS3ERR_ISDIR,
        libc::EINVAL => nfsstat3::NFS3ERR_INVAL,
        libc::EFBIG => nfsstat3::NFS3ERR_FBIG,
        libc::ENOSPC => nfsstat3::NFS3ERR_NOSPC,
        libc::EROFS => nfsstat3::NFS3ERR_ROFS,
        libc::ENAMETOOLONG => nfsstat3::NFS3ERR_NAMETOOLONG,
        libc::ENOTSUP => nfsstat3::NFS3ERR_NOTSUPP,
        _ => nfsstat3::NFS3ERR_IO,
    }
}

/// Run blocking world work off the server's async threads (hosts may take their time).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, nfsstat3> + Send + 'static,
) -> Result<T, nfsstat3> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or(Err(nfsstat3::NFS3ERR_SERVERFAULT))
}

fn client() -> Client {
    current_client().unwrap_or_default()
}

/// A shareable handle: every VFS call works on the same state from a blocking thread.
#[derive(Clone)]
pub struct Served(Arc<WorldNfs>);

impl Served {
    /// See `WorldNfs::sweep`.
    pub fn sweep(&self) {
        self.0.sweep()
    }

    pub fn new(world: Arc<World>, handles: Option<&std::path::Path>, access: Access) -> Served {
        Served(Arc::new(WorldNfs::new(world, handles, access)))
    }
}

#[async_trait]
impl NFSFileSystem for Served {
    fn capabilities(&self) -> VFSCapabilities {
        VFSCapabilities::ReadWrite
    }

    fn root_dir(&self) -> fileid3 {
        self.0.ids.root()
    }

    fn connected(&self, id: u64, addr: std::net::SocketAddr, local: std::net::SocketAddr) {
        let peer = access::peer_of(addr, local);
        if let Err(words) = self.0.access.connection(&peer) {
            tracing::warn!("nfs: refused the connection from {addr}: {words}");
        }
        self.0.lock_peers().insert(
            id,
            Connection {
                addr,
                peer,
                warned: Vec::new(),
            },
        );
    }

    fn disconnected(&self, id: u64) {
        let gone = self.0.lock_peers().remove(&id);
        if let Some(conn) = gone {
            self.0.departed(&conn.addr.to_string());
        }
    }

    fn admits(&self, client: &Client) -> bool {
        let access = self.0.access;
        let mut peers = self.0.lock_peers();
        let Some(conn) = peers.get_mut(&client.connection) else {
            return false;
        };
        let refused = match &conn.peer {
            Ok(peer) if access.connection(&conn.peer).is_ok() => access.request(peer, client),
            // Refused as a whole, and said so when it connected.
            _ => return false,
        };
        match refused {
            Ok(()) => true,
            Err(words) => {
                let key = (client.uid, client.flavor);
                if !conn.warned.contains(&key) && conn.warned.len() < WARNED_MAX {
                    conn.warned.push(key);
                    tracing::warn!("nfs: refused a request from {}: {words}", conn.addr);
                }
                false
            }
        }
    }

    async fn lookup(&self, dirid: fileid3, filename: &filename3) -> Result<fileid3, nfsstat3> {
        let name = filename.0.clone();
        let me = Arc::clone(&self.0);
        blocking(move || {
            let dir = me.node(dirid)?;
            match name.as_slice() {
                b"." => return Ok(dirid),
                b".." => return Ok(me.ids.parent(dirid)),
                _ => {}
            }
            if let NodeId::Tree(t) = dir {
                return me.tree_lookup(dirid, t, &name);
            }
            let name = std::str::from_utf8(&name)
                .map_err(|_| nfsstat3::NFS3ERR_NOENT)?
                .to_string();
            let node = me.world.lookup(&dir, &name).map_err(status)?;
            Ok(match node {
                // Each open of a `call` writes a file of its own (see `Ids::fresh`).
                NodeId::OpFile(_, _, OpFile::Call) => me.ids.fresh(node, dirid),
                node => me.ids.id(node, dirid, &name),
            })
        })
        .await
    }

    async fn getattr(&self, id: fileid3) -> Result<fattr3, nfsstat3> {
        let session = session_of(&client());
        let me = Arc::clone(&self.0);
        blocking(move || me.getattr_now(id, session)).await
    }

    async fn setattr(&self, id: fileid3, setattr: sattr3) -> Result<fattr3, nfsstat3> {
        let client = client();
        let me = Arc::clone(&self.0);
        blocking(move || {
            let node = me.node(id)?;
            if let NodeId::Tree(t) = node {
                return me.tree_setattr(&client, id, t, &setattr);
            }
            if let set_size3::size(size) = setattr.size {
                match (&node, size) {
                    // `>` truncates a call file: a new document begins.
                    (NodeId::OpFile(_, _, OpFile::Call), 0) => {
                        if let Some(Writing::Call(doc)) = me.forget_document(&client, id) {
                            doc.release();
                        }
                        me.document(&client, id, true)?;
                    }
                    (NodeId::Body(_), _) => match me.document(&client, id, size == 0)? {
                        Writing::Body(doc) => doc.truncate(size).map_err(status)?,
                        Writing::Call(_) | Writing::Tree(_) => return Err(nfsstat3::NFS3ERR_INVAL),
                    },
                    _ => return Err(nfsstat3::NFS3ERR_ACCES),
                }
            }
            // Modes, owners and times are the world's: asked to change them, it keeps its own.
            me.getattr_now(id, session_of(&client))
        })
        .await
    }

    async fn read(
        &self,
        id: fileid3,
        offset: u64,
        count: u32,
    ) -> Result<(Vec<u8>, bool), nfsstat3> {
        let client = client();
        let session = session_of(&client);
        let me = Arc::clone(&self.0);
        blocking(move || {
            let node = me.node(id)?;
            if let NodeId::Tree(t) = node {
                return me.tree_read(t, offset, count, me.who(&client));
            }
            let snap = me.world.snapshot(&node, session).map_err(status)?;
            let bytes = me
                .world
                .read_at(&node, &snap, offset, count)
                .map_err(status)?;
            let size = match snap.bytes.len() {
                0 => me.world.attr(&node, session).map_err(status)?.size,
                n => n as u64,
            };
            let eof = offset + bytes.len() as u64 >= size;
            Ok((bytes, eof))
        })
        .await
    }

    async fn write(&self, id: fileid3, offset: u64, data: &[u8]) -> Result<fattr3, nfsstat3> {
        let client = client();
        if let Some(NodeId::Tree(t)) = self.0.ids.node(id) {
            let me = Arc::clone(&self.0);
            let data = data.to_vec();
            return blocking(move || me.tree_write(&client, id, t, offset, &data)).await;
        }
        let me = Arc::clone(&self.0);
        let c = client.clone();
        let w = blocking(move || me.document(&c, id, false)).await?;
        match w {
            Writing::Call(_) => self.0.write_call(&client, id, offset, data).await?,
            Writing::Body(doc) => {
                let data = data.to_vec();
                blocking(move || doc.write(offset, &data).map(|_| ()).map_err(status)).await?
            }
            Writing::Tree(_) => return Err(nfsstat3::NFS3ERR_IO),
        }
        let me = Arc::clone(&self.0);
        let session = session_of(&client);
        match blocking(move || me.getattr_now(id, session)).await {
            Ok(a) => Ok(a),
            // The attributes of a file being written are its own (the call ran and moved on).
            Err(_) => Ok(fattr3 {
                fileid: id,
                ..Default::default()
            }),
        }
    }

    fn defers_writes(&self, id: fileid3) -> bool {
        matches!(
            self.0.ids.node(id),
            Some(NodeId::OpFile(_, _, OpFile::Call) | NodeId::Body(_) | NodeId::Tree(_))
        )
    }

    async fn commit(&self, id: fileid3) -> Result<fattr3, nfsstat3> {
        let client = client();
        let Some(w) = self.0.forget_document(&client, id) else {
            let me = Arc::clone(&self.0);
            let session = session_of(&client);
            return blocking(move || me.getattr_now(id, session)).await;
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let done = move |r: WorldResult<()>| {
            let _ = tx.send(r);
        };
        match w {
            Writing::Call(doc) => doc.flush(|| true, done),
            Writing::Body(doc) => doc.flush(|| true, done),
            // The descriptor's bytes are on disk: its `write` run is recorded now.
            Writing::Tree(f) => {
                let me = Arc::clone(&self.0);
                let session = session_of(&client);
                return blocking(move || {
                    me.world.tree_release(&f);
                    me.getattr_now(id, session)
                })
                .await;
            }
        }
        match rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(status(e)),
            Err(_) => return Err(nfsstat3::NFS3ERR_IO),
        }
        let me = Arc::clone(&self.0);
        let session = session_of(&client);
        blocking(move || me.getattr_now(id, session)).await
    }

    async fn access(&self, id: fileid3, requested: u32) -> u32 {
        let client = client();
        let me = Arc::clone(&self.0);
        let writes = ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
        blocking(move || {
            let node = me.node(id)?;
            let may_write = match &node {
                NodeId::Tree(t) => {
                    // The backing file's own bits for the client's uid, and the policy.
                    let who = me.who(&client);
                    let mut granted = 0;
                    for (bits, mask) in [
                        (ACCESS3_READ | ACCESS3_LOOKUP, libc::R_OK),
                        (ACCESS3_EXECUTE, libc::X_OK),
                        (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE, libc::W_OK),
                    ] {
                        if me.world.tree_access(*t, mask, who).is_ok() {
                            granted |= bits;
                        }
                    }
                    return Ok(requested & granted);
                }
                NodeId::OpFile(t, op, OpFile::Call) => !me.world.calls().refuses_any_call(t, op),
                NodeId::Body(_) => me
                    .world
                    .attr(&node, Session::NONE)
                    .is_ok_and(|a| a.writable),
                _ => false,
            };
            Ok(if may_write {
                requested & !ACCESS3_DELETE
            } else {
                requested & !writes
            })
        })
        .await
        .unwrap_or(requested & !writes)
    }

    // Changes are a working tree's only: the rest of the world changes through its ops.
    async fn create(
        &self,
        dirid: fileid3,
        filename: &filename3,
        attr: sattr3,
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        let (client, me, name) = (client(), Arc::clone(&self.0), filename.0.clone());
        blocking(move || {
            let dir = me.tree_node(dirid)?.ok_or(nfsstat3::NFS3ERR_ACCES)?;
            me.tree_create(&client, dirid, dir, &name, &attr, false)
        })
        .await
    }

    async fn create_exclusive(
        &self,
        dirid: fileid3,
        filename: &filename3,
    ) -> Result<fileid3, nfsstat3> {
        let (client, me, name) = (client(), Arc::clone(&self.0), filename.0.clone());
        blocking(move || {
            let dir = me.tree_node(dirid)?.ok_or(nfsstat3::NFS3ERR_ACCES)?;
            me.tree_create(&client, dirid, dir, &name, &sattr3::default(), true)
                .map(|(id, _)| id)
        })
        .await
    }

    async fn mkdir(
        &self,
        dirid: fileid3,
        dirname: &filename3,
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        let (client, me, name) = (client(), Arc::clone(&self.0), dirname.0.clone());
        blocking(move || {
            let dir = me.tree_node(dirid)?.ok_or(nfsstat3::NFS3ERR_ACCES)?;
            me.tree_mkdir(&client, dirid, dir, &name)
        })
        .await
    }

    async fn remove(&self, dirid: fileid3, filename: &filename3) -> Result<(), nfsstat3> {
        let (client, me, name) = (client(), Arc::clone(&self.0), filename.0.clone());
        blocking(move || {
            let dir = me.tree_node(dirid)?.ok_or(nfsstat3::NFS3ERR_ACCES)?;
            me.tree_remove(&client, dir, &name)
        })
        .await
    }

    async fn rename(
        &self,
        from_dirid: fileid3,
        from_filename: &filename3,
        to_dirid: fileid3,
        to_filename: &filename3,
    ) -> Result<(), nfsstat3> {
        let (client, me) = (client(), Arc::clone(&self.0));
        let (from, to) = (from_filename.0.clone(), to_filename.0.clone());
        blocking(move || {
            let a = me.tree_node(from_dirid)?.ok_or(nfsstat3::NFS3ERR_ACCES)?;
            let b = me.tree_node(to_dirid)?.ok_or(nfsstat3::NFS3ERR_ACCES)?;
            me.tree_rename(&client, (a, &from), (b, &to))
        })
        .await
    }

    async fn readdir(
        &self,
        dirid: fileid3,
        start_after: fileid3,
        max_entries: usize,
    ) -> Result<ReadDirResult, nfsstat3> {
        let me = Arc::clone(&self.0);
        blocking(move || {
            let dir = me.node(dirid)?;
            if let NodeId::Tree(t) = dir {
                return me.tree_readdir(dirid, t, start_after, max_entries);
            }
            let (listing, ids) = me.listing(dirid, &dir, start_after == 0)?;
            // A cookie is the id of the last entry the client saw: the listing goes on
            // after it (ids are stable, so a page boundary survives a changed listing).
            let from = match start_after {
                0 => 0,
                after => match ids.iter().position(|i| *i == after) {
                    Some(p) => p + 1,
                    None => return Err(nfsstat3::NFS3ERR_BAD_COOKIE),
                },
            };
            let mut entries = Vec::new();
            for ((name, node), id) in listing.iter().zip(ids.iter()).skip(from).take(max_entries) {
                let attr = match me.world.listing_attr(node) {
                    Ok(Some(a)) => me.attr_of(*id, &a),
                    // Costly or failing now: the kind alone (the client asks GETATTR).
                    _ => me.attr_of(
                        *id,
                        &NodeAttr {
                            kind: me.world.kind(node),
                            size: 0,
                            writable: false,
                            caching: crate::world::node::Caching::Direct(Duration::ZERO),
                            modified: None,
                        },
                    ),
                };
                entries.push(DirEntry {
                    fileid: *id,
                    name: nfsstring(name.as_bytes().to_vec()),
                    attr,
                });
            }
            let end = from + entries.len() >= listing.len();
            Ok(ReadDirResult { entries, end })
        })
        .await
    }

    async fn symlink(
        &self,
        dirid: fileid3,
        linkname: &filename3,
        symlink: &nfspath3,
        _attr: &sattr3,
    ) -> Result<(fileid3, fattr3), nfsstat3> {
        let (client, me) = (client(), Arc::clone(&self.0));
        let (name, target) = (linkname.0.clone(), symlink.0.clone());
        blocking(move || {
            let dir = me.tree_node(dirid)?.ok_or(nfsstat3::NFS3ERR_ACCES)?;
            me.tree_symlink(&client, dirid, dir, &name, &target)
        })
        .await
    }

    async fn readlink(&self, id: fileid3) -> Result<nfspath3, nfsstat3> {
        let me = Arc::clone(&self.0);
        blocking(move || {
            let node = me.node(id)?;
            if let NodeId::Tree(t) = node {
                return me.tree_readlink(t).map(nfsstring);
            }
            let target = me.world.readlink(&node).map_err(status)?;
            Ok(nfsstring(target.into_bytes()))
        })
        .await
    }

    /// Handles carry the file id alone, with no server generation: a restarted server
    /// knows every node by the same id again (see `ids`), so a client's handles stay good
    /// where the world kept the node.
    fn id_to_fh(&self, id: fileid3) -> nfsserve::nfs::nfs_fh3 {
        nfsserve::nfs::nfs_fh3 {
            data: id.to_le_bytes().to_vec(),
        }
    }

    fn fh_to_id(&self, fh: &nfsserve::nfs::nfs_fh3) -> Result<fileid3, nfsstat3> {
        let bytes: [u8; 8] = fh
            .data
            .as_slice()
            .try_into()
            .map_err(|_| nfsstat3::NFS3ERR_BADHANDLE)?;
        let id = u64::from_le_bytes(bytes);
        if self.0.ids.node(id).is_some() {
            return Ok(id);
        }
        // A handle of an earlier run: found again by its path, which may ask hosts.
        let found = tokio::task::block_in_place(|| self.0.node(id));
        found.map(|_| id)
    }
}

#[cfg(test)]
mod tests;
