//! Who is calling: the kernel gives a pid; `/proc` gives its session and command line.

use super::host::Caller;

impl Caller {
    /// Describe the process `pid` (best effort: a process that already exited still gets a
    /// caller with its pid as its session, so its result stays its own).
    pub fn from_pid(pid: u32, uid: u32) -> Caller {
        Caller {
            pid,
            uid,
            session: session_of(pid).unwrap_or(pid),
            command: command_of(pid).unwrap_or_default(),
        }
    }
}

/// Field 6 of `/proc/PID/stat` (the session id). The command name (field 2) may hold
/// spaces and parentheses, so parse after the last `)`.
pub fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the command: state(3) ppid(4) pgrp(5) session(6).
    rest.split_whitespace().nth(3)?.parse().ok()
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
        assert!(!me.command.is_empty());
    }
}
