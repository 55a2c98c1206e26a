//! What people meet: titled names in a shell and in mc, `mount -t fuse.wip` and fstab,
//! `wip status`, `wip completions`, `wip --version`, and `wip mount` waiting for hosts
//! that start in the background.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{is_mounted, sh_in, wip_command, Background, Mount};

const ISSUE_42: &str = "42 Crash when config is missing";

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn titled_names_list_titles_and_the_bare_number_is_the_same_object() {
    let m = Mount::start_with_args(None, &["--titled"]);
    let issues = m.ok("ls tracker/issues | grep -vx 'description\\|ref\\|ops'");
    assert!(issues.lines().any(|l| l == ISSUE_42), "{issues}");
    assert_eq!(issues.lines().count(), 48, "{issues}");
    for name in issues.lines() {
        let (n, title) = name.split_once(' ').unwrap_or_else(|| panic!("{name:?}"));
        assert!(n.parse::<u32>().is_ok() && !title.is_empty(), "{name:?}");
        assert!(name.len() <= 62, "{name:?} is {} bytes", name.len());
    }
    let pulls = m.ok("ls tracker/pulls");
    assert!(
        pulls
            .lines()
            .any(|l| l == "50 Fix crash when config is missing"),
        "{pulls}"
    );
    // Same ref, description and ops by both names; `find` walks titled names.
    m.ok(&format!(
        "cd tracker/issues && test \"$(cat '{ISSUE_42}/ref')\" = tracker://demo/issues/42 \
         && diff '{ISSUE_42}/description' 42/description \
         && diff <(ls '{ISSUE_42}/ops') <(ls 42/ops) \
         && test -d 42 && test \"$(find . -mindepth 1 -maxdepth 1 -name '[0-9]*' | wc -l)\" = 48"
    ));
    // A title that is not the issue's names nothing.
    let out = m.sh("ls 'tracker/issues/42 Crash when config is absent'");
    assert!(!out.status.success(), "{}", text(&out));
    // A call through the titled name acts on the object, seen by its bare name too.
    m.ok(&format!(
        "cd 'tracker/issues/{ISSUE_42}' && echo 'seen in a file manager' > ops/comment/call"
    ));
    let comments = m.ok("for c in tracker/issues/42/comments/*/description; do cat \"$c\"; done");
    assert!(comments.contains("seen in a file manager"), "{comments}");
    // Results and discovered/ links print canonical (bare) paths.
    m.ok("echo state=all > tracker/labels/bug/ops/issues/call");
    let result = m.result("tracker/labels/bug/ops/issues");
    let paths: Vec<&str> = result
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(p, _)| p))
        .collect();
    assert!(!paths.is_empty(), "{result}");
    let prefix = format!("{}/tracker/", m.mount.display());
    for p in &paths {
        let rest = p.strip_prefix(&prefix).unwrap_or_else(|| panic!("{p}"));
        let (kind, n) = rest.split_once('/').unwrap_or_else(|| panic!("{p}"));
        assert!(
            ["issues", "pulls"].contains(&kind) && n.parse::<u32>().is_ok(),
            "not canonical: {p}"
        );
    }
    let link =
        m.ok("cd tracker/labels/bug/ops/issues/runs && readlink \"$(ls | tail -1)/discovered/1\"");
    let target = link.trim().rsplit("tracker/").next().unwrap_or_default();
    assert!(
        paths[0].ends_with(&format!("tracker/{target}")),
        "{link} vs {}",
        paths[0]
    );
    let known = m.read(".wip/known");
    assert!(known.contains("/tracker/issues/42\t"), "{known}");
    assert!(!known.contains(&format!("/{ISSUE_42}")), "{known}");
    assert!(m.read(".wip/status").contains("titled names: on"));
    assert!(m.read("README.md").contains("Titled names are on"));
}

#[test]
fn titled_names_are_off_by_default_and_on_from_the_manifest() {
    let plain = Mount::start(None);
    let issues = plain.ok("ls tracker/issues | grep -vx 'description\\|ref\\|ops'");
    assert!(issues.lines().all(|l| l.parse::<u32>().is_ok()), "{issues}");
    let out = plain.sh(&format!("ls 'tracker/issues/{ISSUE_42}'"));
    assert!(!out.status.success(), "{}", text(&out));
    drop(plain);

    let agent = repo().join("tests/agents/echo_agent.py");
    let m = Mount::start(Some(&format!(
        "[world]\ntitled = true\n\
         [[host]]\nkind = \"tracker\"\npath = \"/tracker\"\n\
         [[host]]\nkind = \"db\"\npath = \"db/tracker\"\nfile = \"{{state}}/tracker-tracker.db\"\n\
         titles = {{ items = \"title\" }}\n\
         [[host]]\nkind = \"agent\"\npath = \"agents/echo\"\ncommand = [\"python3\", {agent:?}]\n",
        agent = agent.display().to_string()
    )));
    // db rows by the manifest's title column.
    let rows = m.ok("ls db/tracker/tables/items/rows");
    assert!(rows.lines().any(|l| l == ISSUE_42), "{rows}");
    m.ok(&format!(
        "cd db/tracker/tables/items/rows && diff '{ISSUE_42}/ref' 42/ref && diff '{ISSUE_42}/description' 42/description"
    ));
    // Other tables have no title column: bare keys.
    let labels = m.ok("ls db/tracker/tables/labels/rows");
    assert_eq!(labels, m.ok("ls tracker/labels"));
    // Conversations by their first question.
    m.ok("echo 'how do I count lines' > agents/echo/ops/ask/call");
    let conversations = m.ok("ls agents/echo/conversations");
    assert!(
        conversations.lines().any(|l| l == "1 how do I count lines"),
        "{conversations}"
    );
    let result = m.result("agents/echo/ops/ask");
    assert!(
        result.contains(&format!(
            "{}/agents/echo/conversations/1\t",
            m.mount.display()
        )),
        "{result}"
    );
}

/// A directory holding only a `wip` link to the binary under test, for mount(8), which
/// runs helpers with a fixed PATH (/usr/local/sbin first).
fn bin_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("wip-bin-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::symlink(common::WIP, dir.path().join("wip")).unwrap();
    dir
}

/// Run `script` in a mount namespace of its own, where `bin` is /usr/local/sbin and
/// `fstab` is /etc/fstab: mount(8) finds the wip under test, and nothing of the machine
/// changes. Every mount the script makes is gone with it (it unmounts on exit).
fn in_own_namespace(bin: &Path, fstab: &Path, script: &str) -> Output {
    for tool in ["unshare", "mount"] {
        assert!(
            Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {tool}"))
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            "{tool} is needed (util-linux)"
        );
    }
    assert!(
        Path::new("/sbin/mount.fuse3").exists(),
        "mount -t fuse.wip needs mount.fuse3 (Debian's fuse3 package; .ci/run installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("script.sh");
    std::fs::write(
        &file,
        format!(
            "set -e\nmount --bind '{}' /usr/local/sbin\nmount --bind '{}' /etc/fstab\n{script}\n",
            bin.display(),
            fstab.display()
        ),
    )
    .unwrap();
    sh_in(
        dir.path(),
        &format!(
            "exec unshare --mount --propagation private bash '{}'",
            file.display()
        ),
        Duration::from_secs(120),
    )
}

#[test]
fn mount_t_fuse_wip_and_an_fstab_line_mount_a_world() {
    let bin = bin_dir();
    let tmp = tempfile::tempdir().unwrap();
    let by_type = tmp.path().join("world");
    let by_fstab = tmp.path().join("fstab world");
    let state = tmp.path().join("state");
    let state2 = tmp.path().join("state2");
    std::fs::create_dir_all(&by_type).unwrap();
    std::fs::create_dir_all(&by_fstab).unwrap();
    // The people-facing example manifest, which turns titled names on by itself.
    let manifest = repo().join("mounts/desktop.toml");
    let fstab = tmp.path().join("fstab");
    // fstab escapes the space as \040; the source is a manifest path.
    std::fs::write(
        &fstab,
        format!(
            "{} {} fuse.wip state={},noauto,nofail,_netdev,x-systemd.automount 0 0\n",
            manifest.display(),
            by_fstab.display().to_string().replace(' ', "\\040"),
            state2.display()
        ),
    )
    .unwrap();
    let out = in_own_namespace(
        bin.path(),
        &fstab,
        &format!(
            r#"trap 'umount -l "{t}" 2>/dev/null || true; umount -l "{f}" 2>/dev/null || true' EXIT
mount -t fuse.wip default "{t}" -o state="{s}",titled
ls "{t}/tracker/issues" | grep -qx '{ISSUE_42}'
test -f "{s}/journal.db"
grep " {t} " /proc/self/mountinfo | grep -q fuse
umount "{t}"
! grep -q " {t} " /proc/self/mountinfo
mount "{f}"
ls "{f}/tracker/pulls" | grep -qx '50 Fix crash when config is missing'
ls "{f}/db/tracker/tables/items/rows" | grep -qx '{ISSUE_42}'
test -f "{s2}/journal.db"
umount "{f}"
! grep -q "fstab\\\\040world" /proc/self/mountinfo
if mount -t fuse.wip default "{t}" -o state="{s}",bogus 2> "{s}/err"; then exit 9; fi
grep -q 'unknown mount option "bogus"' "{s}/err"
echo done"#,
            t = by_type.display(),
            f = by_fstab.display(),
            s = state.display(),
            s2 = state2.display(),
        ),
    );
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("done"),
        "{}",
        text(&out)
    );
    assert!(!is_mounted(&by_type) && !is_mounted(&by_fstab));
}

#[test]
fn status_completions_and_version() {
    let m = Mount::start(None);
    let out = wip_command().arg("status").arg(&m.mount).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    let first = status.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("world demo at {}", m.mount.display()))
            && first.ends_with("· ready"),
        "{status}"
    );
    for host in ["tracker/", "files/", "db/tracker/", "search/"] {
        assert!(
            status
                .lines()
                .any(|l| l.trim_start().starts_with(host) && l.ends_with(" ready")),
            "{host}: {status}"
        );
    }
    assert!(status.contains("calls in flight: 0\n"), "{status}");
    // The mount's README names the running binary wherever it says how to run wip.
    let readme = m.read("README.md");
    for cmd in ["call PATH", "approve RUN", "deny RUN", "status DIR"] {
        assert!(
            readme.contains(&format!("`{} {cmd}", common::WIP)),
            "{cmd}: {readme}"
        );
        assert!(!readme.contains(&format!("`wip {cmd}")), "{cmd}: {readme}");
    }
    m.ok("echo > tracker/issues/42/ops/read_body/call");
    let status = m.read(".wip/status");
    assert!(
        status.contains("journal: ") && status.contains("(1 runs)"),
        "{status}"
    );
    let gone = tempfile::tempdir().unwrap();
    let out = wip_command()
        .arg("status")
        .arg(gone.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not mounted"),
        "{}",
        text(&out)
    );

    let out = wip_command().arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("wip {}\n", env!("CARGO_PKG_VERSION"))
    );
    for (shell, mark) in [
        ("bash", "complete -F _wip"),
        ("zsh", "#compdef wip"),
        ("fish", "complete -c wip"),
    ] {
        let out = wip_command()
            .arg("completions")
            .arg(shell)
            .output()
            .unwrap();
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && script.contains(mark),
            "{shell}: {script}"
        );
        assert!(
            script.contains("status") && script.contains("umount"),
            "{shell}"
        );
    }
    // bash loads the completion and completes a subcommand from it.
    let out = sh_in(
        &m.mount,
        &format!(
            "source <({} completions bash); COMP_WORDS=(wip sta); COMP_CWORD=1; _wip wip sta wip; echo \"${{COMPREPLY[@]}}\"",
            common::WIP
        ),
        Duration::from_secs(30),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .any(|w| w == "status"),
        "{}",
        text(&out)
    );
}

fn misbehaving(mode: &str, world: &str) -> String {
    format!(
        "[world]\n{world}\n[[host]]\nkind = \"exec\"\npath = \"slow\"\n\
         command = [\"python3\", {:?}, \"{mode}\"]\nstart_timeout_ms = 60000\n\
         env = {{ MISBEHAVE_START_MS = \"1500\" }}\n",
        repo()
            .join("tests/hosts/misbehave.py")
            .display()
            .to_string()
    )
}

#[test]
fn wip_mount_waits_for_hosts_that_start_in_the_background() {
    // A host that answers after 1.5 s: `wip mount` returns once it is ready.
    let m = Background::mount(&misbehaving("slow", "startup_wait_ms = 60000"), &[]);
    assert!(m.out.status.success(), "{}", text(&m.out));
    let status = m.status();
    assert!(
        status.lines().next().unwrap().ends_with("· ready"),
        "{status}"
    );
    assert!(
        status.contains("slow/") && status.contains(" ready\n"),
        "{status}"
    );
    let ops = sh_in(m.dir.path(), "ls slow/ops", Duration::from_secs(30));
    assert_eq!(
        String::from_utf8_lossy(&ops.stdout),
        "echo\nmisbehave\nslow\n"
    );
    drop(m);

    // One that never answers: the wait ends at startup_wait_ms and says who is starting.
    let m = Background::mount(&misbehaving("mute", "startup_wait_ms = 300"), &[]);
    assert!(m.out.status.success(), "{}", text(&m.out));
    let err = String::from_utf8_lossy(&m.out.stderr);
    assert!(
        err.contains("still starting after 300 ms") && err.contains("slow/"),
        "{}",
        text(&m.out)
    );
    assert!(m.status().contains("· starting\n"), "{}", m.status());
    drop(m);

    // --no-wait returns at once, before anything is said about hosts.
    let m = Background::mount(
        &misbehaving("mute", "startup_wait_ms = 60000"),
        &["--no-wait"],
    );
    assert!(m.out.status.success(), "{}", text(&m.out));
    assert!(
        !String::from_utf8_lossy(&m.out.stderr).contains("still starting"),
        "{}",
        text(&m.out)
    );
    let status = m.status();
    assert!(
        status.contains("· starting\n") && status.contains("starting: connecting"),
        "{status}"
    );
}

/// `tmux` on a socket of its own, so no other tmux server is touched.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn new() -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        Tmux {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        }
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux (Debian's tmux package; .ci/run installs it)");
        assert!(out.status.success(), "tmux {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "mc"])
    }

    fn wait_for(&self, what: &str) -> String {
        self.shows_within(what, Duration::from_secs(30))
            .unwrap_or_else(|last| {
                panic!("not within 30 s: mc to show {what:?}; the screen:\n{last}")
            })
    }

    /// The screen once it shows `what`, or the last screen seen when `limit` passed.
    fn shows_within(&self, what: &str, limit: Duration) -> Result<String, String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let screen = self.screen();
            if screen.contains(what) {
                return Ok(screen);
            }
            if std::time::Instant::now() >= deadline {
                return Err(screen);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Type `keys` into mc until the screen shows `what`: mc may still be drawing or
    /// rereading its panel when the first keys arrive (a quick search then starts over), so
    /// a search that did not land is cancelled and typed again, a few times.
    fn type_until(&self, keys: &[&[&str]], what: &str) -> String {
        let mut last = String::new();
        for _ in 0..3 {
            for k in keys {
                let mut args = vec!["send-keys", "-t", "mc"];
                args.extend_from_slice(k);
                self.run(&args);
            }
            match self.shows_within(what, Duration::from_secs(10)) {
                Ok(screen) => return screen,
                Err(screen) => last = screen,
            }
            self.run(&["send-keys", "-t", "mc", "Escape", "Escape"]);
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("mc never showed {what:?} after typing {keys:?} three times; the screen:\n{last}")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

#[test]
fn mc_in_tmux_browses_titled_names() {
    let m = Mount::start_with_args(None, &["--titled"]);
    let home = tempfile::tempdir().unwrap();
    let t = Tmux::new();
    let issues = m.path("tracker/issues");
    t.run(&[
        "new-session",
        "-d",
        "-s",
        "mc",
        "-x",
        "160",
        "-y",
        "50",
        &format!(
            "env HOME={} TERM=xterm mc -u -a --nocolor {}",
            home.path().display(),
            issues.display()
        ),
    ]);
    t.wait_for("Crash when config is missing");
    // mc's quick search (C-s) goes to the titled name; Enter opens it.
    let screen = t.type_until(&[&["C-s"], &["-l", "42 Cr"], &["Enter"]], "comments");
    assert!(
        screen.contains("description") && screen.contains("ops"),
        "{screen}"
    );
    // The panel's title is the titled path; mc's viewer (F3) shows the ref.
    t.run(&["send-keys", "-t", "mc", "C-s"]);
    t.run(&["send-keys", "-t", "mc", "-l", "ref"]);
    t.run(&["send-keys", "-t", "mc", "F3"]);
    let screen = t.wait_for("tracker://demo/issues/42");
    assert!(screen.contains("tracker://demo/issues/42"), "{screen}");
    t.run(&["send-keys", "-t", "mc", "F10"]);
}
