//! A world walks like a directory tree: `ops` is a link to an unlisted `.ops`, so `find`,
//! `grep -r`, `du`, `tar` and `rsync -a` see content only, while everything an agent does
//! through `ENTRY/ops/…` works as before, and every spelling of an op's path (`ops/`,
//! `.ops/`, a titled name, a symlink made elsewhere) is the same op under the same rules.

mod common;

use common::Mount;

const POLICY: &str = r#"
[world]
name = "walk"

[[host]]
kind = "tracker"
path = "tracker"
seed = "demo"

[[policy]]
match = "tracker/issues/*/ops/close"
action = "deny"
reason = "issues are closed by the release process"

[[policy]]
match = "tracker/issues/*/ops/comment"
action = "approve"
"#;

#[test]
fn walkers_see_content_and_ops_work_through_the_link() {
    let m = Mount::start(None);
    // The link and what it leads to.
    assert_eq!(m.ok("readlink tracker/issues/42/ops"), ".ops\n");
    assert_eq!(m.ok("stat -c %F tracker/issues/42/ops"), "symbolic link\n");
    let listing = m.ok("ls -a tracker/issues/42");
    assert!(listing.lines().any(|l| l == "ops"), "{listing}");
    assert!(!listing.lines().any(|l| l == ".ops"), "{listing}");
    assert!(m.ok("ls tracker/issues/42/ops/").contains("close"));
    assert!(m.ok("ls tracker/issues/42/.ops/").contains("close"));
    assert!(m.ok("ls ops/").contains("locate"), "the root's ops too");
    assert!(
        m.ok("ls tracker/ops/").contains("create_issue"),
        "a host's root too"
    );
    // find sees no call machinery; find -L reaches it.
    let plain = m.ok("find tracker/issues/42 | sort");
    assert!(
        !plain.contains("/ops/") && !plain.contains(".ops"),
        "{plain}"
    );
    assert!(
        plain.lines().any(|l| l == "tracker/issues/42/ops"),
        "{plain}"
    );
    assert!(
        plain.lines().any(|l| l == "tracker/issues/42/body"),
        "{plain}"
    );
    let followed = m.ok("find -L tracker/issues/42 -name guard | wc -l");
    assert!(followed.trim().parse::<usize>().unwrap() >= 5, "{followed}");
    // grep -r reads content only; reading everything through the links still runs nothing.
    let calls = m.journal_count();
    let hits = m.ok("grep -rl 'Issue #42' tracker/issues/42");
    assert_eq!(hits, "tracker/issues/42/description\n");
    m.ok("grep -R -l -e allowed -e blocked tracker/issues/42 > /dev/null");
    assert_eq!(m.journal_count(), calls, "a read ran an op");
    // Calls as always, the printed paths say ops/.
    m.ok("echo 'through the link' > tracker/issues/42/ops/comment/call");
    let result = m.read("tracker/issues/42/ops/comment/result");
    assert_eq!(result, m.read("tracker/issues/42/.ops/comment/result"));
    assert!(result.contains("/tracker/issues/42/comments/"), "{result}");
    assert!(!result.contains(".ops"), "{result}");
    // du, tar and rsync -a copy content, no machinery.
    let tar = m.ok("tar cf - tracker/issues/42 | tar tf - | sort");
    assert!(!tar.contains("/ops/") && !tar.contains(".ops"), "{tar}");
    let dest = tempfile::tempdir().unwrap();
    m.ok(&format!(
        "rsync -a tracker/issues/42/ {}/",
        dest.path().display()
    ));
    assert!(dest.path().join("body").exists());
    assert!(std::fs::symlink_metadata(dest.path().join("ops"))
        .unwrap()
        .file_type()
        .is_symlink());
}

/// A deny rule holds however the op's path is spelt; an approve rule holds a call made
/// through `.ops/` as one made through `ops/`.
#[test]
fn the_policy_holds_whatever_the_spelling_of_the_path() {
    let m = Mount::start_with_args(Some(POLICY), &["--titled"]);
    let titled = m.ok("ls tracker/issues | grep '^42 '");
    let titled = titled.trim();
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("close");
    std::os::unix::fs::symlink(m.path("tracker/issues/42/.ops/close"), &link).unwrap();
    for dir in [
        "tracker/issues/42/ops/close".to_string(),
        "tracker/issues/42/.ops/close".to_string(),
        format!("tracker/issues/{titled}/ops/close"),
        format!("tracker/issues/{titled}/.ops/close"),
        link.display().to_string(),
    ] {
        let out = m.sh(&format!("echo done > '{dir}/call'"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{dir}: {err}");
        assert!(
            m.read("tracker/issues/42/ops/close/result")
                .contains("denied by rule 1"),
            "{dir}"
        );
    }
    assert!(m.read("tracker/issues/42/description").contains("· open ·"));
    let guard = m.read("tracker/issues/42/.ops/close/guard");
    assert!(guard.contains("✗ policy: denied by rule 1"), "{guard}");
    // Held for a person through `.ops/`, and through the titled name (the agent in a
    // session of its own, so the test's session may decide).
    for dir in [
        "tracker/issues/42/.ops/comment".to_string(),
        format!("tracker/issues/{titled}/ops/comment"),
    ] {
        std::fs::write(
            m.state.join("agent.sh"),
            format!("echo '{{\"body\":\"x\"}}' > '{dir}/call'\n"),
        )
        .unwrap();
        let out = m.sh(&format!(
            "setsid -w bash {}",
            m.state.join("agent.sh").display()
        ));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Operation now in progress"), "{dir}: {err}");
    }
    assert_eq!(m.read(".wip/pending").lines().count(), 2);
    // Both pending runs name the canonical path, and approving one through `.ops` works.
    let pending = m.read(".wip/pending");
    assert!(
        pending
            .lines()
            .all(|l| l.contains("/tracker/issues/42/ops/comment/runs/")),
        "{pending}"
    );
    let run = pending.lines().next().unwrap().split('\t').next().unwrap();
    let dotted = run.replace("/ops/comment/", "/.ops/comment/");
    let out = m.sh(&format!("$WIP approve '{dotted}'"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(m.read(".wip/pending").lines().count(), 1);
}
