//! The processes the daemon starts (hosts, and whatever they start in turn): they begin
//! with plain signals, they stay the daemon's descendants even when they detach, and an
//! unmount ends every one of them.
//!
//! The daemon blocks HUP, INT and TERM in all its threads (one thread waits for them), and
//! a signal mask and ignored signals survive exec: started as they are, a host could not be
//! stopped by `kill -TERM`, nor could anything it starts. `plain_signals` undoes that in
//! each child. The daemon is a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process that
//! leaves its parent (a double fork, `setsid`) is reparented to the daemon instead of init,
//! so `end_descendants` finds it at unmount, and `reap_orphans` reaps it when it dies.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::proc::{read_proc, PROC_READ};

/// Set once the mount is ending: no child starts any more (a host restarting its process
/// would outrun `end_descendants`).
static ENDING: AtomicBool = AtomicBool::new(false);

/// For `pre_exec`, in a child between fork and exec: no signal blocked, and every signal
/// at its default action. Once the mount is ending it fails instead (ESHUTDOWN), so
/// nothing starts.
pub fn plain_signals() -> std::io::Result<()> {
    if ENDING.load(Ordering::SeqCst) {
        return Err(std::io::Error::from_raw_os_error(libc::ESHUTDOWN));
    }
    // SAFETY: sigemptyset, pthread_sigmask and sigaction are async-signal-safe and change
    // only this (forked, single-threaded) process; both structs are fully initialised.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut default.sa_mask);
        // KILL and STOP, and the two the C library keeps for itself, refuse: nothing to undo.
        for sig in 1..=64 {
            libc::sigaction(sig, &default, std::ptr::null_mut());
        }
    }
    Ok(())
}

/// Children whose owner waits for them (a host's process, for its exit status): never
/// reaped by `reap_orphans`. By pid and start time, so a reused pid is not mistaken.
fn owned() -> std::sync::MutexGuard<'static, HashSet<(u32, u64)>> {
    static OWNED: std::sync::LazyLock<Mutex<HashSet<(u32, u64)>>> =
        std::sync::LazyLock::new(Mutex::default);
    OWNED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Child `pid` was started here and is waited for by whoever started it.
pub fn own(pid: u32) {
    if let Some((_, start)) = state_of(pid) {
        owned().insert((pid, start));
    }
}

/// The state letter (`R`, `S`, `Z`, …) and start time of process `pid`.
fn state_of(pid: u32) -> Option<(u8, u64)> {
    let mut buf = [0u8; PROC_READ];
    let stat = read_proc(&format!("/proc/{pid}/stat"), &mut buf)?;
    let rest = &stat[stat.iter().rposition(|b| *b == b')')? + 1..];
    let rest = std::str::from_utf8(rest).ok()?;
    let mut fields = rest.split_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // Field 22 (the start time) is the 20th after the state.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// The children of process `pid`, from each of its threads' `children` file.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// Every descendant of this process, parents before their children.
fn descendants() -> Vec<u32> {
    let mut out = children_of(std::process::id());
    let mut i = 0;
    // Bounded: /proc changes under us, and a cycle must not loop forever.
    while i < out.len() && out.len() < 65_536 {
        for kid in children_of(out[i]) {
            if !out.contains(&kid) {
                out.push(kid);
            }
        }
        i += 1;
    }
    out
}

/// Reap child `pid` if it has ended.
fn reap(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    let mut status = 0;
    // SAFETY: waitpid on one child of ours, without blocking.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
}

/// Make this process its descendants' reaper. Returns false where the kernel refuses
/// (then a detached process goes to init, as it would without this).
pub fn become_subreaper() -> bool {
    // SAFETY: prctl with an integer argument changes only this process's reaper flag.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if rc != 0 {
        tracing::warn!(
            "cannot become the reaper of the hosts' processes ({}): a process a host detaches outlives the unmount",
            std::io::Error::last_os_error()
        );
    }
    rc == 0
}

/// How often the orphans that reparented here are looked for.
const REAP_EVERY: Duration = Duration::from_secs(5);

/// Reap, on a thread of its own, the children that ended and nobody waits for: the
/// orphans that reparented here. A child that was a zombie at two looks in a row, and is
/// not `own`ed, is one (a child started here is waited for by its starter as it ends).
pub fn reap_orphans() {
    let spawned = std::thread::Builder::new().name("reaper".into()).spawn(|| {
        let mut seen: HashSet<(u32, u64)> = HashSet::new();
        loop {
            std::thread::sleep(REAP_EVERY);
            seen = reap_once(&seen);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the reaper of orphaned processes: {e}");
    }
}

/// One look: reap the zombies `before` saw too; the zombies seen now.
fn reap_once(before: &HashSet<(u32, u64)>) -> HashSet<(u32, u64)> {
    let mut now = HashSet::new();
    let mut own = owned();
    own.retain(|(pid, start)| state_of(*pid).is_some_and(|(_, s)| s == *start));
    for pid in children_of(std::process::id()) {
        let Some((b'Z', start)) = state_of(pid) else {
            continue;
        };
        if own.contains(&(pid, start)) {
            continue;
        }
        if before.contains(&(pid, start)) {
            reap(pid);
        } else {
            now.insert((pid, start));
        }
    }
    now
}

/// At unmount: no child starts any more, and every descendant still there gets SIGTERM,
/// and SIGKILL once `grace` is over, until none is left (for a few seconds more at most: a process stuck in the
/// kernel cannot be helped). Each is reaped as it ends.
pub fn end_descendants(grace: Duration) {
    ENDING.store(true, Ordering::SeqCst);
    let killing = Instant::now() + grace;
    let give_up = killing + Duration::from_secs(3);
    let mut termed = HashSet::new();
    loop {
        for pid in children_of(std::process::id()) {
            reap(pid);
        }
        let live: Vec<u32> = descendants()
            .into_iter()
            .filter(|p| state_of(*p).is_some_and(|(s, _)| s != b'Z'))
            .collect();
        if live.is_empty() {
            return;
        }
        let now = Instant::now();
        if now >= give_up {
            tracing::warn!(
                "{} of the hosts' processes did not end: {live:?}",
                live.len()
            );
            return;
        }
        for pid in live {
            let Ok(p) = libc::pid_t::try_from(pid) else {
                continue;
            };
            let signal = if now >= killing {
                libc::SIGKILL
            } else if termed.insert(pid) {
                libc::SIGTERM
            } else {
                continue;
            };
            // SAFETY: kill only sends a signal, to a descendant just listed.
            unsafe { libc::kill(p, signal) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_starts_with_no_signal_blocked_or_ignored() {
        use std::os::unix::process::CommandExt;
        // What the daemon's threads hand down: TERM and HUP blocked (and, as a parent
        // might leave it, USR1 ignored); set in the child, not in this test process.
        fn as_the_daemon_leaves_it() -> std::io::Result<()> {
            // SAFETY: async-signal-safe calls on fully initialised structs, in the child.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGTERM);
                libc::sigaddset(&mut set, libc::SIGHUP);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                libc::signal(libc::SIGUSR1, libc::SIG_IGN);
            }
            Ok(())
        }
        let status = |plain: bool| {
            let mut cmd = std::process::Command::new("grep");
            cmd.args(["-E", "^Sig(Blk|Ign)", "/proc/self/status"]);
            // SAFETY: both closures are async-signal-safe.
            unsafe {
                cmd.pre_exec(as_the_daemon_leaves_it);
                if plain {
                    cmd.pre_exec(plain_signals);
                }
            }
            String::from_utf8(cmd.output().unwrap().stdout).unwrap()
        };
        let (inherited, plain) = (status(false), status(true));
        let field = |text: &str, name: &str| {
            let v = text
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} in {text}"));
            u64::from_str_radix(v.trim(), 16).unwrap()
        };
        let bit = |sig: i32| 1u64 << (sig - 1);
        assert_eq!(
            field(&inherited, "SigBlk:"),
            bit(libc::SIGTERM) | bit(libc::SIGHUP)
        );
        assert_ne!(field(&inherited, "SigIgn:") & bit(libc::SIGUSR1), 0);
        assert_eq!(field(&plain, "SigBlk:"), 0, "{plain}");
        // Signals 1 to 31: none ignored (the environment may ignore 32 and 33, which the C
        // library keeps for itself and no program can set).
        assert_eq!(field(&plain, "SigIgn:") & 0x7fff_ffff, 0, "{plain}");
    }

    #[test]
    fn state_and_start_of_a_process() {
        let (state, start) = state_of(std::process::id()).unwrap();
        assert!(matches!(state, b'R' | b'S'), "{}", state as char);
        assert!(start > 0);
        assert!(state_of(u32::MAX).is_none());
    }
}
