//! Policy and approvals through a real mount: `[[policy]]` deny and argument rules refuse
//! with words; an approve rule holds a call as a pending run that a person approves or
//! denies with the real `wip approve` / `wip deny` (from another session, another uid),
//! never the caller's own session unless the rule says so; pending runs survive a remount
//! and expire.
//!
//! The agent runs in a session of its own (`setsid -w bash -c …`), as an agent's shell
//! does; the person is the test's own session.

mod common;

use std::time::Duration;

use common::Mount;

const MANIFEST: &str = r#"
[world]
name = "approvals"

[identity]
user = "alex"
role = "maintainer"

[[host]]
kind = "tracker"
path = "tracker"
seed = "demo"

[[policy]]
match = "tracker/issues/*/ops/close"
action = "deny"
reason = "issues are closed by the release process"

[[policy]]
match = "tracker/issues/*/ops/label"
args = { add = "wontfix" }
action = "deny"

[[policy]]
match = "tracker/issues/*/ops/comment"
action = "approve"

[[policy]]
match = "tracker/issues/*/ops/assign"
action = "approve"
self_approve = true

[[policy]]
match = "tracker/issues/*/ops/unassign"
action = "approve"
approvers = [4242]

[[policy]]
match = "tracker/issues/*/ops/get_metadata"
action = "approve"
expires_after = "1s"

[[policy]]
match = "tracker/issues/*/ops/edit_body"
action = "approve"
expires_after = "1s"
"#;

/// The uid of the second approver (no user of that id is needed: setpriv sets it).
const OTHER_UID: u32 = 4242;

fn mount() -> Mount {
    Mount::start(Some(MANIFEST))
}

/// Run `script` as the agent: bash in a session of its own. Returns (stdout, stderr).
fn agent(m: &Mount, script: &str) -> (String, String) {
    let quoted = script.replace('\'', r"'\''");
    let out = m.sh(&format!("setsid -w bash -c '{quoted}'"));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `script` as the person (the test's session); returns (exit code, stdout, stderr).
fn person(m: &Mount, script: &str) -> (i32, String, String) {
    let out = m.sh(script);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run a decision the daemon must refuse; returns its words (stderr).
fn refused(m: &Mount, script: &str) -> String {
    let (code, out, err) = person(m, script);
    assert_eq!(code, 1, "{script}: {out}{err}");
    err
}

/// The absolute path of the pending run a `result` names.
fn run_path(result: &str) -> String {
    let at = result
        .find("waits as the pending run ")
        .unwrap_or_else(|| panic!("no pending run in: {result}"));
    let rest = &result[at + "waits as the pending run ".len()..];
    rest.split_whitespace().next().unwrap().to_string()
}

/// The agent asks for a comment on issue 42; returns the pending run's path.
fn pending_comment(m: &Mount, body: &str) -> String {
    let (_, err) = agent(
        m,
        &format!("echo '{{\"body\":\"{body}\"}}' > tracker/issues/42/ops/comment/call"),
    );
    assert!(
        err.contains("write error: Operation now in progress"),
        "{err}"
    );
    let result = m.result("tracker/issues/42/ops/comment");
    run_path(&result)
}

fn in_mount(m: &Mount, abs: &str, file: &str) -> String {
    let rel = abs
        .strip_prefix(&format!("{}/", m.mount.display()))
        .unwrap();
    m.read(&format!("{rel}/{file}"))
}

fn comments_of_42(m: &Mount) -> String {
    m.ok("cat tracker/issues/42/comments/*/description")
}

#[test]
fn deny_and_argument_rules_refuse_with_the_rules_words() {
    let m = mount();
    let guard = m.read("tracker/issues/42/ops/close/guard");
    assert!(
        guard.contains("✗ policy: denied by rule 1 (match \"tracker/issues/*/ops/close\"): issues are closed by the release process"),
        "{guard}"
    );
    let (_, err) = agent(&m, "echo done > tracker/issues/42/ops/close/call");
    assert!(err.contains("close/call: Permission denied"), "{err}");
    let result = m.result("tracker/issues/42/ops/close");
    assert!(result.contains("denied by rule 1"), "{result}");
    let runs = m.ok("ls tracker/issues/42/ops/close/runs");
    let id = runs.lines().next().unwrap();
    assert_eq!(
        m.read(&format!("tracker/issues/42/ops/close/runs/{id}/status")),
        "forbidden\n"
    );
    assert!(m
        .read("tracker/issues/42/description")
        .starts_with("Issue #42 · open"));

    // A rule on arguments: the guard says so, the call with them is refused when it runs.
    let guard = m.read("tracker/issues/42/ops/label/guard");
    assert!(guard.starts_with("allowed\n"), "{guard}");
    assert!(
        guard.contains("rule 2 (match \"tracker/issues/*/ops/label\", args {\"add\":\"wontfix\"}) denies calls with those arguments"),
        "{guard}"
    );
    // An array argument matches when it holds the rule's value, in any form.
    let (_, err) = agent(
        &m,
        "echo '{\"add\":[\"docs\",\"wontfix\"]}' > tracker/issues/42/ops/label/call",
    );
    assert!(err.contains("write error: Permission denied"), "{err}");
    assert!(m
        .result("tracker/issues/42/ops/label")
        .contains("denied by rule 2"));
    let (_, err) = agent(&m, "$WIP call tracker/issues/42/ops/label add=wontfix");
    assert!(
        err.contains("Permission denied") && err.contains("denied by rule 2"),
        "{err}"
    );
    let (_, err) = agent(
        &m,
        "echo '{\"add\":[\"docs\"]}' > tracker/issues/42/ops/label/call",
    );
    assert_eq!(err, "");
    let labels = m.result("tracker/issues/42/ops/label");
    assert!(
        labels.contains("docs") && !labels.contains("wontfix"),
        "{labels}"
    );
}

#[test]
fn an_approved_call_runs_and_a_denied_one_never_does() {
    let m = mount();
    let guard = m.read("tracker/issues/42/ops/comment/guard");
    assert!(
        guard.contains(
            "✗ sign_off: needs a person's sign-off (rule 3); the call will wait as a pending run"
        ),
        "{guard}"
    );
    let run = pending_comment(&m, "ship it");
    let result = m.result("tracker/issues/42/ops/comment");
    assert!(result.contains(&format!("approve {run}\n")), "{result}");
    assert!(
        result.contains(&format!("deny {run} [--reason …]")),
        "{result}"
    );
    assert_eq!(in_mount(&m, &run, "status"), "pending\n");
    assert!(m
        .read(".wip/pending")
        .starts_with(&format!("{run}\tcomment on /tracker/issues/42")));
    assert!(!comments_of_42(&m).contains("ship it"));

    let (code, out, err) = person(&m, &format!("$WIP approve {run}"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("approved /"), "{out}");
    assert!(out.contains("/ops/") && out.contains("/runs/"), "{out}");
    assert!(out.contains("added comment"), "{out}");
    assert!(comments_of_42(&m).contains("ship it"));
    assert_eq!(in_mount(&m, &run, "status"), "ok\n");
    let approval = in_mount(&m, &run, "approval");
    assert!(
        approval.starts_with("signed off by root (uid 0) at "),
        "{approval}"
    );
    assert!(m
        .result("tracker/issues/42/ops/comment")
        .starts_with("added comment"));

    let run = pending_comment(&m, "not yet");
    let (code, out, err) = person(
        &m,
        &format!("$WIP deny {run} --reason 'wait for the release'"),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("denied /"), "{out}");
    assert_eq!(in_mount(&m, &run, "status"), "denied\n");
    assert_eq!(
        in_mount(&m, &run, "result"),
        "error: denied by root (uid 0): wait for the release; the call never ran\n"
    );
    assert!(!comments_of_42(&m).contains("not yet"));
    // A second decision is EINVAL, whichever it is.
    let err = refused(&m, &format!("$WIP approve {run}"));
    assert!(
        err.contains("Invalid argument") && err.contains("already decided"),
        "{err}"
    );
    assert!(!comments_of_42(&m).contains("not yet"));

    // `wip call` hears EINPROGRESS and prints where the run waits.
    let (out, _) = agent(
        &m,
        "$WIP call tracker/issues/42/ops/comment \"via wip call\" 2>&1; echo rc=$?",
    );
    assert!(
        out.contains("Operation now in progress")
            && out.contains("waits as the pending run")
            && out.contains("rc=1"),
        "{out}"
    );
    let run = run_path(&out);
    // Nothing inside the mount decides, tried while the run still waits: no file of the
    // run takes a decision, and writing the op's call again makes a new run, not a yes.
    for file in ["approval", "status", "result"] {
        let (_, err) = agent(&m, &format!("echo approved > {run}/{file}"));
        assert!(
            !err.is_empty(),
            "writing {file} of a pending run was accepted"
        );
    }
    // The run's own cancel is no decision either: it is refused while a person decides.
    let (_, err) = agent(&m, &format!("echo > {run}/ops/cancel/call"));
    assert!(err.contains("Operation not permitted"), "{err}");
    assert_eq!(in_mount(&m, &run, "status"), "pending\n");
    assert!(!comments_of_42(&m).contains("via wip call"));
    person(&m, &format!("$WIP deny {run}"));
    assert_eq!(m.read(".wip/pending"), "no pending runs\n");
    assert_eq!(
        m.read(".wip/control"),
        format!("{}/control.sock\n", m.state.display())
    );
    assert!(m.read("README.md").contains(" approve RUN"));
    let events = m.read(".wip/events");
    for kind in ["pending", "approved", "denied"] {
        assert!(
            events.contains(&format!("\"kind\":\"{kind}\"")),
            "{kind} missing from {events}"
        );
    }
    assert_eq!(in_mount(&m, &run, "status"), "denied\n");
}

#[test]
fn self_approval_is_refused_unless_the_rule_allows_it() {
    let m = mount();
    // The agent tries to approve its own call, from its session and from a new one.
    let (out, _) = agent(
        &m,
        "echo '{\"body\":\"trust me\"}' > tracker/issues/42/ops/comment/call
         run=$(grep -o '/[^ ]*/runs/[0-9]*' tracker/issues/42/ops/comment/result | head -1)
         $WIP approve \"$run\" 2>&1; echo rc=$?
         setsid -w $WIP approve \"$run\" 2>&1; echo rc=$?",
    );
    assert_eq!(out.matches("caller's own session").count(), 2, "{out}");
    assert_eq!(out.matches("rc=1").count(), 2, "{out}");
    assert!(!comments_of_42(&m).contains("trust me"));
    let run = run_path(&m.result("tracker/issues/42/ops/comment"));
    assert_eq!(in_mount(&m, &run, "status"), "pending\n");

    // With self_approve = true the caller may decide.
    let (out, _) = agent(
        &m,
        "echo '{\"user\":\"sam\"}' > tracker/issues/42/ops/assign/call
         run=$(grep -o '/[^ ]*/runs/[0-9]*' tracker/issues/42/ops/assign/result | head -1)
         $WIP approve \"$run\"; echo rc=$?",
    );
    assert!(out.contains("approved /") && out.contains("rc=0"), "{out}");
    assert!(m.read("tracker/issues/42/description").contains("sam"));
}

/// A decision sent over a connection whose connecting process is gone by the time the
/// request arrives: the child that called `connect()` exits and is reaped, then its parent,
/// in the caller's own session, sends the request on the same socket.
const REAPED_PEER: &str = r#"
import json, os, socket, sys
sock_path, run = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
child = os.fork()
if child == 0:
    s.connect(sock_path)
    os._exit(0)
os.waitpid(child, 0)
s.sendall((json.dumps({"decision": "approve", "run": run}) + "\n").encode())
answer = b""
while not answer.endswith(b"\n"):
    piece = s.recv(65536)
    if not piece:
        break
    answer += piece
print(answer.decode().strip())
"#;

#[test]
fn a_decision_whose_connecting_process_is_gone_is_refused() {
    let m = mount();
    let script = m.state.join("reaped_peer.py");
    std::fs::write(&script, REAPED_PEER).unwrap();
    // The agent's own call, then its decisions, from its own session, five times over
    // (the race the kernel decides).
    let (out, err) = agent(
        &m,
        &format!(
            "echo '{{\"body\":\"reaped\"}}' > tracker/issues/42/ops/comment/call
             run=$(grep -o '/[^ ]*/runs/[0-9]*' tracker/issues/42/ops/comment/result | head -1)
             sock=$(head -1 .wip/control)
             for i in 1 2 3 4 5; do python3 {} \"$sock\" \"$run\"; done",
            script.display()
        ),
    );
    let run = run_path(&m.result("tracker/issues/42/ops/comment"));
    assert_eq!(out.lines().count(), 5, "{out}{err}");
    for line in out.lines() {
        let answer: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(answer["ok"], false, "{line}");
        let text = answer["text"].as_str().unwrap();
        assert!(
            text.contains("exited before the daemon could see")
                || text.contains("caller's own session"),
            "{text}"
        );
    }
    assert_eq!(in_mount(&m, &run, "status"), "pending\n");
    assert!(!comments_of_42(&m).contains("reaped"));
    // A person outside the session still decides it.
    let (code, out, err) = person(&m, &format!("$WIP approve {run}"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(comments_of_42(&m).contains("reaped"));
}

#[test]
fn a_pending_run_survives_a_remount_and_stays_approvable() {
    let mut m = mount();
    let run = pending_comment(&m, "after the remount");
    m.unmount();
    m.remount();
    assert!(m.read(".wip/pending").starts_with(&format!("{run}\t")));
    assert_eq!(in_mount(&m, &run, "status"), "pending\n");
    let (code, out, err) = person(&m, &format!("$WIP approve {run}"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(comments_of_42(&m).contains("after the remount"));
}

#[test]
fn approvers_by_uid_decide_over_their_own_socket() {
    let m = mount();
    let state = m.state.display().to_string();
    // The other approver has no access to the mount, only to the state directory's sockets.
    m.ok(&format!("chmod 711 {state}"));
    let modes = m.ok(&format!(
        "stat -c '%n %a %u' {state}/control.sock {state}/control-u{OTHER_UID}.sock"
    ));
    assert_eq!(
        modes,
        format!("{state}/control.sock 600 0\n{state}/control-u{OTHER_UID}.sock 600 {OTHER_UID}\n")
    );
    let (_, err) = agent(
        &m,
        "echo '{\"user\":\"dana\"}' > tracker/issues/42/ops/unassign/call",
    );
    assert!(err.contains("Operation now in progress"), "{err}");
    let result = m.result("tracker/issues/42/ops/unassign");
    assert!(
        result.contains(&format!("Who may decide: uid {OTHER_UID}.")),
        "{result}"
    );
    let run = run_path(&result);
    let err = refused(&m, &format!("$WIP approve {run}"));
    assert!(
        err.contains(&format!("root (uid 0) may not decide {run}:"))
            && err.contains(&format!("lets only uid {OTHER_UID} decide")),
        "{err}"
    );
    let as_other = format!("setpriv --reuid={OTHER_UID} --regid={OTHER_UID} --clear-groups $WIP");
    // Another uid cannot read the mount, so it names the state directory.
    let (code, out, err) = person(&m, &format!("{as_other} approve --state {state} {run}"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("unassigned"), "{out}");
    assert!(!m.read("tracker/issues/42/description").contains("dana"));
    let approval = in_mount(&m, &run, "approval");
    assert!(
        approval.starts_with(&format!("signed off by uid {OTHER_UID} at ")),
        "{approval}"
    );
    // It may decide only what names it.
    let run = pending_comment(&m, "other");
    let err = refused(&m, &format!("{as_other} deny --state {state} {run}"));
    assert!(
        err.contains("Permission denied") && err.contains("lets only root (uid 0) decide"),
        "{err}"
    );
}

#[test]
fn a_pending_run_nobody_decides_expires_and_never_runs() {
    let m = mount();
    // An op whose running would show: it replaces the issue's text.
    let before = m.read("tracker/issues/42/body");
    let (_, err) = agent(
        &m,
        "echo 'body=replaced while nobody looked' > tracker/issues/42/ops/edit_body/call; echo > tracker/issues/42/ops/get_metadata/call",
    );
    assert!(err.contains("Operation now in progress"), "{err}");
    let result = m.result("tracker/issues/42/ops/edit_body");
    assert!(result.contains("(after 1s)"), "{result}");
    let run = run_path(&result);
    // Bounded wait for the expiry (due after one second).
    common::wait_until("the run's expiry", Duration::from_secs(60), || {
        in_mount(&m, &run, "status") != "pending\n"
    });
    assert_eq!(in_mount(&m, &run, "status"), "expired\n");
    assert!(in_mount(&m, &run, "result").contains("nobody decided in time"));
    assert!(m.read(".wip/events").contains("\"kind\":\"expired\""));
    // It never ran: the text is what it was, and no later moment runs it.
    assert_eq!(m.read("tracker/issues/42/body"), before);
    common::wait_until(
        "the other pending run's expiry",
        Duration::from_secs(60),
        || m.read(".wip/pending") == "no pending runs\n",
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(m.read("tracker/issues/42/body"), before);
    let err = refused(&m, &format!("$WIP approve {run}"));
    assert!(
        err.contains("already decided") && err.contains("expired at"),
        "{err}"
    );
    assert_eq!(m.read("tracker/issues/42/body"), before);
}

#[test]
fn a_policy_rule_overrides_the_mcp_hosts_annotation_defaults() {
    let memory = common::fixtures()
        .join("node/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    let dir = tempfile::tempdir().unwrap();
    let manifest = format!(
        "[[host]]\nkind = \"mcp\"\npath = \"mcp/memory\"\ncommand = [\"node\", {:?}]\n\
         env = {{ MEMORY_FILE_PATH = {:?} }}\n\n\
         [[policy]]\nmatch = \"mcp/memory/ops/delete_entities\"\naction = \"approve\"\n",
        memory.display().to_string(),
        dir.path().join("memory.jsonl").display().to_string()
    );
    let m = Mount::start(Some(&manifest));
    common::wait_until("the memory server", Duration::from_secs(60), || {
        m.read("mcp/memory/description").contains("· ready ·")
    });
    // Without a rule, the server's destructive hint is the host's default: denied.
    let guard = m.read("mcp/memory/ops/delete_relations/guard");
    assert!(
        guard.contains("✗ policy: the server marks \"delete_relations\" destructive")
            && guard.contains("or a [[policy]] rule for this op"),
        "{guard}"
    );
    // The manifest's rule comes first: a person decides instead.
    let guard = m.read("mcp/memory/ops/delete_entities/guard");
    assert!(
        guard.contains("✓ server")
            && guard.contains("✗ sign_off: needs a person's sign-off (rule 1)"),
        "{guard}"
    );
    assert!(!guard.contains("✗ policy"), "{guard}");
    m.ok("echo '{\"entities\":[{\"name\":\"Temp\",\"entityType\":\"note\",\"observations\":[]}]}' > mcp/memory/ops/create_entities/call");
    m.ok("echo > mcp/memory/ops/read_graph/call");
    assert!(m.result("mcp/memory/ops/read_graph").contains("Temp"));
    let (_, err) = agent(
        &m,
        "echo '{\"entityNames\":[\"Temp\"]}' > mcp/memory/ops/delete_entities/call",
    );
    assert!(err.contains("Operation now in progress"), "{err}");
    let run = run_path(&m.result("mcp/memory/ops/delete_entities"));
    let (code, out, err) = person(&m, &format!("$WIP approve {run}"));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(in_mount(&m, &run, "status"), "ok\n");
    m.ok("echo > mcp/memory/ops/read_graph/call");
    assert!(!m.result("mcp/memory/ops/read_graph").contains("Temp"));
}

/// A merge closes the issues its pull request fixes: a rule that denies `close` holds for
/// the merge too, which is refused (EACCES) with the side effect named; nothing closes.
#[test]
fn a_merge_whose_side_effect_a_rule_denies_is_refused() {
    let m = mount();
    let guard = m.read("tracker/pulls/50/ops/merge/guard");
    assert!(
        guard.starts_with("blocked\n")
            && guard.contains(
                "✗ side_effects: this call would also run tracker/issues/42/ops/close, which rule 1"
            )
            && guard.contains("denies: issues are closed by the release process"),
        "{guard}"
    );
    let (_, err) = agent(
        &m,
        "echo '{\"method\":\"squash\"}' > tracker/pulls/50/ops/merge/call",
    );
    assert!(err.contains("Permission denied"), "{err}");
    assert!(m.read("tracker/issues/42/description").contains("· open ·"));
    assert!(m.read("tracker/pulls/50/description").contains("· open ·"));
    // A pull request that fixes nothing has no such line.
    assert!(!m
        .read("tracker/pulls/53/ops/merge/guard")
        .contains("side_effects"));
}

/// A person's yes runs the call checked again: `wip approve` exits 2 when the approved call
/// fails (an unknown user to assign), and a rule added to the manifest since the call was
/// held refuses it at approval (the run is forbidden, nothing changes).
#[test]
fn an_approved_call_that_fails_exits_2_and_a_rule_added_since_refuses_it() {
    let mut m = mount();
    let (_, err) = agent(
        &m,
        r#"echo '{"user":"ghost-user"}' > tracker/issues/42/ops/assign/call"#,
    );
    assert!(err.contains("Operation now in progress"), "{err}");
    let run = run_path(&m.result("tracker/issues/42/ops/assign"));
    let (code, out, err) = person(&m, &format!("$WIP approve {run}"));
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("ghost-user"), "{out}");
    assert_eq!(in_mount(&m, &run, "status"), "invalid\n");

    let run = pending_comment(&m, "before the new rule");
    m.unmount();
    let stricter = MANIFEST.replacen(
        "[[policy]]",
        "[[policy]]\nmatch = \"tracker/issues/*/ops/comment\"\naction = \"deny\"\nreason = \"comments are closed\"\n\n[[policy]]",
        1,
    );
    std::fs::write(m.state.join("manifest.toml"), stricter).unwrap();
    m.remount();
    assert_eq!(in_mount(&m, &run, "status"), "pending\n");
    let (code, out, err) = person(&m, &format!("$WIP approve {run}"));
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("comments are closed"), "{out}");
    assert_eq!(in_mount(&m, &run, "status"), "forbidden\n");
    assert!(!comments_of_42(&m).contains("before the new rule"));
}
