//! The world root's own ops: `resolve` (a ref to every path), `locate` (words to known
//! entries) and `events` (the change feed from a cursor).

use serde_json::{json, Value};

use super::call::run::RoutedOutcome;
use super::entries::Entries;
use super::error::{WorldError, WorldResult};
use super::FOUND_MAX;
use crate::host::OpSpec;
use crate::state::{Event, Journal};

pub(super) fn call(
    entries: &Entries,
    journal: &dyn Journal,
    op: &str,
    args: &Value,
) -> WorldResult<RoutedOutcome> {
    let text_arg = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or("").trim();
    match op {
        "resolve" => {
            let reference = text_arg("ref");
            let mut out = RoutedOutcome::default();
            for (i, m) in entries.hosts().iter().enumerate() {
                for p in m.host.resolve(reference) {
                    if m.host.exists(&p)? {
                        out.discovered.push((i, p));
                    }
                }
            }
            // Other places the object was seen (search hits, query rows, …).
            for path in entries.known().paths_of(reference)? {
                push_known(entries, &mut out, &path);
            }
            if out.discovered.is_empty() {
                return Err(WorldError::not_found(format!(
                    "no entry has the ref {reference:?} (refs look like the content of any entry's `ref` file)"
                )));
            }
            out.result = format!("{} path(s) for {reference}:", out.discovered.len());
            Ok(out)
        }
        "locate" => {
            let query = text_arg("query");
            let words: Vec<String> = query.split_whitespace().map(str::to_string).collect();
            if words.is_empty() {
                return Err(WorldError::invalid(
                    "locate needs a query: words to find in paths and descriptions",
                ));
            }
            let mut out = RoutedOutcome::default();
            for e in entries.known().locate(&words, FOUND_MAX)? {
                push_known(entries, &mut out, &e.path);
            }
            out.result = format!(
                "{} known entr{} match {query:?} (the known world: what was looked at or discovered; .wip/known lists it)",
                out.discovered.len(),
                if out.discovered.len() == 1 { "y" } else { "ies" }
            );
            Ok(out)
        }
        "events" => {
            let since = args.get("since").and_then(Value::as_i64).unwrap_or(0);
            let events = journal.events_after(since, FOUND_MAX)?;
            let mut text: String = events.iter().map(event_line).collect();
            match events.last() {
                Some(last) if events.len() == FOUND_MAX => {
                    text.push_str(&format!("… more: call again with since={}\n", last.cursor))
                }
                Some(_) => {}
                None => text.push_str(&format!("no events after {since}\n")),
            }
            Ok(RoutedOutcome {
                result: text,
                ..Default::default()
            })
        }
        other => Err(WorldError::not_found(format!(
            "no op {other:?} at the root"
        ))),
    }
}

/// Add a known world path to a root op's discovered entries, if it still exists.
fn push_known(entries: &Entries, out: &mut RoutedOutcome, path: &str) {
    if entries.hides_path(path) {
        return;
    }
    if let Some(e) = entries.entry_at(path) {
        let item = (e.host, e.path.to_vec());
        if !out.discovered.contains(&item) {
            out.discovered.push(item);
        }
    }
}

/// One line of the change feed: JSON with its cursor.
pub(super) fn event_line(e: &Event) -> String {
    let mut line = serde_json::to_string(e).unwrap_or_default();
    line.push('\n');
    line
}

pub(super) fn root_ops() -> Vec<OpSpec> {
    vec![
        OpSpec {
            output: None,
            name: "resolve".into(),
            description: "resolve(ref): every path where the object with this ref appears".into(),
            schema: json!({
                "type": "object",
                "properties": {"ref": {"type": "string", "description": "an object's ref, e.g. tracker://demo/issues/42"}},
                "required": ["ref"],
                "additionalProperties": false
            }),
        },
        OpSpec {
            output: None,
            name: "locate".into(),
            description:
                "locate(query): known, indexable entries whose path or description holds every word"
                    .into(),
            schema: json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "words, any case, all must match"}},
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        OpSpec {
            output: None,
            name: "events".into(),
            description:
                "events(since?): the change feed after a cursor, as JSON lines (resumable)".into(),
            schema: json!({
                "type": "object",
                "properties": {"since": {"type": "integer", "minimum": 0, "description": "the last cursor you saw; 0 for the start"}},
                "additionalProperties": false
            }),
        },
    ]
}
