//! The connection to one MCP server: a tokio runtime owned by the host, a supervisor task
//! that starts the server (in the background, so mounting never waits for it), lists what
//! it offers, follows its `list_changed` notifications and restarts it with backoff when it
//! dies. Host methods read the cached catalog; only calls reach the server, each bounded by
//! a timeout.
//!
//! The client owns the server's process (not rmcp's child transport) so that a death is told
//! with its exit status or signal; it watches the server's stdout for lines that are not
//! JSON-RPC (rmcp skips them silently) and keeps the stderr of the current life only.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, CreateMessageRequestParams,
    CreateMessageResult, CustomRequest, ElicitRequestParams, ElicitResult, ErrorCode,
    Implementation, ProgressNotificationParam, ProgressToken, Prompt, Resource, ResourceTemplate,
    ServerResult, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData, Peer, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, ReadBuf};
use tokio::sync::{mpsc, Notify};

use crate::host::{path_of, Changes, HostError, HostResult, RunSignal};

use super::{oversize, McpSettings};

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
    /// Why the current life was ended for an answer too long to tell whose it was.
    pub too_long: Option<String>,
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
    /// Runs of the tool calls in flight, by the progress token their request carries.
    runs: ProgressRuns,
    /// The server's own JSON, where rmcp's types drop what a task call needs.
    pub capture: Capture,
}

/// What rmcp's typed messages lose of the 2025-11-25 task protocol (a tool's
/// `execution.taskSupport`, a `CreateTaskResult`, `tasks/get` and `tasks/result`
/// answers), taken from the server's stdout as it passes: only while someone wants it
/// (a listing of tools, a task call in flight), so other traffic is never parsed twice.
#[derive(Default)]
pub struct Capture {
    active: std::sync::atomic::AtomicUsize,
    /// Responses seen while active: (id, result or error), newest last.
    responses: Mutex<VecDeque<(Value, Value)>>,
    /// Tools that run as tasks: name → `taskSupport` (`optional`, `required`).
    pub task_tools: Mutex<HashMap<String, String>>,
}

/// Keeps a capture on while it lives.
pub struct Capturing<'a>(&'a Capture);

impl Drop for Capturing<'_> {
    fn drop(&mut self) {
        self.0
            .active
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Capture {
    pub fn start(&self) -> Capturing<'_> {
        self.active
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Capturing(self)
    }

    fn active(&self) -> bool {
        self.active.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// One JSON message of the server's: a response is kept for its waiter; a tool listing
    /// says which tools run as tasks.
    fn take_line(&self, msg: Value) {
        let Some(id) = msg.get("id").filter(|_| msg.get("method").is_none()) else {
            return;
        };
        if let Some(tools) = msg.pointer("/result/tools").and_then(Value::as_array) {
            let mut tasks = crate::hosts::lock(&self.task_tools);
            for t in tools {
                let Some(name) = t.get("name").and_then(Value::as_str) else {
                    continue;
                };
                match t.pointer("/execution/taskSupport").and_then(Value::as_str) {
                    Some(s @ ("optional" | "required")) => {
                        tasks.insert(name.to_string(), s.to_string());
                    }
                    _ => {
                        tasks.remove(name);
                    }
                }
            }
        }
        let body = msg
            .get("result")
            .or_else(|| msg.get("error"))
            .cloned()
            .unwrap_or(Value::Null);
        let mut kept = crate::hosts::lock(&self.responses);
        if kept.len() >= CAPTURED_MAX {
            kept.pop_front();
        }
        kept.push_back((id.clone(), body));
    }

    /// The server's own answer to request `id`, once rmcp delivered its typed copy.
    pub fn take(&self, id: &rmcp::model::RequestId) -> Option<Value> {
        let id = serde_json::to_value(id).ok()?;
        let mut kept = crate::hosts::lock(&self.responses);
        let at = kept.iter().position(|(k, _)| *k == id)?;
        kept.remove(at).map(|(_, v)| v)
    }
}

/// Tool calls in flight by progress token: the server's `notifications/progress` go to
/// their run.
type ProgressRuns = Arc<Mutex<Progress>>;

#[derive(Default)]
struct Progress {
    runs: HashMap<ProgressToken, RunSignal>,
    /// Requests being sent, whose token is not routed yet.
    sending: usize,
    /// Progress a fast server sent before its request's token was routed, oldest first.
    early: VecDeque<ProgressNotificationParam>,
}

/// How many progress notifications are kept for a token not routed yet.
const EARLY_MAX: usize = 64;

impl Progress {
    fn apply(&mut self, params: ProgressNotificationParam) {
        match self.runs.get(&params.progress_token) {
            Some(run) => run.progress(params.progress, params.total, params.message),
            None if self.sending > 0 => {
                if self.early.len() >= EARLY_MAX {
                    self.early.pop_front();
                }
                self.early.push_back(params);
            }
            None => {}
        }
    }

    fn sent(&mut self) {
        self.sending = self.sending.saturating_sub(1);
        if self.sending == 0 {
            self.early.clear();
        }
    }

    /// Route `token` to `run`, with whatever progress came for it already.
    fn route(&mut self, token: ProgressToken, run: RunSignal) {
        let (mine, rest) = std::mem::take(&mut self.early)
            .into_iter()
            .partition::<Vec<_>, _>(|p| p.progress_token == token);
        for p in mine {
            run.progress(p.progress, p.total, p.message);
        }
        self.early = rest.into();
        self.runs.insert(token, run);
    }
}

/// A request being sent as a run's (see `Progress::sending`).
struct Sending<'a>(&'a ProgressRuns);

impl<'a> Sending<'a> {
    fn new(runs: &'a ProgressRuns) -> Self {
        crate::hosts::lock(runs).sending += 1;
        Sending(runs)
    }

    fn route(self, token: ProgressToken, run: RunSignal) {
        crate::hosts::lock(self.0).route(token, run);
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        crate::hosts::lock(self.0).sent();
    }
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        crate::hosts::lock(&self.state)
    }

    /// Whether the server's lines are read here as they pass: while a capture wants them
    /// or a tool call is in flight (its progress).
    fn keeps_lines(&self) -> bool {
        self.capture.active() || {
            let p = crate::hosts::lock(&self.runs);
            !p.runs.is_empty() || p.sending > 0
        }
    }

    /// One JSON line of the server's, before rmcp reads it. Progress goes to its run here,
    /// in the order the server wrote it: rmcp hands each notification to a task of its
    /// own, so through `on_progress` a call's last progress could land after its answer
    /// (and after the run stopped listening), and an earlier step after a later one.
    fn line(&self, text: &[u8]) {
        if let Ok(msg) = serde_json::from_slice::<Value>(text) {
            if msg.get("method").and_then(Value::as_str) == Some("notifications/progress") {
                let Some(params) = msg
                    .get("params")
                    .cloned()
                    .and_then(|p| serde_json::from_value::<ProgressNotificationParam>(p).ok())
                else {
                    return;
                };
                crate::hosts::lock(&self.runs).apply(params);
                return;
            }
            if self.capture.active() {
                self.capture.take_line(msg);
            }
        }
    }

    fn set_phase(&self, phase: Phase) {
        self.lock().phase = phase;
        // The root's description and every guard depend on the phase.
        self.changes.changed(vec![Vec::new()]);
    }

    /// What the current life printed on stdout that is not JSON-RPC, or an answer too long
    /// that ended it, in words ("" if nothing).
    fn junk_words(&self) -> String {
        let st = self.lock();
        if let Some(words) = &st.too_long {
            return format!("; it was stopped: {words}, and whose answer it was could not be read");
        }
        match &st.first_junk {
            Some(first) => format!(
                "; it printed {} on stdout that {} not JSON-RPC, the first: `{first}`",
                crate::host::text::plural(st.junk_lines, "line", "lines"),
                if st.junk_lines == 1 { "is" } else { "are" },
            ),
            None => String::new(),
        }
    }
}

/// The server's stdout on its way to rmcp, watched for lines that are not JSON-RPC (rmcp
/// skips them without a word): a line whose first non-blank byte opens no JSON value is
/// counted, and the first is kept to be quoted. Only a line's first bytes are looked at.
///
/// A line too long for rmcp's transport (which drops it silently) is answered in its
/// place: see `oversize`.
struct WatchedStdout<R> {
    inner: R,
    shared: Arc<Shared>,
    life: u32,
    line: LineState,
    lines: oversize::Lines,
    /// The error response rmcp reads right after a line it drops.
    inject: Vec<u8>,
    /// What the server wrote after that line, given to rmcp after `inject`.
    held: Vec<u8>,
}

enum LineState {
    /// At the start of a line (blanks skipped).
    Start,
    Json,
    /// A JSON line kept whole while a task call or a tool listing wants the server's own
    /// words (see `Capture`).
    Kept(Vec<u8>),
    Junk(Vec<u8>),
}

/// Longest JSON line kept whole for a capture.
const KEPT_MAX: usize = 16 << 20;
/// How many captured responses are kept for their waiters.
const CAPTURED_MAX: usize = 256;

impl<R> WatchedStdout<R> {
    fn inspect(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match &mut self.line {
                LineState::Start => match b {
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    b'{' | b'[' if self.shared.keeps_lines() => {
                        self.line = LineState::Kept(vec![b])
                    }
                    b'{' | b'[' => self.line = LineState::Json,
                    other => self.line = LineState::Junk(vec![other]),
                },
                LineState::Json if b == b'\n' => self.line = LineState::Start,
                LineState::Json => {}
                LineState::Kept(_) if b == b'\n' => {
                    if let LineState::Kept(text) =
                        std::mem::replace(&mut self.line, LineState::Start)
                    {
                        self.shared.line(&text);
                    }
                }
                LineState::Kept(text) if text.len() >= KEPT_MAX => {
                    self.line = LineState::Json;
                }
                LineState::Kept(text) => text.push(b),
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

impl<R> WatchedStdout<R> {
    /// A line too long for the transport ended: a response is answered with an error of
    /// its id; one whose id cannot be read ends the server's life (its calls fail now,
    /// not at their limit); the server's own requests and notifications are only logged.
    fn too_long(&mut self, t: oversize::TooLong) {
        tracing::warn!(target: "wip::mcp", "{}", t.words());
        match (&t.id, t.response) {
            (Some(id), true) => self.inject = t.error_line(id),
            (None, true) => {
                let mut st = self.shared.lock();
                if st.starts == self.life {
                    st.too_long = Some(t.words());
                    if let Some(pgid) = st.pgid {
                        // SAFETY: killpg only sends a signal, to the group this life started.
                        unsafe { libc::killpg(pgid, libc::SIGKILL) };
                    }
                }
            }
            _ => {}
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for WatchedStdout<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.inject.is_empty() {
            let n = self.inject.len().min(buf.remaining());
            buf.put_slice(&self.inject[..n]);
            self.inject.drain(..n);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        if self.held.is_empty() {
            let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
            if !matches!(polled, Poll::Ready(Ok(()))) {
                return polled;
            }
        } else {
            let n = self.held.len().min(buf.remaining());
            buf.put_slice(&self.held[..n]);
            self.held.drain(..n);
        }
        let fresh = buf.filled()[before..].to_vec();
        match self.lines.feed(&fresh) {
            Some((at, too_long)) => {
                // rmcp gets the dropped line's end, then the error line, then the rest.
                buf.set_filled(before + at);
                self.held.splice(0..0, fresh[at..].iter().copied());
                self.inspect(&fresh[..at]);
                self.too_long(too_long);
            }
            None => self.inspect(&fresh),
        }
        Poll::Ready(Ok(()))
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

    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Routed as the server's stdout passes (`Shared::line`), in order.
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
                too_long: None,
                pgid: None,
                stderr_task: None,
            }),
            changes,
            shutdown: Notify::new(),
            runs: ProgressRuns::default(),
            capture: Capture::default(),
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

    /// One tool call that runs as an MCP task (protocol 2025-11-25): `tools/call` with
    /// `task` creates it, `tasks/get` is polled (its status message is the run's
    /// progress) until it ends, `tasks/result` gives the result; a cancel or `limit`
    /// sends `tasks/cancel`. Returns the server's own `CallToolResult`.
    pub fn call_task(
        &self,
        what: &str,
        name: &str,
        arguments: serde_json::Map<String, Value>,
        run: &RunSignal,
        limit: Duration,
    ) -> HostResult<Value> {
        let peer = self.peer()?;
        let runs = Arc::clone(&self.shared.runs);
        let shared = Arc::clone(&self.shared);
        let timeout = self.timeout;
        self.runtime.block_on(async move {
            let capture = &shared.capture;
            let _capturing = capture.start();
            let params = serde_json::json!({
                "name": name,
                "arguments": arguments,
                "task": {"ttl": u64::try_from(limit.as_millis()).unwrap_or(u64::MAX)},
            });
            let request = ClientRequest::CustomRequest(CustomRequest::new("tools/call", Some(params)));
            let (handle, routed) = send_as_run(&peer, request, what, run, runs).await?;
            let (id, stop) = (routed.id.clone(), Arc::clone(&routed.stop));
            let deadline = tokio::time::Instant::now() + limit;
            let ended = async {
                let created = tokio::select! {
                    r = handle.await_response() => r,
                    _ = stop.notified() => {
                        let param = CancelledNotificationParam::new(Some(id.clone()), Some("cancelled from the mount".into()));
                        let _ = peer.notify_cancelled(param).await;
                        return Err(HostError::Cancelled(format!("{what} was cancelled before its task was created; the server was told (notifications/cancelled)")));
                    }
                    _ = tokio::time::sleep_until(deadline) => {
                        return Err(HostError::TimedOut(format!("{what}: the server did not create its task within call_timeout_ms ({} ms)", limit.as_millis())));
                    }
                };
                created.map_err(|e| HostError::Backend(service_error_words(what, &e)))?;
                let created = capture.take(&id).unwrap_or(Value::Null);
                let Some(task) = created.get("task") else {
                    // The server ran it at once (a tool whose task support is optional).
                    return Ok(created);
                };
                let task_id = task
                    .get("taskId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| HostError::Backend(format!("protocol error: {what}: the task the server created has no taskId: {task}")))?
                    .to_string();
                let poll = Duration::from_millis(
                    task.get("pollInterval").and_then(Value::as_u64).unwrap_or(1000).clamp(100, 5000),
                );
                let mut told: Option<(&str, tokio::time::Instant)> = None;
                let mut cancel_sent = false;
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(poll) => {}
                        _ = stop.notified(), if told.is_none() => {
                            told = Some(("cancelled", tokio::time::Instant::now()));
                        }
                        _ = tokio::time::sleep_until(deadline), if told.is_none() => {
                            told = Some(("limit", tokio::time::Instant::now()));
                        }
                    }
                    if told.is_some() && !cancel_sent {
                        cancel_sent = true;
                        // Its answer is the task as it stands; the poll below reads it again.
                        if let Err(e) = raw_request(&peer, capture, "tasks/cancel", serde_json::json!({"taskId": task_id}), timeout).await {
                            tracing::warn!(target: "wip::mcp", "tasks/cancel of {task_id}: {e}");
                        }
                    }
                    let got = raw_request(&peer, capture, "tasks/get", serde_json::json!({"taskId": task_id}), timeout).await?;
                    if let Some(m) = got.get("statusMessage").and_then(Value::as_str) {
                        run.note(m.to_string());
                    }
                    let status = got.get("status").and_then(Value::as_str).unwrap_or("");
                    match status {
                        "completed" | "failed" => {
                            return raw_request(&peer, capture, "tasks/result", serde_json::json!({"taskId": task_id}), timeout).await;
                        }
                        "cancelled" => {
                            return Err(match told {
                                Some(("limit", _)) => HostError::TimedOut(format!("{what}: its task {task_id} ran longer than call_timeout_ms ({} ms); the server was told (tasks/cancel) and cancelled it", limit.as_millis())),
                                Some(_) => HostError::Cancelled(format!("{what} was cancelled; the server was told (tasks/cancel) and its task {task_id} ended cancelled")),
                                None => HostError::Cancelled(format!("{what}: the server cancelled its task {task_id}")),
                            });
                        }
                        _ => {}
                    }
                    if let Some((why, at)) = told {
                        if at.elapsed() >= CANCEL_CONFIRM {
                            let words = format!("the server was told (tasks/cancel) but its task {task_id} is still {status} after {} s; the mount stopped waiting", CANCEL_CONFIRM.as_secs());
                            return Err(if why == "limit" {
                                HostError::TimedOut(format!("{what}: it ran longer than call_timeout_ms ({} ms); {words}", limit.as_millis()))
                            } else {
                                HostError::Cancelled(format!("{what} was cancelled; {words}"))
                            });
                        }
                    }
                }
            };
            ended.await
        })
    }

    /// One tool call as a run: it carries a progress token (rmcp gives every request
    /// one) whose notifications report to `run`, and ends when the server answers, when
    /// the run is cancelled, or after `limit`; the server is told of the last two with
    /// `notifications/cancelled`. The caller's own patience does not end it.
    pub fn call_tool(
        &self,
        what: &str,
        params: CallToolRequestParams,
        run: &RunSignal,
        limit: Duration,
    ) -> HostResult<CallToolResult> {
        let peer = self.peer()?;
        let runs = Arc::clone(&self.shared.runs);
        self.runtime.block_on(async move {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let (handle, routed) = send_as_run(&peer, request, what, run, runs).await?;
            let id = routed.id.clone();
            enum End {
                Answer(Box<Result<ServerResult, ServiceError>>),
                Cancelled,
                Limit,
            }
            let end = tokio::select! {
                r = handle.await_response() => End::Answer(Box::new(r)),
                // Outside a run nothing cancels: nobody wakes it.
                _ = routed.stop.notified() => End::Cancelled,
                _ = tokio::time::sleep(limit) => End::Limit,
            };
            drop(routed);
            let tell = |reason: &str| {
                let param =
                    CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_string()));
                let peer = peer.clone();
                async move { peer.notify_cancelled(param).await }
            };
            match end {
                End::Answer(answer) => match *answer {
                Ok(ServerResult::CallToolResult(r)) => Ok(r),
                Ok(other) => Err(HostError::Backend(format!(
                    "protocol error: {what}: the server answered with something other than a tool result: {}",
                    serde_json::to_string(&other).unwrap_or_default().chars().take(200).collect::<String>()
                ))),
                Err(e) => Err(HostError::Backend(service_error_words(what, &e))),
                },
                End::Cancelled => {
                    let told = tell("cancelled from the mount (runs/ID/ops/cancel)").await;
                    Err(HostError::Cancelled(match told {
                        Ok(()) => format!("{what} was cancelled; the server was told (notifications/cancelled)"),
                        Err(e) => format!("{what} was cancelled, but telling the server failed: {e}"),
                    }))
                }
                End::Limit => {
                    let _ = tell("the call ran longer than the mount allows (call_timeout_ms)").await;
                    Err(HostError::TimedOut(format!(
                        "{what}: the call ran longer than call_timeout_ms ({} ms in the manifest); the server was told to cancel it",
                        limit.as_millis()
                    )))
                }
            }
        })
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

/// A request sent as a run's: its progress token routed to the run (until this drops)
/// and a cancel of the run waking `stop` (once, even before anyone waits for it).
struct Routed {
    runs: ProgressRuns,
    token: ProgressToken,
    id: rmcp::model::RequestId,
    stop: Arc<Notify>,
}

impl Drop for Routed {
    fn drop(&mut self) {
        crate::hosts::lock(&self.runs).runs.remove(&self.token);
    }
}

/// Send `request` as `run`'s: see `Routed`.
async fn send_as_run(
    peer: &Peer<RoleClient>,
    request: ClientRequest,
    what: &str,
    run: &RunSignal,
    runs: ProgressRuns,
) -> HostResult<(rmcp::service::RequestHandle<RoleClient>, Routed)> {
    // Counted as sending before it is sent, so its progress is kept even if it comes
    // before rmcp tells the token (and uncounted however this ends).
    let sending = Sending::new(&runs);
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .map_err(|e| HostError::Backend(service_error_words(what, &e)))?;
    sending.route(handle.progress_token.clone(), run.clone());
    let stop = Arc::new(Notify::new());
    {
        let stop = Arc::clone(&stop);
        run.on_cancel(move || stop.notify_one());
    }
    let routed = Routed {
        runs,
        token: handle.progress_token.clone(),
        id: handle.id.clone(),
        stop,
    };
    Ok((handle, routed))
}

/// How long a cancelled task may take to say it ended before the mount stops waiting.
const CANCEL_CONFIRM: Duration = Duration::from_secs(10);

/// A request rmcp's types cannot carry (the task protocol): sent as is, answered with the
/// server's own JSON (see `Capture`), bounded by `timeout`.
async fn raw_request(
    peer: &Peer<RoleClient>,
    capture: &Capture,
    method: &str,
    params: Value,
    timeout: Duration,
) -> HostResult<Value> {
    let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
        .await
        .map_err(|e| HostError::Backend(service_error_words(method, &e)))?;
    let id = handle.id.clone();
    handle
        .await_response()
        .await
        .map_err(|e| HostError::Backend(service_error_words(method, &e)))?;
    capture.take(&id).ok_or_else(|| {
        HostError::Backend(format!(
            "protocol error: {method}: the server's answer was not seen whole"
        ))
    })
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
                crate::host::text::plural(*failures, "failure", "failures")
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

/// One life of the server: started, initialized, its catalog listed, then served until
/// it ends; returns why it ended.
async fn run_once(shared: &Arc<Shared>, settings: &McpSettings, timeout: Duration) -> String {
    let mut child = match spawn_server(settings) {
        Ok(c) => c,
        Err(why) => return why.to_string(),
    };
    let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
        let _ = Box::into_pin(child.kill()).await;
        return "cannot start the server: its stdin and stdout were not piped".to_string();
    };
    let life = begin_life(shared, &mut child);
    let stdout = WatchedStdout {
        inner: stdout,
        shared: Arc::clone(shared),
        life,
        line: LineState::Start,
        lines: oversize::Lines::default(),
        inject: Vec::new(),
        held: Vec::new(),
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
    if let Err(why) = first_catalog(shared, settings, &peer, timeout).await {
        return why.to_string();
    }
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
            Some(listing) = rx.recv() => relist(shared, settings, &peer, listing, timeout).await,
            _ = shared.shutdown.notified() => {
                closed.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(3), &mut waiting).await;
                return "stopped".to_string();
            }
        }
    }
}

/// Why the server's command did not start.
#[derive(Debug, thiserror::Error)]
enum Unspawned {
    #[error("no command")]
    NoCommand,
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
}

/// Start the server's command in a process group of its own, its three streams piped, its
/// signals plain (see `children`).
fn spawn_server(settings: &McpSettings) -> Result<Box<dyn ChildWrapper>, Unspawned> {
    let Some((program, args)) = settings.command.split_first() else {
        return Err(Unspawned::NoCommand);
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(crate::hosts::child_env(&settings.env, &settings.pass_env));
    if let Some(dir) = &settings.cwd {
        cmd.current_dir(dir);
    }
    // SAFETY: plain_signals is async-signal-safe.
    unsafe { cmd.pre_exec(crate::children::plain_signals) };
    let mut wrap = CommandWrap::from(cmd);
    wrap.wrap(ProcessGroup::leader());
    wrap.command_mut()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = wrap.spawn().map_err(|source| Unspawned::Spawn {
        command: crate::secrets::shown_command(&settings.command),
        source,
    })?;
    if let Some(pid) = child.id() {
        crate::children::own(pid);
    }
    Ok(child)
}

/// A new life of the server begins: counted, its group noted, what the last one said
/// forgotten, and its stderr kept (the last lines explain an end). Returns its number.
fn begin_life(shared: &Arc<Shared>, child: &mut Box<dyn ChildWrapper>) -> u32 {
    let stderr = child.stderr().take();
    let life = {
        let mut st = shared.lock();
        st.starts += 1;
        st.stderr.clear();
        st.junk_lines = 0;
        st.first_junk = None;
        st.too_long = None;
        st.pgid = child.id().and_then(|p| i32::try_from(p).ok());
        st.starts
    };
    if let Some(stderr) = stderr {
        let keeper = Arc::clone(shared);
        let task = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "wip::mcp", "server stderr: {line}");
                let mut st = keeper.lock();
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
        shared.lock().stderr_task = Some(task);
    }
    life
}

/// What the server is and offers, listed once it initialized: the host is ready then.
async fn first_catalog(
    shared: &Arc<Shared>,
    settings: &McpSettings,
    peer: &Peer<RoleClient>,
    timeout: Duration,
) -> Result<(), ListError> {
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
        list(peer, listing, timeout, &mut catalog, &shared.capture).await?;
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
    Ok(())
}

/// The server said one of its lists changed: list it again and tell the world.
async fn relist(
    shared: &Arc<Shared>,
    settings: &McpSettings,
    peer: &Peer<RoleClient>,
    listing: Listing,
    timeout: Duration,
) {
    let mut catalog = Catalog::clone(&shared.lock().catalog);
    match list(peer, listing, timeout, &mut catalog, &shared.capture).await {
        Ok(()) => {
            let unknown = super::unknown_allowed(settings, &catalog);
            for w in unknown
                .iter()
                .filter(|w| !catalog.unknown_allowed.contains(w))
            {
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

/// How one list request ended.
enum Listed<T> {
    Got(T),
    /// -32601: the server has no such list (a server may advertise `resources` and still
    /// answer `resources/templates/list` so): none.
    Missing,
    Failed(ListError),
}

/// Why a list of what the server offers was not had.
#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("{}", service_error_words(what, source))]
    Service {
        what: &'static str,
        source: ServiceError,
    },
    #[error("{what}: no answer within {}", seconds(*timeout))]
    NoAnswer {
        what: &'static str,
        timeout: Duration,
    },
    #[error("protocol error: tools/list: the server advertises tools but has no tools/list (code -32601)")]
    NoToolsList,
}

async fn bounded<T>(
    what: &'static str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, ServiceError>>,
) -> Listed<T> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Listed::Got(v),
        Ok(Err(ServiceError::McpError(d))) if d.code == ErrorCode::METHOD_NOT_FOUND => {
            tracing::debug!(target: "wip::mcp", "{what}: method not found; taken as none");
            Listed::Missing
        }
        Ok(Err(source)) => Listed::Failed(ListError::Service { what, source }),
        Err(_) => Listed::Failed(ListError::NoAnswer { what, timeout }),
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
            let why = why.to_string();
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
    capture: &Capture,
) -> Result<(), ListError> {
    let caps = peer.peer_info().map(|i| i.capabilities.clone());
    let has = |f: fn(&rmcp::model::ServerCapabilities) -> bool| caps.as_ref().is_some_and(f);
    match listing {
        Listing::Tools if has(|c| c.tools.is_some()) => {
            // Which tools run as tasks is in the server's own words only.
            let _capturing = capture.start();
            match bounded("tools/list", timeout, peer.list_all_tools()).await {
                Listed::Got(tools) => catalog.tools = tools,
                Listed::Missing => return Err(ListError::NoToolsList),
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
    crate::host::text::one_line(s, 300)
}
