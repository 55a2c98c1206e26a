//! The command line without a mount: help, advice and errors with words, never a backtrace.

mod common;

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::WIP).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_names_every_command() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for cmd in ["mount", "umount", "call"] {
        assert!(out.contains(cmd), "{out}");
    }
    let (_, out, _) = run(&["mount", "--help"]);
    for flag in ["--manifest", "--state", "--foreground"] {
        assert!(out.contains(flag), "{out}");
    }
}

#[test]
fn a_bad_manifest_is_refused_with_words() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("bad.toml");
    std::fs::write(&manifest, "[[host]]\nkind = \"nope\"\npath = \"x\"\n").unwrap();
    let mnt = dir.path().join("mnt");
    let (code, _, err) = run(&[
        "mount",
        mnt.to_str().unwrap(),
        "-f",
        "--manifest",
        manifest.to_str().unwrap(),
        "--state",
        dir.path().join("state").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown host kind \"nope\""), "{err}");
    assert!(!common::is_mounted(&mnt));
    std::fs::write(&manifest, "[wrld]\n").unwrap();
    let (code, _, err) = run(&[
        "mount",
        mnt.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid manifest"), "{err}");
}

#[test]
fn umount_and_call_outside_a_mount_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(&["umount", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is not mounted"), "{err}");
    let (code, _, err) = run(&["call", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("not an op"), "{err}");
}

#[test]
fn a_normal_user_without_fusermount3_is_told_to_install_fuse3() {
    let has_fusermount = [
        "/usr/bin/fusermount3",
        "/bin/fusermount3",
        "/usr/bin/fusermount",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists());
    if has_fusermount || unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to switch user and a machine without fusermount3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(common::WIP)
        .args(["mount", dir.path().join("m").to_str().unwrap(), "--state"])
        .arg(dir.path().join("state"))
        .env("PATH", "/usr/bin:/bin")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("fuse3") && err.contains("fusermount3"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
