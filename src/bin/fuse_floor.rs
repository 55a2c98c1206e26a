//! The FUSE floor: a minimal fuser file system serving a tree shape from memory, with the
//! same caching choices as wip (long TTLs, readdirplus, kept page and directory caches).
//! `scripts/bench.sh` walks it beside a wip mount so wip's own overhead is visible.
//!
//! Files named `call` take writes as wip's call files do (direct I/O, `O_TRUNC` opens,
//! no xattrs), so `wip-bench mount-call` on one measures the kernel's round trips of a call
//! with nothing behind them.
//!
//! Usage: `fuse-floor MOUNT SHAPE`, SHAPE lines being `TYPE<TAB>SIZE<TAB>PATH[<TAB>TARGET]`
//! as printed by `find DIR -mindepth 1 -printf '%y\t%s\t%P\t%l\n'` (types d, f, l; TARGET
//! a link's). A name `.ops` is left out of listings, as wip's op directories are: the
//! shape may add them (and `call` files in them) without changing what a walk sees. Runs
//! until unmounted.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, Session,
    WriteFlags,
};

const TTL: Duration = Duration::from_secs(3600);

struct Node {
    kind: FileType,
    /// A `call` file: writable, direct I/O.
    call: bool,
    size: u64,
    /// A symlink's target (`../x` when the shape gives none).
    target: String,
    children: Vec<(String, u64)>,
    index: HashMap<String, u64>,
}

struct Floor {
    nodes: Vec<Node>,
    start: SystemTime,
}

impl Floor {
    fn load(shape: &str) -> Floor {
        let root = Node {
            kind: FileType::Directory,
            call: false,
            size: 0,
            target: String::new(),
            children: Vec::new(),
            index: HashMap::new(),
        };
        // Inode n is nodes[n - 1]; the root is inode 1.
        let mut floor = Floor {
            nodes: vec![root],
            start: SystemTime::now(),
        };
        let mut by_path: HashMap<String, u64> = HashMap::new();
        by_path.insert(String::new(), 1);
        for line in shape.lines() {
            let mut parts = line.splitn(4, '\t');
            let (Some(t), Some(size), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let target = parts.next().unwrap_or("").to_string();
            let kind = match t {
                "d" => FileType::Directory,
                "l" => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            let (parent, name) = match path.rsplit_once('/') {
                Some((p, n)) => (p.to_string(), n.to_string()),
                None => (String::new(), path.to_string()),
            };
            let Some(&parent_ino) = by_path.get(&parent) else {
                continue;
            };
            floor.nodes.push(Node {
                kind,
                call: kind == FileType::RegularFile && name == "call",
                size: size.parse().unwrap_or(0),
                target,
                children: Vec::new(),
                index: HashMap::new(),
            });
            let ino = floor.nodes.len() as u64;
            let p = &mut floor.nodes[parent_ino as usize - 1];
            // Reachable by path, never listed: the shape of wip's unlisted `.ops`.
            if name != ".ops" {
                p.children.push((name.clone(), ino));
            }
            p.index.insert(name, ino);
            by_path.insert(path.to_string(), ino);
        }
        floor
    }

    fn node(&self, ino: u64) -> Option<&Node> {
        self.nodes.get((ino as usize).checked_sub(1)?)
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let n = self.node(ino)?;
        Some(FileAttr {
            ino: INodeNo(ino),
            size: n.size,
            blocks: n.size.div_ceil(512),
            atime: self.start,
            mtime: self.start,
            ctime: self.start,
            crtime: self.start,
            kind: n.kind,
            perm: match n.kind {
                FileType::Directory => 0o555,
                _ if n.call => 0o666,
                _ => 0o444,
            },
            nlink: if n.kind == FileType::Directory { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }
}

impl Filesystem for Floor {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let wanted = config.capabilities()
            & (InitFlags::FUSE_DO_READDIRPLUS
                | InitFlags::FUSE_ATOMIC_O_TRUNC
                | InitFlags::FUSE_PARALLEL_DIROPS);
        let _ = config.add_capabilities(wanted);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self
            .node(parent.0)
            .and_then(|p| p.index.get(name.to_str()?))
            .and_then(|ino| self.attr(*ino));
        match found {
            Some(a) => reply.entry(&TTL, &a, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.node(ino.0) {
            Some(n) if !n.target.is_empty() => reply.data(n.target.as_bytes()),
            _ => reply.data(b"../x"),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.node(ino.0).is_some_and(|n| n.call) {
            reply.opened(FileHandle(1), FopenFlags::FOPEN_DIRECT_IO);
        } else {
            reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.node(ino.0) {
            Some(n) if n.call => reply.written(data.len() as u32),
            _ => reply.error(Errno::EACCES),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    /// As wip answers `security.capability`, which the kernel asks on every `O_TRUNC` open.
    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        reply.error(Errno::NO_XATTR);
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let len = self.node(ino.0).map(|n| n.size).unwrap_or(0);
        let n = len.saturating_sub(offset).min(size as u64) as usize;
        reply.data(&vec![b'x'; n]);
    }

    /// As in wip: no directory handles, so the kernel caches every listing.
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::ENOSYS);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(n) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        for (i, (name, child)) in n.children.iter().enumerate().skip(offset as usize) {
            let kind = self
                .node(*child)
                .map(|c| c.kind)
                .unwrap_or(FileType::RegularFile);
            if reply.add(INodeNo(*child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let Some(n) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        for (i, (name, child)) in n.children.iter().enumerate().skip(offset as usize) {
            let Some(a) = self.attr(*child) else { continue };
            if reply.add(
                INodeNo(*child),
                (i + 1) as u64,
                name,
                &TTL,
                &a,
                Generation(0),
            ) {
                break;
            }
        }
        reply.ok();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mount), Some(shape)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: fuse-floor MOUNT SHAPE");
        std::process::exit(2);
    };
    let shape = match std::fs::read_to_string(shape) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fuse-floor: cannot read {shape}: {e}");
            std::process::exit(1);
        }
    };
    let mut config = fuser::Config::default();
    config.mount_options = vec![MountOption::FSName("fuse-floor".into())];
    // As many threads as wip serves with.
    config.n_threads = Some(8);
    let result = Session::new(Floor::load(&shape), mount, &config).and_then(|s| s.run());
    if let Err(e) = result {
        eprintln!("fuse-floor: {e}");
        std::process::exit(1);
    }
}
