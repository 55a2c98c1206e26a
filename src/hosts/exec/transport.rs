//! Transports for the host protocol, separate from the protocol itself: a child process on
//! stdin/stdout, a unix socket, or a TCP connection. Each gives a byte stream both ways;
//! framing (one JSON message per line) is the same on all of them.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;

/// The longest line a host may send (a bigger one is treated as junk, not buffered forever).
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// Where a host lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A program started by the runtime, speaking on its stdin/stdout.
    Command {
        argv: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: PathBuf,
    },
    Unix(PathBuf),
    /// `HOST:PORT`.
    Tcp(String),
}

/// Why `connect` names no endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connect = \"unix:\" needs a socket path")]
    NoPath,
    #[error("connect = {0:?}: expected tcp:HOST:PORT (e.g. tcp:127.0.0.1:7070)")]
    NotHostPort(String),
    #[error("connect = {0:?}: expected unix:PATH or tcp:HOST:PORT")]
    Unknown(String),
}

impl Endpoint {
    /// Parse `unix:PATH` or `tcp:HOST:PORT`; relative unix paths are relative to `base`.
    pub fn parse_connect(text: &str, base: &Path) -> Result<Endpoint, ConnectError> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(ConnectError::NoPath);
            }
            return Ok(Endpoint::Unix(base.join(path)));
        }
        if let Some(addr) = text.strip_prefix("tcp:") {
            let ok = addr
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(ConnectError::NotHostPort(text.to_string()));
            }
            return Ok(Endpoint::Tcp(addr.to_string()));
        }
        Err(ConnectError::Unknown(text.to_string()))
    }

    /// How a message names it: the command line or the address.
    pub fn describe(&self) -> String {
        match self {
            Endpoint::Command { argv, .. } => format!("`{}`", crate::secrets::shown_command(argv)),
            Endpoint::Unix(p) => format!("unix:{}", p.display()),
            Endpoint::Tcp(a) => format!("tcp:{a}"),
        }
    }
}

/// One open connection to a host.
pub struct Link {
    pub reader: Box<dyn Read + Send>,
    pub writer: Box<dyn Write + Send>,
    /// The child process, for a command host.
    pub child: Option<Child>,
    pub stderr: Option<ChildStderr>,
    /// Closes a socket both ways (unblocks the reader), for a socket host.
    pub socket: Option<Socket>,
}

pub enum Socket {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Socket {
    pub fn shutdown(&self) {
        let _ = match self {
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

/// Open a connection (start the program, or connect), bounded by `timeout` for TCP.
pub fn open(endpoint: &Endpoint, timeout: Duration) -> io::Result<Link> {
    match endpoint {
        Endpoint::Command { argv, env, cwd } => {
            let (program, args) = argv
                .split_first()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
            // A relative program path with a slash is relative to the launch directory
            // (Command's own resolution of it against current_dir is platform-dependent).
            let program = if program.contains('/') && Path::new(program).is_relative() {
                cwd.join(program)
            } else {
                PathBuf::from(program)
            };
            let mut cmd = Command::new(&program);
            cmd.args(args)
                .env_clear()
                .envs(env)
                .current_dir(cwd)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            // SAFETY: plain_signals is async-signal-safe.
            unsafe { cmd.pre_exec(crate::children::plain_signals) };
            let mut child = cmd.spawn()?;
            crate::children::own(child.id());
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other("the child's pipes were not created"));
            };
            let stderr = child.stderr.take();
            Ok(Link {
                reader: Box::new(stdout),
                writer: Box::new(stdin),
                child: Some(child),
                stderr,
                socket: None,
            })
        }
        Endpoint::Unix(path) => {
            let s = UnixStream::connect(path)?;
            Ok(Link {
                reader: Box::new(s.try_clone()?),
                writer: Box::new(s.try_clone()?),
                child: None,
                stderr: None,
                socket: Some(Socket::Unix(s)),
            })
        }
        Endpoint::Tcp(addr) => {
            let mut last = io::Error::new(
                io::ErrorKind::NotFound,
                format!("{addr} resolves to nothing"),
            );
            for a in addr.to_socket_addrs()? {
                match TcpStream::connect_timeout(&a, timeout) {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        return Ok(Link {
                            reader: Box::new(s.try_clone()?),
                            writer: Box::new(s.try_clone()?),
                            child: None,
                            stderr: None,
                            socket: Some(Socket::Tcp(s)),
                        });
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

/// Read one line (without its `\n`), at most `max` bytes; `Ok(None)` at end of stream.
/// A longer line is an `InvalidData` error carrying its first bytes.
pub fn read_line<R: BufRead>(r: &mut R, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(line) });
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(line));
        }
        if line.len() > max {
            line.truncate(200);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a line longer than {max} bytes: {}",
                    String::from_utf8_lossy(&line)
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_bounded_and_end_cleanly() {
        let mut r = io::BufReader::with_capacity(4, &b"{\"a\":1}\r\nxyz\nlast"[..]);
        assert_eq!(read_line(&mut r, 100).unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(read_line(&mut r, 100).unwrap().unwrap(), b"xyz");
        assert_eq!(read_line(&mut r, 100).unwrap().unwrap(), b"last");
        assert!(read_line(&mut r, 100).unwrap().is_none());
        let long = vec![b'x'; 1000];
        let mut r = io::BufReader::new(&long[..]);
        let err = read_line(&mut r, 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn connect_strings() {
        let base = Path::new("/run");
        assert_eq!(
            Endpoint::parse_connect("unix:s.sock", base).unwrap(),
            Endpoint::Unix(PathBuf::from("/run/s.sock"))
        );
        assert_eq!(
            Endpoint::parse_connect("tcp:127.0.0.1:7070", base).unwrap(),
            Endpoint::Tcp("127.0.0.1:7070".into())
        );
        for bad in ["tcp:127.0.0.1", "tcp::80", "http://x", "unix:"] {
            assert!(Endpoint::parse_connect(bad, base).is_err(), "{bad}");
        }
    }
}
