//! The mcp host against real MCP servers nobody here wrote, installed from npm by
//! scripts/fixtures.sh (server-everything and server-memory, pinned), run with node over
//! stdio, mounted for real and driven as an agent would.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Mount;

const EIO: i32 = libc::EIO;
const EACCES: i32 = libc::EACCES;
const EPERM: i32 = libc::EPERM;
const ETIMEDOUT: i32 = libc::ETIMEDOUT;

/// The npm packages scripts/fixtures.sh installs (the MCP servers among them).
fn node_modules() -> PathBuf {
    common::fixtures().join("node/node_modules")
}

fn everything_js() -> String {
    node_modules()
        .join("@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

fn memory_js() -> String {
    node_modules()
        .join("@modelcontextprotocol/server-memory/dist/index.js")
        .display()
        .to_string()
}

fn everything_host(path: &str, extra: &str) -> String {
    format!(
        "[[host]]\nkind = \"mcp\"\npath = \"{path}\"\ncommand = [\"node\", {:?}, \"stdio\"]\n{extra}\n",
        everything_js()
    )
}

fn memory_host(path: &str, file: &Path, extra: &str) -> String {
    format!(
        "[[host]]\nkind = \"mcp\"\npath = \"{path}\"\ncommand = [\"node\", {:?}]\nenv = {{ MEMORY_FILE_PATH = {:?} }}\n{extra}\n",
        memory_js(),
        file.display().to_string()
    )
}

/// Wait (bounded) until the host's description says its server is ready.
fn wait_ready(m: &Mount, host: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = m.read(&format!("{host}/description"));
        if d.contains("· ready ·") {
            return d;
        }
        assert!(Instant::now() < deadline, "{host} never got ready: {d}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ls(m: &Mount, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(m.path(dir))
        .unwrap_or_else(|e| panic!("ls {dir}: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !["description", "ref", "ops"].contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

/// The tools server-everything 2026.8.31 offers a client without sampling, elicitation or
/// roots (it registers those tools only for clients that have them).
const EVERYTHING_TOOLS: [&str; 13] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "simulate-research-query",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
];

#[test]
fn everything_server_tools_as_ops() {
    let m = Mount::start(Some(&everything_host("mcp/everything", "")));
    let d = wait_ready(&m, "mcp/everything");
    assert!(d.contains("mcp-servers/everything"), "{d}");
    assert!(d.contains("13 tools"), "{d}");
    let e = "mcp/everything";
    assert_eq!(ls(&m, &format!("{e}/ops")), EVERYTHING_TOOLS);
    assert_eq!(ls(&m, &format!("{e}/tools")), EVERYTHING_TOOLS);

    // Schema, description with annotations in words, guard.
    let schema: serde_json::Value =
        serde_json::from_str(&m.read(&format!("{e}/ops/echo/schema"))).unwrap();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["message"]["type"], "string");
    assert_eq!(schema["required"][0], "message");
    let desc = m.read(&format!("{e}/ops/echo/description"));
    assert!(desc.contains("Echoes back"), "{desc}");
    assert!(
        desc.contains("read-only") && desc.contains("idempotent"),
        "{desc}"
    );
    let guard = m.read(&format!("{e}/ops/echo/guard"));
    assert!(guard.starts_with("allowed\n"), "{guard}");
    assert!(
        guard.contains("✓ server") && guard.contains("✓ policy"),
        "{guard}"
    );

    // Calls: plain text for the one required string, JSON, key=value.
    let out = m.ok(
        "echo 'hello world' > mcp/everything/ops/echo/call && cat mcp/everything/ops/echo/result",
    );
    assert_eq!(out, "Echo: hello world\n");
    m.call(&format!("{e}/ops/get-sum"), "{\"a\": 2, \"b\": 40}\n")
        .unwrap();
    assert!(m.result(&format!("{e}/ops/get-sum")).contains("42"));
    m.call(&format!("{e}/tools/get-sum/ops/call"), "a=1\nb=2\n")
        .unwrap();
    assert!(m
        .result(&format!("{e}/tools/get-sum/ops/call"))
        .contains('3'));
    // Bad args never reach the server.
    assert_eq!(
        m.call(&format!("{e}/ops/get-sum"), "{\"a\": \"two\"}"),
        Err(libc::EINVAL)
    );

    // Media summarised, structured content as JSON.
    m.call(&format!("{e}/ops/get-tiny-image"), "\n").unwrap();
    let img = m.result(&format!("{e}/ops/get-tiny-image"));
    assert!(
        img.contains("[image: image/png,") && img.contains("bytes]"),
        "{img}"
    );
    m.call(
        &format!("{e}/ops/get-structured-content"),
        "{\"location\":\"Chicago\"}",
    )
    .unwrap();
    let sc = m.result(&format!("{e}/ops/get-structured-content"));
    assert!(sc.contains("temperature"), "{sc}");
    m.call(
        &format!("{e}/ops/get-annotated-message"),
        "{\"messageType\":\"error\"}",
    )
    .unwrap();
    assert!(!m
        .result(&format!("{e}/ops/get-annotated-message"))
        .is_empty());
    m.call(
        &format!("{e}/ops/get-resource-reference"),
        "{\"resourceType\":\"Text\",\"resourceId\":4}",
    )
    .unwrap();
    let r = m.result(&format!("{e}/ops/get-resource-reference"));
    assert!(r.contains("Resource 4"), "{r}");
    // Resource links become discovered entries that exist.
    m.call(&format!("{e}/ops/get-resource-links"), "{\"count\":2}")
        .unwrap();
    let links = m.result(&format!("{e}/ops/get-resource-links"));
    let found: Vec<&str> = links
        .lines()
        .filter_map(|l| l.split('\t').next())
        .filter(|p| p.contains("/resources/"))
        .collect();
    assert_eq!(found.len(), 2, "{links}");
    for p in found {
        let d = std::fs::read_to_string(format!("{p}/description")).unwrap();
        assert!(d.contains("from template"), "{d}");
    }
    for tool in ["toggle-simulated-logging", "toggle-subscriber-updates"] {
        m.call(&format!("{e}/ops/{tool}"), "\n").unwrap();
        assert!(!m.result(&format!("{e}/ops/{tool}")).is_empty());
    }
    m.call(&format!("{e}/ops/get-env"), "\n").unwrap();
    assert!(m.result(&format!("{e}/ops/get-env")).contains("PATH"));

    // A tool that fails: EIO with the tool's own words.
    assert_eq!(
        m.call(
            &format!("{e}/ops/simulate-research-query"),
            "{\"topic\":\"fuse\"}"
        ),
        Err(EIO)
    );
    let err = m.result(&format!("{e}/ops/simulate-research-query"));
    assert!(err.starts_with("error: tool error:"), "{err}");
    assert!(err.contains("task"), "{err}");

    // A long-running tool (progress notifications along the way).
    let t = Instant::now();
    m.call(
        &format!("{e}/ops/trigger-long-running-operation"),
        "{\"duration\":2,\"steps\":4}",
    )
    .unwrap();
    assert!(t.elapsed() >= Duration::from_secs(2));
    let r = m.result(&format!("{e}/ops/trigger-long-running-operation"));
    assert!(r.contains("completed"), "{r}");

    // The journal shows the calls.
    let log = m.read(".wip/log");
    for op in [
        "echo",
        "get-sum",
        "simulate-research-query",
        "trigger-long-running-operation",
    ] {
        assert!(
            log.contains(&format!("/mcp/everything {op} ")),
            "{op} not in:\n{log}"
        );
    }
    assert!(m.journal_count() >= 14);
    let runs = m.ok("ls mcp/everything/ops/echo/runs/ && cat mcp/everything/ops/echo/runs/1/args");
    assert!(runs.contains("hello world"), "{runs}");
}

#[test]
fn everything_server_resources_templates_prompts() {
    let m = Mount::start(Some(&everything_host("mcp/everything", "")));
    let d = wait_ready(&m, "mcp/everything");
    let e = "mcp/everything";
    // Every resource listed and read; names are URIs, refs the URIs themselves.
    let resources = ls(&m, &format!("{e}/resources"));
    assert_eq!(resources.len(), 7, "{resources:?}");
    assert!(d.contains("7 resources"), "{d}");
    for r in &resources {
        let dir = format!("{e}/resources/{r}");
        let uri = m.read(&format!("{dir}/ref"));
        assert_eq!(uri.trim_end(), r.replace("%2F", "/"));
        assert!(uri.starts_with("demo://resource/static/document/"), "{uri}");
        m.call(&format!("{dir}/ops/read_body"), "\n").unwrap();
        let body = m.result(&format!("{dir}/ops/read_body"));
        assert!(body.len() > 100, "{r}: {body}");
    }
    let features = m.result(&format!(
        "{e}/resources/demo:%2F%2Fresource%2Fstatic%2Fdocument%2Ffeatures.md/ops/read_body"
    ));
    assert!(features.contains("## Tools"), "{features}");

    // Templates: ops whose schema is the URI template's variables; a read creates an entry.
    let templates = ls(&m, &format!("{e}/templates"));
    assert_eq!(
        templates,
        ["Dynamic Blob Resource", "Dynamic Text Resource"]
    );
    let t = format!("{e}/templates/Dynamic Text Resource");
    let schema: serde_json::Value =
        serde_json::from_str(&m.read(&format!("{t}/ops/read/schema"))).unwrap();
    assert_eq!(schema["required"][0], "resourceId");
    m.call(&format!("{t}/ops/read"), "7\n").unwrap();
    let out = m.result(&format!("{t}/ops/read"));
    assert!(
        out.starts_with("demo://resource/dynamic/text/7\nResource 7:"),
        "{out}"
    );
    let entry = out
        .lines()
        .find_map(|l| l.split_once('\t').map(|(p, _)| p.to_string()))
        .expect("a discovered entry");
    assert!(
        entry.ends_with("/resources/demo:%2F%2Fresource%2Fdynamic%2Ftext%2F7"),
        "{entry}"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{entry}/ref")).unwrap(),
        "demo://resource/dynamic/text/7\n"
    );
    // Not listed by its parent (a result, not part of the server's list)…
    assert!(!ls(&m, &format!("{e}/resources"))
        .iter()
        .any(|n| n.contains("dynamic")));
    // …but reachable and readable.
    let body = m.ok(&format!(
        "echo > '{entry}/ops/read_body/call' && cat '{entry}/ops/read_body/result'"
    ));
    assert!(body.starts_with("Resource 7:"), "{body}");
    let b = format!("{e}/templates/Dynamic Blob Resource");
    m.call(&format!("{b}/ops/read"), "{\"resourceId\":\"3\"}")
        .unwrap();
    let blob = m.result(&format!("{b}/ops/read"));
    assert!(
        blob.contains("[blob demo://resource/dynamic/blob/3:") && blob.contains("base64"),
        "{blob}"
    );

    // Every prompt listed and rendered.
    let prompts = ls(&m, &format!("{e}/prompts"));
    assert_eq!(
        prompts,
        [
            "args-prompt",
            "completable-prompt",
            "resource-prompt",
            "simple-prompt"
        ]
    );
    let p = format!("{e}/prompts");
    m.call(&format!("{p}/simple-prompt/ops/get"), "\n").unwrap();
    assert!(m
        .result(&format!("{p}/simple-prompt/ops/get"))
        .contains("simple prompt"));
    m.call(&format!("{p}/args-prompt/ops/get"), "Kyoto\n")
        .unwrap();
    assert!(m
        .result(&format!("{p}/args-prompt/ops/get"))
        .contains("Kyoto"));
    assert_eq!(
        m.call(&format!("{p}/args-prompt/ops/get"), "\n"),
        Err(libc::EINVAL)
    );
    m.call(
        &format!("{p}/completable-prompt/ops/get"),
        "{\"department\":\"Engineering\",\"name\":\"Alice\"}",
    )
    .unwrap();
    assert!(m
        .result(&format!("{p}/completable-prompt/ops/get"))
        .contains("Alice"));
    m.call(
        &format!("{p}/resource-prompt/ops/get"),
        "{\"resourceType\":\"Text\",\"resourceId\":\"2\"}",
    )
    .unwrap();
    let rp = m.result(&format!("{p}/resource-prompt/ops/get"));
    assert!(
        rp.contains("Resource 2:")
            && rp.contains("/resources/demo:%2F%2Fresource%2Fdynamic%2Ftext%2F2\t"),
        "{rp}"
    );
    let log = m.read(".wip/log");
    assert!(
        log.contains("/mcp/everything/prompts/resource-prompt get "),
        "{log}"
    );
}

#[test]
fn timeout_shorter_than_a_long_running_tool() {
    let m = Mount::start(Some(&everything_host(
        "mcp/everything",
        "timeout_ms = 1000",
    )));
    wait_ready(&m, "mcp/everything");
    let e = "mcp/everything";
    let t = Instant::now();
    assert_eq!(
        m.call(
            &format!("{e}/ops/trigger-long-running-operation"),
            "{\"duration\":5,\"steps\":5}"
        ),
        Err(ETIMEDOUT)
    );
    assert!(t.elapsed() < Duration::from_secs(4));
    let r = m.result(&format!("{e}/ops/trigger-long-running-operation"));
    assert!(
        r.contains("did not answer within 1.0s") && r.contains("timeout_ms"),
        "{r}"
    );
    // The server and the mount go on.
    m.call(&format!("{e}/ops/echo"), "still here\n").unwrap();
    assert_eq!(m.result(&format!("{e}/ops/echo")), "Echo: still here\n");
}

#[test]
fn destructive_and_open_world_tools_need_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let m = Mount::start(Some(&format!(
        "{}{}",
        everything_host("mcp/everything", ""),
        memory_host("mcp/memory", &file, "")
    )));
    wait_ready(&m, "mcp/everything");
    wait_ready(&m, "mcp/memory");
    // Open-world: blocked by policy; the call never reaches the server.
    let g = m.read("mcp/everything/ops/gzip-file-as-resource/guard");
    assert!(g.starts_with("blocked\n"), "{g}");
    assert!(
        g.contains("open-world") && g.contains("allow = [...]") && g.contains("allow_tools"),
        "{g}"
    );
    assert_eq!(
        m.call(
            "mcp/everything/ops/gzip-file-as-resource",
            "{\"name\":\"x\",\"data\":\"data:,x\"}"
        ),
        Err(EACCES)
    );
    assert!(m
        .read("mcp/everything/ops/gzip-file-as-resource/description")
        .contains("open-world"));
    // Destructive: blocked too.
    m.call(
        "mcp/memory/ops/create_entities",
        "{\"entities\":[{\"name\":\"Temp\",\"entityType\":\"note\",\"observations\":[]}]}",
    )
    .unwrap();
    assert!(m
        .read("mcp/memory/ops/delete_entities/guard")
        .contains("✗ policy"));
    assert_eq!(
        m.call(
            "mcp/memory/ops/delete_entities",
            "{\"entityNames\":[\"Temp\"]}"
        ),
        Err(EACCES)
    );
    assert!(m
        .result("mcp/memory/ops/delete_entities")
        .contains("add \"destructive\" to allow = [...]"));
    drop(m);

    // The manifest allows them: by kind for the memory, by name for the open-world tool
    // (only its guard is read: it would fetch URLs).
    let m = Mount::start(Some(&format!(
        "{}{}",
        everything_host(
            "mcp/everything",
            "allow_tools = [\"gzip-file-as-resource\"]"
        ),
        memory_host("mcp/memory", &file, "allow = [\"destructive\"]")
    )));
    wait_ready(&m, "mcp/everything");
    wait_ready(&m, "mcp/memory");
    let g = m.read("mcp/everything/ops/gzip-file-as-resource/guard");
    assert!(
        g.starts_with("allowed\n") && g.contains("allow_tools"),
        "{g}"
    );
    assert!(m
        .read("mcp/everything/ops/echo/guard")
        .starts_with("allowed\n"));
    assert!(m
        .read("mcp/memory/ops/delete_entities/guard")
        .starts_with("allowed\n"));
    m.call(
        "mcp/memory/ops/delete_entities",
        "{\"entityNames\":[\"Temp\"]}",
    )
    .unwrap();
    m.call("mcp/memory/ops/read_graph", "\n").unwrap();
    assert!(!m.result("mcp/memory/ops/read_graph").contains("Temp"));
}

#[test]
fn memory_server_entities_through_ops() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let m = Mount::start(Some(&memory_host("mcp/memory", &file, "")));
    let d = wait_ready(&m, "mcp/memory");
    assert!(d.contains("memory-server"), "{d}");
    let ops = ls(&m, "mcp/memory/ops");
    for t in [
        "create_entities",
        "create_relations",
        "search_nodes",
        "read_graph",
        "open_nodes",
    ] {
        assert!(ops.iter().any(|o| o == t), "{t} missing from {ops:?}");
    }
    m.call(
        "mcp/memory/ops/create_entities",
        r#"{"entities":[{"name":"Ada Lovelace","entityType":"person","observations":["wrote the first program"]},
                        {"name":"Analytical Engine","entityType":"machine","observations":["designed by Babbage"]}]}"#,
    )
    .unwrap();
    m.call(
        "mcp/memory/ops/create_relations",
        r#"{"relations":[{"from":"Ada Lovelace","to":"Analytical Engine","relationType":"programmed"}]}"#,
    )
    .unwrap();
    let out = m.ok("echo 'first program' > mcp/memory/ops/search_nodes/call && cat mcp/memory/ops/search_nodes/result");
    assert!(
        out.contains("Ada Lovelace") && !out.contains("\"name\": \"Analytical Engine\""),
        "{out}"
    );
    m.call("mcp/memory/ops/read_graph", "\n").unwrap();
    let g = m.result("mcp/memory/ops/read_graph");
    assert!(
        g.contains("programmed") && g.contains("Analytical Engine"),
        "{g}"
    );
    // Its one resource, the whole graph, read as an entry.
    let res = ls(&m, "mcp/memory/resources");
    assert_eq!(res.len(), 1, "{res:?}");
    m.call(
        &format!("mcp/memory/resources/{}/ops/read_body", res[0]),
        "\n",
    )
    .unwrap();
    assert!(m
        .result(&format!("mcp/memory/resources/{}/ops/read_body", res[0]))
        .contains("Ada Lovelace"));
    // The server wrote where the manifest's env told it to.
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .contains("Ada Lovelace"));
}

/// A small server on the MCP SDK that server-everything installs: it can exit on demand
/// and offer a new tool at run time (with a `list_changed` notification).
fn scripted_server(dir: &Path) -> PathBuf {
    let sdk = node_modules().join("@modelcontextprotocol/sdk/dist/esm");
    let url = |p: &str| format!("file://{}", sdk.join(p).display());
    let script = format!(
        r#"import {{ Server }} from "{server}";
import {{ StdioServerTransport }} from "{stdio}";
import {{ ListToolsRequestSchema, CallToolRequestSchema }} from "{types}";
const tools = [
  {{ name: "ping", description: "answers pong", inputSchema: {{ type: "object", properties: {{}} }} }},
  {{ name: "exit", description: "ends the server process", inputSchema: {{ type: "object", properties: {{}} }} }},
  {{ name: "add_tool", description: "offers one more tool", inputSchema: {{ type: "object", properties: {{ name: {{ type: "string" }} }}, required: ["name"] }} }},
];
const server = new Server({{ name: "scripted", version: "1.0.0" }}, {{ capabilities: {{ tools: {{ listChanged: true }} }} }});
server.setRequestHandler(ListToolsRequestSchema, async () => ({{ tools }}));
server.setRequestHandler(CallToolRequestSchema, async (req) => {{
  const {{ name, arguments: args }} = req.params;
  if (name === "ping") return {{ content: [{{ type: "text", text: "pong" }}] }};
  if (name === "exit") {{ console.error("exiting as asked"); process.exit(3); }}
  if (name === "add_tool") {{
    tools.push({{ name: args.name, description: "added at run time", inputSchema: {{ type: "object", properties: {{}} }} }});
    await server.sendToolListChanged();
    return {{ content: [{{ type: "text", text: "added " + args.name }}] }};
  }}
  if (tools.some((t) => t.name === name)) return {{ content: [{{ type: "text", text: "ran " + name }}] }};
  return {{ content: [{{ type: "text", text: "no tool " + name }}], isError: true }};
}});
await server.connect(new StdioServerTransport());
"#,
        server = url("server/index.js"),
        stdio = url("server/stdio.js"),
        types = url("types.js"),
    );
    let path = dir.join("scripted.mjs");
    std::fs::write(&path, script).unwrap();
    path
}

#[test]
fn list_changed_refreshes_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let script = scripted_server(dir.path());
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"mcp\"\npath = \"s\"\ncommand = [\"node\", {:?}]\n",
        script.display().to_string()
    )));
    wait_ready(&m, "s");
    assert_eq!(ls(&m, "s/ops"), ["add_tool", "exit", "ping"]);
    m.call("s/ops/add_tool", "fresh\n").unwrap();
    // The notification arrives on its own; the host re-lists and reports the change.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ls(&m, "s/tools").contains(&"fresh".to_string()) {
        assert!(
            Instant::now() < deadline,
            "new tool never appeared: {:?}",
            ls(&m, "s/tools")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(m
        .read("s/ops/fresh/description")
        .contains("added at run time"));
    assert!(m.read("s/description").contains("4 tools"));
    // The root's `ops/` listing, cached by the kernel above, was dropped with the change.
    assert_eq!(ls(&m, "s/ops"), ["add_tool", "exit", "fresh", "ping"]);
    m.call("s/ops/fresh", "\n").unwrap();
    assert_eq!(m.result("s/ops/fresh"), "ran fresh\n");
    // The change feed shows the host's own change.
    assert!(m.read(".wip/events").contains("\"changed\""));
}

#[test]
fn a_server_that_exits_is_restarted_and_the_mount_stays_responsive() {
    let dir = tempfile::tempdir().unwrap();
    let script = scripted_server(dir.path());
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"mcp\"\npath = \"s\"\ncommand = [\"node\", {:?}]\n\
         [[host]]\nkind = \"mcp\"\npath = \"never\"\ncommand = [\"false\"]\n\
         [[host]]\nkind = \"mcp\"\npath = \"missing\"\ncommand = [\"/nonexistent/mcp-server\"]\n",
        script.display().to_string()
    )));
    wait_ready(&m, "s");
    m.call("s/ops/ping", "\n").unwrap();
    // The server dies during a call: EIO with words.
    assert_eq!(m.call("s/ops/exit", "\n"), Err(EIO));
    let r = m.result("s/ops/exit");
    assert!(r.starts_with("error: protocol error: tool exit:"), "{r}");
    // Its description says so, guards block with the reason, the mount answers.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen_down = false;
    loop {
        let d = m.read("s/description");
        if d.contains("restarting in") {
            assert!(d.contains("exited") || d.contains("closed"), "{d}");
            seen_down = true;
            let g = m.read("s/ops/ping/guard");
            if g.starts_with("blocked") {
                assert!(g.contains("✗ server: the server is not running"), "{g}");
                if m.call("s/ops/ping", "\n") == Err(EPERM) {
                    assert!(m.result("s/ops/ping").contains("not running"));
                }
            }
        }
        if seen_down && d.contains("· ready ·") {
            break;
        }
        assert!(Instant::now() < deadline, "no restart: {d}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Restarted: calls work again.
    m.call("s/ops/ping", "\n").unwrap();
    assert_eq!(m.result("s/ops/ping"), "pong\n");

    // Servers that never start: the description says why, nothing hangs.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let never = m.read("never/description");
        let missing = m.read("missing/description");
        if never.contains("restarting in") && missing.contains("restarting in") {
            assert!(never.contains("MCP server `false`"), "{never}");
            assert!(never.contains("initialize"), "{never}");
            assert!(
                missing.contains("cannot start `/nonexistent/mcp-server`"),
                "{missing}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never: {never}\nmissing: {missing}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ls(&m, "never/ops").is_empty());
    assert_eq!(
        ls(&m, "never"),
        ["prompts", "resources", "templates", "tools"]
    );
    m.ok("ls -R never > /dev/null && cat never/tools/description");
}
