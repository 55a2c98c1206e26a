//! The connection to one MCP server: a tokio runtime owned by the host, a supervisor task
//! that starts the server (in the background, so mounting never waits for it), lists what
//! it offers, follows its `list_changed` notifications and restarts it with backoff when it
//! dies. Host methods read the cached catalog; only calls reach the server, each bounded by
//! a timeout.
//!
//! The client owns the server's process (not rmcp's child transport) so that a death is told
//! with its exit status or signal; it watches the server's stdout for lines that are not
//! JSON-RPC (rmcp skips them silently) and keeps the stderr of the current life only.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
#[allow(deprecated)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, Implementation, Prompt, Resource,
    ResourceTemplate, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData, Peer, ServiceError, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, ReadBuf};
use tokio::sync::{mpsc, Notify};

use crate::world::host::{path_of, Changes, HostError, HostResult};

use super::McpSettings;

/// Lines of the server's stderr kept to explain a failure.
const STDERR_LINES: usize = 8;
/// How much of a junk stdout line is quoted.
const JUNK_QUOTE: usize = 200;
/// A server that ran this long before it died starts again from the first delay.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// How long to wait for the exit status once the server's stdout closed.
const EXIT_WAIT: Duration = Duration::from_secs(2);
/// At most this many resources are listed (following the server's cursor).
pub const MAX_RESOURCES: usize = 10_000;

/// Where the server is in its life.
#[derive(Clone, Debug)]
pub enum Phase {
    Starting {
        since: Instant,
    },
    Ready,
    Down {
        why: String,
        retry_at: Instant,
        /// The wait chosen before the next start, and how many lives failed in a row.
        delay: Duration,
        failures: u32,
    },
    Stopped,
}

/// The wait before start number `failures + 1`: `first`, doubling with each failure in a
/// row, at most `max`.
pub fn restart_delay(failures: u32, first: Duration, max: Duration) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(20);
    first.saturating_mul(factor).min(max)
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
    /// Optional lists that failed (shown as empty), one warning each.
    pub list_warnings: Vec<String>,
    /// Names in the manifest's `allow_*` lists that the server does not offer.
    pub unknown_allowed: Vec<String>,
}

pub struct State {
    pub phase: Phase,
    /// Shared, so a call's look at it copies one pointer, not every tool's schema.
    pub catalog: Arc<Catalog>,
    pub peer: Option<Peer<RoleClient>>,
    /// How many times the server was started; the current life's number.
    pub starts: u32,
    /// The current life's last lines of stderr.
    pub stderr: VecDeque<String>,
    /// Lines the current life printed on stdout that are not JSON-RPC, and the first one.
    pub junk_lines: u32,
    pub first_junk: Option<String>,
    /// Process group of the running server, to end it whole (npx starts node under it).
    pgid: Option<i32>,
    /// The task reading the current life's stderr, awaited (briefly) when the life ends so
    /// that its last words are in.
    stderr_task: Option<tokio::task::JoinHandle<()>>,
}

pub struct Shared {
    pub state: Mutex<State>,
    changes: Changes,
    shutdown: Notify,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        crate::hosts::lock(&self.state)
    }

    fn set_phase(&self, phase: Phase) {
        self.lock().phase = phase;
        // The root's description and every guard depend on the phase.
        self.changes.changed(vec![Vec::new()]);
    }

    /// What the current life printed on stdout that is not JSON-RPC, in words ("" if nothing).
    fn junk_words(&self) -> String {
        let st = self.lock();
        match &st.first_junk {
            Some(first) => format!(
                "; it printed {} on stdout that {} not JSON-RPC, the first: `{first}`",
                crate::hosts::text::plural(st.junk_lines, "line", "lines"),
                if st.junk_lines == 1 { "is" } else { "are" },
            ),
            None => String::new(),
        }
    }
}

/// The server's stdout on its way to rmcp, watched for lines that are not JSON-RPC (rmcp
/// skips them without a word): a line whose first non-blank byte opens no JSON value is
/// counted, and the first is kept to be quoted. Only a line's first bytes are looked at.
struct WatchedStdout<R> {
    inner: R,
    shared: Arc<Shared>,
    life: u32,
    line: LineState,
}

enum LineState {
    /// At the start of a line (blanks skipped).
    Start,
    Json,
    Junk(Vec<u8>),
}

impl<R> WatchedStdout<R> {
    fn inspect(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match &mut self.line {
                LineState::Start => match b {
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    b'{' | b'[' => self.line = LineState::Json,
                    other => self.line = LineState::Junk(vec![other]),
                },
                LineState::Json if b == b'\n' => self.line = LineState::Start,
                LineState::Json => {}
                LineState::Junk(_) if b == b'\n' => {
                    if let LineState::Junk(text) =
                        std::mem::replace(&mut self.line, LineState::Start)
                    {
                        self.junk(&text);
                    }
                }
                LineState::Junk(text) => {
                    if text.len() < JUNK_QUOTE {
                        text.push(b);
                    }
                }
            }
        }
    }

    fn junk(&self, text: &[u8]) {
        let line = String::from_utf8_lossy(text).trim_end().to_string();
        let mut st = self.shared.lock();
        if st.starts != self.life {
            return;
        }
        st.junk_lines = st.junk_lines.saturating_add(1);
        if st.first_junk.is_none() {
            tracing::warn!(target: "wip::mcp", "the server printed a line on stdout that is not JSON-RPC: {line}");
            st.first_junk = Some(line);
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for WatchedStdout<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let fresh = buf.filled()[before..].to_vec();
            self.inspect(&fresh);
        }
        polled
    }
}

/// How a process ended, in words: `exited (exit status: 3)`, `was killed by signal 9 (SIGKILL)`.
pub fn exit_words(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited (exit status: {code})"),
        (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        _ => format!("ended ({status})"),
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
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
                catalog: Arc::default(),
                peer: None,
                starts: 0,
                stderr: VecDeque::new(),
                junk_lines: 0,
                first_junk: None,
                pgid: None,
                stderr_task: None,
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
        Phase::Down {
            why,
            retry_at,
            delay,
            failures,
        } => {
            let left = retry_at.saturating_duration_since(Instant::now());
            // Rounded up to a tenth, so a wait that is not over never reads "in 0 s".
            let tenths = (left.as_secs_f64() * 10.0).ceil() as u64;
            let when = if tenths == 0 {
                "restarting now".to_string()
            } else {
                format!(
                    "restarting in {}",
                    seconds(Duration::from_millis(tenths * 100))
                )
            };
            format!(
                "{why}; {when} (a {} wait after {} in a row)",
                seconds(*delay),
                crate::hosts::text::plural(*failures, "failure", "failures")
            )
        }
        Phase::Stopped => "stopped".to_string(),
    }
}

/// A duration as people read it: `0.4 s`, `4 s`, `60 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 && d.subsec_millis() != 0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

/// Start, serve, and restart the server until the host is dropped.
async fn supervise(shared: Arc<Shared>, settings: Arc<McpSettings>, timeout: Duration) {
    let first = Duration::from_millis(settings.restart_delay_ms);
    let max = Duration::from_millis(settings.restart_delay_max_ms);
    let mut failures = 0u32;
    loop {
        shared.set_phase(Phase::Starting {
            since: Instant::now(),
        });
        let started = Instant::now();
        let why = tokio::select! {
            why = run_once(&shared, &settings, timeout) => why,
            _ = shared.shutdown.notified() => break,
        };
        let stderr_task = {
            let mut st = shared.lock();
            st.peer = None;
            if let Some(pgid) = st.pgid.take() {
                // Whatever the server left behind in its group goes with it.
                unsafe { libc::killpg(pgid, libc::SIGKILL) };
            }
            st.stderr_task.take()
        };
        // The group is gone, so its stderr ends: let the last lines in before quoting them.
        if let Some(task) = stderr_task {
            let _ = tokio::time::timeout(EXIT_WAIT, task).await;
        }
        // A server that ran a while starts again from the first delay.
        if started.elapsed() >= HEALTHY_RUN {
            failures = 0;
        }
        failures = failures.saturating_add(1);
        let delay = restart_delay(failures, first, max);
        let why = format!("{why}{}", shared.junk_words());
        let tail: Vec<String> = shared.lock().stderr.iter().cloned().collect();
        let why = if tail.is_empty() {
            why
        } else {
            format!("{why} (its stderr since it started: {})", tail.join(" | "))
        };
        tracing::warn!(target: "wip::mcp", "{}: {why}; restarting in {}", crate::secrets::shown_command(&settings.command), seconds(delay));
        shared.set_phase(Phase::Down {
            why,
            retry_at: Instant::now() + delay,
            delay,
            failures,
        });
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shared.shutdown.notified() => break,
        }
    }
    shared.lock().phase = Phase::Stopped;
}

/// The exit status of a server whose stdout closed, if it exits within `EXIT_WAIT`. Only
/// the group's leader is waited for; `supervise` kills the rest of the group after.
async fn exit_status(child: &mut Box<dyn ChildWrapper>) -> Option<ExitStatus> {
    tokio::time::timeout(EXIT_WAIT, child.inner_mut().wait())
        .await
        .ok()
        .and_then(Result::ok)
}

/// `the server exited (exit status: 3)`, or what ended the connection if it did not exit.
async fn ended_words(child: &mut Box<dyn ChildWrapper>, otherwise: String) -> String {
    match exit_status(child).await {
        Some(status) => format!("the server {}", exit_words(status)),
        None => otherwise,
    }
}

/// One life of the server: returns why it ended.
async fn run_once(shared: &Arc<Shared>, settings: &McpSettings, timeout: Duration) -> String {
    let Some((program, args)) = settings.command.split_first() else {
        return "no command".to_string();
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(crate::hosts::child_env(&settings.env, &settings.pass_env));
    if let Some(dir) = &settings.cwd {
        cmd.current_dir(dir);
    }
    let mut wrap = CommandWrap::from(cmd);
    wrap.wrap(ProcessGroup::leader());
    wrap.command_mut()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match wrap.spawn() {
        Ok(c) => c,
        Err(e) => {
            return format!(
                "cannot start `{}`: {e}",
                crate::secrets::shown_command(&settings.command)
            )
        }
    };
    let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
        let _ = Box::into_pin(child.kill()).await;
        return "cannot start the server: its stdin and stdout were not piped".to_string();
    };
    let stderr = child.stderr().take();
    let life = {
        let mut st = shared.lock();
        st.starts += 1;
        st.stderr.clear();
        st.junk_lines = 0;
        st.first_junk = None;
        st.pgid = child.id().and_then(|p| i32::try_from(p).ok());
        st.starts
    };
    if let Some(stderr) = stderr {
        let reader = Arc::clone(shared);
        let shared = Arc::clone(shared);
        let task = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "wip::mcp", "server stderr: {line}");
                let mut st = shared.lock();
                // A late line of an earlier life must not explain this one's end.
                if st.starts != life {
                    continue;
                }
                if st.stderr.len() == STDERR_LINES {
                    st.stderr.pop_front();
                }
                st.stderr.push_back(one_line(&line));
            }
        });
        reader.lock().stderr_task = Some(task);
    }
    let stdout = WatchedStdout {
        inner: stdout,
        shared: Arc::clone(shared),
        life,
        line: LineState::Start,
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let startup = Duration::from_millis(settings.startup_timeout_ms);
    let running =
        match tokio::time::timeout(startup, Handler { events: tx }.serve((stdout, stdin))).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let failed = format!("the server failed to initialize: {e}");
                return match exit_status(&mut child).await {
                    Some(status) => format!("{failed}; it {}", exit_words(status)),
                    None => failed,
                };
            }
            Err(_) => {
                return format!(
                    "the server did not initialize within {} (startup_timeout_ms)",
                    seconds(startup)
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
    catalog.unknown_allowed = super::unknown_allowed(settings, &catalog);
    for w in &catalog.unknown_allowed {
        tracing::warn!(target: "wip::mcp", "{}: {w}", crate::secrets::shown_command(&settings.command));
    }
    {
        let mut st = shared.lock();
        st.catalog = Arc::new(catalog);
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
                let otherwise = match quit {
                    Ok(reason) => format!("the server closed the connection ({reason:?}) and did not exit"),
                    Err(e) => format!("the connection to the server failed: {e}"),
                };
                return ended_words(&mut child, otherwise).await;
            }
            Some(listing) = rx.recv() => {
                let mut catalog = Catalog::clone(&shared.lock().catalog);
                match list(&peer, listing, timeout, &mut catalog).await {
                    Ok(()) => {
                        let unknown = super::unknown_allowed(settings, &catalog);
                        for w in unknown.iter().filter(|w| !catalog.unknown_allowed.contains(w)) {
                            tracing::warn!(target: "wip::mcp", "{}: {w}", crate::secrets::shown_command(&settings.command));
                        }
                        catalog.unknown_allowed = unknown;
                        shared.lock().catalog = Arc::new(catalog);
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

/// How one list request ended.
enum Listed<T> {
    Got(T),
    /// -32601: the server has no such list (a server may advertise `resources` and still
    /// answer `resources/templates/list` so): none.
    Missing,
    Failed(String),
}

async fn bounded<T>(
    what: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, ServiceError>>,
) -> Listed<T> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Listed::Got(v),
        Ok(Err(ServiceError::McpError(d))) if d.code == ErrorCode::METHOD_NOT_FOUND => {
            tracing::debug!(target: "wip::mcp", "{what}: method not found; taken as none");
            Listed::Missing
        }
        Ok(Err(e)) => Listed::Failed(service_error_words(what, &e)),
        Err(_) => Listed::Failed(format!("{what}: no answer within {}", seconds(timeout))),
    }
}

/// An optional list into `slot`: what the server answered, or none with a warning kept in
/// `warnings` when it failed. The server stays usable either way.
fn optional<T: Default>(what: &str, listed: Listed<T>, slot: &mut T, warnings: &mut Vec<String>) {
    warnings.retain(|w| !w.starts_with(&format!("{what}:")));
    *slot = match listed {
        Listed::Got(v) => v,
        Listed::Missing => T::default(),
        Listed::Failed(why) => {
            let why = why
                .strip_prefix("protocol error: ")
                .unwrap_or(&why)
                .to_string();
            tracing::warn!(target: "wip::mcp", "{why}; shown as none");
            warnings.push(format!("{why} (shown as none)"));
            T::default()
        }
    };
}

/// List one kind of thing the server offers into `catalog` (nothing if it lacks the
/// capability). Only a failing `tools/list` is an error: without tools the server offers
/// nothing to do, while resources, templates and prompts are optional.
async fn list(
    peer: &Peer<RoleClient>,
    listing: Listing,
    timeout: Duration,
    catalog: &mut Catalog,
) -> Result<(), String> {
    let caps = peer.peer_info().map(|i| i.capabilities.clone());
    let has = |f: fn(&rmcp::model::ServerCapabilities) -> bool| caps.as_ref().is_some_and(f);
    match listing {
        Listing::Tools if has(|c| c.tools.is_some()) => {
            match bounded("tools/list", timeout, peer.list_all_tools()).await {
                Listed::Got(tools) => catalog.tools = tools,
                Listed::Missing => {
                    return Err(
                        "protocol error: tools/list: the server advertises tools but has no tools/list (code -32601)"
                            .to_string(),
                    )
                }
                Listed::Failed(why) => return Err(why),
            }
        }
        Listing::Prompts if has(|c| c.prompts.is_some()) => {
            let listed = bounded("prompts/list", timeout, peer.list_all_prompts()).await;
            optional(
                "prompts/list",
                listed,
                &mut catalog.prompts,
                &mut catalog.list_warnings,
            );
        }
        Listing::Resources if has(|c| c.resources.is_some()) => {
            let listed = bounded("resources/list", timeout, list_resources(peer)).await;
            let mut got = (Vec::new(), false);
            optional(
                "resources/list",
                listed,
                &mut got,
                &mut catalog.list_warnings,
            );
            (catalog.resources, catalog.resources_truncated) = got;
            let listed = bounded(
                "resources/templates/list",
                timeout,
                peer.list_all_resource_templates(),
            )
            .await;
            optional(
                "resources/templates/list",
                listed,
                &mut catalog.templates,
                &mut catalog.list_warnings,
            );
        }
        _ => {}
    }
    Ok(())
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
