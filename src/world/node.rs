//! Every node of the mounted tree, named by what it is rather than by its path string.
//!
//! The FUSE layer maps inode numbers to `NodeId`s and back; it never parses paths.

/// An entry a host serves: the host's index in the world and the host-relative path.
/// The path is shared: every node of an entry (its files, ops, op files) holds the same
/// copy, which is most of what the kernel's materialised nodes cost.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EntryRef {
    pub host: usize,
    /// Behind a thin pointer: a node is then small enough for a smaller heap block.
    pub path: std::sync::Arc<Vec<String>>,
}

impl EntryRef {
    pub fn new(host: usize, path: impl Into<Vec<String>>) -> EntryRef {
        EntryRef {
            host,
            path: std::sync::Arc::new(path.into()),
        }
    }

    /// The entry `name` inside this one.
    pub fn child(&self, name: impl Into<String>) -> EntryRef {
        let mut path = self.path.to_vec();
        path.push(name.into());
        EntryRef::new(self.host, path)
    }
}

/// A node of a host's working tree (`Host::tree`): the host's number for one backing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TreeRef {
    pub host: usize,
    pub node: crate::host::tree::NodeNo,
}

/// An op's name in a node: one shared copy for an op's folder, its files and its runs
/// (most materialised nodes are op files), and one per name across entries (`intern`).
pub type OpName = std::sync::Arc<String>;

/// The shared copy of op name `name`. Only names of ops that exist reach here, so the set
/// stays as small as the world's op names; past a bound, names are simply not shared.
pub fn intern(name: &str) -> OpName {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    const MAX_SHARED: usize = 4096;
    static NAMES: OnceLock<Mutex<HashMap<String, OpName>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(shared) = names.get(name) {
        return Arc::clone(shared);
    }
    let fresh = Arc::new(name.to_string());
    if names.len() < MAX_SHARED {
        names.insert(name.to_string(), Arc::clone(&fresh));
    }
    fresh
}

/// What an `ops/` folder belongs to: the world root, a host entry, or a run (its journal
/// id), whose ops are the world's own (`wait`, `cancel`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Root,
    Entry(EntryRef),
    Run(i64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InfoFile {
    Description,
    Ref,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpFile {
    Description,
    Schema,
    Guard,
    Call,
    Result,
    /// What a call returns, where the op declares it (not in `ALL`).
    OutputSchema,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunFile {
    Args,
    Status,
    Result,
    Guard,
    Caller,
    /// The latest progress a host reported, `N/M message`.
    Progress,
    /// Only in runs that asked a person's sign-off (not in `ALL`).
    Approval,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WipFile {
    Log,
    Config,
    Stats,
    Known,
    Events,
    /// Runs waiting for a person's sign-off.
    Pending,
    /// Where the daemon's control socket listens.
    Control,
    /// The mount at a glance: hosts and whether they are ready, calls running, journal.
    Status,
    /// Runs across the world with their paths: those in flight, then the latest.
    Runs,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeId {
    Root,
    /// A file, folder, symlink or special file of a working tree: itself, its bytes and
    /// children the backing file's own.
    Tree(TreeRef),
    /// Not a node of the tree: a name in a working-tree folder the kernel must look up
    /// again (it appeared, went or changed outside the mount).
    TreeName(TreeRef, std::ffi::OsString),
    /// `HOST@/paths/`: the entry of any path of a working tree, existing or once changed,
    /// by name (`files@/paths/src/main.rs`); it lists nothing.
    TreePaths(usize),
    /// An intermediate folder of a multi-segment host path (`data/` of `data/db`).
    Branch(Vec<String>),
    /// The `description` of such a folder: which hosts it holds.
    BranchDescription(Vec<String>),
    Entry(EntryRef),
    /// Not a node of the tree: an entry's name in its parent, published when the entry
    /// appeared, went or was replaced, so that a name the kernel keeps (a removed entry's,
    /// or the one of the entry removed before) is looked up again. A change that keeps the
    /// entry in place publishes `Entry` alone, and the path through it stays cached.
    EntryName(EntryRef),
    /// An entry's content (`Host::body`), read lazily; writable where the host can
    /// replace it.
    Body(EntryRef),
    Readme,
    Info(Target, InfoFile),
    Wip,
    WipFile(WipFile),
    /// `ops`: a symbolic link to `.ops`, so walkers that do not follow links (`find`,
    /// `grep -r`, `du`, `tar`, file managers' searches) see content, not call machinery.
    OpsLink(Target),
    /// `.ops`: the op directory itself, which no listing shows (reachable by path).
    Ops(Target),
    Op(Target, OpName),
    OpFile(Target, OpName, OpFile),
    Runs(Target, OpName),
    /// A run, by journal id (its name in `runs/` is its number among the op's runs).
    Run(Target, OpName, i64),
    RunFile(i64, RunFile),
    Discovered(i64),
    /// The 1-based `index`-th entry a run discovered.
    DiscoveredLink(i64, usize),
    /// `runs/ID/content/`: what a call gave that is not text, one file each.
    RunContent(i64),
    /// `runs/ID/content/N.EXT`.
    RunContentFile(i64, OpName),
}

impl InfoFile {
    pub const ALL: [(&'static str, InfoFile); 2] = [
        ("description", InfoFile::Description),
        ("ref", InfoFile::Ref),
    ];
}

impl OpFile {
    pub const ALL: [(&'static str, OpFile); 5] = [
        ("description", OpFile::Description),
        ("schema", OpFile::Schema),
        ("guard", OpFile::Guard),
        ("call", OpFile::Call),
        ("result", OpFile::Result),
    ];
}

impl RunFile {
    pub const ALL: [(&'static str, RunFile); 6] = [
        ("args", RunFile::Args),
        ("status", RunFile::Status),
        ("result", RunFile::Result),
        ("guard", RunFile::Guard),
        ("caller", RunFile::Caller),
        ("progress", RunFile::Progress),
    ];
}

impl WipFile {
    pub const ALL: [(&'static str, WipFile); 9] = [
        ("status", WipFile::Status),
        ("runs", WipFile::Runs),
        ("log", WipFile::Log),
        ("config", WipFile::Config),
        ("stats", WipFile::Stats),
        ("known", WipFile::Known),
        ("events", WipFile::Events),
        ("pending", WipFile::Pending),
        ("control", WipFile::Control),
    ];
}

/// Find `name` in one of the `ALL` tables.
pub fn by_name<T: Copy>(table: &[(&'static str, T)], name: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// What kind of node it is, as the kernel must see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Dir,
    File,
    Symlink,
}

/// How the kernel may cache a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caching {
    /// Content and attributes stay valid until the world says they changed (or `ttl`).
    Stable(std::time::Duration),
    /// Content differs per reader or moment (`guard`, `result`, `call`): always read
    /// afresh (direct I/O). Attributes (the size `stat` shows) are kept for `ttl` and
    /// invalidated when the world knows they changed.
    Direct(std::time::Duration),
}

impl Caching {
    pub fn ttl(self) -> std::time::Duration {
        match self {
            Caching::Stable(ttl) | Caching::Direct(ttl) => ttl,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeAttr {
    pub kind: NodeKind,
    pub size: u64,
    /// Writing is possible now (`call` files, bodies the host lets you replace).
    pub writable: bool,
    pub caching: Caching,
    /// Last change (`mtime` and `ctime`), where it is known (otherwise the mount's start).
    pub modified: Option<std::time::SystemTime>,
}

impl NodeAttr {
    /// The permission bits and link count every adapter shows: folders and files
    /// readable by all, files writable by all when writing is possible now (what may
    /// really be written is the guard's and the policy's to say).
    pub fn perm_and_links(&self) -> (u16, u32) {
        match self.kind {
            NodeKind::Dir => (0o555, 2),
            NodeKind::File if self.writable => (0o666, 1),
            NodeKind::File => (0o444, 1),
            NodeKind::Symlink => (0o777, 1),
        }
    }
}
