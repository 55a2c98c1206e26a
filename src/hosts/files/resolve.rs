//! From host paths and `path` arguments to files on disk, keeping inside the root.
//!
//! Symlinks are resolved by hand, one component at a time, so that (1) a link leading out of
//! the root is caught wherever it sits in the path, and (2) the mount point is refused before
//! any system call touches it (a `stat` of our own mount from inside the daemon could hang).
//! The walk only decides where a path leads; every look at the disk below the root goes
//! through `beneath`, so a directory swapped for a symlink meanwhile is never followed.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::host::{HostError, HostResult};

use super::beneath::{Kind, Stat};
use super::FilesHost;

/// Linux gives up after 40 links; so do we.
const MAX_LINKS: usize = 40;

/// What is at a host path.
#[derive(Clone, Debug)]
pub(super) enum Node {
    /// A directory (or a symlink inside the root that leads to one).
    Dir {
        real: PathBuf,
        link: Option<PathBuf>,
    },
    /// Anything else that exists: a regular file, a FIFO, a device, a socket.
    File {
        real: PathBuf,
        link: Option<PathBuf>,
    },
    /// A symlink we do not follow: it leads outside the root, dangles or loops.
    Broken {
        at: PathBuf,
        target: PathBuf,
        why: String,
    },
}

/// An entry found at a host path.
#[derive(Clone, Debug)]
pub(super) struct Located {
    pub segs: Vec<String>,
    pub node: Node,
}

/// Why a walk may not be followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Problem {
    /// The path reaches the mount point of the world.
    Hidden,
    /// A symlink on the way leads outside the root.
    LinkOutside { link: PathBuf, target: PathBuf },
    /// A symlink on the way points to nothing.
    Dangling { link: PathBuf, target: PathBuf },
    /// Too many symlinks.
    Loop { link: PathBuf },
    /// The path itself ends outside the root.
    Outside,
}

/// The result of walking a relative path from a directory.
#[derive(Clone, Debug)]
pub(super) struct Walked {
    /// Physical path: resolved as far as it exists, then the rest appended as written.
    pub path: PathBuf,
    pub exists: bool,
    pub problem: Option<Problem>,
}

enum Step {
    Root,
    Parent,
    Name(OsString),
    /// All components of a symlink's target are consumed: check where it led.
    LinkDone {
        link: PathBuf,
        target: PathBuf,
    },
}

fn steps_of(path: &Path) -> Vec<Step> {
    path.components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(Step::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Step::Parent),
            Component::Normal(n) => Some(Step::Name(n.to_os_string())),
        })
        .collect()
}

/// Whether an error means "there is nothing at this path" (including a file used as a
/// directory on the way).
pub(super) fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

/// `.` and `..` removed without touching the disk.
pub(super) fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A host-path segment the runtime could hand us.
fn valid_segment(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0'])
}

impl Problem {
    /// Words for an `inside_root` failure.
    pub(super) fn words(&self, host: &FilesHost, what: &str) -> String {
        let root = host.root.display();
        match self {
            Problem::Hidden => format!(
                "{what} is the mount point of this world (not part of the tree; root {root})"
            ),
            Problem::LinkOutside { link, target } => format!(
                "{what}: symlink {} → {} leads outside the root {root}",
                host.display_physical(link),
                target.display()
            ),
            Problem::Dangling { link, target } => format!(
                "{what}: symlink {} → {} dangles (its target does not exist; root {root})",
                host.display_physical(link),
                target.display()
            ),
            Problem::Loop { link } => format!(
                "{what}: too many levels of symlinks at {} (root {root})",
                host.display_physical(link)
            ),
            Problem::Outside => format!("{what} resolves outside the root {root}"),
        }
    }
}

impl FilesHost {
    pub(super) fn is_mount(&self, path: &Path) -> bool {
        self.mount_point
            .as_deref()
            .is_some_and(|m| path.starts_with(m))
    }

    /// Walk `rel` from the physical directory `start`, resolving symlinks as the kernel would.
    pub(super) fn walk(&self, start: &Path, rel: &Path) -> io::Result<Walked> {
        let mut cur = start.to_path_buf();
        let mut steps: VecDeque<Step> = steps_of(rel).into();
        let mut links = 0usize;
        let mut exists = true;
        let fail = |path: PathBuf, problem: Problem| Walked {
            path,
            exists: false,
            problem: Some(problem),
        };
        while let Some(step) = steps.pop_front() {
            match step {
                Step::Root => cur = PathBuf::from("/"),
                Step::Parent => {
                    cur.pop();
                }
                Step::Name(name) => {
                    let next = cur.join(&name);
                    if self.is_mount(&next) {
                        return Ok(fail(next, Problem::Hidden));
                    }
                    if !exists {
                        // Past the existing prefix there is nothing to resolve.
                        cur = next;
                        continue;
                    }
                    match self.beneath.lstat_any(&next) {
                        Ok(meta) if meta.file_type().is_symlink() => {
                            links += 1;
                            if links > MAX_LINKS {
                                return Ok(fail(next.clone(), Problem::Loop { link: next }));
                            }
                            let target = self.beneath.read_link_any(&next)?;
                            steps.push_front(Step::LinkDone {
                                link: next,
                                target: target.clone(),
                            });
                            for s in steps_of(&target).into_iter().rev() {
                                steps.push_front(s);
                            }
                        }
                        Ok(_) => cur = next,
                        Err(e) if is_gone(&e) => {
                            exists = false;
                            cur = next;
                        }
                        Err(e) => return Err(e),
                    }
                }
                Step::LinkDone { link, target } => {
                    if !exists {
                        return Ok(fail(cur, Problem::Dangling { link, target }));
                    }
                    if !cur.starts_with(&self.root) {
                        return Ok(fail(cur, Problem::LinkOutside { link, target }));
                    }
                }
            }
        }
        let problem = (!cur.starts_with(&self.root)).then_some(Problem::Outside);
        Ok(Walked {
            path: cur,
            exists,
            problem,
        })
    }

    /// The entry at a host path, or None if there is none (or it must stay hidden).
    pub(super) fn locate(&self, segs: &[String]) -> HostResult<Option<Located>> {
        if segs.iter().any(|s| !valid_segment(s)) {
            return Ok(None);
        }
        let Some((last, middle)) = segs.split_last() else {
            return Ok(Some(Located {
                segs: Vec::new(),
                node: Node::Dir {
                    real: self.root.clone(),
                    link: None,
                },
            }));
        };
        let dir = if middle.is_empty() {
            self.root.clone()
        } else if let Some(Node::Dir { real, .. }) =
            self.resolved.get(middle, self.watch.generation())
        {
            real
        } else {
            let rel: PathBuf = middle.iter().collect();
            let walked = self
                .walk(&self.root, &rel)
                .map_err(|e| self.io_error(&self.display(middle), e))?;
            // Entries below a link that leaves the root are not part of the tree.
            if walked.problem.is_some() || !walked.exists || !self.is_dir_at(&walked.path) {
                return Ok(None);
            }
            walked.path
        };
        // The kernel may now hold an entry of this directory: see when it changes.
        self.watch.dir(middle, || self.beneath.dir(&dir));
        let generation = self.watch.generation();
        if let Some(node) = self.resolved.get(segs, generation) {
            return Ok(Some(Located {
                segs: segs.to_vec(),
                node,
            }));
        }
        let found = self.node_at(&dir, last)?;
        if let Some(node) = &found {
            self.resolved.put(segs, node, generation);
        }
        Ok(found.map(|node| Located {
            segs: segs.to_vec(),
            node,
        }))
    }

    /// The node named `name` in the physical directory `dir`.
    pub(super) fn node_at(&self, dir: &Path, name: &str) -> HostResult<Option<Node>> {
        let at = dir.join(name);
        if self.is_mount(&at) {
            return Ok(None);
        }
        let meta = match self.beneath.lstat(&at) {
            Ok(m) => m,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(self.io_error(&self.display_physical(&at), e)),
        };
        if !meta.file_type().is_symlink() {
            return Ok(Some(if meta.is_dir() {
                Node::Dir {
                    real: at,
                    link: None,
                }
            } else {
                Node::File {
                    real: at,
                    link: None,
                }
            }));
        }
        let shown = self.display_physical(&at);
        let target = self
            .beneath
            .read_link(&at)
            .map_err(|e| self.io_error(&shown, e))?;
        let walked = self
            .walk(dir, Path::new(name))
            .map_err(|e| self.io_error(&shown, e))?;
        let why = match &walked.problem {
            Some(Problem::Hidden) => return Ok(None),
            Some(Problem::LinkOutside { .. }) | Some(Problem::Outside) => {
                format!("leads outside the root {}", self.root.display())
            }
            Some(Problem::Dangling { .. }) => "dangles (its target does not exist)".to_string(),
            Some(Problem::Loop { .. }) => "too many levels of symlinks".to_string(),
            None if !walked.exists => "dangles (its target does not exist)".to_string(),
            None => {
                let link = Some(target);
                return Ok(Some(if self.is_dir_at(&walked.path) {
                    Node::Dir {
                        real: walked.path,
                        link,
                    }
                } else {
                    Node::File {
                        real: walked.path,
                        link,
                    }
                }));
            }
        };
        Ok(Some(Node::Broken { at, target, why }))
    }

    /// Whether the physical path is a directory (reached below the root, links not followed).
    pub(super) fn is_dir_at(&self, physical: &Path) -> bool {
        self.beneath.metadata(physical).is_ok_and(|m| m.is_dir())
    }

    /// Names in a physical directory, sorted, without the mount point and non-UTF-8 names,
    /// with their kinds (from the directory itself: no `statx` each).
    pub(super) fn read_dir_sorted(&self, dir: &Path) -> io::Result<Vec<(String, Kind)>> {
        let names = self.beneath.read_dir(dir)?;
        Ok(self.visible(dir, names, |k| *k))
    }

    /// `read_dir_sorted` with what one `statx` each tells (links not followed).
    pub(super) fn read_dir_stat(&self, dir: &Path) -> io::Result<Vec<(String, Stat)>> {
        let names = self.beneath.read_dir_stat(dir)?;
        Ok(self.visible(dir, names, |s| s.kind))
    }

    /// What a listing shows of `names`: UTF-8 names, sorted, the mount point (and links to
    /// it) left out.
    fn visible<T>(
        &self,
        dir: &Path,
        names: Vec<(std::ffi::OsString, T)>,
        kind: impl Fn(&T) -> Kind,
    ) -> Vec<(String, T)> {
        let mut out = Vec::new();
        for (name, v) in names {
            let Some(text) = name.to_str() else {
                self.warn_non_utf8(dir, &name);
                continue;
            };
            if self.is_mount(&dir.join(&name)) {
                continue;
            }
            // A link to the mount point is the mount point under another name.
            if kind(&v).is_symlink()
                && self
                    .walk(dir, Path::new(&name))
                    .is_ok_and(|w| w.problem == Some(Problem::Hidden))
            {
                continue;
            }
            out.push((text.to_string(), v));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Map an I/O error on `what` to the host error of its kind, with the OS words.
    pub(super) fn io_error(&self, what: &str, e: io::Error) -> HostError {
        match e.kind() {
            io::ErrorKind::NotFound => HostError::NotFound(format!("{what}: {e}")),
            io::ErrorKind::PermissionDenied => HostError::Forbidden(format!("{what}: {e}")),
            _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
                HostError::NameTooLong(format!("{what}: {e} (a name holds at most 255 bytes)"))
            }
            _ => HostError::failed(what, e),
        }
    }
}

/// Entries already resolved (host path → what is there), while the watch sees every
/// change: a lookup deep in the tree walks its parents once, and the several requests a
/// walk makes of one entry resolve it once. Any batch of changes (and any call of the
/// host's own) empties it; only what exists is kept.
#[derive(Default)]
pub(super) struct Resolved {
    state: std::sync::Mutex<(u64, std::collections::HashMap<Vec<String>, Node>)>,
}

/// How many entries are kept resolved at most.
const RESOLVED_MAX: usize = 100_000;

impl Resolved {
    pub(super) fn get(&self, segs: &[String], generation: Option<u64>) -> Option<Node> {
        let generation = generation?;
        let st = crate::hosts::lock(&self.state);
        if st.0 != generation {
            return None;
        }
        st.1.get(segs).cloned()
    }

    pub(super) fn put(&self, segs: &[String], node: &Node, generation: Option<u64>) {
        let Some(generation) = generation else { return };
        let mut st = crate::hosts::lock(&self.state);
        if st.0 != generation || st.1.len() >= RESOLVED_MAX {
            st.1.clear();
            st.0 = generation;
        }
        st.1.insert(segs.to_vec(), node.clone());
    }
}
