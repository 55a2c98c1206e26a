//! Changes made to the root outside the mount (editors, builds, git), seen by inotify on
//! the directories the mount has shown, and reported as the host's own changes (see
//! `Changes`): the runtime then drops the kernel's copies of those entries, so the host's
//! nodes may be cached long and a warm walk is answered by the kernel alone.
//!
//! A directory is watched from the moment it is listed or something in it is looked up;
//! its watch goes with it. Where a watch cannot be had (the user's limit of watches, a
//! file system whose changes inotify does not see, such as NFS or another FUSE mount), the
//! host says so (`watching()` false) and its nodes are cached briefly instead.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::host::tree::NodeNo;
use crate::host::Changes;

/// How long a change the mount made itself keeps the watch from reporting it back (the
/// kernel already knows it: it made it). An outside change to the same name within this
/// window shows when the kernel's copy expires instead.
const OWN_WINDOW: Duration = Duration::from_secs(2);
/// Past this many own changes remembered, the oldest are let go.
const OWN_MAX: usize = 65_536;

/// How long events are gathered after the first one before they are reported together (a
/// save that writes, renames and sets times is one change).
const GATHER: Duration = Duration::from_millis(30);
/// How often the thread looks whether its host is gone.
const POLL: Duration = Duration::from_millis(500);
/// Past this many changed paths in one batch, only their directories are reported.
const BATCH_MAX: usize = 20_000;

/// File systems whose changes made elsewhere inotify does not see (`statfs` magic).
const REMOTE: [i64; 8] = [
    0x6969,                // NFS
    0x517B,                // SMB
    0xFF53_4D42u32 as i64, // CIFS
    0xFE53_4D42u32 as i64, // SMB2
    0x6573_5546,           // FUSE
    0x0102_1997,           // 9P
    0x00C3_6400,           // Ceph
    0x0BD0_0BD0,           // Lustre
];

#[derive(Default)]
struct State {
    /// Each watch, with the host paths of the directory it watches (one directory may be
    /// reached by several paths, through symlinks).
    by_wd: HashMap<i32, Vec<Vec<String>>>,
    /// Host paths of the directories watched.
    watched: HashSet<Vec<String>>,
    /// Each watch's working-tree directory node, and the nodes watched.
    node_of_wd: HashMap<i32, NodeNo>,
    nodes: HashSet<NodeNo>,
    /// Names the mount changed itself lately ((directory, name), until when), and the
    /// nodes written through it now: their events are not reported back.
    own: HashMap<(NodeNo, Option<OsString>), Instant>,
}

impl State {
    fn is_own(&self, dir: NodeNo, name: Option<&OsStr>) -> bool {
        let now = Instant::now();
        let live = |k: &(NodeNo, Option<OsString>)| self.own.get(k).is_some_and(|t| *t > now);
        live(&(dir, name.map(OsStr::to_os_string))) || live(&(dir, None))
    }
}

struct Shared {
    fd: OwnedFd,
    state: Mutex<State>,
    /// Counts the batches of changes seen: what was resolved before a batch may be stale.
    generation: std::sync::atomic::AtomicU64,
    /// The host is gone: the thread ends.
    stop: AtomicBool,
}

/// The watcher of one files host.
pub(super) struct Watch {
    shared: Option<Arc<Shared>>,
    /// False once a directory could not be watched: the host is cached briefly from then on.
    ok: AtomicBool,
}

impl Watch {
    /// Watch the root at `root_fd` (a descriptor of the root directory), reporting to
    /// `changes`. Without inotify, or on a file system it cannot watch, nothing is watched.
    pub(super) fn start(root_fd: impl AsFd, changes: Changes) -> Watch {
        let unwatched = || Watch {
            shared: None,
            ok: AtomicBool::new(false),
        };
        match rustix::fs::fstatfs(root_fd) {
            Ok(fs) if REMOTE.contains(&fs.f_type) => {
                tracing::info!(
                    "files root on a file system whose remote changes inotify cannot see: cached briefly"
                );
                return unwatched();
            }
            _ => {}
        }
        let fd = match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!("inotify unavailable ({e}): the files host is cached briefly");
                return unwatched();
            }
        };
        let shared = Arc::new(Shared {
            fd,
            state: Mutex::new(State::default()),
            generation: std::sync::atomic::AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let reader = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("files-watch".into())
            .spawn(move || read_loop(&reader, &changes));
        if let Err(e) = spawned {
            tracing::warn!("cannot start the files watcher ({e}): cached briefly");
            return unwatched();
        }
        Watch {
            shared: Some(shared),
            ok: AtomicBool::new(true),
        }
    }

    /// How many batches of changes were seen (`None`: nothing is watched, so nothing
    /// resolved may be kept).
    pub(super) fn generation(&self) -> Option<u64> {
        match &self.shared {
            Some(s) if self.watching() => Some(s.generation.load(Ordering::Acquire)),
            _ => None,
        }
    }

    /// What was resolved before now may be stale (the host itself changed something).
    pub(super) fn bump(&self) {
        if let Some(s) = &self.shared {
            s.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The working-tree directory `node` (its handle `fd`) is shown to the kernel: watch it.
    /// `segs` is its host path now, for the change feed's words (what the watch reports of
    /// a node is its node, whatever it is called by then).
    pub(super) fn dir_node(
        &self,
        node: NodeNo,
        segs: impl FnOnce() -> Option<Vec<String>>,
        fd: impl FnOnce() -> Option<std::sync::Arc<OwnedFd>>,
    ) {
        let Some(shared) = &self.shared else { return };
        if crate::hosts::lock(&shared.state).nodes.contains(&node) {
            return;
        }
        let Some(fd) = fd() else { return };
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match inotify::add_watch(&shared.fd, path.as_str(), watch_flags()) {
            Ok(wd) => {
                let segs = segs();
                let mut st = crate::hosts::lock(&shared.state);
                st.nodes.insert(node);
                st.node_of_wd.insert(wd, node);
                if let Some(segs) = segs {
                    st.watched.insert(segs.clone());
                    let paths = st.by_wd.entry(wd).or_default();
                    if !paths.contains(&segs) {
                        paths.push(segs);
                    }
                }
            }
            Err(e) => {
                if self.ok.swap(false, Ordering::Relaxed) {
                    tracing::warn!(
                        "cannot watch more directories of the files root ({e}; see /proc/sys/fs/inotify/max_user_watches): from now on the files host is cached briefly"
                    );
                }
            }
        }
    }

    /// The mount is about to change `name` in `dir` (or `dir` itself) through the kernel:
    /// what the watch sees of it is not reported back.
    pub(super) fn own(&self, dir: NodeNo, name: Option<&OsStr>) {
        let Some(shared) = &self.shared else { return };
        let mut st = crate::hosts::lock(&shared.state);
        if st.own.len() >= OWN_MAX {
            let now = Instant::now();
            st.own.retain(|_, t| *t > now);
            if st.own.len() >= OWN_MAX {
                st.own.clear();
            }
        }
        st.own.insert(
            (dir, name.map(OsStr::to_os_string)),
            Instant::now() + OWN_WINDOW,
        );
    }

    /// Whether every directory shown so far is watched (so the kernel may cache long).
    pub(super) fn watching(&self) -> bool {
        self.shared.is_some() && self.ok.load(Ordering::Relaxed)
    }

    /// Watch the directory at host path `segs`, open as `dir` (an `O_PATH` descriptor
    /// below the root, so the directory watched is the one resolved, never a name).
    pub(super) fn dir(&self, segs: &[String], dir: impl FnOnce() -> std::io::Result<OwnedFd>) {
        let Some(shared) = &self.shared else { return };
        if crate::hosts::lock(&shared.state).watched.contains(segs) {
            return;
        }
        let fd = match dir() {
            Ok(fd) => fd,
            Err(_) => return,
        };
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match inotify::add_watch(&shared.fd, path.as_str(), watch_flags()) {
            Ok(wd) => {
                let mut st = crate::hosts::lock(&shared.state);
                st.watched.insert(segs.to_vec());
                let paths = st.by_wd.entry(wd).or_default();
                if !paths.iter().any(|p| p == segs) {
                    paths.push(segs.to_vec());
                }
            }
            Err(e) => {
                if self.ok.swap(false, Ordering::Relaxed) {
                    tracing::warn!(
                        "cannot watch more directories of the files root ({e}; see /proc/sys/fs/inotify/max_user_watches): from now on the files host is cached briefly"
                    );
                }
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(s) = &self.shared {
            s.stop.store(true, Ordering::Relaxed);
        }
    }
}

fn watch_flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

/// Wait until the inotify descriptor is readable, at most `timeout`; whether it is.
fn readable(fd: &OwnedFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    n > 0 && pfd.revents & libc::POLLIN != 0
}

fn read_loop(shared: &Arc<Shared>, changes: &Changes) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    while !shared.stop.load(Ordering::Relaxed) {
        if !readable(&shared.fd, POLL) {
            continue;
        }
        let mut paths = BTreeSet::new();
        let mut nodes = BTreeSet::new();
        // What arrives within the gathering window goes out as one change.
        loop {
            drain(shared, &mut buf, &mut paths, &mut nodes);
            if !readable(&shared.fd, GATHER) {
                break;
            }
        }
        if paths.is_empty() && nodes.is_empty() {
            // Only the mount's own changes: nothing the kernel does not know.
            continue;
        }
        if paths.len() > BATCH_MAX {
            // Bounded: the directories (their listings and attributes) stand for all.
            paths = paths
                .into_iter()
                .map(|mut p: Vec<String>| {
                    p.pop();
                    p
                })
                .collect();
        }
        shared.generation.fetch_add(1, Ordering::AcqRel);
        if nodes.len() > BATCH_MAX {
            // Bounded as the paths are: the directories stand for their names.
            nodes = nodes.into_iter().map(|(d, _)| (d, None)).collect();
        }
        changes.tree_changed(nodes.into_iter().collect(), paths.into_iter().collect());
    }
}

/// Read every pending event into `paths` (host paths of what changed) and `nodes` (the
/// working tree's directories and names that changed), leaving out the mount's own.
fn drain(
    shared: &Shared,
    buf: &mut [MaybeUninit<u8>],
    paths: &mut BTreeSet<Vec<String>>,
    nodes: &mut BTreeSet<(NodeNo, Option<OsString>)>,
) {
    let mut reader = inotify::Reader::new(&shared.fd, buf);
    loop {
        let event = match reader.next() {
            Ok(e) => e,
            Err(rustix::io::Errno::AGAIN) | Err(_) => return,
        };
        let mut st = crate::hosts::lock(&shared.state);
        let flags = event.events();
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            // Events were lost: everything watched may have changed.
            paths.extend(st.watched.iter().cloned());
            nodes.extend(st.nodes.iter().map(|n| (*n, None)));
            continue;
        }
        let wd = event.wd();
        let raw_name = event
            .file_name()
            .map(|n| OsStr::from_bytes(n.to_bytes()).to_os_string())
            .filter(|n| !n.is_empty());
        if let Some(dir) = st.node_of_wd.get(&wd).copied() {
            if st.is_own(dir, raw_name.as_deref()) {
                continue;
            }
            nodes.insert((dir, None));
            if let Some(n) = &raw_name {
                nodes.insert((dir, Some(n.clone())));
            }
            if flags.contains(ReadFlags::IGNORED) {
                st.node_of_wd.remove(&wd);
                st.nodes.remove(&dir);
            }
        }
        let Some(dirs) = st.by_wd.get(&wd).cloned() else {
            continue;
        };
        let name = event
            .file_name()
            .and_then(|n| n.to_str().ok())
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        for dir in &dirs {
            paths.insert(dir.clone());
            if let Some(n) = &name {
                let mut child = dir.clone();
                child.push(n.clone());
                paths.insert(child);
            }
            if let Some((_, parent)) = dir.split_last() {
                if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                    paths.insert(parent.to_vec());
                }
            }
        }
        if flags.contains(ReadFlags::IGNORED) {
            // The directory is gone: so is its watch, and whatever was watched below it
            // will be watched again when shown again.
            st.by_wd.remove(&wd);
            for dir in &dirs {
                st.watched.retain(|w| !w.starts_with(dir));
            }
        }
    }
}
