//! Tests of the agents host in-process, with the scripted agent of tests/agents/.

use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;

use serde_json::json;

use super::turn::{Line, Reader};
use super::*;
use crate::host::HostChange;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ctx(state: &Path, changes: Changes) -> HostContext {
    HostContext {
        launch_dir: repo(),
        mount_point: state.join("mnt"),
        changes,
        ..HostContext::for_tests(state)
    }
}

fn settings(extra: &[&str]) -> AgentSettings {
    let mut command = vec![
        "python3".to_string(),
        "tests/agents/echo_agent.py".to_string(),
    ];
    command.extend(extra.iter().map(|s| s.to_string()));
    AgentSettings {
        command,
        description: Some("Echoes what it is told".to_string()),
        // An instant agent answers within the call even when python takes seconds to
        // start on a loaded machine; tests of slow answers set their own, short wait.
        wait_ms: Some(20_000),
        timeout_ms: 60_000,
        wait_limit_ms: Some(20_000),
        env: BTreeMap::new(),
        pass_env: Vec::new(),
        page_size: 200,
    }
}

fn open(state: &Path, s: AgentSettings) -> AgentHost {
    match AgentHost::open(s, &ctx(state, Changes::detached()).at("agents/echo")) {
        Ok(h) => h,
        Err(e) => panic!("open: {e}"),
    }
}

fn open_with_changes(state: &Path, s: AgentSettings) -> (AgentHost, Receiver<HostChange>) {
    let (changes, rx) = Changes::channel();
    let h = match AgentHost::open(s, &ctx(state, changes.for_host(3)).at("agents/echo")) {
        Ok(h) => h,
        Err(e) => panic!("open: {e}"),
    };
    (h, rx)
}

fn p(s: &str) -> Vec<String> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split('/').map(str::to_string).collect()
    }
}

fn call(h: &AgentHost, path: &str, op: &str, args: Value) -> HostResult<CallOutcome> {
    h.call(&p(path), op, &args, &Caller::default())
}

fn description(h: &AgentHost, path: &str) -> String {
    h.entry(&p(path))
        .expect("entry")
        .unwrap_or_else(|| panic!("no entry {path}"))
        .description
}

fn names(h: &AgentHost, path: &str) -> Vec<String> {
    h.children(&p(path))
        .expect("children")
        .into_iter()
        .map(|c| c.name)
        .collect()
}

fn ask(h: &AgentHost, message: &str) -> HostResult<CallOutcome> {
    call(h, "", "ask", json!({ "message": message }))
}

fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    // A zombie is gone for our purposes: it runs nothing.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Wait (bounded) until the conversation leaves `working`.
fn settle(h: &AgentHost, path: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = description(h, path);
        if !d.contains("· working") || Instant::now() > deadline {
            return d;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ask_answers_and_makes_a_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path(), settings(&[]));
    let root = description(&h, "");
    assert!(root.starts_with("Echoes what it is told · "), "{root}");
    assert!(root.contains("0 conversations"), "{root}");
    assert!(root.contains("agents/echo/ops/ask/call"), "{root}");
    assert_eq!(names(&h, ""), vec!["conversations"]);
    assert!(!h.entry(&p("conversations")).unwrap().unwrap().indexable);

    let out = ask(&h, "hello there").unwrap();
    assert!(
        out.result
            .starts_with("echo: hello there [1 messages: user]\n"),
        "{}",
        out.result
    );
    assert!(out
        .result
        .contains("agents/echo/conversations/1/ops/reply/call"));
    assert_eq!(
        out.discovered,
        vec![
            p("conversations/1"),
            p("conversations/1/messages/1"),
            p("conversations/1/messages/2")
        ]
    );
    assert!(out.changed.contains(&p("conversations/1")));
    let d = description(&h, "conversations/1");
    assert_eq!(d, "Conversation 1 · done · 2 messages · \"hello there\"");
    assert_eq!(names(&h, "conversations"), vec!["1"]);
    // Listed inside conversations/, yet out of the indexable range when looked up.
    assert!(h.children(&p("conversations")).unwrap()[0].info.indexable);
    for inside in [
        "conversations/1",
        "conversations/1/messages",
        "conversations/1/messages/2",
    ] {
        assert!(!h.entry(&p(inside)).unwrap().unwrap().indexable, "{inside}");
    }
    assert!(h.entry(&[]).unwrap().unwrap().indexable);
    assert_eq!(names(&h, "conversations/1"), vec!["messages"]);
    assert_eq!(names(&h, "conversations/1/messages"), vec!["1", "2"]);
    assert_eq!(
        description(&h, "conversations/1/messages/1"),
        "user · hello there"
    );
    assert_eq!(
        description(&h, "conversations/1/messages/2"),
        "agent · echo: hello there [1 messages: user]"
    );
    let body = call(&h, "conversations/1/messages/2", "read_body", json!({})).unwrap();
    assert_eq!(body.result, "echo: hello there [1 messages: user]");
    let all = call(&h, "conversations/1", "read_body", json!({})).unwrap();
    assert!(all.result.contains("--- 1 · user · "), "{}", all.result);
    assert!(all.result.contains("--- 2 · agent · "), "{}", all.result);
    // The same texts are the entries' bodies, read without a call.
    let text = |path: &str| {
        let b = h.body(&p(path)).unwrap().expect("a body");
        assert!(b.modified.is_some(), "{path}");
        String::from_utf8(b.bytes.unwrap().to_vec()).unwrap()
    };
    assert_eq!(text("conversations/1/messages/2"), body.result);
    assert_eq!(text("conversations/1"), all.result);
    assert!(h.body(&p("conversations")).unwrap().is_none());
    assert_eq!(
        h.entry(&p("conversations/1/messages/2"))
            .unwrap()
            .unwrap()
            .reference,
        "agent://agents/echo/conversations/1/messages/2"
    );
    assert_eq!(
        h.resolve("agent://agents/echo/conversations/1"),
        vec![p("conversations/1")]
    );
    assert!(h.resolve("agent://agents/echo/conversations/9").is_empty());
    assert!(h.entry(&p("conversations/2")).unwrap().is_none());
    assert!(h.entry(&p("conversations/01")).unwrap().is_none());
    assert!(h.entry(&p("conversations/1/messages/3")).unwrap().is_none());
    assert!(description(&h, "").contains("1 conversation "));
}

#[test]
fn reply_continues_with_the_whole_history() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path(), settings(&[]));
    ask(&h, "first").unwrap();
    let out = call(&h, "conversations/1", "reply", json!({"message": "second"})).unwrap();
    assert!(
        out.result
            .starts_with("echo: second [3 messages: user,agent,user]"),
        "{}",
        out.result
    );
    assert!(out.discovered.contains(&p("conversations/1/messages/4")));
    assert_eq!(
        names(&h, "conversations/1/messages"),
        vec!["1", "2", "3", "4"]
    );
    assert!(description(&h, "conversations/1").contains("4 messages"));
    // Empty and unknown arguments are refused in words.
    for bad in [
        json!({"message": "  "}),
        json!({}),
        json!({"message": "x", "y": 1}),
    ] {
        assert!(matches!(
            call(&h, "conversations/1", "reply", bad),
            Err(HostError::InvalidArgs(_))
        ));
    }
    assert!(matches!(
        call(
            &h,
            "conversations/1/messages",
            "reply",
            json!({"message": "x"})
        ),
        Err(HostError::NotFound(_))
    ));
}

#[test]
fn a_slow_answer_returns_working_then_wait_gets_it() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(
        dir.path(),
        AgentSettings {
            wait_ms: Some(300),
            ..settings(&[])
        },
    );
    // ask returns before the answer: its result says working, not the answer.
    let out = ask(&h, "slow 2").unwrap();
    assert!(
        out.result.starts_with("conversation 1 is working"),
        "{}",
        out.result
    );
    assert!(
        out.result
            .contains("echo > agents/echo/conversations/1/ops/wait/call"),
        "{}",
        out.result
    );
    assert_eq!(
        out.discovered,
        vec![p("conversations/1"), p("conversations/1/messages/1")]
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut d = description(&h, "conversations/1");
    while !d.contains("status: sleeping 2 s") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        d = description(&h, "conversations/1");
    }
    assert!(d.contains("· working "), "{d}");
    assert!(d.contains("(status: sleeping 2 s)"), "{d}");
    assert!(description(&h, "").contains("(1 working)"));
    // Guards: reply blocked while working; cancel allowed; wait always.
    let g = h.guard(&p("conversations/1"), "reply", None).unwrap();
    assert!(!g.allowed());
    assert!(g.render().contains("ops/wait/call"), "{}", g.render());
    assert!(matches!(
        call(&h, "conversations/1", "reply", json!({"message": "more"})),
        Err(HostError::Blocked(_))
    ));
    assert!(h
        .guard(&p("conversations/1"), "cancel", None)
        .unwrap()
        .allowed());
    assert!(h
        .guard(&p("conversations/1"), "wait", None)
        .unwrap()
        .allowed());
    // A short wait times out in words; a long one gets the answer.
    match call(&h, "conversations/1", "wait", json!({"timeout_ms": 50})) {
        Err(HostError::TimedOut(w)) => assert!(w.contains("still working"), "{w}"),
        other => panic!("{other:?}"),
    }
    let out = call(&h, "conversations/1", "wait", json!({})).unwrap();
    assert!(
        out.result.starts_with("echo: slow 2 [1 messages: user]"),
        "{}",
        out.result
    );
    assert!(out.discovered.contains(&p("conversations/1/messages/2")));
    assert!(description(&h, "conversations/1").contains("· done ·"));
    assert!(!h
        .guard(&p("conversations/1"), "cancel", None)
        .unwrap()
        .allowed());
    assert!(h
        .guard(&p("conversations/1"), "reply", None)
        .unwrap()
        .allowed());
    // Waiting on a done conversation answers at once.
    let again = call(&h, "conversations/1", "wait", json!({"timeout_ms": 1})).unwrap();
    assert!(again.result.starts_with("echo: slow 2"));
    assert!(matches!(
        call(
            &h,
            "conversations/1",
            "wait",
            json!({"timeout_ms": 999_999})
        ),
        Err(HostError::InvalidArgs(_))
    ));
}

#[test]
fn cancel_stops_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut s = settings(&[]);
    s.wait_ms = Some(500);
    s.env
        .insert("AGENT_PIDS".into(), pid_file.display().to_string());
    let h = open(dir.path(), s);
    let out = ask(&h, "slow 60").unwrap();
    assert!(out.result.contains("working"), "{}", out.result);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids(&pid_file).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let procs = pids(&pid_file);
    assert_eq!(procs.len(), 2, "agent and its sleeper: {procs:?}");
    assert!(procs.iter().all(|&pid| alive(pid)));
    // cancel returns once the turn has ended, not after the agent's 60 s: the agent is
    // gone (reaped) when it returns, and what it started dies of the SIGKILL sent to its
    // group then (delivered asynchronously: a bounded wait).
    let out = call(&h, "conversations/1", "cancel", json!({})).unwrap();
    assert!(
        out.result.starts_with("cancelled conversation 1"),
        "{}",
        out.result
    );
    let (agent, sleeper) = (procs[0], procs[1]);
    assert!(!alive(agent), "the agent {agent} survived the cancel");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(sleeper) {
        assert!(Instant::now() < deadline, "{sleeper} survived the cancel");
        std::thread::sleep(Duration::from_millis(20));
    }
    let d = description(&h, "conversations/1");
    assert!(
        d.contains("· cancelled: stopped by a call of cancel ·"),
        "{d}"
    );
    assert!(matches!(
        call(&h, "conversations/1", "cancel", json!({})),
        Err(HostError::Blocked(_))
    ));
    // As a run's wait does: a cancelled turn's wait is ECANCELED.
    match call(&h, "conversations/1", "wait", json!({})) {
        Err(HostError::Cancelled(w)) => assert!(w.contains("cancelled"), "{w}"),
        other => panic!("{other:?}"),
    }
    // The conversation goes on after a cancel.
    call(&h, "conversations/1", "reply", json!({"message": "again"})).unwrap();
    let out = call(&h, "conversations/1", "wait", json!({})).unwrap();
    assert!(
        out.result
            .starts_with("echo: again [2 messages: user,user]"),
        "{}",
        out.result
    );
}

#[test]
fn a_failing_agent_fails_the_call_in_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path(), settings(&[]));
    match ask(&h, "fail") {
        Err(HostError::Backend(w)) => {
            assert!(w.contains("exit status 1"), "{w}");
            assert!(w.contains("something broke: no model named fail"), "{w}");
            assert!(w.contains("agents/echo/conversations/1"), "{w}");
        }
        other => panic!("{other:?}"),
    }
    let d = description(&h, "conversations/1");
    assert!(
        d.contains("· failed: exit status 1: loading the model / something broke"),
        "{d}"
    );
    assert!(h
        .guard(&p("conversations/1"), "reply", None)
        .unwrap()
        .allowed());
    assert!(matches!(
        call(&h, "conversations/1", "wait", json!({})),
        Err(HostError::Backend(_))
    ));
    // Invalid output, no answer, and a program that does not exist fail too, in words.
    for (message, words) in [
        ("bad", "invalid output: stdout line 3 is not a JSON object"),
        ("silent", "exited 0 without an answer"),
    ] {
        match ask(&h, message) {
            Err(HostError::Backend(w)) => assert!(w.contains(words), "{message}: {w}"),
            other => panic!("{message}: {other:?}"),
        }
    }
    let missing = open(
        tempfile::tempdir().unwrap().path(),
        AgentSettings {
            command: vec!["./no-such-agent".into()],
            ..settings(&[])
        },
    );
    match ask(&missing, "hi") {
        Err(HostError::Backend(w)) => assert!(w.contains("cannot start"), "{w}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn plain_text_answers_and_json_content() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path(), settings(&["--plain"]));
    let out = ask(&h, "hi").unwrap();
    assert!(
        out.result.starts_with("plain echo: hi\nsecond line\n\n"),
        "{}",
        out.result
    );
    assert_eq!(
        description(&h, "conversations/1/messages/2"),
        "agent · plain echo: hi · 2 lines (read_body)"
    );
    let h = open(tempfile::tempdir().unwrap().path(), settings(&[]));
    let out = ask(&h, "json").unwrap();
    assert!(
        out.result.starts_with("{\"answer\": 42}\n"),
        "{}",
        out.result
    );
}

#[test]
fn a_turn_past_its_limit_is_stopped_and_failed() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(
        dir.path(),
        AgentSettings {
            timeout_ms: 400,
            wait_ms: Some(3_000),
            ..settings(&[])
        },
    );
    // Within ask's 3 s wait the turn is stopped at its 0.4 s limit: ask fails with the
    // limit's words (had the limit not fired, ask would have returned "working").
    match ask(&h, "slow 30") {
        Err(HostError::Backend(w)) => assert!(w.contains("timed out after 0.4 s"), "{w}"),
        other => panic!("{other:?}"),
    }
    assert!(description(&h, "conversations/1").contains("· failed: timed out"));
}

#[test]
fn conversations_persist_and_a_cut_turn_is_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    {
        let mut s = settings(&[]);
        s.wait_ms = Some(200);
        s.env
            .insert("AGENT_PIDS".into(), pid_file.display().to_string());
        let h = open(dir.path(), s);
        // 200 ms may not be enough for python to answer on a loaded machine: the first
        // turn must be over (done) before the host goes, whatever ask returned.
        ask(&h, "keep me").unwrap();
        let first = settle(&h, "conversations/1");
        assert!(first.contains("· done · 2 messages"), "{first}");
        assert!(ask(&h, "slow 60").unwrap().result.contains("working"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while pids(&pid_file).len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Dropping the host killed the running agent (bounded: the kernel reaps it).
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Some(pid) = pids(&pid_file).into_iter().find(|&p| alive(p)) {
        assert!(Instant::now() < deadline, "{pid} outlived its host");
        std::thread::sleep(Duration::from_millis(20));
    }
    let h = open(dir.path(), settings(&[]));
    assert_eq!(names(&h, "conversations"), vec!["2", "1"]);
    assert!(description(&h, "conversations/1").contains("· done · 2 messages"));
    let d = description(&h, "conversations/2");
    assert!(d.contains("· interrupted: the daemon stopped"), "{d}");
    assert_eq!(
        call(&h, "conversations/1/messages/2", "read_body", json!({}))
            .unwrap()
            .result,
        "echo: keep me [1 messages: user]"
    );
    assert!(matches!(
        call(&h, "conversations/2", "wait", json!({})),
        Err(HostError::Backend(_))
    ));
    // An interrupted conversation can be taken up again; ids go on.
    let out = call(&h, "conversations/2", "reply", json!({"message": "go on"})).unwrap();
    assert!(out
        .result
        .starts_with("echo: go on [2 messages: user,user]"));
    ask(&h, "third").unwrap();
    assert_eq!(names(&h, "conversations"), vec!["3", "2", "1"]);
}

#[test]
fn a_background_end_is_reported_once_and_a_waited_one_by_the_call() {
    let dir = tempfile::tempdir().unwrap();
    // Two hosts: one whose ask waits longer than any start-up here takes (an instant
    // answer comes within the call), one whose ask returns long before "slow 3" answers.
    let patient_dir = tempfile::tempdir().unwrap();
    let (patient, patient_rx) = open_with_changes(
        patient_dir.path(),
        AgentSettings {
            wait_ms: Some(20_000),
            ..settings(&[])
        },
    );
    let (h, rx) = open_with_changes(
        dir.path(),
        AgentSettings {
            wait_ms: Some(300),
            ..settings(&[])
        },
    );
    // An instant answer is reported by the ask call itself, not again in the background.
    let quick = ask(&patient, "quick").unwrap();
    assert!(quick.result.starts_with("echo: quick"), "{}", quick.result);
    // A slow one ends in the background: the host reports its entries.
    assert!(ask(&h, "slow 3").unwrap().result.contains("working"));
    settle(&h, "conversations/1");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: Vec<Vec<String>> = Vec::new();
    while !seen.contains(&p("conversations/1/messages/2")) {
        assert!(Instant::now() < deadline, "never reported: {seen:?}");
        if let Ok(c) = rx.recv_timeout(Duration::from_millis(100)) {
            assert_eq!(c.host, 3);
            seen.extend(c.paths);
        }
    }
    for want in [
        "",
        "conversations",
        "conversations/1",
        "conversations/1/messages/2",
    ] {
        assert!(seen.contains(&p(want)), "{want} not reported: {seen:?}");
    }
    // Seconds later, the instant answer has still not been reported again. (A status
    // line may report the conversation itself; its messages are the call's to report.)
    let later: Vec<Vec<String>> = patient_rx.try_iter().flat_map(|c| c.paths).collect();
    assert!(
        !later
            .iter()
            .any(|path| path.starts_with(&p("conversations/1/messages"))),
        "the instant answer was reported again: {later:?}"
    );
}

#[test]
fn settings_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), Changes::detached());
    for bad in [
        AgentSettings {
            command: Vec::new(),
            ..settings(&[])
        },
        AgentSettings {
            timeout_ms: 0,
            ..settings(&[])
        },
        AgentSettings {
            wait_ms: Some(30_000),
            ..settings(&[])
        },
        AgentSettings {
            page_size: 0,
            ..settings(&[])
        },
        // A wait that could outlast the runtime's call timeout.
        AgentSettings {
            wait_limit_ms: Some(30_000),
            ..settings(&[])
        },
    ] {
        assert!(AgentHost::open(bad, &c.at("a")).is_err());
    }
    let parsed: AgentSettings = toml::from_str("command = [\"python3\", \"x.py\"]\n").unwrap();
    assert_eq!(
        parsed.wait_ms, None,
        "by default a call waits for its turn: it is a run"
    );
    let host = AgentHost::open(parsed, &c.at("a")).unwrap();
    // The default wait limit follows the world's call timeout (30 s by default).
    assert_eq!(host.inner.wait_limit, Duration::from_secs(25));
    assert!(toml::from_str::<AgentSettings>("command = [\"x\"]\nnope = 1\n").is_err());
}

#[test]
fn the_reader_decides_by_the_first_line() {
    let mut r = Reader::default();
    assert_eq!(r.line("\n"), Line::Nothing);
    assert_eq!(
        r.line("{\"status\": \"thinking\"}\n"),
        Line::Status("thinking".into())
    );
    assert_eq!(r.line("{\"content\": \"a\\n\"}\n"), Line::Nothing);
    assert_eq!(r.line("{\"content\": \"b\", \"x\": 1}\n"), Line::Nothing);
    assert_eq!(r.answer(), Some("a\nb".to_string()));

    let mut r = Reader::default();
    assert_eq!(r.line("Hello {\"content\": 1}\n"), Line::Nothing);
    assert_eq!(r.line("{\"content\": \"x\"}\n"), Line::Nothing);
    assert_eq!(
        r.answer(),
        Some("Hello {\"content\": 1}\n{\"content\": \"x\"}".into())
    );

    for bad in [
        "{\"other\": 1}",
        "{\"content\": 5}",
        "{\"status\": []}",
        "{bad",
    ] {
        let mut r = Reader::default();
        assert!(matches!(r.line(bad), Line::Invalid(_)), "{bad}");
    }
    let mut r = Reader::default();
    r.line("{\"status\": \"only progress\"}");
    assert_eq!(r.answer(), None);
}

#[test]
fn the_example_manifest_and_agent_work() {
    let manifest = crate::manifest::Manifest::load(&repo().join("mounts/agents.toml")).unwrap();
    let spec = manifest
        .hosts
        .iter()
        .find(|h| h.kind == "agent")
        .expect("an agent host");
    let dir = tempfile::tempdir().unwrap();
    let h = AgentHost::open(
        spec.settings().unwrap(),
        &ctx(dir.path(), Changes::detached()).at(&spec.path),
    )
    .unwrap();
    // The answer, however long python takes to start here: ask's own wait may end first,
    // wait blocks until the turn is done.
    let answer = || {
        call(&h, "conversations/1", "wait", json!({}))
            .unwrap()
            .result
    };
    call(
        &h,
        "",
        "ask",
        json!({"message": "how do I count the lines of a file?"}),
    )
    .unwrap();
    let out = answer();
    assert!(out.starts_with("wc -l FILE\n"), "{out}");
    call(
        &h,
        "conversations/1",
        "reply",
        json!({"message": "another"}),
    )
    .unwrap();
    let out = answer();
    assert!(out.starts_with("wc -w FILE\n"), "{out}");
}

#[test]
fn ops_keep_their_names_schemas_and_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let h = open(dir.path(), settings(&[]));
    ask(&h, "first").unwrap();
    let names = |path: &str| -> Vec<String> {
        h.ops(&p(path))
            .unwrap()
            .into_iter()
            .map(|o| o.name)
            .collect()
    };
    assert_eq!(names(""), ["ask"]);
    assert_eq!(
        names("conversations/1"),
        ["reply", "wait", "cancel", "read_body"]
    );
    assert_eq!(names("conversations/1/messages/1"), ["read_body"]);
    assert!(names("conversations").is_empty());
    assert!(names("conversations/1/messages").is_empty());
    let root = h.ops(&[]).unwrap();
    assert_eq!(
        root[0].schema,
        json!({
            "type": "object",
            "properties": {
                "message": {"type": "string", "minLength": 1, "description": "what to ask"}
            },
            "required": ["message"],
            "additionalProperties": false
        })
    );
    assert!(
        root[0].description.contains("within 20 s"),
        "{}",
        root[0].description
    );
    let conv = h.ops(&p("conversations/1")).unwrap();
    assert_eq!(
        conv[0].schema["properties"]["message"]["description"],
        "what to say next"
    );
    let mut wait = conv[1].schema.clone();
    // The integer's width is the generator's addition, not a constraint.
    wait["properties"]["timeout_ms"]
        .as_object_mut()
        .unwrap()
        .remove("format");
    assert_eq!(
        wait,
        json!({
            "type": "object",
            "properties": {
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 20_000,
                               "description": "how long to wait, in milliseconds"}
            },
            "required": [],
            "additionalProperties": false
        })
    );
    assert!(conv[1].description.contains("default and at most 20000"));
    assert_eq!(conv[2].schema["properties"], json!({}));
    // A guard fails in words: the answer is in, so there is nothing to cancel.
    let g = h.guard(&p("conversations/1"), "cancel", None).unwrap();
    assert!(!g.allowed());
    assert!(
        g.render().contains("there is nothing to cancel"),
        "{}",
        g.render()
    );
    assert!(matches!(
        call(&h, "conversations/1", "cancel", json!({})),
        Err(HostError::Blocked(_))
    ));
}
