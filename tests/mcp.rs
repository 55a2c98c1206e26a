//! The mcp host against real MCP servers nobody here wrote, installed by
//! scripts/fixtures.sh, pinned: server-everything, server-memory, server-filesystem and
//! server-sequential-thinking from npm (run with node), mcp-server-sqlite and
//! mcp-server-fetch from PyPI (each in its virtualenv), over stdio, mounted for real and
//! driven as an agent would; and a scripted server on the MCP SDK for what no real server
//! does on demand (exit, crash-loop, change its tools, log every request).

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

/// The entry point of an npm MCP server under `modules` (a node_modules folder).
fn server_js(modules: PathBuf, server: &str) -> String {
    modules
        .join(format!("@modelcontextprotocol/{server}/dist/index.js"))
        .display()
        .to_string()
}

fn everything_js() -> String {
    server_js(node_modules(), "server-everything")
}

fn memory_js() -> String {
    server_js(node_modules(), "server-memory")
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
        // Ready, and its tools are ops (the kernel and the world may hold the listing from
        // before for a moment).
        let ops = std::fs::read_dir(m.path(&format!("{host}/ops")))
            .map(|r| r.count())
            .unwrap_or(0);
        if d.contains("· ready ·") && ops > 0 {
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
    // Closed, as the runtime treats it, and saying so.
    assert_eq!(schema["additionalProperties"], false);
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
    // Bad args are EINVAL (that they never reach the server is shown on the scripted
    // server, which logs its requests: bad_args_never_reach_the_server).
    assert_eq!(
        m.call(&format!("{e}/ops/get-sum"), "{\"a\": \"two\"}"),
        Err(libc::EINVAL)
    );

    // Media kept as the run's files, structured content as JSON.
    m.call(&format!("{e}/ops/get-tiny-image"), "\n").unwrap();
    let img = m.result(&format!("{e}/ops/get-tiny-image"));
    assert!(
        img.contains("[image: image/png, 4033 bytes, kept as content/1.png of this run]")
            && img.contains("/content/1.png\timage/png, 4033 bytes"),
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
    assert_eq!(
        m.result(&format!("{e}/ops/get-annotated-message")),
        "Error: Operation failed\n[annotations of the text above: audience user, assistant · priority 1]\n"
    );
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
    for (tool, said) in [
        (
            "toggle-simulated-logging",
            "Started simulated, random-leveled logging for session",
        ),
        (
            "toggle-subscriber-updates",
            "Started simulated resource updated notifications for session",
        ),
    ] {
        m.call(&format!("{e}/ops/{tool}"), "\n").unwrap();
        let r = m.result(&format!("{e}/ops/{tool}"));
        assert!(r.starts_with(said), "{tool}: {r}");
    }
    m.call(&format!("{e}/ops/get-env"), "\n").unwrap();
    assert!(m.result(&format!("{e}/ops/get-env")).contains("PATH"));

    // A tool that requires a task runs as one (see the task test for its progress and
    // cancel).
    m.call(
        &format!("{e}/ops/simulate-research-query"),
        "{\"topic\":\"fuse\"}",
    )
    .unwrap();
    let r = m.result(&format!("{e}/ops/simulate-research-query"));
    assert!(r.starts_with("# Research Report: fuse"), "{r}");

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
    // Every call above, the refused one too: 14 runs.
    assert_eq!(m.journal_count(), 14);
    let runs = m.ok("ls mcp/everything/ops/echo/runs/ && cat mcp/everything/ops/echo/runs/1/args");
    assert!(runs.contains("hello world"), "{runs}");
}

/// Prompts and templates of server-everything by name: it offers an open-world tool, whose
/// policy they carry otherwise (see destructive_and_open_world_tools_need_the_manifest).
const EVERYTHING_STEERED: &str = "allow_prompts = [\"simple-prompt\", \"args-prompt\", \"completable-prompt\", \"resource-prompt\"]\n\
     allow_templates = [\"Dynamic Text Resource\", \"Dynamic Blob Resource\"]";

#[test]
fn everything_server_resources_templates_prompts() {
    let m = Mount::start(Some(&everything_host("mcp/everything", EVERYTHING_STEERED)));
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
    // A prompt without arguments has a body, its text; reading it is no call.
    let calls = m.journal_count();
    let text = m.ok(&format!("cat {p}/simple-prompt/body"));
    assert!(
        text.starts_with("user: ") && text.contains("simple prompt") && text.ends_with('\n'),
        "{text}"
    );
    assert_eq!(
        m.ok(&format!("wc -c < {p}/simple-prompt/body")).trim(),
        text.len().to_string()
    );
    assert!(m
        .read(&format!("{p}/simple-prompt/description"))
        .contains("body: its messages without arguments"));
    // One that needs arguments has none, and its description says to use ops/get.
    let out = m.sh(&format!("cat {p}/args-prompt/body"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file"));
    assert!(!ls(&m, &format!("{p}/args-prompt")).contains(&"body".to_string()));
    assert!(m
        .read(&format!("{p}/args-prompt/description"))
        .contains("no body (it needs arguments): ops/get renders it"));
    assert_eq!(m.journal_count(), calls, "{}", m.read(".wip/log"));
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

/// A caller's patience and a tool's run time are different things: past the world's
/// call_timeout_ms the caller hears ETIMEDOUT naming the run, the tool goes on reporting
/// its steps (every call carries a progress token), `wait` returns its result, and a run
/// cancelled from another terminal ends `cancelled` with the server told.
#[test]
fn a_long_running_tool_is_a_run_to_watch_wait_on_and_cancel() {
    let m = Mount::start(Some(&format!(
        "[world]\ncall_timeout_ms = 2000\n{}",
        everything_host("mcp/everything", "")
    )));
    wait_ready(&m, "mcp/everything");
    let op = "mcp/everything/ops/trigger-long-running-operation";
    let t = Instant::now();
    let out = m.sh(&format!(
        r#"echo '{{"duration":6,"steps":6}}' > {op}/call; echo "rc=$?"; cat {op}/result"#
    ));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(stderr.contains("Connection timed out"), "{stderr}");
    let run = m.path(&format!("{op}/runs/1")).display().to_string();
    assert!(text.contains("rc=1"), "{text}");
    common::assert_names_the_run(&text, &run);
    // A step advancing while it runs.
    let first = m.read(&format!("{op}/runs/1/progress"));
    let step = |p: &str| {
        p.split('/')
            .next()
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = m.read(&format!("{op}/runs/1/progress"));
        if step(&now) > step(&first) && now.contains("/6") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "progress never advanced: {first:?} then {now:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let d = m.read(&format!("{op}/runs/1/description"));
    assert!(d.contains("running for") && d.contains("progress "), "{d}");
    // wait: ETIMEDOUT again while it runs, then its result.
    let out = m.ok(&format!(
        "until echo > {op}/runs/1/ops/wait/call 2>/dev/null; do :; done; cat {op}/runs/1/ops/wait/result"
    ));
    assert!(
        out.contains("Long running operation completed. Duration: 6 seconds, Steps: 6."),
        "{out}"
    );
    assert_eq!(m.read(&format!("{op}/runs/1/status")), "ok\n");
    assert!(m.read(&format!("{op}/runs/1/progress")).starts_with("6/6"));

    // A second run, cancelled from another terminal session.
    let caller = {
        let call = m.path(&format!("{op}/call"));
        std::thread::spawn(move || {
            std::fs::write(call, r#"{"duration":30,"steps":30}"#).map_err(|e| e.raw_os_error())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !m.path(&format!("{op}/runs/2")).exists() {
        assert!(Instant::now() < deadline, "the second run never began");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = m.ok(&format!(
        "setsid bash -c 'echo > {op}/runs/2/ops/cancel/call && cat {op}/runs/2/ops/cancel/result'"
    ));
    assert!(out.starts_with("run 2 was cancelled: "), "{out}");
    assert!(
        out.contains("the server was told (notifications/cancelled)"),
        "{out}"
    );
    assert_eq!(m.read(&format!("{op}/runs/2/status")), "cancelled\n");
    let r = caller.join().unwrap();
    assert!(
        matches!(r, Err(Some(ETIMEDOUT)) | Err(Some(libc::ECANCELED))),
        "{r:?}"
    );
    // The server goes on.
    m.call("mcp/everything/ops/echo", "still here\n").unwrap();
    assert_eq!(m.result("mcp/everything/ops/echo"), "Echo: still here\n");
}

/// A tool whose task support is `required` works through the mount: it runs as an MCP
/// task (created, polled, its result fetched), its status messages are the run's progress,
/// and a cancel sends `tasks/cancel`.
#[test]
fn a_task_tool_runs_as_a_task_to_completion_and_as_a_cancelled_task() {
    let m = Mount::start(Some(&format!(
        "[world]\ncall_timeout_ms = 2000\n{}",
        everything_host("mcp/everything", "")
    )));
    wait_ready(&m, "mcp/everything");
    let op = "mcp/everything/ops/simulate-research-query";
    // Four stages of a second each: past the caller's two.
    assert_eq!(m.call(op, "{\"topic\":\"rust\"}"), Err(ETIMEDOUT));
    let r = m.result(op);
    assert!(r.contains("runs/1/ops/wait/call"), "{r}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = m.read(&format!("{op}/runs/1/progress"));
        if p.contains("Synthesizing findings") || p.contains("Generating report") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no task status in progress: {p:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = m.ok(&format!(
        "until echo > {op}/runs/1/ops/wait/call 2>/dev/null; do :; done; cat {op}/runs/1/ops/wait/result"
    ));
    assert!(out.starts_with("# Research Report: rust"), "{out}");
    assert!(out.contains("Stage 4: Generating report"), "{out}");
    assert_eq!(m.read(&format!("{op}/runs/1/status")), "ok\n");

    // Cancelled while it works: the server is told and the task ends cancelled.
    assert_eq!(m.call(op, "{\"topic\":\"tasks\"}"), Err(ETIMEDOUT));
    let out = m.ok(&format!(
        "setsid bash -c 'echo > {op}/runs/2/ops/cancel/call && cat {op}/runs/2/ops/cancel/result'"
    ));
    assert!(out.starts_with("run 2 was cancelled: "), "{out}");
    assert!(out.contains("tasks/cancel"), "{out}");
    assert_eq!(m.read(&format!("{op}/runs/2/status")), "cancelled\n");
    // The server goes on.
    m.call("mcp/everything/ops/echo", "after\n").unwrap();
    assert_eq!(m.result("mcp/everything/ops/echo"), "Echo: after\n");
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
    // Its prompts and template reads run the same server's code: they carry that policy.
    let g = m.read("mcp/everything/prompts/simple-prompt/ops/get/guard");
    assert!(
        g.starts_with("blocked\n")
            && g.contains("✗ policy: a prompt runs code of the server that this mount cannot see, and the server marks tool \"gzip-file-as-resource\" open-world")
            && g.contains("\"simple-prompt\" to allow_prompts = [...]"),
        "{g}"
    );
    assert_eq!(
        m.call("mcp/everything/prompts/simple-prompt/ops/get", "\n"),
        Err(EACCES)
    );
    // Its body is still there: no caller steers a prompt that takes no arguments.
    assert!(m
        .read("mcp/everything/prompts/simple-prompt/body")
        .contains("simple prompt"));
    assert_eq!(
        m.call(
            "mcp/everything/templates/Dynamic Text Resource/ops/read",
            "7\n"
        ),
        Err(EACCES)
    );
    assert!(m
        .result("mcp/everything/templates/Dynamic Text Resource/ops/read")
        .contains("\"Dynamic Text Resource\" to allow_templates = [...]"));
    // A resource the server lists is its data, read by the URI it chose: not steered.
    let listed = "mcp/everything/resources/demo:%2F%2Fresource%2Fstatic%2Fdocument%2Ffeatures.md";
    assert!(m
        .read(&format!("{listed}/ops/read_body/guard"))
        .starts_with("allowed\n"));
    m.call(&format!("{listed}/ops/read_body"), "\n").unwrap();
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

/// A small server on the MCP SDK that server-everything installs, in `dir`: it exits on
/// demand, offers a new tool at run time (with a `list_changed` notification), has a
/// prompt, a resource and a template, and logs what it is asked and each start:
/// - `dir/requests.log`: one line per request (`tools/call ping`, `prompts/get greet`, …);
/// - `dir/lives`: one line per start, the time in milliseconds;
/// - `dir/gate`: while missing, the server exits at once (status 4, "gate closed" on
///   stderr); its lines name extra tools the life offers.
fn scripted_server(dir: &Path) -> PathBuf {
    let sdk = node_modules().join("@modelcontextprotocol/sdk/dist/esm");
    let url = |p: &str| format!("file://{}", sdk.join(p).display());
    let script = format!(
        r#"import {{ appendFileSync, existsSync, readFileSync }} from "node:fs";
import {{ Server }} from "{server}";
import {{ StdioServerTransport }} from "{stdio}";
import {{ ListToolsRequestSchema, CallToolRequestSchema, ListPromptsRequestSchema, GetPromptRequestSchema,
         ListResourcesRequestSchema, ReadResourceRequestSchema, ListResourceTemplatesRequestSchema }} from "{types}";
const dir = {dir:?};
const log = (line) => appendFileSync(dir + "/requests.log", line + "\n");
appendFileSync(dir + "/lives", Date.now() + "\n");
if (!existsSync(dir + "/gate")) {{ console.error("gate closed"); process.exit(4); }}
const extra = readFileSync(dir + "/gate", "utf8").split("\n").filter((l) => l.trim());
const none = {{ type: "object", properties: {{}} }};
// Stated hints: a tool that leaves them out counts as destructive and open-world.
const annotations = {{ readOnlyHint: false, destructiveHint: false, openWorldHint: false }};
const tools = [
  {{ name: "ping", description: "answers pong", inputSchema: none }},
  {{ name: "exit", description: "ends the server process", inputSchema: none }},
  {{ name: "add_tool", description: "offers one more tool", inputSchema: {{ type: "object", properties: {{ name: {{ type: "string" }} }}, required: ["name"] }} }},
  {{ name: "add", description: "adds two integers", inputSchema: {{ type: "object", properties: {{ a: {{ type: "integer" }}, b: {{ type: "integer" }} }}, required: ["a", "b"] }} }},
  ...extra.map((name) => ({{ name, description: "offered by this life", inputSchema: none }})),
].map((t) => ({{ ...t, annotations }}));
const server = new Server({{ name: "scripted", version: "1.0.0" }},
  {{ capabilities: {{ tools: {{ listChanged: true }}, prompts: {{}}, resources: {{}} }} }});
server.setRequestHandler(ListToolsRequestSchema, async () => {{ log("tools/list"); return {{ tools }}; }});
server.setRequestHandler(CallToolRequestSchema, async (req) => {{
  const {{ name, arguments: args }} = req.params;
  log("tools/call " + name + " " + JSON.stringify(args ?? {{}}));
  if (name === "ping") return {{ content: [{{ type: "text", text: "pong" }}] }};
  if (name === "exit") {{ console.error("exiting as asked"); process.exit(3); }}
  if (name === "add") return {{ content: [{{ type: "text", text: String(args.a + args.b) }}] }};
  if (name === "add_tool") {{
    tools.push({{ name: args.name, description: "added at run time", inputSchema: none, annotations }});
    await server.sendToolListChanged();
    return {{ content: [{{ type: "text", text: "added " + args.name }}] }};
  }}
  if (tools.some((t) => t.name === name)) return {{ content: [{{ type: "text", text: "ran " + name }}] }};
  return {{ content: [{{ type: "text", text: "no tool " + name }}], isError: true }};
}});
server.setRequestHandler(ListPromptsRequestSchema, async () => {{
  log("prompts/list");
  return {{ prompts: [{{ name: "greet", description: "greets", arguments: [{{ name: "who", required: true }}] }}] }};
}});
server.setRequestHandler(GetPromptRequestSchema, async (req) => {{
  log("prompts/get " + req.params.name);
  return {{ messages: [{{ role: "user", content: {{ type: "text", text: "hello " + req.params.arguments?.who }} }}] }};
}});
server.setRequestHandler(ListResourcesRequestSchema, async () => {{
  log("resources/list");
  return {{ resources: [{{ uri: "scripted://notes", name: "notes", mimeType: "text/plain" }}] }};
}});
server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => {{
  log("resources/templates/list");
  return {{ resourceTemplates: [{{ uriTemplate: "scripted://items/{{id}}", name: "item" }}] }};
}});
server.setRequestHandler(ReadResourceRequestSchema, async (req) => {{
  log("resources/read " + req.params.uri);
  return {{ contents: [{{ uri: req.params.uri, text: "the text of " + req.params.uri }}] }};
}});
await server.connect(new StdioServerTransport());
"#,
        server = url("server/index.js"),
        stdio = url("server/stdio.js"),
        types = url("types.js"),
        dir = dir.display().to_string(),
    );
    let path = dir.join("scripted.mjs");
    std::fs::write(&path, script).unwrap();
    std::fs::write(dir.join("gate"), "").unwrap();
    path
}

fn scripted_host(path: &str, script: &Path, extra: &str) -> String {
    format!(
        "[[host]]\nkind = \"mcp\"\npath = \"{path}\"\ncommand = [\"node\", {:?}]\n{extra}\n",
        script.display().to_string()
    )
}

/// What the scripted server in `dir` was asked, one request a line.
fn requests(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("requests.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// When the scripted server in `dir` started, in milliseconds.
fn lives(dir: &Path) -> Vec<u64> {
    std::fs::read_to_string(dir.join("lives"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// Wait (bounded) until `read()` holds `want`; returns what it read.
fn wait_for(what: &str, mut read: impl FnMut() -> String, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = read();
        if got.contains(want) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never held {want:?}: {got}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn list_changed_refreshes_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let script = scripted_server(dir.path());
    let m = Mount::start(Some(&scripted_host("s", &script, "")));
    wait_ready(&m, "s");
    assert_eq!(ls(&m, "s/ops"), ["add", "add_tool", "exit", "ping"]);
    m.call("s/ops/add_tool", "fresh\n").unwrap();
    // The notification arrives on its own; the host re-lists and reports the change, which
    // the runtime applies on its own thread: wait for both.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ls(&m, "s/tools").contains(&"fresh".to_string())
        || !m.path("s/ops/fresh/description").exists()
    {
        assert!(
            Instant::now() < deadline,
            "new tool never appeared: {:?}",
            ls(&m, "s/tools")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(m
        .read("s/ops/fresh/description")
        .contains("added at run time"));
    assert!(m.read("s/description").contains("5 tools"));
    // The root's `ops/` listing, cached by the kernel above, was dropped with the change
    // (under a loaded suite the change's invalidation may land a moment after the lookup
    // above: well within the listing's own 1 s lifetime).
    let deadline = Instant::now() + Duration::from_millis(500);
    while ls(&m, "s/ops") != ["add", "add_tool", "exit", "fresh", "ping"] {
        assert!(
            Instant::now() < deadline,
            "s/ops still lists {:?}",
            ls(&m, "s/ops")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    m.call("s/ops/fresh", "\n").unwrap();
    assert_eq!(m.result("s/ops/fresh"), "ran fresh\n");
    // The change feed shows the host's own change.
    assert!(m.read(".wip/events").contains("\"changed\""));
}

#[test]
fn bad_args_never_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let script = scripted_server(dir.path());
    let m = Mount::start(Some(&scripted_host("s", &script, "")));
    wait_ready(&m, "s");
    for bad in [
        "{\"a\": \"two\", \"b\": 2}",
        "{\"a\": 1}",
        "a=1\nb=2\nc=3\n",
        "a=x\nb=2\n",
    ] {
        assert_eq!(m.call("s/ops/add", bad), Err(libc::EINVAL), "{bad}");
    }
    assert!(
        m.result("s/ops/add").starts_with("error: "),
        "{}",
        m.result("s/ops/add")
    );
    m.call("s/ops/add", "a=40\nb=2\n").unwrap();
    assert_eq!(m.result("s/ops/add"), "42\n");
    let calls: Vec<String> = requests(dir.path())
        .into_iter()
        .filter(|r| r.starts_with("tools/call"))
        .collect();
    assert_eq!(calls, ["tools/call add {\"a\":40,\"b\":2}"]);
}

#[test]
fn reads_never_act_on_an_mcp_world() {
    let dir = tempfile::tempdir().unwrap();
    let script = scripted_server(dir.path());
    let m = Mount::start(Some(&scripted_host("s", &script, "")));
    wait_ready(&m, "s");
    // Reach a template-made resource by path too, as a result would print it.
    let item = "s/resources/scripted:%2F%2Fitems%2F7";
    assert!(m
        .read(&format!("{item}/description"))
        .contains("from template item"));
    let before = requests(dir.path());
    // A file manager's walk: list everything, stat and read every file, xattrs included.
    m.ok(&format!(
        "ls -laR . > /dev/null; find . -type f -print0 | xargs -0 cat > /dev/null; \
         find . -type f -print0 | xargs -0 stat > /dev/null; \
         find {item} -type f -print0 | xargs -0 cat > /dev/null; \
         find . -type d -print0 | xargs -0 -n 50 ls -la > /dev/null; \
         getfattr -R -d . > /dev/null"
    ));
    let walked = m.ok("find . | wc -l");
    assert!(walked.trim().parse::<usize>().unwrap() > 40, "{walked}");
    let after = requests(dir.path());
    // The walk asked the server nothing but resources' contents (their `body` files, read
    // like any file): listings, guards and schemas come from the catalog.
    let asked: Vec<String> = after[before.len()..]
        .iter()
        .filter(|r| !r.starts_with("resources/read "))
        .cloned()
        .collect();
    assert_eq!(asked, Vec::<String>::new());
    assert!(
        after[before.len()..].contains(&"resources/read scripted://items/7".to_string()),
        "the body was read: {after:?}"
    );
    for r in &after {
        assert!(
            !r.starts_with("tools/call") && !r.starts_with("prompts/get"),
            "a read acted: {r} in {after:?}"
        );
    }
    assert_eq!(m.journal_count(), 0, "{}", m.read(".wip/log"));
    assert_eq!(
        m.read(&format!("{item}/body")),
        "the text of scripted://items/7",
        "the body is the resource's contents"
    );
    // The same paths do act when written.
    let before_calls = requests(dir.path()).len();
    m.call(&format!("{item}/ops/read_body"), "\n").unwrap();
    m.call("s/prompts/greet/ops/get", "ada\n").unwrap();
    assert_eq!(m.result("s/prompts/greet/ops/get"), "user: hello ada\n");
    let acted: Vec<String> = requests(dir.path())[before_calls..].to_vec();
    assert_eq!(
        acted,
        ["resources/read scripted://items/7", "prompts/get greet"]
    );
}

#[test]
fn a_server_that_exits_is_restarted_and_the_mount_stays_responsive() {
    let dir = tempfile::tempdir().unwrap();
    let script = scripted_server(dir.path());
    let m = Mount::start(Some(&format!(
        "{}[[host]]\nkind = \"mcp\"\npath = \"never\"\ncommand = [\"false\"]\n\
         [[host]]\nkind = \"mcp\"\npath = \"missing\"\ncommand = [\"/nonexistent/mcp-server\"]\n",
        scripted_host("s", &script, "restart_delay_ms = 100")
    )));
    wait_ready(&m, "s");
    m.call("s/ops/ping", "\n").unwrap();
    // Closed gate: the next lives exit at once, so the server stays down until it opens.
    std::fs::remove_file(dir.path().join("gate")).unwrap();
    // The server dies during a call: EIO with words.
    assert_eq!(m.call("s/ops/exit", "\n"), Err(EIO));
    let r = m.result("s/ops/exit");
    assert!(r.starts_with("error: protocol error: tool exit:"), "{r}");
    // Its description says how it ended; guards block with the reason; calls are EPERM.
    let d = wait_for("s/description", || m.read("s/description"), "restarting");
    assert!(
        d.contains("the server exited (exit status: ")
            && d.contains("(its stderr since it started: ")
            && d.contains("wait after "),
        "{d}"
    );
    let g = m.read("s/ops/ping/guard");
    assert!(
        g.starts_with("blocked\n") && g.contains("✗ server: the server is not running"),
        "{g}"
    );
    assert_eq!(m.call("s/ops/ping", "\n"), Err(EPERM));
    assert!(
        m.result("s/ops/ping").contains("not running"),
        "{}",
        m.result("s/ops/ping")
    );
    // A life that could not start says so with its own stderr only.
    let d = wait_for("s/description", || m.read("s/description"), "gate closed");
    assert!(
        d.contains("exit status: 4") && !d.contains("exiting as asked"),
        "{d}"
    );
    // Open: restarted, with the tools this life offers, and calls work again.
    std::fs::write(dir.path().join("gate"), "reborn\n").unwrap();
    wait_ready(&m, "s");
    assert_eq!(
        ls(&m, "s/ops"),
        ["add", "add_tool", "exit", "ping", "reborn"]
    );
    m.call("s/ops/ping", "\n").unwrap();
    assert_eq!(m.result("s/ops/ping"), "pong\n");
    m.call("s/ops/reborn", "\n").unwrap();

    // Servers that never start: the description says why, nothing hangs.
    let never = wait_for(
        "never/description",
        || m.read("never/description"),
        "restarting",
    );
    assert!(
        never.contains("MCP server `false`")
            && never.contains("initialize")
            && never.contains("exit status: 1"),
        "{never}"
    );
    let missing = wait_for(
        "missing/description",
        || m.read("missing/description"),
        "restarting",
    );
    assert!(
        missing.contains("cannot start `/nonexistent/mcp-server`"),
        "{missing}"
    );
    assert!(ls(&m, "never/ops").is_empty());
    assert_eq!(
        ls(&m, "never"),
        ["prompts", "resources", "templates", "tools"]
    );
    m.ok("ls -R never > /dev/null && cat never/tools/description");
}

#[test]
fn a_crash_looping_server_backs_off_to_its_cap_and_lists_its_tools_again() {
    let dir = tempfile::tempdir().unwrap();
    let script = scripted_server(dir.path());
    std::fs::remove_file(dir.path().join("gate")).unwrap();
    let m = Mount::start(Some(&scripted_host(
        "s",
        &script,
        "restart_delay_ms = 200\nrestart_delay_max_ms = 800",
    )));
    // It exits at every start; the delay doubles to its cap and stays there.
    let d = wait_for(
        "s/description",
        || m.read("s/description"),
        "after 5 failures in a row",
    );
    assert!(d.contains("(a 0.8 s wait after 5 failures"), "{d}");
    assert!(!d.contains("restarting in 0 s"), "{d}");
    let starts = lives(dir.path());
    assert!(starts.len() >= 5, "{starts:?}");
    // Each start waited at least the delay it was given (200, 400, 800, 800 ms); a sleep
    // never ends early, so these are bounds, not timings.
    for (i, gap) in starts.windows(2).map(|w| w[1] - w[0]).enumerate().take(4) {
        let delay = [200, 400, 800, 800][i];
        assert!(
            gap + 5 >= delay,
            "start {} came {gap} ms after the one before: {starts:?}",
            i + 2
        );
    }
    // Never ready meanwhile: its ops are none, its guards blocked.
    assert!(ls(&m, "s/ops").is_empty());
    // Once it can start, its tools are listed afresh.
    std::fs::write(dir.path().join("gate"), "first_tool\nsecond_tool\n").unwrap();
    let d = wait_ready(&m, "s");
    assert!(d.contains("6 tools"), "{d}");
    assert_eq!(
        ls(&m, "s/ops"),
        [
            "add",
            "add_tool",
            "exit",
            "first_tool",
            "ping",
            "second_tool"
        ]
    );
    // A restart lists them again: a new life offers other tools.
    std::fs::write(dir.path().join("gate"), "third_tool\n").unwrap();
    assert_eq!(m.call("s/ops/exit", "\n"), Err(EIO));
    let d = wait_for(
        "s/description",
        || m.read("s/description"),
        "· ready · 5 tools",
    );
    assert!(!d.contains("warning"), "{d}");
    assert_eq!(
        ls(&m, "s/ops"),
        ["add", "add_tool", "exit", "ping", "third_tool"]
    );
    assert_eq!(
        requests(dir.path())
            .iter()
            .filter(|r| *r == "tools/list")
            .count(),
        2,
        "each ready life lists its tools once"
    );
}

// ---- more servers from npm and PyPI -----------------------------------------------------------

fn more_servers() -> PathBuf {
    common::fixtures().join("mcp")
}

fn filesystem_js() -> String {
    server_js(
        more_servers().join("node/node_modules"),
        "server-filesystem",
    )
}

fn thinking_js() -> String {
    server_js(
        more_servers().join("node/node_modules"),
        "server-sequential-thinking",
    )
}

fn python_server(name: &str) -> String {
    more_servers()
        .join(name)
        .join("bin")
        .join(format!("mcp-server-{name}"))
        .display()
        .to_string()
}

#[test]
fn filesystem_server_results_are_not_doubled() {
    let files = tempfile::tempdir().unwrap();
    let big = files.path().join("big.txt");
    let line = "a line of a big text file, read through server-filesystem\n";
    let text = line.repeat(3_180_000 / line.len());
    std::fs::write(&big, &text).unwrap();
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"mcp\"\npath = \"mcp/fs\"\ncommand = [\"node\", {:?}, {:?}]\n\
         allow_tools = [\"read_text_file\", \"delete_everything\"]\n",
        filesystem_js(),
        files.path().display().to_string()
    )));
    let d = wait_ready(&m, "mcp/fs");
    assert!(d.contains("secure-filesystem-server"), "{d}");
    // It offers no resources or prompts (and answers their lists with -32601): none, no warning
    // about them; the allow_tools name it lacks is warned about.
    assert!(d.contains("0 resources, 0 templates, 0 prompts"), "{d}");
    assert!(
        d.contains(
            "warning: allow_tools names \"delete_everything\", which the server does not offer"
        ),
        "{d}"
    );
    assert_eq!(d.matches("warning:").count(), 1, "{d}");
    // The file once: its structuredContent repeats the text and is not shown again.
    m.ok(&format!(
        "echo 'path={}' > mcp/fs/ops/read_text_file/call",
        big.display()
    ));
    let out = m.ok("wc -c < mcp/fs/ops/read_text_file/result");
    let size: usize = out.trim().parse().unwrap();
    assert!(
        size == text.len() || size == text.len() + 1,
        "{size} bytes for a file of {}",
        text.len()
    );
    assert_eq!(
        m.result("mcp/fs/ops/read_text_file").trim_end(),
        text.trim_end()
    );
    // The served schema says it is closed.
    let schema: serde_json::Value =
        serde_json::from_str(&m.read("mcp/fs/ops/read_text_file/schema")).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    // Its writing tools are marked destructive: blocked, and nothing is written.
    let g = m.read("mcp/fs/ops/write_file/guard");
    assert!(
        g.starts_with("blocked\n") && g.contains("destructive"),
        "{g}"
    );
    let target = files.path().join("new.txt");
    assert_eq!(
        m.call(
            "mcp/fs/ops/write_file",
            &format!(
                "{{\"path\": {:?}, \"content\": \"x\"}}",
                target.display().to_string()
            )
        ),
        Err(EACCES)
    );
    assert!(!target.exists());
}

#[test]
fn sequential_thinking_types_union_values_from_key_value_lines() {
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"mcp\"\npath = \"mcp/think\"\ncommand = [\"node\", {:?}]\n",
        thinking_js()
    )));
    wait_ready(&m, "mcp/think");
    let op = "mcp/think/ops/sequentialthinking";
    let schema = m.read(&format!("{op}/schema"));
    assert!(schema.contains("\"boolean\",\n"), "{schema}");
    // `true` is the boolean: the server answers with it.
    m.ok(&format!(
        "cat > {op}/call <<EOF\nthought=first idea\nnextThoughtNeeded=true\nthoughtNumber=1\ntotalThoughts=2\nEOF"
    ));
    let r = m.result(op);
    assert!(r.contains("\"nextThoughtNeeded\": true"), "{r}");
    // Its JSON text and its structuredContent are the same: shown once.
    assert_eq!(r.matches("thoughtHistoryLength").count(), 1, "{r}");
    // `maybe` is the string the union allows: the runtime lets it through and the server
    // itself has the last word (it accepts only "true"/"false" strings).
    let out = m.sh(&format!(
        "cat > {op}/call <<EOF\nthought=second\nnextThoughtNeeded=maybe\nthoughtNumber=2\ntotalThoughts=2\nEOF"
    ));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Input/output error"),
        "the server's refusal is EIO, not the runtime's EINVAL: {out:?}"
    );
    let r = m.result(op);
    assert!(
        r.starts_with("error: tool error:")
            && r.contains("received \"maybe\" at nextThoughtNeeded"),
        "{r}"
    );
    assert!(!r.contains("expected a boolean"), "{r}");
    assert!(m
        .read(".wip/log")
        .lines()
        .any(|l| l.contains("sequentialthinking") && l.contains("failed")));
}

#[test]
fn sqlite_server_without_resource_templates_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let lives = dir.path().join("lives");
    // Each start is counted: a server the host calls broken is restarted over and over.
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"mcp\"\npath = \"mcp/sqlite\"\n\
         command = [\"sh\", \"-c\", \"echo start >> {}; exec {} --db-path {}\"]\n\
         allow_tools = [\"create_table\", \"write_query\", \"read_query\", \"list_tables\", \"append_insight\"]\n\
         allow_prompts = [\"mcp-demo\"]\n",
        lives.display(),
        python_server("sqlite"),
        db.display()
    )));
    let d = wait_ready(&m, "mcp/sqlite");
    assert!(d.contains("MCP server sqlite"), "{d}");
    assert!(
        d.contains("6 tools (ops here), 1 resources, 0 templates, 1 prompts"),
        "{d}"
    );
    assert!(
        !d.contains("warning"),
        "-32601 for templates is no failure: {d}"
    );
    m.ok("echo 'CREATE TABLE fruit (name TEXT, price REAL)' > mcp/sqlite/ops/create_table/call");
    m.ok("echo \"INSERT INTO fruit VALUES ('apple', 1.5), ('pear', 2)\" > mcp/sqlite/ops/write_query/call");
    m.ok("echo 'SELECT name FROM fruit ORDER BY price DESC' > mcp/sqlite/ops/read_query/call");
    let r = m.result("mcp/sqlite/ops/read_query");
    assert!(
        r.contains("pear") && r.find("pear") < r.find("apple"),
        "{r}"
    );
    m.ok("echo > mcp/sqlite/ops/list_tables/call");
    assert!(m.result("mcp/sqlite/ops/list_tables").contains("fruit"));
    // Its resource and its prompt (no tool of it is marked: nothing to carry).
    m.ok("echo 'pears sell best' > mcp/sqlite/ops/append_insight/call");
    let memo = "mcp/sqlite/resources/memo:%2F%2Finsights";
    m.ok(&format!("echo > {memo}/ops/read_body/call"));
    assert!(m
        .result(&format!("{memo}/ops/read_body"))
        .contains("pears sell best"));
    m.ok("echo 'fruit stand' > mcp/sqlite/prompts/mcp-demo/ops/get/call");
    let p = m.result("mcp/sqlite/prompts/mcp-demo/ops/get");
    assert!(
        p.starts_with("description: Demo template for fruit stand\nuser: ")
            && p.contains("The topic is: fruit stand."),
        "{p}"
    );
    assert_eq!(std::fs::read_to_string(&lives).unwrap(), "start\n");
    assert!(m.read("mcp/sqlite/description").contains("· ready ·"));
}

/// A loopback HTTP server that logs the path of every request it gets.
struct Loopback {
    port: u16,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Loopback {
    fn start() -> Loopback {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    continue;
                }
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).map_or(true, |n| n == 0) || h.trim().is_empty() {
                        break;
                    }
                }
                let path = first.split(' ').nth(1).unwrap_or("").to_string();
                seen.lock().unwrap().push(path.clone());
                let (status, body) = if path == "/robots.txt" {
                    ("404 Not Found", "no robots here".to_string())
                } else {
                    ("200 OK", format!("hello from loopback {path}"))
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Loopback { port, log }
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

#[test]
fn fetch_prompt_carries_the_policy_of_the_blocked_fetch_tool() {
    let web = Loopback::start();
    let fetch = |path: &str, extra: &str| {
        format!(
            "[[host]]\nkind = \"mcp\"\npath = \"{path}\"\ncommand = [{:?}, \"--allow-private-ips\"]\n\
             env = {{ NO_PROXY = \"127.0.0.1\", no_proxy = \"127.0.0.1\" }}\n{extra}\n",
            python_server("fetch")
        )
    };
    let m = Mount::start(Some(&format!(
        "{}{}{}",
        fetch("mcp/fetch", ""),
        fetch("mcp/prompted", "allow_prompts = [\"fetch\"]"),
        fetch("mcp/open", "allow = [\"open_world\"]"),
    )));
    for h in ["mcp/fetch", "mcp/prompted", "mcp/open"] {
        let d = wait_ready(&m, h);
        assert!(
            d.contains("1 tools (ops here), 0 resources, 0 templates, 1 prompts"),
            "{d}"
        );
    }
    let url = |p: &str| format!("http://127.0.0.1:{}/{p}", web.port);
    // Blocked: the open-world tool, and the prompt that fetches the same way.
    let g = m.read("mcp/fetch/ops/fetch/guard");
    assert!(
        g.starts_with("blocked\n") && g.contains("open-world"),
        "{g}"
    );
    let g = m.read("mcp/fetch/prompts/fetch/ops/get/guard");
    assert!(
        g.starts_with("blocked\n")
            && g.contains("the server marks tool \"fetch\" open-world")
            && g.contains("\"fetch\" to allow_prompts = [...]"),
        "{g}"
    );
    let out = m.sh(&format!("echo {} > mcp/fetch/ops/fetch/call", url("tool")));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    let out = m.sh(&format!(
        "echo {} > mcp/fetch/prompts/fetch/ops/get/call",
        url("prompt")
    ));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    assert!(m
        .result("mcp/fetch/prompts/fetch/ops/get")
        .starts_with("error: blocked by guard policy: a prompt runs code of the server"));
    assert_eq!(web.requests(), Vec::<String>::new(), "nothing was fetched");
    // The prompt allowed by name: it fetches; the tool stays blocked.
    m.ok(&format!(
        "echo {} > mcp/prompted/prompts/fetch/ops/get/call",
        url("by-prompt")
    ));
    let r = m.result("mcp/prompted/prompts/fetch/ops/get");
    assert!(r.contains("hello from loopback /by-prompt"), "{r}");
    assert_eq!(web.requests(), ["/by-prompt"]);
    assert_eq!(
        m.call("mcp/prompted/ops/fetch", &format!("{}\n", url("tool"))),
        Err(EACCES)
    );
    assert_eq!(web.requests(), ["/by-prompt"]);
    // Open-world allowed by kind: the tool fetches (after robots.txt), the prompt too.
    m.ok(&format!(
        "echo {} > mcp/open/ops/fetch/call",
        url("by-tool")
    ));
    assert!(m
        .result("mcp/open/ops/fetch")
        .contains("hello from loopback /by-tool"));
    assert!(m
        .read("mcp/open/prompts/fetch/ops/get/guard")
        .starts_with("allowed\n"));
    assert_eq!(web.requests(), ["/by-prompt", "/robots.txt", "/by-tool"]);
}

#[test]
fn wip_mount_returns_with_the_servers_tools_there_and_resources_titled() {
    // `wip mount … && ls mcp/x/ops`: the mount waits for the server to answer.
    let m = common::Background::mount(
        &format!(
            "[world]\ntitled = true\nstartup_wait_ms = 60000\n{}",
            everything_host("/mcp/everything", "")
        ),
        &[],
    );
    assert!(m.out.status.success(), "{:?}", m.out);
    let dir = m.dir.path().join("mcp/everything");
    let ops: Vec<String> = std::fs::read_dir(dir.join("ops"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(ops.iter().any(|o| o == "echo"), "no tools yet: {ops:?}");
    assert!(
        m.status().contains("mcp/everything/  mcp      ready"),
        "{}",
        m.status()
    );
    // Resources list with their titles; the bare URI name is the same entry.
    let names: Vec<String> = std::fs::read_dir(dir.join("resources"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("demo:"))
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    let bare = "demo:%2F%2Fresource%2Fstatic%2Fdocument%2Ffeatures.md";
    let titled = names
        .iter()
        .find(|n| n.starts_with(&format!("{bare} ")))
        .unwrap_or_else(|| panic!("{names:?}"));
    let read = |name: &str, file: &str| {
        std::fs::read_to_string(dir.join("resources").join(name).join(file)).unwrap()
    };
    assert_eq!(read(titled, "ref"), read(bare, "ref"));
    assert_eq!(read(titled, "description"), read(bare, "description"));
}

/// A real server whose tools carry no annotations (mcp-server-sqlite): by the MCP
/// specification's defaults they may be destructive and open-world, so each is blocked
/// (EACCES at open, words in the guard) until the manifest allows it, here by a
/// `[[policy]]` rule for one tool.
#[test]
fn unannotated_tools_are_blocked_by_the_specifications_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let m = Mount::start(Some(&format!(
        "[[host]]\nkind = \"mcp\"\npath = \"mcp/sqlite\"\ncommand = [{:?}, \"--db-path\", {:?}]\n\n\
         [[policy]]\nmatch = \"mcp/sqlite/ops/list_tables\"\naction = \"allow\"\n",
        python_server("sqlite"),
        db.display().to_string()
    )));
    wait_ready(&m, "mcp/sqlite");
    let guard = m.read("mcp/sqlite/ops/write_query/guard");
    assert!(
        guard.starts_with("blocked\n")
            && guard.contains("does not say whether \"write_query\" is read-only")
            && guard.contains("MCP specification's defaults")
            && guard.contains("allow_tools"),
        "{guard}"
    );
    let out = m.sh("echo 'CREATE TABLE gone (x)' > mcp/sqlite/ops/write_query/call");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    m.ok("echo > mcp/sqlite/ops/list_tables/call");
    assert!(!m.result("mcp/sqlite/ops/list_tables").contains("gone"));
}

/// Content that is not text is kept, whole and once: server-everything's tiny image is a
/// file of the run (`runs/ID/content/1.png`, the server's bytes exactly) whose path the
/// result prints; annotations stay beside what they annotate; a tool's outputSchema is
/// `output_schema` beside `schema`; and server-filesystem's read_media_file, whose
/// structured content repeats the image's base64, prints it nowhere.
#[test]
fn images_are_files_of_the_run_and_output_schemas_sit_beside_schemas() {
    use base64::Engine as _;
    let files = tempfile::tempdir().unwrap();
    let png = base64::engine::general_purpose::STANDARD
        .decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
        .unwrap();
    std::fs::write(files.path().join("dot.png"), &png).unwrap();
    let manifest = format!(
        "{}[[host]]\nkind = \"mcp\"\npath = \"mcp/fs\"\ncommand = [\"node\", {:?}, {:?}]\n\
         allow_tools = [\"read_media_file\"]\n",
        everything_host("mcp/e", ""),
        filesystem_js(),
        files.path().display().to_string()
    );
    let m = Mount::start(Some(&manifest));
    wait_ready(&m, "mcp/e");
    wait_ready(&m, "mcp/fs");

    m.ok("echo > mcp/e/ops/get-tiny-image/call");
    let r = m.result("mcp/e/ops/get-tiny-image");
    assert!(
        r.contains("[image: image/png, ")
            && r.contains(" bytes, kept as content/1.png of this run]"),
        "{r}"
    );
    let run = m.ok("ls mcp/e/ops/get-tiny-image/runs/").trim().to_string();
    let file = format!(
        "{}/mcp/e/ops/get-tiny-image/runs/{run}/content/1.png",
        m.mount.display()
    );
    assert!(
        r.contains(&format!("{file}\timage/png, ")),
        "the path is printed: {r}"
    );
    assert!(!r.contains("iVBORw0KGgo"), "no base64 in the result: {r}");
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        m.ok(&format!("ls mcp/e/ops/get-tiny-image/runs/{run}/content")),
        "1.png\n"
    );
    assert!(m
        .ok(&format!("ls mcp/e/ops/get-tiny-image/runs/{run}"))
        .lines()
        .any(|l| l == "content"));

    // Annotations are kept beside the text (and the image) they annotate.
    m.ok(
        "printf 'messageType=error\\nincludeImage=true\\n' > mcp/e/ops/get-annotated-message/call",
    );
    let r = m.result("mcp/e/ops/get-annotated-message");
    assert!(
        r.contains("[annotations of the text above: audience user, assistant · priority 1]"),
        "{r}"
    );
    assert!(
        r.contains("content/1.png\timage/png") && r.contains("audience user"),
        "{r}"
    );

    // The output schema beside the schema; the result's structured content once.
    assert_eq!(
        m.ok("ls mcp/e/ops/get-structured-content"),
        "call\ndescription\nguard\noutput_schema\nresult\nschema\n"
    );
    let out = m.read("mcp/e/ops/get-structured-content/output_schema");
    assert!(
        out.contains("\"temperature\"") && out.contains("\"humidity\""),
        "{out}"
    );
    assert!(!m.ok("ls mcp/e/ops/echo").contains("output_schema"));

    // server-filesystem: the image once, as a file; its base64 printed nowhere.
    m.ok(&format!(
        "echo 'path={}' > mcp/fs/ops/read_media_file/call",
        files.path().join("dot.png").display()
    ));
    let r = m.result("mcp/fs/ops/read_media_file");
    assert!(!r.contains("structured content"), "{r}");
    assert!(!r.contains("iVBORw0KGgo"), "{r}");
    let run = m
        .ok("ls mcp/fs/ops/read_media_file/runs/")
        .trim()
        .to_string();
    assert_eq!(
        std::fs::read(m.path(&format!(
            "mcp/fs/ops/read_media_file/runs/{run}/content/1.png"
        )))
        .unwrap(),
        png
    );
}

/// tests/hosts/mcp_misbehave.py, a server that misbehaves on demand (see its header).
fn misbehave_host(path: &str, args: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hosts/mcp_misbehave.py");
    format!(
        "[[host]]\nkind = \"mcp\"\npath = \"{path}\"\ncommand = [\"python3\", {:?}{args}]\n",
        script.display().to_string()
    )
}

/// Many descriptors open on one content file cost the daemon no copy of it each: the
/// file is read by offset from disk (100 descriptors on 3 MiB once took ~300 MB).
#[test]
fn content_files_are_read_by_offset_however_many_descriptors_are_open() {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    const SIZE: usize = 3 << 20;
    const OPEN: usize = 100;
    let m = Mount::start(Some(&misbehave_host("bad", "")));
    wait_ready(&m, "bad");
    m.call("bad/ops/image", &format!("bytes={SIZE}\n")).unwrap();
    let r = m.result("bad/ops/image");
    assert!(
        r.contains(&format!("/content/1.png\timage/png, {SIZE} bytes")),
        "{r}"
    );
    let file = m.path("bad/ops/image/runs/1/content/1.png");
    let expected: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    assert_eq!(std::fs::read(&file).unwrap(), expected);
    let daemon = m.daemon_pid().unwrap();
    let before = common::rss_of(daemon);
    let mut open = Vec::new();
    for i in 0..OPEN {
        // O_DIRECT: every read reaches the daemon, as the kernel's cache would not let it.
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&file)
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let at = (i * 4096) % SIZE;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(at as u64)).unwrap();
        f.read_exact(&mut buf).unwrap();
        assert_eq!(buf, expected[at..at + 4096]);
        open.push(f);
    }
    let grown = common::rss_of(daemon).saturating_sub(before);
    assert!(
        grown < (OPEN * SIZE / 10) as u64,
        "{OPEN} descriptors on {SIZE} bytes grew the daemon by {grown} bytes"
    );
}

/// One call keeps at most its first 256 content parts, and says how many it dropped:
/// `ls content/` stays quick however many a server sends.
#[test]
fn a_call_keeps_a_bounded_number_of_content_parts_and_says_how_many_it_dropped() {
    let m = Mount::start(Some(&misbehave_host("bad", "")));
    wait_ready(&m, "bad");
    m.call("bad/ops/images", "count=1000\n").unwrap();
    let r = m.result("bad/ops/images");
    assert!(
        r.contains("[744 more content parts not kept: a call keeps its first 256]"),
        "{r}"
    );
    assert!(r.contains("/content/256.png\timage/png, 8 bytes"), "{r}");
    assert!(!r.contains("content/257.png"), "{r}");
    let listed = std::fs::read_dir(m.path("bad/ops/images/runs/1/content"))
        .unwrap()
        .count();
    assert_eq!(listed, 256);
}

/// The content of runs that are gone is removed: a new journal in the same state
/// directory numbers its runs from 1 again, and its run 1 shows none of the old run 1's files.
#[test]
fn content_of_runs_that_are_gone_is_removed() {
    let mut m = Mount::start(Some(&misbehave_host("bad", "")));
    wait_ready(&m, "bad");
    m.call("bad/ops/image", "bytes=100\n").unwrap();
    assert!(m.path("bad/ops/image/runs/1/content/1.png").exists());
    m.unmount();
    for f in ["journal.db", "journal.db-wal", "journal.db-shm"] {
        let _ = std::fs::remove_file(m.state.join(f));
    }
    m.remount();
    wait_ready(&m, "bad");
    m.call("bad/ops/signals", "\n").unwrap();
    m.call("bad/ops/image", "bytes=10\n").unwrap();
    let run = "bad/ops/signals/runs/1";
    assert!(m.path(run).exists());
    assert!(
        !m.path(&format!("{run}/content")).exists(),
        "run 1 shows the old run 1's content"
    );
    // Only what this journal's run 2 kept is on disk.
    let mut kept = Vec::new();
    for journal in std::fs::read_dir(m.state.join("content"))
        .unwrap()
        .flatten()
    {
        for run in std::fs::read_dir(journal.path()).unwrap().flatten() {
            for f in std::fs::read_dir(run.path()).unwrap().flatten() {
                kept.push(std::fs::metadata(f.path()).unwrap().len());
            }
        }
    }
    assert_eq!(kept, [10], "what the state directory keeps");
}

/// An answer longer than a stdio line may be (16 MiB) fails its run at once, with the
/// size in `result`, whichever end of the message its id is at; it used to leave the run
/// `running` until the call's limit.
#[test]
fn an_answer_over_the_line_limit_fails_the_run_at_once_with_its_size() {
    let m = Mount::start(Some(&format!(
        "[world]\ncall_timeout_ms = 20000\n{}",
        misbehave_host("bad", "")
    )));
    wait_ready(&m, "bad");
    for (run, args) in [
        (1, "{\"mib\": 17}\n"),
        (2, "{\"mib\": 17, \"last\": true}\n"),
    ] {
        let started = Instant::now();
        assert_eq!(m.call("bad/ops/huge", args), Err(EIO), "{args}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{args}: failed only after {:?}",
            started.elapsed()
        );
        let r = m.result("bad/ops/huge");
        // 17 MiB of text, its JSON around it.
        assert!(r.contains("the server's answer was 17,8"), "{args}: {r}");
        assert!(r.contains("more than the 16,777,215 bytes"), "{args}: {r}");
        assert_eq!(
            m.read(&format!("bad/ops/huge/runs/{run}/status")),
            "failed\n"
        );
    }
    // The server was not restarted: its next answer is its own, as before.
    let d = m.read("bad/description");
    assert!(d.contains("· ready ·"), "{d}");
    m.call("bad/ops/signals", "\n").unwrap();
    assert!(m.result("bad/ops/signals").starts_with("pid "));
}

/// An MCP server starts with no signal blocked, and an unmount leaves nothing of it: not
/// the server, which ignores the end of its stdin, nor the grandchild it detached with
/// `setsid`, which ignores SIGTERM.
#[test]
fn mcp_servers_start_with_plain_signals_and_an_unmount_leaves_none_of_their_processes() {
    let mut strays = common::Strays::default();
    let mut m = Mount::start(Some(&misbehave_host("bad", ", \"--stubborn\"")));
    wait_ready(&m, "bad");
    m.call("bad/ops/signals", "\n").unwrap();
    let r = m.result("bad/ops/signals");
    let server = common::number_after(&r, "pid");
    strays.watch(server);
    m.call("bad/ops/detach", "\n").unwrap();
    let grandchild = common::number_after(&m.result("bad/ops/detach"), "grandchild");
    strays.watch(grandchild);
    assert_eq!(common::status_field(&r, "SigBlk:"), 0, "{r}");
    // Python ignores SIGPIPE and SIGXFSZ itself; none of the stop signals is ignored.
    assert_eq!(
        common::status_field(&r, "SigIgn:") & common::STOP_SIGNALS,
        0,
        "{r}"
    );
    assert!(common::alive(grandchild));
    m.unmount();
    let left = strays.gone_within(Duration::from_secs(10));
    assert!(left.is_empty(), "still running after the unmount: {left:?}");
}

/// The daemon's log is the daemon's: with `WIP_LOG=info`, wip's own events are there and
/// a dependency's chatter is not (rmcp logs every progress notification at its INFO).
#[test]
fn the_log_carries_wips_own_events_not_a_dependencys_progress_chatter() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("daemon.log");
    let m = Mount::start_logged(
        &everything_host("mcp/everything", ""),
        &[("WIP_LOG", "info")],
        log.clone(),
    );
    wait_ready(&m, "mcp/everything");
    common::wait_until("the tool is an op", Duration::from_secs(10), || {
        m.path("mcp/everything/ops/trigger-long-running-operation/call")
            .exists()
    });
    m.call(
        "mcp/everything/ops/trigger-long-running-operation",
        "{\"duration\":2,\"steps\":4}",
    )
    .unwrap();
    assert!(m
        .read("mcp/everything/ops/trigger-long-running-operation/runs/1/progress")
        .starts_with("4/4"));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains(" INFO ") && l.contains("wip")),
        "wip's own INFO events are logged:\n{text}"
    );
    let chatter: Vec<&str> = text
        .lines()
        .filter(|l| (l.contains(" INFO ") || l.contains(" DEBUG ")) && !l.contains(" wip"))
        .collect();
    assert!(
        chatter.is_empty(),
        "a dependency's INFO reached the log: {chatter:#?}"
    );
}
