//! A file's `body`: its exact bytes, read by offset from the file (never whole into
//! memory), writable through `write` when the guard of `write` allows it now.

use std::os::unix::fs::FileExt;

use crate::host::{Body, HostError, HostResult};

use super::resolve::Node;
use super::FilesHost;

impl FilesHost {
    /// Regular files have a body; directories, devices and FIFOs (which could be endless)
    /// have none.
    pub(super) fn file_body(&self, path: &[String]) -> HostResult<Option<Body>> {
        let Some(loc) = self.locate(path)? else {
            return Ok(None);
        };
        let Node::File { real, .. } = &loc.node else {
            return Ok(None);
        };
        let meta = match self.beneath.metadata(real) {
            Ok(m) if m.is_file() => m,
            _ => return Ok(None),
        };
        let body = Body::ranged(meta.len()).modified(meta.modified().ok());
        let writable = self
            .plan(&loc, super::ops::Access::Write, None)?
            .guard
            .allowed();
        Ok(Some(if writable {
            body.written_by(super::ops::name::WRITE, "content")
        } else {
            body
        }))
    }

    /// Up to `size` bytes from `offset`, straight from the file.
    pub(super) fn file_body_at(
        &self,
        path: &[String],
        offset: u64,
        size: u32,
    ) -> HostResult<Vec<u8>> {
        let loc = self.located(path)?;
        let Node::File { real, .. } = &loc.node else {
            return Err(HostError::NotFound(format!(
                "{} is not a file: it has no body",
                self.display(path)
            )));
        };
        // Below the root, no symlink followed, special files never opened.
        let file = match self
            .beneath
            .open_regular(real)
            .map_err(|e| self.io_error(&self.display(path), e))?
        {
            Ok((file, _)) => file,
            Err(_) => {
                return Err(HostError::NotFound(format!(
                    "{} is not a regular file: it has no body",
                    self.display(path)
                )))
            }
        };
        let mut buf = vec![0u8; size as usize];
        let mut filled = 0;
        while filled < buf.len() {
            match file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(&self.display(path), e)),
            }
        }
        buf.truncate(filled);
        Ok(buf)
    }

    /// The file itself, open for reading (below the root, no symlink followed, only a
    /// regular file), for the kernel to read directly.
    pub(super) fn file_body_file(&self, path: &[String]) -> HostResult<Option<std::fs::File>> {
        let Some(loc) = self.locate(path)? else {
            return Ok(None);
        };
        let Node::File { real, .. } = &loc.node else {
            return Ok(None);
        };
        match self
            .beneath
            .open_regular(real)
            .map_err(|e| self.io_error(&self.display(path), e))?
        {
            Ok((file, _)) => Ok(Some(file)),
            Err(_) => Ok(None),
        }
    }

    /// A file's or directory's modification time, without describing it.
    pub(super) fn mtime(&self, path: &[String]) -> HostResult<Option<std::time::SystemTime>> {
        Ok(match self.locate(path)?.map(|l| l.node) {
            Some(Node::Dir { real, .. }) | Some(Node::File { real, .. }) => {
                self.beneath.metadata(&real).and_then(|m| m.modified()).ok()
            }
            _ => None,
        })
    }
}
