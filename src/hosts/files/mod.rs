//! The files host: a local directory as a world.
//!
//! Every directory and file under the root is an entry; a regular file's `body` is its bytes
//! (read by offset, written through `write`). Files offer `read` (numbered lines),
//! `write` (atomic), `edit` (exact, unique replacement) and `stat`; directories offer `list`,
//! `stat` and the same `read`/`write`/`edit` on a `path` relative to them. The `inside_root`
//! policy guard keeps every target inside the root by resolving symlinks on disk, one
//! component at a time, never by looking at the text alone; every access is then made from a
//! descriptor of the root without following any symlink (`beneath`), so a path swapped
//! after the check cannot lead out.
//!
//! Names that are not valid UTF-8 are skipped (one warning per host): the tree's names are
//! UTF-8, and a lossy mapping would not lead back to the file.
//!
//! The mount point is never exposed, even when it lies inside the root: the resolver refuses
//! to step onto it before touching the disk, so nothing here ever calls back into our own
//! FUSE mount.

mod before;
mod beneath;
mod changes;
mod describe;
pub mod documents;
mod ops;
pub mod overlay;
mod resolve;
#[cfg(test)]
mod tests;
mod tree;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::host::names::Paths;
use crate::host::{
    CallOutcome, Caller, Child, DocumentPage, EntryInfo, Guard, Host, HostError, HostResult, OpSpec,
};
use crate::hosts::HostContext;

use resolve::Node;

/// The `[[host]]` table of a files host (minus `kind` and `path`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesSettings {
    /// The directory to project; default the launch directory. Relative paths are relative
    /// to the launch directory.
    #[serde(default)]
    pub root: Option<PathBuf>,
    /// Refuse `write` and `edit` (a policy: EACCES).
    #[serde(default)]
    pub read_only: bool,
    /// How many children a listing shows; the rest stay reachable by name.
    #[serde(default = "default_page_size")]
    pub page_size: usize,
    /// Refuse `read`, `write` and `edit` of a file with more than one hard link: a hard link
    /// to a file outside the root looks like any file inside it.
    #[serde(default)]
    pub refuse_hard_links: bool,
    /// Globs over paths below the root (`target/**`, `**/__pycache__/**`) whose changes
    /// are judged by the policy but not journaled (build outputs).
    #[serde(default)]
    pub unrecorded: Vec<String>,
    /// How much the before-images of changes (for undo) may hold in the state directory:
    /// `1 GiB` (the default), `200 MiB`, a number of bytes; `0` keeps none.
    #[serde(default)]
    pub keep_before: Option<KeepBefore>,
    /// Never write the root through the mount: changes land in a layer in the state
    /// directory, shown merged with the root, until `files@/ops/apply` writes them to it
    /// (or `discard` drops them).
    #[serde(default)]
    pub overlay: bool,
}

/// `keep_before`: a number of bytes or a size in words.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum KeepBefore {
    Bytes(u64),
    Words(String),
}

fn default_page_size() -> usize {
    1000
}

impl Default for FilesSettings {
    fn default() -> Self {
        FilesSettings {
            root: None,
            read_only: false,
            page_size: default_page_size(),
            refuse_hard_links: false,
            unrecorded: Vec::new(),
            keep_before: None,
            overlay: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("files root {path} cannot be opened: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("files root {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("files root {root} lies inside the mount point {mount}: the mount would hide it")]
    RootInsideMount { root: PathBuf, mount: PathBuf },
    #[error("page_size must be at least 1")]
    PageSize,
    #[error("unrecorded: {0}")]
    Unrecorded(#[source] crate::host::glob::GlobError),
    #[error("keep_before {0:?} is not a size (write `1 GiB`, `200 MiB`, a number of bytes, or 0)")]
    KeepBefore(String),
    #[error("the overlay layer of {path} cannot be made: {source}")]
    Overlay {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the before-images of {path} cannot be kept: {source}")]
    BeforeStore {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A local directory mounted as a host.
/// How long the kernel may keep what a watched files host showed: changes are reported as
/// they happen, and this bounds what inotify cannot see (a write through `mmap`).
const WATCHED_TTL: Duration = Duration::from_secs(60);

pub struct FilesHost {
    /// World paths of its entries, for the paths shown in results.
    paths: Paths,
    /// Canonical root.
    root: PathBuf,
    /// The root held open: every access resolves from it.
    beneath: beneath::Beneath,
    /// Absolute mount point of the world, hidden wherever it appears under the root.
    mount_point: Option<PathBuf>,
    read_only: bool,
    page_size: usize,
    refuse_hard_links: bool,
    warned_non_utf8: AtomicBool,
    temp_counter: AtomicU64,
    /// Changes made outside the mount (see `watch`).
    watch: watch::Watch,
    /// Directories resolved since the last change (see `resolve::Resolved`).
    resolved: resolve::Resolved,
    /// The working tree: the nodes the kernel holds (see `tree`).
    store: tree::Store,
    /// Paths whose changes are not journaled (`unrecorded`).
    unrecorded: Vec<crate::host::glob::Glob>,
    /// Before-images of changes, for undo (`None`: `keep_before = 0`).
    before: Option<before::BeforeStore>,
    /// Overlay mode: the layer the tree is (`root` is its merged view), over the real root.
    layer: Option<overlay::Layer>,
    /// What the policy hides (an overlay's diff leaves it out), and where this host is.
    hidden: crate::host::Hidden,
    mount: String,
}

impl FilesHost {
    /// Open the host; its printed paths start at `ctx.mount` (which `hosts::build` sets to
    /// the mount path it also passes first).
    pub fn open(settings: FilesSettings, ctx: &HostContext) -> Result<FilesHost, FilesError> {
        if settings.page_size == 0 {
            return Err(FilesError::PageSize);
        }
        let unrecorded = settings
            .unrecorded
            .iter()
            .map(|g| crate::host::glob::Glob::parse(g))
            .collect::<Result<Vec<_>, _>>()
            .map_err(FilesError::Unrecorded)?;
        let budget = match &settings.keep_before {
            None => before::DEFAULT_BUDGET,
            Some(KeepBefore::Bytes(n)) => *n,
            Some(KeepBefore::Words(w)) => {
                before::parse_size(w).ok_or_else(|| FilesError::KeepBefore(w.clone()))?
            }
        };
        let wanted = match &settings.root {
            Some(r) if r.is_absolute() => r.clone(),
            Some(r) => ctx.launch_dir.join(r),
            None => ctx.launch_dir.clone(),
        };
        let root = std::fs::canonicalize(&wanted).map_err(|source| FilesError::Root {
            path: wanted.clone(),
            source,
        })?;
        let is_dir = std::fs::metadata(&root)
            .map_err(|source| FilesError::Root {
                path: root.clone(),
                source,
            })?
            .is_dir();
        if !is_dir {
            return Err(FilesError::NotADirectory(root));
        }
        let mount_point = absolute_mount_point(&ctx.mount_point, &ctx.launch_dir);
        if let Some(mount) = &mount_point {
            if root.starts_with(mount) {
                return Err(FilesError::RootInsideMount {
                    root,
                    mount: mount.clone(),
                });
            }
        }
        let store_name = if ctx.mount.is_empty() {
            "files".to_string()
        } else {
            ctx.mount.replace('/', "%")
        };
        // Overlay: the tree served is the layer's merged view; the real root is its lower.
        let (root, layer) = if settings.overlay {
            let dir = ctx.state_dir.join("overlay").join(&store_name);
            let layer =
                overlay::Layer::open(&dir, &root, mount_point.as_deref()).map_err(|source| {
                    FilesError::Overlay {
                        path: root.clone(),
                        source,
                    }
                })?;
            let upper =
                std::fs::canonicalize(layer.upper()).map_err(|source| FilesError::Overlay {
                    path: root.clone(),
                    source,
                })?;
            (upper, Some(layer))
        } else {
            (root, None)
        };
        let beneath = beneath::Beneath::open(&root).map_err(|source| FilesError::Root {
            path: root.clone(),
            source,
        })?;
        let watch = watch::Watch::start(beneath.root_fd(), ctx.changes.clone());
        let store = tree::Store::new(
            beneath
                .root_fd()
                .try_clone_to_owned()
                .map_err(|source| FilesError::Root {
                    path: root.clone(),
                    source,
                })?,
            mount_point.as_deref().and_then(|m| mount_below(&root, m)),
        )
        .map_err(|source| FilesError::Root {
            path: root.clone(),
            source,
        })?;
        let before = if budget == 0 {
            None
        } else {
            // One store per host, by where it is mounted in the world.
            let dir = ctx.state_dir.join("before").join(&store_name);
            Some(
                before::BeforeStore::open(&dir, budget)
                    .map_err(|source| FilesError::BeforeStore { path: dir, source })?,
            )
        };
        let host = FilesHost {
            paths: ctx.tree_paths(),
            root,
            beneath,
            mount_point,
            read_only: settings.read_only,
            page_size: settings.page_size,
            refuse_hard_links: settings.refuse_hard_links,
            warned_non_utf8: AtomicBool::new(false),
            temp_counter: AtomicU64::new(0),
            watch,
            resolved: resolve::Resolved::default(),
            store,
            unrecorded,
            before,
            layer,
            hidden: ctx.hidden.clone(),
            mount: ctx.mount.clone(),
        };
        host.watch.dir(&[], || host.beneath.dir(&host.root));
        Ok(host)
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The world path of a host path, for messages: `files/src/main.rs`.
    fn display(&self, segs: &[String]) -> String {
        let out = self.paths.entry(segs);
        if out.is_empty() {
            ".".to_string()
        } else {
            out
        }
    }

    /// The world path of a physical path under the root, or the disk path otherwise.
    fn display_physical(&self, path: &Path) -> String {
        match self.host_path(path) {
            Some(segs) => self.display(&segs),
            None => path.display().to_string(),
        }
    }

    /// Host path of a physical path inside the root (None outside or for non-UTF-8 names).
    fn host_path(&self, path: &Path) -> Option<Vec<String>> {
        let rel = path.strip_prefix(&self.root).ok()?;
        rel.components()
            .map(|c| match c {
                std::path::Component::Normal(n) => n.to_str().map(str::to_string),
                _ => None,
            })
            .collect()
    }

    fn warn_non_utf8(&self, dir: &Path, name: &std::ffi::OsStr) {
        if !self.warned_non_utf8.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "files host {}: skipping names that are not UTF-8 (first: {:?} in {})",
                self.paths.mount(),
                name,
                dir.display()
            );
        }
    }

    /// The entry at `path` as its ops see it.
    fn entry_of(&self, path: &[String]) -> HostResult<ops::Entry> {
        Ok(ops::Entry {
            loc: self.located(path)?,
            page_size: self.page_size,
        })
    }

    fn located(&self, path: &[String]) -> HostResult<resolve::Located> {
        self.locate(path)?
            .ok_or_else(|| HostError::NotFound(format!("{}: no such entry", self.display(path))))
    }
}

impl FilesHost {
    /// The ops of a path that does not exist: each names itself, none can run.
    fn missing_specs(&self, path: &[String]) -> Vec<OpSpec> {
        let here = self.display(path);
        let mut names: Vec<String> = Vec::new();
        for spec in ops::all_names() {
            if !names.iter().any(|n| n == spec) {
                names.push(spec.to_string());
            }
        }
        names
            .into_iter()
            .map(|name| OpSpec {
                description: format!(
                    "{name}: {here} does not exist now; the runs of this op there stay in runs/"
                ),
                schema: crate::host::object_schema(serde_json::json!({}), &[]),
                output: None,
                name,
            })
            .collect()
    }
}

/// Where the mount point is when it lies below the root: its directory (device, inode) and
/// name, so the tree never looks at it (a `stat` of our own mount from inside the daemon
/// could wait for the daemon).
fn mount_below(root: &Path, mount: &Path) -> Option<tree::MountPoint> {
    use std::os::unix::fs::MetadataExt;
    if !mount.starts_with(root) || mount == root {
        return None;
    }
    let parent = std::fs::metadata(mount.parent()?).ok()?;
    Some(tree::MountPoint {
        dir: (parent.dev(), parent.ino()),
        name: mount.file_name()?.to_os_string(),
    })
}

/// The mount point as an absolute path, resolved through its parent only: the mount point
/// itself may already be our FUSE mount, and touching it from inside the daemon could
/// deadlock.
fn absolute_mount_point(mount_point: &Path, launch_dir: &Path) -> Option<PathBuf> {
    if mount_point.as_os_str().is_empty() {
        return None;
    }
    let abs = resolve::lexical_normalize(&launch_dir.join(mount_point));
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => match std::fs::canonicalize(parent) {
            Ok(p) => Some(p.join(name)),
            Err(_) => Some(abs),
        },
        _ => Some(abs),
    }
}

impl Host for FilesHost {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        Ok(self.locate(path)?.map(|loc| self.info(&loc)))
    }

    /// An entry (`PATH@`) holds no children: a folder's are the working tree's.
    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        self.located(path)?;
        Ok(Vec::new())
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        if path.is_empty() && self.layer.is_some() {
            let mut specs = self.ops_of_root()?;
            specs.extend(self.overlay_specs());
            return Ok(specs);
        }
        match self.locate(path)? {
            Some(loc) => Ok(ops::specs(&ops::Entry {
                loc,
                page_size: self.page_size,
            })),
            // Gone (or never there): every op, so the runs of those that ran stay readable
            // at the path.
            None => Ok(self.missing_specs(path)),
        }
    }

    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard> {
        if path.is_empty() && self.is_overlay_op(op) {
            return self.overlay_guard(op, args);
        }
        if self.locate(path)?.is_none() {
            return Ok(Guard::new(vec![crate::host::Condition::check(
                "exists",
                false,
                format!(
                    "{} does not exist now; make it through the mount or with its folder's ops",
                    self.display(path)
                ),
            )]));
        }
        let e = self.entry_of(path)?;
        ops::ops_of(&e.loc.node).guard(self, &ops::Slot::default(), &e, op, args)
    }

    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        if path.is_empty() && self.is_overlay_op(op) {
            let out = self.overlay_call(op, args, caller);
            self.watch.bump();
            return out;
        }
        let e = self.entry_of(path)?;
        let slot = ops::Slot::judged(caller.judged.clone());
        let out = ops::ops_of(&e.loc.node).call(self, &slot, &e, op, args);
        // What this call changed is seen by the watch a moment later: nothing resolved
        // before it is trusted meanwhile.
        self.watch.bump();
        out
    }

    fn settle(
        &self,
        _path: &[String],
        op: &str,
        run: &str,
    ) -> HostResult<Option<crate::host::Settled>> {
        self.overlay_settle(op, run)
    }

    fn acts_on(
        &self,
        path: &[String],
        op: &str,
        args: Option<&Value>,
    ) -> HostResult<Vec<crate::host::Place>> {
        let e = self.entry_of(path)?;
        if let Some(places) = self.change_places(&e, op, args)? {
            return Ok(places);
        }
        Ok(self
            .places_of(&e, op, args)?
            .into_iter()
            .map(crate::host::Place::at)
            .collect())
    }

    fn modified(&self, path: &[String]) -> HostResult<Option<std::time::SystemTime>> {
        Ok(match self.locate(path)?.map(|l| l.node) {
            Some(Node::Dir { real, .. }) | Some(Node::File { real, .. }) => {
                self.beneath.metadata(&real).and_then(|m| m.modified()).ok()
            }
            _ => None,
        })
    }

    fn tree(&self) -> Option<&dyn crate::host::tree::Tree> {
        Some(self)
    }

    /// A read-only host refuses every change, through the mount and through ops alike
    /// (the manifest's rules come first).
    fn policy_default(&self, _path: &[String], op: &str) -> Option<crate::host::HostDefault> {
        const READS: [&str; 3] = [ops::name::READ, ops::name::STAT, ops::name::LIST];
        (self.read_only && !READS.contains(&op)).then(|| crate::host::HostDefault {
            allowed: false,
            words: "files host is mounted read-only (manifest read_only = true)".to_string(),
        })
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        let Some(rest) = reference.strip_prefix("file://") else {
            return Vec::new();
        };
        let Some(segs) = self.host_path(Path::new(rest)) else {
            return Vec::new();
        };
        match self.locate(&segs) {
            Ok(Some(_)) => vec![segs],
            _ => Vec::new(),
        }
    }

    /// Every UTF-8 text file under the root (see `documents`), by relative path.
    fn documents(&self, cursor: Option<&str>, limit: usize) -> HostResult<DocumentPage> {
        self.documents_page(cursor, limit)
    }

    fn cache_ttl(&self) -> Duration {
        // The directory changes behind our back (editors, builds, git): watched, the
        // kernel is told of every change; otherwise it asks again soon.
        if self.watch.watching() {
            WATCHED_TTL
        } else {
            Duration::from_secs(1)
        }
    }
}
