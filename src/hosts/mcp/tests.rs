//! Unit tests of the translations (no server) and of the host in-process on a server that
//! cannot start (no FUSE, no node needed).

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::render::*;
use super::*;
use crate::host::path_of;
use crate::manifest::Manifest;

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
fn policy_blocks_destructive_and_open_world_tools_stated_or_by_default() {
    let none = Policy {
        mount: "mcp/x".into(),
        ..Policy::default()
    };
    let destructive = hints(json!({"destructiveHint": true, "openWorldHint": false}));
    let open = hints(json!({"openWorldHint": true, "destructiveHint": false}));
    let both = hints(json!({"destructiveHint": true, "openWorldHint": true}));
    let safe = hints(json!({"readOnlyHint": true, "openWorldHint": false}));
    // The specification's defaults: a tool without annotations may be destructive and
    // open-world, so it is blocked, and the words say why.
    let c = none.condition("query", &Hints::default());
    assert!(!c.ok && c.policy);
    assert!(
        c.detail
            .contains("does not say whether \"query\" is read-only")
            && c.detail.contains("MCP specification's defaults")
            && c.detail.contains("\"destructive\" and \"open_world\""),
        "{}",
        c.detail
    );
    // Read-only alone leaves the open world to the default.
    assert!(
        !none
            .condition("t", &hints(json!({"readOnlyHint": true})))
            .ok
    );
    assert!(
        none.condition(
            "t",
            &hints(json!({"destructiveHint": false, "openWorldHint": false}))
        )
        .ok
    );
    assert!(none.condition("t", &safe).ok);
    // A read-only tool is never destructive, whatever else it says.
    assert!(
        none.condition(
            "t",
            &hints(json!({"readOnlyHint": true, "destructiveHint": true, "openWorldHint": false}))
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
fn prompts_and_template_reads_carry_the_policy_of_the_servers_tools() {
    let tools = vec![
        (
            "fetch".to_string(),
            hints(json!({"readOnlyHint": true, "openWorldHint": true})),
        ),
        (
            "get".to_string(),
            hints(json!({"readOnlyHint": true, "openWorldHint": false})),
        ),
    ];
    let none = Policy {
        mount: "mcp/fetch".into(),
        ..Policy::default()
    };
    let c = none.steered_condition(Steered::Prompt, Some("fetch"), &tools);
    assert!(!c.ok && c.policy, "{}", c.detail);
    assert_eq!(
        c.detail,
        "a prompt runs code of the server that this mount cannot see, and the server marks \
         tool \"fetch\" open-world; to allow it, add \"open_world\" to allow = [...] or \
         \"fetch\" to allow_prompts = [...] in the manifest's [[host]] table for \"mcp/fetch\""
    );
    let c = none.steered_condition(Steered::Template, Some("page"), &tools);
    assert!(
        !c.ok && c.detail.contains("\"page\" to allow_templates"),
        "{}",
        c.detail
    );
    // A resource whose template is gone can only be allowed by kind.
    let c = none.steered_condition(Steered::Template, None, &tools);
    assert!(
        !c.ok && !c.detail.contains("allow_templates"),
        "{}",
        c.detail
    );
    // Allowing the tool by name does not allow the prompt: they are different code.
    let tool_only = Policy {
        tools: vec!["fetch".into()],
        ..none.clone()
    };
    assert!(
        !tool_only
            .steered_condition(Steered::Prompt, Some("fetch"), &tools)
            .ok
    );
    let by_name = Policy {
        prompts: vec!["fetch".into()],
        ..none.clone()
    };
    let c = by_name.steered_condition(Steered::Prompt, Some("fetch"), &tools);
    assert!(
        c.ok && c.detail.contains("allow_prompts lists \"fetch\""),
        "{}",
        c.detail
    );
    assert!(
        !by_name
            .steered_condition(Steered::Template, Some("fetch"), &tools)
            .ok
    );
    let by_kind = Policy {
        open_world: true,
        ..none.clone()
    };
    assert!(
        by_kind
            .steered_condition(Steered::Prompt, Some("x"), &tools)
            .ok
    );
    // Destructive and open-world tools: both kinds are named, up to three tools each.
    let many: Vec<(String, Hints)> = (1..=5)
        .map(|i| (format!("rm{i}"), hints(json!({"destructiveHint": true}))))
        .chain(tools.clone())
        .collect();
    let c = by_kind.steered_condition(Steered::Prompt, Some("x"), &many);
    assert!(
        !c.ok
            && c.detail
                .contains("tools \"rm1\", \"rm2\", \"rm3\" and 2 more destructive;"),
        "{}",
        c.detail
    );
    // A server with only harmless tools: nothing to carry.
    let harmless = vec![(
        "get".to_string(),
        hints(json!({"readOnlyHint": true, "openWorldHint": false})),
    )];
    assert!(
        none.steered_condition(Steered::Prompt, Some("p"), &harmless)
            .ok
    );
    assert!(none.steered_condition(Steered::Prompt, Some("p"), &[]).ok);
}

#[test]
fn allow_lists_naming_what_the_server_lacks_are_warned_about() {
    let w = super::render::unknown_allowed(
        "allow_tools",
        &["fetch".to_string(), "fecth".to_string()],
        &["fetch", "get"],
    );
    assert_eq!(
        w,
        ["allow_tools names \"fecth\", which the server does not offer"]
    );
}

#[test]
fn restart_delays_double_up_to_their_cap() {
    let (first, max) = (Duration::from_secs(1), Duration::from_secs(60));
    let delays: Vec<u64> = (1..=9)
        .map(|n| super::client::restart_delay(n, first, max).as_secs())
        .collect();
    assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    assert_eq!(
        super::client::restart_delay(u32::MAX, first, max),
        max,
        "no overflow"
    );
    let small =
        super::client::restart_delay(3, Duration::from_millis(100), Duration::from_millis(300));
    assert_eq!(small, Duration::from_millis(300));
}

#[test]
fn exit_statuses_in_words() {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        super::client::exit_words(std::process::ExitStatus::from_raw(3 << 8)),
        "exited (exit status: 3)"
    );
    assert_eq!(
        super::client::exit_words(std::process::ExitStatus::from_raw(libc::SIGKILL)),
        "was killed by signal 9 (SIGKILL)"
    );
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
    // Closed, and saying so: the served schema is what the runtime enforces (the world's
    // tests check its args against it: `world/tests/mcp_schemas.rs`).
    assert_eq!(s["additionalProperties"], json!(false));
    // A schema without properties (or type) still is an object schema.
    let bare = op_schema(&Map::new());
    assert_eq!(
        bare,
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
    // A server that leaves it open keeps it open.
    let mut open = Map::new();
    open.insert("additionalProperties".into(), json!(true));
    assert_eq!(op_schema(&open)["additionalProperties"], json!(true));
}

#[test]
fn prompt_arguments_become_a_schema() {
    let s = prompt_schema(&[
        ("city".into(), Some("Name of the city".into()), true),
        ("state".into(), None, false),
    ]);
    assert_eq!(s["required"], json!(["city"]));
    assert_eq!(s["properties"]["city"]["description"], "Name of the city");
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
    let mut found = Found::default();
    let result = json!({
        "content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "demo://r/1", "name": "One", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "demo://r/2", "blob": "AAEC", "mimeType": "application/octet-stream"}}
        ],
        "structuredContent": {"t": 1}
    });
    let text = tool_result_text(&result, &mut found);
    assert!(
        text.starts_with("hello\n[image: image/png, 8 bytes, kept as content/1.png of this run]\n"),
        "{text}"
    );
    assert!(text.contains("[resource link: demo://r/1 (One), text/plain]"));
    assert!(text.contains(
        "[blob demo://r/2: application/octet-stream, 3 bytes, kept as content/2.bin of this run]"
    ));
    // The media's bytes, for the run's files, in order.
    assert_eq!(found.parts.len(), 2);
    assert_eq!(found.parts[0].mime, "image/png");
    assert_eq!(found.parts[0].bytes, b"\x89PNG\r\n\x1a\n");
    assert_eq!(found.parts[1].bytes, [0, 1, 2]);
    assert!(text.contains("structured content:\n{\n  \"t\": 1\n}"));
    assert_eq!(found.uris, ["demo://r/1", "demo://r/2"]);
    // Structured content that a text block already shows is not repeated.
    let twice =
        json!({"content": [{"type": "text", "text": "{\"t\": 1}"}], "structuredContent": {"t": 1}});
    assert_eq!(tool_result_text(&twice, &mut found), "{\"t\": 1}");
    // server-filesystem: `{"content": TEXT}` beside the very TEXT.
    let body = "line one\nline two\n".repeat(1000);
    let fs = json!({"content": [{"type": "text", "text": body}], "structuredContent": {"content": body}});
    assert_eq!(tool_result_text(&fs, &mut found), body);
    // Values the text does not hold are shown, all of it.
    let more = json!({"content": [{"type": "text", "text": "Sum is 42"}],
                      "structuredContent": {"sum": 42, "unit": "apples"}});
    let text = tool_result_text(&more, &mut found);
    assert!(
        text.starts_with("Sum is 42\nstructured content:\n"),
        "{text}"
    );
    assert!(text.contains("\"unit\": \"apples\""), "{text}");
    // server-filesystem's read_media_file: the image's base64 again in structured content.
    let media = json!({"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
                       "structuredContent": {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}});
    let text = tool_result_text(&media, &mut Found::default());
    assert!(!text.contains("structured content"), "{text}");
    // Annotations stay: beside a text, and in a media part's note.
    let noted = json!({"content": [
        {"type": "text", "text": "for you", "annotations": {"audience": ["user"], "priority": 0.8}},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav", "annotations": {"audience": ["assistant"]}}]});
    let mut f = Found::default();
    let text = tool_result_text(&noted, &mut f);
    assert!(
        text.starts_with(
            "for you\n[annotations of the text above: audience user · priority 0.8]\n"
        ),
        "{text}"
    );
    assert_eq!(f.parts[0].note, "audience assistant");
    // Without text blocks the structured content is all there is.
    let only = json!({"content": [], "structuredContent": {"sum": 42}});
    assert!(tool_result_text(&only, &mut found).contains("\"sum\": 42"));
    let prompt = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]});
    assert_eq!(prompt_text(&prompt, &mut found), "user: hi");
    // A body is the messages alone, each `role: text`, the server's description left out.
    let two = json!({"description": "a greeting", "messages": [
        {"role": "user", "content": {"type": "text", "text": "hi"}},
        {"role": "assistant", "content": {"type": "text", "text": "hello\nthere"}}
    ]});
    assert_eq!(prompt_body(&two), "user: hi\nassistant: hello\nthere\n");
}

fn ctx() -> HostContext {
    let dir = std::env::temp_dir();
    HostContext {
        mount_point: dir.join("wip-mcp-unit-mount"),
        ..HostContext::for_tests(&dir)
    }
}

fn settings(command: &[&str]) -> McpSettings {
    McpSettings {
        command: command.iter().map(|s| s.to_string()).collect(),
        env: Default::default(),
        pass_env: Vec::new(),
        cwd: None,
        allow: Vec::new(),
        allow_tools: Vec::new(),
        allow_prompts: Vec::new(),
        allow_templates: Vec::new(),
        timeout_ms: Some(1000),
        call_timeout_ms: None,
        startup_timeout_ms: 2000,
        restart_delay_ms: 1000,
        restart_delay_max_ms: 60_000,
    }
}

#[test]
fn bad_settings_are_refused_with_words() {
    let e = McpHost::open(settings(&[]), &ctx().at("m")).err().unwrap();
    assert!(e.to_string().contains("command must name a program"));
    let mut s = settings(&["true"]);
    s.allow = vec!["everything".into()];
    let e = McpHost::open(s, &ctx().at("m")).err().unwrap();
    assert!(e.to_string().contains("\"destructive\""), "{e}");
    let mut s = settings(&["true"]);
    s.restart_delay_ms = 5000;
    s.restart_delay_max_ms = 1000;
    let e = McpHost::open(s, &ctx().at("m")).err().unwrap();
    assert!(e.to_string().contains("restart_delay_max_ms (1000)"), "{e}");
}

/// Open a host on another thread, failing (not hanging) if `open` never returns.
fn open_bounded(s: McpSettings) -> McpHost {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(McpHost::open(s, &ctx().at("m")));
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("McpHost::open never returned")
        .unwrap()
}

#[test]
fn opening_never_waits_for_the_server() {
    // A server that never answers, with a startup timeout far beyond the bound above: had
    // `open` waited for it, it would not have returned.
    let mut s = settings(&["sleep", "600"]);
    s.startup_timeout_ms = 3_600_000;
    let host = open_bounded(s);
    let d = host.entry(&[]).unwrap().unwrap().description;
    assert!(d.contains("· starting for "), "{d}");
    let g = host.guard(&[], "anything", None);
    assert!(matches!(g, Err(HostError::NotFound(_))), "{g:?}");
}

#[test]
fn a_server_that_cannot_start_is_described_with_its_real_delay() {
    let mut s = settings(&["/nonexistent/server"]);
    s.restart_delay_ms = 300;
    s.restart_delay_max_ms = 600;
    let host = open_bounded(s);
    let deadline = Instant::now() + Duration::from_secs(30);
    // Its delays grow to the cap and stay there, as the description says: (failures in a
    // row, the wait it names) for every down phase seen.
    let mut seen: Vec<(u32, String)> = Vec::new();
    loop {
        let d = host.entry(&[]).unwrap().unwrap().description;
        if let Some(rest) = d.split("restarting").nth(1) {
            assert!(d.contains("cannot start `/nonexistent/server`"), "{d}");
            assert!(
                !rest.contains("in 0 s") && !rest.contains("in 0.0 s"),
                "{d}"
            );
            let wait = rest
                .split("(a ")
                .nth(1)
                .and_then(|r| r.split_once(" wait after "));
            let (wait, after) = wait.unwrap_or_else(|| panic!("no wait in {d}"));
            let failures: u32 = after.split(' ').next().unwrap().parse().unwrap();
            if seen.last().map(|(f, _)| *f) != Some(failures) {
                seen.push((failures, wait.to_string()));
            }
        }
        if seen.last().is_some_and(|(f, _)| *f >= 4) {
            break;
        }
        assert!(Instant::now() < deadline, "{d} (seen {seen:?})");
        std::thread::sleep(Duration::from_millis(20));
    }
    for (failures, wait) in &seen {
        let want = if *failures == 1 { "0.3 s" } else { "0.6 s" };
        assert_eq!(wait, want, "after {failures} failures: {seen:?}");
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

/// Wait (bounded) until the root's description holds `want`; returns it.
fn wait_description(host: &McpHost, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = host.entry(&[]).unwrap().unwrap().description;
        if d.contains(want) {
            return d;
        }
        assert!(Instant::now() < deadline, "never {want:?}: {d}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_printing_junk_on_stdout_is_told_by_its_first_junk_line() {
    let mut s = settings(&[
        "sh",
        "-c",
        "echo 'Listening on port 3000 (not MCP)'; echo '  second junk'; exec sleep 600",
    ]);
    s.startup_timeout_ms = 1000;
    let host = open_bounded(s);
    let d = wait_description(&host, "restarting");
    assert!(
        d.contains(
            "did not initialize within 1 s (startup_timeout_ms); it printed 2 lines on stdout \
             that are not JSON-RPC, the first: `Listening on port 3000 (not MCP)`"
        ),
        "{d}"
    );
}

#[test]
fn a_server_that_dies_is_told_by_its_signal_and_its_own_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let lives = dir.path().join("lives");
    // Each life says which it is on stderr, then kills itself before answering.
    let script = format!(
        "echo x >> {0}; echo \"life $(wc -l < {0}) ending\" >&2; kill -9 $$",
        lives.display()
    );
    let host = open_bounded(settings(&["sh", "-c", &script]));
    let d = wait_description(&host, "after 2 failures in a row");
    assert!(
        d.contains(
            "it was killed by signal 9 (SIGKILL) (its stderr since it started: life 2 ending)"
        ),
        "{d}"
    );
    assert!(!d.contains("life 1"), "only this life's stderr: {d}");
}
