//! Everything the daemon reads of `/proc`: who is calling (the kernel gives a pid; `/proc`
//! gives its session and command line), a process's lineage (the control socket judges a
//! decision by it), and which processes exist or were created since a moment (the
//! last-close check of `fuse::holders`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::host::{Caller, Session};

impl Caller {
    /// Describe the process `pid` (best effort: a process that already exited still gets a
    /// caller with its pid as its session, so its result stays its own).
    pub fn from_pid(pid: u32, uid: u32) -> Caller {
        let stat = proc_stat(pid);
        let (session, session_start) = match &stat {
            Some(s) => sessions().of(pid, s),
            None => (pid, 0),
        };
        // The command line is read once per process: an agent's shell opens `call`
        // again and again, and its pid with its start time names it without ambiguity.
        let command = match stat {
            Some(s) => commands().get_or_read(pid, s.start, || command_of(pid)),
            None => command_of(pid),
        };
        Caller {
            pid,
            uid,
            session,
            session_start,
            command: command.unwrap_or_default(),
            run: String::new(),
            signal: Default::default(),
            judged: None,
        }
    }
}

/// What `/proc/PID/stat` says of a process.
#[derive(Clone, Copy, Debug)]
pub struct ProcStat {
    pub ppid: u32,
    pub session: u32,
    /// When the process started, in clock ticks since boot (field 22).
    pub start: u64,
}

/// Enough for /proc/PID/stat and a FUSE file's fdinfo, read in one `read(2)`.
pub const PROC_READ: usize = 1024;

/// A small /proc file, in one read and without a `statx` (the last-close check reads
/// dozens of them per flush, and `fs::read_to_string` makes four or five calls for each).
pub fn read_proc<'b>(path: &str, buf: &'b mut [u8; PROC_READ]) -> Option<&'b [u8]> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(&buf[..len])
}

/// Fields 4, 6 and 22 of `/proc/PID/stat`. The command name (field 2) may hold spaces and
/// parentheses, so parse after the last `)`.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let mut buf = [0u8; PROC_READ];
    let stat = read_proc(&format!("/proc/{pid}/stat"), &mut buf)?;
    let rest = std::str::from_utf8(&stat[stat.iter().rposition(|b| *b == b')')? + 1..]).ok()?;
    // `rest` starts at field 3 (state): ppid is field 4, the session 6, the start 22.
    let mut fields = rest.split_whitespace();
    let ppid = fields.nth(1)?.parse().ok()?;
    let session = fields.nth(1)?.parse().ok()?;
    let start = fields.nth(15)?.parse().ok()?;
    Some(ProcStat {
        ppid,
        session,
        start,
    })
}

/// Command lines of processes seen lately, by pid and start time.
#[derive(Default)]
struct Commands {
    by_process: std::sync::Mutex<std::collections::HashMap<(u32, u64), String>>,
}

/// How many processes' command lines are kept (a few hundred bytes each).
const COMMANDS_MAX: usize = 1024;

fn commands() -> &'static Commands {
    static COMMANDS: std::sync::OnceLock<Commands> = std::sync::OnceLock::new();
    COMMANDS.get_or_init(Commands::default)
}

impl Commands {
    fn get_or_read(
        &self,
        pid: u32,
        start: u64,
        read: impl FnOnce() -> Option<String>,
    ) -> Option<String> {
        let lock = || self.by_process.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = lock().get(&(pid, start)) {
            return Some(c.clone());
        }
        let command = read()?;
        // An exec in progress shows an empty command line for a moment (the new image's
        // arguments are not set up yet): ask again next time rather than keep it.
        if command.is_empty() {
            return Some(command);
        }
        let mut map = lock();
        if map.len() >= COMMANDS_MAX {
            map.clear();
        }
        map.insert((pid, start), command.clone());
        Some(command)
    }
}

/// The session id of process `pid`.
pub fn session_of(pid: u32) -> Option<u32> {
    proc_stat(pid).map(|s| s.session)
}

/// The session of process `pid` (a thread id, as FUSE gives it) calling as `uid`: its
/// number and when it began (see `Session`). A process already gone gets its pid as its
/// number, begun at an unknown time.
pub fn session(pid: u32, uid: u32) -> Session {
    let (number, start) = match proc_stat(pid) {
        Some(s) => sessions().of(pid, &s),
        None => (pid, 0),
    };
    Session { number, start, uid }
}

/// When each session began, as learnt from processes seen in it, by the process's pid
/// and start time: the leader's start while it lives, and, once it is gone (a member may
/// outlive it), what was learnt while it lived. A process keeps its session until it
/// calls setsid (which makes it a leader, its pid the number), and the kernel hands no
/// session's number out again while a process of the session lives; so a live process
/// found here, still in the number it was seen in, is still in that very session.
#[derive(Default)]
struct Sessions {
    /// (pid, start) of a process → (its session's number, the session's start).
    by_process: Mutex<HashMap<(u32, u64), (u32, u64)>>,
}

/// How many processes' sessions are kept (about 50 bytes each); past it, those of
/// processes that are gone are dropped.
const SESSIONS_MAX: usize = 16_384;

/// How far up its ancestors a process's session is looked for.
const LINEAGE_MAX: usize = 64;

fn sessions() -> &'static Sessions {
    static SESSIONS: OnceLock<Sessions> = OnceLock::new();
    SESSIONS.get_or_init(Sessions::default)
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<(u32, u64), (u32, u64)>> {
        self.by_process.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When process `pid` (as `stat` shows it) was seen in session `sid`, the session's
    /// start then.
    fn seen(&self, pid: u32, start: u64, sid: u32) -> Option<u64> {
        match self.lock().get(&(pid, start)) {
            Some((number, began)) if *number == sid => Some(*began),
            _ => None,
        }
    }

    /// The number and start of the session process `pid` is in (0: unknown).
    fn of(&self, pid: u32, stat: &ProcStat) -> (u32, u64) {
        let sid = stat.session;
        if pid == sid {
            return (sid, stat.start);
        }
        if let Some(began) = self.seen(pid, stat.start, sid) {
            return (sid, began);
        }
        // The process, its thread group's leader and its ancestors in the session, up to
        // the first one seen before: all learn the session's start now, so a process one
        // of them starts after the leader exits still finds it.
        let mut chain = vec![(pid, stat.start)];
        let mut known = None;
        let mut p = thread_group_of(pid)
            .filter(|g| *g != pid)
            .unwrap_or(stat.ppid);
        for _ in 0..LINEAGE_MAX {
            if p == 0 || p == sid {
                break;
            }
            let Some(s) = proc_stat(p) else { break };
            if s.session != sid {
                break;
            }
            if let Some(began) = self.seen(p, s.start, sid) {
                known = Some(began);
                break;
            }
            chain.push((p, s.start));
            p = s.ppid;
        }
        let began = match proc_stat(sid) {
            // The leader lives: its pid is the session's number.
            Some(leader) if leader.session == sid => leader.start,
            _ => match known {
                Some(began) => began,
                // Nobody of this session was seen while its leader lived: its start
                // cannot be told (such a session matches only one as unknown, of the
                // same uid).
                None => return (sid, 0),
            },
        };
        self.remember(&chain, sid, began);
        (sid, began)
    }

    fn remember(&self, chain: &[(u32, u64)], sid: u32, began: u64) {
        if self.lock().len() + chain.len() > SESSIONS_MAX {
            self.forget_the_gone();
        }
        let mut map = self.lock();
        if map.len() + chain.len() > SESSIONS_MAX {
            // Every one kept still lives: start again rather than grow (a member whose
            // leader is gone then counts as a session of unknown start).
            map.clear();
        }
        for key in chain {
            map.insert(*key, (sid, began));
        }
    }

    /// Drop the processes that are gone (their pid is free or another process's).
    fn forget_the_gone(&self) {
        let kept: Vec<(u32, u64)> = self.lock().keys().copied().collect();
        let gone: Vec<(u32, u64)> = kept
            .into_iter()
            .filter(|(pid, start)| proc_stat(*pid).map(|s| s.start) != Some(*start))
            .collect();
        let mut map = self.lock();
        for key in gone {
            map.remove(&key);
        }
    }
}

/// The thread group (process) a thread id belongs to, from `/proc/TID/status`.
pub fn thread_group_of(tid: u32) -> Option<u32> {
    let mut buf = [0u8; PROC_READ];
    let status = read_proc(&format!("/proc/{tid}/status"), &mut buf)?;
    std::str::from_utf8(status)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// The sessions of a process and of all its ancestors (number and start, see
/// `Session`), the process's own first (empty when it cannot be read).
pub fn lineage_sessions(pid: u32) -> Vec<(u32, u64)> {
    let mut found = Vec::new();
    let mut p = pid;
    // Bounded: a process tree is never this deep, and /proc may change under us.
    for _ in 0..256 {
        let Some(stat) = proc_stat(p) else { break };
        let session = sessions().of(p, &stat);
        if !found.contains(&session) {
            found.push(session);
        }
        match stat.ppid {
            parent if parent != 0 && parent != p => p = parent,
            _ => break,
        }
    }
    found
}

/// The last pid the kernel handed out in this pid namespace.
pub fn last_pid() -> Option<u32> {
    let mut buf = [0u8; PROC_READ];
    let text = read_proc("/proc/sys/kernel/ns_last_pid", &mut buf)?;
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// Every process's pid: the numeric names of /proc.
pub fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
}

/// How many pids handed out since the open are probed one by one; past it, /proc is
/// listed instead.
const PROBED_PIDS: u32 = 64;

/// The processes whose pid is above `last` and at most `now`: those created since it was
/// handed out. A few are probed by name (most closes follow their open with no process
/// created in between: nothing to look at); many, from the names of /proc.
pub fn processes_after(last: u32, now: u32) -> Vec<u32> {
    if now - last <= PROBED_PIDS {
        return (last + 1..=now)
            .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
            .collect();
    }
    pids().filter(|p| *p > last).collect()
}

/// `pid` and its ancestors up to (not including) init.
pub fn ancestors(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut p = pid;
    while p > 1 && out.len() < 64 {
        out.push(p);
        match proc_stat(p) {
            Some(s) => p = s.ppid,
            None => break,
        }
    }
    out
}

/// The processes of session `sid`.
pub fn session_members(sid: u32) -> Vec<u32> {
    pids()
        .filter(|p| proc_stat(*p).map(|s| s.session) == Some(sid))
        .collect()
}

/// Whether the process `pid` (a thread id, as FUSE gives it) is on its way out: a signal
/// is pending that it neither blocks, ignores nor catches and whose default action ends
/// the process (SIGKILL always). Such a caller cannot take an answer any more, and keeping
/// its request unanswered would hold it in uninterruptible sleep, so its wait ends now.
pub fn is_dying(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        // Gone already: nobody is waiting.
        return true;
    };
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let pending = field("SigPnd:") | field("ShdPnd:");
    let bit = |sig: i32| 1u64 << (sig - 1);
    if pending & bit(libc::SIGKILL) != 0 {
        return true;
    }
    // Signals whose default action is not to end the process.
    let harmless = [
        libc::SIGCHLD,
        libc::SIGCONT,
        libc::SIGSTOP,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
        libc::SIGURG,
        libc::SIGWINCH,
    ]
    .iter()
    .fold(0u64, |m, s| m | bit(*s));
    let fatal = pending & !harmless & !field("SigBlk:") & !field("SigIgn:") & !field("SigCgt:");
    fatal != 0
}

fn command_of(pid: u32) -> Option<String> {
    use std::io::Read;
    // Only the start: `xargs cat` can have a command line of megabytes.
    let mut raw = Vec::with_capacity(512);
    std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .ok()?
        .take(512)
        .read_to_end(&mut raw)
        .ok()?;
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let mut command = parts.join(" ");
    if command.len() > 300 {
        let mut cut = 300;
        while !command.is_char_boundary(cut) {
            cut -= 1;
        }
        command.truncate(cut);
        command.push('…');
    }
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_has_session_and_command() {
        let me = Caller::from_pid(std::process::id(), 0);
        let sid = unsafe { libc::getsid(0) } as u32;
        assert_eq!(me.session, sid);
        // Begun when its leader started (the leader may be gone: then as first seen).
        if let Some(leader) = proc_stat(sid).filter(|l| l.session == sid) {
            assert_eq!(me.session_start, leader.start);
        }
        assert_eq!(
            session(std::process::id(), 7),
            Session {
                number: sid,
                start: me.session_start,
                uid: 7
            }
        );
        assert!(!me.command.is_empty());
        assert!(!is_dying(std::process::id()));
    }

    #[test]
    fn each_process_gets_its_own_command_line_however_often_it_asks() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = Caller::from_pid(std::process::id(), 0);
        // spawn returns once the exec has begun; its arguments show a moment later.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while Caller::from_pid(child.id(), 0).command.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "sleep's command line never showed"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for _ in 0..3 {
            let c = Caller::from_pid(child.id(), 0);
            assert_eq!(c.command, "sleep 30");
            assert_eq!(Caller::from_pid(std::process::id(), 0).command, me.command);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Gone: no stat, no command, its pid as its session, begun at an unknown time.
        let gone = Caller::from_pid(child.id(), 0);
        assert_eq!(
            (gone.session, gone.session_start, gone.command.as_str()),
            (child.id(), 0, "")
        );
    }

    /// A leader, a member seen while the leader lives, and a process that member starts
    /// after the leader exited: all in one session, begun when the leader started; a new
    /// session is told apart by its own start.
    #[test]
    fn a_sessions_start_outlives_its_leader_in_its_members_and_their_children() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let wait_for = |file: &str| {
            let path = dir.path().join(file);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                if let Some(pid) = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok())
                {
                    return pid;
                }
                assert!(std::time::Instant::now() < deadline, "no {file}");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        let touch = |file: &str| std::fs::write(dir.path().join(file), "").unwrap();
        // The leader starts the member and leaves once told; the member starts its child
        // once told (after the leader is gone).
        let mut leader = std::process::Command::new("setsid")
            .arg("sh")
            .arg("-c")
            .arg(format!(
                "sh -c 'echo $$ > {d}/m.tmp && mv {d}/m.tmp {d}/m
                        while [ ! -e {d}/go ]; do sleep 0.01; done
                        sleep 30 & echo $! > {d}/c.tmp && mv {d}/c.tmp {d}/c; wait' &
                 while [ ! -e {d}/seen ]; do sleep 0.01; done"
            ))
            .spawn()
            .unwrap();
        let sid = leader.id();
        let member = wait_for("m");
        let started = proc_stat(sid).unwrap().start;
        let of = |pid| session(pid, 0);
        let want = Session {
            number: sid,
            start: started,
            uid: 0,
        };
        assert_eq!(of(sid), want, "the leader");
        assert_eq!(of(member), want, "the member, while the leader lives");
        touch("seen");
        leader.wait().unwrap();
        assert!(proc_stat(sid).is_none(), "the leader is gone");
        assert_eq!(of(member), want, "the member, its leader gone");
        touch("go");
        let child = wait_for("c");
        assert_eq!(of(child), want, "a child started after the leader left");
        // A session of its own, begun now, is another one.
        let me = session(std::process::id(), 0);
        assert_ne!(me, want);
        for pid in [child, member] {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }

    #[test]
    fn a_killed_process_is_dying() {
        // A stopped child with SIGTERM pending (default action: end) is dying; one with
        // only SIGCHLD-like signals pending is not.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        let wait_state = |want: char| {
            for _ in 0..500 {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                if stat
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.trim().chars().next())
                    == Some(want)
                {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            panic!("process {pid} never reached state {want}");
        };
        wait_state('T');
        unsafe { libc::kill(pid as i32, libc::SIGWINCH) };
        assert!(!is_dying(pid), "SIGWINCH does not end a process");
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        assert!(is_dying(pid), "SIGTERM pending on a stopped process");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(is_dying(pid), "a reaped process is gone");
    }
}
