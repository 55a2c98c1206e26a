//! The connection to one MCP server: a tokio runtime owned by the host, a supervisor task
//! that starts the server (in the background, so mounting never waits for it), lists what
//! it offers, follows its `list_changed` notifications and restarts it with backoff when it
//! dies. Host methods read the cached catalog; only calls reach the server, each bounded by
//! a timeout.

use std::collections::VecDeque;
use std::future::Future;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use process_wrap::tokio::{CommandWrap, ProcessGroup};
#[allow(deprecated)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, Implementation, Prompt, Resource,
    ResourceTemplate, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, Peer, ServiceError, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, Notify};

use crate::world::host::{path_of, Changes, HostError, HostResult};

use super::McpSettings;

/// Lines of the server's stderr kept to explain a failure.
const STDERR_LINES: usize = 8;
/// Longest wait between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// At most this many resources are listed (following the server's cursor).
pub const MAX_RESOURCES: usize = 10_000;

/// Where the server is in its life.
#[derive(Clone, Debug)]
pub enum Phase {
    Starting { since: Instant },
    Ready,
    Down { why: String, retry_at: Instant },
    Stopped,
}

/// Who the server says it is.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    pub name: String,
    pub title: Option<String>,
    pub version: String,
    pub instructions: Option<String>,
    pub protocol: String,
}

/// What the server offers, as last listed (kept while it restarts).
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub server: Option<ServerInfo>,
    pub tools: Vec<Tool>,
    pub resources: Vec<Resource>,
    /// The listing stopped at `MAX_RESOURCES`.
    pub resources_truncated: bool,
    pub templates: Vec<ResourceTemplate>,
    pub prompts: Vec<Prompt>,
}

pub struct State {
    pub phase: Phase,
    pub catalog: Catalog,
    pub peer: Option<Peer<RoleClient>>,
    /// How many times the server was started.
    pub starts: u32,
    pub stderr: VecDeque<String>,
    /// Process group of the running server, to end it whole (npx starts node under it).
    pgid: Option<i32>,
}

pub struct Shared {
    pub state: Mutex<State>,
    changes: Changes,
    shutdown: Notify,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_phase(&self, phase: Phase) {
        self.lock().phase = phase;
        // The root's description and every guard depend on the phase.
        self.changes.changed(vec![Vec::new()]);
    }
}

/// Which list a server said changed.
#[derive(Clone, Copy, Debug)]
enum Listing {
    Tools,
    Resources,
    Prompts,
}

/// The client side the server talks to: notifications go to the supervisor; requests
/// for a model (sampling) or a person (elicitation) get an error saying why, at once.
struct Handler {
    events: mpsc::UnboundedSender<Listing>,
}

// Sampling is deprecated by the protocol, but servers still ask for it: answer with words.
#[allow(deprecated)]
impl ClientHandler for Handler {
    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "sampling is not supported: this client (a wip mount) has no language model",
            None,
        ))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "elicitation is not supported: this client (a wip mount) cannot ask a person",
            None,
        ))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Listing::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Listing::Resources);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Listing::Prompts);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("wip", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// The runtime and the supervisor of one server.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    pub shared: Arc<Shared>,
    /// How long one request may take (resolved by `McpHost::open`).
    timeout: Duration,
}

impl Client {
    /// Start the supervisor; returns at once (the server starts in the background).
    pub fn start(
        settings: Arc<McpSettings>,
        timeout: Duration,
        changes: Changes,
    ) -> std::io::Result<Client> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wip-mcp")
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                phase: Phase::Starting {
                    since: Instant::now(),
                },
                catalog: Catalog::default(),
                peer: None,
                starts: 0,
                stderr: VecDeque::new(),
                pgid: None,
            }),
            changes,
            shutdown: Notify::new(),
        });
        runtime.spawn(supervise(Arc::clone(&shared), settings, timeout));
        Ok(Client {
            runtime,
            shared,
            timeout,
        })
    }

    /// The peer to send requests to, or why there is none.
    pub fn peer(&self) -> HostResult<Peer<RoleClient>> {
        let st = self.shared.lock();
        match (&st.phase, &st.peer) {
            (Phase::Ready, Some(p)) => Ok(p.clone()),
            (phase, _) => Err(HostError::Backend(format!(
                "protocol error: the server is not running ({})",
                phase_words(phase)
            ))),
        }
    }

    /// Run one request on the runtime, bounded by `timeout`; the words name `what`.
    pub fn request<T, F>(&self, what: &str, timeout: Duration, fut: F) -> HostResult<T>
    where
        F: Future<Output = Result<T, ServiceError>>,
    {
        match self
            .runtime
            .block_on(async { tokio::time::timeout(timeout, fut).await })
        {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(HostError::Backend(service_error_words(what, &e))),
            Err(_) => Err(HostError::TimedOut(format!(
                "{what}: the server did not answer within {:.1}s (timeout_ms = {} in the manifest); the request was cancelled",
                timeout.as_secs_f64(),
                timeout.as_millis()
            ))),
        }
    }

    pub fn call_timeout(&self) -> Duration {
        self.timeout
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shared.shutdown.notify_one();
        let pgid = self.shared.lock().pgid.take();
        if let Some(pgid) = pgid {
            // End the whole group (npx and the node it started), not just its leader.
            unsafe { libc::killpg(pgid, libc::SIGTERM) };
        }
    }
}

/// Words for a request that failed (JSON-RPC error, closed transport, …).
pub fn service_error_words(what: &str, e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(d) => {
            format!("protocol error: {what}: {} (code {})", d.message, d.code.0)
        }
        ServiceError::TransportClosed => {
            format!(
                "protocol error: {what}: the server closed the connection (it exited or crashed)"
            )
        }
        other => format!("protocol error: {what}: {other}"),
    }
}

/// The phase in a few words, for descriptions and guards.
pub fn phase_words(phase: &Phase) -> String {
    match phase {
        Phase::Starting { since } => format!(
            "starting for {:.0} s",
            since.elapsed().as_secs_f64().floor()
        ),
        Phase::Ready => "ready".to_string(),
        Phase::Down { why, retry_at } => {
            let left = retry_at.saturating_duration_since(Instant::now());
            format!("{why}; restarting in {:.0} s", left.as_secs_f64().ceil())
        }
        Phase::Stopped => "stopped".to_string(),
    }
}

/// Start, serve, and restart the server until the host is dropped.
async fn supervise(shared: Arc<Shared>, settings: Arc<McpSettings>, timeout: Duration) {
    let mut backoff = Duration::from_secs(1);
    loop {
        shared.set_phase(Phase::Starting {
            since: Instant::now(),
        });
        let started = Instant::now();
        let why = tokio::select! {
            why = run_once(&shared, &settings, timeout) => why,
            _ = shared.shutdown.notified() => break,
        };
        {
            let mut st = shared.lock();
            st.peer = None;
            if let Some(pgid) = st.pgid.take() {
                // Whatever the server left behind in its group goes with it.
                unsafe { libc::killpg(pgid, libc::SIGKILL) };
            }
        }
        // A server that ran a while gets a fresh backoff.
        if started.elapsed() > Duration::from_secs(60) {
            backoff = Duration::from_secs(1);
        }
        let tail: Vec<String> = shared.lock().stderr.iter().cloned().collect();
        let why = if tail.is_empty() {
            why
        } else {
            format!("{why} (stderr: {})", tail.join(" | "))
        };
        tracing::warn!(target: "wip::mcp", "{}: {why}", settings.command.join(" "));
        shared.set_phase(Phase::Down {
            why,
            retry_at: Instant::now() + backoff,
        });
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shared.shutdown.notified() => break,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    shared.lock().phase = Phase::Stopped;
}

/// One life of the server: returns why it ended.
async fn run_once(shared: &Arc<Shared>, settings: &McpSettings, timeout: Duration) -> String {
    let Some((program, args)) = settings.command.split_first() else {
        return "no command".to_string();
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).envs(&settings.env);
    if let Some(dir) = &settings.cwd {
        cmd.current_dir(dir);
    }
    let mut wrap = CommandWrap::from(cmd);
    wrap.wrap(ProcessGroup::leader());
    let (transport, stderr) = match TokioChildProcess::builder(wrap)
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(t) => t,
        Err(e) => return format!("cannot start `{}`: {e}", settings.command.join(" ")),
    };
    {
        let mut st = shared.lock();
        st.starts += 1;
        st.stderr.clear();
        st.pgid = transport.id().and_then(|p| i32::try_from(p).ok());
    }
    if let Some(stderr) = stderr {
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "wip::mcp", "server stderr: {line}");
                let mut st = shared.lock();
                if st.stderr.len() == STDERR_LINES {
                    st.stderr.pop_front();
                }
                st.stderr.push_back(one_line(&line));
            }
        });
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let startup = Duration::from_millis(settings.startup_timeout_ms);
    let running = match tokio::time::timeout(startup, Handler { events: tx }.serve(transport)).await
    {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return format!("the server failed to initialize: {e}"),
        Err(_) => {
            return format!(
                "the server did not initialize within {:.0} s (startup_timeout_ms)",
                startup.as_secs_f64()
            )
        }
    };
    let peer = running.peer().clone();
    let info = peer.peer_info().map(|i| ServerInfo {
        name: i
            .server_info
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        title: i.server_info.as_ref().and_then(|s| s.title.clone()),
        version: i
            .server_info
            .as_ref()
            .map(|s| s.version.clone())
            .unwrap_or_default(),
        instructions: i.instructions.clone(),
        protocol: i.protocol_version.to_string(),
    });
    let mut catalog = Catalog {
        server: info,
        ..Catalog::default()
    };
    for listing in [Listing::Tools, Listing::Resources, Listing::Prompts] {
        if let Err(e) = list(&peer, listing, timeout, &mut catalog).await {
            return e;
        }
    }
    {
        let mut st = shared.lock();
        st.catalog = catalog;
        st.peer = Some(peer.clone());
    }
    shared.set_phase(Phase::Ready);
    shared.changes.changed(vec![
        Vec::new(),
        path_of(&["tools"]),
        path_of(&["resources"]),
        path_of(&["templates"]),
        path_of(&["prompts"]),
    ]);
    let closed = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    loop {
        tokio::select! {
            quit = &mut waiting => {
                return match quit {
                    Ok(reason) => format!("the server exited ({reason:?})"),
                    Err(e) => format!("the connection to the server failed: {e}"),
                };
            }
            Some(listing) = rx.recv() => {
                let mut catalog = shared.lock().catalog.clone();
                match list(&peer, listing, timeout, &mut catalog).await {
                    Ok(()) => {
                        shared.lock().catalog = catalog;
                        shared.changes.changed(match listing {
                            Listing::Tools => vec![Vec::new(), path_of(&["tools"])],
                            Listing::Resources => vec![path_of(&["resources"]), path_of(&["templates"])],
                            Listing::Prompts => vec![path_of(&["prompts"])],
                        });
                    }
                    Err(e) => tracing::warn!(target: "wip::mcp", "refreshing {listing:?}: {e}"),
                }
            }
            _ = shared.shutdown.notified() => {
                closed.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(3), &mut waiting).await;
                return "stopped".to_string();
            }
        }
    }
}

/// List one kind of thing the server offers into `catalog` (nothing if it lacks the
/// capability).
async fn list(
    peer: &Peer<RoleClient>,
    listing: Listing,
    timeout: Duration,
    catalog: &mut Catalog,
) -> Result<(), String> {
    let caps = peer.peer_info().map(|i| i.capabilities.clone());
    let has = |f: fn(&rmcp::model::ServerCapabilities) -> bool| caps.as_ref().is_some_and(f);
    let bounded = |what: &'static str, r: Result<Result<(), ServiceError>, _>| match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(service_error_words(what, &e)),
        Err(tokio::time::error::Elapsed { .. }) => Err(format!("{what}: no answer in time")),
    };
    match listing {
        Listing::Tools if has(|c| c.tools.is_some()) => bounded(
            "tools/list",
            tokio::time::timeout(timeout, async {
                catalog.tools = peer.list_all_tools().await?;
                Ok(())
            })
            .await,
        ),
        Listing::Prompts if has(|c| c.prompts.is_some()) => bounded(
            "prompts/list",
            tokio::time::timeout(timeout, async {
                catalog.prompts = peer.list_all_prompts().await?;
                Ok(())
            })
            .await,
        ),
        Listing::Resources if has(|c| c.resources.is_some()) => {
            bounded(
                "resources/list",
                tokio::time::timeout(timeout, async {
                    let (items, truncated) = list_resources(peer).await?;
                    catalog.resources = items;
                    catalog.resources_truncated = truncated;
                    Ok(())
                })
                .await,
            )?;
            bounded(
                "resources/templates/list",
                tokio::time::timeout(timeout, async {
                    catalog.templates = peer.list_all_resource_templates().await?;
                    Ok(())
                })
                .await,
            )
        }
        _ => Ok(()),
    }
}

/// Resources page by page through the server's cursor, at most `MAX_RESOURCES`.
async fn list_resources(peer: &Peer<RoleClient>) -> Result<(Vec<Resource>, bool), ServiceError> {
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page = peer
            .list_resources(Some(
                rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
            ))
            .await?;
        items.extend(page.resources);
        if items.len() >= MAX_RESOURCES {
            let more = page.next_cursor.is_some() || items.len() > MAX_RESOURCES;
            items.truncate(MAX_RESOURCES);
            return Ok((items, more));
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok((items, false)),
        }
    }
}

fn one_line(s: &str) -> String {
    crate::hosts::text::one_line(s, 300)
}
