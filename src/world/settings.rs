//! What the world is told by whoever mounts it: its settings and who it acts as. The
//! manifest's `[world]` and `[identity]` tables map onto these types; the world knows
//! nothing of the manifest file itself.

use std::time::Duration;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldSettings {
    /// Short name of the world, shown in its description.
    #[serde(default = "default_world_name")]
    pub name: String,
    /// One paragraph: what this world holds.
    #[serde(default)]
    pub description: Option<String>,
    /// How long a call may run before the caller gets ETIMEDOUT, in milliseconds.
    #[serde(default = "default_call_timeout_ms")]
    pub call_timeout_ms: u64,
    /// The largest document one `call` (or `body`) write may carry, in bytes: a write past
    /// it fails with EFBIG and nothing more is buffered.
    #[serde(default = "default_max_call_bytes")]
    pub max_call_bytes: u64,
    /// The most all open `call` and `body` descriptors together may buffer, in bytes: a
    /// write past it fails with ENOSPC (memory stays bounded however many are held open).
    #[serde(default = "default_max_buffered_bytes")]
    pub max_buffered_bytes: u64,
    /// How many calls may run on worker threads at once; more wait in a queue (their
    /// `call_timeout_ms` counts from the write).
    #[serde(default = "default_max_call_threads")]
    pub max_call_threads: usize,
    /// Titled names, for people: collections list `42 Crash when config is missing`
    /// (the bare `42` still resolves). Off by default: shell loops over `ls` stay simple.
    #[serde(default)]
    pub titled: bool,
    /// Other users may enter the mount, as `-o allow_other` says for FUSE (a normal user
    /// needs `user_allow_other` in /etc/fuse.conf) and `--allow-other` for `wip
    /// serve-nfs`: without it only the user who mounted it is served.
    #[serde(default)]
    pub allow_other: bool,
    /// How long `wip mount` waits for hosts that start in the background (MCP servers,
    /// exec hosts) before it returns, in milliseconds.
    #[serde(default = "default_startup_wait_ms")]
    pub startup_wait_ms: u64,
}

impl WorldSettings {
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }
}

impl Default for WorldSettings {
    fn default() -> Self {
        WorldSettings {
            name: default_world_name(),
            description: None,
            call_timeout_ms: default_call_timeout_ms(),
            max_call_bytes: default_max_call_bytes(),
            max_buffered_bytes: default_max_buffered_bytes(),
            max_call_threads: default_max_call_threads(),
            titled: false,
            allow_other: false,
            startup_wait_ms: default_startup_wait_ms(),
        }
    }
}

fn default_world_name() -> String {
    "world".to_string()
}

fn default_call_timeout_ms() -> u64 {
    crate::host::DEFAULT_CALL_TIMEOUT_MS
}

fn default_max_call_bytes() -> u64 {
    8 << 20
}

fn default_max_buffered_bytes() -> u64 {
    64 << 20
}

fn default_max_call_threads() -> usize {
    64
}

fn default_startup_wait_ms() -> u64 {
    5_000
}
