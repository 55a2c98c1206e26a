//! The schemas the MCP host serves are what the runtime enforces: a tool's (closed, or
//! left open by its server) and a prompt's, with plain text filling the one required string.

use serde_json::{json, Map};

use crate::hosts::mcp::render::{op_schema, prompt_schema};
use crate::world::call::args::{parse_and_validate, validate};

#[test]
fn a_tools_schema_checks_the_args() {
    let mut input = Map::new();
    input.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    input.insert("type".into(), json!("object"));
    input.insert("properties".into(), json!({"message": {"type": "string"}}));
    input.insert("required".into(), json!(["message"]));
    let s = op_schema(&input);
    // The runtime accepts it, closes it, and checks args against it.
    assert!(validate(&json!({"message": "hi"}), &s).is_ok());
    assert!(validate(&json!({"msg": "hi"}), &s).is_err());
    assert!(validate(&json!({}), &s).is_err());
    // A server that leaves it open keeps it open; one without properties takes none.
    let mut open = Map::new();
    open.insert("additionalProperties".into(), json!(true));
    assert!(validate(&json!({"x": 1}), &op_schema(&open)).is_ok());
    assert!(validate(&json!({}), &op_schema(&Map::new())).is_ok());
    // Plain text fills the one required string.
    let args = parse_and_validate(b"hello\n", &s).expect("plain text is the message");
    assert_eq!(args, json!({"message": "hello"}));
}

#[test]
fn a_prompts_schema_checks_the_args() {
    let s = prompt_schema(&[
        ("city".into(), Some("Name of the city".into()), true),
        ("state".into(), None, false),
    ]);
    assert!(validate(&json!({"city": "Kyoto"}), &s).is_ok());
    assert!(validate(&json!({"state": "x"}), &s).is_err());
}
