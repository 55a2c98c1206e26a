//! The exec host: any program speaking the wip host protocol (`docs/host-protocol.md`),
//! started by the runtime on stdin/stdout (`command = [...]`) or reached on a unix or TCP
//! socket (`connect = "unix:PATH"` / `"tcp:HOST:PORT"`). Every `Host` method is one request;
//! `client` keeps the connection alive, times requests out and restarts the host with
//! backoff, so a host that dies, hangs or talks nonsense costs a caller one error with
//! words and never hangs the mount. While the host is down its root entry still exists and
//! its description says why.

pub mod cache;
pub mod client;
pub mod protocol;
#[cfg(test)]
mod tests;
pub mod transport;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::host::names::Paths;
use crate::host::{
    Body, CallOutcome, Caller, Child, DocumentPage, EntryInfo, Guard, Host, HostError, HostResult,
    OpSpec, Readiness,
};
use crate::hosts::HostContext;
use cache::CrashLog;
use client::{Client, Failed, Failure, Health};
use protocol::{
    ChildrenPage, DocumentsPage, InitializeParams, ResolveResult, RuntimeInfo, WireBody,
    WireCaller, WireEntry, WireGuard, WireIdentity, WireOp, WireOutcome,
};
use transport::Endpoint;

/// The `[[host]]` table of an exec host (minus `kind` and `path`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ExecSettings {
    /// The program and its arguments, started in the launch directory.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// `unix:PATH` (relative to the launch directory) or `tcp:HOST:PORT`.
    #[serde(default)]
    pub connect: Option<String>,
    /// How long a read (entry, children, ops, guard, ...) may wait for its answer.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How long starting (or reaching) the host and its `initialize` answer may take.
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
    /// How long one `call` may run before the runtime cancels it (default an hour). A
    /// call longer than the world's call_timeout_ms goes on as a run its caller can wait
    /// on; the host is restarted only when it stops answering altogether (see
    /// docs/host-protocol.md, "Long calls").
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// Extra environment variables for the command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of the daemon's environment to hand to the command as they are (by
    /// default it gets only PATH, HOME, LANG, LC_*, TERM, TZ, USER, TMPDIR and WIP_*).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// How long the kernel may cache what the host shows; default: what the host asks for
    /// in its capabilities, else 1 s (a program's world usually changes on its own).
    #[serde(default)]
    pub cache_ttl_ms: Option<u64>,
    /// How many children one listing gathers at most, page by page.
    #[serde(default = "default_max_children")]
    pub max_children: usize,
    /// How many children one `children` request asks for.
    #[serde(default = "default_page_size")]
    pub page_size: usize,
}

fn default_timeout_ms() -> u64 {
    5_000
}

fn default_start_timeout_ms() -> u64 {
    10_000
}

fn default_max_children() -> usize {
    5_000
}

fn default_page_size() -> usize {
    500
}

/// The cache lifetime when neither the manifest nor the host says.
const DEFAULT_TTL_MS: u64 = 1_000;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("give exactly one of command = [...] (a program on stdin/stdout) and connect = \"unix:PATH\" or \"tcp:HOST:PORT\"")]
    Transport,
    #[error("command must name a program: command = [\"python3\", \"host.py\"]")]
    EmptyCommand,
    #[error("{0}")]
    Connect(#[from] transport::ConnectError),
    #[error("timeout_ms, start_timeout_ms, call_timeout_ms, max_children and page_size must be at least 1")]
    Zero,
}

/// A host behind the wip host protocol.
pub struct ExecHost {
    client: Arc<Client>,
    /// Where the host is mounted (`processes`): its printed paths and fallback ref.
    paths: Paths,
    /// The manifest's cache lifetime, which wins over the host's wish.
    ttl: Option<Duration>,
    max_children: usize,
    page_size: usize,
    /// The last ops each path answered: served while the host is down, so an op's
    /// `result` and `runs/` stay readable right after the call that brought it down.
    last_ops: Mutex<HashMap<Vec<String>, Vec<OpSpec>>>,
    /// Calls that brought the host down, refused for a while (see `cache::CrashLog`).
    crashes: CrashLog,
}

/// How long a call may run by default before the runtime cancels it.
const DEFAULT_CALL_LIMIT_MS: u64 = 3_600_000;

/// Paths whose ops are remembered (the memory is cleared when full).
const LAST_OPS_MAX: usize = 1024;

impl ExecHost {
    pub fn open(settings: ExecSettings, ctx: &HostContext) -> Result<Self, ExecError> {
        let mount = ctx.mount.as_str();
        let call_timeout_ms = settings.call_timeout_ms.unwrap_or(DEFAULT_CALL_LIMIT_MS);
        if settings.timeout_ms == 0
            || call_timeout_ms == 0
            || settings.max_children == 0
            || settings.page_size == 0
        {
            return Err(ExecError::Zero);
        }
        let endpoint = match (&settings.command, &settings.connect) {
            (Some(argv), None) => {
                if argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(ExecError::EmptyCommand);
                }
                Endpoint::Command {
                    argv: argv.clone(),
                    env: crate::hosts::child_env(&settings.env, &settings.pass_env),
                    cwd: ctx.launch_dir.clone(),
                }
            }
            (None, Some(c)) => Endpoint::parse_connect(c, &ctx.launch_dir)?,
            _ => return Err(ExecError::Transport),
        };
        let init = InitializeParams {
            protocol: protocol::PROTOCOL.to_string(),
            version: protocol::VERSION,
            path: mount.split('/').map(str::to_string).collect(),
            identity: WireIdentity {
                user: ctx.identity.user.clone(),
                role: ctx.identity.role.as_str().to_string(),
            },
            runtime: RuntimeInfo {
                pid: std::process::id(),
                // SAFETY: getuid has no preconditions and cannot fail.
                uid: unsafe { libc::getuid() },
                mount_point: ctx.mount_point.display().to_string(),
            },
        };
        let client = Client::new(
            mount.to_string(),
            endpoint,
            [
                Duration::from_millis(settings.timeout_ms),
                Duration::from_millis(call_timeout_ms),
                Duration::from_millis(settings.start_timeout_ms),
            ],
            init,
            ctx.changes.clone(),
        );
        client.supervise();
        Ok(ExecHost {
            client,
            paths: Paths::new(mount),
            ttl: settings.cache_ttl_ms.map(Duration::from_millis),
            max_children: settings.max_children,
            page_size: settings.page_size,
            last_ops: Mutex::new(HashMap::new()),
            crashes: CrashLog::default(),
        })
    }

    /// The host's answer to `entry` for `path`, from the cache within the host's lifetime.
    fn wire_entry(&self, path: &[String]) -> HostResult<Option<WireEntry>> {
        if let Some(e) = self.client.entries.get(path, self.cache_ttl()) {
            return Ok(Some(e));
        }
        let v = self.read("entry", json!({ "path": path }))?;
        let e: Option<WireEntry> = self.decode("entry", v)?;
        if let Some(e) = &e {
            self.client.entries.put(path.to_vec(), e.clone());
        }
        Ok(e)
    }

    /// The root's description, with the calls that crash the host appended.
    fn with_crashes(&self, mut info: EntryInfo) -> EntryInfo {
        for ((path, op), c) in self.crashes.all().into_iter().take(3) {
            let at = self.paths.op(&path, &op);
            let left = match self.crashes.refused(&path, &op, client::backoff) {
                Some((_, left)) => format!("refused for {:.1} s more", left.as_secs_f64()),
                None => "may be tried again".to_string(),
            };
            info.description.push_str(&format!(
                " · crashes on this call: {at} ({}; {left})",
                crate::host::text::plural(c.times, "time", "times in a row")
            ));
        }
        info
    }

    /// The client, for benchmarks and tests.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    fn read(&self, method: &str, params: Value) -> HostResult<Value> {
        self.client
            .request(method, params, self.client.read_timeout)
    }

    fn decode<T: serde::de::DeserializeOwned>(&self, method: &str, v: Value) -> HostResult<T> {
        serde_json::from_value(v).map_err(|e| {
            HostError::failed(
                format!(
                    "host {} answered {method} with a result of the wrong shape",
                    self.client.name
                ),
                e,
            )
        })
    }

    /// The ops of the kind the entry at `path` says it is, when the host declared kinds and
    /// this one; `None`: ask `ops`.
    fn ops_of_kind(&self, path: &[String]) -> Option<Vec<OpSpec>> {
        // Before the first handshake nobody knows the kinds: the entry's request makes it.
        let entry = match self.client.kinds() {
            None if self.client.health() != Health::NeverTried => return None,
            _ => self.wire_entry(path).ok()??,
        };
        let kinds = self.client.kinds()?;
        let kind = entry.kind?;
        match kinds.get(&kind) {
            Some(ops) => Some(ops.clone()),
            None => {
                tracing::debug!(host = %self.paths.mount(), "entry {path:?} names kind {kind:?}, which initialize did not declare");
                None
            }
        }
    }

    /// The root's entry while the host cannot answer: it says why, so `cat description`
    /// explains an `ls` that fails.
    fn down_root(&self, err: &HostError) -> EntryInfo {
        let why = match self.client.health() {
            Health::Down(why, next) if !next.is_zero() => {
                format!("{why}; next attempt in {:.1} s", next.as_secs_f64())
            }
            Health::Down(why, _) => why,
            _ => {
                return EntryInfo::new(
                    format!("exec host {}: {err}", self.paths.mount()),
                    format!("exec://{}", self.paths.mount()),
                )
            }
        };
        EntryInfo::new(
            format!("exec host {} is down: {why}", self.paths.mount()),
            format!("exec://{}", self.paths.mount()),
        )
    }
}

impl Host for ExecHost {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        let info = match self.wire_entry(path) {
            Ok(Some(e)) => Some(e.into_info()),
            // The root exists whatever the host says: it is where the host is mounted, and
            // what `initialize` said of itself describes it.
            Ok(None) if path.is_empty() => Some(EntryInfo::new(
                match self.client.hello() {
                    Some(h) => match h.description.as_deref().filter(|d| !d.trim().is_empty()) {
                        Some(d) => format!("{} (exec host {}): {d}", h.name, self.paths.mount()),
                        None => format!("{} (exec host {})", h.name, self.paths.mount()),
                    },
                    None => format!("exec host {}", self.paths.mount()),
                },
                format!("exec://{}", self.paths.mount()),
            )),
            Ok(None) => None,
            Err(err) if path.is_empty() => Some(self.down_root(&err)),
            Err(err) => return Err(err),
        };
        Ok(match info {
            Some(root) if path.is_empty() => Some(self.with_crashes(root)),
            other => other,
        })
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let limit = self.page_size.min(self.max_children - out.len());
            let v = self.read(
                "children",
                json!({ "path": path, "cursor": cursor, "limit": limit }),
            )?;
            let page: ChildrenPage = self.decode("children", v)?;
            let got = page.children.len();
            for c in page.children {
                // A listed child is described: its lookup right after needs no request.
                let mut child_path = path.to_vec();
                child_path.push(c.name.clone());
                self.client.entries.put(child_path, c.entry.clone());
                out.push(c.into_child());
            }
            match page.next_cursor {
                // A host that pages without progress would loop forever: stop.
                Some(next)
                    if got > 0
                        && out.len() < self.max_children
                        && cursor.as_deref() != Some(next.as_str()) =>
                {
                    cursor = Some(next)
                }
                _ => break,
            }
        }
        out.truncate(self.max_children);
        Ok(out)
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        let answer = match self.ops_of_kind(path) {
            Some(ops) => Ok(ops),
            None => self
                .read("ops", json!({ "path": path }))
                .and_then(|v| self.decode::<Vec<WireOp>>("ops", v))
                .map(|ops| ops.into_iter().map(WireOp::into_spec).collect()),
        };
        let mut last = crate::hosts::lock(&self.last_ops);
        match answer {
            Ok(ops) => {
                if last.len() >= LAST_OPS_MAX {
                    last.clear();
                }
                last.insert(path.to_vec(), ops.clone());
                Ok(ops)
            }
            Err(
                e @ (HostError::Backend(_) | HostError::Failed { .. } | HostError::TimedOut(_)),
            ) => match (last.get(path), self.client.health()) {
                (Some(ops), Health::Down(..)) => Ok(ops.clone()),
                _ => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard> {
        let v = self.read("guard", json!({ "path": path, "op": op, "args": args }))?;
        let g: WireGuard = self.decode("guard", v)?;
        Ok(g.into_guard())
    }

    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        if let Some((c, left)) = self.crashes.refused(path, op, client::backoff) {
            return Err(HostError::Backend(format!(
                "host {} crashes on this call: it went down during it {} (last: {}); refused for {:.1} s more, then it may be tried again",
                self.paths.mount(),
                crate::host::text::plural(c.times, "time", "times in a row"),
                c.why,
                left.as_secs_f64()
            )));
        }
        let sent = self.client.call(
            json!({ "path": path, "op": op, "args": args, "caller": WireCaller::of(caller) }),
            &caller.signal,
            self.client.call_timeout,
        );
        // Whatever happened, the call may have changed what its entry shows.
        self.client.entries.forget(&[path.to_vec()]);
        let v = match sent {
            Ok(v) => v,
            Err(Failure { error, how }) => {
                match how {
                    Failed::HostLost => {
                        let words = error.to_string();
                        let prefix = format!("host {}: ", self.paths.mount());
                        let why = words.strip_prefix(&prefix).unwrap_or(&words);
                        self.crashes.crashed(path, op, why.to_string())
                    }
                    // An error is an answer: this call does not crash the host.
                    Failed::Answered => self.crashes.answered(path, op),
                    Failed::Unsent => {}
                }
                return Err(error);
            }
        };
        self.crashes.answered(path, op);
        let o: WireOutcome = self.decode("call", v)?;
        let o = o.into_outcome();
        self.client.entries.forget(&o.changed);
        self.client.entries.forget(&o.discovered);
        Ok(o)
    }

    fn documents(&self, cursor: Option<&str>, limit: usize) -> HostResult<DocumentPage> {
        if !self
            .client
            .hello()
            .is_some_and(|h| h.capabilities.documents)
        {
            return Ok((Vec::new(), None));
        }
        let v = self.read("documents", json!({ "cursor": cursor, "limit": limit }))?;
        let page: DocumentsPage = self.decode("documents", v)?;
        Ok(page.into_documents())
    }

    /// The entry's `modified`, from the entry the host gave (kept for the cache lifetime).
    fn modified(&self, path: &[String]) -> HostResult<Option<std::time::SystemTime>> {
        Ok(self.wire_entry(path)?.and_then(|e| e.info().modified))
    }

    /// Asked only of hosts that declare the `body` capability.
    fn body(&self, path: &[String]) -> HostResult<Option<Body>> {
        if !self.client.hello().is_some_and(|h| h.capabilities.body) {
            return Ok(None);
        }
        let v = self.read("body", json!({ "path": path }))?;
        let b: Option<WireBody> = self.decode("body", v)?;
        b.map(|b| {
            b.into_body().map_err(|why| {
                HostError::Backend(format!(
                    "host {} answered body with a result of the wrong shape: {why}",
                    self.client.name
                ))
            })
        })
        .transpose()
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        if !self.client.hello().is_some_and(|h| h.capabilities.resolve) {
            return Vec::new();
        }
        match self
            .read("resolve", json!({ "ref": reference }))
            .and_then(|v| self.decode::<ResolveResult>("resolve", v))
        {
            Ok(r) => r.paths,
            Err(e) => {
                tracing::debug!(host = %self.paths.mount(), "resolve failed: {e}");
                Vec::new()
            }
        }
    }

    fn bounded_calls(&self) -> bool {
        // Bounded by call_timeout_ms, but a hung host must cost the pool's thread, not the
        // caller's FUSE thread.
        false
    }

    // The protocol requires a host's `call` to check its guard and answer blocked.
    fn checks_guard_in_call(&self) -> bool {
        true
    }

    fn cache_ttl(&self) -> Duration {
        self.ttl
            .or_else(|| self.client.ttl_hint())
            .unwrap_or(Duration::from_millis(DEFAULT_TTL_MS))
    }

    fn readiness(&self) -> Readiness {
        match self.client.health() {
            Health::Up => Readiness::Ready,
            Health::NeverTried => Readiness::Starting("connecting".to_string()),
            Health::Down(why, next) => Readiness::Down(format!(
                "{why}; next attempt in {:.1} s",
                next.as_secs_f64()
            )),
        }
    }
}
