//! The policy judges every place a call acts on, with a real files host on a temporary
//! root: the path a `path` argument names, the file a symlink leads to, both ends where a
//! rule meets each; `hide` makes paths absent. Each test is one op kind's decision (read,
//! write, edit with `path`, through a symlink), whatever path spells the entry.

use super::*;
use crate::hosts::files::{FilesHost, FilesSettings};
use crate::hosts::HostContext;
use crate::world::call::policy::{Action, Glob, Policy, Rule};

const EACCES: i32 = libc::EACCES;
const ENOENT: i32 = libc::ENOENT;

struct Files {
    world: Arc<World>,
    root: tempfile::TempDir,
    _state: tempfile::TempDir,
}

fn rule(number: usize, pattern: &str, action: Action) -> Rule {
    Rule {
        number,
        pattern: Glob::parse(pattern).unwrap(),
        action,
        args: None,
        approvers: Vec::new(),
        expires_after: None,
        self_approve: false,
        reason: None,
    }
}

/// `public/a.txt`, `public/link → ../secret/s.txt` and `secret/s.txt` under a files host
/// mounted at `files`, with these rules.
fn files(rules: Vec<Rule>) -> Files {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("public")).unwrap();
    std::fs::create_dir_all(root.path().join("secret")).unwrap();
    std::fs::write(root.path().join("public/a.txt"), "open\n").unwrap();
    std::fs::write(root.path().join("secret/s.txt"), "SECRET words\n").unwrap();
    std::os::unix::fs::symlink("../secret/s.txt", root.path().join("public/link")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let ctx = HostContext::for_tests(root.path()).at("files");
    let host = FilesHost::open(FilesSettings::default(), &ctx).unwrap();
    let world = World::new(crate::world::WorldParts {
        settings: WorldSettings::default(),
        identity: Identity::default(),
        hosts: vec![Mounted {
            path: vec!["files".into()],
            kind: "files".into(),
            host: Arc::new(host),
        }],
        state: crate::world::StateAt {
            dir: state.path(),
            url: None,
        },
        mount_point: "/mnt/w".into(),
        config_text: String::new(),
        subscriber: Arc::new(crate::world::Unsubscribed),
        policy: Policy::new(rules),
    })
    .unwrap();
    Files {
        world: Arc::new(world),
        root,
        _state: state,
    }
}

fn at(path: &[&str]) -> Target {
    Target::Entry(EntryRef::new(0, path_of(path)))
}

impl Files {
    fn call(&self, entry: &[&str], op: &str, args: Value) -> (i32, String) {
        let report =
            self.world
                .calls()
                .call(&at(entry), op, args.to_string().as_bytes(), &caller(7));
        let errno = report.outcome.as_ref().err().map_or(0, |e| e.errno());
        (errno, report.text.to_string())
    }

    fn secret(&self) -> String {
        std::fs::read_to_string(self.root.path().join("secret/s.txt")).unwrap()
    }

    fn guard(&self, entry: &[&str], op: &str) -> String {
        self.world.calls().guard(&at(entry), op).unwrap().render()
    }
}

fn deny_secret() -> Files {
    files(vec![rule(1, "files/secret/**", Action::Deny)])
}

#[test]
fn read_with_a_path_into_a_denied_folder_is_refused() {
    let f = deny_secret();
    let (errno, text) = f.call(&[], "read", json!({"path": "secret/s.txt"}));
    assert_eq!(errno, EACCES, "{text}");
    assert!(text.contains("denied by rule 1"), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
    // Spelled another way, the same file: refused all the same.
    let (errno, text) = f.call(&["public"], "read", json!({"path": "../secret/./s.txt"}));
    assert_eq!(errno, EACCES, "{text}");
    let (errno, text) = f.call(&[], "read", json!({"path": "public/a.txt"}));
    assert_eq!((errno, text.contains("open")), (0, true), "{text}");
}

#[test]
fn write_and_edit_with_a_path_into_a_denied_folder_change_nothing() {
    let f = deny_secret();
    let (errno, text) = f.call(
        &[],
        "write",
        json!({"path": "secret/s.txt", "content": "PWNED\n"}),
    );
    assert_eq!(errno, EACCES, "{text}");
    let (errno, text) = f.call(
        &["public"],
        "edit",
        json!({"path": "../secret/s.txt", "old_string": "SECRET", "new_string": "PWNED"}),
    );
    assert_eq!(errno, EACCES, "{text}");
    // A new file there is refused too (`secret/**` covers what does not exist yet).
    let (errno, _) = f.call(
        &[],
        "write",
        json!({"path": "secret/new.txt", "content": "x"}),
    );
    assert_eq!(errno, EACCES);
    assert!(!f.root.path().join("secret/new.txt").exists());
    assert_eq!(f.secret(), "SECRET words\n");
}

#[test]
fn a_symlink_inside_the_root_is_judged_at_the_file_it_leads_to() {
    let f = deny_secret();
    for (op, args) in [
        ("write", json!({"content": "PWNED\n"})),
        (
            "edit",
            json!({"old_string": "SECRET", "new_string": "PWNED"}),
        ),
        ("read", json!({})),
    ] {
        let (errno, text) = f.call(&["public", "link"], op, args);
        assert_eq!(errno, EACCES, "{op}: {text}");
        assert!(text.contains("denied by rule 1"), "{op}: {text}");
        // The guard says so before any call.
        let guard = f.guard(&["public", "link"], op);
        assert!(guard.starts_with("blocked\n"), "{op}: {guard}");
        assert!(guard.contains("denied by rule 1"), "{op}: {guard}");
    }
    // Reached through the folder's op and `path` too.
    let (errno, _) = f.call(
        &["public"],
        "write",
        json!({"path": "link", "content": "x"}),
    );
    assert_eq!(errno, EACCES);
    assert_eq!(f.secret(), "SECRET words\n");
    // The file beside it is untouched by the rule.
    let (errno, text) = f.call(&["public", "a.txt"], "write", json!({"content": "new\n"}));
    assert_eq!(errno, 0, "{text}");
}

#[test]
fn the_strictest_rule_of_the_places_a_call_acts_on_wins() {
    // The entry's own path is allowed first; the file it leads to is denied.
    let f = files(vec![
        rule(1, "files/public/**", Action::Allow),
        rule(2, "files/secret/**", Action::Deny),
    ]);
    let (errno, text) = f.call(&["public", "link"], "write", json!({"content": "PWNED\n"}));
    assert_eq!(errno, EACCES, "{text}");
    assert!(text.contains("denied by rule 2"), "{text}");
    let (errno, _) = f.call(&["public", "a.txt"], "write", json!({"content": "ok\n"}));
    assert_eq!(errno, 0);
    assert_eq!(f.secret(), "SECRET words\n");
}

#[test]
fn an_op_rule_and_a_path_rule_meet_the_same_call() {
    // A rule over ENTRY/ops/NAME still decides, and a path rule beside it.
    let f = files(vec![rule(1, "files/**/ops/edit", Action::Deny)]);
    let (errno, _) = f.call(
        &["public", "a.txt"],
        "edit",
        json!({"old_string": "open", "new_string": "shut"}),
    );
    assert_eq!(errno, EACCES);
    let (errno, _) = f.call(&["public", "a.txt"], "write", json!({"content": "x\n"}));
    assert_eq!(errno, 0);
}

fn hide_secret() -> Files {
    files(vec![rule(1, "files/secret/**", Action::Hide)])
}

#[test]
fn a_hidden_folder_is_absent_for_every_reader() {
    let f = hide_secret();
    let w = &f.world;
    let root = w.tree_root(0).expect("a working tree");
    assert!(
        w.tree_lookup(root, std::ffi::OsStr::new("secret")).is_err(),
        "a hidden folder is not found by name"
    );
    assert!(
        w.tree_lookup(root, std::ffi::OsStr::new("secret@"))
            .is_err(),
        "nor its entry"
    );
    let listed: Vec<String> = w
        .tree_list(root)
        .unwrap()
        .into_iter()
        .map(|n| n.name.to_string_lossy().into_owned())
        .collect();
    assert!(listed.contains(&"public".to_string()), "{listed:?}");
    assert!(!listed.contains(&"secret".to_string()), "{listed:?}");
    // Not through a folder op's path, nor through a symlink: as if it did not exist.
    let (errno, text) = f.call(&[], "read", json!({"path": "secret/s.txt"}));
    assert_eq!(errno, ENOENT, "{text}");
    assert!(!text.contains("SECRET") && !text.contains("rule"), "{text}");
    let (errno, text) = f.call(&["public", "link"], "read", json!({}));
    assert_eq!(errno, ENOENT, "{text}");
    let (errno, _) = f.call(
        &[],
        "write",
        json!({"path": "secret/s.txt", "content": "x"}),
    );
    assert_eq!(errno, ENOENT);
    assert_eq!(f.secret(), "SECRET words\n");
}

#[test]
fn a_glob_over_paths_is_judged_below_a_folder_an_op_acts_on() {
    let p = Policy::new(vec![rule(1, "files/secret/**", Action::Deny)]);
    let within = |path: &str| crate::world::call::policy::Subjects {
        names: vec![format!("{path}/ops/remove")],
        within: Some(path.to_string()),
    };
    // Removing the root acts on secret/ below it: denied; public/ holds nothing denied.
    assert_eq!(
        p.judge(&[within("files")], "remove", None)
            .rule
            .map(|r| r.number),
        Some(1)
    );
    assert!(p
        .judge(&[within("files/public")], "remove", None)
        .rule
        .is_none());
    // `D/**` covers D itself.
    assert!(Glob::parse("files/secret/**")
        .unwrap()
        .matches("files/secret"));
}
