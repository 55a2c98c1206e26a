//! The runtime's side of one host connection: request ids, a reader thread that hands each
//! response to the caller waiting for its id and each `changed` notification to the world,
//! a writer thread (so a host that stops reading never blocks a caller), per-request
//! timeouts, and restarts with exponential backoff.
//!
//! A connection that fails in any way (the host exits, sends a line that is not JSON-RPC,
//! leaves a request unanswered past its timeout) is dropped whole: the child is killed or
//! the socket shut, every waiting request fails with the reason, and the next attempt waits
//! `backoff(failures)`. Meanwhile requests fail at once with the reason and the time of the
//! next attempt, so nothing waits on a host known to be down.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cache::EntryCache;
use super::protocol::{
    self, ChangedParams, Incoming, InitializeParams, InitializeResult, NotRpc, Request, RpcError,
};
use super::transport::{self, Endpoint, Link, Socket};
use crate::host::{Changes, HostError, HostResult, OpSpec, RunSignal};
use crate::hosts::lock;

/// How often a long call looks at its run (a cancel) and at the host's liveness.
const CALL_TICK: Duration = Duration::from_millis(100);
/// How long a cancelled call waits for the host's answer before it stops waiting.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// `progress`: how far a call got (`id` is the call's request id).
#[derive(serde::Deserialize)]
struct ProgressParams {
    id: u64,
    progress: f64,
    #[serde(default)]
    total: Option<f64>,
    #[serde(default)]
    message: Option<String>,
}

/// The ops of each kind of entry, as the host declared them in `initialize`.
pub type Kinds = HashMap<String, Vec<OpSpec>>;

/// A request that failed, and how.
#[derive(Debug)]
pub struct Failure {
    pub error: HostError,
    pub how: Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// Not sent: the host is down, restarting or starting.
    Unsent,
    /// The host answered with an error.
    Answered,
    /// The host went down with the request in flight: it exited, hung or sent junk.
    HostLost,
}

/// First wait after a failure; doubles with each failure in a row.
const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// The longest wait between attempts.
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// How much of a junk line the error quotes.
const QUOTE: usize = 200;
/// Lines of a child's stderr logged per second at most (the rest are counted).
const STDERR_LINES_PER_SEC: u32 = 50;
/// Longest stderr line logged (the rest of it is cut).
const STDERR_LINE_MAX: usize = 2000;

pub fn backoff(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(16);
    (BACKOFF_BASE * factor).min(BACKOFF_CAP)
}

/// What a waiting request receives.
enum Reply {
    Done(Result<Value, RpcError>),
    /// The connection was dropped; why.
    Lost(String),
}

/// One live connection.
struct Conn {
    /// Requests waiting for an answer; `None` once the connection is dropped.
    pending: Mutex<Option<HashMap<u64, mpsc::Sender<Reply>>>>,
    next_id: AtomicU64,
    /// Lines to write; the writer thread ends when this is dropped or a write fails.
    outbox: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    child: Mutex<Option<std::process::Child>>,
    socket: Option<Socket>,
    /// Why it was dropped.
    dropped: Mutex<Option<String>>,
    /// When the host last sent anything (a long call's liveness: see `call`).
    last_heard: Mutex<Instant>,
    /// The runs of calls in flight, by request id, for the host's `progress`.
    runs: Mutex<HashMap<u64, RunSignal>>,
}

impl Conn {
    fn send(&self, line: Vec<u8>) -> bool {
        lock(&self.outbox)
            .as_ref()
            .is_some_and(|tx| tx.send(line).is_ok())
    }

    /// Drop the connection: fail every waiting request with `reason`, stop the child or
    /// shut the socket. Returns false if it was already dropped.
    fn drop_with(&self, reason: &str) -> bool {
        let waiting = lock(&self.pending).take();
        let Some(waiting) = waiting else {
            return false;
        };
        *lock(&self.dropped) = Some(reason.to_string());
        for (_, tx) in waiting {
            let _ = tx.send(Reply::Lost(reason.to_string()));
        }
        lock(&self.outbox).take();
        if let Some(s) = &self.socket {
            s.shutdown();
        }
        if let Some(mut c) = lock(&self.child).take() {
            let _ = c.kill();
            // Reap it so no zombie stays; after SIGKILL this returns promptly.
            std::thread::spawn(move || {
                let _ = c.wait();
            });
        }
        true
    }

    /// Why the stream ended: the child's exit status if it exited (waiting briefly for it).
    fn end_reason(&self) -> String {
        let mut guard = lock(&self.child);
        let Some(child) = guard.as_mut() else {
            return "the host closed the connection".to_string();
        };
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return format!("the host exited ({status})"),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => return "the host closed its stdout".to_string(),
                Err(e) => return format!("the host's stdout closed ({e})"),
            }
        }
    }
}

impl Conn {
    fn why_dropped(&self) -> String {
        lock(&self.dropped)
            .clone()
            .unwrap_or_else(|| "the connection was closed".to_string())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.drop_with("the connection was closed");
    }
}

#[derive(Default)]
struct State {
    conn: Option<Arc<Conn>>,
    hello: Option<InitializeResult>,
    /// Failures in a row since the last answered request.
    failures: u32,
    last_failure: Option<String>,
    retry_at: Option<Instant>,
    /// Whether the host is known to be down (its root says so).
    down: bool,
}

/// The health of a host, for its root's description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Up,
    /// Down: why, and in how long the next attempt is.
    Down(String, Duration),
    NeverTried,
}

/// A client for one host.
pub struct Client {
    /// How messages name the host (its world path).
    pub name: String,
    endpoint: Endpoint,
    pub read_timeout: Duration,
    pub call_timeout: Duration,
    init: InitializeParams,
    changes: Changes,
    state: Mutex<State>,
    /// How long starting (or reaching) the host and its handshake may take.
    pub start_timeout: Duration,
    /// When the connection attempt in progress started (one at a time).
    attempt: Mutex<Option<Instant>>,
    attempt_done: Condvar,
    /// The cache lifetime the host asked for at its last handshake (0: none).
    ttl_hint_ms: AtomicU64,
    /// The kinds declared at the last handshake (kept while the host is down).
    kinds: Mutex<Option<Arc<Kinds>>>,
    /// Entries the host described on this connection (see `cache`).
    pub entries: EntryCache,
}

impl Client {
    pub fn new(
        name: String,
        endpoint: Endpoint,
        timeouts: [Duration; 3],
        init: InitializeParams,
        changes: Changes,
    ) -> Arc<Client> {
        let [read_timeout, call_timeout, start_timeout] = timeouts;
        Arc::new(Client {
            name,
            endpoint,
            read_timeout,
            call_timeout,
            init,
            changes,
            state: Mutex::new(State::default()),
            start_timeout,
            attempt: Mutex::new(None),
            attempt_done: Condvar::new(),
            ttl_hint_ms: AtomicU64::new(0),
            kinds: Mutex::new(None),
            entries: EntryCache::default(),
        })
    }

    /// The ops per kind of entry the host declared, if it did.
    pub fn kinds(&self) -> Option<Arc<Kinds>> {
        lock(&self.kinds).clone()
    }

    /// Keep the host connected in the background: connect now, and again after each failure
    /// once its backoff has passed, so notifications keep flowing. Ends with the client.
    pub fn supervise(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name(format!("exec-{}", self.name))
            .spawn(move || loop {
                let Some(client) = weak.upgrade() else { return };
                let wait = {
                    let st = lock(&client.state);
                    match (&st.conn, st.retry_at) {
                        (Some(_), _) => Duration::from_millis(500),
                        (None, Some(at)) => at.saturating_duration_since(Instant::now()),
                        (None, None) => Duration::ZERO,
                    }
                };
                if wait.is_zero() {
                    let _ = client.connection();
                    drop(client);
                    std::thread::sleep(Duration::from_millis(50));
                } else {
                    drop(client);
                    std::thread::sleep(wait.min(Duration::from_millis(500)));
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(host = %self.name, "cannot start the supervisor thread: {e}");
        }
    }

    pub fn health(&self) -> Health {
        let st = lock(&self.state);
        if st.conn.is_some() {
            return Health::Up;
        }
        match (&st.last_failure, st.retry_at) {
            (Some(why), at) => Health::Down(
                why.clone(),
                at.map(|t| t.saturating_duration_since(Instant::now()))
                    .unwrap_or_default(),
            ),
            (None, _) => Health::NeverTried,
        }
    }

    /// The cache lifetime the host asked for, if it did.
    pub fn ttl_hint(&self) -> Option<Duration> {
        match self.ttl_hint_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// What the host said of itself at the last handshake.
    pub fn hello(&self) -> Option<InitializeResult> {
        lock(&self.state).hello.clone()
    }

    fn restarting(&self, st: &State) -> Option<HostError> {
        let at = st.retry_at?;
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        Some(HostError::Backend(format!(
            "host {} is restarting (last failure: {}), next attempt in {:.1} s",
            self.name,
            st.last_failure.as_deref().unwrap_or("unknown"),
            left.as_secs_f64()
        )))
    }

    /// The live connection, opening one if none is and the backoff allows.
    fn connection(self: &Arc<Self>) -> HostResult<Arc<Conn>> {
        let check = |st: &State| -> Option<HostResult<Arc<Conn>>> {
            if let Some(c) = &st.conn {
                return Some(Ok(Arc::clone(c)));
            }
            self.restarting(st).map(Err)
        };
        if let Some(r) = check(&lock(&self.state)) {
            return r;
        }
        // The attempt runs on its own thread; a caller waits for it at most a read's
        // timeout, so a slow start never holds a caller longer than an answer would.
        let deadline = Instant::now() + self.read_timeout;
        let mut attempt = lock(&self.attempt);
        loop {
            if let Some(r) = check(&lock(&self.state)) {
                return r;
            }
            let started = match *attempt {
                Some(t) => t,
                None => {
                    let me = Arc::clone(self);
                    let spawned = std::thread::Builder::new()
                        .name(format!("exec-{}-start", self.name))
                        .spawn(move || {
                            let opened = me.open();
                            // Errors are recorded in the state, where callers find them.
                            let _ = me.adopt(opened);
                            *lock(&me.attempt) = None;
                            me.attempt_done.notify_all();
                        });
                    if let Err(e) = spawned {
                        return Err(HostError::failed(
                            format!("host {}: cannot start a thread to connect", self.name),
                            e,
                        ));
                    }
                    let now = Instant::now();
                    *attempt = Some(now);
                    now
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HostError::Backend(format!(
                    "host {} is starting ({:.1} s so far; it may take up to {} ms)",
                    self.name,
                    started.elapsed().as_secs_f64(),
                    self.start_timeout.as_millis()
                )));
            }
            attempt = self
                .attempt_done
                .wait_timeout(attempt, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn adopt(
        &self,
        opened: Result<(Arc<Conn>, InitializeResult), Unopened>,
    ) -> HostResult<Arc<Conn>> {
        match opened {
            Ok((conn, hello)) => {
                let hint = hello.capabilities.cache_ttl_ms.unwrap_or(0);
                self.ttl_hint_ms.store(hint, Ordering::Relaxed);
                *lock(&self.kinds) = hello.capabilities.kinds.as_ref().map(|k| {
                    Arc::new(
                        k.iter()
                            .map(|(kind, ops)| {
                                let ops = ops.iter().cloned().map(|o| o.into_spec()).collect();
                                (kind.clone(), ops)
                            })
                            .collect(),
                    )
                });
                // A new process (or connection) may say other things than the last.
                self.entries.clear();
                let mut st = lock(&self.state);
                st.conn = Some(Arc::clone(&conn));
                st.hello = Some(hello);
                st.retry_at = None;
                if st.down {
                    st.down = false;
                    self.changes.changed(vec![Vec::new()]);
                }
                tracing::info!(host = %self.name, "connected to {}", self.endpoint.describe());
                Ok(conn)
            }
            Err(reason) => {
                self.record_failure(reason.to_string());
                Err(HostError::Backend(format!(
                    "host {} is down: {reason}",
                    self.name
                )))
            }
        }
    }

    fn record_failure(&self, reason: String) {
        let mut st = lock(&self.state);
        self.record_failure_locked(&mut st, reason);
    }

    fn record_failure_locked(&self, st: &mut State, reason: String) {
        st.failures = st.failures.saturating_add(1);
        let wait = backoff(st.failures);
        tracing::warn!(
            host = %self.name,
            "{reason}; next attempt in {:.1} s",
            wait.as_secs_f64()
        );
        st.last_failure = Some(reason);
        st.retry_at = Some(Instant::now() + wait);
        st.conn = None;
        self.entries.clear();
        if !st.down {
            st.down = true;
            // The root's description now says the host is down: drop cached copies.
            self.changes.changed(vec![Vec::new()]);
        }
    }

    /// Drop `conn` for `reason` and schedule the next attempt (once per connection). The
    /// state forgets it first, so no new request picks up a connection being dropped.
    fn fail(&self, conn: &Arc<Conn>, reason: String) {
        {
            let mut st = lock(&self.state);
            if st.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
                self.record_failure_locked(&mut st, reason.clone());
            }
        }
        conn.drop_with(&reason);
    }

    /// Start or connect to the host and shake hands.
    fn open(self: &Arc<Self>) -> Result<(Arc<Conn>, InitializeResult), Unopened> {
        let where_ = self.endpoint.describe();
        let link = transport::open(&self.endpoint, self.start_timeout).map_err(|source| {
            Unopened::Unreachable {
                at: where_.clone(),
                source,
            }
        })?;
        let Link {
            reader,
            writer,
            child,
            stderr,
            socket,
        } = link;
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let conn = Arc::new(Conn {
            pending: Mutex::new(Some(HashMap::new())),
            next_id: AtomicU64::new(1),
            outbox: Mutex::new(Some(tx)),
            child: Mutex::new(child),
            socket,
            dropped: Mutex::new(None),
            last_heard: Mutex::new(Instant::now()),
            runs: Mutex::new(HashMap::new()),
        });
        if let Some(err) = stderr {
            self.forward_stderr(err);
        }
        self.spawn_writer(writer, rx, &conn)
            .and_then(|_| self.spawn_reader(reader, &conn))
            .map_err(|e| {
                conn.drop_with("cannot start threads");
                Unopened::Threads(e)
            })?;
        let params = serde_json::to_value(&self.init).map_err(Unopened::Params)?;
        let at = where_.clone();
        let hello = match self.send_and_wait(&conn, "initialize", params, self.start_timeout) {
            Ok(v) => serde_json::from_value::<InitializeResult>(v)
                .map_err(|source| Unopened::Shape { at, source }),
            Err(Waited::Error(e)) => Err(Unopened::Refused { at, error: e }),
            Err(Waited::Lost(why)) => Err(Unopened::Lost(why)),
            Err(Waited::TimedOut) => Err(Unopened::Silent {
                at,
                ms: self.start_timeout.as_millis(),
            }),
        };
        let hello = match hello {
            Ok(h) if h.protocol != protocol::PROTOCOL || h.version != protocol::VERSION => {
                Err(Unopened::Version {
                    at: where_,
                    protocol: h.protocol,
                    version: h.version,
                })
            }
            other => other,
        };
        match hello {
            Ok(h) => Ok((conn, h)),
            Err(why) => {
                conn.drop_with(&why.to_string());
                Err(why)
            }
        }
    }

    fn spawn_writer(
        &self,
        mut writer: Box<dyn Write + Send>,
        rx: mpsc::Receiver<Vec<u8>>,
        conn: &Arc<Conn>,
    ) -> std::io::Result<()> {
        let weak_conn = Arc::downgrade(conn);
        std::thread::Builder::new()
            .name(format!("exec-{}-w", self.name))
            .spawn(move || {
                while let Ok(line) = rx.recv() {
                    let r = writer.write_all(&line).and_then(|_| {
                        // Write everything queued before flushing once.
                        writer.flush()
                    });
                    if let Err(e) = r {
                        if let Some(c) = weak_conn.upgrade() {
                            tracing::debug!("write to host failed: {e}");
                            // The reader sees the end of the stream and reports why.
                            lock(&c.outbox).take();
                        }
                        return;
                    }
                }
            })
            .map(|_| ())
    }

    fn spawn_reader(
        self: &Arc<Self>,
        reader: Box<dyn std::io::Read + Send>,
        conn: &Arc<Conn>,
    ) -> std::io::Result<()> {
        let client: Weak<Client> = Arc::downgrade(self);
        let conn = Arc::clone(conn);
        std::thread::Builder::new()
            .name(format!("exec-{}-r", self.name))
            .spawn(move || {
                let mut reader = BufReader::with_capacity(64 * 1024, reader);
                let why = loop {
                    let message = read_message(&mut reader);
                    *lock(&conn.last_heard) = Instant::now();
                    match message {
                        Ok(Some(Incoming::Response { id, outcome })) => {
                            let waiter = lock(&conn.pending).as_mut().and_then(|p| p.remove(&id));
                            match waiter {
                                Some(tx) => {
                                    let _ = tx.send(Reply::Done(outcome));
                                }
                                None => tracing::debug!("answer to unknown request {id} ignored"),
                            }
                        }
                        Ok(Some(Incoming::Message { method, params, id })) => {
                            let Some(c) = client.upgrade() else {
                                break None;
                            };
                            c.on_message(&conn, &method, params, id);
                        }
                        Ok(None) => break Some(conn.end_reason()),
                        Err(why) => break Some(why.to_string()),
                    }
                };
                if let (Some(c), Some(why)) = (client.upgrade(), why) {
                    c.fail(&conn, why);
                }
                // Whatever ended the loop, nobody may wait on this connection any more.
                conn.drop_with("the connection was closed");
            })
            .map(|_| ())
    }

    fn on_message(&self, conn: &Conn, method: &str, params: Value, id: Option<Value>) {
        if let Some(id) = id {
            let mut line = protocol::method_not_found(id, method)
                .to_string()
                .into_bytes();
            line.push(b'\n');
            conn.send(line);
            return;
        }
        match method {
            "changed" => match serde_json::from_value::<ChangedParams>(params) {
                Ok(p) => {
                    self.entries.forget(&p.paths);
                    self.changes.changed(p.paths)
                }
                Err(e) => tracing::warn!(host = %self.name, "malformed changed notification: {e}"),
            },
            "progress" => match serde_json::from_value::<ProgressParams>(params) {
                Ok(p) => {
                    if let Some(run) = lock(&conn.runs).get(&p.id) {
                        run.progress(p.progress, p.total, p.message);
                    }
                }
                Err(e) => tracing::warn!(host = %self.name, "malformed progress notification: {e}"),
            },
            other => tracing::debug!(host = %self.name, "unknown notification {other:?} ignored"),
        }
    }

    /// Log a child's stderr, line by line, bounded in length and rate.
    fn forward_stderr(&self, err: std::process::ChildStderr) {
        let name = self.name.clone();
        let _ = std::thread::Builder::new()
            .name(format!("exec-{name}-e"))
            .spawn(move || {
                let mut r = BufReader::new(err);
                let mut window = Instant::now();
                let (mut logged, mut dropped) = (0u32, 0u64);
                loop {
                    let mut buf = Vec::new();
                    match r
                        .by_ref()
                        .take(STDERR_LINE_MAX as u64)
                        .read_until(b'\n', &mut buf)
                    {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    if buf.last() != Some(&b'\n') && buf.len() >= STDERR_LINE_MAX {
                        // Skip the rest of an overlong line.
                        let mut rest = Vec::new();
                        let _ = r.read_until(b'\n', &mut rest);
                    }
                    if window.elapsed() >= Duration::from_secs(1) {
                        if dropped > 0 {
                            tracing::info!(host = %name, "({dropped} lines of stderr not logged)");
                        }
                        window = Instant::now();
                        logged = 0;
                        dropped = 0;
                    }
                    if logged < STDERR_LINES_PER_SEC {
                        logged += 1;
                        let text = String::from_utf8_lossy(&buf);
                        tracing::info!(host = %name, "stderr: {}", text.trim_end());
                    } else {
                        dropped += 1;
                    }
                }
            });
    }

    fn send_and_wait(
        &self,
        conn: &Conn,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Waited> {
        let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        match lock(&conn.pending).as_mut() {
            Some(p) => {
                p.insert(id, tx);
            }
            None => return Err(Waited::Lost(conn.why_dropped())),
        }
        let mut line = match serde_json::to_vec(&Request::new(id, method, params)) {
            Ok(l) => l,
            Err(e) => return Err(Waited::Lost(format!("cannot encode the request: {e}"))),
        };
        line.push(b'\n');
        if !conn.send(line) {
            if let Some(p) = lock(&conn.pending).as_mut() {
                p.remove(&id);
            }
            return Err(Waited::Lost("the host stopped reading".into()));
        }
        match rx.recv_timeout(timeout) {
            Ok(Reply::Done(Ok(v))) => Ok(v),
            Ok(Reply::Done(Err(e))) => Err(Waited::Error(e)),
            Ok(Reply::Lost(why)) => Err(Waited::Lost(why)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(p) = lock(&conn.pending).as_mut() {
                    p.remove(&id);
                }
                Err(Waited::TimedOut)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Waited::Lost(conn.why_dropped())),
        }
    }

    /// Send one request and wait for its answer, at most `timeout`.
    pub fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> HostResult<Value> {
        self.send(method, params, timeout).map_err(|f| f.error)
    }

    /// `request`, telling a failure that took the host down from one it answered.
    pub fn send(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Failure> {
        let conn = self.connection().map_err(|error| Failure {
            error,
            how: Failed::Unsent,
        })?;
        let waited = self.send_and_wait(&conn, method, params, timeout);
        self.settled(method, waited, || {
            let why = format!("no answer to {method} within {} ms", timeout.as_millis());
            // A host that leaves a request unanswered cannot be trusted with the next.
            self.fail(&conn, why.clone());
            Failure {
                error: HostError::TimedOut(format!(
                    "host {}: {why}; it is being restarted",
                    self.name
                )),
                how: Failed::HostLost,
            }
        })
    }

    /// What a request's wait ended with, as its caller hears it; `timed_out` says what a
    /// timeout means (a read's: the host is dropped; a call's: only the call ran out).
    fn settled(
        &self,
        method: &str,
        waited: Result<Value, Waited>,
        timed_out: impl FnOnce() -> Failure,
    ) -> Result<Value, Failure> {
        match waited {
            Ok(v) => {
                self.answered();
                Ok(v)
            }
            Err(Waited::Error(e)) => {
                self.answered();
                Err(Failure {
                    error: protocol::host_error(&self.name, method, e),
                    how: Failed::Answered,
                })
            }
            Err(Waited::Lost(why)) => Err(Failure {
                error: HostError::Backend(format!("host {}: {why} during {method}", self.name)),
                how: Failed::HostLost,
            }),
            Err(Waited::TimedOut) => Err(timed_out()),
        }
    }

    /// Run one `call`: it may take as long as `limit` (then it is cancelled, ETIMEDOUT),
    /// reports its progress to `run`, and is cancelled when `run` is. The host is dropped
    /// and restarted only when it stops answering altogether: while the call runs, a host
    /// silent for `read_timeout` is pinged, and one that still sends nothing within
    /// `read_timeout` more is hung.
    pub fn call(
        self: &Arc<Self>,
        params: Value,
        run: &RunSignal,
        limit: Duration,
    ) -> Result<Value, Failure> {
        let conn = self.connection().map_err(|error| Failure {
            error,
            how: Failed::Unsent,
        })?;
        let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        match lock(&conn.pending).as_mut() {
            Some(p) => {
                p.insert(id, tx);
            }
            None => {
                return Err(Failure {
                    error: HostError::Backend(format!(
                        "host {}: {}",
                        self.name,
                        conn.why_dropped()
                    )),
                    how: Failed::Unsent,
                })
            }
        }
        lock(&conn.runs).insert(id, run.clone());
        let outcome = self.await_call(&conn, id, params, run, &rx, limit);
        lock(&conn.runs).remove(&id);
        if let Some(p) = lock(&conn.pending).as_mut() {
            p.remove(&id);
        }
        // The host is fine when only this call ran out of time.
        self.settled("call", outcome, || Failure {
            error: HostError::TimedOut(format!(
                "host {}: the call ran longer than call_timeout_ms ({} ms) and was cancelled",
                self.name,
                limit.as_millis()
            )),
            how: Failed::Answered,
        })
    }

    fn await_call(
        &self,
        conn: &Arc<Conn>,
        id: u64,
        params: Value,
        run: &RunSignal,
        rx: &mpsc::Receiver<Reply>,
        limit: Duration,
    ) -> Result<Value, Waited> {
        let mut line = serde_json::to_vec(&Request::new(id, "call", params))
            .map_err(|e| Waited::Lost(format!("cannot encode the request: {e}")))?;
        line.push(b'\n');
        if !conn.send(line) {
            return Err(Waited::Lost("the host stopped reading".into()));
        }
        let cancel = move |conn: &Conn| {
            let mut line = serde_json::to_vec(&serde_json::json!({
                "jsonrpc": "2.0", "method": "cancel", "params": {"id": id}
            }))
            .unwrap_or_default();
            line.push(b'\n');
            conn.send(line);
        };
        {
            let conn = Arc::clone(conn);
            run.on_cancel(move || cancel(&conn));
        }
        let started = Instant::now();
        let mut stopping: Option<(Instant, bool)> = None;
        let mut pinged: Option<Instant> = None;
        loop {
            match rx.recv_timeout(CALL_TICK) {
                Ok(Reply::Done(Ok(v))) => return Ok(v),
                Ok(Reply::Done(Err(e))) => return Err(Waited::Error(e)),
                Ok(Reply::Lost(why)) => return Err(Waited::Lost(why)),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Waited::Lost(conn.why_dropped()))
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            if stopping.is_none() {
                // A cancel reached the host through the run's hook; a call past its
                // limit is cancelled here.
                if run.cancelled() {
                    stopping = Some((now, true));
                } else if now.duration_since(started) >= limit {
                    cancel(conn);
                    stopping = Some((now, false));
                }
            }
            if let Some((since, cancelled)) = stopping {
                if now.duration_since(since) >= CANCEL_GRACE {
                    if !cancelled {
                        return Err(Waited::TimedOut);
                    }
                    return Err(Waited::Error(RpcError {
                        code: protocol::code::CANCELLED,
                        message: format!(
                            "cancelled: the host was told and did not answer within {} s; the runtime stopped waiting",
                            CANCEL_GRACE.as_secs()
                        ),
                        data: None,
                    }));
                }
            }
            // Liveness: anything the host sends counts; silence gets a ping, and silence
            // after the ping means it hung.
            let heard = *lock(&conn.last_heard);
            match pinged {
                Some(at) if heard >= at => pinged = None,
                Some(at) if now.duration_since(at) >= self.read_timeout => {
                    let why = format!(
                        "no answer to ping within {} ms while a call ran (the host stopped answering)",
                        self.read_timeout.as_millis()
                    );
                    self.fail(conn, why.clone());
                    return Err(Waited::Lost(why));
                }
                Some(_) => {}
                None if now.duration_since(heard) >= self.read_timeout => {
                    let ping_id = conn.next_id.fetch_add(1, Ordering::Relaxed);
                    let mut line =
                        serde_json::to_vec(&Request::new(ping_id, "ping", serde_json::json!({})))
                            .unwrap_or_default();
                    line.push(b'\n');
                    conn.send(line);
                    pinged = Some(now);
                }
                None => {}
            }
        }
    }

    fn answered(&self) {
        let mut st = lock(&self.state);
        if st.failures > 0 {
            st.failures = 0;
        }
    }

    /// Stop the host now (the child is killed, the socket shut).
    pub fn shutdown(&self) {
        let conn = lock(&self.state).conn.take();
        if let Some(c) = conn {
            c.drop_with("the runtime closed the connection");
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shutdown();
    }
}

enum Waited {
    Error(RpcError),
    Lost(String),
    TimedOut,
}

/// Why no connection to the host was opened (the reason its root shows while it is down).
#[derive(Debug, thiserror::Error)]
enum Unopened {
    #[error("cannot start or reach {at}: {source}")]
    Unreachable { at: String, source: std::io::Error },
    #[error("cannot start threads for the host: {0}")]
    Threads(#[source] std::io::Error),
    #[error("{0}")]
    Params(#[source] serde_json::Error),
    #[error("{at} answered initialize with a result of the wrong shape: {source}")]
    Shape {
        at: String,
        source: serde_json::Error,
    },
    #[error("{at} refused initialize (code {}): {}", .error.code, .error.message)]
    Refused { at: String, error: RpcError },
    #[error("{0} during initialize")]
    Lost(String),
    #[error("{at} sent no answer to initialize within {ms} ms")]
    Silent { at: String, ms: u128 },
    #[error(
        "{at} speaks {protocol} version {version}, this runtime speaks {} version {}",
        protocol::PROTOCOL,
        protocol::VERSION
    )]
    Version {
        at: String,
        protocol: String,
        version: u32,
    },
}

/// Why the stream from the host is unusable.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    /// A line too long, or the like (`transport::read_line`'s words).
    #[error("the host sent {0}")]
    BadData(#[source] std::io::Error),
    #[error("cannot read from the host: {0}")]
    Read(#[source] std::io::Error),
    /// The start of the line (at most `QUOTE` bytes), and why it is not a message.
    #[error("the host sent a line that is not JSON-RPC (not UTF-8): {0}")]
    NotUtf8(String),
    #[error("the host sent a line that is not JSON-RPC ({source}): {shown}")]
    NotRpc { shown: String, source: NotRpc },
}

/// Read and parse the next message; `Err` says why the stream is unusable.
fn read_message<R: BufRead>(r: &mut R) -> Result<Option<Incoming>, Unreadable> {
    loop {
        let line = match transport::read_line(r, transport::MAX_LINE) {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(Unreadable::BadData(e))
            }
            Err(e) => return Err(Unreadable::Read(e)),
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let shown = String::from_utf8_lossy(&line[..line.len().min(QUOTE)]).into_owned();
        let text = std::str::from_utf8(&line).map_err(|_| Unreadable::NotUtf8(shown.clone()))?;
        return Incoming::parse(text)
            .map(Some)
            .map_err(|source| Unreadable::NotRpc { shown, source });
    }
}
