//! Hosts: one folder per kind. Each knows its backend and nothing of FUSE.

use std::path::PathBuf;
use std::sync::Arc;

use crate::host::identity::Identity;
use crate::host::names::Paths;
use crate::host::{Changes, Host};
use crate::manifest::{HostSpec, ManifestError};

pub mod agent;
pub mod db;
pub mod exec;
pub mod files;
pub mod github;
pub mod mcp;
pub mod search;
pub mod tracker;

/// The environment a host's child (agent, exec host, MCP server) starts from: never the
/// daemon's whole environment, which may hold tokens. See `secrets::child_env_from`.
pub fn child_env(
    own: &std::collections::BTreeMap<String, String>,
    pass_env: &[String],
) -> std::collections::BTreeMap<String, String> {
    crate::secrets::child_env_from(std::env::vars(), pass_env, own)
}

/// The value behind `m`, even when a thread panicked holding it: hosts keep no state a
/// panic could leave half-changed behind their locks (connections, caches).
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What every host may know about the mount it is part of.
#[derive(Clone, Debug)]
pub struct HostContext {
    /// The state directory (SQLite databases of the runtime and of hosts).
    pub state_dir: PathBuf,
    /// The directory `wip mount` was run from.
    pub launch_dir: PathBuf,
    /// The mount point, which a host must never expose inside itself.
    pub mount_point: PathBuf,
    /// Who the mount acts as.
    pub identity: Identity,
    /// Hosts built before this one (manifest order), for hosts that work across others
    /// through the Host trait only (search indexes their `documents`).
    pub peers: Vec<Peer>,
    /// How long the runtime lets a call run before answering ETIMEDOUT (the world's
    /// `call_timeout_ms`): a host that blocks on purpose (`wait`) stays below it.
    pub call_timeout: std::time::Duration,
    /// Where this host reports entries that changed on their own (see `Changes`).
    pub changes: Changes,
    /// Where the host being built is mounted in the world (`tracker`, `db/chinook`); set
    /// by `build` from its `[[host]]` table.
    pub mount: String,
    /// What the policy hides from every reader (a host showing others' content skips it).
    pub hidden: crate::host::Hidden,
}

impl HostContext {
    /// A context for a host used without a mount (unit tests, benchmarks): state and launch
    /// directory `dir`, the default identity and timeouts, no peers, changes go nowhere.
    pub fn for_tests(dir: &std::path::Path) -> HostContext {
        HostContext {
            state_dir: dir.to_path_buf(),
            launch_dir: dir.to_path_buf(),
            mount_point: PathBuf::from("/nonexistent-wip-mount"),
            identity: Identity::default(),
            peers: Vec::new(),
            call_timeout: std::time::Duration::from_millis(crate::host::DEFAULT_CALL_TIMEOUT_MS),
            changes: Changes::detached(),
            mount: String::new(),
            hidden: Default::default(),
        }
    }

    /// The same context for the host mounted at `mount` (`tracker`, `db/chinook`).
    pub fn at(&self, mount: &str) -> HostContext {
        HostContext {
            mount: mount.to_string(),
            ..self.clone()
        }
    }

    /// The builder of every world path this host prints (its mount, then escaped names).
    pub fn paths(&self) -> Paths {
        Paths::new(&self.mount)
    }

    /// The same for a working tree (names exact, entries at `PATH@`).
    pub fn tree_paths(&self) -> Paths {
        Paths::exact(&self.mount)
    }

    /// A host's own limit on one wait, in ms: the manifest's `set`, else the world's call
    /// timeout less 5 s (at least 1 s). `Err((wait, call_timeout))` when it is not below the
    /// world's call timeout: such a wait would end in the runtime's ETIMEDOUT instead of
    /// the host's own words.
    pub fn wait_within_call(&self, set: Option<u64>) -> Result<u64, (u64, u64)> {
        let call_ms = u64::try_from(self.call_timeout.as_millis()).unwrap_or(u64::MAX);
        let wait = set.unwrap_or_else(|| call_ms.saturating_sub(5_000).max(1_000));
        if wait >= call_ms {
            Err((wait, call_ms))
        } else {
            Ok(wait)
        }
    }
}

/// Another host of the same world and where it is mounted.
#[derive(Clone)]
pub struct Peer {
    /// World path of its mount point, e.g. `tracker` or `db/chinook`.
    pub path: String,
    pub host: Arc<dyn Host>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("host {path:?} ({kind}): {message}")]
    Host {
        kind: String,
        path: String,
        message: String,
    },
    #[error("unknown host kind {0:?} (known: {known})", known = known_kinds())]
    UnknownKind(String),
}

/// How a host kind is opened: with its own settings table parsed into `S`, in the mount's
/// context (which says where it is mounted: `HostContext::mount`).
type Open<S, H, E> = fn(S, &HostContext) -> Result<H, E>;

/// Open one host from its table (the common part of every kind).
fn open<S, H, E>(
    spec: &HostSpec,
    ctx: &HostContext,
    open: Open<S, H, E>,
) -> Result<Arc<dyn Host>, BuildError>
where
    S: serde::de::DeserializeOwned,
    H: Host + 'static,
    E: std::fmt::Display,
{
    let host = open(spec.settings()?, &ctx.at(&spec.path)).map_err(|e| BuildError::Host {
        kind: spec.kind.clone(),
        path: spec.path.clone(),
        message: e.to_string(),
    })?;
    Ok(Arc::new(host))
}

type Builder = fn(&HostSpec, &HostContext) -> Result<Arc<dyn Host>, BuildError>;

/// Every host kind a manifest can name. DESIGN's table calls the agent host `agents`;
/// both names mount it.
const KINDS: &[(&str, Builder)] = &[
    ("tracker", |s, c| open(s, c, tracker::TrackerHost::open)),
    ("files", |s, c| open(s, c, files::FilesHost::open)),
    ("db", |s, c| open(s, c, db::DbHost::open)),
    ("search", |s, c| open(s, c, search::SearchHost::open)),
    ("agent", |s, c| open(s, c, agent::AgentHost::open)),
    ("agents", |s, c| open(s, c, agent::AgentHost::open)),
    ("exec", |s, c| open(s, c, exec::ExecHost::open)),
    ("mcp", |s, c| open(s, c, mcp::McpHost::open)),
    ("github", |s, c| open(s, c, github::GithubHost::open)),
];

/// The kinds a manifest may name, as an error lists them.
fn known_kinds() -> String {
    KINDS
        .iter()
        .map(|(kind, _)| *kind)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Build the host a `[[host]]` table describes.
pub fn build(spec: &HostSpec, ctx: &HostContext) -> Result<Arc<dyn Host>, BuildError> {
    match KINDS.iter().find(|(kind, _)| *kind == spec.kind) {
        Some((_, build)) => build(spec, ctx),
        None => Err(BuildError::UnknownKind(spec.kind.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_hosts_wait_stays_below_the_call_timeout() {
        let mut ctx = HostContext::for_tests(std::path::Path::new("/nonexistent"));
        ctx.call_timeout = Duration::from_secs(30);
        assert_eq!(ctx.wait_within_call(None), Ok(25_000));
        assert_eq!(ctx.wait_within_call(Some(29_999)), Ok(29_999));
        assert_eq!(ctx.wait_within_call(Some(30_000)), Err((30_000, 30_000)));
        ctx.call_timeout = Duration::from_secs(3);
        assert_eq!(ctx.wait_within_call(None), Ok(1_000));
        ctx.call_timeout = Duration::from_millis(800);
        assert_eq!(ctx.wait_within_call(None), Err((1_000, 800)));
    }
}
