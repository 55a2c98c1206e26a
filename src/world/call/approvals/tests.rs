//! Policy and approvals at the world level, with the in-memory host of `world::tests`: deny
//! and argument rules, pending runs approved, denied, refused to their own caller, decided
//! by uid, expired, and kept across a remount; approved runs checked again.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{parse_run_path, Person, Verb};
use crate::host::Caller;
use crate::host::Session;
use crate::state::Decider;
use crate::world::call::policy::{Action, Glob, Policy, Rule};
use crate::world::node::{NodeId, RunFile, WipFile};
use crate::world::settings::WorldSettings;
use crate::world::tests::{
    caller, flush, mem_world, notes, open, result, root, write, Fixture, MemHost,
};

const AGENT: u32 = 500;

fn rule(pattern: &str, action: Action) -> Rule {
    Rule {
        number: 0,
        pattern: Glob::new(pattern).unwrap(),
        action,
        args: None,
        approvers: if action == Action::Approve {
            vec![0]
        } else {
            Vec::new()
        },
        expires_after: None,
        self_approve: false,
        reason: None,
    }
}

fn policy(mut rules: Vec<Rule>) -> Policy {
    for (i, r) in rules.iter_mut().enumerate() {
        r.number = i + 1;
    }
    Policy::new(rules)
}

fn fixture(rules: Vec<Rule>) -> Fixture {
    let host = Arc::new(MemHost::default());
    let state = tempfile::tempdir().unwrap();
    let world = mem_world(WorldSettings::default(), &host, state.path(), policy(rules));
    world.calls().start_approvals().unwrap();
    Fixture {
        world,
        host,
        _state: state,
    }
}

/// A person at another terminal (uid 0 unless said otherwise).
fn person(uid: u32, session: u32) -> Person {
    Person {
        decider: Decider {
            uid,
            pid: std::process::id(),
            session,
            command: "wip approve".into(),
        },
        sessions: vec![terminal(session), terminal(1)],
    }
}

/// Session `number`, begun at an unknown time (as `caller` makes them).
fn terminal(number: u32) -> Session {
    Session {
        number,
        start: 0,
        uid: 0,
    }
}

/// A decision the world refuses: its errno and words.
fn refused(f: &Fixture, run: &str, verb: &Verb, who: &Person) -> (i32, String) {
    let e = f.world.decide(run, verb, who).unwrap_err();
    (e.errno(), e.to_string())
}

fn read(f: &Fixture, node: NodeId) -> String {
    String::from_utf8(f.world.read(&node, Session::NONE).unwrap()).unwrap()
}

fn approval_of(f: &Fixture, id: i64) -> String {
    read(f, NodeId::RunFile(id, RunFile::Approval))
}

fn status(f: &Fixture, id: i64) -> String {
    f.world.journal().get(id).unwrap().unwrap().status
}

fn events(f: &Fixture) -> Vec<String> {
    f.world
        .journal()
        .events_after(0, 1000)
        .unwrap()
        .into_iter()
        .map(|e| format!("{} {}", e.kind, e.status.unwrap_or_default()))
        .collect()
}

/// Write a note as the agent; the run waits. Returns its id.
fn pending_note(f: &Fixture, text: &str) -> i64 {
    let doc = open(f, "note", AGENT);
    let body = format!("{{\"text\":\"{text}\"}}");
    assert_eq!(write(&doc, body.as_bytes()), Err(libc::EINPROGRESS));
    let id = f.world.journal().latest("/mem", "note").unwrap().unwrap();
    assert_eq!(status(f, id), "pending");
    id
}

#[test]
fn a_deny_rule_refuses_at_open_with_the_rules_words() {
    let mut deny = rule("mem/ops/note", Action::Deny);
    deny.reason = Some("notes are kept elsewhere".into());
    let f = fixture(vec![deny]);
    let guard = f.world.calls().guard(&root(), "note").unwrap().render();
    assert_eq!(
        guard,
        "blocked\n✗ policy: denied by rule 1 (match \"mem/ops/note\"): notes are kept elsewhere\n"
    );
    let e = f
        .world
        .calls()
        .open_call(&root(), "note", &caller(AGENT))
        .err()
        .unwrap();
    assert_eq!(e.errno(), libc::EACCES);
    assert!(result(&f, "note", AGENT).contains("denied by rule 1"));
    let id = f.world.journal().latest("/mem", "note").unwrap().unwrap();
    assert_eq!(status(&f, id), "forbidden");
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 0);
    // Other ops are untouched.
    assert_eq!(write(&open(&f, "sleep", AGENT), b"{\"ms\":0}"), Ok(8));
}

#[test]
fn a_rule_on_arguments_refuses_when_the_document_runs() {
    let mut secret = rule("mem/ops/note", Action::Deny);
    secret.args = Some(
        serde_json::json!({"text": "secret"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let f = fixture(vec![secret]);
    let guard = f.world.calls().guard(&root(), "note").unwrap().render();
    assert!(guard.starts_with("allowed\n"), "{guard}");
    assert!(guard.contains("rule 1 (match \"mem/ops/note\", args {\"text\":\"secret\"}) denies calls with those arguments"), "{guard}");
    assert_eq!(
        write(&open(&f, "note", AGENT), b"{\"text\":\"secret\"}"),
        Err(libc::EACCES)
    );
    assert!(result(&f, "note", AGENT).contains("denied by rule 1"));
    // Plain text is the same argument: refused at the close.
    let doc = open(&f, "note", AGENT);
    assert_eq!(write(&doc, b"secret\n"), Ok(7));
    assert_eq!(flush(&doc, true), Err(libc::EACCES));
    assert_eq!(
        write(&open(&f, "note", AGENT), b"{\"text\":\"fine\"}"),
        Ok(15)
    );
    assert_eq!(notes(&f), vec!["fine"]);
}

#[test]
fn an_approved_run_runs_with_its_recorded_arguments_as_its_caller() {
    let f = fixture(vec![rule("mem/ops/note", Action::Approve)]);
    let guard = f.world.calls().guard(&root(), "note").unwrap().render();
    assert!(
        guard.contains(
            "✗ sign_off: needs a person's sign-off (rule 1); the call will wait as a pending run"
        ),
        "{guard}"
    );
    let id = pending_note(&f, "ship it");
    let words = result(&f, "note", AGENT);
    let run_dir = format!("/mnt/w/mem/ops/note/runs/{id}");
    assert!(
        words.contains(&format!("waits as the pending run {run_dir}")),
        "{words}"
    );
    assert!(words.contains(&format!(" approve {run_dir}\n")), "{words}");
    assert!(
        words.contains(&format!(" deny {run_dir} [--reason …]")),
        "{words}"
    );
    assert!(
        words.contains("Who may decide: root (uid 0). It does not expire."),
        "{words}"
    );
    assert!(notes(&f).is_empty(), "nothing ran yet");
    let pending = read(&f, NodeId::WipFile(WipFile::Pending));
    assert!(
        pending.starts_with(&format!(
            "{run_dir}\tnote on /mem · args {{\"text\":\"ship it\"}}"
        )),
        "{pending}"
    );
    let approval = approval_of(&f, id);
    assert!(approval.starts_with("pending: waiting"), "{approval}");

    let d = f
        .world
        .decide(
            &format!("{run_dir}/result"),
            &Verb::Approve,
            &person(0, 900),
        )
        .unwrap();
    assert!(d.call_ok);
    assert!(
        d.text
            .starts_with(&format!("approved {run_dir}; it ran:\nnoted 1")),
        "{}",
        d.text
    );
    assert_eq!(notes(&f), vec!["ship it"]);
    assert_eq!(status(&f, id), "ok");
    // The caller's session reads its call's outcome.
    assert_eq!(result(&f, "note", AGENT), "noted 1\n");
    let run = f.world.journal().get(id).unwrap().unwrap();
    assert_eq!(run.session, AGENT, "it ran as the recorded caller");
    assert!(
        run.guard
            .contains("✓ sign_off: signed off by root (uid 0) at the decision (rule 1)"),
        "{}",
        run.guard
    );
    let approval = approval_of(&f, id);
    assert!(
        approval.starts_with("signed off by root (uid 0) at 20"),
        "{approval}"
    );
    assert!(approval.contains("decider pid "), "{approval}");
    assert_eq!(
        read(&f, NodeId::WipFile(WipFile::Pending)),
        "no pending runs\n"
    );
    let ev = events(&f);
    let at = |k: &str| {
        ev.iter()
            .position(|e| e == k)
            .unwrap_or_else(|| panic!("{k} in {ev:?}"))
    };
    assert!(at("pending pending") < at("approved approved"));
    assert!(at("approved approved") < at("call ok"));
    // A second decision is refused.
    let (errno, e) = refused(&f, &id.to_string(), &Verb::Approve, &person(0, 900));
    assert_eq!(errno, libc::EINVAL);
    assert!(e.starts_with("already decided"), "{e}");
}

#[test]
fn a_denied_run_never_runs_and_says_why() {
    let f = fixture(vec![rule("mem/ops/note", Action::Approve)]);
    let id = pending_note(&f, "delete prod");
    let d = f
        .world
        .decide(
            &id.to_string(),
            &Verb::Deny {
                reason: Some("not on a Friday".into()),
            },
            &person(0, 900),
        )
        .unwrap();
    // Named by its path and per-op number, never by the journal's id.
    assert!(
        d.text
            .starts_with("denied /mnt/w/mem/ops/note/runs/1; the call never ran"),
        "{}",
        d.text
    );
    assert_eq!(status(&f, id), "denied");
    assert_eq!(
        result(&f, "note", AGENT),
        "error: denied by root (uid 0): not on a Friday; the call never ran\n"
    );
    assert!(notes(&f).is_empty());
    assert!(events(&f).contains(&"denied denied".to_string()));
    let (errno, e) = refused(&f, &id.to_string(), &Verb::Approve, &person(0, 900));
    assert_eq!(errno, libc::EINVAL);
    assert!(
        e.contains("already decided: /mnt/w/mem/ops/note/runs/1 was"),
        "{e}"
    );
    assert!(e.contains("denied by root"), "{e}");
    assert!(notes(&f).is_empty());
}

/// The caller's session is the one that called, not its number: a person whose terminal
/// got that number after the caller's session ended decides; one in the very session (or
/// one whose session's start is unknown) does not.
#[test]
fn a_decision_from_a_later_session_given_the_callers_number_is_not_the_callers() {
    let f = fixture(vec![rule("mem/ops/note", Action::Approve)]);
    let agent = Caller {
        session_start: 10,
        ..caller(AGENT)
    };
    let doc = f.world.calls().open_call(&root(), "note", &agent).unwrap();
    assert_eq!(write(&doc, b"{\"text\":\"me\"}"), Err(libc::EINPROGRESS));
    let id = f.world.journal().latest("/mem", "note").unwrap().unwrap();
    let mut me = person(0, 901);
    for start in [10, 0] {
        me.sessions = vec![
            terminal(901),
            Session {
                start,
                ..terminal(AGENT)
            },
        ];
        let (errno, e) = refused(&f, &id.to_string(), &Verb::Approve, &me);
        assert_eq!(errno, libc::EACCES, "{e}");
        assert!(e.contains("caller's own session"), "{e}");
    }
    me.sessions = vec![
        terminal(901),
        Session {
            start: 11,
            ..terminal(AGENT)
        },
    ];
    let d = f
        .world
        .decide(&id.to_string(), &Verb::Approve, &me)
        .unwrap();
    assert!(d.call_ok, "{}", d.text);
    assert_eq!(notes(&f), vec!["me"]);
}

#[test]
fn a_decision_from_the_callers_own_session_is_refused_unless_the_rule_allows_it() {
    let f = fixture(vec![rule("mem/ops/note", Action::Approve)]);
    let id = pending_note(&f, "me");
    let mut me = person(0, 901);
    me.sessions = vec![terminal(901), terminal(AGENT), terminal(1)];
    let (errno, e) = refused(&f, &id.to_string(), &Verb::Approve, &me);
    assert_eq!(errno, libc::EACCES);
    assert!(e.contains("caller's own session"), "{e}");
    assert_eq!(
        status(&f, id),
        "pending",
        "a refused decision decides nothing"
    );

    let mut own = rule("mem/ops/note", Action::Approve);
    own.self_approve = true;
    let f = fixture(vec![own]);
    let id = pending_note(&f, "me");
    assert!(!result(&f, "note", AGENT).contains("not from this terminal session"));
    let d = f
        .world
        .decide(&id.to_string(), &Verb::Approve, &me)
        .unwrap();
    assert!(d.call_ok, "{}", d.text);
    assert_eq!(notes(&f), vec!["me"]);
}

#[test]
fn only_the_rules_approvers_decide() {
    let mut by_uid = rule("mem/ops/note", Action::Approve);
    by_uid.approvers = vec![4242];
    let f = fixture(vec![by_uid]);
    assert_eq!(f.world.calls().policy_approvers(), vec![4242]);
    let id = pending_note(&f, "x");
    assert_eq!(f.world.calls().pending_approvers(), vec![4242]);
    assert!(result(&f, "note", AGENT).contains("Who may decide: uid 4242."));
    let (errno, e) = refused(&f, &id.to_string(), &Verb::Approve, &person(0, 900));
    assert_eq!(errno, libc::EACCES);
    assert_eq!(
        e,
        format!(
            "root (uid 0) may not decide /mnt/w/mem/ops/note/runs/{}: rule 1 lets only uid 4242 decide",
            f.world.journal().get(id).unwrap().unwrap().seq
        )
    );
    let d = f
        .world
        .decide(&id.to_string(), &Verb::Approve, &person(4242, 900))
        .unwrap();
    assert!(d.call_ok);
    let approval = approval_of(&f, id);
    assert!(
        approval.starts_with("signed off by uid 4242 at "),
        "{approval}"
    );
}

#[test]
fn a_pending_run_nobody_decides_expires_and_never_runs() {
    let mut soon = rule("mem/ops/note", Action::Approve);
    soon.expires_after = Some(Duration::from_millis(50));
    let f = fixture(vec![soon]);
    let id = pending_note(&f, "late");
    assert!(result(&f, "note", AGENT).contains("(after 50ms)"));
    // The expiry watch marks it (bounded wait).
    let mut waited = 0;
    while status(&f, id) == "pending" && waited < 1000 {
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    assert_eq!(status(&f, id), "expired");
    assert!(
        result(&f, "note", AGENT).contains("nobody decided in time (rule 1); the call never ran")
    );
    assert!(events(&f).contains(&"expired expired".to_string()));
    let (errno, e) = refused(&f, &id.to_string(), &Verb::Approve, &person(0, 900));
    assert_eq!(errno, libc::EINVAL);
    assert!(e.contains("expired at"), "{e}");
    assert!(notes(&f).is_empty());
}

#[test]
fn pending_runs_survive_a_remount_and_stay_approvable() {
    let host = Arc::new(MemHost::default());
    let state = tempfile::tempdir().unwrap();
    let rules = || policy(vec![rule("mem/ops/note", Action::Approve)]);
    let world = mem_world(WorldSettings::default(), &host, state.path(), rules());
    let f = Fixture {
        world,
        host: Arc::clone(&host),
        _state: tempfile::tempdir().unwrap(),
    };
    let id = pending_note(&f, "after the remount");
    drop(f);
    let world = mem_world(WorldSettings::default(), &host, state.path(), rules());
    let pending = String::from_utf8(
        world
            .read(&NodeId::WipFile(WipFile::Pending), Session::NONE)
            .unwrap(),
    )
    .unwrap();
    assert!(pending.contains(&format!("/runs/{id}\t")), "{pending}");
    let f = Fixture {
        world,
        host,
        _state: state,
    };
    let d = f
        .world
        .decide(&id.to_string(), &Verb::Approve, &person(0, 900))
        .unwrap();
    assert!(d.call_ok, "{}", d.text);
    assert_eq!(notes(&f), vec!["after the remount"]);
}

#[test]
fn an_approved_run_is_checked_again_and_may_be_blocked_then() {
    let f = fixture(vec![rule("mem/ops/close", Action::Approve)]);
    let doc = open(&f, "close", AGENT);
    assert_eq!(write(&doc, b"\n"), Err(libc::EINPROGRESS));
    let id = f.world.journal().latest("/mem", "close").unwrap().unwrap();
    f.host.closed.store(true, Ordering::SeqCst);
    let d = f
        .world
        .decide(&id.to_string(), &Verb::Approve, &person(0, 900))
        .unwrap();
    assert!(!d.call_ok);
    assert!(
        d.text.contains("blocked by guard open: already closed"),
        "{}",
        d.text
    );
    assert_eq!(status(&f, id), "blocked");
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn a_blocked_guard_refuses_at_open_even_where_approval_is_asked() {
    let f = fixture(vec![rule("mem/ops/close", Action::Approve)]);
    f.host.closed.store(true, Ordering::SeqCst);
    let e = f
        .world
        .calls()
        .open_call(&root(), "close", &caller(AGENT))
        .err()
        .unwrap();
    assert_eq!(e.errno(), libc::EPERM, "nothing a person could approve");
    assert!(f.world.journal().pending_approvals(10).unwrap().is_empty());
}

#[test]
fn a_call_a_person_must_approve_is_checked_first_even_by_a_host_that_checks_in_the_call() {
    // The runtime skips its own guard evaluation for such hosts, but never holds a call
    // for a person that the host would refuse.
    let f = fixture(vec![rule("mem/ops/close", Action::Approve)]);
    f.host.checks_in_call.store(true, Ordering::SeqCst);
    let doc = open(&f, "close", AGENT);
    f.host.closed.store(true, Ordering::SeqCst);
    assert_eq!(write(&doc, b"\n"), Err(libc::EPERM));
    assert!(f.world.journal().pending_approvals(10).unwrap().is_empty());
    assert_eq!(f.host.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn a_manifest_rule_overrides_a_hosts_default() {
    let f = fixture(Vec::new());
    let guard = f.world.calls().guard(&root(), "drop").unwrap().render();
    assert_eq!(
        guard,
        "blocked\n✗ policy: the host never drops by default\n"
    );
    assert_eq!(
        f.world
            .calls()
            .open_call(&root(), "drop", &caller(AGENT))
            .err()
            .unwrap()
            .errno(),
        libc::EACCES
    );
    let f = fixture(vec![rule("mem/ops/drop", Action::Allow)]);
    let guard = f.world.calls().guard(&root(), "drop").unwrap().render();
    assert_eq!(
        guard,
        "allowed\n✓ policy: allowed by rule 1 (match \"mem/ops/drop\")\n"
    );
    assert_eq!(write(&open(&f, "drop", AGENT), b"\n"), Ok(1));
    let f = fixture(vec![rule("mem/**", Action::Approve)]);
    assert_eq!(
        write(&open(&f, "drop", AGENT), b"\n"),
        Err(libc::EINPROGRESS)
    );
}

#[test]
fn decisions_name_runs_by_path_inside_the_mount() {
    let f = fixture(vec![rule("mem/ops/note", Action::Approve)]);
    let id = pending_note(&f, "x");
    for (bad, errno, words) in [
        (
            "/elsewhere/mem/ops/note/runs/1",
            libc::EINVAL,
            "not inside this mount",
        ),
        ("/mnt/w/mem/ops/note", libc::EINVAL, "not a run's path"),
        (
            "/mnt/w/mem/ops/sleep/runs/1",
            libc::ENOENT,
            "sleep on /mem has no run",
        ),
        ("999", libc::ENOENT, "no run 999"),
    ] {
        let bad = bad.replace("runs/1", &format!("runs/{id}"));
        let (got, e) = refused(&f, &bad, &Verb::Approve, &person(0, 900));
        assert_eq!(got, errno, "{bad}: {e}");
        assert!(e.contains(words), "{bad}: {e}");
    }
}

#[test]
fn run_paths() {
    assert_eq!(
        parse_run_path("/tracker/pulls/7/ops/merge/runs/12"),
        Some(("/tracker/pulls/7".into(), "merge".into(), 12))
    );
    assert_eq!(
        parse_run_path("/ops/locate/runs/3/result"),
        Some(("/".into(), "locate".into(), 3))
    );
    assert_eq!(
        parse_run_path("/x/ops~/ops/op/runs/5/"),
        Some(("/x/ops~".into(), "op".into(), 5))
    );
    assert_eq!(parse_run_path("/tracker/pulls/7/ops/merge"), None);
    assert_eq!(parse_run_path("/tracker/ops/merge/runs/x"), None);
    assert_eq!(parse_run_path("/t/ops/m/runs/1/discovered/2"), None);
}
