//! Is this close the last one? FUSE sends a FLUSH for every `close(2)` of any copy of an
//! open file description (a forked child exiting, bash restoring a redirected descriptor)
//! and tells nobody which one is last; only RELEASE is, and its errors reach nobody.
//!
//! So a flush asks /proc: does any process of the closing process's session, or one of
//! its ancestors, still hold a descriptor writing through this inode? Writable inodes have
//! one writer description each (see `inodes`), so any such descriptor is a copy of this
//! one. A copy passed to a process of another session is not seen: that close runs the
//! call early only in that unusual case.

use std::fs;
use std::path::Path;

/// Whether a process related to `pid` still has inode `ino` of the mount at `mount`
/// (mount id `mnt_id`, when known) open for writing.
pub fn still_open(pid: u32, ino: u64, mount: &Path, mnt_id: Option<u64>) -> bool {
    let mut candidates = ancestors(pid);
    if let Some(sid) = crate::world::caller::session_of(pid) {
        candidates.extend(session_members(sid));
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

/// `pid` and its ancestors up to (not including) init.
fn ancestors(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut p = pid;
    while p > 1 && out.len() < 64 {
        out.push(p);
        match stat_fields(p).and_then(|f| f.first().and_then(|s| s.parse().ok())) {
            Some(parent) => p = parent,
            None => break,
        }
    }
    out
}

/// The fields of /proc/PID/stat after the command (state, ppid, pgrp, session, …).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(
        rest.split_whitespace()
            .skip(1)
            .map(str::to_string)
            .collect(),
    )
}

fn session_members(sid: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            stat_fields(*p).and_then(|f| f.get(2).and_then(|s| s.parse::<u32>().ok())) == Some(sid)
        })
        .collect()
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
        let info = fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
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
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_descriptor_of_this_process_is_seen_until_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = fs::File::create(&path).unwrap();
        let ino = file.metadata().unwrap().ino();
        let me = std::process::id();
        assert!(still_open(me, ino, dir.path(), None));
        assert!(!still_open(me, ino + 1, dir.path(), None), "another inode");
        drop(file);
        assert!(!still_open(me, ino, dir.path(), None));
        // Read-only descriptors do not count.
        let reader = fs::File::open(&path).unwrap();
        assert!(!still_open(me, ino, dir.path(), None));
        drop(reader);
    }
}
