//! Unit tests of the translations (no server) and of the host in-process on a server that
//! cannot start (no FUSE, no node needed).

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::render::*;
use super::*;
use crate::manifest::{Identity, Manifest};
use crate::world::host::{path_of, Changes};

#[test]
fn names_map_reversibly_and_canonically() {
    for name in [
        "echo",
        "demo://resource/static/document/features.md",
        "100%/sure",
        "a%2Fb",
        "nul\0byte",
    ] {
        let seg = encode_name(name);
        assert!(!seg.contains('/') && !seg.contains('\0'), "{seg}");
        assert_eq!(decode_name(&seg).as_deref(), Some(name), "{seg}");
    }
    assert_eq!(
        encode_name("demo://x/y"),
        "demo:%2F%2Fx%2Fy",
        "only % and / are encoded"
    );
    // Other spellings of the same name do not resolve: one path per name.
    assert_eq!(decode_name("demo:%2f%2fx"), None);
    assert_eq!(decode_name("a%41"), None);
    assert_eq!(decode_name("50%"), None);
    assert_eq!(decode_name(""), None);
}

fn hints(v: Value) -> Hints {
    Hints::from_annotations(Some(&v))
}

#[test]
fn annotations_in_words() {
    let h = hints(
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
    );
    assert_eq!(
        h.words(),
        "read-only, not destructive, idempotent, closed-world"
    );
    assert_eq!(Hints::from_annotations(None).words(), "no annotations");
    assert!(hints(json!({"openWorldHint": true}))
        .words()
        .contains("open-world"));
}

#[test]
fn policy_blocks_stated_destructive_and_open_world_hints() {
    let none = Policy {
        mount: "mcp/x".into(),
        ..Policy::default()
    };
    let destructive = hints(json!({"destructiveHint": true}));
    let open = hints(json!({"openWorldHint": true}));
    let both = hints(json!({"destructiveHint": true, "openWorldHint": true}));
    let safe = hints(json!({"readOnlyHint": true}));
    // Stated hints only: a tool without annotations is not blocked.
    assert!(none.condition("t", &Hints::default()).ok);
    assert!(none.condition("t", &safe).ok);
    // A read-only tool is never destructive, whatever else it says.
    assert!(
        none.condition(
            "t",
            &hints(json!({"readOnlyHint": true, "destructiveHint": true}))
        )
        .ok
    );
    let c = none.condition("delete", &destructive);
    assert!(!c.ok && c.policy);
    assert!(c.detail.contains("allow = [...]") && c.detail.contains("\"destructive\""));
    assert!(c.detail.contains("allow_tools") && c.detail.contains("\"mcp/x\""));
    let c = none.condition("fetch", &both);
    assert!(
        c.detail.contains("\"destructive\" and \"open_world\""),
        "{}",
        c.detail
    );

    let kinds = Policy {
        destructive: true,
        ..none.clone()
    };
    assert!(kinds.condition("delete", &destructive).ok);
    assert!(!kinds.condition("fetch", &open).ok);
    let c = kinds.condition("fetch", &both);
    assert!(
        !c.ok && c.detail.contains("add \"open_world\" to"),
        "{}",
        c.detail
    );
    let named = Policy {
        tools: vec!["fetch".into()],
        ..none
    };
    assert!(named.condition("fetch", &both).ok);
    assert!(!named.condition("other", &both).ok);
}

#[test]
fn tool_schemas_become_strict_object_schemas() {
    let mut input = Map::new();
    input.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    input.insert("type".into(), json!("object"));
    input.insert("properties".into(), json!({"message": {"type": "string"}}));
    input.insert("required".into(), json!(["message"]));
    let s = op_schema(&input);
    assert!(s.get("$schema").is_none());
    assert_eq!(s["required"], json!(["message"]));
    // The runtime accepts it, closes it, and checks args against it.
    assert!(crate::world::args::validate(&json!({"message": "hi"}), &s).is_ok());
    assert!(crate::world::args::validate(&json!({"msg": "hi"}), &s).is_err());
    assert!(crate::world::args::validate(&json!({}), &s).is_err());
    // A schema without properties (or type) still is an object schema.
    let bare = op_schema(&Map::new());
    assert_eq!(bare, json!({"type": "object", "properties": {}}));
    assert!(crate::world::args::validate(&json!({}), &bare).is_ok());
    // Plain text fills the one required string.
    let args = crate::world::args::parse_and_validate(b"hello\n", &s).unwrap();
    assert_eq!(args, json!({"message": "hello"}));
}

#[test]
fn prompt_arguments_become_a_schema() {
    let s = prompt_schema(&[
        ("city".into(), Some("Name of the city".into()), true),
        ("state".into(), None, false),
    ]);
    assert_eq!(s["required"], json!(["city"]));
    assert_eq!(s["properties"]["city"]["description"], "Name of the city");
    assert!(crate::world::args::validate(&json!({"city": "Kyoto"}), &s).is_ok());
    assert!(crate::world::args::validate(&json!({"state": "x"}), &s).is_err());
}

#[test]
fn uri_templates_expand_and_match() {
    let t = UriTemplate::parse("demo://resource/dynamic/text/{resourceId}").unwrap();
    assert_eq!(t.variables(), vec![("resourceId".to_string(), true)]);
    let mut v = Map::new();
    v.insert("resourceId".into(), json!("7"));
    assert_eq!(t.expand(&v), "demo://resource/dynamic/text/7");
    v.insert("resourceId".into(), json!("a b/c"));
    assert_eq!(t.expand(&v), "demo://resource/dynamic/text/a%20b%2Fc");
    assert!(t.matches("demo://resource/dynamic/text/7"));
    assert!(!t.matches("demo://resource/dynamic/text/"));
    assert!(!t.matches("demo://resource/dynamic/text/7/8"));
    assert!(!t.matches("demo://resource/dynamic/blob/7"));

    let q = UriTemplate::parse("file:///{+path}{?rev,lines}").unwrap();
    assert_eq!(
        q.variables(),
        vec![
            ("path".to_string(), true),
            ("rev".to_string(), false),
            ("lines".to_string(), false)
        ]
    );
    let mut v = Map::new();
    v.insert("path".into(), json!("src/main.rs"));
    v.insert("lines".into(), json!(10));
    assert_eq!(q.expand(&v), "file:///src/main.rs?lines=10");
    assert!(q.matches("file:///src/main.rs?lines=10"));
    assert!(q.matches("file:///src/main.rs"));
    let schema = q.schema();
    assert_eq!(schema["required"], json!(["path"]));

    assert!(UriTemplate::parse("x://{unclosed").is_none());
    assert!(UriTemplate::parse("x://{}").is_none());
}

#[test]
fn contents_rendered_as_text() {
    let mut uris = Vec::new();
    let result = json!({
        "content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "demo://r/1", "name": "One", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "demo://r/2", "blob": "AAEC", "mimeType": "application/octet-stream"}}
        ],
        "structuredContent": {"t": 1}
    });
    let text = tool_result_text(&result, &mut uris);
    assert!(
        text.starts_with("hello\n[image: image/png, 8 bytes]\n"),
        "{text}"
    );
    assert!(text.contains("[resource link: demo://r/1 (One), text/plain]"));
    assert!(text.contains("[blob demo://r/2: application/octet-stream, 3 bytes"));
    assert!(text.contains("structured content:\n{\n  \"t\": 1\n}"));
    assert_eq!(uris, ["demo://r/1", "demo://r/2"]);
    // Structured content that a text block already shows is not repeated.
    let twice =
        json!({"content": [{"type": "text", "text": "{\"t\": 1}"}], "structuredContent": {"t": 1}});
    assert_eq!(tool_result_text(&twice, &mut uris), "{\"t\": 1}");
    let prompt = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]});
    assert_eq!(prompt_text(&prompt, &mut uris), "user: hi");
}

fn ctx() -> HostContext {
    let dir = std::env::temp_dir();
    HostContext {
        state_dir: dir.clone(),
        launch_dir: dir.clone(),
        mount_point: dir.join("wip-mcp-unit-mount"),
        identity: Identity::default(),
        peers: Vec::new(),
        changes: Changes::detached(),
        call_timeout: crate::manifest::WorldSettings::default().call_timeout(),
    }
}

fn settings(command: &[&str]) -> McpSettings {
    McpSettings {
        command: command.iter().map(|s| s.to_string()).collect(),
        env: Default::default(),
        cwd: None,
        allow: Vec::new(),
        allow_tools: Vec::new(),
        timeout_ms: Some(1000),
        startup_timeout_ms: 2000,
    }
}

#[test]
fn bad_settings_are_refused_with_words() {
    let e = McpHost::open("m", settings(&[]), &ctx()).err().unwrap();
    assert!(e.to_string().contains("command must name a program"));
    let mut s = settings(&["true"]);
    s.allow = vec!["everything".into()];
    let e = McpHost::open("m", s, &ctx()).err().unwrap();
    assert!(e.to_string().contains("\"destructive\""), "{e}");
}

#[test]
fn a_server_that_cannot_start_is_described_never_waited_for() {
    let t = Instant::now();
    let host = McpHost::open("m", settings(&["/nonexistent/server"]), &ctx()).unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "open must not wait");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let d = host.entry(&[]).unwrap().unwrap().description;
        if d.contains("restarting in") {
            assert!(d.contains("cannot start `/nonexistent/server`"), "{d}");
            break;
        }
        assert!(Instant::now() < deadline, "{d}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(host.ops(&[]).unwrap().is_empty());
    let g = host
        .guard(&path_of(&["resources", "x:%2F%2Fy"]), "read_body", None)
        .unwrap();
    assert!(!g.allowed());
    assert!(g.render().contains("✗ server: the server is not running"));
    let err = host
        .call(&[], "echo", &json!({}), &Default::default())
        .unwrap_err();
    assert!(matches!(err, HostError::NotFound(_)), "{err:?}");
    assert_eq!(host.entry(&path_of(&["nope"])).unwrap(), None);
    assert_eq!(host.entry(&path_of(&["tools", "a%zz"])).unwrap(), None);
}

#[test]
fn the_example_manifest_parses() {
    let text = include_str!("../../../mounts/mcp.toml");
    let m = Manifest::parse(text, "mcp.toml").unwrap();
    let hosts: Vec<McpSettings> = m
        .hosts
        .iter()
        .filter(|h| h.kind == "mcp")
        .map(|h| h.settings().unwrap())
        .collect();
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0].command[0], "npx");
    assert!(hosts[1].env.contains_key("MEMORY_FILE_PATH"));
}
