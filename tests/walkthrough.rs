//! The agent walkthrough (bash, ls, cat, echo only) runs as part of the test suite.

mod common;

use std::time::Duration;

#[test]
fn agent_walkthrough_merges_the_fix_for_the_crash_issue() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = common::sh_in(
        repo,
        "bash scripts/agent-walkthrough.sh",
        Duration::from_secs(180),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "walkthrough failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("walkthrough ok"), "{stdout}");
}
