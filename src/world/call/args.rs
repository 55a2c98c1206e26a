//! Turning the bytes written into `call` into validated JSON arguments.
//!
//! Three forms are accepted (DESIGN.md, "Calling an operation"): a JSON object; `key=value`
//! lines; plain text when the op has exactly one required string parameter (or, with no
//! required parameter, exactly one string parameter). One trailing newline is stripped from
//! text forms, and a lone newline means "no arguments".

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

use crate::world::error::{WorldError, WorldResult};

/// Parse `bytes` into an args object for an op with this `schema` and validate it.
pub fn parse_and_validate(bytes: &[u8], schema: &Value) -> WorldResult<Value> {
    let args = parse(bytes, schema)?;
    validate(&args, schema)?;
    Ok(args)
}

/// JSON text as a value, refusing an object that names a key twice (at any depth): which
/// of the two was meant is the writer's to say, never last-wins.
pub fn strict_json(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

/// A JSON value read with duplicate keys refused (see `strict_json`).
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the key {key:?} is given twice"
                )));
            }
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Whether the payload is JSON (starts with `{`); text forms are decided otherwise.
pub fn looks_like_json(bytes: &[u8]) -> bool {
    bytes.trim_ascii_start().first() == Some(&b'{')
}

pub fn parse(bytes: &[u8], schema: &Value) -> WorldResult<Value> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| WorldError::invalid(format!("arguments are not valid UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    if text.trim_start().starts_with('{') {
        return match strict_json(text.trim()) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err(WorldError::invalid("arguments must be a JSON object")),
            Err(e) => Err(WorldError::invalid(format!(
                "arguments are not valid JSON: {e}"
            ))),
        };
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    let props = properties(schema);
    // A first line `--` says: what follows is plain text, whatever it looks like.
    let plain = match text.split_once('\n') {
        Some((first, rest)) if first.trim_end_matches('\r') == PLAIN_MARK => Some(rest),
        None if text == PLAIN_MARK => Some(""),
        _ => None,
    };
    if let Some(rest) = plain {
        let Some(name) = plain_text_param(schema) else {
            return Err(WorldError::invalid(format!(
                "a first line {PLAIN_MARK} means plain text, but this op takes none (fields: {}); send a JSON object or key=value lines",
                field_list(&props)
            )));
        };
        let mut obj = Map::new();
        obj.insert(name, Value::String(rest.to_string()));
        return Ok(Value::Object(obj));
    }
    if let Some(obj) = parse_key_values(text, &props, schema)? {
        return Ok(Value::Object(obj));
    }
    if let Some(name) = plain_text_param(schema) {
        let mut obj = Map::new();
        obj.insert(name, Value::String(text.to_string()));
        return Ok(Value::Object(obj));
    }
    Err(WorldError::invalid(format!(
        "expected a JSON object or key=value lines (fields: {}); see the op's schema",
        field_list(&props)
    )))
}

/// The line that, first in a text call, makes the rest plain text exactly.
pub const PLAIN_MARK: &str = "--";

fn field_list(props: &[(String, String)]) -> String {
    if props.is_empty() {
        return "none".to_string();
    }
    props
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The schema as `ops/NAME/schema` shows it: for an op that takes plain text, one line in
/// its `description` saying when text is read as `key=value` lines instead, and the escape.
pub fn shown_schema(schema: &Value) -> Value {
    let Some(param) = plain_text_param(schema) else {
        return schema.clone();
    };
    let props = properties(schema);
    let note = format!(
        "Plain text fills {param}, unless its first line is KEY=… with KEY one of {}: then it is read as key=value lines. To send such text exactly, make the first line {PLAIN_MARK} (or send JSON).",
        field_list(&props)
    );
    let mut shown = schema.clone();
    if let Some(obj) = shown.as_object_mut() {
        let description = match obj.get("description").and_then(Value::as_str) {
            Some(d) if !d.is_empty() => format!("{d} {note}"),
            _ => note,
        };
        obj.insert("description".into(), Value::String(description));
    }
    shown
}

/// The property names and their declared `type` (first string type if a list).
fn properties(schema: &Value) -> Vec<(String, String)> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, p)| {
            let ty = match p.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|t| *t != "null")
                    .unwrap_or("string")
                    .to_string(),
                _ => "any".to_string(),
            };
            (name.clone(), ty)
        })
        .collect()
}

/// The parameter plain text fills, if the op has one.
fn plain_text_param(schema: &Value) -> Option<String> {
    let props = properties(schema);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let is_string = |name: &str| props.iter().any(|(n, t)| n == name && t == "string");
    match required.as_slice() {
        [one] if is_string(one) => Some(one.to_string()),
        [] => {
            let strings: Vec<&(String, String)> =
                props.iter().filter(|(_, t)| t == "string").collect();
            match strings.as_slice() {
                [(name, _)] => Some(name.clone()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `key=value` lines, if the first non-empty line is one with a known key. A line that is
/// not `KEY=…` with a known key continues the string value before it (so a multi-line
/// `body=` needs no escaping); anywhere else it means the text is not in this form.
fn parse_key_values(
    text: &str,
    props: &[(String, String)],
    schema: &Value,
) -> WorldResult<Option<Map<String, Value>>> {
    let mut obj = Map::new();
    // The string field the next unkeyed line continues.
    let mut open: Option<String> = None;
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let keyed = line.split_once('=').and_then(|(key, value)| {
            let key = key.trim();
            props.iter().find(|(n, _)| n == key).map(|_| (key, value))
        });
        let Some((key, value)) = keyed else {
            if let Some(Value::String(s)) = open.as_ref().and_then(|k| obj.get_mut(k)) {
                s.push('\n');
                s.push_str(line);
                continue;
            }
            if open.is_none() && line.trim().is_empty() {
                // Blank lines before the first field, or after a value of another type.
                continue;
            }
            return Ok(None);
        };
        let types = declared_types(schema, key);
        let parsed = type_value(value, &types).map_err(|expected| {
            WorldError::invalid(format!("{key}={value}: expected {expected}"))
        })?;
        // A string value may go on over the next lines.
        open = matches!(parsed, Value::String(_)).then(|| key.to_string());
        if obj.insert(key.to_string(), parsed).is_some() {
            return Err(WorldError::invalid(format!("{key} is given twice")));
        }
    }
    // Blank lines after the last value belong to no field.
    if let Some(Value::String(s)) = open.as_ref().and_then(|k| obj.get_mut(k)) {
        let kept = s.trim_end_matches('\n').len();
        s.truncate(kept);
    }
    Ok((!obj.is_empty()).then_some(obj))
}

/// The JSON Schema types a property declares (`"type": "boolean"` or a list such as
/// `["boolean", "string"]`); empty when it declares none.
fn declared_types(schema: &Value, key: &str) -> Vec<String> {
    match schema.pointer(&format!(
        "/properties/{}/type",
        key.replace('~', "~0").replace('/', "~1")
    )) {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// What a `key=value` line's text was expected to be and is not: `an integer`, `one of
/// integer, boolean`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Expected(pub String);

/// The value a `key=value` line means for a property of these JSON Schema `types`: the
/// first type the text can be, trying the others before `string` (so `true` is a boolean
/// and `maybe` a string for `["boolean", "string"]`). Arrays are JSON or comma-separated;
/// no declared type takes any JSON value, else the text. `Err` says what was expected.
pub fn type_value(text: &str, types: &[String]) -> Result<Value, Expected> {
    if types.is_empty() {
        return Ok(serde_json::from_str::<Value>(text.trim())
            .unwrap_or_else(|_| Value::String(text.to_string())));
    }
    let json = serde_json::from_str::<Value>(text.trim()).ok();
    let fits = |ty: &str, v: &Value| match ty {
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        _ => false,
    };
    for ty in types.iter().filter(|t| *t != "string") {
        match (ty.as_str(), &json) {
            (_, Some(v)) if fits(ty, v) => return Ok(v.clone()),
            ("array", _) if !types.iter().any(|t| t == "string") => {
                return Ok(Value::Array(
                    text.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(|s| Value::String(s.to_string()))
                        .collect(),
                ))
            }
            _ => {}
        }
    }
    if types.iter().any(|t| t == "string") {
        return Ok(Value::String(text.to_string()));
    }
    let names: Vec<&str> = types.iter().map(String::as_str).collect();
    Err(Expected(match names.as_slice() {
        [one] if one.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {one}"),
        [one] => format!("a {one}"),
        many => format!("one of {}", many.join(", ")),
    }))
}

/// Validate against the schema, strictly: an object schema without `additionalProperties`
/// is treated as closed, so a misspelt field is an error rather than silently ignored.
pub fn validate(args: &Value, schema: &Value) -> WorldResult<()> {
    let mut strict = schema.clone();
    if let Some(obj) = strict.as_object_mut() {
        if obj.contains_key("properties") && !obj.contains_key("additionalProperties") {
            obj.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
    let validator = compiled(&strict)?;
    let errors: Vec<String> = validator
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(WorldError::invalid(format!(
            "invalid arguments: {}",
            errors.join("; ")
        )))
    }
}

/// Compiling a schema costs far more than checking args against it: keep each one.
fn compiled(schema: &Value) -> WorldResult<Arc<jsonschema::Validator>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let key = schema.to_string();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(v);
    }
    let validator = Arc::new(
        jsonschema::validator_for(schema)
            .map_err(|e| WorldError::backend(format!("the op's schema is invalid: {e}")))?,
    );
    if let Ok(mut c) = cache.lock() {
        c.insert(key, Arc::clone(&validator));
    }
    Ok(validator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn close_schema() -> Value {
        json!({"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"],"additionalProperties":false})
    }

    fn label_schema() -> Value {
        json!({"type":"object","properties":{"add":{"type":"array","items":{"type":"string"}},"limit":{"type":"integer"}},"additionalProperties":false})
    }

    #[test]
    fn a_key_given_twice_is_refused_in_json_as_in_key_value_lines() {
        for doc in [
            &b"{\"reason\":\"x\",\"reason\":\"y\"}"[..],
            b"{\"reason\":\"x\",\"extra\":{\"a\":1,\"a\":2}}",
            b"reason=x\nreason=y\n",
        ] {
            let e = parse(doc, &close_schema()).unwrap_err();
            assert_eq!(e.errno(), libc::EINVAL);
            assert!(e.message.contains("twice"), "{e}");
        }
        assert_eq!(
            strict_json("{\"a\":[1,2.5,null,true,{\"b\":\"c\"}]}").unwrap(),
            json!({"a":[1,2.5,null,true,{"b":"c"}]})
        );
    }

    #[test]
    fn a_first_line_of_two_dashes_sends_the_rest_as_plain_text_exactly() {
        let comment = json!({"type":"object","properties":{"body":{"type":"string"},"timeout":{"type":"integer"}},"required":["body"],"additionalProperties":false});
        // Without the mark a known key on the first line makes key=value lines.
        assert_eq!(parse(b"body=hi\n", &comment).unwrap(), json!({"body":"hi"}));
        assert_eq!(
            parse(b"--\nbody=hi\ntimeout=30 is not the cause\n", &comment).unwrap(),
            json!({"body":"body=hi\ntimeout=30 is not the cause"})
        );
        assert_eq!(parse(b"--\n", &comment).unwrap(), json!({"body":""}));
        // An op that takes no plain text says so.
        let e = parse(b"--\nreason=x\n", &label_schema()).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        assert!(e.message.contains("takes none"), "{e}");
        // The schema says it, for ops that take plain text only.
        let shown = shown_schema(&comment);
        let d = shown["description"].as_str().unwrap_or_default();
        assert!(
            d.contains("first line --") && d.contains("body, timeout"),
            "{d}"
        );
        assert_eq!(shown_schema(&label_schema()), label_schema());
    }

    #[test]
    fn json_object() {
        let v = parse_and_validate(b"{\"reason\":\"done\"}\n", &close_schema()).unwrap();
        assert_eq!(v, json!({"reason":"done"}));
    }

    #[test]
    fn plain_text_strips_one_newline() {
        let v = parse_and_validate(b"fixed in 1.2\n", &close_schema()).unwrap();
        assert_eq!(v, json!({"reason":"fixed in 1.2"}));
        let v = parse_and_validate(b"two\n\n", &close_schema()).unwrap();
        assert_eq!(v, json!({"reason":"two\n"}));
    }

    #[test]
    fn key_values_are_typed_by_schema() {
        let v = parse_and_validate(b"add=bug, docs\nlimit=3\n", &label_schema()).unwrap();
        assert_eq!(v, json!({"add":["bug","docs"],"limit":3}));
        let err = parse_and_validate(b"limit=three\n", &label_schema()).unwrap_err();
        assert!(err.message.contains("limit"));
    }

    #[test]
    fn key_value_string_values_continue_on_unkeyed_lines() {
        let schema = json!({"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}}},"additionalProperties":false});
        let v = parse_and_validate(
            b"title=Crash\nbody=line one\n\nline=three\nlabels=bug\n",
            &schema,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"title":"Crash","body":"line one\n\nline=three","labels":["bug"]})
        );
        // An unkeyed line after a non-string value is not this form.
        assert!(parse_and_validate(b"labels=bug\nmore\n", &schema).is_err());
        // Text whose first line is not KEY=… stays plain text.
        let one = json!({"type":"object","properties":{"body":{"type":"string"}},"required":["body"],"additionalProperties":false});
        let v = parse_and_validate(b"Fixed it.\nbody=see above\n", &one).unwrap();
        assert_eq!(v, json!({"body":"Fixed it.\nbody=see above"}));
    }

    #[test]
    fn key_values_take_the_first_type_of_a_union_the_text_can_be() {
        let types = |ts: &[&str]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let union = types(&["boolean", "string"]);
        assert_eq!(type_value("true", &union), Ok(json!(true)));
        assert_eq!(type_value("maybe", &union), Ok(json!("maybe")));
        assert_eq!(type_value("3", &types(&["integer", "null"])), Ok(json!(3)));
        assert_eq!(
            type_value("null", &types(&["integer", "null"])),
            Ok(Value::Null)
        );
        assert_eq!(type_value("2.5", &types(&["number"])), Ok(json!(2.5)));
        assert_eq!(
            type_value("2.5", &types(&["integer"])),
            Err(Expected("an integer".into()))
        );
        assert_eq!(
            type_value("x", &types(&["integer", "boolean"])),
            Err(Expected("one of integer, boolean".into()))
        );
        assert_eq!(
            type_value("a, b", &types(&["array"])),
            Ok(json!(["a", "b"]))
        );
        assert_eq!(type_value("[1]", &types(&["array"])), Ok(json!([1])));
        // A string beside an array keeps commas in the text.
        assert_eq!(
            type_value("a, b", &types(&["array", "string"])),
            Ok(json!("a, b"))
        );
        assert_eq!(
            type_value("{\"k\":1}", &types(&["object"])),
            Ok(json!({"k": 1}))
        );
        // No declared type: JSON if it parses, else the text.
        assert_eq!(type_value("7", &[]), Ok(json!(7)));
        assert_eq!(type_value("seven", &[]), Ok(json!("seven")));
        let schema = json!({"type":"object","properties":{
            "next":{"type":["boolean","string"]},"n":{"type":"integer"}},"additionalProperties":false});
        let v = parse_and_validate(b"next=maybe\nn=2\n", &schema).unwrap();
        assert_eq!(v, json!({"next":"maybe","n":2}));
        let v = parse_and_validate(b"next=false\n", &schema).unwrap();
        assert_eq!(v, json!({"next":false}));
    }

    #[test]
    fn lone_newline_is_no_args() {
        let v = parse(b"\n", &label_schema()).unwrap();
        assert_eq!(v, json!({}));
        let err = parse_and_validate(b"\n", &close_schema()).unwrap_err();
        assert!(err.message.contains("reason"), "{}", err.message);
    }

    #[test]
    fn unknown_fields_and_bad_json_rejected() {
        assert!(parse_and_validate(b"{\"reasn\":\"x\"}", &close_schema()).is_err());
        assert!(parse_and_validate(b"{\"reason\":", &close_schema()).is_err());
        assert!(parse_and_validate(b"[1]", &label_schema()).is_err());
        let open = json!({"type":"object","properties":{"a":{"type":"integer"}}});
        assert!(parse_and_validate(b"{\"b\":1}", &open).is_err());
    }
}
