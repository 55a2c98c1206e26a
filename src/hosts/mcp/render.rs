//! Pure translations between MCP and the tree: names, annotations, schemas, content, URI
//! templates. Nothing here talks to a server.

use serde_json::{json, Map, Value};

use crate::host::{Condition, ContentPart, CONTENT_PARTS_KEPT};

/// A name (a tool's, a prompt's, a resource URI) as one path segment: `%` and `/` (and NUL)
/// percent-encoded, everything else kept, so the mapping is reversible.
pub fn encode_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            '\0' => out.push_str("%00"),
            c => out.push(c),
        }
    }
    out
}

/// The name a segment stands for; only the canonical spelling (`encode_name`'s) decodes,
/// so a name has exactly one path.
pub fn decode_name(segment: &str) -> Option<String> {
    let mut out = String::with_capacity(segment.len());
    let mut rest = segment;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3)?;
        out.push(match code {
            "25" => '%',
            "2F" => '/',
            "00" => '\0',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    (!out.is_empty() && encode_name(&out) == segment).then_some(out)
}

/// The hints a server gives about a tool (all optional: only what it states counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

impl Hints {
    pub fn from_annotations(a: Option<&Value>) -> Hints {
        let get = |k: &str| a.and_then(|a| a.get(k)).and_then(Value::as_bool);
        Hints {
            read_only: get("readOnlyHint"),
            destructive: get("destructiveHint"),
            idempotent: get("idempotentHint"),
            open_world: get("openWorldHint"),
        }
    }

    /// The hints in words, e.g. `read-only, idempotent, closed-world`.
    pub fn words(&self) -> String {
        let mut w = Vec::new();
        match self.read_only {
            Some(true) => w.push("read-only"),
            Some(false) => w.push("writes"),
            None => {}
        }
        match self.destructive {
            Some(true) => w.push("destructive"),
            Some(false) => w.push("not destructive"),
            None => {}
        }
        match self.idempotent {
            Some(true) => w.push("idempotent"),
            Some(false) => w.push("not idempotent"),
            None => {}
        }
        match self.open_world {
            Some(true) => w.push("open-world (reaches beyond the server)"),
            Some(false) => w.push("closed-world"),
            None => {}
        }
        if w.is_empty() {
            "no annotations".to_string()
        } else {
            w.join(", ")
        }
    }
}

/// What the manifest allows of tools the server marks destructive or open-world, and of
/// the prompts and template reads that run the same server's code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    pub destructive: bool,
    pub open_world: bool,
    /// Tools allowed by name whatever their hints.
    pub tools: Vec<String>,
    /// Prompts allowed by name whatever the server's tools are.
    pub prompts: Vec<String>,
    /// Resource templates allowed by name whatever the server's tools are.
    pub templates: Vec<String>,
    /// Where the host is mounted, for the words of a failing condition.
    pub mount: String,
}

/// What a prompt's `get` or a template's `read` is, for the words of its policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steered {
    Prompt,
    Template,
}

impl Steered {
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Steered::Prompt => ("prompt", "allow_prompts"),
            Steered::Template => ("resource template", "allow_templates"),
        }
    }
}

/// A tool may be destructive unless the server says it is read-only or not destructive:
/// the MCP specification's defaults for a hint left out are `readOnlyHint: false`,
/// `destructiveHint: true` (meaningful only when not read-only).
fn is_destructive(h: &Hints) -> bool {
    h.read_only != Some(true) && h.destructive != Some(false)
}

/// A tool may reach beyond the server unless the server says it does not (the default of
/// `openWorldHint` is `true`).
fn is_open_world(h: &Hints) -> bool {
    h.open_world != Some(false)
}

impl Policy {
    /// The `policy` condition of a tool: one that is destructive or open-world, as the
    /// server says or as the specification's defaults say of a hint it left out, fails it
    /// (EACCES) unless the manifest allows that.
    pub fn condition(&self, tool: &str, hints: &Hints) -> Condition {
        let destructive = is_destructive(hints);
        let open_world = is_open_world(hints);
        if !destructive && !open_world {
            return Condition::policy(
                "policy",
                true,
                "the server marks it neither destructive nor open-world",
            );
        }
        let what = match (destructive, open_world) {
            (true, true) => "destructive and open-world",
            (true, false) => "destructive",
            _ => "open-world",
        };
        // Said by the server, or only by the specification's defaults?
        let unstated = (destructive && hints.destructive.is_none())
            || (open_world && hints.open_world.is_none());
        let marks = if unstated {
            format!("does not say whether {tool:?} is read-only, destructive or open-world, and by the MCP specification's defaults (destructiveHint and openWorldHint are true when left out) it counts as {what}")
        } else {
            format!("marks {tool:?} {what}")
        };
        if self.tools.iter().any(|t| t == tool) {
            return Condition::policy(
                "policy",
                true,
                format!("{what}, allowed by name: allow_tools lists {tool:?}"),
            );
        }
        let missing: Vec<&str> = [
            (destructive && !self.destructive, "\"destructive\""),
            (open_world && !self.open_world, "\"open_world\""),
        ]
        .into_iter()
        .filter_map(|(m, w)| m.then_some(w))
        .collect();
        if missing.is_empty() {
            return Condition::policy(
                "policy",
                true,
                format!("{what}, allowed by the manifest's allow = [...]"),
            );
        }
        Condition::policy(
            "policy",
            false,
            format!(
                "the server {}; to allow it, add {} to allow = [...] or {tool:?} to allow_tools = [...] in the manifest's [[host]] table for {:?}",
                marks,
                missing.join(" and "),
                self.mount
            ),
        )
    }
}

impl Policy {
    /// The `policy` condition of a prompt's `get` or a template's `read` (`name`: the
    /// prompt's or template's; `None` for a resource reached by a template no longer
    /// offered). Both run code of the server this mount cannot see, steered by the caller's
    /// arguments: they carry the strictest policy of the server's `tools`, so a blocked
    /// open-world tool is not reachable through a prompt that does the same.
    pub fn steered_condition(
        &self,
        kind: Steered,
        name: Option<&str>,
        tools: &[(String, Hints)],
    ) -> Condition {
        let (what, key) = kind.words();
        let marked = |f: fn(&Hints) -> bool| -> Vec<&str> {
            tools
                .iter()
                .filter(|(_, h)| f(h))
                .map(|(n, _)| n.as_str())
                .collect()
        };
        let destructive = marked(is_destructive);
        let open_world = marked(is_open_world);
        if destructive.is_empty() && open_world.is_empty() {
            return Condition::policy(
                "policy",
                true,
                "the server marks none of its tools destructive or open-world",
            );
        }
        if let Some(n) = name.filter(|n| self.allows(kind, n)) {
            return Condition::policy(
                "policy",
                true,
                format!("allowed by name: {key} lists {n:?}"),
            );
        }
        let mut missing = Vec::new();
        let mut reasons = Vec::new();
        if !destructive.is_empty() && !self.destructive {
            missing.push("\"destructive\"");
            reasons.push(format!("{} destructive", some_names(&destructive)));
        }
        if !open_world.is_empty() && !self.open_world {
            missing.push("\"open_world\"");
            reasons.push(format!("{} open-world", some_names(&open_world)));
        }
        if missing.is_empty() {
            return Condition::policy(
                "policy",
                true,
                "the server's tools are marked destructive or open-world, allowed by the manifest's allow = [...]",
            );
        }
        let by_name = match name {
            Some(n) => format!(" or {n:?} to {key} = [...]"),
            None => String::new(),
        };
        Condition::policy(
            "policy",
            false,
            format!(
                "a {what} runs code of the server that this mount cannot see, and the server marks {}; to allow it, add {}{by_name} in the manifest's [[host]] table for {:?}",
                reasons.join(" and "),
                missing.join(" and ") + " to allow = [...]",
                self.mount
            ),
        )
    }

    fn allows(&self, kind: Steered, name: &str) -> bool {
        let list = match kind {
            Steered::Prompt => &self.prompts,
            Steered::Template => &self.templates,
        };
        list.iter().any(|n| n == name)
    }
}

/// `"a", "b" and 3 more` for the tools a condition names.
fn some_names(names: &[&str]) -> String {
    const SHOWN: usize = 3;
    let mut quoted: Vec<String> = names.iter().take(SHOWN).map(|n| format!("{n:?}")).collect();
    if names.len() > SHOWN {
        quoted.push(format!("{} more", names.len() - SHOWN));
    }
    let tools = if names.len() == 1 { "tool" } else { "tools" };
    format!("{tools} {}", crate::host::text::and_list(&quoted))
}

/// Names an `allow_*` list gives that the server does not offer, as one warning each
/// (`allow_tools names "fetc", which the server does not offer`).
pub fn unknown_allowed(key: &str, allowed: &[String], offered: &[&str]) -> Vec<String> {
    allowed
        .iter()
        .filter(|a| !offered.contains(&a.as_str()))
        .map(|a| format!("{key} names {a:?}, which the server does not offer"))
        .collect()
}

/// A tool's inputSchema as an op schema the runtime accepts: an object schema with
/// `properties`, closed unless the server says otherwise, and written so
/// (`additionalProperties: false`): the served schema says what the runtime enforces. No
/// `$schema`: the validator knows the drafts by their keywords, and an unknown meta-schema
/// URI must not fail.
pub fn op_schema(input: &Map<String, Value>) -> Value {
    let mut s = input.clone();
    s.remove("$schema");
    s.insert("type".into(), Value::String("object".into()));
    if !s.get("properties").is_some_and(Value::is_object) {
        s.insert("properties".into(), Value::Object(Map::new()));
    }
    s.entry("additionalProperties")
        .or_insert(Value::Bool(false));
    Value::Object(s)
}

/// The schema of a prompt's `get`: one string per argument, required as the server says.
pub fn prompt_schema(args: &[(String, Option<String>, bool)]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (name, description, req) in args {
        let mut p = json!({"type": "string"});
        if let Some(d) = description {
            p["description"] = Value::String(d.clone());
        }
        props.insert(name.clone(), p);
        if *req {
            required.push(Value::String(name.clone()));
        }
    }
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// Size in bytes of base64 data, without decoding it.
pub fn base64_len(data: &str) -> usize {
    let clean = data.trim_end_matches('=').len();
    clean * 3 / 4
}

/// What a result names besides its text: resource URIs, and content that is not text
/// (kept as the run's files by the runtime, in this order).
#[derive(Debug, Default)]
pub struct Found {
    pub uris: Vec<String>,
    pub parts: Vec<ContentPart>,
    /// Media past the first `CONTENT_PARTS_KEPT`: neither decoded nor kept, only counted.
    pub dropped: usize,
}

impl Found {
    /// The line that says how many parts were not kept, if any were not.
    fn dropped_line(&self) -> Option<String> {
        (self.dropped > 0).then(|| {
            format!(
                "[{} not kept: a call keeps its first {CONTENT_PARTS_KEPT}]",
                crate::host::text::plural(
                    self.dropped as i64,
                    "more content part",
                    "more content parts"
                )
            )
        })
    }
}

/// A block's annotations in words (`audience user · priority 0.8`), empty without any.
fn annotation_words(block: &Value) -> String {
    let Some(a) = block.get("annotations").and_then(Value::as_object) else {
        return String::new();
    };
    let mut out = Vec::new();
    if let Some(aud) = a.get("audience").and_then(Value::as_array) {
        let who: Vec<&str> = aud.iter().filter_map(Value::as_str).collect();
        if !who.is_empty() {
            out.push(format!("audience {}", who.join(", ")));
        }
    }
    if let Some(p) = a.get("priority").and_then(Value::as_f64) {
        out.push(format!("priority {p}"));
    }
    if let Some(t) = a.get("lastModified").and_then(Value::as_str) {
        out.push(format!("last modified {t}"));
    }
    out.join(" · ")
}

/// Keep `data` (base64) as a content part; the words that stand for it in the text.
fn kept(what: &str, mime: &str, data: &str, note: String, found: &mut Found) -> String {
    use base64::Engine as _;
    if found.parts.len() >= CONTENT_PARTS_KEPT {
        // Counted once for the whole result (see `dropped_line`), not one line each.
        found.dropped += 1;
        return String::new();
    }
    match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
        Ok(bytes) => {
            let n = bytes.len();
            found.parts.push(ContentPart {
                mime: mime.to_string(),
                bytes,
                note,
            });
            format!(
                "[{what}: {mime}, {n} bytes, kept as content/{}.{} of this run]",
                found.parts.len(),
                crate::host::extension(mime)
            )
        }
        Err(e) => format!(
            "[{what}: {mime}, {} bytes of base64 that does not decode: {e}]",
            data.len()
        ),
    }
}

/// One content block (tool results, prompt messages) as text: text as is, media kept as
/// content parts, resources summarised. Resource URIs mentioned are noted in `found`.
pub fn content_text(block: &Value, found: &mut Found) -> String {
    let ty = block.get("type").and_then(Value::as_str).unwrap_or("");
    let s = |k: &str| block.get(k).and_then(Value::as_str);
    let note = annotation_words(block);
    match ty {
        "text" => {
            let text = s("text").unwrap_or("").to_string();
            if note.is_empty() {
                text
            } else {
                format!("{text}\n[annotations of the text above: {note}]")
            }
        }
        "image" | "audio" => kept(
            ty,
            s("mimeType").unwrap_or("application/octet-stream"),
            s("data").unwrap_or(""),
            note,
            found,
        ),
        "resource_link" => {
            let uri = s("uri").unwrap_or("");
            found.uris.push(uri.to_string());
            let mut t = format!("[resource link: {uri}");
            if let Some(n) = s("name") {
                t.push_str(&format!(" ({n})"));
            }
            if let Some(m) = s("mimeType") {
                t.push_str(&format!(", {m}"));
            }
            t.push(']');
            t
        }
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
            if !uri.is_empty() {
                found.uris.push(uri.to_string());
            }
            match r.get("blob").and_then(Value::as_str) {
                Some(blob) => kept(
                    &format!("blob {uri}"),
                    r.get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("application/octet-stream"),
                    blob,
                    note,
                    found,
                ),
                None => resource_contents_text(&r),
            }
        }
        _ => format!(
            "[{} content] {}",
            if ty.is_empty() { "unknown" } else { ty },
            block
        ),
    }
}

/// One `contents` item of a resource: its text, or a summary line and the base64 data.
pub fn resource_contents_text(c: &Value) -> String {
    let s = |k: &str| c.get(k).and_then(Value::as_str);
    let uri = s("uri").unwrap_or("");
    if let Some(text) = s("text") {
        return text.to_string();
    }
    if let Some(blob) = s("blob") {
        return format!(
            "[blob {uri}: {}, {} bytes, base64 on the next line]\n{blob}",
            s("mimeType").unwrap_or("unknown type"),
            base64_len(blob)
        );
    }
    format!("[resource {uri}: no content]")
}

/// The text of a tool result: content blocks joined, then structured content as JSON when
/// it adds something the blocks do not already hold.
pub fn tool_result_text(result: &Value, found: &mut Found) -> String {
    let blocks: Vec<&Value> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut parts = texts_of(&blocks, found);
    // Everything the blocks carry, media data included: structured content that repeats
    // an image's base64 (server-filesystem's read_media_file) adds nothing.
    let mut shown: Vec<&str> = Vec::new();
    for b in &blocks {
        string_leaves(b, &mut shown);
    }
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if let Some(sc) = result
        .get("structuredContent")
        .filter(|v| !v.is_null() && !already_shown(v, &texts, &shown))
    {
        parts.push(format!(
            "structured content:\n{}",
            serde_json::to_string_pretty(sc).unwrap_or_default()
        ));
    }
    parts.extend(found.dropped_line());
    parts.join("\n")
}

/// The texts of `blocks`, less those of media that was not kept.
fn texts_of(blocks: &[&Value], found: &mut Found) -> Vec<String> {
    let mut out = Vec::with_capacity(blocks.len().min(CONTENT_PARTS_KEPT));
    for b in blocks {
        let before = found.dropped;
        let text = content_text(b, found);
        if found.dropped == before {
            out.push(text);
        }
    }
    out
}

/// Every string inside `v`.
fn string_leaves<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| string_leaves(i, out)),
        Value::Object(m) => m.values().for_each(|i| string_leaves(i, out)),
        _ => {}
    }
}

/// Whether structured content repeats what the blocks hold: a block's text is that very
/// JSON, or every value in it (keys aside) appears in the blocks: a string in any of their
/// strings (media data included), a number or boolean in a text. A server that returns
/// `{"content": TEXT}` beside the same TEXT (server-filesystem) would otherwise double
/// every result.
fn already_shown(sc: &Value, texts: &[&str], strings: &[&str]) -> bool {
    if texts
        .iter()
        .any(|t| serde_json::from_str::<Value>(t).is_ok_and(|v| &v == sc))
    {
        return true;
    }
    fn leaves_in(v: &Value, texts: &[&str], strings: &[&str]) -> bool {
        let within = |hay: &[&str], needle: &str| hay.iter().any(|t| t.contains(needle));
        match v {
            Value::Null => true,
            Value::String(s) => s.is_empty() || within(strings, s),
            Value::Bool(_) | Value::Number(_) => within(texts, &v.to_string()),
            Value::Array(items) => items.iter().all(|i| leaves_in(i, texts, strings)),
            Value::Object(m) => m.values().all(|i| leaves_in(i, texts, strings)),
        }
    }
    !strings.is_empty() && leaves_in(sc, texts, strings)
}

/// A prompt's messages as `role: text` paragraphs.
pub fn prompt_text(result: &Value, found: &mut Found) -> String {
    let mut out = Vec::new();
    if let Some(d) = result.get("description").and_then(Value::as_str) {
        out.push(format!("description: {d}"));
    }
    out.extend(prompt_messages(result, found));
    out.extend(found.dropped_line());
    out.join("\n")
}

/// A prompt's text as its `body` shows it: the messages alone, each `role: text`,
/// ending with one newline.
pub fn prompt_body(result: &Value) -> String {
    let mut text = prompt_messages(result, &mut Found::default()).join("\n");
    text.push('\n');
    text
}

fn prompt_messages(result: &Value, found: &mut Found) -> Vec<String> {
    let mut out = Vec::new();
    for m in result
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        let text = match m.get("content") {
            Some(Value::Array(blocks)) => {
                texts_of(&blocks.iter().collect::<Vec<_>>(), found).join("\n")
            }
            Some(b) => content_text(b, found),
            None => String::new(),
        };
        out.push(format!("{role}: {text}"));
    }
    out
}

/// An RFC 6570 URI template, enough of it for resource templates: literals and
/// expressions with the operators `+ # . / ; ? &` and variable lists (modifiers are kept
/// out of names and ignored on expansion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Expr { op: Option<char>, vars: Vec<String> },
}

impl UriTemplate {
    pub fn parse(text: &str) -> Option<UriTemplate> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_string()));
            }
            let close = rest[open..].find('}')? + open;
            let mut body = &rest[open + 1..close];
            let op = body
                .chars()
                .next()
                .filter(|c| "+#./;?&".contains(*c))
                .inspect(|_| body = &body[1..]);
            let vars: Vec<String> = body
                .split(',')
                .map(|v| {
                    v.split(':')
                        .next()
                        .unwrap_or("")
                        .trim_end_matches('*')
                        .to_string()
                })
                .filter(|v| !v.is_empty())
                .collect();
            if vars.is_empty() {
                return None;
            }
            parts.push(Part::Expr { op, vars });
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return None;
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Some(UriTemplate { parts })
    }

    /// Variables, each with whether it is required (path-like expressions are; query
    /// expressions `?` and `&` are not).
    pub fn variables(&self) -> Vec<(String, bool)> {
        let mut out: Vec<(String, bool)> = Vec::new();
        for p in &self.parts {
            if let Part::Expr { op, vars } = p {
                for v in vars {
                    if !out.iter().any(|(n, _)| n == v) {
                        out.push((v.clone(), !matches!(op, Some('?') | Some('&'))));
                    }
                }
            }
        }
        out
    }

    pub fn schema(&self) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for (v, req) in self.variables() {
            props.insert(v.clone(), json!({"type": "string"}));
            if req {
                required.push(Value::String(v));
            }
        }
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }

    pub fn expand(&self, values: &Map<String, Value>) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Literal(l) => out.push_str(l),
                Part::Expr { op, vars } => {
                    let defined: Vec<(&String, String)> = vars
                        .iter()
                        .filter_map(|v| {
                            let val = values.get(v)?;
                            let s = match val {
                                Value::String(s) => s.clone(),
                                Value::Null => return None,
                                other => other.to_string(),
                            };
                            Some((v, s))
                        })
                        .collect();
                    if defined.is_empty() {
                        continue;
                    }
                    let reserved = matches!(op, Some('+') | Some('#'));
                    let enc = |s: &str| pct_encode(s, reserved);
                    let (first, sep, named) = match op {
                        None | Some('+') => ("", ",", false),
                        Some('#') => ("#", ",", false),
                        Some('.') => (".", ".", false),
                        Some('/') => ("/", "/", false),
                        Some(';') => (";", ";", true),
                        Some('?') => ("?", "&", true),
                        Some('&') => ("&", "&", true),
                        Some(_) => ("", ",", false),
                    };
                    out.push_str(first);
                    let items: Vec<String> = defined
                        .iter()
                        .map(|(n, v)| {
                            if named {
                                format!("{n}={}", enc(v))
                            } else {
                                enc(v)
                            }
                        })
                        .collect();
                    out.push_str(&items.join(sep));
                }
            }
        }
        out
    }

    /// Whether `uri` is one this template can produce (path-like expressions match one or
    /// more characters up to the next literal; a query expression matches the rest).
    pub fn matches(&self, uri: &str) -> bool {
        fn go(parts: &[Part], s: &str) -> bool {
            match parts.split_first() {
                None => s.is_empty(),
                Some((Part::Literal(l), rest)) => {
                    s.strip_prefix(l.as_str()).is_some_and(|r| go(rest, r))
                }
                Some((Part::Expr { op, .. }, rest)) => {
                    if matches!(op, Some('?') | Some('&') | Some('#')) {
                        return true;
                    }
                    // An expression takes at least one character, and a plain one no `/`.
                    let any = matches!(op, Some('+') | Some('/'));
                    for (i, c) in s.char_indices() {
                        if c == '/' && !any {
                            return false;
                        }
                        if go(rest, &s[i + c.len_utf8()..]) {
                            return true;
                        }
                    }
                    false
                }
            }
        }
        go(&self.parts, uri)
    }
}

/// Percent-encode for a URI template expansion: unreserved characters stay; with
/// `reserved`, reserved characters and existing `%XX` stay too.
fn pct_encode(s: &str, reserved: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        let c = b as char;
        let keep = c.is_ascii_alphanumeric()
            || "-._~".contains(c)
            || (reserved && ":/?#[]@!$&'()*+,;=%".contains(c));
        if keep {
            out.push(c);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
