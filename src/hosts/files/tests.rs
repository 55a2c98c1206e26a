//! Unit tests of the files host on temporary directories.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{FilesHost, FilesSettings};
use crate::host::{CallOutcome, Caller, Host, HostError, HostResult};
use crate::hosts::HostContext;

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    host: FilesHost,
}

fn ctx(launch: &Path, mount: &Path) -> HostContext {
    HostContext {
        state_dir: launch.join(".state"),
        mount_point: mount.to_path_buf(),
        mount: "files".to_string(),
        ..HostContext::for_tests(launch)
    }
}

/// A root with a few files, next to an `outside` directory that must never be touched.
fn world_with(settings: FilesSettings, mount_inside: bool) -> World {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    fs::create_dir_all(root.join("src/deep")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    fs::write(root.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    fs::write(root.join("bin.dat"), [0u8, 1, 2, 3]).unwrap();
    let mount = if mount_inside {
        fs::create_dir(root.join("mnt")).unwrap();
        root.join("mnt")
    } else {
        base.join("mnt")
    };
    let settings = FilesSettings {
        root: Some(PathBuf::from("root")),
        ..settings
    };
    let host = FilesHost::open(settings, &ctx(&base, &mount).at("files")).unwrap();
    World {
        _dir: dir,
        root,
        outside,
        host,
    }
}

fn world() -> World {
    world_with(FilesSettings::default(), false)
}

fn p(s: &str) -> Vec<String> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split('/').map(str::to_string).collect()
    }
}

fn call(w: &World, path: &str, op: &str, args: Value) -> HostResult<CallOutcome> {
    w.host.call(&p(path), op, &args, &Caller::default())
}

fn desc(w: &World, path: &str) -> String {
    w.host.entry(&p(path)).unwrap().unwrap().description
}

/// The names the working tree's folder at `path` lists (its real children), sorted.
fn names(w: &World, path: &str) -> Vec<String> {
    use crate::host::tree::Tree;
    let mut dir = Tree::root(&w.host);
    for seg in p(path) {
        let found = Tree::lookup(&w.host, dir, std::ffi::OsStr::new(&seg)).unwrap();
        dir = found.node;
    }
    let mut out: Vec<String> = Tree::list(&w.host, dir)
        .unwrap()
        .into_iter()
        .map(|e| e.name.to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The call is refused by a failing policy condition with this name.
fn assert_policy(r: HostResult<CallOutcome>, name: &str) {
    match r {
        Err(HostError::Blocked(g)) => {
            let f = g.first_failure().unwrap();
            assert!(f.policy, "{f:?}");
            assert_eq!(f.name, name, "{f:?}");
        }
        other => panic!("expected a policy refusal by {name}, got {other:?}"),
    }
}

#[test]
fn settings_parse_strictly() {
    let s: FilesSettings = toml::from_str("read_only = true").unwrap();
    assert!(s.read_only && s.root.is_none() && s.page_size == 1000);
    assert!(toml::from_str::<FilesSettings>("nope = 1").is_err());
}

#[test]
fn missing_root_is_an_error_with_words() {
    let dir = tempfile::tempdir().unwrap();
    let settings = FilesSettings {
        root: Some("does-not-exist".into()),
        ..FilesSettings::default()
    };
    let err = FilesHost::open(
        settings,
        &ctx(dir.path(), &dir.path().join("m")).at("files"),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("does-not-exist"), "{err}");
}

#[test]
fn listing_and_descriptions() {
    let w = world();
    assert_eq!(names(&w, ""), ["a.txt", "bin.dat", "src"]);
    let root = desc(&w, "");
    assert!(root.starts_with(&format!("Files of {} (read-write)", w.root.display())));
    assert!(root.contains("3 entries (1 directory, 2 files)"), "{root}");
    let a = desc(&w, "a.txt");
    assert!(
        a.starts_with("file · 14 B · 3 lines · text · modified "),
        "{a}"
    );
    assert!(desc(&w, "bin.dat").contains("binary"));
    assert_eq!(
        desc(&w, "src"),
        "directory · 2 entries (1 directory, 1 file)"
    );
    let e = w.host.entry(&p("a.txt")).unwrap().unwrap();
    assert_eq!(
        e.reference,
        format!("file://{}", w.root.join("a.txt").display())
    );
    assert_eq!(w.host.resolve(&e.reference), vec![p("a.txt")]);
    assert!(w.host.resolve("file:///etc/passwd").is_empty());
    assert!(w.host.entry(&p("nope")).unwrap().is_none());
    assert!(w.host.entry(&p("a.txt/x")).unwrap().is_none());
    // An entry holds no children: a folder's are the working tree's.
    assert!(w.host.children(&p("")).unwrap().is_empty());
    assert!(w.host.children(&p("src")).unwrap().is_empty());
    assert!(
        w.host.body(&p("a.txt")).unwrap().is_none(),
        "a file is a file, not a body"
    );
    // Watched (a local file system): the kernel may keep what it was shown.
    assert_eq!(w.host.cache_ttl(), std::time::Duration::from_secs(60));
    assert!(!w.host.entry(&p("a.txt")).unwrap().unwrap().partial);
}

/// What changes on disk outside the mount is reported, once the mount has shown the
/// directory it happened in.
#[test]
fn changes_on_disk_are_reported_for_directories_shown() {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    fs::create_dir_all(base.join("root/sub")).unwrap();
    fs::write(base.join("root/a.txt"), "a").unwrap();
    let (changes, rx) = crate::host::Changes::channel();
    let ctx = HostContext {
        changes: changes.for_host(3),
        ..ctx(&base, &base.join("mnt"))
    };
    let host = FilesHost::open(
        FilesSettings {
            root: Some(PathBuf::from("root")),
            ..FilesSettings::default()
        },
        &ctx.at("files"),
    )
    .unwrap();
    let wait = |want: &[&str]| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let change = rx
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("a change {want:?} within 10 s: {e}"));
            assert_eq!(change.host, 3);
            if change.paths.contains(&want) {
                return change.paths;
            }
        }
    };
    // The root is watched from the start.
    fs::write(base.join("root/a.txt"), "changed").unwrap();
    let paths = wait(&["a.txt"]);
    assert!(paths.contains(&Vec::new()), "the root itself: {paths:?}");
    fs::write(base.join("root/new.txt"), "new").unwrap();
    wait(&["new.txt"]);
    // A subdirectory once the kernel was shown it.
    {
        use crate::host::tree::Tree;
        let sub = Tree::lookup(&host, Tree::root(&host), std::ffi::OsStr::new("sub")).unwrap();
        Tree::list(&host, sub.node).unwrap();
    }
    fs::write(base.join("root/sub/b.txt"), "b").unwrap();
    wait(&["sub", "b.txt"]);
    fs::remove_file(base.join("root/sub/b.txt")).unwrap();
    wait(&["sub", "b.txt"]);
}

#[test]
fn page_size_bounds_listings() {
    let w = world_with(
        FilesSettings {
            page_size: 2,
            ..FilesSettings::default()
        },
        false,
    );
    // The folder lists every child; its `list` op shows a page.
    assert_eq!(names(&w, ""), ["a.txt", "bin.dat", "src"]);
    assert!(desc(&w, "").contains("its list op shows the first 2 by name"));
    assert!(w.host.entry(&p("src")).unwrap().is_some());
    let out = call(&w, "", "list", json!({})).unwrap().result;
    assert!(out.contains("1 more entry not shown"), "{out}");
}

#[test]
fn reserved_names_are_returned_raw() {
    let w = world();
    fs::write(w.root.join("ops"), "x").unwrap();
    fs::create_dir(w.root.join("description")).unwrap();
    let n = names(&w, "");
    assert!(n.contains(&"ops".to_string()) && n.contains(&"description".to_string()));
    assert!(w.host.entry(&p("ops")).unwrap().is_some());
}

#[test]
fn ops_have_strict_schemas() {
    let w = world();
    for path in ["", "a.txt", "src"] {
        for op in w.host.ops(&p(path)).unwrap() {
            assert_eq!(op.schema["type"], "object");
            assert_eq!(op.schema["additionalProperties"], false);
            assert!(!op.description.contains('\n'));
        }
    }
    let file_ops: Vec<String> = w
        .host
        .ops(&p("a.txt"))
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(
        file_ops,
        [
            "read",
            "write",
            "edit",
            "stat",
            "remove",
            "rename",
            "chmod",
            "truncate",
            "touch",
            "create",
            "link",
            "chown",
            "setxattr",
            "removexattr",
            "fallocate",
            "copy_file_range",
            "mknod",
            "symlink"
        ]
    );
    assert!(matches!(
        call(&w, "a.txt", "list", json!({})),
        Err(HostError::NotFound(_))
    ));
    assert!(matches!(
        call(&w, "a.txt", "read", json!({"bogus": 1})),
        Err(HostError::InvalidArgs(_))
    ));
    assert!(matches!(
        call(&w, "", "read", json!({"path": 3})),
        Err(HostError::InvalidArgs(_))
    ));
    assert!(matches!(
        call(&w, "", "write", json!({"content": "x"})),
        Err(HostError::InvalidArgs(_))
    ));
}

#[test]
fn read_numbers_lines_with_offset_and_limit() {
    let w = world();
    let text: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    fs::write(w.root.join("long.txt"), text).unwrap();
    let out = call(&w, "a.txt", "read", json!({})).unwrap().result;
    assert_eq!(out, "     1\tone\n     2\ttwo\n     3\tthree\n");
    let out = call(&w, "long.txt", "read", json!({})).unwrap().result;
    assert!(out.starts_with("     1\tline 1\n"));
    assert!(out.contains("  2000\tline 2000\n"));
    assert!(!out.contains("line 2001"));
    assert!(
        out.ends_with("… 500 more lines: read with offset=2001\n"),
        "{out}"
    );
    let out = call(&w, "long.txt", "read", json!({"offset": 2499, "limit": 5}))
        .unwrap()
        .result;
    assert_eq!(out, "  2499\tline 2499\n  2500\tline 2500\n");
    let out = call(
        &w,
        "",
        "read",
        json!({"path": "a.txt", "offset": 2, "limit": 1}),
    )
    .unwrap()
    .result;
    assert_eq!(out, "     2\ttwo\n… 1 more line: read with offset=3\n");
    assert!(matches!(
        call(&w, "a.txt", "read", json!({"offset": 10})),
        Err(HostError::InvalidArgs(_))
    ));
    assert!(call(&w, "bin.dat", "read", json!({}))
        .unwrap()
        .result
        .contains("binary"));
    let r = call(&w, "a.txt", "read", json!({})).unwrap();
    assert!(r.changed.is_empty() && r.discovered.is_empty());
}

#[test]
fn read_of_missing_path_is_blocked_by_exists() {
    let w = world();
    match call(&w, "", "read", json!({"path": "nope.txt"})) {
        Err(HostError::Blocked(g)) => {
            let f = g.first_failure().unwrap();
            assert_eq!(f.name, "exists");
            assert!(!f.policy);
            assert!(
                f.detail.contains("files/nope.txt does not exist"),
                "{}",
                f.detail
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn write_creates_and_overwrites_keeping_permissions() {
    let w = world();
    fs::set_permissions(w.root.join("a.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    let r = call(&w, "a.txt", "write", json!({"content": "new\n"})).unwrap();
    assert_eq!(fs::read_to_string(w.root.join("a.txt")).unwrap(), "new\n");
    let mode = fs::metadata(w.root.join("a.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o640);
    assert_eq!(r.changed, vec![p("a.txt")]);
    assert_eq!(r.discovered, vec![p("a.txt")]);

    let r = call(
        &w,
        "src",
        "write",
        json!({"path": "new.rs", "content": "x"}),
    )
    .unwrap();
    assert_eq!(fs::read_to_string(w.root.join("src/new.rs")).unwrap(), "x");
    assert!(
        r.result.starts_with("created files/src/new.rs"),
        "{}",
        r.result
    );
    assert_eq!(r.changed, vec![p("src/new.rs"), p("src")]);
    assert_eq!(r.discovered, vec![p("src/new.rs")]);

    assert!(matches!(
        call(
            &w,
            "",
            "write",
            json!({"path": "x/y/z.txt", "content": "z"})
        ),
        Err(HostError::InvalidArgs(_))
    ));
    let r = call(
        &w,
        "",
        "write",
        json!({"path": "x/y/z.txt", "content": "z", "create_dirs": true}),
    )
    .unwrap();
    assert_eq!(fs::read_to_string(w.root.join("x/y/z.txt")).unwrap(), "z");
    assert!(r.changed.contains(&p("")), "{:?}", r.changed);
    // No temporary files left behind.
    assert!(names(&w, "").iter().all(|n| !n.starts_with(".wip-write")));
    assert!(matches!(
        call(&w, "", "write", json!({"path": "src", "content": "z"})),
        Err(HostError::InvalidArgs(_))
    ));
}

#[test]
fn edit_unique_non_unique_missing_and_replace_all() {
    let w = world();
    fs::write(w.root.join("e.txt"), "foo bar foo\nbaz\n").unwrap();
    let r = call(
        &w,
        "e.txt",
        "edit",
        json!({"old_string": "baz", "new_string": "qux"}),
    )
    .unwrap();
    assert!(r.result.contains("replaced 1 occurrence"), "{}", r.result);
    assert_eq!(r.changed, vec![p("e.txt")]);
    assert_eq!(
        fs::read_to_string(w.root.join("e.txt")).unwrap(),
        "foo bar foo\nqux\n"
    );

    match call(&w, "e.txt", "edit", json!({"old_string": "foo", "new_string": "x"})) {
        Err(HostError::InvalidArgs(m)) => assert_eq!(
            m,
            "old_string occurs 2 times in files/e.txt; add context to make it unique or set replace_all"
        ),
        other => panic!("{other:?}"),
    }
    match call(
        &w,
        "",
        "edit",
        json!({"path": "e.txt", "old_string": "nope", "new_string": "x"}),
    ) {
        Err(HostError::InvalidArgs(m)) => assert_eq!(m, "old_string not found in files/e.txt"),
        other => panic!("{other:?}"),
    }
    let r = call(
        &w,
        "",
        "edit",
        json!({"path": "e.txt", "old_string": "foo", "new_string": "x", "replace_all": true}),
    )
    .unwrap();
    assert!(r.result.contains("replaced 2 occurrences"), "{}", r.result);
    assert_eq!(
        fs::read_to_string(w.root.join("e.txt")).unwrap(),
        "x bar x\nqux\n"
    );
}

#[test]
fn escapes_are_refused_by_policy() {
    let w = world();
    symlink("/etc", w.root.join("etc_link")).unwrap();
    symlink(&w.outside, w.root.join("out_dir")).unwrap();
    symlink(w.outside.join("secret.txt"), w.root.join("secret_link")).unwrap();
    symlink("nowhere", w.root.join("dangling")).unwrap();
    for rel in [
        "../x",
        "/etc/passwd",
        "a/../../x",
        "src/../../outside/secret.txt",
    ] {
        assert_policy(
            call(&w, "", "write", json!({"path": rel, "content": "pwn"})),
            "inside_root",
        );
        assert_policy(call(&w, "", "read", json!({"path": rel})), "inside_root");
    }
    assert_policy(
        call(
            &w,
            "src",
            "write",
            json!({"path": "../../x", "content": "p"}),
        ),
        "inside_root",
    );
    for rel in [
        "etc_link/passwd",
        "out_dir/secret.txt",
        "out_dir/new.txt",
        "secret_link",
    ] {
        assert_policy(
            call(&w, "", "write", json!({"path": rel, "content": "pwn"})),
            "inside_root",
        );
        assert_policy(call(&w, "", "read", json!({"path": rel})), "inside_root");
    }
    // Links leading out are listed, described, and refuse every op.
    let n = names(&w, "");
    assert!(n.contains(&"etc_link".to_string()) && n.contains(&"dangling".to_string()));
    assert!(
        desc(&w, "etc_link").contains("outside the root"),
        "{}",
        desc(&w, "etc_link")
    );
    assert!(desc(&w, "dangling").contains("dangles"));
    assert!(w.host.children(&p("out_dir")).unwrap().is_empty());
    assert!(w.host.entry(&p("out_dir/secret.txt")).unwrap().is_none());
    for op in ["read", "stat"] {
        assert_policy(call(&w, "secret_link", op, json!({})), "inside_root");
        assert_policy(call(&w, "out_dir", op, json!({})), "inside_root");
    }
    assert_policy(
        call(&w, "secret_link", "write", json!({"content": "pwn"})),
        "inside_root",
    );
    assert_policy(
        call(
            &w,
            "secret_link",
            "edit",
            json!({"old_string": "secret", "new_string": "x"}),
        ),
        "inside_root",
    );
    let g = w.host.guard(&p("secret_link"), "read", None).unwrap();
    assert!(!g.allowed() && g.render().contains(&w.root.display().to_string()));
    // Nothing was written outside.
    assert_eq!(
        fs::read_to_string(w.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(fs::read_dir(&w.outside).unwrap().count(), 1);
    assert!(!w.root.parent().unwrap().join("x").exists());
}

#[test]
fn links_inside_the_root_behave_as_their_target() {
    let w = world();
    symlink("src/main.rs", w.root.join("main_link")).unwrap();
    symlink("src", w.root.join("src_link")).unwrap();
    symlink("..", w.root.join("src/up")).unwrap();
    assert!(desc(&w, "main_link").starts_with("symlink → src/main.rs · file ·"));
    assert!(desc(&w, "src_link").starts_with("symlink → src · directory ·"));
    // In the tree a link is a link (the kernel follows it); its entry describes the target.
    assert_eq!(names(&w, "src"), ["deep", "main.rs", "up"]);
    // A link back to an ancestor stays out of listings (find would loop) but is reachable.
    let up = w.host.entry(&p("src/up")).unwrap().unwrap();
    assert!(!up.indexable);
    call(
        &w,
        "main_link",
        "write",
        json!({"content": "fn main() { }\n"}),
    )
    .unwrap();
    assert_eq!(
        fs::read_to_string(w.root.join("src/main.rs")).unwrap(),
        "fn main() { }\n"
    );
    assert!(fs::symlink_metadata(w.root.join("main_link"))
        .unwrap()
        .file_type()
        .is_symlink());
    let r = call(&w, "", "read", json!({"path": "src_link/main.rs"})).unwrap();
    assert!(r.result.contains("fn main"));
}

#[test]
fn read_only_refuses_write_and_edit() {
    let w = world_with(
        FilesSettings {
            read_only: true,
            ..FilesSettings::default()
        },
        false,
    );
    assert!(desc(&w, "").contains("(read-only)"));
    assert_policy(
        call(&w, "a.txt", "write", json!({"content": "x"})),
        "writable",
    );
    assert_policy(
        call(
            &w,
            "a.txt",
            "edit",
            json!({"old_string": "one", "new_string": "x"}),
        ),
        "writable",
    );
    assert_policy(
        call(&w, "", "write", json!({"path": "n.txt", "content": "x"})),
        "writable",
    );
    let g = w.host.guard(&p(""), "write", None).unwrap();
    assert!(
        g.render().contains("manifest read_only = true"),
        "{}",
        g.render()
    );
    assert_eq!(
        fs::read_to_string(w.root.join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert!(!w.root.join("n.txt").exists());
    assert!(call(&w, "a.txt", "read", json!({})).is_ok());
}

#[test]
fn mount_point_inside_the_root_is_hidden() {
    let w = world_with(FilesSettings::default(), true);
    assert!(w.root.join("mnt").is_dir());
    assert!(!names(&w, "").contains(&"mnt".to_string()));
    assert!(w.host.entry(&p("mnt")).unwrap().is_none());
    assert!(desc(&w, "").contains("3 entries"));
    symlink("mnt", w.root.join("to_mnt")).unwrap();
    assert!(w.host.entry(&p("to_mnt")).unwrap().is_none());
    assert_policy(
        call(&w, "", "write", json!({"path": "mnt/x", "content": "x"})),
        "inside_root",
    );
    assert_policy(
        call(&w, "", "write", json!({"path": "to_mnt/x", "content": "x"})),
        "inside_root",
    );
    assert!(!w.root.join("mnt/x").exists());
    let out = call(&w, "", "list", json!({})).unwrap().result;
    assert!(!out.contains("mnt"), "{out}");
}

#[test]
fn root_inside_the_mount_point_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("r")).unwrap();
    let settings = FilesSettings {
        root: Some("r".into()),
        ..FilesSettings::default()
    };
    assert!(FilesHost::open(settings, &ctx(dir.path(), dir.path()).at("files")).is_err());
}

#[test]
fn guards_show_conditions_without_args() {
    let w = world();
    let g = w.host.guard(&p("a.txt"), "edit", None).unwrap();
    let names: Vec<&str> = g.conditions.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["inside_root", "writable", "exists"]);
    assert!(g.allowed());
    let g = w.host.guard(&p(""), "read", None).unwrap();
    assert!(g.allowed() && g.conditions.len() == 1);
    let g = w
        .host
        .guard(&p(""), "read", Some(&json!({"path": "../etc"})))
        .unwrap();
    assert!(!g.allowed());
}

#[test]
fn stat_reports_size_type_permissions_and_lines() {
    let w = world();
    let out = call(&w, "a.txt", "stat", json!({})).unwrap().result;
    assert!(out.contains("type: file"), "{out}");
    assert!(out.contains("size: 14 bytes"), "{out}");
    assert!(out.contains("permissions: rw-"), "{out}");
    assert!(out.contains("lines: 3"), "{out}");
    assert!(out.contains("modified: "), "{out}");
    let out = call(&w, "src", "stat", json!({})).unwrap().result;
    assert!(
        out.contains("type: directory") && out.contains("entries: 2"),
        "{out}"
    );
}

#[test]
fn time_formatting() {
    use std::time::{Duration, UNIX_EPOCH};
    let t = UNIX_EPOCH + Duration::from_secs(1_796_040_240); // 2026-11-30 12:04 UTC
    assert_eq!(super::describe::format_time(t), "2026-11-30 12:04 UTC");
    assert_eq!(
        super::describe::format_time(UNIX_EPOCH),
        "1970-01-01 00:00 UTC"
    );
    assert_eq!(super::describe::human_size(1229), "1.2 KiB");
}

/// Whether the outside directory is exactly as the race test laid it out.
fn outside_untouched(outside: &Path) -> Result<(), String> {
    let mut names: Vec<String> = fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if names != ["f.txt", "outside-only.txt", "secret.txt"] {
        return Err(format!("outside holds {names:?}"));
    }
    let f = fs::read_to_string(outside.join("f.txt")).unwrap();
    if f != "OUTSIDE\n" {
        return Err(format!("outside f.txt became {f:?}"));
    }
    Ok(())
}

/// The race's ten busy threads run at the lowest priority (nice 19, per thread): on an
/// idle machine they run flat out, beside the rest of the suite they take only what it
/// leaves, so no other test's timing depends on them.
fn yield_to_other_tests() {
    // SAFETY: setpriority on the calling thread (who = 0); a failure only leaves it at
    // the priority it had.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
    }
}

/// An attacker with a shell in the root swaps a directory with a symlink to outside
/// (`renameat2(RENAME_EXCHANGE)`, in a loop) while read, write, edit, list, stat, describe
/// and the documents for search run: none of them may ever see or touch outside.
#[test]
fn swapping_a_directory_for_a_symlink_never_leads_out() {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    let w = world();
    fs::create_dir(w.root.join("d")).unwrap();
    fs::write(w.root.join("d/f.txt"), "inside\n").unwrap();
    fs::write(w.outside.join("f.txt"), "OUTSIDE\n").unwrap();
    fs::write(w.outside.join("outside-only.txt"), "OUTSIDE\n").unwrap();
    symlink(&w.outside, w.root.join("l")).unwrap();
    let secs = std::env::var("WIP_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20u64);
    let stop = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    let tries = AtomicUsize::new(0);
    let refused = AtomicUsize::new(0);
    let escapes = std::sync::Mutex::new(Vec::<String>::new());
    let escape = |what: String| escapes.lock().unwrap().push(what);
    let end = Instant::now() + Duration::from_secs(secs);
    let (d, l) = (w.root.join("d"), w.root.join("l"));
    std::thread::scope(|s| {
        s.spawn(|| {
            yield_to_other_tests();
            while !stop.load(Ordering::Relaxed) {
                renameat_with(CWD, &d, CWD, &l, RenameFlags::EXCHANGE).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        });
        let worker = |n: usize| {
            let mut i = 0usize;
            while Instant::now() < end {
                i += 1;
                tries.fetch_add(1, Ordering::Relaxed);
                let text = match n {
                    0 => call(&w, "", "read", json!({"path": "d/f.txt"})).map(|o| o.result),
                    1 => call(&w, "d/f.txt", "read", json!({})).map(|o| o.result),
                    2 => call(
                        &w,
                        "",
                        "write",
                        json!({"path": format!("d/new-{i}.txt"), "content": "x"}),
                    )
                    .map(|o| o.result),
                    3 => call(
                        &w,
                        "",
                        "edit",
                        json!({"path": "d/f.txt", "old_string": "side", "new_string": "SIDE"}),
                    )
                    .and_then(|_| {
                        call(
                            &w,
                            "d/f.txt",
                            "edit",
                            json!({"old_string": "SIDE", "new_string": "side"}),
                        )
                    })
                    .map(|o| o.result),
                    4 => call(&w, "d", "list", json!({})).map(|o| o.result),
                    5 => call(&w, "d", "stat", json!({})).map(|o| o.result),
                    6 => w.host.children(&p("d")).map(|c| {
                        c.iter()
                            .map(|c| format!("{} {}\n", c.name, c.info.description))
                            .collect()
                    }),
                    7 => w
                        .host
                        .entry(&p("d/outside-only.txt"))
                        .map(|e| e.map(|e| e.description).unwrap_or_default()),
                    _ => w.host.documents(None, 1000).map(|(docs, _)| {
                        docs.iter()
                            .map(|d| format!("{} {}\n", d.path.join("/"), d.text))
                            .collect()
                    }),
                };
                match text {
                    Ok(t) if t.contains("OUTSIDE") || t.contains("outside-only") => {
                        escape(format!("op {n}: {t}"))
                    }
                    Ok(_) => {}
                    Err(_) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if let Err(e) = outside_untouched(&w.outside) {
                    escape(format!("op {n}: {e}"));
                }
            }
        };
        let handles: Vec<_> = (0..9)
            .map(|n| {
                s.spawn(move || {
                    yield_to_other_tests();
                    worker(n)
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let escapes = escapes.into_inner().unwrap();
    let (swaps, tries, refused) = (swaps.into_inner(), tries.into_inner(), refused.into_inner());
    eprintln!(
        "{swaps} swaps, {tries} tries, {refused} refused, {} escapes",
        escapes.len()
    );
    assert!(
        escapes.is_empty(),
        "{} escapes: {:?}",
        escapes.len(),
        &escapes[..escapes.len().min(5)]
    );
    // The race was run: the swapper swapped, and some tries met the symlink.
    assert!(
        swaps > 1000 && refused > 0,
        "{swaps} swaps, {refused} refused"
    );
    // No temporary file of an atomic write is left anywhere.
    for dir in [w.root.join("d"), w.root.join("l"), w.outside.clone()] {
        for e in fs::read_dir(&dir).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with(".wip-write-"), "{name} left in {dir:?}");
        }
    }
}

#[test]
fn fifos_devices_and_sockets_are_refused_at_once() {
    let w = world();
    let fifo = w.root.join("pipe");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let sock = std::os::unix::net::UnixListener::bind(w.root.join("sock")).unwrap();
    // No reader or writer on the other end: an open of the FIFO would block forever.
    for (path, op, args) in [
        ("pipe", "read", json!({})),
        ("", "read", json!({"path": "pipe"})),
        ("pipe", "write", json!({"content": "x"})),
        ("", "write", json!({"path": "pipe", "content": "x"})),
        (
            "pipe",
            "edit",
            json!({"old_string": "a", "new_string": "b"}),
        ),
        ("sock", "read", json!({})),
        (
            "",
            "edit",
            json!({"path": "sock", "old_string": "a", "new_string": "b"}),
        ),
    ] {
        match call(&w, path, op, args) {
            Err(HostError::InvalidArgs(words)) => {
                assert!(words.contains("regular files only"), "{words}")
            }
            other => panic!("{op} of {path}: {other:?}"),
        }
    }
    let fifo_desc = desc(&w, "pipe");
    assert!(fifo_desc.starts_with("fifo"), "{fifo_desc}");
    let stat = call(&w, "pipe", "stat", json!({})).unwrap().result;
    assert!(stat.contains("type: fifo"), "{stat}");
    // The null device, if the root held one, is never opened either.
    let devnull = w.root.join("null");
    if rustix::fs::mknodat(
        rustix::fs::CWD,
        &devnull,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    )
    .is_ok()
    {
        let r = call(&w, "null", "read", json!({}));
        assert!(matches!(r, Err(HostError::InvalidArgs(_))), "{r:?}");
    }
    drop(sock);
}

#[test]
fn a_failed_write_leaves_no_temporary_file() {
    let w = world();
    fs::create_dir(w.root.join("dir")).unwrap();
    fs::write(w.root.join("dir/x"), "x").unwrap();
    // The rename over a non-empty directory fails after the temporary file was written.
    let r = w.host.atomic_write(&w.root.join("dir"), b"content", None);
    assert!(r.is_err(), "{r:?}");
    let left: Vec<_> = fs::read_dir(&w.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".wip-write-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(fs::read_to_string(w.root.join("dir/x")).unwrap(), "x");
}

#[test]
fn hard_links_are_refused_when_the_settings_ask() {
    let settings = FilesSettings {
        refuse_hard_links: true,
        ..FilesSettings::default()
    };
    let w = world_with(settings, false);
    fs::hard_link(w.outside.join("secret.txt"), w.root.join("linked.txt")).unwrap();
    for (op, args) in [
        ("read", json!({"path": "linked.txt"})),
        ("write", json!({"path": "linked.txt", "content": "x"})),
        (
            "edit",
            json!({"path": "linked.txt", "old_string": "secret", "new_string": "x"}),
        ),
    ] {
        match call(&w, "", op, args) {
            Err(HostError::Forbidden(words)) => assert!(words.contains("hard links"), "{words}"),
            other => panic!("{op}: {other:?}"),
        }
    }
    assert_eq!(
        fs::read_to_string(w.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    // Without the setting a hard link is a file like any other (documented).
    let w = world();
    fs::hard_link(w.outside.join("secret.txt"), w.root.join("linked.txt")).unwrap();
    let text = call(&w, "", "read", json!({"path": "linked.txt"}))
        .unwrap()
        .result;
    assert!(text.contains("secret"), "{text}");
}

#[test]
fn a_symlink_swapped_in_after_the_check_is_not_followed() {
    use crate::host::tree::{Creds, Tree};
    let w = world();
    // The working tree holds `src` (a handle of the folder itself), taken before the swap.
    let held = node(&w, "src").node;
    // The walk resolved `src` as a directory; by the time of the access it is a symlink.
    let physical = w.root.join("src/main.rs");
    fs::rename(w.root.join("src"), w.root.join("src.real")).unwrap();
    symlink(&w.outside, w.root.join("src")).unwrap();
    fs::write(w.outside.join("main.rs"), "OUTSIDE").unwrap();
    let e = w.host.beneath.read_capped(&physical, 100).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    let e = w
        .host
        .beneath
        .write_atomic(&physical, ".t", b"x", None)
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    assert!(w.host.beneath.read_dir(&w.root.join("src")).is_err());
    // Every explicit change acts from a folder opened this way: refused too.
    let e = w.host.beneath.dir(&w.root.join("src")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    // A change through the tree acts on the folder it holds (now `src.real`), never on
    // where the name leads now; a lookup by the name meets the symlink itself.
    let (made, _) = Tree::create(
        &w.host,
        held,
        std::ffi::OsStr::new("new.txt"),
        0o644,
        libc::O_WRONLY,
        Creds::default(),
    )
    .unwrap();
    assert!(w.root.join("src.real/new.txt").exists());
    assert!(!w.outside.join("new.txt").exists());
    Tree::forget(&w.host, made.node, 1);
    assert_eq!(node(&w, "src").stat.kind, crate::host::tree::Kind::Symlink);
    assert_eq!(
        fs::read_to_string(w.outside.join("main.rs")).unwrap(),
        "OUTSIDE"
    );
}

/// The node of `path` in the working tree (a lookup from the root, one reference).
fn node(w: &World, path: &str) -> crate::host::tree::Found {
    use crate::host::tree::Tree;
    let mut found = None;
    let mut dir = Tree::root(&w.host);
    for seg in p(path) {
        let f = Tree::lookup(&w.host, dir, std::ffi::OsStr::new(&seg)).unwrap();
        dir = f.node;
        found = Some(f);
    }
    found.expect("a path below the root")
}

#[test]
fn a_file_is_its_bytes_read_by_offset_with_its_own_attributes() {
    use crate::host::tree::{Kind, Tree};
    use std::os::unix::fs::{FileExt, MetadataExt};
    let w = world();
    let f = node(&w, "bin.dat");
    let meta = fs::metadata(w.root.join("bin.dat")).unwrap();
    assert_eq!(f.stat.kind, Kind::File);
    assert_eq!(
        (f.stat.size, f.stat.ino),
        (4, meta.ino()),
        "the backing file's size and inode"
    );
    assert_eq!(f.stat.mtime, meta.modified().unwrap());
    let file = Tree::open(&w.host, f.node, libc::O_RDONLY).unwrap();
    let mut buf = [0u8; 2];
    assert_eq!(file.read_at(&mut buf, 1).unwrap(), 2);
    assert_eq!(buf, [1, 2]);
    // A folder is a folder, a symlink a symlink (the kernel follows it, never the host).
    assert_eq!(node(&w, "src").stat.kind, Kind::Dir);
    symlink("a.txt", w.root.join("to_a")).unwrap();
    let link = node(&w, "to_a");
    assert_eq!(link.stat.kind, Kind::Symlink);
    assert_eq!(Tree::readlink(&w.host, link.node).unwrap(), "a.txt");
    // The same file by another name is the same node.
    fs::hard_link(w.root.join("a.txt"), w.root.join("hard.txt")).unwrap();
    assert_eq!(node(&w, "hard.txt").node, node(&w, "a.txt").node);
}

#[test]
fn a_read_only_host_refuses_every_change_by_its_own_policy() {
    let w = world_with(
        FilesSettings {
            read_only: true,
            ..FilesSettings::default()
        },
        false,
    );
    for op in [
        "write", "create", "remove", "rename", "mkdir", "chmod", "truncate", "touch",
    ] {
        let d = w.host.policy_default(&p("a.txt"), op).expect("an opinion");
        assert!(!d.allowed && d.words.contains("read-only"), "{op}: {d:?}");
    }
    for op in ["read", "stat", "list"] {
        assert!(w.host.policy_default(&p("a.txt"), op).is_none(), "{op}");
    }
    // Reading goes on.
    assert!(call(&w, "a.txt", "read", json!({})).is_ok());
}

#[test]
fn a_directorys_ops_require_a_path_and_a_files_take_none() {
    let w = world();
    let schema = |path: &str, op: &str| {
        w.host
            .ops(&p(path))
            .unwrap()
            .into_iter()
            .find(|o| o.name == op)
            .unwrap()
            .schema
    };
    assert_eq!(
        schema("src", "write")["required"],
        json!(["path", "content"])
    );
    assert_eq!(schema("src", "read")["properties"]["path"]["minLength"], 1);
    assert!(schema("src", "read")["properties"]["path"]
        .get("default")
        .is_none());
    let file_write = schema("a.txt", "write");
    assert_eq!(file_write["required"], json!(["content"]));
    assert!(file_write["properties"].get("path").is_none());
    assert!(file_write["properties"].get("create_dirs").is_none());
    assert_eq!(
        schema("a.txt", "read")["properties"]["offset"]["minimum"],
        1
    );
    let err = call(&w, "a.txt", "read", json!({"path": "b"})).unwrap_err();
    assert!(matches!(err, HostError::InvalidArgs(_)), "{err:?}");
    let err = call(&w, "src", "read", json!({})).unwrap_err();
    assert_eq!(
        err,
        HostError::InvalidArgs("missing argument `path`".to_string())
    );
    let err = call(&w, "a.txt", "read", json!({"offset": 0})).unwrap_err();
    assert!(
        err.to_string().starts_with("argument offset of read"),
        "{err}"
    );
}
