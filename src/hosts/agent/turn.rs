//! One turn of a conversation: the agent command run once, fed the conversation on stdin as
//! JSON lines, its stdout read as JSON lines (or plain text), on a thread of its own.
//!
//! The protocol (docs/agent-protocol.md): stdin holds one `{"role","content"}` object per
//! message, then EOF. Stdout's first non-blank line decides how it is read: a JSON object
//! means JSON lines, each `{"content": "…"}` (pieces of the answer, concatenated) and/or
//! `{"status": "…"}` (progress shown in the conversation's description); anything else means
//! the whole stdout is the answer as plain text. Exit 0 with an answer is done; anything else
//! failed, in the words of stderr's last lines.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::host::text::one_line;
use crate::hosts::lock;

use serde_json::{json, Value};

/// The most stdout a turn may write (an answer larger than this is a failure, not a
/// memory exhaustion of the daemon).
pub const MAX_OUTPUT: usize = 4 << 20;
/// How much of stderr is kept for the words of a failure.
const STDERR_TAIL: usize = 8 << 10;
/// How many of stderr's last lines a failure quotes.
const STDERR_LINES: usize = 3;
/// How long a process group has between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// The answer.
    Done(String),
    /// Why there is no answer.
    Failed(String),
    Cancelled,
}

/// What runs for each turn.
#[derive(Clone, Debug)]
pub struct Program {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Working directory (the launch directory).
    pub dir: PathBuf,
    /// A turn's hard limit.
    pub timeout: Duration,
}

impl Program {
    /// The command as shown in descriptions: `python3 reviewer.py`.
    pub fn display(&self) -> String {
        let argv: Vec<String> = std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect();
        crate::secrets::shown_command(&argv)
    }
}

/// The process of a turn, as far as cancelling and timing out are concerned.
#[derive(Default)]
struct Process {
    /// Process (and process group) id once spawned; `None` again once reaped.
    pid: Option<i32>,
    cancelled: bool,
    timed_out: bool,
}

#[derive(Default)]
struct Progress {
    end: Option<TurnEnd>,
    /// Calls waiting for the end that will report the change themselves if it is done.
    waiters: usize,
}

/// A running turn, shared by its thread and the calls that wait for or cancel it.
pub struct Turn {
    pub conversation: i64,
    pub started: Instant,
    process: Mutex<Process>,
    progress: Mutex<Progress>,
    ended: Condvar,
    /// The agent's latest `{"status": …}` line.
    status: Mutex<String>,
}

/// Signal a whole process group (the agent and whatever it started).
fn kill_group(pid: i32, signal: i32) {
    // SAFETY: killpg only sends a signal; pid is a group we created and have not reaped
    // (the slot is cleared under the same lock right after reaping).
    unsafe {
        libc::killpg(pid, signal);
    }
}

impl Turn {
    pub fn new(conversation: i64) -> Arc<Turn> {
        Arc::new(Turn {
            conversation,
            started: Instant::now(),
            process: Mutex::new(Process::default()),
            progress: Mutex::new(Progress::default()),
            ended: Condvar::new(),
            status: Mutex::new(String::new()),
        })
    }

    pub fn status(&self) -> String {
        lock(&self.status).clone()
    }

    pub fn is_over(&self) -> bool {
        lock(&self.progress).end.is_some()
    }

    /// Wait up to `timeout` for the end. A waiter that gets `Done` reports the change in its
    /// own call outcome; otherwise the turn's thread reports it (see `finish`).
    pub fn wait(&self, timeout: Duration) -> Option<TurnEnd> {
        self.await_end(timeout, true)
    }

    /// Wait without taking on the report (the time limit, a cancel's grace period).
    fn await_end(&self, timeout: Duration, reports: bool) -> Option<TurnEnd> {
        let mut p = lock(&self.progress);
        if reports {
            p.waiters += 1;
        }
        let (mut p, _) = self
            .ended
            .wait_timeout_while(p, timeout, |p| p.end.is_none())
            .unwrap_or_else(|e| e.into_inner());
        if reports {
            p.waiters -= 1;
        }
        p.end.clone()
    }

    /// Record the end and wake the waiters; returns whether nobody will report a done turn
    /// (so the caller must report the change on its own).
    pub fn finish(&self, end: TurnEnd) -> bool {
        let mut p = lock(&self.progress);
        let unreported = !(matches!(end, TurnEnd::Done(_)) && p.waiters > 0);
        p.end = Some(end);
        self.ended.notify_all();
        unreported
    }

    /// Stop the process: SIGTERM to its group, SIGKILL after `KILL_GRACE`. `timed_out`
    /// says why (the turn's limit, else a cancel).
    pub fn stop(&self, timed_out: bool) {
        let pid = {
            let mut proc = lock(&self.process);
            if timed_out {
                proc.timed_out = true;
            } else {
                proc.cancelled = true;
            }
            proc.pid
        };
        let Some(pid) = pid else {
            // Not spawned yet (it is killed right after spawning) or already reaped.
            return;
        };
        kill_group(pid, libc::SIGTERM);
        if self.await_end(KILL_GRACE, false).is_none() {
            let proc = lock(&self.process);
            if let Some(pid) = proc.pid {
                kill_group(pid, libc::SIGKILL);
            }
        }
    }

    /// Kill the process group at once (the host is going away).
    pub fn kill_now(&self) {
        let mut proc = lock(&self.process);
        proc.cancelled = true;
        if let Some(pid) = proc.pid {
            kill_group(pid, libc::SIGKILL);
        }
    }
}

/// The conversation as the agent reads it: one JSON object per message.
pub fn transcript(messages: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (role, content) in messages {
        out.extend_from_slice(
            json!({"role": role, "content": content})
                .to_string()
                .as_bytes(),
        );
        out.push(b'\n');
    }
    out
}

/// How stdout is being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// No non-blank line yet.
    Undecided,
    Json,
    Plain,
}

/// What one stdout line meant.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Nothing,
    Status(String),
    Invalid(String),
}

/// Reads an agent's stdout, line by line.
#[derive(Debug)]
pub struct Reader {
    mode: Mode,
    answer: String,
    lines: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            mode: Mode::Undecided,
            answer: String::new(),
            lines: 0,
        }
    }
}

impl Reader {
    /// Feed one line (with or without its newline).
    pub fn line(&mut self, raw: &str) -> Line {
        self.lines += 1;
        if self.mode == Mode::Undecided {
            if raw.trim().is_empty() {
                return Line::Nothing;
            }
            self.mode = if raw.trim_start().starts_with('{') {
                Mode::Json
            } else {
                Mode::Plain
            };
        }
        if self.mode == Mode::Plain {
            self.answer.push_str(raw);
            if !raw.ends_with('\n') {
                self.answer.push('\n');
            }
            return Line::Nothing;
        }
        let text = raw.trim();
        if text.is_empty() {
            return Line::Nothing;
        }
        let n = self.lines;
        let short: String = text.chars().take(80).collect();
        let obj = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(o)) => o,
            _ => {
                return Line::Invalid(format!(
                    "stdout line {n} is not a JSON object (output that starts with a JSON \
                     object is read as JSON lines): {short}"
                ))
            }
        };
        let content = obj.get("content");
        let status = obj.get("status");
        if content.is_none() && status.is_none() {
            return Line::Invalid(format!(
                "stdout line {n} has neither \"content\" nor \"status\": {short}"
            ));
        }
        if let Some(c) = content {
            match c.as_str() {
                Some(s) => self.answer.push_str(s),
                None => {
                    return Line::Invalid(format!(
                        "stdout line {n}: \"content\" must be a string: {short}"
                    ))
                }
            }
        }
        match status {
            None => Line::Nothing,
            Some(Value::String(s)) => Line::Status(one_line(s, 200)),
            Some(_) => Line::Invalid(format!(
                "stdout line {n}: \"status\" must be a string: {short}"
            )),
        }
    }

    /// The answer, if there is one.
    pub fn answer(self) -> Option<String> {
        let answer = match self.mode {
            Mode::Plain => self.answer.trim_end().to_string(),
            _ => self.answer,
        };
        (!answer.trim().is_empty()).then_some(answer)
    }
}

/// The last lines of stderr, in one line.
fn stderr_words(tail: &[u8]) -> String {
    let text = String::from_utf8_lossy(tail);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = lines.len().saturating_sub(STDERR_LINES);
    one_line(&lines[start..].join(" / "), 400)
}

/// Hooks of a running turn into its host: progress lines.
pub trait Observer: Send + Sync {
    fn status(&self, turn: &Turn);
}

/// Run the turn to its end on the current thread. `persist` stores the end before any
/// waiter wakes (so what they read next is final). Returns the end and whether the caller
/// must report the change (no waiter took a done answer into its own call's outcome).
pub fn run(
    turn: &Arc<Turn>,
    program: &Program,
    env: &[(String, String)],
    stdin: Vec<u8>,
    observer: &dyn Observer,
    persist: impl FnOnce(&TurnEnd),
) -> (TurnEnd, bool) {
    let end = execute(turn, program, env, stdin, observer);
    persist(&end);
    let unreported = turn.finish(end.clone());
    (end, unreported)
}

/// One turn of the agent, start to end: spawned, watched, fed, read, judged.
fn execute(
    turn: &Arc<Turn>,
    program: &Program,
    env: &[(String, String)],
    stdin: Vec<u8>,
    observer: &dyn Observer,
) -> TurnEnd {
    let mut child = match spawn(turn, program, env) {
        Ok(child) => child,
        Err(end) => return end,
    };
    watch_the_limit(turn, program.timeout);
    let writer = child.stdin.take().map(|pipe| feed(pipe, stdin));
    let stderr = child.stderr.take().map(tail);
    let (reader, invalid) = match child.stdout.take() {
        Some(pipe) => read_output(pipe, turn, observer),
        None => (Reader::default(), None),
    };
    if invalid.is_some() {
        let proc = lock(&turn.process);
        if let Some(pid) = proc.pid {
            kill_group(pid, libc::SIGKILL);
        }
    }
    let status = child.wait();
    let (cancelled, timed_out) = {
        let mut proc = lock(&turn.process);
        // Whatever the agent left running in its group goes with it.
        if let Some(pid) = proc.pid.take() {
            if proc.cancelled || proc.timed_out || invalid.is_some() {
                kill_group(pid, libc::SIGKILL);
            }
        }
        (proc.cancelled, proc.timed_out)
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    let tail = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if cancelled {
        return TurnEnd::Cancelled;
    }
    if timed_out {
        return TurnEnd::Failed(format!(
            "timed out after {} s (timeout_ms of this agent); the process was stopped",
            program.timeout.as_secs_f64()
        ));
    }
    classify(status, invalid, &tail, reader)
}

/// Start the agent in a process group of its own (cancelling then stops whatever it
/// started too), unless the turn was cancelled already.
fn spawn(turn: &Arc<Turn>, program: &Program, env: &[(String, String)]) -> Result<Child, TurnEnd> {
    let mut cmd = Command::new(&program.program);
    cmd.args(&program.args)
        .current_dir(&program.dir)
        .env_clear()
        .envs(&program.env)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: prctl and plain_signals are async-signal-safe. The agent dies with the
    // thread that started it (the turn's, which lives until the agent ends), so a killed
    // daemon leaves no agents.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            crate::children::plain_signals()
        });
    }
    let mut proc = lock(&turn.process);
    if proc.cancelled {
        return Err(TurnEnd::Cancelled);
    }
    match cmd.spawn() {
        Ok(c) => {
            crate::children::own(c.id());
            proc.pid = i32::try_from(c.id()).ok();
            Ok(c)
        }
        Err(e) => Err(TurnEnd::Failed(format!(
            "cannot start `{}`: {e}",
            program.display()
        ))),
    }
}

/// The limit: a watchdog thread stops the turn when it runs out.
fn watch_the_limit(turn: &Arc<Turn>, limit: Duration) {
    let watched = Arc::clone(turn);
    let spawned = std::thread::Builder::new()
        .name(format!("wip-agent-limit-{}", turn.conversation))
        .spawn(move || {
            if watched.await_end(limit, false).is_none() {
                watched.stop(true);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("no time limit for this turn: {e}");
    }
}

/// Feed the transcript from a thread of its own: an agent may write before it reads.
fn feed(mut pipe: ChildStdin, stdin: Vec<u8>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        // An agent that does not read its input closes the pipe: not an error.
        let _ = pipe.write_all(&stdin);
    })
}

/// Keep the last `STDERR_TAIL` bytes of what the agent says on stderr (for the words of
/// a failure).
fn tail(mut pipe: ChildStderr) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > 2 * STDERR_TAIL {
                tail.drain(..tail.len() - STDERR_TAIL);
            }
        }
        tail
    })
}

/// Read the agent's stdout line by line into its answer, reporting status lines as they
/// come; stops at the first invalid line or past `MAX_OUTPUT` (why, then).
fn read_output(
    pipe: ChildStdout,
    turn: &Arc<Turn>,
    observer: &dyn Observer,
) -> (Reader, Option<String>) {
    let mut reader = Reader::default();
    let mut lines = BufReader::new(pipe);
    let mut total = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match lines
            .by_ref()
            .take((MAX_OUTPUT + 1 - total.min(MAX_OUTPUT)) as u64)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) => return (reader, None),
            Ok(n) => total += n,
            Err(e) => return (reader, Some(format!("cannot read its output: {e}"))),
        }
        if total > MAX_OUTPUT {
            let why = format!("it wrote more than {} MiB on stdout", MAX_OUTPUT >> 20);
            return (reader, Some(why));
        }
        match reader.line(&String::from_utf8_lossy(&buf)) {
            Line::Nothing => {}
            Line::Status(s) => {
                *lock(&turn.status) = s;
                observer.status(turn);
            }
            Line::Invalid(why) => return (reader, Some(why)),
        }
    }
}

/// How a turn that was neither cancelled nor timed out ended: its answer, or why not in
/// words (with the tail of its stderr).
fn classify(
    status: std::io::Result<std::process::ExitStatus>,
    invalid: Option<String>,
    tail: &[u8],
    reader: Reader,
) -> TurnEnd {
    let words = stderr_words(tail);
    let with_stderr = |why: String| {
        if words.is_empty() {
            why
        } else {
            format!("{why}: {words}")
        }
    };
    if let Some(why) = invalid {
        return TurnEnd::Failed(with_stderr(format!("invalid output: {why}")));
    }
    match status {
        Err(e) => TurnEnd::Failed(format!("cannot wait for the agent: {e}")),
        Ok(s) if !s.success() => TurnEnd::Failed(with_stderr(match s.code() {
            Some(code) => format!("exit status {code}"),
            None => {
                use std::os::unix::process::ExitStatusExt;
                format!("killed by signal {}", s.signal().unwrap_or(0))
            }
        })),
        Ok(_) => match reader.answer() {
            Some(answer) => TurnEnd::Done(answer),
            None => TurnEnd::Failed(with_stderr(
                "it exited 0 without an answer on stdout".to_string(),
            )),
        },
    }
}
