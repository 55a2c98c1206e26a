//! Tests of the tracker host: seeding, guards of every seeded pull request, the agent
//! walkthrough on the PR that fixes #42, permissions, concurrency and scale.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::host::identity::Role;
use crate::host::{Caller, Condition};
use crate::state::pg::TestDb;
use store::Engine;

fn ctx(dir: &Path, user: &str, role: Role) -> HostContext {
    HostContext {
        mount_point: dir.join("mnt"),
        identity: Identity {
            user: user.to_string(),
            role,
        },
        mount: "tracker".to_string(),
        ..HostContext::for_tests(dir)
    }
}

/// Where a test's tracker lives: a state directory, and on PostgreSQL a database of its
/// own (dropped with the last clone). Every test that can runs on both engines (`both!`).
#[derive(Clone)]
struct Fx {
    dir: Arc<tempfile::TempDir>,
    pg: Option<Arc<TestDb>>,
}

impl Fx {
    fn new(engine: Engine) -> Fx {
        Fx {
            dir: Arc::new(tempfile::tempdir().expect("tempdir")),
            pg: (engine == Engine::Postgres).then(|| Arc::new(TestDb::create())),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `settings` on this fixture's database (unless they name one).
    fn settings(&self, mut settings: TrackerSettings) -> TrackerSettings {
        if let (Some(db), None) = (&self.pg, &settings.database) {
            settings.database = Some(db.url.clone().into());
        }
        settings
    }
}

/// `both!(name, …)`: each `fn name(e: Engine)` as two tests, `name::sqlite` and
/// `name::postgres`.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        $(mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::Engine::Sqlite)
            }
            #[test]
            fn postgres() {
                super::$name(super::Engine::Postgres)
            }
        })*
    };
}

both!(
    seeds_the_demo_project,
    every_pull_request_has_its_merge_guard_state,
    walkthrough_rerun_approve_merge_closes_42,
    approving_your_own_pull_request_is_blocked,
    reader_cannot_comment_and_contributor_cannot_close_others,
    close_twice_is_blocked_and_reopen_works,
    create_issue_is_listed_and_resolvable,
    resolve_refs,
    parallel_comments_are_all_kept,
    parallel_comments_across_connections,
    label_checks_names_and_reports_changes,
    read_ops_change_nothing_and_return_text,
    relation_ops_return_paths,
    ops_have_strict_schemas,
    reopening_keeps_data_and_does_not_reseed,
    extra_issues_seed_and_listing_is_bounded,
    guards_of_all_ops_at_once_are_each_ops_guard,
    what_a_listing_says_of_each_child_is_what_its_entry_says,
    bodies_are_the_texts_and_edit_body_replaces_them,
    a_body_you_may_not_edit_is_read_only,
    entries_named_like_reserved_names_are_printed_escaped,
    two_merges_of_one_pull_request_from_two_hosts_one_wins,
    parallel_issues_across_connections_get_numbers_of_their_own,
    exists_agrees_with_entry,
    a_committed_call_keeps_its_run_and_a_refused_one_none,
);

fn a_committed_call_keeps_its_run_and_a_refused_one_none(e: Engine) {
    use crate::host::Settled;
    let (_d, h) = demo(e);
    let as_run = |run: &str| Caller {
        run: run.to_string(),
        ..Caller::default()
    };
    let out = h
        .call(
            &p("issues/42"),
            "comment",
            &json!({"body": "kept"}),
            &as_run("j:1"),
        )
        .unwrap();
    assert_eq!(
        h.settle(&p("issues/42"), "comment", "j:1").unwrap(),
        Some(Settled::Done(out.result))
    );
    // A call the host refused committed nothing, its run included.
    let refused = h.call(
        &p("issues/999"),
        "comment",
        &json!({"body": "x"}),
        &as_run("j:2"),
    );
    assert!(refused.is_err());
    assert_eq!(
        h.settle(&p("issues/999"), "comment", "j:2").unwrap(),
        Some(Settled::NotRun)
    );
    assert_eq!(
        h.settle(&p("issues/42"), "comment", "other:1").unwrap(),
        Some(Settled::NotRun)
    );
    // A read changes nothing and keeps no run (no write transaction): settled, it is
    // `not_run`, which for a read is the truth.
    h.call(&p("issues/42"), "get_metadata", &json!({}), &as_run("j:3"))
        .unwrap();
    assert_eq!(
        h.settle(&p("issues/42"), "get_metadata", "j:3").unwrap(),
        Some(Settled::NotRun)
    );
    // Every op named as read-only is one the tracker offers (a drift would make it a no-op).
    let mut offered: Vec<String> = Vec::new();
    for path in [
        "issues/42",
        "pulls/50",
        "pulls/50/checks/test",
        "labels/bug",
    ] {
        if let Ok(ops) = h.ops(&p(path)) {
            offered.extend(ops.into_iter().map(|o| o.name));
        }
    }
    let reading: Vec<&String> = offered
        .iter()
        .filter(|o| super::ops::OPS.reads_only(o))
        .collect();
    assert_eq!(
        reading,
        [
            "read_body",
            "get_metadata",
            "read_body",
            "get_metadata",
            "diff",
            "read_log",
            "issues"
        ],
        "the ops declared as reading"
    );
}

fn exists_agrees_with_entry(e: Engine) {
    let (_d, h) = demo(e);
    for path in [
        "",
        "issues",
        "issues/42",
        "issues/42/comments",
        "issues/42/comments/1",
        "issues/42/comments/999",
        "issues/50",
        "pulls/50",
        "pulls/42",
        "issues/99999",
        "labels/bug",
        "labels/nope",
        "nowhere",
    ] {
        let entry = h.entry(&p(path)).unwrap().is_some();
        assert_eq!(h.exists(&p(path)).unwrap(), entry, "{path:?}");
    }
    assert!(h.exists(&p("issues/42")).unwrap());
    assert!(!h.exists(&p("issues/99999")).unwrap());
}

fn open_as(fx: &Fx, user: &str, role: Role, settings: TrackerSettings) -> TrackerHost {
    match TrackerHost::open(
        fx.settings(settings),
        &ctx(fx.path(), user, role).at("tracker"),
    ) {
        Ok(h) => h,
        Err(e) => panic!("open failed: {e}"),
    }
}

fn demo(e: Engine) -> (Fx, TrackerHost) {
    let fx = Fx::new(e);
    let h = open_as(&fx, "alex", Role::Maintainer, TrackerSettings::default());
    (fx, h)
}

fn p(s: &str) -> Vec<String> {
    s.split('/')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn call(h: &TrackerHost, path: &str, op: &str, args: Value) -> HostResult<CallOutcome> {
    h.call(&p(path), op, &args, &Caller::default())
}

fn ok(h: &TrackerHost, path: &str, op: &str, args: Value) -> CallOutcome {
    match call(h, path, op, args) {
        Ok(o) => o,
        Err(e) => panic!("{path} {op}: {e:?}"),
    }
}

fn guard(h: &TrackerHost, path: &str, op: &str) -> Guard {
    h.guard(&p(path), op, None).expect("guard")
}

fn cond<'a>(g: &'a Guard, name: &str) -> &'a Condition {
    g.conditions
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no condition {name} in {}", g.render()))
}

fn desc(h: &TrackerHost, path: &str) -> String {
    h.entry(&p(path))
        .expect("entry")
        .unwrap_or_else(|| panic!("no entry {path}"))
        .description
}

fn blocked(r: HostResult<CallOutcome>) -> Guard {
    match r {
        Err(HostError::Blocked(g)) => g,
        other => panic!("expected Blocked, got {other:?}"),
    }
}

fn seeds_the_demo_project(e: Engine) {
    let (_d, h) = demo(e);
    let issues = h.children(&p("issues")).unwrap();
    let pulls = h.children(&p("pulls")).unwrap();
    assert!(issues.len() >= 40, "{} issues", issues.len());
    assert!(pulls.len() >= 7, "{} pulls", pulls.len());
    // Newest first.
    assert_eq!(issues[0].name, "49");
    assert_eq!(pulls[0].name, "55");
    assert_eq!(
        desc(&h, "issues/42"),
        "Issue #42 · open · Crash when config is missing · bug · 3 comments · assigned to dana"
    );
    assert_eq!(h.children(&p("issues/42/comments")).unwrap().len(), 3);
    let info = h.entry(&p("issues/42")).unwrap().unwrap();
    assert_eq!(info.reference, "tracker://demo/issues/42");
    let c3 = desc(&h, "issues/42/comments/3");
    assert!(c3.starts_with("Comment 3 on #42 · dana · 2026-"), "{c3}");
    // One number sequence: a PR is not an issue, and the other way round.
    assert!(h.entry(&p("issues/50")).unwrap().is_none());
    assert!(h.entry(&p("pulls/42")).unwrap().is_none());
    assert!(h.entry(&p("issues/042")).unwrap().is_none());
    assert!(h.entry(&p("issues/9999")).unwrap().is_none());
    let pr = desc(&h, "pulls/50");
    assert_eq!(
        pr,
        "PR #50 · open · Fix crash when config is missing · by dana · checks 2/3 passing · review required"
    );
    let root = desc(&h, "");
    assert!(
        root.starts_with("Issue tracker · project demo · 48 issues ("),
        "{root}"
    );
    assert!(root.ends_with("you are alex (maintainer)"), "{root}");
    let names: Vec<String> = h
        .children(&[])
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["issues", "pulls", "labels", "users"]);
    assert!(desc(&h, "labels/bug").starts_with("Label bug · "));
    assert_eq!(desc(&h, "users/dana"), "dana · maintainer · Dana Ruiz");
    assert!(desc(&h, "pulls/52/checks/lint")
        .starts_with("Check lint · failure · 1 error: unused import in src/main.rs"));
    assert_eq!(desc(&h, "pulls/51/reviews/2"), "Review 2 · dana · approved");
    let checks: Vec<String> = h
        .children(&p("pulls/50"))
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(checks, ["comments", "checks", "reviews"]);
    assert!(desc(&h, "issues").contains("reachable by number"));
}

fn every_pull_request_has_its_merge_guard_state(e: Engine) {
    let (_d, h) = demo(e);
    // 1. ready to merge.
    let g = guard(&h, "pulls/51", "merge");
    assert!(g.allowed(), "{}", g.render());
    assert_eq!(cond(&g, "review_approved").detail, "approved by dana");

    // 2. fixes #42: a flaky check (rerun fixes it) and no review (alex may approve).
    let g = guard(&h, "pulls/50", "merge");
    assert!(!g.allowed());
    let c = cond(&g, "checks_passing");
    assert!(!c.ok);
    assert!(
        c.detail
            .starts_with("1 of 3 checks failing (test) — see tracker/pulls/50/checks/test"),
        "{}",
        c.detail
    );
    assert!(
        c.detail.contains("tracker/pulls/50/ops/rerun_checks"),
        "{}",
        c.detail
    );
    let r = cond(&g, "review_approved");
    assert!(!r.ok);
    assert!(
        r.detail.contains("tracker/pulls/50/ops/approve"),
        "{}",
        r.detail
    );
    assert!(cond(&g, "mergeable").ok);

    // 3. lint fails for real: rerun cannot fix it.
    let g = guard(&h, "pulls/52", "merge");
    let c = cond(&g, "checks_passing");
    assert!(!c.ok);
    assert!(c.detail.contains("(lint)"), "{}", c.detail);
    assert!(
        c.detail.contains("rerun_checks cannot fix it"),
        "{}",
        c.detail
    );
    assert!(
        c.detail.contains("cannot be satisfied by you"),
        "{}",
        c.detail
    );
    assert!(cond(&g, "review_approved").ok);

    // 4. waiting for a requested review.
    let g = guard(&h, "pulls/53", "merge");
    let r = cond(&g, "review_approved");
    assert!(!r.ok);
    assert!(
        r.detail.contains("review requested from lee"),
        "{}",
        r.detail
    );
    assert!(cond(&g, "checks_passing").ok);

    // 5. alex's own PR: cannot self-approve, must ask.
    let g = guard(&h, "pulls/54", "merge");
    let r = cond(&g, "review_approved");
    assert!(!r.ok);
    assert!(
        r.detail.contains("you cannot approve your own"),
        "{}",
        r.detail
    );
    assert!(
        r.detail.contains("tracker/pulls/54/ops/request_review"),
        "{}",
        r.detail
    );

    // 6. already merged.
    let g = guard(&h, "pulls/12", "merge");
    let o = cond(&g, "open");
    assert!(!o.ok);
    assert!(o.detail.contains("was merged"), "{}", o.detail);

    // 7. conflicts.
    let g = guard(&h, "pulls/55", "merge");
    let m = cond(&g, "mergeable");
    assert!(!m.ok);
    assert!(m.detail.contains("must rebase"), "{}", m.detail);
    assert!(
        m.detail.contains("cannot be satisfied by you"),
        "{}",
        m.detail
    );
    assert!(cond(&g, "checks_passing").ok && cond(&g, "review_approved").ok);

    // Every failed condition says how, or that you cannot.
    for n in [12, 50, 51, 52, 53, 54, 55] {
        for op in ["merge", "approve", "rerun_checks", "close", "reopen"] {
            let g = guard(&h, &format!("pulls/{n}"), op);
            for c in g.conditions.iter().filter(|c| !c.ok) {
                assert!(
                    c.detail.contains("tracker/")
                        || c.detail.contains("cannot")
                        || c.detail.contains("nothing to"),
                    "PR #{n} {op}: {}",
                    c.detail
                );
            }
        }
    }
}

fn walkthrough_rerun_approve_merge_closes_42(e: Engine) {
    let (_d, h) = demo(e);
    let g = blocked(call(&h, "pulls/50", "merge", json!({})));
    assert_eq!(
        g.first_failure().map(|c| c.name.as_str()),
        Some("checks_passing")
    );

    let o = ok(&h, "pulls/50", "rerun_checks", json!({}));
    assert!(o.result.contains("test: passed on rerun 2"), "{}", o.result);
    assert!(o.changed.contains(&p("pulls/50/checks")));
    assert!(o.changed.contains(&p("pulls/50/checks/test")));
    assert!(o.changed.contains(&p("pulls/50")));
    assert!(cond(&guard(&h, "pulls/50", "merge"), "checks_passing").ok);
    assert!(desc(&h, "pulls/50").contains("checks 3/3 passing"));
    assert!(ok(&h, "pulls/50/checks/test", "read_log", json!({}))
        .result
        .contains("passed on rerun 2"));
    // Nothing left to rerun.
    assert!(!guard(&h, "pulls/50", "rerun_checks").allowed());

    let o = ok(&h, "pulls/50", "approve", json!({"body": "LGTM"}));
    assert_eq!(o.discovered, vec![p("pulls/50/reviews/1")]);
    assert_eq!(desc(&h, "pulls/50/reviews/1"), "Review 1 · alex · approved");
    let g = guard(&h, "pulls/50", "merge");
    assert!(g.allowed(), "{}", g.render());
    assert_eq!(cond(&g, "review_approved").detail, "approved by alex");

    let (open_before, _) = open_issue_count(&h);
    let o = ok(&h, "pulls/50", "merge", json!({"method": "squash"}));
    assert!(
        o.result.contains("merged PR #50 into main (squash)"),
        "{}",
        o.result
    );
    assert!(o.result.contains("closed issue #42"), "{}", o.result);
    for path in [
        "",
        "pulls",
        "pulls/50",
        "issues",
        "issues/42",
        "issues/42/comments",
        "labels/bug",
    ] {
        assert!(
            o.changed.contains(&p(path)),
            "changed lacks {path:?}: {:?}",
            o.changed
        );
    }
    assert_eq!(o.discovered, vec![p("issues/42/comments/4")]);
    assert!(desc(&h, "issues/42").starts_with("Issue #42 · closed · "));
    assert!(desc(&h, "issues/42/comments/4").ends_with("Fixed by #50."));
    assert!(desc(&h, "pulls/50").starts_with("PR #50 · merged · "));
    assert_eq!(open_issue_count(&h).0, open_before - 1);
    // Merged: no second merge, no reopen.
    let g = blocked(call(&h, "pulls/50", "merge", json!({})));
    assert!(!cond(&g, "open").ok);
    assert!(!guard(&h, "pulls/50", "reopen").allowed());
}

fn open_issue_count(h: &TrackerHost) -> (i64, i64) {
    h.read(|c| db::counts(c, Kind::Issue).map(|(t, o, _)| (o, t)))
        .expect("counts")
}

fn approving_your_own_pull_request_is_blocked(e: Engine) {
    let (_d, h) = demo(e);
    let g = blocked(call(&h, "pulls/54", "approve", json!({})));
    let c = cond(&g, "not_author");
    assert!(!c.ok);
    assert!(
        c.detail.contains("tracker/pulls/54/ops/request_review"),
        "{}",
        c.detail
    );
    // Asking someone else works, and reviewing one's own is refused.
    let o = ok(
        &h,
        "pulls/54",
        "request_review",
        json!({"reviewer": "dana"}),
    );
    assert!(o.result.contains("from dana"));
    assert!(desc(&h, "pulls/54").contains("review requested from dana"));
    assert!(matches!(
        call(
            &h,
            "pulls/54",
            "request_review",
            json!({"reviewer": "alex"})
        ),
        Err(HostError::InvalidArgs(_))
    ));
}

fn reader_cannot_comment_and_contributor_cannot_close_others(e: Engine) {
    let dir = Fx::new(e);
    // Seed as alex, then look as other people.
    drop(open_as(
        &dir,
        "alex",
        Role::Maintainer,
        TrackerSettings::default(),
    ));
    let reader = open_as(&dir, "lee", Role::Reader, TrackerSettings::default());
    let g = blocked(call(&reader, "issues/42", "comment", json!({"body": "hi"})));
    assert!(!cond(&g, "can_comment").ok);
    assert!(cond(&g, "can_comment")
        .detail
        .contains("cannot be satisfied by you"));
    assert!(guard(&reader, "issues/42", "read_body").allowed());
    assert!(ok(&reader, "issues/42", "read_body", json!({}))
        .result
        .contains("Crash when config is missing"));

    let contrib = open_as(&dir, "sam", Role::Contributor, TrackerSettings::default());
    ok(&contrib, "issues/42", "comment", json!({"body": "me too"}));
    let g = blocked(call(
        &contrib,
        "issues/42",
        "close",
        json!({"reason": "nope"}),
    ));
    assert!(!cond(&g, "can_write").ok);
    blocked(call(&contrib, "pulls/51", "merge", json!({})));
    blocked(call(
        &contrib,
        "issues/42",
        "label",
        json!({"add": ["docs"]}),
    ));
    // Sam opened #48 and may close it.
    let o = ok(
        &contrib,
        "issues/48",
        "close",
        json!({"reason": "duplicate"}),
    );
    assert_eq!(o.result, "closed issue #48: duplicate");
    // Creating an issue is fine; triage (labels) is not.
    ok(&contrib, "", "create_issue", json!({"title": "A question"}));
    blocked(call(
        &contrib,
        "",
        "create_issue",
        json!({"title": "x", "labels": ["bug"]}),
    ));
}

fn close_twice_is_blocked_and_reopen_works(e: Engine) {
    let (_d, h) = demo(e);
    let o = ok(&h, "issues/42", "close", json!({"reason": "fixed in 1.2"}));
    assert_eq!(o.result, "closed issue #42: fixed in 1.2");
    for path in ["issues/42", "issues", "", "labels/bug"] {
        assert!(
            o.changed.contains(&p(path)),
            "{path:?} not in {:?}",
            o.changed
        );
    }
    let g = blocked(call(&h, "issues/42", "close", json!({"reason": "again"})));
    let c = cond(&g, "open");
    assert!(
        c.detail.contains("tracker/issues/42/ops/reopen"),
        "{}",
        c.detail
    );
    assert!(c.detail.contains("fixed in 1.2"), "{}", c.detail);
    let o = ok(&h, "issues/42", "reopen", json!({}));
    assert_eq!(o.result, "reopened issue #42");
    assert!(desc(&h, "issues/42").starts_with("Issue #42 · open"));
    let g = blocked(call(&h, "issues/42", "reopen", json!({})));
    assert!(!cond(&g, "closed").ok);
}

fn create_issue_is_listed_and_resolvable(e: Engine) {
    let (_d, h) = demo(e);
    let o = ok(
        &h,
        "",
        "create_issue",
        json!({"title": "Add  a --json\nflag", "body": "Please.", "labels": ["enhancement"], "assignees": ["dana"]}),
    );
    assert_eq!(o.result, "opened issue #56: Add a --json flag");
    assert_eq!(o.discovered, vec![p("issues/56")]);
    assert!(o.changed.contains(&vec![]) && o.changed.contains(&p("issues")));
    let kids = h.children(&p("issues")).unwrap();
    assert_eq!(kids[0].name, "56");
    assert_eq!(
        kids[0].info.description,
        "Issue #56 · open · Add a --json flag · enhancement · 0 comments · assigned to dana"
    );
    assert_eq!(h.resolve("tracker://demo/issues/56"), vec![p("issues/56")]);
    assert!(matches!(
        call(&h, "", "create_issue", json!({"title": "x", "assignees": ["nobody"]})),
        Err(HostError::InvalidArgs(m)) if m.contains("dana")
    ));
}

fn resolve_refs(e: Engine) {
    let (_d, h) = demo(e);
    let cases = [
        ("tracker://demo", ""),
        ("tracker://demo/issues", "issues"),
        ("tracker://demo/issues/42", "issues/42"),
        (
            "tracker://demo/issues/42/comments/3",
            "issues/42/comments/3",
        ),
        ("tracker://demo/pulls/50", "pulls/50"),
        ("tracker://demo/issues/50", "pulls/50"),
        (
            "tracker://demo/pulls/52/checks/lint",
            "pulls/52/checks/lint",
        ),
        ("tracker://demo/pulls/51/reviews/1", "pulls/51/reviews/1"),
        (
            "tracker://demo/labels/good first issue",
            "labels/good first issue",
        ),
        ("tracker://demo/users/dana", "users/dana"),
    ];
    for (r, path) in cases {
        assert_eq!(h.resolve(r), vec![p(path)], "{r}");
        // The ref an entry shows resolves back to it.
        let info = h.entry(&p(path)).unwrap().unwrap();
        assert_eq!(h.resolve(&info.reference), vec![p(path)], "{r}");
    }
    for r in [
        "github://demo/issues/42",
        "tracker://other/issues/42",
        "tracker://demo/issues/4242",
        "tracker://demox/issues/1",
        "tracker://demo/labels/nope",
    ] {
        assert!(h.resolve(r).is_empty(), "{r}");
    }
}

fn parallel_comments_are_all_kept(e: Engine) {
    let (_d, h) = demo(e);
    let h = Arc::new(h);
    let before = h.children(&p("issues/7/comments")).unwrap().len();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let h = Arc::clone(&h);
            std::thread::spawn(move || {
                for i in 0..50 {
                    ok(
                        &h,
                        "issues/7",
                        "comment",
                        json!({"body": format!("thread {t} comment {i}")}),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let after = h.read(|c| db::comment_count(c, 7)).unwrap();
    assert_eq!(after as usize, before + 400);
}

fn parallel_comments_across_connections(e: Engine) {
    // Several hosts (as several daemons would) on one database: on SQLite WAL +
    // busy_timeout + IMMEDIATE, on PostgreSQL a pool each and the tracker's lock.
    let dir = Fx::new(e);
    on_four_hosts(&dir, |h, t| {
        for i in 0..25 {
            ok(
                &h,
                "issues/8",
                "comment",
                json!({"body": format!("{t}/{i}")}),
            );
        }
    });
    let h = open_as(&dir, "alex", Role::Maintainer, TrackerSettings::default());
    assert_eq!(h.read(|c| db::comment_count(c, 8)).unwrap(), 100);
    let seqs: Vec<String> = h
        .children(&p("issues/8/comments"))
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(seqs.len(), 100);
    assert_eq!(seqs.last().map(String::as_str), Some("100"));
}

fn label_checks_names_and_reports_changes(e: Engine) {
    let (_d, h) = demo(e);
    match call(&h, "issues/42", "label", json!({"add": ["bugz"]})) {
        Err(HostError::InvalidArgs(m)) => {
            assert!(m.contains("bugz") && m.contains("good first issue"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        call(&h, "issues/42", "label", json!({})),
        Err(HostError::InvalidArgs(_))
    ));
    let o = ok(
        &h,
        "issues/42",
        "label",
        json!({"add": ["windows"], "remove": ["bug"]}),
    );
    assert_eq!(
        o.result,
        "labels of issue #42: windows (added windows) (removed bug)"
    );
    assert!(o.changed.contains(&p("labels/windows")) && o.changed.contains(&p("labels/bug")));
    assert!(desc(&h, "issues/42").contains(" · windows · "));
    let o = ok(&h, "issues/42", "assign", json!({"user": "kim"}));
    assert_eq!(o.result, "assigned kim to issue #42 (assignees: dana, kim)");
    assert!(matches!(
        call(&h, "issues/42", "assign", json!({"user": "zed"})),
        Err(HostError::InvalidArgs(_))
    ));
}

fn read_ops_change_nothing_and_return_text(e: Engine) {
    let (_d, h) = demo(e);
    for (path, op, needle) in [
        (
            "issues/42",
            "read_body",
            "No config file should mean the defaults",
        ),
        ("issues/42", "get_metadata", "\"number\": 42"),
        ("pulls/50", "diff", "+++ b/src/config.rs"),
        ("pulls/50", "get_metadata", "\"fixes\": ["),
        ("pulls/50/checks/test", "read_log", "timed out"),
        (
            "issues/42/comments/2",
            "read_body",
            "touch ~/.config/demo/config.toml",
        ),
        ("pulls/51/reviews/1", "read_body", "changes requested"),
    ] {
        let o = ok(&h, path, op, json!({}));
        assert!(o.result.contains(needle), "{path} {op}: {}", o.result);
        assert!(
            o.changed.is_empty() && o.discovered.is_empty(),
            "{path} {op}"
        );
    }
    let meta: Value =
        serde_json::from_str(&ok(&h, "pulls/50", "get_metadata", json!({})).result).unwrap();
    assert_eq!(meta["fixes"], json!([42]));
    assert_eq!(meta["ref"], json!("tracker://demo/pulls/50"));
}

fn relation_ops_return_paths(e: Engine) {
    let (_d, h) = demo(e);
    let o = ok(&h, "labels/bug", "issues", json!({"state": "open"}));
    assert!(o.discovered.contains(&p("issues/42")));
    assert!(o.discovered.contains(&p("pulls/50")));
    assert!(
        !o.discovered.contains(&p("issues/3")),
        "closed #3 listed as open"
    );
    assert!(o.changed.is_empty());
    let o = ok(&h, "users/dana", "issues", json!({}));
    assert!(o.discovered.contains(&p("pulls/50")));
    assert!(o.discovered.contains(&p("issues/42")), "assigned to dana");
    assert!(matches!(
        call(&h, "users/dana", "issues", json!({"state": "weird"})),
        Err(HostError::InvalidArgs(_))
    ));
}

fn ops_have_strict_schemas(e: Engine) {
    let (_d, h) = demo(e);
    for path in [
        "",
        "issues",
        "issues/42",
        "pulls/50",
        "issues/42/comments/1",
        "pulls/50/checks/lint",
        "pulls/51/reviews/1",
        "labels/bug",
        "users/dana",
    ] {
        let ops = h.ops(&p(path)).unwrap();
        assert!(!ops.is_empty(), "{path}");
        for op in ops {
            assert_eq!(op.schema["type"], "object", "{path} {}", op.name);
            assert_eq!(
                op.schema["additionalProperties"], false,
                "{path} {}",
                op.name
            );
            assert!(op.schema["properties"].is_object());
            // Generated schemas leave out an empty `required`.
            assert!(op.schema.get("required").is_none_or(Value::is_array));
            assert!(!op.description.contains('\n'));
            // Guards are answerable for every op offered.
            h.guard(&p(path), &op.name, None).unwrap();
        }
    }
    let close = h
        .ops(&p("issues/42"))
        .unwrap()
        .into_iter()
        .find(|o| o.name == "close")
        .unwrap();
    assert_eq!(close.schema["required"], json!(["reason"]));
    assert!(matches!(
        h.guard(&p("issues/42"), "merge", None),
        Err(HostError::NotFound(_))
    ));
    assert!(matches!(
        h.ops(&p("issues/50")),
        Err(HostError::NotFound(_))
    ));
}

fn reopening_keeps_data_and_does_not_reseed(e: Engine) {
    let dir = Fx::new(e);
    {
        let h = open_as(&dir, "alex", Role::Maintainer, TrackerSettings::default());
        ok(&h, "", "create_issue", json!({"title": "persisted"}));
        ok(&h, "issues/42", "close", json!({"reason": "done"}));
    }
    if e == Engine::Sqlite {
        assert!(dir.path().join("tracker-tracker.db").exists());
    }
    let h = open_as(
        &dir,
        "newbie",
        Role::Contributor,
        TrackerSettings::default(),
    );
    assert!(desc(&h, "issues/56").contains("persisted"));
    assert!(desc(&h, "issues/42").contains("closed"));
    assert!(h.entry(&p("issues/57")).unwrap().is_none());
    if e == Engine::Sqlite {
        let mode = h
            .read(|c| c.query_one("PRAGMA journal_mode", &[])?.text(0))
            .unwrap();
        assert_eq!(mode, "wal");
    } else {
        assert!(!dir.path().join("tracker-tracker.db").exists());
    }
    // The manifest's user was created.
    assert_eq!(desc(&h, "users/newbie"), "newbie · contributor · you");
}

fn extra_issues_seed_and_listing_is_bounded(e: Engine) {
    // How long seeding takes is measured by scripts/bench.sh (against the demo seed alone).
    let dir = Fx::new(e);
    let settings = TrackerSettings {
        extra_issues: 2000,
        page_size: 100,
        ..TrackerSettings::default()
    };
    let h = open_as(&dir, "alex", Role::Maintainer, settings);
    let kids = h.children(&p("issues")).unwrap();
    assert_eq!(kids.len(), 100);
    assert_eq!(kids[0].name, "2055");
    assert!(desc(&h, "issues").contains("2048 issues"));
    assert!(desc(&h, "issues").contains("The listing shows the newest 100"));
    // Anything beyond the first page is still reachable by number.
    assert!(desc(&h, "issues/56").starts_with("Issue #56 · "));
    assert!(desc(&h, "issues/42").contains("Crash when config is missing"));
    // Listing uses the index, not a sort of every row (each engine asked in its words).
    let plan: Vec<String> = h
        .read(|c| {
            let (sql, col) = match e {
                Engine::Sqlite => ("EXPLAIN QUERY PLAN SELECT number FROM items WHERE kind = 'issue' ORDER BY number DESC LIMIT 10", 3),
                Engine::Postgres => ("EXPLAIN SELECT number FROM items WHERE kind = 'issue' ORDER BY number DESC LIMIT 10", 0),
            };
            c.query(sql, &[])?.into_iter().map(|mut r| r.text(col)).collect()
        })
        .unwrap();
    assert!(
        !plan
            .iter()
            .any(|l| l.contains("TEMP B-TREE") || l.contains("Sort")),
        "{plan:?}"
    );
    let o = ok(&h, "labels/bug", "issues", json!({}));
    assert_eq!(o.discovered.len(), 100);
}

#[test]
fn settings_parse_strictly() {
    let s: TrackerSettings = toml::from_str("seed = 'none'\nextra_issues = 3").unwrap();
    assert_eq!(s.seed, "none");
    assert_eq!(s.page_size, 500);
    assert!(toml::from_str::<TrackerSettings>("nope = 1").is_err());
    let dir = tempfile::tempdir().unwrap();
    let bad = TrackerSettings {
        seed: "lots".into(),
        ..Default::default()
    };
    assert!(TrackerHost::open(bad, &ctx(dir.path(), "a", Role::Reader).at("t")).is_err());
    let empty = TrackerSettings {
        seed: "none".into(),
        database: Some(":memory:".into()),
        ..Default::default()
    };
    let h = TrackerHost::open(empty, &ctx(dir.path(), "a", Role::Maintainer).at("data/t")).unwrap();
    assert!(h.children(&p("issues")).unwrap().is_empty());
    assert!(desc(&h, "").contains("0 issues"));
    let o = ok(&h, "issues", "create_issue", json!({"title": "first"}));
    assert_eq!(o.discovered, vec![p("issues/1")]);
    let g = blocked(call(&h, "issues/1", "reopen", json!({})));
    assert!(cond(&g, "closed")
        .detail
        .contains("data/t/issues/1/ops/close"));
}

#[test]
fn date_helpers_roundtrip() {
    for d in [-1000, 0, 1, 20_000, 20_757, 60_000] {
        let (y, m, dd) = db::civil_from_days(d);
        assert_eq!(db::days_from_civil(y, m, dd), d);
    }
    assert_eq!(db::iso(0), "1970-01-01T00:00:00Z");
    assert_eq!(db::iso(1_790_000_000), "2026-09-21T14:13:20Z");
}

fn guards_of_all_ops_at_once_are_each_ops_guard(e: Engine) {
    // Every seeded pull request's guards (ready, flaky, red, waiting, own, merged,
    // conflicting) and some issues, open and closed: the batch must say what each guard
    // says alone.
    let (_d, h) = demo(e);
    let pulls = h.children(&p("pulls")).unwrap();
    let mut paths: Vec<String> = pulls.iter().map(|c| format!("pulls/{}", c.name)).collect();
    assert_eq!(paths.len(), 7);
    // Issue 1 is closed in the seed, 42 open.
    paths.extend(["issues/42", "issues/1", "", "issues", "labels"].map(String::from));
    ok(&h, "issues/42", "comment", json!({"body": "a comment"}));
    for path in paths {
        let specs = h.ops(&p(&path)).unwrap();
        let names: Vec<&str> = specs.iter().map(|o| o.name.as_str()).collect();
        let all = h.guards(&p(&path), &names).expect("batched").unwrap();
        assert_eq!(all.len(), names.len(), "{path}");
        for (name, g) in names.iter().zip(&all) {
            assert_eq!(g, &guard(&h, &path, name), "{path} {name}");
        }
    }
}

fn what_a_listing_says_of_each_child_is_what_its_entry_says(e: Engine) {
    // The runtime reuses a listing's infos for the children's `description` and `ref`,
    // whose sizes the kernel trusts: they must be the same texts.
    let (_d, h) = demo(e);
    ok(&h, "issues/42", "comment", json!({"body": "a comment"}));
    let mut todo = vec![String::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        // A listing's one read gives what `body` and `children` give apart.
        let (body, children) = h.body_and_children(&p(&path)).unwrap();
        assert_eq!(body.unwrap(), h.body(&p(&path)).unwrap(), "{path}");
        assert_eq!(children, h.children(&p(&path)).unwrap(), "{path}");
        for child in children {
            let at = if path.is_empty() {
                child.name.clone()
            } else {
                format!("{path}/{}", child.name)
            };
            let entry = h.entry(&p(&at)).unwrap().expect("listed, so it exists");
            // What the runtime reuses (times come from `Host::modified`, asked apart).
            let shown = |i: &EntryInfo| {
                (
                    i.description.clone(),
                    i.reference.clone(),
                    i.title.clone(),
                    i.indexable,
                )
            };
            assert_eq!(shown(&child.info), shown(&entry), "{at}");
            seen += 1;
            // Every collection, and a few items' subtrees (checks, reviews, comments).
            let depth = at.matches('/').count();
            if depth == 0 || at == "issues/42" || at == "pulls/50" || depth >= 2 {
                todo.push(at);
            }
        }
    }
    assert!(seen > 60, "compared {seen} entries");
    assert!(h.body_and_children(&p("issues/999")).is_err());
}

fn bodies_are_the_texts_and_edit_body_replaces_them(e: Engine) {
    let (_dir, h) = demo(e);
    let body = h
        .body(&p("issues/42"))
        .unwrap()
        .expect("an issue has a body");
    let text = String::from_utf8(body.bytes.clone().unwrap().to_vec()).unwrap();
    let item = h.read(|c| db::item_req(c, 42)).unwrap();
    // The stored bytes, no more (no newline is added).
    assert_eq!(text, item.body);
    assert_eq!(body.size, text.len() as u64);
    assert_eq!(
        body.write.as_ref().map(|w| w.op.as_str()),
        Some("edit_body")
    );
    let before = h.modified(&p("issues/42")).unwrap().unwrap();
    assert_eq!(body.modified, Some(before));
    // Comments, reviews and checks have one; collections do not.
    assert!(h.body(&p("issues/42/comments/1")).unwrap().is_some());
    assert!(h.body(&p("issues")).unwrap().is_none());
    assert!(h.body(&p("issues/42/comments")).unwrap().is_none());

    ok(
        &h,
        "issues/42",
        "edit_body",
        json!({"body": "Rewritten.\n"}),
    );
    let after = h.body(&p("issues/42")).unwrap().unwrap();
    assert_eq!(after.bytes.unwrap().as_ref(), b"Rewritten.\n");
    assert!(h.modified(&p("issues/42")).unwrap().unwrap() > before);
    ok(
        &h,
        "issues/42/comments/1",
        "edit_body",
        json!({"body": "edited"}),
    );
    let c = h.body(&p("issues/42/comments/1")).unwrap().unwrap();
    assert_eq!(c.bytes.unwrap().as_ref(), b"edited");
}

fn a_body_you_may_not_edit_is_read_only(e: Engine) {
    let dir = Fx::new(e);
    let sam = open_as(&dir, "sam", Role::Contributor, TrackerSettings::default());
    // #42 is not sam's: read-only, and the op says why.
    let body = sam.body(&p("issues/42")).unwrap().unwrap();
    assert_eq!(body.write, None);
    assert!(!guard(&sam, "issues/42", "edit_body").allowed());
    assert!(matches!(
        call(&sam, "issues/42", "edit_body", json!({"body": "x"})),
        Err(HostError::Blocked(_))
    ));
    let reader = open_as(&dir, "rob", Role::Reader, TrackerSettings::default());
    let c = reader.body(&p("issues/42/comments/1")).unwrap().unwrap();
    assert_eq!(c.write, None);
}

fn two_merges_of_one_pull_request_from_two_hosts_one_wins(e: Engine) {
    // Two daemons' hosts on one database, racing: the guard is checked in the call's
    // transaction, which the other's waits for, so the second finds the PR merged.
    let fx = Fx::new(e);
    let hosts: Vec<_> = (0..2)
        .map(|_| {
            Arc::new(open_as(
                &fx,
                "alex",
                Role::Maintainer,
                TrackerSettings::default(),
            ))
        })
        .collect();
    for _ in 0..3 {
        let go = Arc::new(std::sync::Barrier::new(2));
        let outcomes: Vec<_> = hosts
            .iter()
            .map(|h| {
                let (h, go) = (Arc::clone(h), Arc::clone(&go));
                std::thread::spawn(move || {
                    go.wait();
                    call(&h, "pulls/51", "merge", json!({"method": "merge"}))
                })
            })
            .collect();
        let outcomes: Vec<_> = outcomes
            .into_iter()
            .map(|t| t.join().expect("thread"))
            .collect();
        let won = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(won, 1, "{outcomes:?}");
        let lost = outcomes.into_iter().find(|o| o.is_err()).expect("a loser");
        let g = blocked(lost);
        assert!(cond(&g, "open").detail.contains("was merged"), "{g:?}");
        // Open it again for the next round (only SQL can).
        hosts[0]
            .read(|c| c.batch("UPDATE items SET state = 'open' WHERE number = 51"))
            .unwrap();
    }
}

/// The database seeded once, then `work` run by four hosts at once, each on a thread and
/// a connection of its own (as four daemons would); what each returned.
fn on_four_hosts<T: Send + 'static>(
    fx: &Fx,
    work: impl Fn(TrackerHost, usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    drop(open_as(
        fx,
        "alex",
        Role::Maintainer,
        TrackerSettings::default(),
    ));
    let work = Arc::new(work);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (fx, work) = (fx.clone(), Arc::clone(&work));
            std::thread::spawn(move || {
                work(
                    open_as(&fx, "alex", Role::Maintainer, TrackerSettings::default()),
                    t,
                )
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect()
}

fn parallel_issues_across_connections_get_numbers_of_their_own(e: Engine) {
    let fx = Fx::new(e);
    let mut paths: Vec<Vec<String>> = on_four_hosts(&fx, |h, t| {
        (0..10)
            .map(|i| {
                let o = ok(&h, "", "create_issue", json!({"title": format!("{t}/{i}")}));
                o.discovered[0].clone()
            })
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect();
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), 40, "{paths:?}");
    let h = open_as(&fx, "alex", Role::Maintainer, TrackerSettings::default());
    assert!(desc(&h, "issues").starts_with("88 issues"));
}

#[test]
fn a_tracker_on_postgresql_says_so_and_never_shows_a_password() {
    let db = TestDb::create();
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path(), "alex", Role::Maintainer);
    // The server trusts this process on its socket, so the password is only there to hide.
    let url = db
        .url
        .replace("postgresql:///", "postgresql://root:s3cret@/");
    let settings = TrackerSettings {
        database: Some(url.into()),
        ..Default::default()
    };
    let h = TrackerHost::open(settings, &ctx.at("tracker")).unwrap();
    let root = desc(&h, "");
    assert!(
        root.contains(" · on PostgreSQL postgresql://root:<redacted>@/wip_unit_"),
        "{root}"
    );
    assert!(!root.contains("s3cret"), "{root}");
    // Nothing of the tracker landed in the state directory.
    assert!(!dir.path().join("tracker-tracker.db").exists());

    // A URL whose server is not there: refused at mount time, with words, redacted.
    let settings = TrackerSettings {
        database: Some("postgresql://wip:pw@127.0.0.1:1/wip".into()),
        ..Default::default()
    };
    let err = TrackerHost::open(settings, &ctx.at("tracker"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("cannot reach the tracker database"), "{err}");
    assert!(err.contains("<redacted>") && !err.contains(":pw@"), "{err}");
}

#[test]
fn two_trackers_opening_one_empty_postgresql_database_together_seed_it_once() {
    let db = TestDb::create();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let url = db.url.clone();
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                let settings = TrackerSettings {
                    database: Some(url.into()),
                    ..Default::default()
                };
                let h = TrackerHost::open(
                    settings,
                    &ctx(dir.path(), "alex", Role::Maintainer).at("tracker"),
                )
                .unwrap();
                desc(&h, "issues")
            })
        })
        .collect();
    for t in threads {
        let issues = t.join().expect("thread");
        assert!(issues.starts_with("48 issues in demo"), "{issues}");
    }
}

#[test]
fn a_lost_postgresql_connection_is_eio_with_words_and_the_next_call_reconnects() {
    let db = TestDb::create();
    let dir = tempfile::tempdir().unwrap();
    let settings = TrackerSettings {
        database: Some(db.url.clone().into()),
        ..Default::default()
    };
    let h = TrackerHost::open(
        settings,
        &ctx(dir.path(), "alex", Role::Maintainer).at("tracker"),
    )
    .unwrap();
    ok(&h, "issues/42", "comment", json!({"body": "before"}));
    db.cut_connections();
    // The pool's connection was cut: the first use fails with words, the next reconnects.
    let mut failed = None;
    for _ in 0..3 {
        match call(&h, "issues/42", "comment", json!({"body": "after"})) {
            Ok(_) => break,
            Err(e) => failed = Some(e),
        }
    }
    let err = failed.expect("a cut connection shows");
    assert!(matches!(err, HostError::Backend(_)), "{err:?}");
    let words = err.to_string();
    assert!(words.contains("the tracker database"), "{words}");
    assert!(words.contains("reconnects on the next call"), "{words}");
    let comments = h.children(&p("issues/42/comments")).unwrap();
    assert_eq!(comments.len(), 5, "{comments:?}");
}

#[test]
fn an_existing_sqlite_database_without_edited_at_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.db");
    {
        // The comments table as the first release made it.
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch(
            "CREATE TABLE comments (number INTEGER NOT NULL, seq INTEGER NOT NULL,
               author TEXT NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL,
               PRIMARY KEY (number, seq)) WITHOUT ROWID;",
        )
        .unwrap();
    }
    let settings = TrackerSettings {
        database: Some(file.clone()),
        ..Default::default()
    };
    let h = TrackerHost::open(
        settings,
        &ctx(dir.path(), "alex", Role::Maintainer).at("tracker"),
    )
    .unwrap();
    ok(
        &h,
        "issues/42/comments/1",
        "edit_body",
        json!({"body": "edited"}),
    );
    assert!(h.read(|c| c.has_column("comments", "edited_at")).unwrap());
}

/// Every `tracker/…` path in `text` names an entry of `h` (each segment unescaped as the
/// tree shows it), or one of an entry's ops.
fn assert_printed_paths_exist(h: &TrackerHost, text: &str) -> usize {
    let mut seen = 0;
    for word in text.split_whitespace() {
        let Some(rest) = word.strip_prefix("tracker/") else {
            continue;
        };
        let rest = rest.trim_end_matches([';', ',', ')', '.', '"']);
        let mut segs: Vec<String> = Vec::new();
        let mut parts = rest.split('/');
        while let Some(part) = parts.next() {
            if part == "ops" {
                let op = parts.next().unwrap_or_default();
                let offered = h.ops(&segs).unwrap();
                assert!(offered.iter().any(|o| o.name == op), "{word}: no op {op}");
                break;
            }
            match crate::host::names::unescape(part) {
                Some(s) => segs.push(s),
                None => panic!("{word}: {part} is reserved, not an entry"),
            }
        }
        assert!(
            h.entry(&segs).unwrap().is_some(),
            "{word}: no entry {segs:?}"
        );
        seen += 1;
    }
    seen
}

fn entries_named_like_reserved_names_are_printed_escaped(e: Engine) {
    let (_d, h) = demo(e);
    // Only SQL can name a check or a label so; the tree must still reach them.
    h.read(|c| {
        c.batch(
            "UPDATE checks SET name = 'ops' WHERE number = 50 AND name = 'test';
             INSERT INTO labels (name, color, description) VALUES ('body', 'ffffff', 'odd');
             INSERT INTO item_labels (number, label) VALUES (50, 'body');",
        )
    })
    .unwrap();
    let merge = guard(&h, "pulls/50", "merge");
    let checks = &merge.conditions[1];
    assert!(
        checks.detail.contains("see tracker/pulls/50/checks/ops~;"),
        "{}",
        checks.detail
    );
    let mut printed = 0;
    for c in &merge.conditions {
        printed += assert_printed_paths_exist(&h, &c.detail);
    }
    assert_eq!(printed, 3, "{merge:?}");
    assert!(h.entry(&p("pulls/50/checks/ops")).unwrap().is_some());
    assert!(h.entry(&p("labels/body")).unwrap().is_some());
    let meta = ok(&h, "pulls/50", "get_metadata", json!({})).result;
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["path"], "tracker/pulls/50");
    assert_eq!(meta["labels"][0], "body");
    // The label's relation op works; its path is the runtime's to print (host-relative).
    let out = ok(&h, "labels/body", "issues", json!({}));
    assert_eq!(out.discovered, vec![p("pulls/50")]);
    let out = ok(&h, "issues/42", "label", json!({"add": ["body"]}));
    assert!(out.changed.contains(&p("labels/body")), "{:?}", out.changed);
}

#[test]
fn printed_paths_start_at_the_mount() {
    let dir = tempfile::tempdir().unwrap();
    let settings = TrackerSettings {
        database: Some(":memory:".into()),
        ..Default::default()
    };
    let h = TrackerHost::open(
        settings,
        &ctx(dir.path(), "alex", Role::Maintainer).at("data/t/"),
    )
    .unwrap();
    let g = guard(&h, "pulls/50", "merge");
    assert!(
        g.conditions[1]
            .detail
            .contains("see data/t/pulls/50/checks/test"),
        "{g:?}"
    );
    assert!(
        g.conditions[2]
            .detail
            .contains("data/t/pulls/50/ops/approve"),
        "{g:?}"
    );
}

/// SQLite re-prepares a cached statement when a parameter the planner looked at changes to
/// or from 0 or 1; issue 1's metadata used to cost a parse per query.
#[test]
fn cached_statements_are_not_re_prepared_for_issue_1() {
    let dir = tempfile::tempdir().unwrap();
    let h = TrackerHost::open(
        TrackerSettings::default(),
        &ctx(dir.path(), "alex", Role::Maintainer).at("tracker"),
    )
    .unwrap();
    for _ in 0..3 {
        for n in [1, 2, 1, 3, 1] {
            ok(&h, &format!("issues/{n}"), "get_metadata", json!({}));
        }
        ok(&h, "issues/1", "get_metadata", json!({}));
    }
    let reprepared = h
        .read(|s| {
            let Store::Lite(conn) = s else {
                unreachable!("the default tracker is on SQLite")
            };
            // The very statement production runs (its text is shared, so a drift cannot
            // make this a fresh, never-run one).
            let st = conn.prepare_cached(super::db::LABELS_OF).unwrap();
            Ok((
                st.get_status(rusqlite::StatementStatus::Run),
                st.get_status(rusqlite::StatementStatus::RePrepare),
            ))
        })
        .unwrap();
    let (runs, reprepared) = reprepared;
    assert!(
        runs >= 2,
        "the cached statement ran {runs} times: it is not the one used"
    );
    assert_eq!(reprepared, 0);
}

/// Calls lock the rows they act on, not the whole tracker: while another session holds
/// issue 42's row, a call on issue 43 runs at once and one on 42 waits for it; a new
/// issue (numbered under the project's row) runs at once too.
#[test]
fn calls_on_different_issues_run_side_by_side_on_postgresql() {
    use std::time::{Duration, Instant};
    let db = TestDb::create();
    let dir = tempfile::tempdir().unwrap();
    let settings = TrackerSettings {
        database: Some(db.url.clone().into()),
        ..Default::default()
    };
    let h = Arc::new(
        TrackerHost::open(
            settings,
            &ctx(dir.path(), "alex", Role::Maintainer).at("tracker"),
        )
        .unwrap(),
    );
    let mut other = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let mut tx = other.transaction().unwrap();
    tx.execute("SELECT 1 FROM items WHERE number = 42 FOR UPDATE", &[])
        .unwrap();
    let held = Instant::now();
    let on_42 = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || {
            ok(&h, "issues/42", "comment", json!({"body": "waits"}));
            held.elapsed()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    ok(&h, "issues/43", "comment", json!({"body": "goes"}));
    ok(&h, "issues", "create_issue", json!({"title": "new"}));
    let beside = t.elapsed();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!on_42.is_finished(), "the call on 42 waits for its row");
    tx.rollback().unwrap();
    let waited = on_42.join().unwrap();
    println!("beside a held row: {beside:?}; the call on it: {waited:?}");
    assert!(beside < Duration::from_secs(1), "{beside:?}");
    assert!(waited >= Duration::from_millis(1800), "{waited:?}");
    let comments = h.children(&p("issues/42/comments")).unwrap();
    assert_eq!(comments.len(), 4, "{comments:?}");
}

/// A COMMIT whose answer was lost is settled by the run's record, once the session that
/// sent it is gone: there, committed; absent, not.
#[test]
fn an_unanswered_commit_is_told_by_the_runs_record() {
    let db = TestDb::create();
    let dir = tempfile::tempdir().unwrap();
    let settings = TrackerSettings {
        database: Some(db.url.clone().into()),
        ..Default::default()
    };
    let h = TrackerHost::open(
        settings,
        &ctx(dir.path(), "alex", Role::Maintainer).at("tracker"),
    )
    .unwrap();
    let as_run = Caller {
        run: "j:7".into(),
        ..Caller::default()
    };
    h.call(
        &p("issues/42"),
        "comment",
        &json!({"body": "kept"}),
        &as_run,
    )
    .unwrap();
    let shared = Arc::new(crate::state::pg::SharedDb::connect(&db.url).unwrap());
    // No session has pid 0: it is gone, so the record alone tells.
    assert_eq!(store::committed(&shared, 0, "j:7"), Some(true));
    assert_eq!(store::committed(&shared, 0, "j:8"), Some(false));
}
