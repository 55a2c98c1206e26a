//! Before-images: what a change through the mount replaced (a file's bytes before a write,
//! a truncate, a removal, a rename over it), kept so the change can be undone.
//!
//! Kept in the state directory, named by sha256 (the same bytes are kept once), within a
//! budget (`keep_before`): the oldest are dropped first, and an undo that needs a dropped
//! one says so. A file about to be unlinked whose inode has no other name is linked into
//! the store instead of copied (same file system), so `rm -rf` and `git checkout` copy
//! nothing; a file about to be written in place is copied (a reflink where the file system
//! offers one; ext4 has none).

use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use sha2::Digest;

use crate::host::tree::Kept;

/// The default budget: 1 GiB per files host.
pub const DEFAULT_BUDGET: u64 = 1 << 30;

/// Files up to this size are copied into the store, larger ones linked where they can be.
const LINK_MIN: u64 = 64 << 10;

/// `FICLONE`: a reflink of a whole file (btrfs, xfs; ext4 answers EOPNOTSUPP or EXDEV).
const FICLONE: libc::c_ulong = 0x4004_9409;

pub struct BeforeStore {
    dir: PathBuf,
    dir_fd: OwnedFd,
    budget: u64,
    inner: Mutex<Index>,
    counter: AtomicU64,
}

#[derive(Default)]
struct Index {
    /// Kept images, oldest first (a reuse moves one to the end).
    order: VecDeque<String>,
    sizes: HashMap<String, u64>,
    total: u64,
    /// Images a revert in progress needs: never dropped meanwhile.
    pinned: HashMap<String, usize>,
    /// Images kept fresh for one change and not since asked for by another: only these
    /// may go back (`unkeep`).
    fresh: std::collections::HashSet<String>,
}

fn is_sha(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

impl BeforeStore {
    /// Open (or make) the store at `dir`, learning what it holds, oldest first by the time
    /// each image was kept.
    pub fn open(dir: &Path, budget: u64) -> io::Result<BeforeStore> {
        std::fs::create_dir_all(dir)?;
        let handle = File::open(dir)?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".tmp-") {
                // A copy cut off by a stop.
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            if !is_sha(&name) {
                continue;
            }
            let meta = entry.metadata()?;
            use std::os::unix::fs::MetadataExt;
            found.push((meta.ctime(), meta.ctime_nsec(), name, meta.len()));
        }
        found.sort();
        let mut index = Index::default();
        for (_, _, name, size) in found {
            index.total += size;
            index.sizes.insert(name.clone(), size);
            index.order.push_back(name);
        }
        let store = BeforeStore {
            dir: dir.to_path_buf(),
            dir_fd: handle.into(),
            budget,
            inner: Mutex::new(index),
            counter: AtomicU64::new(0),
        };
        store.trim(&mut store.index());
        Ok(store)
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn temp_name(&self) -> CString {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        // A name never a sha; unique in this process, and a stale one is swept at open.
        CString::new(format!(".tmp-{}-{n}", std::process::id())).unwrap_or_default()
    }

    /// The temp file `temp` of the store, to read.
    fn open_temp(&self, temp: &CString) -> io::Result<File> {
        // SAFETY: a valid directory descriptor and a NUL-terminated name; owned below.
        let r = unsafe {
            libc::openat(
                self.dir_fd.as_raw_fd(),
                temp.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor this function owns.
        Ok(unsafe { File::from_raw_fd(r) })
    }

    /// Drop the oldest images until the store is within its budget.
    fn trim(&self, index: &mut Index) {
        let mut kept = VecDeque::new();
        while index.total > self.budget {
            let Some(oldest) = index.order.pop_front() else {
                break;
            };
            if index.pinned.contains_key(&oldest) {
                kept.push_back(oldest);
                continue;
            }
            let size = index.sizes.remove(&oldest).unwrap_or(0);
            index.fresh.remove(&oldest);
            index.total = index.total.saturating_sub(size);
            if let Ok(c) = CString::new(oldest.as_bytes()) {
                // SAFETY: a valid directory descriptor and a NUL-terminated name.
                unsafe { libc::unlinkat(self.dir_fd.as_raw_fd(), c.as_ptr(), 0) };
            }
            tracing::debug!(sha256 = %oldest, size, "before-image dropped (keep_before)");
        }
        while let Some(p) = kept.pop_back() {
            index.order.push_front(p);
        }
    }

    /// Give the temp file `temp` (holding `size` bytes hashing to `sha`) its name: a new
    /// image, or one the store had (then `temp` goes).
    fn settle(&self, temp: &CString, sha: String, size: u64) -> io::Result<Kept> {
        let name = CString::new(sha.as_bytes()).unwrap_or_default();
        let fd = self.dir_fd.as_raw_fd();
        let mut index = self.index();
        if index.sizes.contains_key(&sha) {
            index.fresh.remove(&sha);
            // SAFETY: a valid directory descriptor and NUL-terminated names.
            unsafe { libc::unlinkat(fd, temp.as_ptr(), 0) };
            // Newest again: a reuse is as recent as a new one.
            if let Some(at) = index.order.iter().position(|s| *s == sha) {
                index.order.remove(at);
            }
            index.order.push_back(sha.clone());
            return Ok(Kept {
                sha256: sha,
                size,
                fresh: false,
            });
        }
        // SAFETY: as above.
        if unsafe { libc::renameat(fd, temp.as_ptr(), fd, name.as_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: as above.
            unsafe { libc::unlinkat(fd, temp.as_ptr(), 0) };
            return Err(e);
        }
        index.total += size;
        index.sizes.insert(sha.clone(), size);
        index.order.push_back(sha.clone());
        index.fresh.insert(sha.clone());
        self.trim(&mut index);
        Ok(Kept {
            sha256: sha,
            size,
            fresh: true,
        })
    }

    /// Keep a copy of what `source` holds now (a reflink where offered).
    pub fn keep_copy(&self, source: &File) -> io::Result<Kept> {
        let temp = self.temp_name();
        let fd = self.dir_fd.as_raw_fd();
        // SAFETY: a valid directory descriptor and a NUL-terminated name; owned below.
        let raw = unsafe {
            libc::openat(
                fd,
                temp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o400,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor this function owns.
        let out = unsafe { File::from_raw_fd(raw) };
        let done = (|| {
            // SAFETY: two valid descriptors; FICLONE shares the extents or fails.
            let cloned = unsafe { libc::ioctl(out.as_raw_fd(), FICLONE, source.as_raw_fd()) } == 0;
            if cloned {
                // Hash what the clone holds (the source may move on meanwhile).
                digest(&self.open_temp(&temp)?, None)
            } else {
                digest(source, Some(&out))
            }
        })();
        drop(out);
        match done {
            Ok((sha, size)) => self.settle(&temp, sha, size),
            Err(e) => {
                // SAFETY: as above.
                unsafe { libc::unlinkat(fd, temp.as_ptr(), 0) };
                Err(e)
            }
        }
    }

    /// Keep `name` in `dir` (a regular file about to be unlinked or replaced): its inode
    /// itself when no other name holds it and the store is on the same file system, else
    /// a copy. `None`: not a regular file.
    pub fn keep_named(&self, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<Kept>> {
        let c = cstr(name)?;
        // SAFETY: a zeroed stat is valid; fstatat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor, a NUL-terminated name, a stat to fill.
        if unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(None);
        }
        let fd = self.dir_fd.as_raw_fd();
        // A small file is copied: a program may still hold it open for writing (a lock, a
        // SQLite `-shm`) and would change a linked image after the fact.
        if st.st_nlink == 1 && st.st_size as u64 > LINK_MIN {
            let temp = self.temp_name();
            // SAFETY: valid descriptors and NUL-terminated names.
            if unsafe { libc::linkat(dir.as_raw_fd(), c.as_ptr(), fd, temp.as_ptr(), 0) } == 0 {
                let hashed = self.open_temp(&temp).and_then(|f| digest(&f, None));
                return match hashed {
                    Ok((sha, size)) => self.settle(&temp, sha, size).map(Some),
                    Err(e) => {
                        // SAFETY: as above.
                        unsafe { libc::unlinkat(fd, temp.as_ptr(), 0) };
                        Err(e)
                    }
                };
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EXDEV) && e.raw_os_error() != Some(libc::EPERM) {
                return Err(e);
            }
        }
        // SAFETY: valid descriptor and name; owned below.
        let r = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned here.
        let f = unsafe { File::from_raw_fd(r) };
        self.keep_copy(&f).map(Some)
    }

    /// Drop a fresh image its change did not need (unless another change kept the same
    /// bytes meanwhile: then it is no longer fresh to anyone, and stays).
    pub fn unkeep(&self, kept: &Kept) {
        if !kept.fresh {
            return;
        }
        let mut index = self.index();
        if index.pinned.contains_key(&kept.sha256) || !index.fresh.remove(&kept.sha256) {
            return;
        }
        if let Some(size) = index.sizes.remove(&kept.sha256) {
            index.total = index.total.saturating_sub(size);
            if let Some(at) = index.order.iter().position(|s| *s == kept.sha256) {
                index.order.remove(at);
            }
            if let Ok(c) = CString::new(kept.sha256.as_bytes()) {
                // SAFETY: a valid directory descriptor and a NUL-terminated name.
                unsafe { libc::unlinkat(self.dir_fd.as_raw_fd(), c.as_ptr(), 0) };
            }
        }
    }

    /// Open a kept image to read.
    pub fn open_kept(&self, sha: &str) -> io::Result<File> {
        if !is_sha(sha) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.dir.join(sha))
    }

    pub fn pin(&self, shas: &[String], pin: bool) {
        let mut index = self.index();
        for s in shas {
            if pin {
                *index.pinned.entry(s.clone()).or_default() += 1;
            } else if let Some(n) = index.pinned.get_mut(s) {
                *n -= 1;
                if *n == 0 {
                    index.pinned.remove(s);
                }
            }
        }
        if !pin {
            self.trim(&mut index);
        }
    }

    /// Bytes kept now.
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.index().total
    }
}

/// The sha256 (hex) and size of what `src` holds from its start, copied into `out` too.
pub fn digest(src: &File, out: Option<&File>) -> io::Result<(String, u64)> {
    use std::os::unix::fs::FileExt;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = match src.read_at(&mut buf, size) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        if let Some(mut out) = out {
            out.write_all(&buf[..n])?;
        }
        size += n as u64;
    }
    Ok((hex(&h.finalize()), size))
}

/// `1 GiB`, `512 MiB`, `0`, or a number of bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.trim().parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Some((n * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    fn store(budget: u64) -> (tempfile::TempDir, BeforeStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = BeforeStore::open(&dir.path().join("before"), budget).unwrap();
        (dir, s)
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("1 GiB"), Some(1 << 30));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("1.5 KiB"), Some(1536));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-1 GiB"), None);
    }

    #[test]
    fn the_same_bytes_are_kept_once_and_a_copy_reads_back() {
        let (dir, s) = store(1 << 20);
        let a = dir.path().join("a");
        std::fs::write(&a, b"hello\n").unwrap();
        let k1 = s.keep_copy(&File::open(&a).unwrap()).unwrap();
        let k2 = s.keep_copy(&File::open(&a).unwrap()).unwrap();
        assert!(k1.fresh && !k2.fresh);
        assert_eq!(k1.sha256, k2.sha256);
        assert_eq!(s.total(), 6);
        let mut back = String::new();
        s.open_kept(&k1.sha256)
            .unwrap()
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, "hello\n");
    }

    #[test]
    fn a_sole_name_is_linked_not_copied_and_one_with_other_names_is_copied() {
        let (dir, s) = store(1 << 20);
        let d = File::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("f"), vec![b'1'; 100 << 10]).unwrap();
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(dir.path().join("f")).unwrap().ino();
        let k = s.keep_named(d.as_fd(), OsStr::new("f")).unwrap().unwrap();
        assert_eq!(
            std::fs::metadata(s.dir().join(&k.sha256)).unwrap().ino(),
            ino,
            "linked"
        );
        std::fs::write(dir.path().join("g"), b"two\n").unwrap();
        std::fs::hard_link(dir.path().join("g"), dir.path().join("g2")).unwrap();
        let k = s.keep_named(d.as_fd(), OsStr::new("g")).unwrap().unwrap();
        assert_ne!(
            std::fs::metadata(s.dir().join(&k.sha256)).unwrap().ino(),
            std::fs::metadata(dir.path().join("g")).unwrap().ino(),
            "copied: the other name may still change it"
        );
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        assert!(s.keep_named(d.as_fd(), OsStr::new("l")).unwrap().is_none());
    }

    #[test]
    fn the_oldest_are_dropped_past_the_budget_but_never_a_pinned_one() {
        let (dir, s) = store(10);
        let write = |name: &str, body: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            s.keep_copy(&File::open(&p).unwrap()).unwrap()
        };
        let a = write("a", b"aaaa");
        s.pin(std::slice::from_ref(&a.sha256), true);
        let b = write("b", b"bbbb");
        let c = write("c", b"cccc");
        assert!(s.open_kept(&a.sha256).is_ok(), "pinned");
        assert!(
            s.open_kept(&b.sha256).is_err(),
            "the oldest unpinned one went"
        );
        assert!(s.open_kept(&c.sha256).is_ok());
        s.pin(std::slice::from_ref(&a.sha256), false);
        assert!(s.total() <= 10);
        // Reopened, it knows what it holds.
        let again = BeforeStore::open(s.dir(), 10).unwrap();
        assert_eq!(again.total(), s.total());
    }

    #[test]
    fn an_unneeded_fresh_image_goes_and_a_shared_one_stays() {
        let (dir, s) = store(1 << 20);
        let p = dir.path().join("x");
        std::fs::write(&p, b"same").unwrap();
        let k = s.keep_copy(&File::open(&p).unwrap()).unwrap();
        let again = s.keep_copy(&File::open(&p).unwrap()).unwrap();
        s.unkeep(&again);
        s.unkeep(&k);
        assert!(
            s.open_kept(&k.sha256).is_ok(),
            "a second change kept the same bytes: they stay for it"
        );
        std::fs::write(&p, b"other").unwrap();
        let k = s.keep_copy(&File::open(&p).unwrap()).unwrap();
        s.unkeep(&k);
        assert!(s.open_kept(&k.sha256).is_err());
        assert_eq!(s.total(), 4);
    }
}
