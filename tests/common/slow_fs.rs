//! A tiny FUSE file system whose one file answers `read` only when the test releases it: a
//! backend that blocks for real (in the kernel, as a network file system or a stopped
//! server would), to put under a files host.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen, Request,
};

/// What `late.txt` holds once released.
pub const LATE: &[u8] = b"late\n";
const TTL: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

struct SlowFs {
    gate: Arc<Gate>,
    start: SystemTime,
}

impl SlowFs {
    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, size, perm) = match ino {
            1 => (FileType::Directory, 0, 0o755),
            2 => (FileType::RegularFile, LATE.len() as u64, 0o644),
            _ => return None,
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: 1,
            atime: self.start,
            mtime: self.start,
            ctime: self.start,
            crtime: self.start,
            kind,
            perm,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }
}

impl Filesystem for SlowFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match (parent.0, name.to_str()) {
            (1, Some("late.txt")) => reply.entry(&TTL, &self.attr(2).unwrap(), Generation(0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        _size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut open = self.gate.open.lock().unwrap();
        while !*open {
            open = self.gate.cv.wait(open).unwrap();
        }
        let at = (offset as usize).min(LATE.len());
        reply.data(&LATE[at..]);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 != 1 {
            return reply.error(Errno::ENOTDIR);
        }
        if offset == 0 {
            let _ = reply.add(INodeNo(2), 1, FileType::RegularFile, "late.txt");
        }
        reply.ok();
    }
}

/// The mounted file system; unmounted (after releasing every read) when dropped.
pub struct Slow {
    gate: Arc<Gate>,
    dir: tempfile::TempDir,
    session: Option<fuser::BackgroundSession>,
}

impl Slow {
    pub fn mount() -> Slow {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(Gate::default());
        let mut config = fuser::Config::default();
        config.mount_options = vec![MountOption::FSName("wip-test-slow".into())];
        config.n_threads = Some(4);
        let fs = SlowFs {
            gate: gate.clone(),
            start: SystemTime::now(),
        };
        let session = fuser::spawn_mount(fs, dir.path(), &config).unwrap();
        Slow {
            gate,
            dir,
            session: Some(session),
        }
    }

    /// The mount point: a directory holding `late.txt`.
    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// `release` after `delay`, from another thread: a process killed while its read waits
    /// in this file system dies only once the read is answered.
    pub fn release_after(&self, delay: Duration) -> std::thread::JoinHandle<()> {
        let gate = self.gate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            *gate.open.lock().unwrap() = true;
            gate.cv.notify_all();
        })
    }

    /// Let every read (waiting or to come) answer.
    pub fn release(&self) {
        *self.gate.open.lock().unwrap() = true;
        self.gate.cv.notify_all();
    }
}

impl Drop for Slow {
    fn drop(&mut self) {
        self.release();
        drop(self.session.take());
        // Lazily, should a reader still hold it.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .stderr(std::process::Stdio::null())
            .status();
    }
}
