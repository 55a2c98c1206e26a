//! The mcp host: any MCP server over stdio, through the official Rust SDK (`rmcp`, client
//! side), projected as entries and ops.
//!
//! Tree, host-relative:
//! - the root: the server's name, version, state and counts; every tool is an op of it
//!   (`ops/echo/{description,schema,guard,call,result}`);
//! - `tools/NAME/`: the same tool as an entry, with the op `call`;
//! - `resources/URI/` (the URI with `%` and `/` percent-encoded; ref = the URI), with
//!   `read_body`; URIs a template produces are reachable by path too (not listed);
//! - `templates/NAME/` with `read` (one argument per template variable): reads the resource
//!   the template names and reports its `resources/URI/` entry as discovered;
//! - `prompts/NAME/` with `get` (the prompt's arguments): the rendered messages; a prompt
//!   that needs no argument and that no caller steers (it takes none, or the policy allows
//!   its `get`) also has a `body`: its messages fetched with no arguments.
//!
//! The server starts in the background at mount time (see `client`); until it is ready the
//! root's description says so and every guard fails its `server` condition.

mod client;
mod oversize;
pub mod render;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::cache::TtlCache;
use crate::host::{
    Body, CallOutcome, Caller, Child, Condition, EntryInfo, Guard, Host, HostError, HostResult,
    OpSpec, Readiness,
};
use crate::hosts::HostContext;

use crate::host::text::one_line;
use crate::host::HostDefault;
use client::{phase_words, Catalog, Client, Phase};
use render::{decode_name, encode_name, Hints, Policy, Steered, UriTemplate};

/// The `[[host]]` table of an mcp host, minus `kind` and `path`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// The server's command line, e.g. `["npx", "-y", "@modelcontextprotocol/server-everything"]`.
    pub command: Vec<String>,
    /// Environment variables added to the server's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of the daemon's environment to hand to the command as they are (by
    /// default it gets only PATH, HOME, LANG, LC_*, TERM, TZ, USER, TMPDIR and WIP_*).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Working directory of the server; default: where `wip mount` runs.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Kinds of tools allowed although the server marks them so: `destructive`, `open_world`.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tools allowed by name whatever their annotations.
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// Prompts allowed by name although the server marks tools destructive or open-world
    /// (a prompt runs server code the mount cannot see, so it carries the tools' policy).
    #[serde(default)]
    pub allow_prompts: Vec<String>,
    /// Resource templates whose reads are allowed by name, likewise.
    #[serde(default)]
    pub allow_templates: Vec<String>,
    /// How long one request other than a tool call (a read, a listing, a prompt) may
    /// take. It must be below the world's call_timeout_ms so the words are the server's;
    /// by default it is that timeout less 5 s (at least 1 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// How long one tool call may run before the server is told to cancel it (default an
    /// hour). A call longer than the world's call_timeout_ms goes on as a run its caller
    /// can wait on or cancel.
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// How long the server may take to start and initialize (npx may download first).
    #[serde(default = "default_startup_timeout_ms")]
    pub startup_timeout_ms: u64,
    /// The wait before restarting a server that died; it doubles with each failure in a
    /// row, up to `restart_delay_max_ms`, and starts over after a minute of running.
    #[serde(default = "default_restart_delay_ms")]
    pub restart_delay_ms: u64,
    #[serde(default = "default_restart_delay_max_ms")]
    pub restart_delay_max_ms: u64,
}

fn default_startup_timeout_ms() -> u64 {
    120_000
}

fn default_restart_delay_ms() -> u64 {
    1_000
}

fn default_restart_delay_max_ms() -> u64 {
    60_000
}

/// Warnings for names in the manifest's `allow_tools`, `allow_prompts` and
/// `allow_templates` that the server does not offer (a misspelt name allows nothing).
fn unknown_allowed(settings: &McpSettings, c: &Catalog) -> Vec<String> {
    let tools: Vec<&str> = c.tools.iter().map(|t| t.name.as_ref()).collect();
    let prompts: Vec<&str> = c.prompts.iter().map(|p| p.name.as_str()).collect();
    let templates: Vec<&str> = c.templates.iter().map(|t| t.name.as_str()).collect();
    let mut out = render::unknown_allowed("allow_tools", &settings.allow_tools, &tools);
    out.extend(render::unknown_allowed(
        "allow_prompts",
        &settings.allow_prompts,
        &prompts,
    ));
    out.extend(render::unknown_allowed(
        "allow_templates",
        &settings.allow_templates,
        &templates,
    ));
    out
}

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("command must name a program: command = [\"npx\", \"-y\", \"@modelcontextprotocol/server-everything\"]")]
    NoCommand,
    #[error("unknown allow = [{0:?}]: use \"destructive\" and/or \"open_world\"")]
    UnknownAllow(String),
    #[error(
        "timeout_ms ({timeout}) must be below the world's call_timeout_ms ({world}), or a \
         slow tool would end in the runtime's timeout instead of the server's words"
    )]
    AboveCallTimeout { timeout: u64, world: u64 },
    #[error("timeout_ms, call_timeout_ms and startup_timeout_ms must be at least 1")]
    Timeout,
    #[error(
        "restart_delay_ms ({first}) must be at least 1 and at most restart_delay_max_ms ({max})"
    )]
    RestartDelay { first: u64, max: u64 },
    #[error("cannot start the runtime for the server: {0}")]
    Runtime(std::io::Error),
}

/// An entry of the tree, parsed from a host-relative path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Root,
    Tools,
    Tool(String),
    Resources,
    Resource(String),
    Templates,
    Template(String),
    Prompts,
    Prompt(String),
}

impl Node {
    fn parse(path: &[String]) -> Option<Node> {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        Some(match p.as_slice() {
            [] => Node::Root,
            ["tools"] => Node::Tools,
            ["tools", n] => Node::Tool(decode_name(n)?),
            ["resources"] => Node::Resources,
            ["resources", n] => Node::Resource(decode_name(n)?),
            ["templates"] => Node::Templates,
            ["templates", n] => Node::Template(decode_name(n)?),
            ["prompts"] => Node::Prompts,
            ["prompts", n] => Node::Prompt(decode_name(n)?),
            _ => return None,
        })
    }
}

/// What a resource's description says of its `body` file (it is given whole: bounded).
fn body_bound() -> String {
    format!(
        " (its body file shows at most {} MiB of it)",
        crate::host::MAX_WHOLE_BODY >> 20
    )
}

/// The mcp host.
pub struct McpHost {
    client: Client,
    policy: Policy,
    /// World path of the mount, for refs (`mcp:mcp/everything/tools/echo`).
    mount: String,
    command_line: String,
    /// Resource URIs read through a template this mount, reachable by path.
    seen_uris: Mutex<HashSet<String>>,
    /// Resource contents read as bodies, kept briefly: a `stat` then `cat` asks once.
    bodies: TtlCache<String, Arc<[u8]>>,
    /// Prompts' texts read as bodies, by prompt name, kept the same way.
    prompt_bodies: TtlCache<String, Arc<[u8]>>,
    /// How long one tool call may run (`call_timeout_ms`).
    call_limit: Duration,
}

/// How long a tool call may run by default before the server is told to cancel it.
const DEFAULT_CALL_LIMIT_MS: u64 = 3_600_000;

impl McpHost {
    pub fn open(settings: McpSettings, ctx: &HostContext) -> Result<Self, McpError> {
        let mount = ctx.mount.as_str();
        if settings.command.first().is_none_or(|c| c.is_empty()) {
            return Err(McpError::NoCommand);
        }
        let mut policy = Policy {
            mount: mount.to_string(),
            tools: settings.allow_tools.clone(),
            prompts: settings.allow_prompts.clone(),
            templates: settings.allow_templates.clone(),
            ..Policy::default()
        };
        for a in &settings.allow {
            match a.as_str() {
                "destructive" => policy.destructive = true,
                "open_world" => policy.open_world = true,
                other => return Err(McpError::UnknownAllow(other.to_string())),
            }
        }
        if settings.timeout_ms == Some(0)
            || settings.call_timeout_ms == Some(0)
            || settings.startup_timeout_ms == 0
        {
            return Err(McpError::Timeout);
        }
        if settings.restart_delay_ms == 0
            || settings.restart_delay_ms > settings.restart_delay_max_ms
        {
            return Err(McpError::RestartDelay {
                first: settings.restart_delay_ms,
                max: settings.restart_delay_max_ms,
            });
        }
        let timeout_ms = ctx
            .wait_within_call(settings.timeout_ms)
            .map_err(|(timeout, world)| McpError::AboveCallTimeout { timeout, world })?;
        let mut settings = settings;
        if settings.cwd.is_none() {
            settings.cwd = Some(ctx.launch_dir.clone());
        } else if let Some(dir) = settings.cwd.as_mut().filter(|d| d.is_relative()) {
            *dir = ctx.launch_dir.join(&*dir);
        }
        let command_line = settings.command.join(" ");
        let call_limit =
            Duration::from_millis(settings.call_timeout_ms.unwrap_or(DEFAULT_CALL_LIMIT_MS));
        let client = Client::start(
            Arc::new(settings),
            Duration::from_millis(timeout_ms),
            ctx.changes.clone(),
        )
        .map_err(McpError::Runtime)?;
        Ok(McpHost {
            client,
            policy,
            mount: mount.to_string(),
            command_line,
            seen_uris: Mutex::new(HashSet::new()),
            bodies: TtlCache::new(Duration::from_secs(1), 256),
            prompt_bodies: TtlCache::new(Duration::from_secs(1), 256),
            call_limit,
        })
    }

    fn catalog(&self) -> (Arc<Catalog>, Phase) {
        let st = self.client.shared.lock();
        (Arc::clone(&st.catalog), st.phase.clone())
    }

    fn reference(&self, rest: &str) -> String {
        if rest.is_empty() {
            format!("mcp:{}", self.mount)
        } else {
            format!("mcp:{}/{rest}", self.mount)
        }
    }

    fn root_description(&self, c: &Catalog, phase: &Phase) -> String {
        let who = match &c.server {
            Some(s) => {
                let mut w = format!(
                    "MCP server {} {} (protocol {})",
                    s.name, s.version, s.protocol
                );
                if let Some(t) = &s.title {
                    w.push_str(&format!(" ({t})"));
                }
                w
            }
            None => format!("MCP server `{}`", self.command_line),
        };
        let state = match phase {
            Phase::Ready => "ready".to_string(),
            other => phase_words(other),
        };
        let mut d = format!(
            "{who} · {state} · {} tools (ops here), {} resources{}, {} templates, {} prompts",
            c.tools.len(),
            c.resources.len(),
            if c.resources_truncated {
                " (listing stopped there)"
            } else {
                ""
            },
            c.templates.len(),
            c.prompts.len()
        );
        for w in c.list_warnings.iter().chain(&c.unknown_allowed) {
            d.push_str(&format!(" · warning: {}", one_line(w, 300)));
        }
        if let Some(i) = c.server.as_ref().and_then(|s| s.instructions.as_deref()) {
            d.push_str(&format!(" · instructions: {}", one_line(i, 200)));
        }
        d
    }

    fn tool_description(tool: &rmcp::model::Tool) -> String {
        let ann = tool
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok());
        let hints = Hints::from_annotations(ann.as_ref());
        let text = tool.description.as_deref().unwrap_or("(no description)");
        format!("{} [{}]", one_line(text, 400), hints.words())
    }

    fn tool_op(tool: &rmcp::model::Tool, name: &str) -> OpSpec {
        OpSpec {
            output: tool
                .output_schema
                .as_ref()
                .map(|o| Value::Object(o.as_ref().clone())),
            name: name.to_string(),
            description: Self::tool_description(tool),
            schema: render::op_schema(&tool.input_schema),
        }
    }

    fn resource_info(&self, c: &Catalog, uri: &str) -> Option<EntryInfo> {
        if let Some(r) = c.resources.iter().find(|r| r.uri == uri) {
            let mut d = format!("resource {}", r.title.as_deref().unwrap_or(&r.name));
            if let Some(m) = &r.mime_type {
                d.push_str(&format!(" · {m}"));
            }
            if let Some(s) = r.size {
                d.push_str(&format!(" · {s} bytes"));
            }
            if let Some(desc) = &r.description {
                d.push_str(&format!(" · {}", one_line(desc, 200)));
            }
            d.push_str(&format!(" · read it with ops/read_body{}", body_bound()));
            let title = r.title.as_deref().unwrap_or(&r.name).to_string();
            return Some(EntryInfo::new(d, uri).titled(title));
        }
        let template = c
            .templates
            .iter()
            .find(|t| UriTemplate::parse(&t.uri_template).is_some_and(|u| u.matches(uri)));
        let seen = crate::hosts::lock(&self.seen_uris).contains(uri);
        if template.is_none() && !seen {
            return None;
        }
        let from = template
            .map(|t| format!(" (from template {})", t.name))
            .unwrap_or_default();
        let mut info = EntryInfo::new(
            format!(
                "resource {uri}{from} · read it with ops/read_body{}",
                body_bound()
            ),
            uri,
        );
        info.indexable = false;
        Some(info)
    }

    fn server_condition(phase: &Phase) -> Condition {
        match phase {
            Phase::Ready => Condition::check("server", true, "the server is running"),
            other => Condition::check(
                "server",
                false,
                format!(
                    "the server is not running ({}); wait and read this guard again",
                    phase_words(other)
                ),
            ),
        }
    }

    /// Each tool's name and the hints its annotations state.
    fn tool_hints(c: &Catalog) -> Vec<(String, Hints)> {
        c.tools
            .iter()
            .map(|t| {
                let ann = t
                    .annotations
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok());
                (t.name.to_string(), Hints::from_annotations(ann.as_ref()))
            })
            .collect()
    }

    /// The guard of `op` on `node`: whether the server can take it now. Its policy (the
    /// annotation allow lists) is the host's default for the world's `[[policy]]`
    /// (`policy_default`): the runtime applies it, and a manifest rule overrides it.
    fn op_guard(&self, c: &Catalog, phase: &Phase, node: &Node, op: &str) -> HostResult<Guard> {
        // Also the check that the tool exists.
        self.op_policy(c, node, op)?;
        Ok(Guard::new(vec![Self::server_condition(phase)]))
    }

    /// The policy condition of `op` on `node`, for ops the annotations concern.
    fn op_policy(&self, c: &Catalog, node: &Node, op: &str) -> HostResult<Option<Condition>> {
        let steered = |kind: Steered, name: Option<&str>| {
            Ok(Some(self.policy.steered_condition(
                kind,
                name,
                &Self::tool_hints(c),
            )))
        };
        match node {
            Node::Root => self.tool_policy(c, &Self::tool_name(op)?).map(Some),
            Node::Tool(n) if op == "call" => self.tool_policy(c, n).map(Some),
            Node::Prompt(n) if op == "get" => steered(Steered::Prompt, Some(n)),
            Node::Template(n) if op == "read" => steered(Steered::Template, Some(n)),
            // A resource the server listed is data it offers, read by a URI it chose: no
            // caller steers the work. One reached through a template is the template's read.
            Node::Resource(uri)
                if op == "read_body" && !c.resources.iter().any(|r| &r.uri == uri) =>
            {
                let template = c
                    .templates
                    .iter()
                    .find(|t| UriTemplate::parse(&t.uri_template).is_some_and(|u| u.matches(uri)));
                steered(Steered::Template, template.map(|t| t.name.as_str()))
            }
            _ => Ok(None),
        }
    }

    /// Refuse a call whose guard fails, with the guard (the runtime may not have asked).
    fn check_guard(&self, c: &Catalog, phase: &Phase, node: &Node, op: &str) -> HostResult<()> {
        let guard = self.op_guard(c, phase, node, op)?;
        if guard.allowed() {
            Ok(())
        } else {
            Err(HostError::Blocked(guard))
        }
    }

    fn tool_policy(&self, c: &Catalog, name: &str) -> HostResult<Condition> {
        let tool = c
            .tools
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| HostError::NotFound(format!("no tool {name:?}")))?;
        let ann = tool
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok());
        let hints = Hints::from_annotations(ann.as_ref());
        Ok(self.policy.condition(name, &hints))
    }

    fn call_tool(
        &self,
        name: &str,
        args: &Value,
        run: &crate::host::RunSignal,
    ) -> HostResult<CallOutcome> {
        let (c, phase) = self.catalog();
        self.check_guard(&c, &phase, &Node::Tool(name.to_string()), "call")?;
        let Some(tool) = c.tools.iter().find(|t| t.name == name) else {
            return Err(HostError::NotFound(format!("no tool {name:?}")));
        };
        let spec = Self::tool_op(tool, name);
        let args = spec.check_args(args)?;
        let what = format!("tool {name}");
        let as_task = crate::hosts::lock(&self.client.shared.capture.task_tools).contains_key(name);
        let value = if as_task {
            self.client
                .call_task(&what, name, args, run, self.call_limit)?
        } else {
            let mut params = CallToolRequestParams::new(name.to_string());
            params.arguments = Some(args);
            let result = self.client.call_tool(&what, params, run, self.call_limit)?;
            serde_json::to_value(&result).unwrap_or(Value::Null)
        };
        let mut found = render::Found::default();
        let text = render::tool_result_text(&value, &mut found);
        if value.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(HostError::Backend(format!(
                "tool error: {}",
                text.trim_end()
            )));
        }
        let mut outcome = self.with_uris(CallOutcome::text(text), &found.uris);
        outcome.content = found.parts;
        Ok(outcome)
    }

    /// Report the resources a result names as discovered, when they have an entry.
    fn with_uris(&self, mut outcome: CallOutcome, uris: &[String]) -> CallOutcome {
        let (c, _) = self.catalog();
        for u in uris {
            let path = vec!["resources".to_string(), encode_name(u)];
            if self.resource_info(&c, u).is_some() && !outcome.discovered.contains(&path) {
                outcome.discovered.push(path);
            }
        }
        outcome
    }

    /// A resource's contents as bytes: text as it is, blobs decoded from base64, parts in
    /// the server's order.
    fn resource_bytes(&self, uri: &str) -> HostResult<Arc<[u8]>> {
        use base64::Engine as _;
        self.bodies.get_or_try(uri.to_string(), || {
            let value = self.resource_contents(uri)?;
            let mut out = Vec::new();
            for c in value
                .get("contents")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(t) = c.get("text").and_then(Value::as_str) {
                    out.extend_from_slice(t.as_bytes());
                } else if let Some(b) = c.get("blob").and_then(Value::as_str) {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(b.trim())
                        .map_err(|e| {
                            HostError::failed(
                                format!("protocol error: the blob of {uri} is not base64"),
                                e,
                            )
                        })?;
                    out.extend_from_slice(&bytes);
                }
            }
            Ok(Arc::from(out))
        })
    }

    /// The server's answer to `resources/read`, as JSON.
    fn resource_contents(&self, uri: &str) -> HostResult<Value> {
        let peer = self.client.peer()?;
        let what = format!("resources/read {uri}");
        let result = self
            .client
            .request(&what, self.client.call_timeout(), async {
                peer.read_resource(ReadResourceRequestParams::new(uri.to_string()))
                    .await
            })?;
        Ok(serde_json::to_value(&result).unwrap_or(Value::Null))
    }

    fn read_resource(&self, uri: &str) -> HostResult<String> {
        let value = self.resource_contents(uri)?;
        let parts: Vec<String> = value
            .get("contents")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(render::resource_contents_text).collect())
            .unwrap_or_default();
        Ok(parts.join("\n"))
    }

    fn template_of(&self, c: &Catalog, name: &str) -> HostResult<UriTemplate> {
        let t = c
            .templates
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| HostError::NotFound(format!("no resource template {name:?}")))?;
        UriTemplate::parse(&t.uri_template).ok_or_else(|| {
            HostError::Backend(format!(
                "protocol error: the server's URI template {:?} does not parse",
                t.uri_template
            ))
        })
    }

    fn prompt_op(p: &rmcp::model::Prompt) -> OpSpec {
        let args: Vec<(String, Option<String>, bool)> = p
            .arguments
            .iter()
            .flatten()
            .map(|a| {
                (
                    a.name.clone(),
                    a.description.clone(),
                    a.required == Some(true),
                )
            })
            .collect();
        let names: Vec<&str> = args.iter().map(|(n, _, _)| n.as_str()).collect();
        OpSpec {
            output: None,
            name: "get".into(),
            description: format!(
                "render the prompt's messages ({})",
                if names.is_empty() {
                    "no arguments".to_string()
                } else {
                    format!("arguments: {}", names.join(", "))
                }
            ),
            schema: render::prompt_schema(&args),
        }
    }

    /// Whether a prompt has a `body`: no argument is required, and no caller steers it
    /// (it takes none, or the policy allows its `get`). A prompt runs server code, which
    /// reading a file must not start where the policy keeps `get` from it.
    fn prompt_has_body(&self, c: &Catalog, p: &rmcp::model::Prompt) -> bool {
        let args = p.arguments.as_deref().unwrap_or_default();
        if args.iter().any(|a| a.required == Some(true)) {
            return false;
        }
        args.is_empty()
            || self
                .op_policy(c, &Node::Prompt(p.name.clone()), "get")
                .is_ok_and(|cond| cond.is_none_or(|cond| cond.ok))
    }

    /// The server's answer to `prompts/get` with `args`, as JSON.
    fn get_prompt(&self, name: &str, args: Map<String, Value>) -> HostResult<Value> {
        let peer = self.client.peer()?;
        let mut params = GetPromptRequestParams::new(name.to_string());
        if !args.is_empty() {
            params.arguments = Some(args);
        }
        let what = format!("prompts/get {name}");
        let result = self
            .client
            .request(&what, self.client.call_timeout(), async {
                peer.get_prompt(params).await
            })?;
        Ok(serde_json::to_value(&result).unwrap_or(Value::Null))
    }

    /// The tool an op of the root stands for (op names are tool names, encoded as segments).
    fn tool_name(op: &str) -> HostResult<String> {
        decode_name(op).ok_or_else(|| HostError::NotFound(format!("no tool {op:?}")))
    }

    fn not_found(path: &[String]) -> HostError {
        HostError::NotFound(format!("no entry {}", path.join("/")))
    }
}

impl Host for McpHost {
    /// A resource's contents (blobs decoded), when its guard lets you read it; a prompt's
    /// messages fetched with no arguments, when it has a body (`prompt_has_body`).
    fn body(&self, path: &[String]) -> HostResult<Option<Body>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        let (c, phase) = self.catalog();
        if let Node::Prompt(n) = &node {
            if !c
                .prompts
                .iter()
                .any(|p| &p.name == n && self.prompt_has_body(&c, p))
                || self.check_guard(&c, &phase, &node, "get").is_err()
            {
                return Ok(None);
            }
            let text = self.prompt_bodies.get_or_try(n.clone(), || {
                let value = self.get_prompt(n, Map::new())?;
                Ok(Arc::from(render::prompt_body(&value).into_bytes()))
            })?;
            return Ok(Some(Body::bytes(text.to_vec())));
        }
        let Node::Resource(uri) = &node else {
            return Ok(None);
        };
        if self.resource_info(&c, uri).is_none()
            || self.check_guard(&c, &phase, &node, "read_body").is_err()
        {
            return Ok(None);
        }
        Ok(Some(Body::bytes(self.resource_bytes(uri)?.to_vec())))
    }

    fn entry(&self, path: &[String]) -> HostResult<Option<EntryInfo>> {
        let Some(node) = Node::parse(path) else {
            return Ok(None);
        };
        let (c, phase) = self.catalog();
        let server = c
            .server
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_else(|| "the server".into());
        Ok(match node {
            Node::Root => Some(EntryInfo::new(
                self.root_description(&c, &phase),
                self.reference(""),
            )),
            Node::Tools => Some(EntryInfo::new(
                format!(
                    "{} tools of {server}; each is also an op of the host root (ops/NAME)",
                    c.tools.len()
                ),
                self.reference("tools"),
            )),
            Node::Tool(n) => c.tools.iter().find(|t| t.name == n).map(|t| {
                EntryInfo::new(
                    format!("tool {n}: {} · run it with ops/call", Self::tool_description(t)),
                    self.reference(&format!("tools/{}", encode_name(&n))),
                )
            }),
            Node::Resources => Some(EntryInfo::new(
                format!(
                    "{} resources of {server}{}; names are URIs with % and / percent-encoded (%25, %2F); ref is the URI",
                    c.resources.len(),
                    if c.resources_truncated { " (listing stopped there)" } else { "" }
                ),
                self.reference("resources"),
            )),
            Node::Resource(uri) => self.resource_info(&c, &uri),
            Node::Templates => Some(EntryInfo::new(
                format!(
                    "{} resource templates of {server}; ops/read of one reads the resource its variables name",
                    c.templates.len()
                ),
                self.reference("templates"),
            )),
            Node::Template(n) => c.templates.iter().find(|t| t.name == n).map(|t| {
                let mut d = format!("resource template {} · {}", n, t.uri_template);
                if let Some(desc) = &t.description {
                    d.push_str(&format!(" · {}", one_line(desc, 200)));
                }
                d.push_str(" · ops/read reads one");
                EntryInfo::new(d, self.reference(&format!("templates/{}", encode_name(&n))))
            }),
            Node::Prompts => Some(EntryInfo::new(
                format!(
                    "{} prompts of {server}; ops/get of one renders its messages",
                    c.prompts.len()
                ),
                self.reference("prompts"),
            )),
            Node::Prompt(n) => c.prompts.iter().find(|p| p.name == n).map(|p| {
                let mut d = format!("prompt {}", p.title.as_deref().unwrap_or(&n));
                if let Some(desc) = &p.description {
                    d.push_str(&format!(" · {}", one_line(desc, 200)));
                }
                d.push_str(if self.prompt_has_body(&c, p) {
                    " · body: its messages without arguments; ops/get renders it"
                } else if p.arguments.iter().flatten().any(|a| a.required == Some(true)) {
                    " · no body (it needs arguments): ops/get renders it"
                } else {
                    " · no body (this host's policy does not allow its get): ops/get renders it"
                });
                EntryInfo::new(d, self.reference(&format!("prompts/{}", encode_name(&n))))
            }),
        })
    }

    fn children(&self, path: &[String]) -> HostResult<Vec<Child>> {
        let Some(node) = Node::parse(path) else {
            return Err(Self::not_found(path));
        };
        let mut out = Vec::new();
        let mut push = |seg: Vec<String>| {
            let full: Vec<String> = path.iter().cloned().chain(seg.iter().cloned()).collect();
            if let Ok(Some(info)) = self.entry(&full) {
                if let Some(name) = seg.last() {
                    out.push(Child {
                        name: name.clone(),
                        info,
                    });
                }
            }
        };
        let (c, _) = self.catalog();
        match node {
            Node::Root => {
                for s in ["tools", "resources", "templates", "prompts"] {
                    push(vec![s.to_string()]);
                }
            }
            Node::Tools => c
                .tools
                .iter()
                .for_each(|t| push(vec![encode_name(&t.name)])),
            Node::Resources => c
                .resources
                .iter()
                .for_each(|r| push(vec![encode_name(&r.uri)])),
            Node::Templates => c
                .templates
                .iter()
                .for_each(|t| push(vec![encode_name(&t.name)])),
            Node::Prompts => c
                .prompts
                .iter()
                .for_each(|p| push(vec![encode_name(&p.name)])),
            _ => {}
        }
        Ok(out)
    }

    fn ops(&self, path: &[String]) -> HostResult<Vec<OpSpec>> {
        let node = Node::parse(path).ok_or_else(|| Self::not_found(path))?;
        let (c, _) = self.catalog();
        Ok(match node {
            Node::Root => c
                .tools
                .iter()
                .map(|t| Self::tool_op(t, &encode_name(&t.name)))
                .collect(),
            Node::Tool(n) => c
                .tools
                .iter()
                .find(|t| t.name == n)
                .map(|t| vec![Self::tool_op(t, "call")])
                .unwrap_or_default(),
            Node::Resource(_) => vec![OpSpec {
                output: None,
                name: "read_body".into(),
                description: "read the resource: text as is, binary as a summary line and base64"
                    .into(),
                schema: serde_json::json!({"type":"object","properties":{},"additionalProperties":false}),
            }],
            Node::Template(n) => match self.template_of(&c, &n) {
                Ok(t) => vec![OpSpec {
                    output: None,
                    name: "read".into(),
                    description: format!(
                        "read the resource the variables name ({}); its entry is printed",
                        t.variables()
                            .iter()
                            .map(|(v, _)| v.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    schema: t.schema(),
                }],
                Err(_) => Vec::new(),
            },
            Node::Prompt(n) => c
                .prompts
                .iter()
                .find(|p| p.name == n)
                .map(|p| vec![Self::prompt_op(p)])
                .unwrap_or_default(),
            _ => Vec::new(),
        })
    }

    fn guard(&self, path: &[String], op: &str, _args: Option<&Value>) -> HostResult<Guard> {
        let node = Node::parse(path).ok_or_else(|| Self::not_found(path))?;
        let (c, phase) = self.catalog();
        self.op_guard(&c, &phase, &node, op)
    }

    /// The annotation allow lists, as the default a `[[policy]]` rule overrides.
    fn policy_default(&self, path: &[String], op: &str) -> Option<HostDefault> {
        let node = Node::parse(path)?;
        let (c, _) = self.catalog();
        let cond = self.op_policy(&c, &node, op).ok()??;
        let words = if cond.ok {
            cond.detail
        } else {
            format!(
                "{}; or a [[policy]] rule for this op (action = \"allow\" or \"approve\")",
                cond.detail
            )
        };
        Some(HostDefault {
            allowed: cond.ok,
            words,
        })
    }

    fn call(
        &self,
        path: &[String],
        op: &str,
        args: &Value,
        caller: &Caller,
    ) -> HostResult<CallOutcome> {
        let node = Node::parse(path).ok_or_else(|| Self::not_found(path))?;
        let no_op = || HostError::NotFound(format!("no op {op} on {}", path.join("/")));
        match node {
            Node::Root => self.call_tool(&Self::tool_name(op)?, args, &caller.signal),
            Node::Tool(n) if op == "call" => self.call_tool(&n, args, &caller.signal),
            Node::Resource(ref uri) if op == "read_body" => {
                let (c, phase) = self.catalog();
                if self.resource_info(&c, uri).is_none() {
                    return Err(Self::not_found(path));
                }
                self.check_guard(&c, &phase, &node, op)?;
                Ok(CallOutcome::text(self.read_resource(uri)?))
            }
            Node::Template(ref n) if op == "read" => {
                let (c, phase) = self.catalog();
                let t = self.template_of(&c, n)?;
                let spec = OpSpec {
                    output: None,
                    name: "read".into(),
                    description: String::new(),
                    schema: t.schema(),
                };
                let args: Map<String, Value> = spec.check_args(args)?;
                self.check_guard(&c, &phase, &node, op)?;
                let uri = t.expand(&args);
                let text = self.read_resource(&uri)?;
                crate::hosts::lock(&self.seen_uris).insert(uri.clone());
                Ok(CallOutcome::text(format!("{uri}\n{text}"))
                    .discovered(vec!["resources".into(), encode_name(&uri)]))
            }
            Node::Prompt(ref n) if op == "get" => {
                let (c, phase) = self.catalog();
                let p = c
                    .prompts
                    .iter()
                    .find(|p| &p.name == n)
                    .ok_or_else(|| Self::not_found(path))?;
                let args = Self::prompt_op(p).check_args(args)?;
                self.check_guard(&c, &phase, &node, op)?;
                let value = self.get_prompt(n, args)?;
                let mut found = render::Found::default();
                let text = render::prompt_text(&value, &mut found);
                let mut outcome = self.with_uris(CallOutcome::text(text), &found.uris);
                outcome.content = found.parts;
                Ok(outcome)
            }
            _ => Err(no_op()),
        }
    }

    fn resolve(&self, reference: &str) -> Vec<Vec<String>> {
        let (c, _) = self.catalog();
        if let Some(rest) = reference.strip_prefix(&format!("mcp:{}", self.mount)) {
            let segs: Vec<String> = rest
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            return match self.entry(&segs) {
                Ok(Some(_)) => vec![segs],
                _ => Vec::new(),
            };
        }
        if self.resource_info(&c, reference).is_some() {
            return vec![vec!["resources".into(), encode_name(reference)]];
        }
        Vec::new()
    }

    fn bounded_calls(&self) -> bool {
        false
    }

    // `call` runs `check_guard` first and answers Blocked.
    fn checks_guard_in_call(&self) -> bool {
        true
    }

    /// The server's lists change on their own; the runtime is told of each change, but the
    /// set of ops of an entry is not among what it invalidates: keep the kernel's copies short.
    fn cache_ttl(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn readiness(&self) -> Readiness {
        let phase = self.client.shared.lock().phase.clone();
        match phase {
            Phase::Ready => Readiness::Ready,
            Phase::Starting { .. } => Readiness::Starting(phase_words(&phase)),
            other => Readiness::Down(phase_words(&other)),
        }
    }
}
