//! The daemon's control socket: where a person's decision on a pending run reaches the
//! world, from outside the mount (nothing inside the mount can approve).
//!
//! A unix socket in the state directory, mode 0600: `control.sock` for the mount's owner,
//! and `control-uUID.sock`, owned by that uid, for each other approver (when the daemon
//! runs as root and may hand them out). The kernel's peer credentials (SO_PEERCRED) say who
//! connected; the world checks them against the rule's approvers and the caller's session.
//! One JSON line each way: `{"decision":"approve"|"deny","run":"…","reason":"…"}`, then
//! `{"ok":…,"errno":…,"text":"…","call_ok":…}`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::host::{Caller, Session};
use crate::proc as caller;
use crate::state::Decider;
use crate::world::{Person, Verb, World};

/// The owner's socket, in the state directory.
pub const SOCKET: &str = "control.sock";
/// The largest request line accepted.
const MAX_REQUEST: u64 = 64 * 1024;
/// How long a connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `wip approve` waits for the daemon's answer (an approval runs the call, which
/// the daemon bounds by the world's call timeout).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(3600);

/// The socket of another approver uid.
pub fn socket_for(uid: u32) -> String {
    format!("control-u{uid}.sock")
}

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    decision: String,
    run: String,
    #[serde(default)]
    reason: Option<String>,
}

/// The daemon's answer to a decision.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer {
    pub ok: bool,
    /// The errno of a refused decision (EINVAL already decided, EACCES not yours, …).
    pub errno: i32,
    pub text: String,
    /// For an approval: whether the call that ran then succeeded.
    pub call_ok: bool,
}

/// The listening sockets; dropping it removes their files.
pub struct Control {
    paths: Vec<PathBuf>,
}

impl Drop for Control {
    fn drop(&mut self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Listen on the control sockets of `state_dir` for the owner and every other approver of
/// the policy (and of runs still pending from an earlier manifest), and serve decisions on
/// `world` from background threads.
pub fn serve(world: Arc<World>, state_dir: &Path) -> Result<Control> {
    // `.wip/control` tells clients where to connect, from wherever they run.
    let state_dir = &std::fs::canonicalize(state_dir)
        .with_context(|| format!("cannot use the state directory {}", state_dir.display()))?;
    // SAFETY: geteuid cannot fail.
    let owner = unsafe { libc::geteuid() };
    let mut sockets = vec![(state_dir.join(SOCKET), owner)];
    let mut others: Vec<(u32, bool)> = world
        .calls()
        .policy_approvers()
        .into_iter()
        .map(|u| (u, true))
        .collect();
    others.extend(
        world
            .calls()
            .pending_approvers()
            .into_iter()
            .map(|u| (u, false)),
    );
    for (uid, in_policy) in others.into_iter().filter(|(u, _)| *u != owner) {
        if owner != 0 {
            let why = format!(
                "uid {uid} ({}) may decide here, but this daemon runs as uid {owner} and cannot give another user a control socket of its own (that needs root)",
                crate::world::call::policy::user_words(uid)
            );
            if in_policy {
                bail!("a [[policy]] rule's approvers: {why}: run the daemon as root, or list only uid {owner} (the default)");
            }
            // Runs held under an earlier manifest must not stop the mount.
            tracing::warn!("a pending run's approvers: {why}");
            continue;
        }
        let path = state_dir.join(socket_for(uid));
        if !sockets.iter().any(|(p, _)| *p == path) {
            sockets.push((path, uid));
        }
    }
    let mut control = Control { paths: Vec::new() };
    for (path, uid) in sockets {
        let listener = bind_private(&path, uid, state_dir)?;
        control.paths.push(path.clone());
        // Weak: the world ends with the mount (hosts stop their children then), not with
        // these threads.
        let world = Arc::downgrade(&world);
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || accept_loop(listener, world))
            .context("cannot start the control socket's thread")?;
    }
    if let Some(first) = control.paths.first() {
        world.calls().set_control_socket(first);
    }
    Ok(control)
}

/// Bind a socket that only `uid` may connect to: made in a private directory, set to 0600
/// and handed to `uid`, then moved into place, so no one else ever sees it open.
fn bind_private(path: &Path, uid: u32, state_dir: &Path) -> Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!(
                "another wip daemon answers on {}: one state directory serves one mount",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
    }
    let private = tempfile::Builder::new()
        .prefix(".control-")
        .tempdir_in(state_dir)
        .with_context(|| format!("cannot create a directory in {}", state_dir.display()))?;
    let tmp = private.path().join("s");
    let listener = UnixListener::bind(&tmp).with_context(|| {
        format!(
            "cannot listen on a control socket at {} (a unix socket's path must stay under 108 bytes)",
            path.display()
        )
    })?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    // SAFETY: geteuid cannot fail.
    if uid != unsafe { libc::geteuid() } {
        std::os::unix::fs::chown(&tmp, Some(uid), None)
            .with_context(|| format!("cannot hand the control socket to uid {uid}"))?;
    }
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot move the control socket to {}", path.display()))?;
    Ok(listener)
}

fn accept_loop(listener: UnixListener, world: Weak<World>) {
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                let Some(world) = world.upgrade() else {
                    return;
                };
                // Who connected is judged now, before anything is read: a peer that exits
                // before it is seen must not leave an empty lineage behind (see `judge`).
                let peer = judge(&stream);
                // A decision may run a call: one thread per connection, so none waits.
                let spawned = std::thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || {
                        if let Err(e) = handle(stream, peer, &world) {
                            tracing::warn!("control socket: {e:#}");
                        }
                    });
                if let Err(e) = spawned {
                    tracing::error!("control socket: cannot start a thread: {e}");
                }
            }
            Err(e) => {
                tracing::warn!("control socket: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that connected. Not in the libc
/// crate for glibc targets; the value is the generic one (x86_64, aarch64, riscv64).
const SO_PEERPIDFD: libc::c_int = 77;

/// The kernel's word on who is at the other end: (pid, uid), and a pidfd of that very
/// process where the kernel gives one.
fn peer_credentials(stream: &UnixStream) -> std::io::Result<(u32, u32, Option<OwnedFd>)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid out-parameters of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: fd and len are valid out-parameters of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    // SAFETY: on success the kernel handed us a new descriptor that nothing else owns.
    let pidfd = (rc == 0 && fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
    Ok((cred.pid as u32, cred.uid, pidfd))
}

/// Whether the process a pidfd names has not been reaped (a zombie still counts: its
/// `/proc` entry, read just before, was its own).
fn still_there(pidfd: &OwnedFd) -> bool {
    // SAFETY: signal 0 checks only; the pidfd is valid for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Why the peer of a connection cannot be judged: its decision is refused.
#[derive(Debug, thiserror::Error)]
enum Unjudged {
    #[error("cannot read the peer's credentials: {0}")]
    Credentials(#[source] std::io::Error),
    #[error("the process that connected (pid {0}) exited before the daemon could see which session it belongs to; a decision is judged by who sends it: run `wip approve` or `wip deny` and let it wait for the answer")]
    Gone(u32),
}

/// Who connected, judged at `accept()`: the peer's uid and pid from the kernel, its
/// session, command and the sessions of its ancestors from `/proc`, read while the peer
/// is known to be the same process (its pidfd still names a process after the read, so
/// the pid was not reused). A peer whose process cannot be read is refused: a decision
/// is never judged with an empty lineage.
fn judge(stream: &UnixStream) -> std::result::Result<Person, Unjudged> {
    let (pid, uid, pidfd) = peer_credentials(stream).map_err(Unjudged::Credentials)?;
    let gone = || Unjudged::Gone(pid);
    let stat = caller::proc_stat(pid).ok_or_else(gone)?;
    let sessions = caller::lineage_sessions(pid);
    let caller = Caller::from_pid(pid, uid);
    match &pidfd {
        Some(fd) if !still_there(fd) => return Err(gone()),
        Some(_) => {}
        None => {
            // No pidfd (a kernel before 6.5): the start time read again must match.
            if caller::proc_stat(pid).map(|s| s.start) != Some(stat.start) {
                return Err(gone());
            }
        }
    }
    if sessions.first().map(|s| s.0) != Some(stat.session) {
        return Err(gone());
    }
    Ok(Person {
        decider: Decider {
            uid,
            pid,
            session: caller.session,
            command: caller.command,
        },
        sessions: sessions
            .into_iter()
            .map(|(number, start)| Session { number, start, uid })
            .collect(),
    })
}

fn handle(
    stream: UnixStream,
    peer: std::result::Result<Person, Unjudged>,
    world: &Arc<World>,
) -> Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_REQUEST)).read_line(&mut line)?;
    let answer = match (serde_json::from_str::<Request>(&line), peer) {
        (_, Err(why)) => {
            tracing::warn!("control socket: decision refused: {why}");
            Answer {
                ok: false,
                errno: libc::EACCES,
                text: why.to_string(),
                call_ok: false,
            }
        }
        (Err(e), _) => Answer {
            ok: false,
            errno: libc::EINVAL,
            text: format!("not a decision: {e}"),
            call_ok: false,
        },
        (Ok(req), Ok(person)) => {
            let verb = match req.decision.as_str() {
                "approve" => Some(Verb::Approve),
                "deny" => Some(Verb::Deny { reason: req.reason }),
                _ => None,
            };
            match verb {
                None => Answer {
                    ok: false,
                    errno: libc::EINVAL,
                    text: format!("unknown decision {:?}: approve or deny", req.decision),
                    call_ok: false,
                },
                Some(verb) => {
                    let (uid, pid) = (person.decider.uid, person.decider.pid);
                    tracing::info!(run = req.run, uid, pid, ?verb, "decision");
                    match world.decide(&req.run, &verb, &person) {
                        Ok(d) => Answer {
                            ok: true,
                            errno: 0,
                            text: d.text,
                            call_ok: d.call_ok,
                        },
                        Err(e) => Answer {
                            ok: false,
                            errno: e.errno(),
                            text: e.to_string(),
                            call_ok: false,
                        },
                    }
                }
            }
        }
    };
    let mut out = serde_json::to_string(&answer)?;
    out.push('\n');
    (&stream).write_all(out.as_bytes())?;
    Ok(())
}

// ---- the client: `wip approve` and `wip deny` -----------------------------------------

/// A path made absolute without touching the file system beyond what this user may read
/// (another approver cannot look into the owner's mount): canonical when it can be, else
/// absolute with `.` and `..` resolved by their names.
fn absolute_run_path(path: &str) -> Result<String> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Ok(p.display().to_string());
    }
    let abs = std::path::absolute(path).with_context(|| format!("cannot make {path} absolute"))?;
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    Ok(out.display().to_string())
}

/// The wip mount holding `path`, by the kernel's mount table.
fn mount_of(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .find(|a| crate::launch::mounted_fs_type(a).is_some_and(|t| t.starts_with("fuse")))
        .map(Path::to_path_buf)
}

/// The directory of the control sockets: `--state`, else what the mount's `.wip/control`
/// says, else the default state directory.
fn socket_dir(run_path: &str, state: Option<&Path>) -> Result<PathBuf> {
    if let Some(s) = state {
        return Ok(s.to_path_buf());
    }
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let near = if run_path.starts_with('/') {
        PathBuf::from(run_path)
    } else {
        here
    };
    if let Some(mount) = mount_of(&near) {
        let file = mount.join(".wip/control");
        return match std::fs::read_to_string(&file) {
            Ok(text) => {
                let socket = PathBuf::from(text.lines().next().unwrap_or("").trim());
                if !socket.is_absolute() {
                    bail!("{}: {}", file.display(), text.trim());
                }
                Ok(socket.parent().map(Path::to_path_buf).unwrap_or_default())
            }
            Err(e) => Err(anyhow!(
                "cannot read {} ({e}); only the mount's owner can look into it: give the mount's state directory with --state DIR",
                file.display()
            )),
        };
    }
    Ok(crate::launch::default_state_dir())
}

/// Send a decision on the run at `run` (a path in a mount, or a run id) to its daemon.
pub fn decide(run: &str, verb: &Verb, state: Option<&Path>) -> Result<Answer> {
    let run_ref = if run.trim().parse::<i64>().is_ok() {
        run.trim().to_string()
    } else {
        absolute_run_path(run)?
    };
    let dir = socket_dir(&run_ref, state)?;
    // SAFETY: getuid cannot fail.
    let mine = dir.join(socket_for(unsafe { libc::getuid() }));
    let socket = if mine.exists() {
        mine
    } else {
        dir.join(SOCKET)
    };
    let mut stream = UnixStream::connect(&socket).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ECONNREFUSED) => {
                " (is the world mounted? its daemon listens there while it runs)"
            }
            Some(libc::EACCES) => {
                " (the socket belongs to another user: approvers other than the mount's owner need the daemon to run as root, and search permission on the state directory)"
            }
            _ => "",
        };
        anyhow!("cannot reach the daemon at {}: {e}{hint}", socket.display())
    })?;
    let (decision, reason) = match verb {
        Verb::Approve => ("approve", None),
        Verb::Deny { reason } => ("deny", reason.clone()),
    };
    let mut line = serde_json::to_string(&Request {
        decision: decision.into(),
        run: run_ref,
        reason,
    })?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .context("no answer from the daemon")?;
    serde_json::from_str(&answer)
        .with_context(|| format!("the daemon's answer is not understood: {}", answer.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_judged_while_it_is_there_and_refused_once_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = UnixListener::bind(&path).unwrap();
        // A live peer: this process.
        let _mine = UnixStream::connect(&path).unwrap();
        let (conn, _) = listener.accept().unwrap();
        let me = judge(&conn).expect("a live peer is judged");
        assert_eq!(me.decider.pid, std::process::id());
        assert_eq!(
            me.sessions.first().map(|s| s.number),
            caller::session_of(std::process::id())
        );
        // A peer that connected and was reaped before the daemon looked: refused.
        let status = std::process::Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?})",
                path.display().to_string()
            ))
            .status()
            .unwrap();
        assert!(status.success());
        let (conn, _) = listener.accept().unwrap();
        let why = judge(&conn)
            .map(|p| p.decider.pid)
            .expect_err("a reaped peer is refused");
        assert!(
            why.to_string()
                .contains("exited before the daemon could see"),
            "{why}"
        );
    }

    #[test]
    fn run_paths_are_made_absolute_by_name() {
        assert_eq!(
            absolute_run_path("/no/such/mnt/a/../b/./ops/x/runs/1").unwrap(),
            "/no/such/mnt/b/ops/x/runs/1"
        );
    }
}
