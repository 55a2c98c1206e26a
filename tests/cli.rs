//! The command line without a mount: help, advice and errors with words, never a backtrace.

mod common;

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = common::wip_command().args(args).output().unwrap();
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
    let state = dir.path().join("state2");
    let (code, _, err) = run(&[
        "mount",
        mnt.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!("wip: invalid manifest {}: ", manifest.display())),
        "{err}"
    );
    assert!(err.contains("unknown field `wrld`"), "{err}");
    assert!(!common::is_mounted(&mnt));
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

/// wip finds `fusermount3` on PATH, so a PATH without it is a machine without it, whether
/// or not fuse3 is installed here. As root the test becomes a normal user (nobody) first.
#[test]
fn a_normal_user_without_fusermount3_is_told_to_install_fuse3() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let empty_path = dir.path().join("bin");
    std::fs::create_dir(&empty_path).unwrap();
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        // Found on our PATH: the child's PATH has nothing in it.
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("setpriv (Debian's util-linux) switches to a normal user for this test");
        let mut c = Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(common::WIP);
        c
    } else {
        Command::new(common::WIP)
    };
    common::scrub_env(&mut cmd);
    let out = cmd
        .args(["mount", dir.path().join("m").to_str().unwrap(), "--state"])
        .arg(dir.path().join("state"))
        .env("PATH", &empty_path)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "wip: mounting as a normal user needs fusermount3, which is not installed; \
         install Debian's fuse3 package (sudo apt-get install fuse3) or run wip as root"
    );
    assert!(!common::is_mounted(&dir.path().join("m")));
}
