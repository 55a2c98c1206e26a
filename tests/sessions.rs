//! A caller's `result` and its right to cancel its runs belong to its terminal session,
//! and a session is its number with when it began and its uid: the kernel hands an ended
//! session's number out again, and the process that gets it is another session.
//!
//! The daemon and every caller run in a pid namespace of their own (tests/common's
//! `sh_in_namespaces`), where the test sets the next pid (`ns_last_pid`) and so gives a
//! process of uid 1001 the number of root's ended session at once, as forking tens of
//! thousands of times would.

mod common;

use std::path::PathBuf;
use std::time::Duration;

fn misbehave_py() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/hosts/misbehave.py")
        .display()
        .to_string()
}

/// The script, in the namespace: mount (others may enter), then the sessions take turns.
/// Each step's output lands in a file of `$D` (read by the test afterwards).
const SCRIPT: &str = r#"
set -u
M=$D/mnt
S=$M/slow/ops/slow
as() { uid=$1; shift; setpriv --reuid=$uid --regid=$uid --clear-groups "$@"; }
cd $D/root
WIP_LOG=warn "$WIP" mount $M -f --state $D/state --manifest $D/m.toml -o allow_other 2> $D/daemon.log &
for i in $(seq 1500); do grep -q " $M " /proc/self/mountinfo && break; sleep 0.02; done
grep -q " $M " /proc/self/mountinfo || { echo "not mounted"; cat $D/daemon.log; exit 2; }
for i in $(seq 500); do grep -q starting $M/slow/description || break; sleep 0.02; done

# Root's session: its call outlives the caller's wait and goes on as run 1; it reads its
# result and ends.
setsid bash -c "echo \$\$ > $D/victim.sid
  echo '{\"steps\":600,\"ms\":100}' > $S/call 2> /dev/null
  cat $S/result > $D/victim.result"
# Another session of root calls after it: root's latest is run 2.
setsid bash -c "echo '{\"steps\":1,\"ms\":1}' > $S/call"
victim=$(cat $D/victim.sid)

# The next process gets the ended session's number: uid 1001 starts a session there (again
# if a thread of the daemon took the number first).
for try in 1 2 3 4 5; do
  echo $((victim - 1)) > /proc/sys/kernel/ns_last_pid
  as 1001 setsid bash -c "[ \$\$ = $victim ] || exit 7
    echo \$\$ > $D/attacker.sid
    cat $S/result > $D/attacker.result
    echo > $S/runs/1/ops/cancel/call 2> $D/attacker.cancel.err; echo \$? > $D/attacker.cancel.rc
    cat $S/runs/1/ops/cancel/result > $D/attacker.cancel
    exit 0" && break
done
cat $S/runs/1/status > $D/after-attack.status

# uid 1001 in a session of its own, with no call: nobody's result either.
as 1001 setsid bash -c "cat $S/result > $D/stranger.result"

# uid 1002: a member of a session calls while its leader lives, then the leader leaves;
# the member (and a process it starts later) still reads its result and cancels its run.
as 1002 setsid bash -c "( echo '{\"steps\":600,\"ms\":100}' > $S/call 2> /dev/null
    while [ ! -e $D/leader-gone ]; do sleep 0.02; done
    cat $S/result > $D/member.result
    echo > $S/runs/3/ops/cancel/call; cat $S/runs/3/ops/cancel/result > $D/member.cancel
    touch $D/member-done ) &
  for i in \$(seq 500); do [ -e $S/runs/3 ] && break; sleep 0.02; done"
touch $D/leader-gone
for i in $(seq 500); do [ -e $D/member-done ] && break; sleep 0.02; done

"$WIP" umount $M
"#;

fn read(dir: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| format!("<no {name}: {e}>"))
}

#[test]
fn a_session_given_an_ended_sessions_number_neither_reads_its_result_nor_cancels_its_run() {
    let dir = tempfile::Builder::new()
        .prefix("wip-sessions-")
        .tempdir()
        .unwrap();
    let d = dir.path();
    for sub in ["mnt", "root", "state"] {
        std::fs::create_dir(d.join(sub)).unwrap();
    }
    std::fs::write(
        d.join("m.toml"),
        format!(
            "[world]\ncall_timeout_ms = 1000\n\
             [[host]]\nkind = \"exec\"\npath = \"slow\"\n\
             command = [\"python3\", {:?}, \"crash\"]\n",
            misbehave_py()
        ),
    )
    .unwrap();
    // Other users write their findings here and walk to the mount.
    let out = common::sh_in(d, "chmod 1777 . && chmod 755 mnt", Duration::from_secs(10));
    assert!(out.status.success(), "{out:?}");
    let out = common::sh_in_namespaces(
        d,
        &format!("D={}\n{SCRIPT}", d.display()),
        Duration::from_secs(180),
    );
    let report = format!("{out:?}\ndaemon log:\n{}", read(d, "daemon.log"));
    assert!(out.status.success(), "{report}");
    assert_eq!(
        read(d, "attacker.sid"),
        read(d, "victim.sid"),
        "the ended session's number was handed out again: {report}"
    );
    let victim = read(d, "victim.result");
    assert!(victim.contains("/slow/ops/slow/runs/1"), "{victim}");

    // The new session of that number is not the old one: no result of root's, no cancel.
    assert_eq!(read(d, "attacker.result"), "", "{report}");
    assert_eq!(read(d, "attacker.cancel.rc"), "1\n", "{report}");
    assert!(
        read(d, "attacker.cancel.err").contains("Operation not permitted"),
        "{report}"
    );
    let refused = read(d, "attacker.cancel");
    assert!(
        refused.contains("blocked by guard caller") && refused.contains("not to this one"),
        "{refused}"
    );
    assert_eq!(read(d, "after-attack.status"), "running\n", "{report}");
    // Nor does another session of that uid read root's latest.
    assert_eq!(read(d, "stranger.result"), "", "{report}");

    // A member that outlived its leader keeps its session's result and rights.
    let member = read(d, "member.result");
    assert!(
        member.contains("/slow/ops/slow/runs/3"),
        "{member}\n{report}"
    );
    let cancelled = read(d, "member.cancel");
    assert!(
        cancelled.starts_with("run 3 was cancelled: "),
        "{cancelled}\n{report}"
    );
}
