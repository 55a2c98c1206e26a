//! The agents host mounted for real, driven with bash as an agent would, with the scripted
//! agent of tests/agents/echo_agent.py (deterministic; see its header).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::Mount;

const EPERM: i32 = libc::EPERM;
const EIO: i32 = libc::EIO;

fn agent_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/agents/echo_agent.py")
}

/// A world with the scripted agent at `agents/echo`; `wait_ms` is how long ask waits.
fn mount(wait_ms: u64) -> Mount {
    mount_with(wait_ms, "")
}

/// `mount`, with more settings of the agent host (TOML lines).
fn mount_with(wait_ms: u64, settings: &str) -> Mount {
    // The agent runs in the launch directory (the mount's root): it writes its pids there.
    Mount::start(Some(&format!(
        "[[host]]\nkind = \"agent\"\npath = \"agents/echo\"\n\
         command = [\"python3\", {script:?}]\n\
         description = \"Echoes the last message (a scripted agent)\"\n\
         wait_ms = {wait_ms}\nenv = {{ AGENT_PIDS = \"pids\" }}\n{settings}",
        script = agent_script().display().to_string(),
    )))
}

/// The pids the agent wrote (see AGENT_PIDS).
fn pids(m: &Mount) -> Vec<i32> {
    std::fs::read_to_string(m.root.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// `common::wait_until` with the 30 s every wait here allows.
fn wait_until(what: &str, ok: impl FnMut() -> bool) {
    common::wait_until(what, Duration::from_secs(30), ok)
}

fn abs(m: &Mount, rel: &str) -> String {
    m.path(rel).display().to_string()
}

#[test]
fn ask_reply_and_browse_by_path() {
    let m = mount(10_000);
    let root = m.read("agents/echo/description");
    assert!(root.starts_with("Echoes the last message"), "{root}");
    assert!(root.contains("0 conversations"), "{root}");
    m.ok("echo 'hello world' > agents/echo/ops/ask/call");
    let r = m.result("agents/echo/ops/ask");
    assert!(
        r.starts_with("echo: hello world [1 messages: user]\n"),
        "{r}"
    );
    // The conversation's path is printed, absolute, with its description.
    let conv = abs(&m, "agents/echo/conversations/1");
    assert!(
        r.contains(&format!("{conv}\tConversation 1 · done · 2 messages")),
        "{r}"
    );
    assert!(r.contains(&format!("{conv}/messages/2\tagent · echo: hello world")));
    // Discovered, but out of the indexable range: locate does not offer it.
    m.ok("echo 'hello world' > ops/locate/call");
    let found = m.result("ops/locate");
    assert!(!found.contains("conversations"), "{found}");
    // Not listed by the host's root (out of find and grep -r), listed by its own ls.
    let ls = m.ok("ls agents/echo");
    assert!(!ls.contains("conversations"), "{ls}");
    assert_eq!(
        m.ok("ls agents/echo/conversations | grep -v -x -e description -e ref -e ops"),
        "1\n"
    );
    assert!(m
        .ok("find agents")
        .lines()
        .all(|l| !l.contains("conversations")));
    assert_eq!(
        m.read("agents/echo/conversations/1/description"),
        "Conversation 1 · done · 2 messages · \"hello world\"\n"
    );
    assert_eq!(
        m.ok("ls agents/echo/conversations/1/messages | grep -v -x -e description -e ref -e ops"),
        "1\n2\n"
    );
    assert_eq!(
        m.read("agents/echo/conversations/1/messages/2/ref"),
        "agent://agents/echo/conversations/1/messages/2\n"
    );
    // Reply in plain text: the agent sees the whole conversation.
    m.ok("echo 'and again' > agents/echo/conversations/1/ops/reply/call");
    let r = m.result("agents/echo/conversations/1/ops/reply");
    assert!(
        r.starts_with("echo: and again [3 messages: user,agent,user]"),
        "{r}"
    );
    m.ok("echo > agents/echo/conversations/1/messages/4/ops/read_body/call");
    assert_eq!(
        m.result("agents/echo/conversations/1/messages/4/ops/read_body"),
        "echo: and again [3 messages: user,agent,user]\n"
    );
    m.ok("echo > agents/echo/conversations/1/ops/read_body/call");
    let all = m.result("agents/echo/conversations/1/ops/read_body");
    assert_eq!(all.matches("\n--- ").count(), 4, "{all}");
    // A conversation that does not exist is not there.
    assert!(!m.path("agents/echo/conversations/2").exists());
    assert!(m
        .read("agents/echo/description")
        .contains("1 conversation "));
}

#[test]
fn a_slow_answer_says_working_then_wait_returns_it() {
    let m = mount(300);
    // ask returns before the answer: its result says working, not the answer.
    m.ok("echo 'slow 3' > agents/echo/ops/ask/call");
    let r = m.result("agents/echo/ops/ask");
    assert!(r.starts_with("conversation 1 is working"), "{r}");
    assert!(
        r.contains("echo > agents/echo/conversations/1/ops/wait/call"),
        "{r}"
    );
    assert!(r.contains(&abs(&m, "agents/echo/conversations/1")), "{r}");
    assert!(m
        .read("agents/echo/conversations/1/description")
        .contains("· working "));
    // Reply is blocked while working, with the way out; cancel is allowed.
    let g = m.read("agents/echo/conversations/1/ops/reply/guard");
    assert!(
        g.starts_with("blocked\n✗ not_working: conversation 1 is working"),
        "{g}"
    );
    assert_eq!(
        m.call("agents/echo/conversations/1/ops/reply", "more\n"),
        Err(EPERM)
    );
    assert!(m
        .result("agents/echo/conversations/1/ops/reply")
        .starts_with("error: blocked by guard not_working"));
    assert!(m
        .read("agents/echo/conversations/1/ops/cancel/guard")
        .starts_with("allowed\n"));
    // wait blocks until the answer is there.
    m.ok("echo > agents/echo/conversations/1/ops/wait/call");
    let r = m.result("agents/echo/conversations/1/ops/wait");
    assert!(r.starts_with("echo: slow 3 [1 messages: user]"), "{r}");
    assert!(m
        .read("agents/echo/conversations/1/description")
        .contains("· done · 2 messages"));
    assert!(m
        .read("agents/echo/conversations/1/ops/cancel/guard")
        .starts_with("blocked\n✗ working: conversation 1 is done"));
    assert_eq!(
        m.call("agents/echo/conversations/1/ops/cancel", "\n"),
        Err(EPERM)
    );
    assert!(m
        .read("agents/echo/conversations/1/ops/reply/guard")
        .starts_with("allowed\n"));
}

#[test]
fn a_background_answer_shows_in_the_change_feed() {
    let m = mount(200);
    m.ok("echo 'slow 1' > agents/echo/ops/ask/call");
    assert!(m.result("agents/echo/ops/ask").contains("working"));
    // Nobody waits: the description turns done on its own, and the feed says so.
    wait_until("conversation done", || {
        m.read("agents/echo/conversations/1/description")
            .contains("· done ·")
    });
    wait_until("the feed shows the answer", || {
        m.read(".wip/events")
            .contains("\"kind\":\"changed\",\"path\":\"/agents/echo/conversations/1/messages/2\"")
    });
    let events = m.read(".wip/events");
    assert!(
        events.contains("\"kind\":\"changed\",\"path\":\"/agents/echo/conversations/1\""),
        "{events}"
    );
    assert_eq!(
        m.ok("ls agents/echo/conversations/1/messages | grep -v -x -e description -e ref -e ops"),
        "1\n2\n"
    );
}

#[test]
fn cancel_stops_the_agent_and_everything_it_started() {
    let m = mount(300);
    m.ok("echo 'slow 60' > agents/echo/ops/ask/call");
    wait_until("agent and sleeper started", || pids(&m).len() >= 2);
    let procs = pids(&m);
    assert!(procs.iter().all(|&p| alive(p)), "{procs:?}");
    // cancel returns once the turn has ended (not after the agent's 60 s): the agent is
    // gone when it returns, what it started dies of the SIGKILL sent to its group then,
    // and the conversation says cancelled, not done.
    m.ok("echo > agents/echo/conversations/1/ops/cancel/call");
    let r = m.result("agents/echo/conversations/1/ops/cancel");
    assert!(r.starts_with("cancelled conversation 1"), "{r}");
    assert!(
        !alive(procs[0]),
        "the agent {} survived the cancel",
        procs[0]
    );
    wait_until("what the agent started is gone", || !alive(procs[1]));
    let d = m.read("agents/echo/conversations/1/description");
    assert!(
        d.contains("· cancelled: stopped by a call of cancel ·"),
        "{d}"
    );
    // wait has no answer to give: ECANCELED in words, as a cancelled run's wait is.
    assert_eq!(
        m.call("agents/echo/conversations/1/ops/wait", "\n"),
        Err(libc::ECANCELED)
    );
    assert!(m
        .result("agents/echo/conversations/1/ops/wait")
        .contains("was cancelled"));
    assert_eq!(
        m.call("agents/echo/conversations/1/ops/cancel", "\n"),
        Err(EPERM)
    );
}

#[test]
fn a_failing_agent_fails_the_ask_with_its_words() {
    let m = mount(10_000);
    assert_eq!(m.call("agents/echo/ops/ask", "fail\n"), Err(EIO));
    let r = m.result("agents/echo/ops/ask");
    assert!(
        r.starts_with("error: the agent failed: exit status 1: "),
        "{r}"
    );
    assert!(r.contains("something broke: no model named fail"), "{r}");
    assert!(r.contains("agents/echo/conversations/1 is kept"), "{r}");
    let d = m.read("agents/echo/conversations/1/description");
    assert!(d.contains("· failed: exit status 1: "), "{d}");
    assert!(d.contains("something broke"), "{d}");
    // A text document runs at the last close: /bin/echo sees the failure there (bash's
    // builtin echo ignores close errors), the JSON form already in the write.
    let out = m.sh("/bin/echo fail > agents/echo/conversations/1/ops/reply/call");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Input/output error"));
    let out = m.sh(r#"echo '{"message":"fail"}' > agents/echo/conversations/1/ops/reply/call"#);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Input/output error"));
    assert!(m
        .read("agents/echo/conversations/1/description")
        .contains("· 3 messages ·"));
}

#[test]
fn conversations_persist_and_a_cut_turn_shows_interrupted() {
    let mut m = mount(300);
    m.ok("echo 'keep me' > agents/echo/ops/ask/call");
    wait_until("first answer", || {
        m.read("agents/echo/conversations/1/description")
            .contains("· done ·")
    });
    m.ok("echo 'slow 60' > agents/echo/ops/ask/call");
    wait_until("slow agent started", || pids(&m).len() >= 3);
    // A clean stop ends the agent and everything it started.
    m.unmount();
    wait_until("agents gone with a clean stop", || {
        pids(&m).iter().all(|&p| !alive(p))
    });
    m.remount();
    assert_eq!(
        m.ok("ls agents/echo/conversations | grep -v -x -e description -e ref -e ops"),
        "1\n2\n"
    );
    assert!(m
        .read("agents/echo/conversations/1/description")
        .contains("· done · 2 messages"));
    let d = m.read("agents/echo/conversations/2/description");
    assert!(
        d.contains("· interrupted: the daemon stopped while the agent was answering ·"),
        "{d}"
    );
    m.ok("echo > agents/echo/conversations/1/messages/2/ops/read_body/call");
    assert_eq!(
        m.result("agents/echo/conversations/1/messages/2/ops/read_body"),
        "echo: keep me [1 messages: user]\n"
    );
    // A crash of the daemon while the agent answers: the agent dies with it, and the
    // turn shows interrupted at the next mount.
    m.ok("echo 'slow 60' > agents/echo/conversations/2/ops/reply/call");
    wait_until("second slow agent started", || pids(&m).len() >= 5);
    let (agent, sleeper) = (pids(&m)[3], pids(&m)[4]);
    m.kill_daemon();
    let out = common::wip_command()
        .arg("umount")
        .arg(&m.mount)
        .output()
        .unwrap();
    assert!(out.status.success());
    wait_until("the agent gone with the daemon", || !alive(agent));
    // What the agent started itself is not ours to find after a crash (see SEMANTICS).
    unsafe { libc::kill(sleeper, libc::SIGKILL) };
    m.remount();
    let d = m.read("agents/echo/conversations/2/description");
    assert!(
        d.contains("· interrupted: ") && d.contains("· 2 messages ·"),
        "{d}"
    );
    // Taken up again after the interruptions.
    m.ok("echo 'go on' > agents/echo/conversations/2/ops/reply/call");
    m.ok("echo > agents/echo/conversations/2/ops/wait/call");
    assert!(m
        .result("agents/echo/conversations/2/ops/wait")
        .starts_with("echo: go on [3 messages: user,user,user]"));
    assert!(m.path("agents/echo/conversations/2/messages/4").exists());
}

/// Reads have no side effects: walking an agent world and reading every file, the
/// conversations and (following the `ops` links) every op's files too, starts no agent and
/// runs no op.
#[test]
fn reading_every_file_of_an_agent_world_starts_no_agent_and_runs_nothing() {
    let m = mount(10_000);
    m.ok("echo 'hello' > agents/echo/ops/ask/call");
    let agents_started = pids(&m);
    assert_eq!(agents_started.len(), 1);
    let calls = m.journal_count();
    let conv = m.read("agents/echo/conversations/1/description");
    let out = m.sh(
        "find -L agents agents/echo/conversations -maxdepth 7 -type f -print0 \
         | xargs -0 cat > /dev/null 2>&1; \
         find -L agents/echo/conversations -maxdepth 7 -type f | wc -l",
    );
    let files: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(files >= 40, "the walk read {files} files");
    assert_eq!(pids(&m), agents_started, "a read started the agent");
    assert_eq!(m.journal_count(), calls, "a read ran an op");
    assert_eq!(m.read("agents/echo/conversations/1/description"), conv);
    assert_eq!(
        m.ok("ls agents/echo/conversations | grep -v -x -e description -e ref -e ops"),
        "1\n"
    );
}

/// Names listed in directory order (`ls -U`), without an entry's own files.
fn listed(m: &Mount, dir: &str) -> Vec<String> {
    m.ok(&format!(
        "ls -U {dir} | grep -v -x -e description -e ref -e ops"
    ))
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn conversations_and_messages_past_a_page_are_reached_by_path() {
    let m = mount_with(10_000, "page_size = 3\n");
    for i in 1..=5 {
        m.ok(&format!("echo 'hi {i}' > agents/echo/ops/ask/call"));
    }
    // The newest page, newest first; the description says how many and how to reach all.
    assert_eq!(listed(&m, "agents/echo/conversations"), ["5", "4", "3"]);
    assert_eq!(
        m.read("agents/echo/conversations/description"),
        "5 conversations of this agent, newest first (ls shows the newest 3; any is reachable \
         as conversations/ID) · start one with agents/echo/ops/ask/call\n"
    );
    assert_eq!(
        m.read("agents/echo/conversations/1/description"),
        "Conversation 1 · done · 2 messages · \"hi 1\"\n"
    );
    assert!(!m.path("agents/echo/conversations/6").exists());
    // Messages past a page: the newest 3 are listed (in order), the first by path.
    for i in 1..=2 {
        m.ok(&format!(
            "echo 'again {i}' > agents/echo/conversations/1/ops/reply/call"
        ));
    }
    let messages = "agents/echo/conversations/1/messages";
    assert_eq!(listed(&m, messages), ["4", "5", "6"]);
    assert!(m
        .read(&format!("{messages}/description"))
        .starts_with("6 messages of conversation 1, oldest first: messages/1 … messages/6"));
    assert_eq!(
        m.read(&format!("{messages}/1/ref")),
        "agent://agents/echo/conversations/1/messages/1\n"
    );
    m.ok(&format!("echo > {messages}/1/ops/read_body/call"));
    assert_eq!(m.result(&format!("{messages}/1/ops/read_body")), "hi 1\n");
}

/// By default a turn is a run like any other: `ask` waits for the answer, past the world's
/// call_timeout_ms its caller hears ETIMEDOUT naming the run, the run's progress is the
/// agent's status, the run's `wait` returns the answer and its `cancel` stops the agent.
#[test]
fn a_turn_is_a_run_to_wait_on_and_cancel() {
    let m = Mount::start(Some(&format!(
        "[world]\ncall_timeout_ms = 2000\n\
         [[host]]\nkind = \"agent\"\npath = \"agents/echo\"\n\
         command = [\"python3\", {script:?}]\nenv = {{ AGENT_PIDS = \"pids\" }}\n",
        script = agent_script().display().to_string(),
    )));
    // A quick answer is the call's result, no "working".
    m.ok("echo hello > agents/echo/ops/ask/call");
    assert!(m
        .result("agents/echo/ops/ask")
        .starts_with("echo: hello [1 messages: user]"));
    // A turn of 3 s outlives the caller's 2 s: ETIMEDOUT, the run goes on.
    assert_eq!(
        m.call("agents/echo/ops/ask", "slow 3\n"),
        Err(libc::ETIMEDOUT)
    );
    let run = "agents/echo/ops/ask/runs/2";
    assert!(m
        .result("agents/echo/ops/ask")
        .contains(&format!("{run}/ops/wait/call")));
    let p = m.read(&format!("{run}/progress"));
    assert!(p.starts_with("conversation 2: "), "{p}");
    let out = m.ok(&format!(
        "until echo > {run}/ops/wait/call 2>/dev/null; do :; done; cat {run}/ops/wait/result"
    ));
    assert!(out.starts_with("echo: slow 3 [1 messages: user]"), "{out}");
    // A long one, cancelled through its run from another session: the agent stops.
    assert_eq!(
        m.call("agents/echo/ops/ask", "slow 60\n"),
        Err(libc::ETIMEDOUT)
    );
    let run = "agents/echo/ops/ask/runs/3";
    let out = m.ok(&format!(
        "setsid bash -c 'echo > {run}/ops/cancel/call && cat {run}/ops/cancel/result'"
    ));
    assert!(out.starts_with("run 3 was cancelled: "), "{out}");
    assert_eq!(m.read(&format!("{run}/status")), "cancelled\n");
    let d = m.read("agents/echo/conversations/3/description");
    assert!(
        d.contains("· cancelled: stopped by a call of cancel ·"),
        "{d}"
    );
    let agent = pids(&m).into_iter().rev().nth(1).unwrap();
    assert!(!alive(agent), "the agent {agent} survived the cancel");
}

/// An agent starts with no signal blocked, and a process it detaches (`setsid`, its own
/// session) does not outlive the unmount.
#[test]
fn an_agent_starts_with_plain_signals_and_what_it_detaches_ends_at_unmount() {
    let mut strays = common::Strays::default();
    let mut m = mount(10_000);
    m.ok("echo detach > agents/echo/ops/ask/call");
    let r = m.result("agents/echo/ops/ask");
    let grandchild = common::number_after(&r, "grandchild");
    strays.watch(grandchild);
    assert_eq!(common::status_field(&r, "SigBlk:"), 0, "{r}");
    // Python ignores SIGPIPE and SIGXFSZ itself; none of the stop signals is ignored.
    assert_eq!(
        common::status_field(&r, "SigIgn:") & common::STOP_SIGNALS,
        0,
        "{r}"
    );
    assert!(common::alive(grandchild), "{r}");
    m.unmount();
    let left = strays.gone_within(Duration::from_secs(10));
    assert!(left.is_empty(), "still running after the unmount: {left:?}");
}
