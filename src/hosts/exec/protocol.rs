//! The wip host protocol, version 1: JSON-RPC 2.0 messages carrying exactly the `Host`
//! trait. One message per line (newline-delimited UTF-8 JSON). `docs/host-protocol.md` is the
//! specification; these types are its wire shapes. Unknown fields are ignored everywhere, so
//! a host may send more than it is asked for.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::host::{
    CallOutcome, Caller, Child, Condition, Document, EntryInfo, Guard, HostError, OpSpec,
};

/// The protocol's name, sent and expected in `initialize`.
pub const PROTOCOL: &str = "wip-host-protocol";
/// The version this runtime speaks.
pub const VERSION: u32 = 1;

/// Application error codes (JSON-RPC reserves -32768..-32000 for itself; -32000..-32099 are
/// for implementations, which is where these live).
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    /// A guard condition failed at call time; `data` is the guard (EPERM, EACCES for policy).
    pub const BLOCKED: i64 = -32001;
    /// A policy forbids it (EACCES).
    pub const FORBIDDEN: i64 = -32002;
    /// No such entry or operation (ENOENT).
    pub const NOT_FOUND: i64 = -32003;
    /// The host's backend failed (EIO).
    pub const BACKEND: i64 = -32004;
    /// The host's backend did not answer in time (ETIMEDOUT).
    pub const TIMED_OUT: i64 = -32005;
    /// A name is longer than a file name may be (ENAMETOOLONG).
    pub const NAME_TOO_LONG: i64 = -32006;
    /// The call stopped because the runtime cancelled it (ECANCELED).
    pub const CANCELLED: i64 = -32007;
}

/// A request from the runtime to the host.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Request {
    pub jsonrpc: String,
    pub id: u64,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

impl Request {
    pub fn new(id: u64, method: &str, params: Value) -> Self {
        Request {
            jsonrpc: "2.0".to_string(),
            id,
            method: method.to_string(),
            params,
        }
    }
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// Anything the host sends: a response to one of our requests, or a message of its own.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    Response {
        id: u64,
        outcome: Result<Value, RpcError>,
    },
    /// A notification (`changed`), or a request from the host (`id` set), which version 1
    /// does not define: the runtime answers those with method-not-found.
    Message {
        method: String,
        params: Value,
        id: Option<Value>,
    },
}

/// Why a line is not a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub enum NotRpc {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("no \"jsonrpc\": \"2.0\"")]
    NoVersion,
    #[error("\"method\" is not a string")]
    MethodNotAString,
    #[error(
        "an error with \"id\": null, which answers no request (the host could not read one?): {0}"
    )]
    AnswersNone(String),
    #[error("a response without a numeric \"id\"")]
    NoId,
    #[error("malformed error object: {0}")]
    MalformedError(#[source] serde_json::Error),
    #[error("a response needs exactly one of \"result\" and \"error\"")]
    NotOneOutcome,
}

impl Incoming {
    /// Parse one line; `Err` holds why it is not a JSON-RPC message.
    pub fn parse(line: &str) -> Result<Incoming, NotRpc> {
        let v: Value = serde_json::from_str(line)?;
        let obj = v.as_object().ok_or(NotRpc::NotAnObject)?;
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(NotRpc::NoVersion);
        }
        if let Some(method) = obj.get("method") {
            let method = method.as_str().ok_or(NotRpc::MethodNotAString)?;
            return Ok(Incoming::Message {
                method: method.to_string(),
                params: obj.get("params").cloned().unwrap_or(Value::Null),
                id: obj.get("id").cloned(),
            });
        }
        if let (Some(Value::Null), Some(e)) = (obj.get("id"), obj.get("error")) {
            // JSON-RPC's answer to a request it could not read: it answers none of ours.
            return Err(NotRpc::AnswersNone(one_line_json(e)));
        }
        let id = obj.get("id").and_then(Value::as_u64).ok_or(NotRpc::NoId)?;
        match (obj.get("result"), obj.get("error")) {
            (Some(r), None) => Ok(Incoming::Response {
                id,
                outcome: Ok(r.clone()),
            }),
            (None, Some(e)) => {
                let e: RpcError =
                    serde_json::from_value(e.clone()).map_err(NotRpc::MalformedError)?;
                Ok(Incoming::Response {
                    id,
                    outcome: Err(e),
                })
            }
            _ => Err(NotRpc::NotOneOutcome),
        }
    }
}

/// An error object in a few words: `code -32700: not JSON`.
fn one_line_json(e: &Value) -> String {
    match (e.get("code"), e.get("message").and_then(Value::as_str)) {
        (Some(c), Some(m)) => format!("code {c}: {m}"),
        _ => e.to_string(),
    }
}

/// The runtime's answer to a request from the host (version 1 defines none).
pub fn method_not_found(id: Value, method: &str) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code::METHOD_NOT_FOUND, "message": format!("the runtime offers no method {method:?}")},
    })
}

/// `initialize` params: who is asking and in which version.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct InitializeParams {
    pub protocol: String,
    pub version: u32,
    /// World path where the host is mounted, segments (`["processes"]`).
    pub path: Vec<String>,
    pub identity: WireIdentity,
    /// The runtime's own process, which a host may want to protect (or show).
    pub runtime: RuntimeInfo,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireIdentity {
    pub user: String,
    pub role: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RuntimeInfo {
    pub pid: u32,
    pub uid: u32,
    pub mount_point: String,
}

/// `initialize` result.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct InitializeResult {
    pub protocol: String,
    pub version: u32,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub capabilities: Capabilities,
}

/// What a host offers beyond the required methods.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Capabilities {
    /// It answers `documents` (text for the world's search).
    #[serde(default)]
    pub documents: bool,
    /// It answers `resolve`.
    #[serde(default)]
    pub resolve: bool,
    /// It sends `changed` notifications.
    #[serde(default)]
    pub changes: bool,
    /// It answers `body` (an entry's content as its `body` file).
    #[serde(default)]
    pub body: bool,
    /// How long the kernel may cache what it shows, unless the manifest says otherwise.
    #[serde(default)]
    pub cache_ttl_ms: Option<u64>,
    /// The ops of each kind of entry, declared once: an entry that names its `kind` offers
    /// these, and the runtime never asks `ops` for it. Optional; entries without a kind (or
    /// a kind not declared here) are asked as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<std::collections::BTreeMap<String, Vec<WireOp>>>,
}

/// An entry on the wire.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireEntry {
    pub description: String,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default = "yes")]
    pub indexable: bool,
    /// Seconds since the Unix epoch (fractions allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<f64>,
    /// Which of the kinds declared in `initialize` this entry is (its ops are that kind's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A short human title: with titled names on, the parent lists `NAME TITLE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

fn yes() -> bool {
    true
}

impl WireEntry {
    pub fn into_info(self) -> EntryInfo {
        self.info()
    }

    pub fn info(&self) -> EntryInfo {
        let modified = self
            .modified
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(s));
        EntryInfo {
            description: self.description.clone(),
            reference: self.reference.clone(),
            indexable: self.indexable,
            modified,
            title: self.title.clone().filter(|t| !t.trim().is_empty()),
            partial: false,
        }
    }

    pub fn from_info(info: &EntryInfo) -> Self {
        WireEntry {
            description: info.description.clone(),
            reference: info.reference.clone(),
            indexable: info.indexable,
            modified: info
                .modified
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs_f64()),
            kind: None,
            title: info.title.clone(),
        }
    }
}

/// `body` result (or `null`: the entry has none).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WireBody {
    /// The whole content as UTF-8 text; or
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// the whole content as bytes, in standard base64 (binary content: an image, a
    /// compressed file). Exactly one of the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// When it last changed, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<f64>,
    /// The op that replaces the whole content (writing `body` calls it), when the caller
    /// may run it now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<WireBodyWrite>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WireBodyWrite {
    pub op: String,
    /// The op's string argument that receives the content.
    pub arg: String,
}

/// Why a host's `body` answer is not a body.
#[derive(Debug, thiserror::Error)]
pub enum NotABody {
    #[error("base64 is not standard base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("give exactly one of text and base64")]
    NotOneOf,
}

impl WireBody {
    /// The body, or why the answer cannot be one.
    pub fn into_body(self) -> Result<crate::host::Body, NotABody> {
        use base64::Engine as _;
        let modified = self
            .modified
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(s));
        let (bytes, binary) = match (self.text, self.base64) {
            (Some(t), None) => (t.into_bytes(), false),
            (None, Some(b)) => (
                base64::engine::general_purpose::STANDARD.decode(b.trim())?,
                true,
            ),
            _ => return Err(NotABody::NotOneOf),
        };
        let body = crate::host::Body::bytes(bytes).modified(modified);
        // An op's argument is a string: bytes that are not text cannot be written back.
        Ok(match self.write {
            Some(w) if !binary => body.written_by(&w.op, &w.arg),
            _ => body,
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireChild {
    pub name: String,
    #[serde(flatten)]
    pub entry: WireEntry,
}

impl WireChild {
    pub fn into_child(self) -> Child {
        Child {
            name: self.name,
            info: self.entry.into_info(),
        }
    }
}

/// `children` result: one page and where the next starts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChildrenPage {
    pub children: Vec<WireChild>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireOp {
    pub name: String,
    pub description: String,
    pub schema: Value,
}

impl WireOp {
    /// The op as the runtime serves it. An object schema with `properties` but no
    /// `additionalProperties` is closed by the runtime's validation, so the served schema
    /// says so.
    pub fn into_spec(self) -> OpSpec {
        let mut schema = self.schema;
        if let Some(obj) = schema.as_object_mut() {
            if obj.contains_key("properties") && !obj.contains_key("additionalProperties") {
                obj.insert("additionalProperties".into(), Value::Bool(false));
            }
        }
        OpSpec {
            output: None,
            name: self.name,
            description: self.description,
            schema,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireCondition {
    pub name: String,
    pub ok: bool,
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub policy: bool,
}

/// A guard on the wire (`guard` result, and `data` of a blocked error).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireGuard {
    pub conditions: Vec<WireCondition>,
}

impl WireGuard {
    pub fn into_guard(self) -> Guard {
        Guard::new(
            self.conditions
                .into_iter()
                .map(|c| Condition {
                    name: c.name,
                    ok: c.ok,
                    detail: c.detail,
                    policy: c.policy,
                })
                .collect(),
        )
    }

    pub fn from_guard(g: &Guard) -> Self {
        WireGuard {
            conditions: g
                .conditions
                .iter()
                .map(|c| WireCondition {
                    name: c.name.clone(),
                    ok: c.ok,
                    detail: c.detail.clone(),
                    policy: c.policy,
                })
                .collect(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireCaller {
    pub pid: u32,
    pub uid: u32,
    pub session: u32,
    pub command: String,
}

impl WireCaller {
    pub fn of(c: &Caller) -> Self {
        WireCaller {
            pid: c.pid,
            uid: c.uid,
            session: c.session,
            command: c.command.clone(),
        }
    }
}

/// `call` result.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WireOutcome {
    pub result: String,
    #[serde(default)]
    pub discovered: Vec<Vec<String>>,
    #[serde(default)]
    pub changed: Vec<Vec<String>>,
    #[serde(default)]
    pub found_elsewhere: Vec<String>,
}

impl WireOutcome {
    pub fn into_outcome(self) -> CallOutcome {
        CallOutcome {
            result: self.result,
            discovered: self.discovered,
            changed: self.changed,
            found_elsewhere: self.found_elsewhere,
            content: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WireDocument {
    pub path: Vec<String>,
    pub title: String,
    pub text: String,
    pub version: String,
}

/// `documents` result.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DocumentsPage {
    pub documents: Vec<WireDocument>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl DocumentsPage {
    pub fn into_documents(self) -> (Vec<Document>, Option<String>) {
        (
            self.documents
                .into_iter()
                .map(|d| Document {
                    path: d.path,
                    title: d.title,
                    text: d.text,
                    version: d.version,
                })
                .collect(),
            self.next_cursor,
        )
    }
}

/// `resolve` result.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ResolveResult {
    pub paths: Vec<Vec<String>>,
}

/// `changed` notification params.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChangedParams {
    pub paths: Vec<Vec<String>>,
}

/// The host error a JSON-RPC error object stands for (the table in docs/host-protocol.md).
pub fn host_error(host: &str, method: &str, e: RpcError) -> HostError {
    let words = e.message;
    match e.code {
        code::INVALID_PARAMS => HostError::InvalidArgs(words),
        code::BLOCKED => match e
            .data
            .and_then(|d| serde_json::from_value::<WireGuard>(d).ok())
            .map(WireGuard::into_guard)
            .filter(|g| !g.allowed())
        {
            Some(guard) => HostError::Blocked(guard),
            // A blocked error must carry the failing guard; without it, still EPERM.
            None => HostError::Blocked(Guard::new(vec![Condition::check("host", false, words)])),
        },
        code::FORBIDDEN => HostError::Forbidden(words),
        code::NOT_FOUND => HostError::NotFound(words),
        code::TIMED_OUT => HostError::TimedOut(words),
        code::NAME_TOO_LONG => HostError::NameTooLong(words),
        code::CANCELLED => HostError::Cancelled(words),
        code::BACKEND => HostError::Backend(words),
        code::METHOD_NOT_FOUND => {
            HostError::Backend(format!("host {host} does not implement {method}: {words}"))
        }
        code::PARSE_ERROR | code::INVALID_REQUEST => HostError::Backend(format!(
            "host {host} could not read the runtime's {method} request (code {}): {words}",
            e.code
        )),
        other => HostError::Backend(format!(
            "host {host} failed {method} (code {other}): {words}"
        )),
    }
}

/// The JSON-RPC error object for a host error (for hosts written in Rust, and tests).
pub fn rpc_error(e: &HostError) -> RpcError {
    let (code, data) = match e {
        HostError::InvalidArgs(_) => (code::INVALID_PARAMS, None),
        HostError::Blocked(g) => (
            code::BLOCKED,
            serde_json::to_value(WireGuard::from_guard(g)).ok(),
        ),
        HostError::Forbidden(_) => (code::FORBIDDEN, None),
        HostError::NotFound(_) => (code::NOT_FOUND, None),
        HostError::Backend(_) | HostError::Failed { .. } => (code::BACKEND, None),
        HostError::TimedOut(_) => (code::TIMED_OUT, None),
        HostError::NameTooLong(_) => (code::NAME_TOO_LONG, None),
        HostError::Cancelled(_) => (code::CANCELLED, None),
    };
    RpcError {
        code,
        message: e.to_string(),
        data,
    }
}
