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
//!
//! A copy marked close-on-exec in a process other than the opener is not counted: that is
//! a fork on its way to `exec` (another thread of a multi-threaded caller, a test harness
//! or an agent runtime, starting a program while this thread wrote its call), and it goes
//! at that exec. Counted, the opener's own close was judged "not the last", answered 0, and
//! the call ran at the child's exec (or at RELEASE) with its errno told to nobody. A forked
//! child that never execs and goes on writing through such a copy is the case this misses:
//! the opener's close runs the call, and the child's later bytes are refused with words.

use std::fs;
use std::path::Path;

use crate::proc::{
    ancestors, last_pid, processes_after, read_proc, session_members, session_of, thread_group_of,
    PROC_READ,
};

/// Who opened a writer (the thread FUSE named, and its process), and the last pid handed
/// out then.
#[derive(Clone, Copy, Debug)]
pub struct Opened {
    opener: u32,
    group: Option<u32>,
    last_pid: Option<u32>,
}

impl Opened {
    pub fn now(opener: u32) -> Opened {
        Opened {
            opener,
            group: thread_group_of(opener),
            last_pid: last_pid(),
        }
    }

    /// Whether thread `pid` belongs to the process that opened the descriptor.
    pub fn by_opener(&self, pid: u32) -> bool {
        pid == self.opener || (self.group.is_some() && thread_group_of(pid) == self.group)
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
        .find(|p| holds(*p, ino, prefix, mnt_id, || opened.by_opener(*p)));
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

/// Whether process `pid` has a descriptor on our inode open for writing: one marked
/// close-on-exec only if `own()` (the process is the opener's).
fn holds(
    pid: u32,
    ino: u64,
    mount_prefix: &[u8],
    mnt_id: Option<u64>,
    mut own: impl FnMut() -> bool,
) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    for fd in fds.flatten() {
        // Only fdinfo when the mount's id is known: reading the link /proc/PID/fd/N (as
        // /proc/PID/stat) waits for an exec of PID to end (its exec_update_lock, since
        // Linux 6.18.40, 6.12.97, 6.6.145, 6.1.178), and an exec closing its close-on-exec
        // copy of a `call` waits for the answer to that FLUSH: the FLUSH of such a child
        // (or of another, judged while it execs) would wait for itself, forever. The
        // listing of /proc/PID/fd and the fdinfo files do not wait.
        if mnt_id.is_none() {
            // The link names the file's path (with " (deleted)" after an invalidation):
            // it rules out every descriptor outside the mount.
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
            (Some(_), None) => false,
            (None, _) => true,
        };
        // fdinfo's flags carry the descriptor's close-on-exec bit besides the file's.
        let flags = field("flags:").and_then(|v| i32::from_str_radix(&v, 8).ok());
        let writing = flags.is_some_and(|f| f & libc::O_ACCMODE != libc::O_RDONLY);
        let until_exec = flags.is_some_and(|f| f & libc::O_CLOEXEC != 0);
        if same_ino && same_mount && writing && (!until_exec || own()) {
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

    /// A forked child that waits (as a fork does between `fork` and `exec`), holding the
    /// descriptors it inherited.
    fn fork_holding() -> libc::pid_t {
        match unsafe { libc::fork() } {
            0 => loop {
                unsafe { libc::pause() };
            },
            pid => {
                assert!(pid > 0, "fork");
                pid
            }
        }
    }

    fn end(pid: libc::pid_t) {
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }

    #[test]
    fn a_close_on_exec_copy_in_a_fork_is_not_held_and_an_inheritable_one_is() {
        use std::os::fd::AsRawFd;
        let (dir, path, file, ino, opened) = opened_here();
        let me = std::process::id();
        // The mount id as the daemon knows it: only fdinfo is read, never the links.
        let mnt = {
            let mut buf = [0u8; PROC_READ];
            let info = read_proc(&format!("/proc/self/fdinfo/{}", file.as_raw_fd()), &mut buf)
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("mnt_id:"))
                .map(|v| v.trim().parse::<u64>().unwrap())
        };
        assert!(mnt.is_some());
        let still_open = |opened: Opened| still_open(me, opened, ino, dir.path(), mnt);
        // Another thread starting a program while this one writes: its fork holds the
        // close-on-exec copy (std opens files so) until its exec. The opener's own copy
        // counts, the fork's does not: the opener's close is the last one.
        let on_its_way_to_exec = fork_holding();
        assert!(still_open(opened));
        drop(file);
        assert!(!still_open(opened));
        // A copy made to be inherited (a redirection, a background job's stdout) counts.
        let opened = Opened::now(me);
        let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        assert_eq!(
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFD, 0) },
            0
        );
        let inheriting = fork_holding();
        drop(file);
        assert!(still_open(opened));
        end(inheriting);
        end(on_its_way_to_exec);
        assert!(!still_open(opened));
    }
}
