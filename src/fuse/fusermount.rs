//! Mounting through `fusermount3` when this process may not open `/dev/fuse` itself (a
//! normal user whose device is not writable): the setuid helper mounts and hands back the
//! device's descriptor over a socket (libfuse's `_FUSE_COMMFD` protocol).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Whether a failed direct mount is worth retrying through the helper.
pub fn denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
        || e.kind() == io::ErrorKind::PermissionDenied
}

/// The helper on PATH: `fusermount3`, else `fusermount`.
pub fn helper() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["fusermount3", "fusermount"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Mount `mountpoint` with `options` (`-o` syntax) through the helper; the device's
/// descriptor, ready for `Session::from_fd`.
pub fn mount(mountpoint: &Path, options: &[String]) -> io::Result<OwnedFd> {
    let bin = helper().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "fusermount3 is not installed (Debian package fuse3)",
        )
    })?;
    let (ours, theirs) = UnixStream::pair()?;
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(&bin);
    cmd.arg("-o")
        .arg(options.join(","))
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", fd.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: fcntl is async-signal-safe; it only clears close-on-exec on the helper's end.
    unsafe {
        cmd.pre_exec(move || {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(theirs);
    let received = receive_fd(&ours);
    drop(ours);
    let out = child.wait_with_output()?;
    match received {
        Ok(dev) if out.status.success() => Ok(dev),
        Ok(_) | Err(_) => Err(io::Error::other(format!(
            "{} failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// The one descriptor the helper sends (SCM_RIGHTS).
fn receive_fd(sock: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // u64s keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives recvmsg.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    loop {
        // SAFETY: msg describes live buffers of the sizes given.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n > 0 {
            break;
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // SAFETY: the header and data pointers come from the kernel-filled msghdr, checked
    // for null, level and type before the descriptor is read.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the helper sent no descriptor",
            ));
        }
        let fd: RawFd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
        if fd < 0 {
            return Err(io::ErrorKind::InvalidData.into());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}
