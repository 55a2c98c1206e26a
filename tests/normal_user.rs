//! Mounting as a normal user (uid 65534 through setpriv), inside a private mount namespace
//! so that nothing it mounts can outlive the test: through fusermount3, and, when
//! `/dev/fuse` is closed to the user, with fusermount3's own words instead of a wrong hint.

mod common;

use std::time::Duration;

/// A directory the unprivileged user owns, with a copy of the binary it can run.
fn sandbox() -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix("wip-user-")
        .tempdir()
        .unwrap();
    let d = dir.path().display().to_string();
    let out = common::sh_in(
        dir.path(),
        &format!(
            "set -e; chmod 755 {d}; mkdir mnt state root; echo hi > root/a.txt; \
             cp \"$WIP\" {d}/wip; chmod 755 {d}/wip; chown -R 65534:65534 mnt state root"
        ),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{out:?}");
    (dir, d)
}

#[test]
fn a_normal_user_mounts_reads_and_unmounts() {
    let (dir, d) = sandbox();
    let out = common::sh_in(
        dir.path(),
        &format!(
            "timeout 90 unshare -m --propagation private bash -c '
              cd {d}/root
              setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={d} bash -c \"
                {d}/wip mount --state {d}/state {d}/mnt >/dev/null &&
                cat {d}/mnt/files/a.txt && {d}/wip umount {d}/mnt\"
              grep -c \" {d}/mnt \" /proc/self/mountinfo || true'"
        ),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout, "hi\n0\n", "read, then unmounted: {out:?}");
}

#[test]
fn a_closed_dev_fuse_is_reported_in_fusermount3_words() {
    let (dir, d) = sandbox();
    let out = common::sh_in(
        dir.path(),
        &format!(
            "timeout 90 unshare -m --propagation private bash -c '
              mknod {d}/fuse c 10 229 && chmod 600 {d}/fuse && mount --bind {d}/fuse /dev/fuse
              cd {d}/root
              setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={d} \
                {d}/wip mount -f --state {d}/state {d}/mnt'"
        ),
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("fusermount3"), "{stderr}");
    assert!(stderr.contains("/dev/fuse"), "{stderr}");
    assert!(
        !stderr.contains("needs fusermount3"),
        "a wrong hint: {stderr}"
    );
}

/// Only the mounting user reaches the mount (another user and root are refused, as FUSE
/// does without allow_other); with `user_allow_other` in fuse.conf (bound over
/// /etc/fuse.conf inside the test's namespace only) and `-o allow_other`, others get in.
/// Without `--state`, the state lives in `$XDG_STATE_HOME/wip`.
#[test]
fn only_the_mounting_user_reaches_a_mount_unless_allow_other_and_state_is_under_xdg() {
    let (dir, d) = sandbox();
    let out = common::sh_in(
        dir.path(),
        &format!(
            "timeout 90 unshare -m --propagation private bash -c '
              printf \"user_allow_other\\n\" > {d}/fuse.conf && mount --bind {d}/fuse.conf /etc/fuse.conf
              mkdir -p {d}/xdg && chown 65534:65534 {d}/xdg
              cd {d}/root
              as() {{ setpriv --reuid=$1 --regid=$1 --clear-groups env HOME={d} XDG_STATE_HOME={d}/xdg bash -c \"$2\"; }}
              as 65534 \"{d}/wip mount {d}/mnt >/dev/null\" || exit 3
              as 65534 \"cat {d}/mnt/files/a.txt\" && echo owner-reads
              as 65533 \"ls {d}/mnt\" 2>/dev/null || echo other-refused
              ls {d}/mnt 2>/dev/null || echo root-refused
              test -s {d}/xdg/wip/journal.db && echo state-under-xdg
              as 65534 \"{d}/wip umount {d}/mnt\"
              as 65534 \"{d}/wip mount --state {d}/state -o allow_other {d}/mnt >/dev/null\" || exit 4
              as 65533 \"cat {d}/mnt/files/a.txt\" && echo other-reads
              as 65534 \"{d}/wip umount {d}/mnt\"
              grep -c \" {d}/mnt \" /proc/self/mountinfo || true'"
        ),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout,
        "hi\nowner-reads\nother-refused\nroot-refused\nstate-under-xdg\nhi\nother-reads\n0\n",
        "{out:?}"
    );
}

/// A daemon that is not root cannot give another uid a control socket of its own: a policy
/// naming another approver is refused at mount time, in words, and nothing is mounted.
#[test]
fn a_normal_users_daemon_refuses_a_policy_naming_other_approvers() {
    let (dir, d) = sandbox();
    std::fs::write(
        dir.path().join("m.toml"),
        "[[host]]\nkind = \"tracker\"\npath = \"tracker\"\n\
         [[policy]]\nmatch = \"tracker/issues/*/ops/comment\"\naction = \"approve\"\napprovers = [0]\n",
    )
    .unwrap();
    let out = common::sh_in(
        dir.path(),
        &format!(
            "chmod 644 {d}/m.toml; timeout 90 unshare -m --propagation private bash -c '
              cd {d}/root
              setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={d} \
                {d}/wip mount --manifest {d}/m.toml --state {d}/state {d}/mnt; echo rc=$?
              grep -c \" {d}/mnt \" /proc/self/mountinfo || true'"
        ),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("rc=1") && stdout.ends_with("0\n"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains("uid 0") && stderr.contains("run the daemon as root"),
        "{stderr}"
    );
}

/// A normal user's mount keeps before-images in its own state directory and undoes a
/// removal of a read-only file (made again through the descriptor that creates it).
#[test]
fn a_normal_user_undoes_the_removal_of_a_read_only_file() {
    let (dir, d) = sandbox();
    let out = common::sh_in(
        dir.path(),
        &format!(
            "timeout 90 unshare -m --propagation private bash -c '
              cd {d}/root
              setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={d} bash -c \"
                set -e
                {d}/wip mount --state {d}/state {d}/mnt >/dev/null
                cd {d}/mnt
                chmod 444 files/a.txt && rm -f files/a.txt
                echo > files@/paths/a.txt/ops/remove/runs/1/ops/undo/call
                cat files/a.txt; stat -c %a files/a.txt
                {d}/wip diff files | grep -c . || true
                cd / && {d}/wip umount {d}/mnt\"'"
        ),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.starts_with("hi\n444\n"), "{out:?}");
}
