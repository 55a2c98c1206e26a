//! The agents host: any program that reads a conversation on stdin and writes a reply on
//! stdout, mounted as an entry whose `ask` creates a conversation.
//!
//! Tree, host-relative: the root offers `ask(message)`; `conversations/` (not listed by the
//! root, reachable by path; `ls conversations/` lists the newest) holds `ID/` with `reply`,
//! `wait`, `cancel` and `read_body`, and `ID/messages/K/` with `read_body`. Each turn runs
//! the command afresh on a thread of its own (`turn`); a call waits for it at most `wait_ms`
//! and otherwise says the conversation is working. Conversations live in SQLite in the state
//! directory (`store`), so they survive remounts; a turn cut off by a stop shows
//! `interrupted`. When a turn ends on its own, the host reports the change (`Changes`).

mod store;
#[cfg(test)]
mod tests;
pub(crate) mod turn;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::calendar::parse_iso;
use crate::host::{
    Body, CallOutcome, Caller, Changes, Child, Condition, EntryInfo, Guard, Host, HostError,
    HostResult, OpSpec, RunSignal,
};
use crate::hosts::{lock, HostContext};

use crate::host::names::{canonical_number, Paths};
use crate::host::op::{Decl, NoArgs, Ops, Text};
use crate::host::text::{one_line, plural};
use store::{Conversation, State, Store};
use turn::{Observer, Program, Turn, TurnEnd};

/// How often a call waiting for its turn looks at the turn's status line.
const STATUS_POLL: Duration = Duration::from_millis(250);
/// How long a cancel waits for the turn's thread after the process group was stopped.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// Status lines are reported to the change feed at most this often per turn.
const STATUS_REPORT_EVERY: Duration = Duration::from_secs(1);

/// The `[[host]]` table of an agents host, minus `kind` and `path`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AgentSettings {
    /// The program and its arguments, run afresh for every turn in the launch directory
    /// (a relative program path with a `/` is relative to it; a bare name is looked up on
    /// PATH).
    pub command: Vec<String>,
    /// What this agent is for, shown on the host's root.
    #[serde(default)]
    pub description: Option<String>,
    /// How long `ask` and `reply` wait for the answer before returning "working". By
    /// default they wait for the turn to end, like any call: a turn longer than the
    /// world's call_timeout_ms goes on as the call's run (wait on it, watch its progress,
    /// cancel it there or through the conversation).
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// A turn's hard limit: then its process group is stopped and the conversation failed.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The longest `wait` may block (and its default). It must stay below the world's
    /// `call_timeout_ms` so a wait answers in words rather than by the runtime's timeout;
    /// by default it is that timeout less 5 s (at least 1 s).
    #[serde(default)]
    pub wait_limit_ms: Option<u64>,
    /// Extra environment variables of the command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of the daemon's environment to hand to the command as they are (by
    /// default it gets only PATH, HOME, LANG, LC_*, TERM, TZ, USER, TMPDIR and WIP_*).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// How many conversations (and messages) a listing shows.
    #[serde(default = "default_page_size")]
    pub page_size: usize,
}

fn default_timeout_ms() -> u64 {
    600_000
}

fn default_page_size() -> usize {
    200
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("command must name a program (e.g. command = [\"python3\", \"agent.py\"])")]
    NoCommand,
    #[error("timeout_ms must be at least 1")]
    Timeout,
    #[error("wait_limit_ms must be at least 1")]
    WaitLimit,
    #[error(
        "wait_limit_ms ({limit}) must be below the world's call_timeout_ms ({call_timeout}), \
         or a wait would end in the runtime's timeout instead of words"
    )]
    WaitAboveCallTimeout { limit: u64, call_timeout: u64 },
    #[error("wait_ms ({wait}) must not exceed wait_limit_ms ({limit})")]
    WaitAboveLimit { wait: u64, limit: u64 },
    #[error("page_size must be at least 1")]
    PageSize,
    #[error("conversation store {path}: {source}")]
    Store {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// An entry of the tree, parsed from a host-relative path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Root,
    Conversations,
    Conversation(i64),
    Messages(i64),
    Message(i64, i64),
}

impl Node {
    fn parse(path: &[String]) -> Option<Node> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        Some(match p.as_slice() {
            [] => Node::Root,
            ["conversations"] => Node::Conversations,
            ["conversations", id] => Node::Conversation(canonical_number(id)?),
            ["conversations", id, "messages"] => Node::Messages(canonical_number(id)?),
            ["conversations", id, "messages", n] => {
                Node::Message(canonical_number(id)?, canonical_number(n)?)
            }
            _ => return None,
        })
    }
}

fn conversation_path(id: i64) -> Vec<String> {
    vec!["conversations".to_string(), id.to_string()]
}

fn messages_path(id: i64) -> Vec<String> {
    let mut p = conversation_path(id);
    p.push("messages".to_string());
    p
}

fn message_path(id: i64, n: i64) -> Vec<String> {
    let mut p = messages_path(id);
    p.push(n.to_string());
    p
}

/// An entry as its ops see it: the node, and the waits their descriptions cite.
#[derive(Clone, Debug)]
struct At {
    node: Node,
    wait: Option<Duration>,
    wait_limit: Duration,
    /// The call's run: the turn's status lines are its progress, its cancel stops the turn.
    signal: RunSignal,
}

/// The arguments of `ask`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    /// what to ask
    message: Text,
}

/// The arguments of `reply`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReplyArgs {
    /// what to say next
    message: Text,
}

/// The arguments of `wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WaitArgs {
    /// how long to wait, in milliseconds
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
}

fn conversation_id(at: &At) -> HostResult<i64> {
    match at.node {
        Node::Conversation(id) => Ok(id),
        _ => Err(HostError::NotFound("not a conversation".to_string())),
    }
}

/// Every op's name, spelled once: the declarations below and the words that point to an
/// op use these.
pub(super) mod name {
    pub const ASK: &str = "ask";
    pub const REPLY: &str = "reply";
    pub const WAIT: &str = "wait";
    pub const CANCEL: &str = "cancel";
    pub const READ_BODY: &str = "read_body";
}

/// Every op of the agents host, in the order `ops/` lists them.
static OPS: LazyLock<Ops<Arc<Inner>, At>> = LazyLock::new(|| {
    let conversation = |at: &At| matches!(at.node, Node::Conversation(_));
    Ops::new(vec![
        Decl::<Arc<Inner>, At, (), AskArgs> {
            name: name::ASK,
            offers: |at| at.node == Node::Root,
            describe: |at| match at.wait {
                Some(w) => format!(
                    "Ask the agent: message. Creates conversations/ID/ and prints the answer if \
                     it comes within {} s, else says working (then use the conversation's \
                     wait).",
                    w.as_secs_f64()
                ),
                None => "Ask the agent: message. Creates conversations/ID/ and prints the \
                         answer when the agent is done; a longer turn goes on as this call's \
                         run (its result says how to wait for it or cancel it)."
                    .to_string(),
            },
            guard: |_, _, _, _| Ok(Vec::new()),
            run: |h, _, at, args| h.ask(args.message.as_str(), &at.signal),
        }
        .into(),
        Decl::<Arc<Inner>, At, (), ReplyArgs> {
            name: name::REPLY,
            offers: conversation,
            describe: |at| match at.wait {
                Some(w) => format!(
                    "Continue the conversation: message (the agent sees it all). Prints the \
                     answer if it comes within {} s, else says working.",
                    w.as_secs_f64()
                ),
                None => "Continue the conversation: message (the agent sees it all). Prints \
                         the answer when the agent is done; a longer turn goes on as this \
                         call's run."
                    .to_string(),
            },
            guard: |h, _, at, _| h.not_working(conversation_id(at)?),
            run: |h, _, at, args| h.reply(conversation_id(at)?, args.message.as_str(), &at.signal),
        }
        .into(),
        Decl::<Arc<Inner>, At, (), WaitArgs> {
            name: name::WAIT,
            offers: conversation,
            describe: |at| {
                format!(
                    "Wait until the agent has answered (timeout_ms, default and at most {}) \
                     and print the answer; fails if the turn failed or was cancelled.",
                    at.wait_limit.as_millis()
                )
            },
            guard: |_, _, _, _| Ok(Vec::new()),
            run: |h, _, at, args| h.wait_args(conversation_id(at)?, args),
        }
        .into(),
        Decl::<Arc<Inner>, At, (), NoArgs> {
            name: name::CANCEL,
            offers: conversation,
            describe: |_| "Stop the agent's answer in progress (its whole process group).".into(),
            guard: |h, _, at, _| h.working(conversation_id(at)?),
            run: |h, _, at, _| h.cancel(conversation_id(at)?),
        }
        .into(),
        Decl::<Arc<Inner>, At, (), NoArgs> {
            name: name::READ_BODY,
            offers: |at| matches!(at.node, Node::Conversation(_) | Node::Message(..)),
            describe: |at| {
                match at.node {
                    Node::Message(..) => "Print the message's full text.",
                    _ => "Print the whole conversation, every message in full.",
                }
                .to_string()
            },
            guard: |_, _, _, _| Ok(Vec::new()),
            run: |h, _, at, _| match at.node {
                Node::Message(id, n) => h.message_text(id, n),
                _ => Ok(CallOutcome::text(h.transcript_text(conversation_id(at)?)?)),
            },
        }
        .into(),
    ])
});

/// What the host and its turns' threads share.
struct Inner {
    /// Where the host is mounted in the world (`agents/reviewer`).
    paths: Paths,
    /// The world's mount point, given to the agent (`WIP_WORLD`).
    mount_point: PathBuf,
    program: Program,
    description: Option<String>,
    /// How long ask and reply wait before saying working; `None`: until the turn ends.
    wait: Option<Duration>,
    wait_limit: Duration,
    page_size: usize,
    store: Store,
    /// Turns running now, by conversation. Lock order: `running`, then the store.
    running: Mutex<HashMap<i64, Arc<Turn>>>,
    changes: Changes,
    /// The host is going away: turns that end now leave their conversation to be marked
    /// interrupted instead of recording a kill as a failure.
    stopping: AtomicBool,
}

/// The agents host.
pub struct AgentHost {
    inner: Arc<Inner>,
}

/// Reports a turn's progress lines to the change feed, at most once a second.
struct Reporter {
    changes: Changes,
    path: Vec<String>,
    last: Mutex<Option<Instant>>,
}

impl Observer for Reporter {
    fn status(&self, _turn: &Turn) {
        let mut last = lock(&self.last);
        if last.is_none_or(|t| t.elapsed() >= STATUS_REPORT_EVERY) {
            *last = Some(Instant::now());
            self.changes.changed(vec![self.path.clone()]);
        }
    }
}

impl AgentHost {
    pub fn open(settings: AgentSettings, ctx: &HostContext) -> Result<AgentHost, AgentError> {
        let mount_path = ctx.mount.as_str();
        let Some((first, args)) = settings.command.split_first() else {
            return Err(AgentError::NoCommand);
        };
        if first.trim().is_empty() {
            return Err(AgentError::NoCommand);
        }
        if settings.timeout_ms == 0 {
            return Err(AgentError::Timeout);
        }
        if settings.wait_limit_ms == Some(0) {
            return Err(AgentError::WaitLimit);
        }
        let wait_limit_ms =
            ctx.wait_within_call(settings.wait_limit_ms)
                .map_err(|(limit, call_timeout)| AgentError::WaitAboveCallTimeout {
                    limit,
                    call_timeout,
                })?;
        if let Some(wait) = settings.wait_ms.filter(|w| *w > wait_limit_ms) {
            return Err(AgentError::WaitAboveLimit {
                wait,
                limit: wait_limit_ms,
            });
        }
        if settings.page_size == 0 {
            return Err(AgentError::PageSize);
        }
        let given = PathBuf::from(first);
        // A path is relative to the launch directory; a bare name is found on PATH.
        let program = if first.contains('/') && given.is_relative() {
            ctx.launch_dir.join(given)
        } else {
            given
        };
        let mount = mount_path.trim_matches('/').to_string();
        let path = ctx
            .state_dir
            .join(format!("agent-{}.db", mount.replace('/', "_")));
        let (store, interrupted) = Store::open(&path).map_err(|source| AgentError::Store {
            path: path.clone(),
            source,
        })?;
        if interrupted > 0 {
            tracing::warn!(
                host = mount,
                turns = interrupted,
                "turns cut off by the last stop are marked interrupted"
            );
        }
        Ok(AgentHost {
            inner: Arc::new(Inner {
                paths: Paths::new(&mount),
                mount_point: ctx.mount_point.clone(),
                program: Program {
                    program,
                    args: args.to_vec(),
                    env: crate::hosts::child_env(&settings.env, &settings.pass_env),
                    dir: ctx.launch_dir.clone(),
                    timeout: Duration::from_millis(settings.timeout_ms),
                },
                description: settings.description,
                wait: settings.wait_ms.map(Duration::from_millis),
                wait_limit: Duration::from_millis(wait_limit_ms),
                page_size: settings.page_size,
                store,
                running: Mutex::new(HashMap::new()),
                changes: ctx.changes.clone(),
                stopping: AtomicBool::new(false),
            }),
        })
    }
}

impl Inner {
    fn reference(&self, parts: &[String]) -> String {
        if parts.is_empty() {
            format!("agent://{}", self.paths.mount())
        } else {
            format!("agent://{}/{}", self.paths.mount(), parts.join("/"))
        }
    }

    fn turn(&self, id: i64) -> Option<Arc<Turn>> {
        lock(&self.running).get(&id).cloned()
    }

    fn conversation(&self, id: i64) -> HostResult<Conversation> {
        self.store
            .conversation(id)?
            .ok_or_else(|| HostError::NotFound(format!("no conversation {id}")))
    }

    /// `working 3 s (status: reading the diff)`, `done`, `failed: exit status 1: boom`.
    fn state_words(&self, c: &Conversation) -> String {
        match c.state {
            State::Working => match self.turn(c.id) {
                Some(t) => {
                    let status = t.status();
                    format!(
                        "working {} s{}",
                        t.started.elapsed().as_secs(),
                        if status.is_empty() {
                            String::new()
                        } else {
                            format!(" (status: {status})")
                        }
                    )
                }
                None => "working".to_string(),
            },
            State::Done => "done".to_string(),
            other if c.detail.is_empty() => other.as_str().to_string(),
            other => format!("{}: {}", other.as_str(), one_line(&c.detail, 300)),
        }
    }

    fn conversation_description(&self, c: &Conversation) -> String {
        format!(
            "Conversation {} · {} · {} · {:?}",
            c.id,
            self.state_words(c),
            plural(c.messages, "message", "messages"),
            one_line(&c.question, 60)
        )
    }

    /// A conversation's entry; its title (for titled names) is its first question.
    fn conversation_info(&self, c: &Conversation) -> EntryInfo {
        EntryInfo::new(
            self.conversation_description(c),
            self.reference(&conversation_path(c.id)),
        )
        .titled(one_line(&c.question, 60))
    }

    fn root_description(&self) -> HostResult<String> {
        let (total, working) = self.store.counts()?;
        let what = match &self.description {
            Some(d) => format!("{} · ", one_line(d, 300)),
            None => String::new(),
        };
        Ok(format!(
            "{what}Agent running `{}` for each turn · {}{} in {} (reachable by path, not listed \
             here) · ask: echo 'your question' > {}",
            self.program.display(),
            plural(total, "conversation", "conversations"),
            if working > 0 {
                format!(" ({working} working)")
            } else {
                String::new()
            },
            self.paths.entry(&["conversations"]),
            self.paths.call::<&str>(&[], name::ASK),
        ))
    }

    fn message_info(&self, id: i64, m: &store::Message) -> EntryInfo {
        let first = m
            .content
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let lines = m.content.lines().count() as i64;
        let mut description = format!("{} · {}", m.role, one_line(first, 100));
        if lines > 1 {
            description.push_str(&format!(
                " · {} (read_body)",
                plural(lines, "line", "lines")
            ));
        }
        EntryInfo::new(description, self.reference(&message_path(id, m.n)))
    }

    fn info(&self, node: Node) -> HostResult<Option<EntryInfo>> {
        Ok(Some(match node {
            Node::Root => EntryInfo::new(self.root_description()?, self.reference(&[])),
            Node::Conversations => {
                let (total, working) = self.store.counts()?;
                let mut info = EntryInfo::new(
                    format!(
                        "{}{} of this agent, newest first (ls shows the newest {}; any is \
                         reachable as conversations/ID) · start one with {}",
                        plural(total, "conversation", "conversations"),
                        if working > 0 {
                            format!(" ({working} working)")
                        } else {
                            String::new()
                        },
                        self.page_size,
                        self.paths.call::<&str>(&[], name::ASK),
                    ),
                    self.reference(&["conversations".to_string()]),
                );
                // Conversations are dynamic objects: out of find, grep -r and locate.
                info.indexable = false;
                info
            }
            Node::Conversation(id) => match self.store.conversation(id)? {
                Some(c) => self.conversation_info(&c),
                None => return Ok(None),
            },
            Node::Messages(id) => match self.store.conversation(id)? {
                Some(c) => EntryInfo::new(
                    format!(
                        "{} of conversation {id}, oldest first: messages/1 … messages/{} · \
                         each one's full text: its read_body",
                        plural(c.messages, "message", "messages"),
                        c.messages
                    ),
                    self.reference(&messages_path(id)),
                ),
                None => return Ok(None),
            },
            Node::Message(id, n) => match self.store.message(id, n)? {
                Some(m) => self.message_info(id, &m),
                None => return Ok(None),
            },
        }))
    }

    fn existing(&self, path: &[String]) -> HostResult<Node> {
        let missing = || {
            HostError::NotFound(format!(
                "no entry {} in the agents host {}",
                if path.is_empty() {
                    "/".to_string()
                } else {
                    path.join("/")
                },
                self.paths.mount()
            ))
        };
        let node = Node::parse(path).ok_or_else(missing)?;
        let exists = match node {
            Node::Root | Node::Conversations => true,
            Node::Conversation(id) | Node::Messages(id) => self.store.conversation(id)?.is_some(),
            Node::Message(id, n) => self.store.message(id, n)?.is_some(),
        };
        if exists {
            Ok(node)
        } else {
            Err(missing())
        }
    }

    fn list(&self, node: Node) -> HostResult<Vec<Child>> {
        Ok(match node {
            Node::Root => match self.info(Node::Conversations)? {
                Some(info) => vec![Child {
                    name: "conversations".to_string(),
                    info,
                }],
                None => Vec::new(),
            },
            Node::Conversations => {
                let (rows, _) = self.store.conversations(self.page_size)?;
                rows.iter()
                    .map(|c| Child {
                        name: c.id.to_string(),
                        info: self.conversation_info(c),
                    })
                    .collect()
            }
            Node::Conversation(id) => match self.info(Node::Messages(id))? {
                Some(info) => vec![Child {
                    name: "messages".to_string(),
                    info,
                }],
                None => Vec::new(),
            },
            Node::Messages(id) => {
                let all = self.store.messages(id)?;
                let skip = all.len().saturating_sub(self.page_size);
                all[skip..]
                    .iter()
                    .map(|m| Child {
                        name: m.n.to_string(),
                        info: self.message_info(id, m),
                    })
                    .collect()
            }
            Node::Message(..) => Vec::new(),
        })
    }

    // ------------------------------------------------------------ ops

    /// The entry `node` as its ops see it.
    fn at(&self, node: Node) -> At {
        At {
            node,
            wait: self.wait,
            wait_limit: self.wait_limit,
            signal: RunSignal::default(),
        }
    }

    /// This agent's wait limit in `wait`'s schema, which the type cannot know.
    fn bounded(&self, mut spec: OpSpec) -> OpSpec {
        if let Some(t) = spec.schema.pointer_mut("/properties/timeout_ms") {
            t["maximum"] = json!(self.wait_limit.as_millis() as u64);
        }
        spec
    }

    /// `reply`'s guard: the agent is not answering already.
    fn not_working(&self, id: i64) -> HostResult<Vec<Condition>> {
        let here = conversation_path(id);
        let c = self.conversation(id)?;
        let working = c.state == State::Working;
        Ok(vec![Condition::check(
            "not_working",
            !working,
            if working {
                format!(
                    "conversation {id} is {}: wait for the answer with echo > {} or \
                     stop it with echo > {}",
                    self.state_words(&c),
                    self.paths.call(&here, name::WAIT),
                    self.paths.call(&here, name::CANCEL)
                )
            } else {
                format!("conversation {id} is {}", c.state.as_str())
            },
        )])
    }

    /// `cancel`'s guard: there is an answer in progress to stop.
    fn working(&self, id: i64) -> HostResult<Vec<Condition>> {
        let c = self.conversation(id)?;
        let working = c.state == State::Working;
        Ok(vec![Condition::check(
            "working",
            working,
            if working {
                format!("conversation {id} is {}", self.state_words(&c))
            } else {
                format!(
                    "conversation {id} is {}: there is nothing to cancel",
                    c.state.as_str()
                )
            },
        )])
    }

    fn wait_args(&self, id: i64, args: WaitArgs) -> HostResult<CallOutcome> {
        let limit = self.wait_limit.as_millis() as u64;
        let ms = match args.timeout_ms {
            None => limit,
            Some(n) if (1..=limit).contains(&n) => n,
            Some(_) => {
                return Err(HostError::InvalidArgs(format!(
                    "timeout_ms: an integer from 1 to {limit} (this agent's wait_limit_ms)"
                )))
            }
        };
        self.wait_for(id, Duration::from_millis(ms))
    }

    fn message_text(&self, id: i64, n: i64) -> HostResult<CallOutcome> {
        let m = self
            .store
            .message(id, n)?
            .ok_or_else(|| HostError::NotFound(format!("no message {n} in {id}")))?;
        Ok(CallOutcome::text(m.content))
    }

    /// Entries a turn's end changes.
    fn turn_changes(id: i64, answer: Option<i64>) -> Vec<Vec<String>> {
        let mut paths = vec![
            Vec::new(),
            vec!["conversations".to_string()],
            conversation_path(id),
            messages_path(id),
        ];
        if let Some(n) = answer {
            paths.push(message_path(id, n));
        }
        paths
    }

    /// Start a turn of conversation `id` on its own thread (its user message is stored).
    fn start(self: &Arc<Self>, turn: Arc<Turn>) {
        let id = turn.conversation;
        let stdin = match self.store.messages(id) {
            Ok(messages) => turn::transcript(
                &messages
                    .into_iter()
                    .map(|m| (m.role, m.content))
                    .collect::<Vec<_>>(),
            ),
            Err(e) => {
                self.end_without_running(&turn, TurnEnd::Failed(e.to_string()));
                return;
            }
        };
        let env = vec![
            ("WIP_CONVERSATION".to_string(), id.to_string()),
            (
                "WIP_CONVERSATION_PATH".to_string(),
                self.paths.entry(&conversation_path(id)),
            ),
            ("WIP_AGENT".to_string(), self.paths.mount().to_string()),
            (
                "WIP_WORLD".to_string(),
                self.mount_point.display().to_string(),
            ),
        ];
        let inner = Arc::clone(self);
        let for_thread = Arc::clone(&turn);
        let spawned = std::thread::Builder::new()
            .name(format!("wip-agent-turn-{id}"))
            .spawn(move || {
                let reporter = Reporter {
                    changes: inner.changes.clone(),
                    path: conversation_path(id),
                    last: Mutex::new(None),
                };
                let (end, unreported) =
                    turn::run(&for_thread, &inner.program, &env, stdin, &reporter, |end| {
                        inner.persist(id, end)
                    });
                inner.report(id, &end, unreported);
            });
        if let Err(e) = spawned {
            self.end_without_running(
                &turn,
                TurnEnd::Failed(format!("cannot start a thread: {e}")),
            );
        }
    }

    fn end_without_running(&self, turn: &Arc<Turn>, end: TurnEnd) {
        self.persist(turn.conversation, &end);
        turn.finish(end.clone());
        self.report(turn.conversation, &end, true);
    }

    /// Store a turn's end and forget the turn, atomically for the guards.
    fn persist(&self, id: i64, end: &TurnEnd) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let mut running = lock(&self.running);
        let (state, detail, answer) = match end {
            TurnEnd::Done(a) => (State::Done, String::new(), Some(a.as_str())),
            TurnEnd::Failed(why) => (State::Failed, why.clone(), None),
            TurnEnd::Cancelled => (
                State::Cancelled,
                "stopped by a call of cancel".to_string(),
                None,
            ),
        };
        if let Err(e) = self.store.finish(id, state, &detail, answer) {
            tracing::error!(conversation = id, "cannot store the end of a turn: {e}");
        }
        running.remove(&id);
    }

    fn report(&self, id: i64, end: &TurnEnd, unreported: bool) {
        if !unreported || self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let answer = match end {
            TurnEnd::Done(_) => self
                .store
                .conversation(id)
                .ok()
                .flatten()
                .map(|c| c.messages),
            _ => None,
        };
        self.changes.changed(Self::turn_changes(id, answer));
    }

    /// What `ask`/`reply` return once they waited for the turn: until it ends (the call's
    /// run shows the turn's status lines and its cancel stops the turn), or `self.wait`.
    fn answer_or_working(
        &self,
        turn: &Arc<Turn>,
        user_n: i64,
        run: &RunSignal,
    ) -> HostResult<CallOutcome> {
        let id = turn.conversation;
        let here = conversation_path(id);
        {
            let turn = Arc::clone(turn);
            run.on_cancel(move || turn.stop(false));
        }
        let end = match self.wait {
            Some(wait) => turn.wait(wait),
            None => {
                let mut shown = String::new();
                loop {
                    let status = turn.status();
                    if shown.is_empty() || status != shown {
                        run.note(format!(
                            "conversation {id}{}",
                            if status.is_empty() {
                                String::from(": working")
                            } else {
                                format!(": {status}")
                            }
                        ));
                        shown = if status.is_empty() {
                            " ".into()
                        } else {
                            status
                        };
                    }
                    if let Some(end) = turn.wait(STATUS_POLL) {
                        break Some(end);
                    }
                }
            }
        };
        let base = CallOutcome {
            discovered: vec![here.clone(), message_path(id, user_n)],
            changed: Self::turn_changes(id, None),
            ..Default::default()
        };
        match end {
            None => {
                let status = turn.status();
                Ok(CallOutcome {
                    result: format!(
                        "conversation {id} is working{} after {:.1} s; the answer will be \
                         {}.\nwait for it: echo > {}   (or read {}/description)",
                        if status.is_empty() {
                            String::new()
                        } else {
                            format!(" (status: {status})")
                        },
                        turn.started.elapsed().as_secs_f64(),
                        self.paths.entry(&message_path(id, user_n + 1)),
                        self.paths.call(&here, name::WAIT),
                        self.paths.entry(&here),
                    ),
                    ..base
                })
            }
            Some(TurnEnd::Done(answer)) => {
                let mut out = base;
                out.discovered.push(message_path(id, user_n + 1));
                out.changed.push(message_path(id, user_n + 1));
                out.result = format!(
                    "{answer}\n\n(conversation {id}, done; continue it with echo 'more' > {})",
                    self.paths.call(&here, name::REPLY)
                );
                Ok(out)
            }
            Some(other) => Err(self.no_answer(id, &other)),
        }
    }

    /// The error of a turn that ended without an answer.
    fn no_answer(&self, id: i64, end: &TurnEnd) -> HostError {
        let here = conversation_path(id);
        let again = format!(
            "{} is kept; reply to try again: echo '…' > {}",
            self.paths.entry(&here),
            self.paths.call(&here, name::REPLY)
        );
        match end {
            TurnEnd::Failed(why) => {
                HostError::Backend(format!("the agent failed: {why} — {again}"))
            }
            TurnEnd::Cancelled => {
                HostError::Cancelled(format!("conversation {id} was cancelled — {again}"))
            }
            TurnEnd::Done(_) => HostError::Backend("unreachable: done has an answer".to_string()),
        }
    }

    fn ask(self: &Arc<Self>, message: &str, run: &RunSignal) -> HostResult<CallOutcome> {
        let turn = {
            let mut running = lock(&self.running);
            let id = self.store.create(message)?;
            let turn = Turn::new(id);
            running.insert(id, Arc::clone(&turn));
            turn
        };
        self.start(Arc::clone(&turn));
        self.answer_or_working(&turn, 1, run)
    }

    fn reply(self: &Arc<Self>, id: i64, message: &str, run: &RunSignal) -> HostResult<CallOutcome> {
        let (turn, n) = {
            let mut running = lock(&self.running);
            match self.store.reply(id, message)? {
                Ok(n) => {
                    let turn = Turn::new(id);
                    running.insert(id, Arc::clone(&turn));
                    (turn, n)
                }
                Err(_) => {
                    drop(running);
                    return Err(HostError::Blocked(Guard::new(self.not_working(id)?)));
                }
            }
        };
        self.start(Arc::clone(&turn));
        self.answer_or_working(&turn, n, run)
    }

    fn wait_for(&self, id: i64, timeout: Duration) -> HostResult<CallOutcome> {
        let here = conversation_path(id);
        if let Some(turn) = self.turn(id) {
            if turn.wait(timeout).is_none() {
                let status = turn.status();
                return Err(HostError::TimedOut(format!(
                    "conversation {id} is still working after {:.1} s{}; wait again: echo > {}",
                    turn.started.elapsed().as_secs_f64(),
                    if status.is_empty() {
                        String::new()
                    } else {
                        format!(" (status: {status})")
                    },
                    self.paths.call(&here, name::WAIT)
                )));
            }
        }
        let c = self.conversation(id)?;
        match c.state {
            State::Done => {
                let last = self
                    .store
                    .messages(id)?
                    .into_iter()
                    .rev()
                    .find(|m| m.role == "agent")
                    .ok_or_else(|| {
                        HostError::Backend(format!("conversation {id} is done but has no answer"))
                    })?;
                Ok(CallOutcome {
                    result: format!(
                        "{}\n\n(conversation {id}, done; continue it with echo 'more' > {})",
                        last.content,
                        self.paths.call(&here, name::REPLY)
                    ),
                    discovered: vec![here, message_path(id, last.n)],
                    changed: Self::turn_changes(id, Some(last.n)),
                    ..Default::default()
                })
            }
            State::Failed => Err(self.no_answer(id, &TurnEnd::Failed(c.detail))),
            State::Cancelled => Err(self.no_answer(id, &TurnEnd::Cancelled)),
            State::Interrupted => Err(HostError::Backend(format!(
                "conversation {id} was interrupted ({}); reply to ask again: echo '…' > {}",
                c.detail,
                self.paths.call(&here, name::REPLY)
            ))),
            State::Working => Err(HostError::Backend(format!(
                "conversation {id} says working but no turn is running here; it will show \
                 interrupted at the next mount"
            ))),
        }
    }

    fn cancel(&self, id: i64) -> HostResult<CallOutcome> {
        let blocked =
            || -> HostResult<HostError> { Ok(HostError::Blocked(Guard::new(self.working(id)?))) };
        let Some(turn) = self.turn(id) else {
            return Err(blocked()?);
        };
        if turn.is_over() {
            return Err(blocked()?);
        }
        turn.stop(false);
        let took = turn.started.elapsed().as_secs_f64();
        match turn.wait(CANCEL_WAIT) {
            Some(TurnEnd::Cancelled) => Ok(CallOutcome {
                result: format!(
                    "cancelled conversation {id} after {took:.1} s (its process group was \
                     stopped); ask again with echo '…' > {}",
                    self.paths.call(&conversation_path(id), name::REPLY)
                ),
                changed: Self::turn_changes(id, None),
                ..Default::default()
            }),
            Some(TurnEnd::Done(_)) | Some(TurnEnd::Failed(_)) => Ok(CallOutcome {
                result: format!(
                    "conversation {id} had already ended ({}): nothing was cancelled",
                    self.conversation(id)?.state.as_str()
                ),
                changed: Self::turn_changes(id, None),
                ..Default::default()
            }),
            None => Err(HostError::TimedOut(format!(
                "conversation {id}: the agent was sent SIGTERM and SIGKILL but its turn has \
                 not ended after {} s",
                CANCEL_WAIT.as_secs()
            ))),
        }
    }

    fn transcript_text(&self, id: i64) -> HostResult<String> {
        let c = self.conversation(id)?;
        let mut out = format!("{}\n", self.conversation_description(&c));
        for m in self.store.messages(id)? {
            out.push_str(&format!(
                "\n--- {} · {} · {} UTC ---\n",
                m.n, m.role, m.created
            ));
            out.push_str(&m.content);
            if !m.content.ends_with('\n') {
                out.push('\n');
            }
        }
        Ok(out)
    }
}

impl Drop for AgentHost {
    fn drop(&mut self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
        let turns: Vec<Arc<Turn>> = lock(&self.inner.running).values().cloned().collect();
        for t in &turns {
            t.kill_now();
        }
        let ids: Vec<i64> = turns.iter().map(|t| t.conversation).collect();
        self.inner.store.interrupt(&ids);
    }
}

impl Host for AgentHost {
    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        let mut info = self.inner.info(node)?;
        // Everything under `conversations/` is out of the indexable range. Listings inside
        // it still show their children (`children` marks them listable), but an entry
        // looked up or discovered directly says so itself: the runtime places a discovered
        // entry in the range without looking at ancestors it has not seen yet.
        if let Some(i) = info.as_mut() {
            if !matches!(node, Node::Root) {
                i.indexable = false;
            }
        }
        Ok(info)
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        let node = self.inner.existing(path)?;
        self.inner.list(node)
    }

    /// A message's text; a conversation's transcript (as its `read_body` shows it).
    fn body(&self, path: &[String]) -> HostResult<Option<Body>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        Ok(match node {
            Node::Conversation(id) => match self.inner.store.conversation(id)? {
                Some(c) => Some(
                    Body::bytes(self.inner.transcript_text(id)?).modified(parse_iso(&c.updated)),
                ),
                None => None,
            },
            Node::Message(id, n) => self
                .inner
                .store
                .message(id, n)?
                .map(|m| Body::bytes(m.content).modified(parse_iso(&m.created))),
            _ => None,
        })
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        let at = self.inner.at(self.inner.existing(path)?);
        Ok(OPS
            .specs(&at)
            .into_iter()
            .map(|s| self.inner.bounded(s))
            .collect())
    }

    fn guard(&self, path: &[String], op: &str, args: Option<&Value>) -> HostResult<Guard> {
        let at = self.inner.at(self.inner.existing(path)?);
        OPS.guard(&self.inner, &(), &at, op, args)
    }

    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        let mut at = self.inner.at(self.inner.existing(path)?);
        at.signal = caller.signal.clone();
        OPS.call(&self.inner, &(), &at, op, args)
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        let prefix = self.inner.reference(&[]);
        let Some(rest) = reference.trim().strip_prefix(&prefix) else {
            return Vec::new();
        };
        let segs: Vec<String> = match rest.strip_prefix('/') {
            Some(r) => r.split('/').map(str::to_string).collect(),
            None if rest.is_empty() => Vec::new(),
            None => return Vec::new(),
        };
        match self.inner.existing(&segs) {
            Ok(_) => vec![segs],
            Err(_) => Vec::new(),
        }
    }

    /// `ask`, `reply` and `wait` block on a process: the runtime runs them on a pool thread.
    fn bounded_calls(&self) -> bool {
        false
    }

    /// A working conversation's description follows its agent's progress lines.
    fn cache_ttl(&self) -> Duration {
        Duration::from_secs(1)
    }
}
