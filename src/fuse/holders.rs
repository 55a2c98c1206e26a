//! Is this close the last one? FUSE sends a FLUSH for every `close(2)` of any copy of an
//! open file description (a forked child exiting, bash restoring a redirected descriptor)
//! and tells nobody which one is last; only RELEASE is, and its errors reach nobody.
//!
//! So a flush asks /proc: does any process that could have a copy still hold a descriptor
//! writing through this inode? Writable inodes have one writer description each (see
//! `inodes`), so any such descriptor is a copy of this one. Only the process that opened
//! it, or a process created after the open (a fork inherits descriptors; an older process
//! could get one only passed over a socket), can hold a copy. The kernel hands out pids in
//! order, so those are the opener and the pids above the last one handed out when the file
//! was opened: a plain `echo … > call` checks one process rather than every process of the
//! machine (and not the closer's ancestors, an agent runtime with hundreds of descriptors
//! among them). When pids wrapped around since the open (or the last pid cannot be read),
//! the closer's session and ancestors are checked instead; a copy passed to a process of
//! another session is then not seen, and that close runs the call early only in that
//! unusual case.

use std::fs;
use std::path::Path;

use crate::proc::{
    ancestors, last_pid, processes_after, read_proc, session_members, session_of, PROC_READ,
};

/// Who opened a writer, and the last pid handed out then.
#[derive(Clone, Copy, Debug)]
pub struct Opened {
    opener: u32,
    last_pid: Option<u32>,
}

impl Opened {
    pub fn now(opener: u32) -> Opened {
        Opened {
            opener,
            last_pid: last_pid(),
        }
    }
}

/// Whether a process that may hold a copy of the descriptor opened as `opened` still has
/// inode `ino` of the mount at `mount` (mount id `mnt_id`, when known) open for writing;
/// `pid` is closing it.
pub fn still_open(pid: u32, opened: Opened, ino: u64, mount: &Path, mnt_id: Option<u64>) -> bool {
    let mut candidates = vec![opened.opener];
    match (opened.last_pid, last_pid()) {
        // The closer and its ancestors need no look of their own: one that holds a copy
        // is the opener or was created since.
        (Some(then), Some(now)) if now >= then => candidates.extend(processes_after(then, now)),
        _ => {
            candidates.extend(ancestors(pid));
            if let Some(sid) = session_of(pid) {
                candidates.extend(session_members(sid));
            }
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    let prefix = mount.as_os_str().as_encoded_bytes();
    let found = candidates
        .into_iter()
        .find(|p| holds(*p, ino, prefix, mnt_id));
    if let Some(holder) = found {
        tracing::debug!(
            pid,
            holder,
            ino,
            "a copy of the descriptor is still open: not the last close"
        );
    }
    found.is_some()
}

/// Whether process `pid` has a descriptor on our inode open for writing.
fn holds(pid: u32, ino: u64, mount_prefix: &[u8], mnt_id: Option<u64>) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    for fd in fds.flatten() {
        // The link names the file's path (with " (deleted)" after an invalidation):
        // cheap to read, and it rules out every descriptor outside the mount.
        let Ok(target) = fs::read_link(fd.path()) else {
            continue;
        };
        if !target
            .as_os_str()
            .as_encoded_bytes()
            .starts_with(mount_prefix)
        {
            continue;
        }
        let mut buf = [0u8; PROC_READ];
        let info = read_proc(
            &format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()),
            &mut buf,
        )
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        let same_ino = field("ino:").and_then(|v| v.parse::<u64>().ok()) == Some(ino);
        let same_mount = match (mnt_id, field("mnt_id:").and_then(|v| v.parse::<u64>().ok())) {
            (Some(want), Some(got)) => want == got,
            _ => true,
        };
        let writing = field("flags:")
            .and_then(|v| i32::from_str_radix(&v, 8).ok())
            .is_some_and(|f| f & libc::O_ACCMODE != libc::O_RDONLY);
        if same_ino && same_mount && writing {
            return true;
        }
    }
    false
}

/// The mount id of the mount at `mount` (field 1 of /proc/self/mountinfo).
pub fn mount_id(mount: &Path) -> Option<u64> {
    let want = mount.to_string_lossy().replace(' ', "\\040");
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().rev().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        (fields.get(4) == Some(&want.as_str()))
            .then(|| fields.first()?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::proc_stat;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn stat_fields_name_the_parent_and_the_session() {
        let me = std::process::id();
        let parent = unsafe { libc::getppid() } as u32;
        let sid = unsafe { libc::getsid(0) } as u32;
        let stat = proc_stat(me).unwrap();
        assert_eq!((stat.ppid, stat.session), (parent, sid));
        let chain = ancestors(me);
        assert_eq!(chain.first(), Some(&me));
        assert!(parent <= 1 || chain.contains(&parent), "{chain:?}");
        assert!(session_members(sid).contains(&me));
    }

    /// A file this process opened for writing: its directory, path, handle and inode, and
    /// what `open` noted.
    fn opened_here() -> (tempfile::TempDir, std::path::PathBuf, fs::File, u64, Opened) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let opened = Opened::now(std::process::id());
        let file = fs::File::create(&path).unwrap();
        let ino = file.metadata().unwrap().ino();
        (dir, path, file, ino, opened)
    }

    #[test]
    fn a_descriptor_of_this_process_is_seen_until_closed() {
        let (dir, path, file, ino, opened) = opened_here();
        let me = std::process::id();
        assert!(still_open(me, opened, ino, dir.path(), None));
        assert!(
            !still_open(me, opened, ino + 1, dir.path(), None),
            "another inode"
        );
        drop(file);
        assert!(!still_open(me, opened, ino, dir.path(), None));
        // Read-only descriptors do not count.
        let reader = fs::File::open(&path).unwrap();
        assert!(!still_open(me, opened, ino, dir.path(), None));
        drop(reader);
    }

    #[test]
    fn a_copy_in_a_process_started_after_the_open_is_seen_in_any_session() {
        let (dir, _path, file, ino, opened) = opened_here();
        let me = std::process::id();
        // A child in a session of its own holds a copy as its stdout; this process
        // closes its own, as bash does after starting a background job.
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "30"])
            .stdout(file)
            .spawn()
            .unwrap();
        let session = || proc_stat(child.id()).map(|s| s.session);
        for _ in 0..500 {
            if session() == Some(child.id()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(session(), Some(child.id()));
        assert!(still_open(me, opened, ino, dir.path(), None));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!still_open(me, opened, ino, dir.path(), None));
    }
}
