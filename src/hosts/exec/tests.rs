//! Protocol round trips, the client's framing against an in-process peer on a unix socket,
//! and the host's behaviour against the real Python hosts (examples/hosts, tests/hosts).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::protocol::*;
use super::*;
use crate::host::{Caller, Changes, Condition, Guard, HostChange};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ctx(changes: Changes) -> HostContext {
    HostContext {
        launch_dir: repo(),
        changes,
        ..HostContext::for_tests(&std::env::temp_dir())
    }
}

fn settings(toml_text: &str) -> ExecSettings {
    toml::from_str(toml_text).unwrap()
}

fn caller() -> Caller {
    Caller {
        pid: std::process::id(),
        uid: unsafe { libc::getuid() },
        session: 1,
        command: "test".into(),
        ..Default::default()
    }
}

// ---- protocol ---------------------------------------------------------------------------

#[test]
fn wire_types_round_trip() {
    let entry = WireEntry {
        description: "PID 7 · sleep".into(),
        reference: "proc://h/7/99".into(),
        indexable: false,
        modified: Some(1_700_000_000.5),
        kind: None,
        title: Some("sleep 300".into()),
    };
    let v = serde_json::to_value(&entry).unwrap();
    assert_eq!(v["ref"], "proc://h/7/99");
    assert_eq!(serde_json::from_value::<WireEntry>(v).unwrap(), entry);
    assert_eq!(entry.info().title.as_deref(), Some("sleep 300"));
    // Defaults: indexable, no time; unknown fields ignored.
    let e: WireEntry =
        serde_json::from_value(json!({"description": "d", "ref": "r", "colour": "red"})).unwrap();
    assert!(e.indexable && e.modified.is_none());
    let info = entry.clone().into_info();
    assert_eq!(WireEntry::from_info(&info), entry);

    let page: ChildrenPage = serde_json::from_value(json!({
        "children": [{"name": "7", "description": "d", "ref": "r"}], "next_cursor": "8"
    }))
    .unwrap();
    assert_eq!(page.children[0].clone().into_child().name, "7");
    assert_eq!(
        serde_json::from_value::<ChildrenPage>(serde_json::to_value(&page).unwrap()).unwrap(),
        page
    );

    let guard = Guard::new(vec![
        Condition::check("exists", true, "it runs"),
        Condition::policy("not_init", false, "PID 1"),
    ]);
    let wire = WireGuard::from_guard(&guard);
    let back: WireGuard = serde_json::from_value(serde_json::to_value(&wire).unwrap()).unwrap();
    assert_eq!(back.into_guard(), guard);

    let out: WireOutcome = serde_json::from_value(json!({"result": "ok"})).unwrap();
    assert_eq!(out.into_outcome(), CallOutcome::text("ok"));
    let init = InitializeParams {
        protocol: PROTOCOL.into(),
        version: VERSION,
        path: vec!["processes".into()],
        identity: WireIdentity {
            user: "alex".into(),
            role: "maintainer".into(),
        },
        runtime: RuntimeInfo {
            pid: 1,
            uid: 0,
            mount_point: "/w".into(),
        },
    };
    let v = serde_json::to_value(&init).unwrap();
    assert_eq!(serde_json::from_value::<InitializeParams>(v).unwrap(), init);
    let hello: InitializeResult = serde_json::from_value(
        json!({"protocol": PROTOCOL, "version": 1, "name": "x", "extra": [1]}),
    )
    .unwrap();
    assert_eq!(hello.capabilities, Capabilities::default());
    let docs: DocumentsPage = serde_json::from_value(json!({"documents": [
        {"path": ["a"], "title": "t", "text": "x", "version": "1"}]}))
    .unwrap();
    assert_eq!(docs.into_documents().0[0].path, vec!["a".to_string()]);
}

#[test]
fn incoming_lines_are_classified_or_refused_with_reasons() {
    assert_eq!(
        Incoming::parse(r#"{"jsonrpc":"2.0","id":3,"result":null}"#).unwrap(),
        Incoming::Response {
            id: 3,
            outcome: Ok(Value::Null)
        }
    );
    let Incoming::Response {
        outcome: Err(e), ..
    } = Incoming::parse(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32003,"message":"gone"}}"#)
        .unwrap()
    else {
        panic!("not an error response");
    };
    assert_eq!(e.code, code::NOT_FOUND);
    assert_eq!(
        Incoming::parse(r#"{"jsonrpc":"2.0","method":"changed","params":{"paths":[["1"]]}}"#)
            .unwrap(),
        Incoming::Message {
            method: "changed".into(),
            params: json!({"paths": [["1"]]}),
            id: None
        }
    );
    for (junk, why) in [
        ("hello", "expected"),
        ("[1]", "object"),
        (r#"{"id":1,"result":2}"#, "jsonrpc"),
        (r#"{"jsonrpc":"2.0","id":"a","result":2}"#, "numeric"),
        (
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"not JSON"}}"#,
            "answers no request (the host could not read one?): code -32700: not JSON",
        ),
        (r#"{"jsonrpc":"2.0","id":1}"#, "exactly one"),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#,
            "malformed",
        ),
    ] {
        let err = Incoming::parse(junk).unwrap_err().to_string();
        assert!(err.contains(why), "{junk}: {err}");
    }
}

#[test]
fn error_codes_map_to_host_errors_both_ways() {
    let guard = Guard::new(vec![Condition::policy("not_init", false, "PID 1")]);
    for e in [
        HostError::InvalidArgs("bad".into()),
        HostError::Blocked(guard.clone()),
        HostError::Forbidden("no".into()),
        HostError::NotFound("none".into()),
        HostError::Backend("disk".into()),
        HostError::TimedOut("slow".into()),
    ] {
        let back = host_error("h", "call", rpc_error(&e));
        assert_eq!(
            std::mem::discriminant(&back),
            std::mem::discriminant(&e),
            "{e:?} came back as {back:?}"
        );
    }
    let blocked = host_error("h", "call", rpc_error(&HostError::Blocked(guard.clone())));
    assert_eq!(blocked, HostError::Blocked(guard));
    // Blocked without a guard is still blocked, with the host's words.
    let bare = host_error(
        "h",
        "call",
        RpcError {
            code: code::BLOCKED,
            message: "not now".into(),
            data: None,
        },
    );
    assert!(matches!(bare, HostError::Blocked(_)) && bare.to_string().contains("not now"));
    let odd = host_error(
        "h",
        "ops",
        RpcError {
            code: 17,
            message: "what".into(),
            data: None,
        },
    );
    assert!(
        matches!(odd, HostError::Backend(ref m) if m.contains("code 17") && m.contains("what"))
    );
    let missing = host_error(
        "h",
        "guard",
        RpcError {
            code: code::METHOD_NOT_FOUND,
            message: "no".into(),
            data: None,
        },
    );
    assert!(missing.to_string().contains("does not implement guard"));
}

#[test]
fn backoff_doubles_up_to_a_cap() {
    assert_eq!(client::backoff(1), Duration::from_millis(250));
    assert_eq!(client::backoff(2), Duration::from_millis(500));
    assert_eq!(client::backoff(3), Duration::from_secs(1));
    assert_eq!(client::backoff(40), Duration::from_secs(30));
}

#[test]
fn settings_need_exactly_one_transport() {
    let (changes, _rx) = Changes::channel();
    let c = ctx(changes);
    for bad in [
        "",
        "command = [\"true\"]\nconnect = \"unix:/x\"",
        "command = []",
        "connect = \"http://x\"",
        "command = [\"true\"]\ntimeout_ms = 0",
    ] {
        let s: ExecSettings = settings(bad);
        let err = ExecHost::open(s, &c.at("x")).err().map(|e| e.to_string());
        assert!(err.is_some(), "accepted: {bad}");
    }
    assert!(toml::from_str::<ExecSettings>("comand = [\"x\"]").is_err());
}

// ---- client framing against an in-process peer -------------------------------------------

/// A peer on a unix socket: answers initialize, then runs `script` on each request.
fn peer(script: impl Fn(&Value, &mut dyn Write) + Send + 'static) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("peer.sock");
    let listener = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut w = stream.try_clone().unwrap();
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                let msg: Value = serde_json::from_str(&line).unwrap();
                if msg["method"] == "initialize" {
                    let r = json!({"jsonrpc": "2.0", "id": msg["id"], "result":
                        {"protocol": PROTOCOL, "version": 1, "name": "peer"}});
                    writeln!(w, "{r}").unwrap();
                } else {
                    script(&msg, &mut w);
                }
            }
        }
    });
    (dir, path)
}

fn answer(msg: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string()
}

fn socket_host(path: &std::path::Path, extra: &str, changes: Changes) -> ExecHost {
    let s = settings(&format!(
        "connect = \"unix:{}\"\ntimeout_ms = 500\ncall_timeout_ms = 500\n{extra}",
        path.display()
    ));
    ExecHost::open(s, &ctx(changes).at("peer")).unwrap()
}

#[test]
fn answers_reach_their_callers_by_id_and_notifications_reach_the_world() {
    // Holds `entry` of ["slow"] until `entry` of ["fast"] arrives, then answers fast first:
    // the answers come back out of order, each to its own caller.
    let (got_slow, slow_arrived) = std::sync::mpsc::channel();
    let held = std::sync::Mutex::new(None::<Value>);
    let (_d, path) = peer(move |msg, w| {
        let p = msg["params"]["path"].clone();
        match msg["method"].as_str().unwrap() {
            "entry" if p == json!(["slow"]) => {
                *held.lock().unwrap() = Some(msg.clone());
                let _ = got_slow.send(());
            }
            "entry" => {
                let e = json!({"description": format!("entry {p}"), "ref": "r"});
                writeln!(w, "{}", answer(msg, e)).unwrap();
                if let Some(slow) = held.lock().unwrap().take() {
                    let e = json!({"description": "slow one", "ref": "r:slow"});
                    writeln!(w, "{}", answer(&slow, e)).unwrap();
                }
                let n = json!({"jsonrpc": "2.0", "method": "changed", "params": {"paths": [["a", "b"]]}});
                writeln!(w, "{n}").unwrap();
            }
            _ => writeln!(w, "{}", answer(msg, Value::Null)).unwrap(),
        }
    });
    let (changes, rx) = Changes::channel();
    let host = Arc::new(socket_host(&path, "", changes.for_host(3)));
    let h2 = Arc::clone(&host);
    let slow = std::thread::spawn(move || h2.entry(&["slow".to_string()]));
    slow_arrived
        .recv_timeout(Duration::from_secs(10))
        .expect("the slow request never reached the peer");
    let fast = host.entry(&["fast".to_string()]).unwrap().unwrap();
    assert_eq!(fast.description, "entry [\"fast\"]");
    assert_eq!(
        slow.join().unwrap().unwrap().unwrap().description,
        "slow one"
    );
    let change = rx.recv_timeout(Duration::from_secs(2)).unwrap();
    assert_eq!(
        change,
        HostChange {
            host: 3,
            paths: vec![vec!["a".to_string(), "b".to_string()]],
            tree: Vec::new(),
        }
    );
}

#[test]
fn junk_and_silence_fail_with_words_then_fail_fast_while_restarting() {
    let (_d, path) = peer(|msg, w| match msg["params"]["path"][0].as_str() {
        Some("junk") => writeln!(w, "Traceback (most recent call last):").unwrap(),
        Some("silent") => {}
        _ => writeln!(
            w,
            "{}",
            answer(msg, json!({"description": "ok", "ref": "r"}))
        )
        .unwrap(),
    });
    let (changes, rx) = Changes::channel();
    let host = socket_host(&path, "", changes);
    assert_eq!(
        host.entry(&["x".into()]).unwrap().unwrap().description,
        "ok"
    );
    let err = host.entry(&["junk".into()]).unwrap_err();
    assert!(
        matches!(&err, HostError::Backend(m) if m.contains("not JSON-RPC") && m.contains("Traceback")),
        "{err:?}"
    );
    // Restarting: fails without trying, saying why and when it tries again (how fast is
    // measured by scripts/bench.sh).
    let err = host.entry(&["x".into()]).unwrap_err();
    assert!(
        err.to_string()
            .contains("is restarting (last failure: the host sent a line that is not JSON-RPC")
            && err.to_string().contains("Traceback")
            && err.to_string().contains("next attempt in"),
        "{err}"
    );
    // The root still exists and says the host is down.
    let root = host.entry(&[]).unwrap().unwrap();
    assert!(root.description.contains("is down"), "{}", root.description);
    // After its backoff it is reached again.
    let deadline = Instant::now() + Duration::from_secs(30);
    let back = loop {
        match host.entry(&["x".into()]) {
            Ok(e) => break e.unwrap(),
            Err(e) => assert!(Instant::now() < deadline, "never came back: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(back.description, "ok");
    // Going down and coming back each changed the root's description: reported.
    for _ in 0..2 {
        let c = rx.recv_timeout(Duration::from_secs(1)).unwrap();
        assert_eq!(c.paths, vec![Vec::<String>::new()]);
    }
    let err = host.entry(&["silent".into()]).unwrap_err();
    assert!(
        matches!(&err, HostError::TimedOut(m) if m.contains("no answer to entry within 500 ms")),
        "{err:?}"
    );
}

#[test]
fn an_unreachable_socket_is_a_down_root_not_a_failed_mount() {
    let dir = tempfile::tempdir().unwrap();
    let host = socket_host(&dir.path().join("nobody.sock"), "", Changes::detached());
    let root = host.entry(&[]).unwrap().unwrap();
    assert!(
        root.description.contains("is down") && root.description.contains("nobody.sock"),
        "{}",
        root.description
    );
    assert!(matches!(host.children(&[]), Err(HostError::Backend(_))));
}

// ---- the real Python hosts ----------------------------------------------------------------

fn processes(extra: &str, changes: Changes) -> ExecHost {
    let s = settings(&format!(
        "command = [\"python3\", \"examples/hosts/processes.py\"]\n{extra}"
    ));
    ExecHost::open(s, &ctx(changes).at("processes")).unwrap()
}

fn misbehave(mode: &str) -> ExecHost {
    // Only the host that never answers waits out its start timeout; for the others a long
    // one keeps a slow Python start on a busy machine from looking like silence.
    let (read, start) = if mode == "mute" {
        (2000, 1500)
    } else {
        (20_000, 20_000)
    };
    let s = settings(&format!(
        "command = [\"python3\", \"tests/hosts/misbehave.py\", \"{mode}\"]\ntimeout_ms = {read}\nstart_timeout_ms = {start}\ncall_timeout_ms = 1000"
    ));
    ExecHost::open(s, &ctx(Changes::detached()).at(&format!("bad/{mode}"))).unwrap()
}

#[test]
fn processes_host_lists_every_process_across_pages() {
    let host = processes("page_size = 7", Changes::detached());
    let root = host.entry(&[]).unwrap().unwrap();
    assert!(
        root.description.starts_with("Processes of"),
        "{}",
        root.description
    );
    assert!(root.modified.is_some());
    let before: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let listed = host.children(&[]).unwrap();
    assert!(listed.len() > 7, "only {} listed", listed.len());
    let names: Vec<u32> = listed.iter().map(|c| c.name.parse().unwrap()).collect();
    // Long-lived processes present before and after appear once each, in order.
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    assert!(names.contains(&1) && names.contains(&std::process::id()));
    assert!(before.iter().filter(|p| names.contains(p)).count() * 10 >= before.len() * 8);
    let me = host
        .entry(&[std::process::id().to_string()])
        .unwrap()
        .unwrap();
    assert!(me.reference.starts_with("proc://"), "{}", me.reference);
    assert!(host.entry(&["0042x".into()]).unwrap().is_none());
    let ops: Vec<String> = host
        .ops(&["1".into()])
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(ops, ["read_body", "signal"]);
}

#[test]
fn processes_host_signals_what_its_guard_allows() {
    let host = processes("", Changes::detached());
    let mut child = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let pid = vec![child.id().to_string()];
    let g = host
        .guard(&pid, "signal", Some(&json!({"signal": "TERM"})))
        .unwrap();
    assert!(g.allowed(), "{}", g.render());
    let out = host.call(&pid, "read_body", &json!({}), &caller()).unwrap();
    assert!(out.result.contains("command: sleep 300"), "{}", out.result);
    let out = host
        .call(&pid, "signal", &json!({"signal": "TERM"}), &caller())
        .unwrap();
    assert!(out.result.starts_with("sent SIGTERM"), "{}", out.result);
    assert_eq!(out.changed, vec![pid.clone()]);
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
    // PID 1 is refused by policy, with the guard.
    let err = host
        .call(
            &["1".into()],
            "signal",
            &json!({"signal": "KILL"}),
            &caller(),
        )
        .unwrap_err();
    match err {
        HostError::Blocked(g) => {
            let c = g.first_failure().unwrap();
            assert!(c.policy && c.name == "not_init", "{}", g.render());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_host_that_crashes_mid_call_is_eio_and_comes_back() {
    let host = misbehave("crash");
    let err = host
        .call(&[], "misbehave", &json!({}), &caller())
        .unwrap_err();
    assert!(
        matches!(&err, HostError::Backend(m) if m.contains("exited (exit status: 3) during call")),
        "{err:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match host.call(&[], "echo", &json!({"text": "again"}), &caller()) {
            Ok(o) => {
                assert_eq!(o.result, "echo: again\n");
                break;
            }
            Err(e) => {
                assert!(e.to_string().contains("restarting"), "{e}");
                assert!(Instant::now() < deadline, "never came back: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[test]
fn a_host_that_hangs_or_prints_junk_fails_with_words() {
    let hang = misbehave("hang");
    let err = hang
        .call(&[], "misbehave", &json!({}), &caller())
        .unwrap_err();
    assert!(
        matches!(&err, HostError::TimedOut(m) if m.contains("ran longer than call_timeout_ms (1000 ms) and was cancelled")),
        "{err:?}"
    );
    let junk = misbehave("junk");
    let err = junk
        .call(&[], "misbehave", &json!({}), &caller())
        .unwrap_err();
    assert!(
        matches!(&err, HostError::Backend(m) if m.contains("not JSON-RPC") && m.contains("<html>this is not JSON-RPC</html>")),
        "{err:?}"
    );
}

#[test]
fn a_host_that_never_shakes_hands_or_speaks_another_version_is_down_with_words() {
    let mute = misbehave("mute");
    let root = mute.entry(&[]).unwrap().unwrap();
    assert!(
        root.description
            .contains("no answer to initialize within 1500 ms"),
        "{}",
        root.description
    );
    let future = misbehave("future");
    let root = future.entry(&[]).unwrap().unwrap();
    assert!(
        root.description.contains("version 99"),
        "{}",
        root.description
    );
    let err = future.ops(&[]).unwrap_err();
    assert!(
        matches!(&err, HostError::Backend(m) if m.contains("version 99")),
        "{err:?}"
    );
}

#[test]
fn the_command_gets_the_manifest_env_and_runs_in_the_launch_directory() {
    let s = settings(
        "command = [\"python3\", \"tests/hosts/misbehave.py\", \"junk\"]\n\
         env = { MISBEHAVE_NOTE = \" with a note\" }\n",
    );
    let host = ExecHost::open(s, &ctx(Changes::detached()).at("noted")).unwrap();
    let root = host.entry(&[]).unwrap().unwrap();
    assert!(
        root.description
            .starts_with("a host that misbehaves (junk) with a note, pid"),
        "{}",
        root.description
    );
    assert_eq!(host.cache_ttl(), Duration::from_millis(1000));
}

// ---- what the client asks: the recording host ------------------------------------------------

/// The requests a recording host got, one JSON object each.
fn requests(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn count(log: &std::path::Path, method: &str, path: Value) -> usize {
    requests(log)
        .iter()
        .filter(|r| r["method"] == method && r["path"] == path)
        .count()
}

fn recorder(log: &std::path::Path, args: &str, extra: &str) -> ExecHost {
    let s = settings(&format!(
        "command = [\"python3\", \"tests/hosts/recorder.py\", {:?}{args}]\n{extra}",
        log.display().to_string()
    ));
    ExecHost::open(s, &ctx(Changes::detached()).at("rec")).unwrap()
}

fn p(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

fn names(ops: Vec<OpSpec>) -> Vec<String> {
    ops.into_iter().map(|o| o.name).collect()
}

#[test]
fn ops_declared_per_kind_are_never_asked_per_path() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let host = recorder(&log, ", \"--kinds\"", "");
    assert_eq!(names(host.ops(&[]).unwrap()), ["echo", "crash"]);
    assert!(host.ops(&p(&["items"])).unwrap().is_empty());
    for n in ["1", "2", "3"] {
        assert_eq!(
            names(host.ops(&p(&["items", n])).unwrap()),
            ["read_body", "touch"]
        );
    }
    assert_eq!(
        requests(&log)
            .iter()
            .filter(|r| r["method"] == "ops")
            .count(),
        0,
        "{:?}",
        requests(&log)
    );
    // The served schema says what the runtime enforces: closed unless the host says.
    let echo = host.ops(&[]).unwrap().remove(0);
    assert_eq!(echo.schema["additionalProperties"], json!(false));

    // Without kinds, each path is asked.
    let log2 = dir.path().join("log2");
    let plain = recorder(&log2, "", "");
    assert_eq!(
        names(plain.ops(&p(&["items", "2"])).unwrap()),
        ["read_body", "touch"]
    );
    assert_eq!(count(&log2, "ops", json!(["items", "2"])), 1);
}

#[test]
fn entries_are_asked_once_within_their_lifetime_and_again_after_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    // A lifetime far beyond the test: what is asked twice was asked because it had to be.
    let host = recorder(&log, "", "cache_ttl_ms = 3600000");
    for _ in 0..5 {
        host.entry(&[]).unwrap().unwrap();
    }
    assert_eq!(count(&log, "entry", json!([])), 1);
    // A listing describes its children: looking them up asks nothing more.
    assert_eq!(host.children(&p(&["items"])).unwrap().len(), 3);
    for n in ["1", "2", "3"] {
        let e = host.entry(&p(&["items", n])).unwrap().unwrap();
        assert_eq!(e.description, format!("item {n}, touched 0 times"));
    }
    assert_eq!(
        requests(&log)
            .iter()
            .filter(|r| r["method"] == "entry")
            .count(),
        1
    );
    // A call that changed an entry: it and its ancestors are asked again, the others not.
    host.call(&p(&["items", "2"]), "touch", &json!({}), &caller())
        .unwrap();
    let e = host.entry(&p(&["items", "2"])).unwrap().unwrap();
    assert_eq!(e.description, "item 2, touched 1 times");
    host.entry(&p(&["items"])).unwrap();
    host.entry(&p(&["items", "1"])).unwrap();
    assert_eq!(count(&log, "entry", json!(["items", "2"])), 1);
    assert_eq!(count(&log, "entry", json!(["items"])), 1);
    assert_eq!(count(&log, "entry", json!(["items", "1"])), 0);
    // After a restart, the new process is asked once, however often the root is looked at.
    assert!(host.call(&[], "crash", &json!({}), &caller()).is_err());
    let first_pid = requests(&log)[0]["pid"].clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !host
        .entry(&[])
        .unwrap()
        .unwrap()
        .description
        .contains("a recording host")
    {
        assert!(Instant::now() < deadline, "never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..5 {
        host.entry(&[]).unwrap().unwrap();
    }
    let second: Vec<Value> = requests(&log)
        .into_iter()
        .filter(|r| r["pid"] != first_pid && r["method"] == "entry" && r["path"] == json!([]))
        .collect();
    assert_eq!(second.len(), 1, "{second:?}");
}

#[test]
fn a_call_that_crashes_the_host_is_refused_for_a_while_and_the_root_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let host = recorder(&log, "", "");
    // Retried as fast as it comes back, the call is soon refused without reaching the host.
    let deadline = Instant::now() + Duration::from_secs(60);
    let refused = loop {
        let err = host
            .call(&[], "crash", &json!({}), &caller())
            .unwrap_err()
            .to_string();
        if err.contains("crashes on this call") {
            break err;
        }
        assert!(
            err.contains("during call") || err.contains("restarting") || err.contains("starting"),
            "{err}"
        );
        assert!(Instant::now() < deadline, "never refused: {err}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        refused.contains("host rec crashes on this call: it went down during it")
            && refused.contains("the host exited (exit status: 3) during call")
            && refused.contains("refused for"),
        "{refused}"
    );
    let crashes = requests(&log)
        .iter()
        .filter(|r| r["method"] == "call" && r["op"] == "crash")
        .count();
    assert!(crashes >= 1, "{crashes}");
    // The host's root says which call crashes it, while it is up.
    let deadline = Instant::now() + Duration::from_secs(30);
    let root = loop {
        let d = host.entry(&[]).unwrap().unwrap().description;
        if d.starts_with("a recording host") {
            break d;
        }
        assert!(Instant::now() < deadline, "never came back: {d}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        root.contains(&format!(
            "crashes on this call: rec/ops/crash ({crashes} time"
        )),
        "{root}"
    );
    // Other calls go on meanwhile.
    let out = host
        .call(&[], "echo", &json!({"text": "still"}), &caller())
        .unwrap();
    assert_eq!(out.result, "echo: still\n");
}

#[test]
fn a_body_is_text_or_base64_bytes_and_bytes_are_never_writable() {
    let body = |v: Value| serde_json::from_value::<WireBody>(v).unwrap().into_body();
    let text = body(json!({"text": "hi", "write": {"op": "set", "arg": "v"}})).unwrap();
    assert_eq!(text.bytes.as_deref(), Some(&b"hi"[..]));
    assert!(text.write.is_some());
    let bytes =
        body(json!({"base64": "iVBORw0KGgoA/w==", "write": {"op": "set", "arg": "v"}})).unwrap();
    assert_eq!(
        bytes.bytes.as_deref(),
        Some(&b"\x89PNG\r\n\x1a\n\x00\xff"[..])
    );
    assert!(
        bytes.write.is_none(),
        "bytes cannot be an op's string argument"
    );
    for wrong in [
        json!({}),
        json!({"text": "a", "base64": "YQ=="}),
        json!({"base64": "*"}),
    ] {
        assert!(body(wrong.clone()).is_err(), "{wrong}");
    }
}
