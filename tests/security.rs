//! Secrets never enter the world: with tokens in the daemon's environment and in the
//! manifest, an agent that prints its environment, exec hosts, an MCP server and a github
//! host (pointed at 127.0.0.1) are mounted and used; then the whole mount, the state
//! directory, the daemon's log and the environment of every child are searched for the
//! canary values: none may be found.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Mount;

/// Secrets in the daemon's environment: no child may inherit them, nothing may show them.
const DAEMON_CANARIES: [(&str, &str); 3] = [
    ("GITHUB_TOKEN", "ghp_canaryDaemonGithub0123456789abcdef"),
    ("OPENAI_API_KEY", "sk-canaryDaemonOpenai0123456789"),
    ("DB_PASSWORD", "canary-daemon-password-7f3e"),
];
/// A secret the manifest gives the MCP server: its child has it, the world never shows it.
const MANIFEST_CANARY: &str = "sk-canaryManifestMcp0123456789";
const MANIFEST_PLAIN_CANARY: &str = "canary-manifest-flag-9d1c";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn everything_js() -> String {
    common::fixtures()
        .join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// The descendants of `pid`, found through /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Field 4, after the parenthesised command name (which may hold spaces).
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if let Some(ppid) = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u32>().ok())
        {
            parent_of.push((p, ppid));
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parent_of {
            if parent == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// Every file below `dir` (bytes), for searching.
fn files_below(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => files_below(&path, out),
            Ok(t) if t.is_file() => {
                if let Ok(bytes) = std::fs::read(&path) {
                    out.push((path, bytes));
                }
            }
            _ => {}
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn no_secret_reaches_the_world_or_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("env_agent.py");
    std::fs::write(
        &agent,
        "import os, sys\nsys.stdin.read()\n\
         print('\\n'.join(f'{k}={v}' for k, v in sorted(os.environ.items())))\n",
    )
    .unwrap();
    let misbehave = repo().join("tests/hosts/misbehave.py");
    // GitHub is a port nothing listens on, reserved for the test (refused at once).
    let (_github_port, github) = common::refused_port();
    let manifest = format!(
        "[[host]]\nkind = \"agent\"\npath = \"agents/env\"\ncommand = [\"python3\", {agent:?}]\n\
         wait_ms = 20000\n\
         [[host]]\nkind = \"exec\"\npath = \"exec/passed\"\ncommand = [\"python3\", {mis:?}, \"crash\"]\n\
         pass_env = [\"MISBEHAVE_NOTE\"]\n\
         [[host]]\nkind = \"exec\"\npath = \"exec/plain\"\n\
         command = [\"python3\", {mis:?}, \"crash\", \"--password\", \"{MANIFEST_PLAIN_CANARY}\"]\n\
         [[host]]\nkind = \"mcp\"\npath = \"mcp/everything\"\ncommand = [\"node\", {mcp:?}, \"stdio\"]\n\
         env = {{ OPENAI_API_KEY = \"{MANIFEST_CANARY}\" }}\n\
         [[host]]\nkind = \"github\"\npath = \"github\"\nrepos = [\"octo/demo\"]\n\
         base_uri = \"http://127.0.0.1:{github}\"\ngh = false\n",
        agent = agent.display().to_string(),
        mis = misbehave.display().to_string(),
        mcp = everything_js(),
    );
    let log = dir.path().join("daemon.log");
    let mut env: Vec<(&str, &str)> = DAEMON_CANARIES.to_vec();
    env.push(("MISBEHAVE_NOTE", " (note passed by name)"));
    env.push(("WIP_LOG", "debug,fuser=warn,tantivy=warn"));
    let m = Mount::start_logged(&manifest, &env, log.clone());

    // Use every host.
    m.ok("echo 'print your environment' > agents/env/ops/ask/call");
    let ask = m.result("agents/env/ops/ask");
    assert!(
        ask.contains("PATH="),
        "the agent printed no environment: {ask}"
    );
    assert!(ask.contains("HOME="), "{ask}");
    assert!(m
        .read("exec/passed/description")
        .contains("(note passed by name)"));
    assert!(!m.read("exec/plain/description").contains("note passed"));
    m.ok("echo 'hi' > exec/plain/ops/echo/call");
    assert!(m.result("exec/plain/ops/echo").contains("echo: hi"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = m.read("mcp/everything/description");
        if d.contains("· ready ·") {
            break;
        }
        assert!(Instant::now() < deadline, "mcp never got ready: {d}");
        std::thread::sleep(Duration::from_millis(100));
    }
    m.ok("echo 'hello mcp' > mcp/everything/ops/echo/call");
    assert!(m.result("mcp/everything/ops/echo").contains("hello mcp"));
    let _ = m.sh("ls mcp/everything; cat github/description; ls github");
    let config = m.read(".wip/config");
    assert!(config.contains("<redacted>"), "{config}");

    // The environment of every child of the daemon (the exec hosts and the MCP server).
    let pid = m.daemon_pid().unwrap();
    let children = descendants(pid);
    let mut environs = Vec::new();
    for c in &children {
        if let Ok(bytes) = std::fs::read(format!("/proc/{c}/environ")) {
            environs.push((PathBuf::from(format!("/proc/{c}/environ")), bytes));
        }
    }
    assert!(environs.len() >= 3, "children found: {children:?}");
    let mcp_has_its_own = environs.iter().any(|(_, e)| contains(e, MANIFEST_CANARY));
    assert!(
        mcp_has_its_own,
        "the manifest's env did not reach the MCP server"
    );

    // What the world shows: the whole mount (indexable part), then what is reachable only
    // by path: the results, the agent's conversation, the runtime's files.
    let mut shown = Vec::new();
    // The walk must read everything it meets (an error would hide what a file shows),
    // except the listings of the GitHub host, which is unreachable by design: EIO, with
    // its root's description saying why (and read by the walk like any file).
    let walk = m.sh("grep -r -a . . | head -c 50000000");
    let errors = String::from_utf8_lossy(&walk.stderr);
    let unexpected: Vec<&str> = errors
        .lines()
        .filter(|l| !(l.starts_with("grep: ./github/") && l.ends_with(": Input/output error")))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the walk failed somewhere: {unexpected:?}"
    );
    shown.push((PathBuf::from("grep -r ."), walk.stdout));
    for p in [
        ".wip/config",
        ".wip/log",
        ".wip/known",
        "agents/env/ops/ask/result",
    ] {
        shown.push((PathBuf::from(p), m.read(p).into_bytes()));
    }
    for line in ask.lines().filter(|l| l.starts_with('/')) {
        let path = line.split_whitespace().next().unwrap_or("");
        let out = m.sh(&format!("grep -r -a . {path:?}"));
        assert!(
            out.stderr.is_empty(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        shown.push((PathBuf::from(path), out.stdout));
    }
    let mut state = Vec::new();
    files_below(&m.state, &mut state);
    // manifest.toml in the state dir is the test's own copy of the manifest it mounts.
    state.retain(|(p, _)| p.file_name().is_none_or(|n| n != "manifest.toml"));
    assert!(!state.is_empty());
    drop(m);
    let log_bytes = std::fs::read(&log).unwrap_or_default();
    assert!(!log_bytes.is_empty(), "the daemon logged nothing");

    let mut hits = Vec::new();
    for (what, bytes) in shown
        .iter()
        .chain(&state)
        .chain(std::iter::once(&(log.clone(), log_bytes.clone())))
    {
        for (name, value) in DAEMON_CANARIES {
            if contains(bytes, value) {
                hits.push(format!("{name} in {}", what.display()));
            }
        }
        for value in [MANIFEST_CANARY, MANIFEST_PLAIN_CANARY] {
            if contains(bytes, value) {
                hits.push(format!("manifest secret {value} in {}", what.display()));
            }
        }
    }
    for (what, bytes) in &environs {
        for (name, value) in DAEMON_CANARIES {
            if contains(bytes, value) {
                hits.push(format!("{name} in {}", what.display()));
            }
        }
    }
    assert!(hits.is_empty(), "{} hits: {hits:#?}", hits.len());
}

/// Token-shaped words in the manifest's own words (the world's description, a host's
/// description, a policy's reason) and secrets in the daemon's environment: the whole
/// mount (every file, op machinery included), every xattr, the state directory and the
/// log are searched for them after they were shown and used.
#[test]
fn secrets_in_the_manifests_words_are_printed_nowhere() {
    const WORLD: &str = "ghp_canaryWorldDescription0123456789";
    const HOST: &str = "sk-canaryHostDescription0123456789";
    const REASON: &str = "xoxb-canary-policy-reason-0123456789";
    const ENV_PLAIN: &str = "canary-env-plain-5e8a1";
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("echo_agent.py");
    std::fs::write(&agent, "import sys\nsys.stdin.read()\nprint('ok')\n").unwrap();
    let manifest = format!(
        "[world]\nname = \"canaries\"\ndescription = \"A world whose token is {WORLD}.\"\n\
         [[host]]\nkind = \"tracker\"\npath = \"tracker\"\nseed = \"demo\"\n\
         [[host]]\nkind = \"agent\"\npath = \"agents/helper\"\ncommand = [\"python3\", {agent:?}]\n\
         description = \"A helper that uses {HOST}\"\n\
         [[policy]]\nmatch = \"tracker/issues/*/ops/close\"\naction = \"deny\"\n\
         reason = \"ask the release bot ({REASON})\"\n",
        agent = agent.display().to_string(),
    );
    let log = dir.path().join("daemon.log");
    let env = [
        ("SERVICE_API_KEY", ENV_PLAIN),
        ("WIP_LOG", "debug,fuser=warn,tantivy=warn"),
    ];
    let m = Mount::start_logged(&manifest, &env, log.clone());
    // Show every word: the root, the README, the host's root, a guard and a refusal
    // quoting the reason (journaled), xattrs.
    let guard = m.read("tracker/issues/42/ops/close/guard");
    assert!(
        guard.contains("ask the release bot (<redacted>)"),
        "{guard}"
    );
    let out = m.sh("echo done > tracker/issues/42/ops/close/call");
    assert!(!out.status.success());
    let result = m.result("tracker/issues/42/ops/close");
    assert!(result.contains("<redacted>"), "{result}");
    assert!(m
        .read("description")
        .contains("A world whose token is <redacted>."));
    assert!(m.read("agents/helper/description").contains("<redacted>"));
    m.ok("echo hi > agents/helper/ops/ask/call");
    let mut shown = vec![
        (
            "grep -r .".to_string(),
            m.sh("grep -r -a . . | head -c 50000000").stdout,
        ),
        (
            "getfattr -R -d".to_string(),
            m.sh("getfattr -R -d -m - . | head -c 50000000").stdout,
        ),
    ];
    for p in [".wip/log", ".wip/known", ".wip/events", "README.md"] {
        shown.push((p.to_string(), m.read(p).into_bytes()));
    }
    let mut state = Vec::new();
    files_below(&m.state, &mut state);
    state.retain(|(p, _)| p.file_name().is_none_or(|n| n != "manifest.toml"));
    drop(m);
    let log_bytes = std::fs::read(&log).unwrap_or_default();
    assert!(!log_bytes.is_empty(), "the daemon logged nothing");
    let mut hits = Vec::new();
    let all = shown
        .into_iter()
        .chain(state.into_iter().map(|(p, b)| (p.display().to_string(), b)))
        .chain(std::iter::once(("the log".to_string(), log_bytes)));
    for (what, bytes) in all {
        for canary in [WORLD, HOST, REASON, ENV_PLAIN] {
            if contains(&bytes, canary) {
                hits.push(format!("{canary} in {what}"));
            }
        }
    }
    assert!(hits.is_empty(), "{hits:#?}");
}

/// Names and titles holding a newline, a tab or an escape sequence: listed rows stay one
/// row each and nothing the world prints carries a raw control character.
#[test]
fn control_characters_in_names_and_titles_are_printed_escaped() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("two\nlines.txt"), "x").unwrap();
    std::fs::write(root.path().join("red\u{1b}[31m.txt"), "y").unwrap();
    std::fs::write(root.path().join("tab\there.txt"), "z").unwrap();
    let state = tempfile::tempdir().unwrap();
    let m = Mount::start_in(None, root, state);
    m.ok("echo > files@/ops/list/call");
    let list = m.result("files@/ops/list");
    let rows: Vec<&str> = list.lines().skip(1).collect();
    assert!(rows.contains(&"two\\nlines.txt\tfile\t1 B"), "{list}");
    assert!(rows.contains(&"red\\e[31m.txt\tfile\t1 B"), "{list}");
    assert!(rows.contains(&"tab\\there.txt\tfile\t1 B"), "{list}");
    // A tracker title with an escape sequence, a newline and a bell.
    m.ok("printf '%s' '{\"title\":\"evil \\u001b[2J\\u001b]0;pwned\\u0007 title\\nsecond\"}' > tracker/ops/create_issue/call");
    let created = m.result("tracker/ops/create_issue");
    let issue = created
        .lines()
        .find_map(|l| {
            l.split('\t')
                .next()
                .filter(|p| p.contains("/tracker/issues/"))
        })
        .unwrap_or_else(|| panic!("{created}"))
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let description = m.read(&format!("tracker/issues/{issue}/description"));
    assert_eq!(description.lines().count(), 1, "{description:?}");
    assert!(
        description.contains("evil \\e[2J\\e]0;pwned\\x07 title"),
        "{description:?}"
    );
    let xattr = m.ok(&format!(
        "getfattr --only-values -n user.xdg.comment tracker/issues/{issue}"
    ));
    assert!(xattr.contains("evil \\e[2J"), "{xattr:?}");
    // A change through the mount to such a name: its run's words are escaped too.
    m.ok("cd files && touch \"$(printf 'red\\033[31m.txt')\" && mv \"$(printf 'two\\nlines.txt')\" one-line.txt");
    let renamed = m.read("files/one-line.txt@/ops/rename/result");
    assert!(renamed.contains("two\\nlines.txt"), "{renamed:?}");
    // Nothing printed anywhere holds a raw control character but newlines and tabs.
    m.ok("echo 'evil' > search/ops/search/call");
    for text in [
        list,
        created,
        description,
        xattr,
        m.result("search/ops/search"),
        m.read(".wip/known"),
        m.read(".wip/log"),
        m.read(&format!("tracker/issues/{issue}/ops/close/guard")),
        renamed,
        m.read(".wip/events"),
    ] {
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{text:?}"
        );
    }
}
