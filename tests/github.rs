//! The github host against recorded responses of the real GitHub API, replayed on 127.0.0.1
//! by `github-replay`: @octokit/fixtures' sessions (scripts/fixtures.sh installs them from
//! npm) and, for pull requests, reviews, checks and branch protection, the recorded
//! responses octocrab ships in its crate (`tests/resources/`).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::Mount;

const REPLAY: &str = env!("CARGO_BIN_EXE_github-replay");
/// A token no test ever needs to be real; it must never show up anywhere.
const FAKE_TOKEN: &str = "ghp_wipTestToken0000000000000000000000";
const TOKEN_ENV: &str = "WIP_GITHUB_TEST_TOKEN";
const ORG: &str = "octokit-fixture-org";

/// @octokit/fixtures' scenarios folder (scripts/fixtures.sh installs it).
fn scenarios() -> PathBuf {
    common::fixtures().join("node/node_modules/@octokit/fixtures/scenarios/api.github.com")
}

/// octocrab's recorded responses, from the crate source cargo fetched.
fn octocrab_resources() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["metadata", "--format-version", "1"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo metadata");
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata json");
        let manifest = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "octocrab")
            .expect("octocrab in the dependency graph")["manifest_path"]
            .as_str()
            .unwrap()
            .to_string();
        let dir = Path::new(&manifest)
            .parent()
            .unwrap()
            .join("tests/resources");
        assert!(
            dir.join("pull_requests_list.json").exists(),
            "{}",
            dir.display()
        );
        dir
    })
    .clone()
}

/// Routes onto octocrab's recorded responses: pull request 1347 of octocat/Hello-World.
const PULL_ROUTES: &[&str] = &[
    "GET /repos/octocat/Hello-World 200 pull_requests_list.json#/0/base/repo",
    "GET /repos/octocat/Hello-World/pulls 200 pull_requests_list.json",
    "GET /repos/octocat/Hello-World/pulls/1347/reviews 200 get_pull_request_review.json#[]",
    "GET /repos/octocat/Hello-World/pulls/1347/files 200 repos_merges_201.json#/files",
    "GET /repos/octocat/Hello-World/commits/6dcb09b5b57875f334f61aebed695e2e4193db5e/check-runs?per_page=100 200 commit_check_runs.json",
    "GET /repos/octocat/Hello-World/branches/master/protection 200 repo_branch_protection.json",
    "GET /user 200 user_data.json",
];

const SCENARIOS: &[&str] = &[
    "get-repository",
    "paginate-issues",
    "search-issues",
    "labels",
    "add-labels-to-issue",
    "lock-issue",
    "create-status",
    "get-content",
    "errors",
];

/// A replay server on 127.0.0.1; it exits when its stdin closes (Drop, or our death).
struct Replay {
    child: Child,
    port: u16,
}

impl Replay {
    fn start() -> Replay {
        let mut cmd = Command::new(REPLAY);
        for s in SCENARIOS {
            cmd.arg("--fixture")
                .arg(scenarios().join(s).join("normalized-fixture.json"));
        }
        cmd.arg("--resources").arg(octocrab_resources());
        for r in PULL_ROUTES {
            cmd.arg("--route").arg(r);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start github-replay");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("replay prints its port");
        Replay { child, port }
    }

    fn get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
    }

    /// Script what GitHub does next (see github-replay's header): `what` is `record`,
    /// `replace` or `rate-limit`.
    fn script(&self, what: &str, body: &serde_json::Value) {
        use std::io::{Read, Write};
        let body = body.to_string();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "POST /__wip/{what} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{what}: {out}");
    }

    /// A recorded JSON body, as GitHub serves it.
    fn json(&self, path: &str) -> serde_json::Value {
        let text = self.get(path);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
    }

    /// Requests the server answered so far.
    fn requests(&self) -> u64 {
        self.get("/__wip/requests").trim().parse().unwrap()
    }

    fn log(&self) -> String {
        self.get("/__wip/log")
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn repos_list() -> String {
    let mut repos: Vec<String> = SCENARIOS
        .iter()
        .filter(|s| !matches!(**s, "get-repository" | "get-content" | "paginate-issues"))
        .map(|s| format!("\"{ORG}/{s}\""))
        .collect();
    repos.push(format!("\"{ORG}/hello-world\""));
    repos.push("\"octocat/Hello-World\"".to_string());
    repos.join(", ")
}

/// `github/` for the fixtures at GitHub's default page size, and `paged/` for
/// paginate-issues at the 3 per page it was recorded with (and a 1 s TTL).
fn manifest(port: u16, token_env: &str) -> String {
    format!(
        "[[host]]\nkind = \"github\"\npath = \"github\"\nrepos = [{}]\n\
         base_uri = \"http://127.0.0.1:{port}\"\ntoken_env = \"{token_env}\"\ngh = false\nper_page = 30\n\
         [[host]]\nkind = \"github\"\npath = \"paged\"\nrepos = [\"{ORG}/paginate-issues\"]\n\
         base_uri = \"http://127.0.0.1:{port}\"\ntoken_env = \"{token_env}\"\ngh = false\n\
         per_page = 3\nlist_limit = 13\ncache_ttl_secs = 1\n",
        repos_list()
    )
}

/// A replay server and a mount of both github hosts, with the fake token in the daemon's
/// environment only.
fn start() -> (Replay, Mount) {
    start_with(&manifest_for_replay)
}

fn manifest_for_replay(port: u16) -> String {
    manifest(port, TOKEN_ENV)
}

fn start_with(manifest: &dyn Fn(u16) -> String) -> (Replay, Mount) {
    let replay = Replay::start();
    let m = Mount::start_with_env(Some(&manifest(replay.port)), &[(TOKEN_ENV, FAKE_TOKEN)]);
    (replay, m)
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

#[test]
fn mounting_costs_no_request_and_a_repository_shows_githubs_state() {
    let (replay, m) = start();
    assert_eq!(
        replay.requests(),
        0,
        "mounting asked GitHub: {}",
        replay.log()
    );
    let root = m.read("github/description");
    assert!(root.contains(&format!("token from ${TOKEN_ENV}")), "{root}");
    assert!(
        root.contains("rate limit: not known until the first request"),
        "{root}"
    );
    assert_eq!(m.read("github/ref"), "github://\n");
    let owners = m.ok("ls github");
    assert_eq!(
        lines(&owners),
        vec!["description", "octocat", ORG, "ops", "ref", "results"],
        "the owners, and results/ (whose searches are reached by id)"
    );
    let repo = format!("github/{ORG}/hello-world");
    let d = m.read(&format!("{repo}/description"));
    assert!(d.starts_with(&format!("{ORG}/hello-world · ")), "{d}");
    assert!(
        d.contains("public") && d.contains("default branch master"),
        "{d}"
    );
    assert_eq!(
        m.read(&format!("{repo}/ref")),
        format!("github://{ORG}/hello-world\n")
    );
    let names = m.ok(&format!("ls {repo}"));
    for want in [
        "issues",
        "pulls",
        "labels",
        "branches",
        "ops",
        "description",
        "ref",
    ] {
        assert!(
            names.lines().any(|l| l == want),
            "{want} missing from {names}"
        );
    }
    // The root now shows what GitHub said of the rate limit.
    let root = m.read("github/description");
    assert!(
        root.contains("rate limit: 4999 of 5000 requests left"),
        "{root}"
    );
    // A file of the repository (get-content), as raw text.
    m.call(
        &format!("{repo}/ops/read_file"),
        "{\"path\":\"README.md\"}\n",
    )
    .unwrap();
    assert_eq!(
        m.result(&format!("{repo}/ops/read_file")),
        "# hello-world\n"
    );
}

#[test]
fn issues_are_paged_and_any_number_resolves_by_path() {
    let (replay, m) = start();
    let dir = format!("paged/{ORG}/paginate-issues/issues");
    let listed = m.ok(&format!("ls {dir} | grep -v -e description -e ops -e ref"));
    let mut nums: Vec<u64> = listed.lines().map(|l| l.parse().unwrap()).collect();
    nums.sort();
    assert_eq!(
        nums,
        (1..=13).collect::<Vec<_>>(),
        "five recorded pages of 3"
    );
    assert!(
        replay
            .log()
            .contains("/repositories/1000/issues?per_page=3&page=5"),
        "{}",
        replay.log()
    );
    let before = replay.requests();
    let d = m.read(&format!("{dir}/7/description"));
    assert!(d.starts_with("Issue #7 · open · "), "{d}");
    assert!(
        d.contains("42 comments") && d.contains("by octokit-fixture-user-a"),
        "{d}"
    );
    assert_eq!(
        replay.requests(),
        before,
        "a listed issue needs no request of its own"
    );
    assert_eq!(
        m.read(&format!("{dir}/7/ref")),
        format!("github://{ORG}/paginate-issues/issues/7\n")
    );
    // Not on GitHub: ENOENT, after asking once; not a number (or not its one spelling):
    // ENOENT without asking.
    let missing = |name: &str| {
        let out = m.sh(&format!("cat {dir}/{name}/description"));
        assert!(!out.status.success(), "{name}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(err.contains("No such file or directory"), "{name}: {err}");
    };
    let before = replay.requests();
    missing("99");
    assert_eq!(replay.requests(), before + 1, "{}", replay.log());
    assert!(replay
        .log()
        .ends_with(&format!("GET /repos/{ORG}/paginate-issues/issues/99 404")));
    for name in ["abc", "07", "-1", "7x"] {
        missing(name);
    }
    assert_eq!(replay.requests(), before + 1, "{}", replay.log());
    m.call(&format!("{dir}/7/ops/read_body"), "\n").unwrap();
    let body = m.result(&format!("{dir}/7/ops/read_body"));
    assert!(body.starts_with("Issue #7 · open"), "{body}");
    // The issue's own text is its body file, from the page already fetched.
    let calls = m.journal_count();
    // (GitHub's body of #7 is empty, as its read_body ends.)
    let text = m.read(&format!("{dir}/7/body"));
    assert!(
        body.trim_end().ends_with(text.trim_end()),
        "{text}\n---\n{body}"
    );
    m.ok(&format!("test -f {dir}/7/body"));
    m.ok(&format!("! test -w {dir}/7/body"));
    assert_eq!(m.journal_count(), calls, "reading a body is no call");
}

#[test]
fn labels_list_create_and_githubs_validation_error() {
    let (_replay, m) = start();
    let labels = format!("github/{ORG}/labels/labels");
    let names = m.ok(&format!("ls {labels}"));
    assert!(names.lines().any(|l| l == "bug"), "{names}");
    assert!(m
        .read(&format!("{labels}/bug/description"))
        .starts_with("Label bug · #"));
    assert_eq!(
        m.read(&format!("{labels}/ops/create_label/guard"))
            .lines()
            .next(),
        Some("allowed")
    );
    m.call(
        &format!("{labels}/ops/create_label"),
        "{\"name\":\"test-label\",\"color\":\"663399\"}\n",
    )
    .unwrap();
    let r = m.result(&format!("{labels}/ops/create_label"));
    assert!(r.starts_with("created label test-label"), "{r}");
    assert!(r.contains(&format!("{labels}/test-label")), "{r}");
    assert!(m
        .read(&format!("{labels}/test-label/description"))
        .starts_with("Label test-label · #663399"));

    // The errors scenario: GitHub's 422 is EINVAL with GitHub's own words.
    let errs = format!("github/{ORG}/errors/labels/ops/create_label");
    assert_eq!(
        m.call(&errs, "{\"name\":\"foo\",\"color\":\"invalid\"}\n"),
        Err(libc::EINVAL)
    );
    let r = m.result(&errs);
    assert!(
        r.contains("Validation Failed") && r.contains("Label color invalid"),
        "{r}"
    );
}

#[test]
fn create_issue_then_add_labels_and_set_a_status() {
    let (replay, m) = start();
    let repo = format!("github/{ORG}/add-labels-to-issue");
    m.call(
        &format!("{repo}/ops/create_issue"),
        "{\"title\":\"Issue without a label\"}\n",
    )
    .unwrap();
    let r = m.result(&format!("{repo}/ops/create_issue"));
    assert!(
        r.starts_with("opened issue #1: Issue without a label"),
        "{r}"
    );
    assert!(r.contains(&format!("{repo}/issues/1")), "{r}");
    let label = format!("{repo}/issues/1/ops/label");
    m.call(&label, "{\"add\":[\"Foo\",\"bAr\",\"baZ\"]}\n")
        .unwrap();
    assert_eq!(m.result(&label), "Issue #1 now labelled Foo, bAr and baZ\n");
    // A label GitHub has no recording for fails with GitHub's words, and nothing is lost.
    assert_eq!(m.call(&label, "{\"add\":[\"nope\"]}\n"), Err(libc::ENOENT));
    assert!(m.result(&label).contains("Not Found"));
    // Nothing is lost: the refused call is a run of its own with its arguments and
    // GitHub's words, the labelling before it keeps its record, and the one request
    // GitHub refused was the only change sent after it (no retry, no undo).
    let runs: Vec<String> = lines(&m.ok(&format!("ls {label}/runs")));
    let [done, refused] = runs.as_slice() else {
        panic!("two label runs: {runs:?}");
    };
    let run = |id: &str, file: &str| m.read(&format!("{label}/runs/{id}/{file}"));
    assert_eq!(run(refused, "status"), "not_found\n");
    assert_eq!(run(refused, "args"), "{\"add\":[\"nope\"]}\n");
    assert_eq!(
        run(refused, "result"),
        format!(
            "error: labelling of {ORG}/add-labels-to-issue#1: GitHub says Not Found (Not Found)\n"
        )
    );
    assert_eq!(run(done, "status"), "ok\n");
    assert_eq!(
        run(done, "result"),
        "Issue #1 now labelled Foo, bAr and baZ\n"
    );
    let log = replay.log();
    let changes: Vec<&str> = log.lines().filter(|l| !l.starts_with("GET ")).collect();
    let labels_path = format!("/repos/{ORG}/add-labels-to-issue/issues/1/labels");
    assert_eq!(
        changes,
        vec![
            format!("POST /repos/{ORG}/add-labels-to-issue/issues 201"),
            format!("POST {labels_path} 200"),
            format!("POST {labels_path} 404"),
        ],
        "{log}"
    );

    let status = format!("github/{ORG}/create-status/ops/create_status");
    m.call(
        &status,
        "{\"sha\":\"0000000000000000000000000000000000000001\",\"state\":\"failure\",\
         \"target_url\":\"https://example.com\",\"description\":\"create-status failure test\",\
         \"context\":\"example/1\"}\n",
    )
    .unwrap();
    assert_eq!(
        m.result(&status),
        "status example/1 set to failure on 0000000000000000000000000000000000000001\n"
    );
}

#[test]
fn search_results_are_entries_linked_to_the_issues() {
    let (_replay, m) = start();
    let repo = format!("github/{ORG}/search-issues");
    m.call(&format!("{repo}/ops/search"), "sesame\n").unwrap();
    let r = m.result(&format!("{repo}/ops/search"));
    assert!(
        r.starts_with("2 hits for \"sesame repo:octokit-fixture-org/search-issues\" (search 1"),
        "{r}"
    );
    assert!(r.contains("1. Issue octokit-fixture-org/search-issues#2 · open · Sesame seeds split without a pop!"), "{r}");
    assert!(r.contains("github/results/1"), "{r}");
    assert!(r.contains(&format!("{repo}/issues/2")), "{r}");
    assert_eq!(
        m.read("github/results/1/hits/1/ref"),
        format!("github://{ORG}/search-issues/issues/2\n")
    );
    assert!(m
        .read("github/results/1/hits/2/description")
        .contains(&format!("see {repo}/issues/1")));
    // Hits are reachable by path but not listed by their parents.
    assert!(!m.ok("ls github/results").contains('1'));
    assert!(m
        .read(&format!("{repo}/issues/2/description"))
        .contains("Sesame seeds"));
    // At the host root the query is GitHub's own; the same words find the same issues.
    m.call(
        "github/ops/search",
        "sesame repo:octokit-fixture-org/search-issues\n",
    )
    .unwrap();
    let r = m.result("github/ops/search");
    assert!(r.contains("(search 2;"), "{r}");
    assert!(r.contains(&format!("{repo}/issues/1")), "{r}");
    assert_eq!(
        m.read("github/results/2/hits/2/ref"),
        format!("github://{ORG}/search-issues/issues/1\n")
    );
    // The world resolves the hit's ref to the real entry.
    let out = m.ok(&format!(
        "echo 'github://{ORG}/search-issues/issues/2' > ops/resolve/call; cat ops/resolve/result"
    ));
    assert!(out.contains(&format!("{repo}/issues/2")), "{out}");
}

#[test]
fn a_pull_request_shows_checks_reviews_files_and_its_merge_guard() {
    let (_replay, m) = start();
    let pulls = "github/octocat/Hello-World/pulls";
    assert!(m.ok(&format!("ls {pulls}")).lines().any(|l| l == "1347"));
    let pr = format!("{pulls}/1347");
    let d = m.read(&format!("{pr}/description"));
    assert_eq!(
        d,
        "PR #1347 · open · Amazing new feature · locked · bug · by octocat · new-topic → master · assigned to octocat and hubot\n"
    );
    let checks = m.ok(&format!("ls {pr}/checks"));
    assert!(
        checks.contains("Cargo test on nix (ubuntu-20.04, stable)"),
        "{checks}"
    );
    let c = m.read(&format!(
        "{pr}/checks/Cargo test on nix (ubuntu-20.04, stable)/description"
    ));
    assert!(
        c.starts_with("check run Cargo test on nix (ubuntu-20.04, stable) on PR #1347 · success"),
        "{c}"
    );
    assert!(m.ok(&format!("ls {pr}/reviews")).lines().any(|l| l == "80"));
    assert!(m
        .read(&format!("{pr}/reviews/80/description"))
        .contains("by octocat · approved"));
    assert!(m
        .ok(&format!("ls {pr}/files"))
        .lines()
        .any(|l| l == "file1.txt"));
    m.call(&format!("{pr}/ops/diff"), "\n").unwrap();
    assert!(m
        .result(&format!("{pr}/ops/diff"))
        .starts_with("diff --git a/file1.txt b/file1.txt\n"));

    let guard = m.read(&format!("{pr}/ops/merge/guard"));
    let g = lines(&guard);
    assert_eq!(g[0], "blocked", "{guard}");
    assert_eq!(g[1], "✓ open: PR #1347 is open");
    assert!(
        g[2].starts_with(
            "✗ mergeable: GitHub has not computed whether new-topic merges cleanly into master yet"
        ),
        "{guard}"
    );
    assert!(g[3].starts_with("✗ checks_passing: required by branch protection but not reported on 6dcb09b: continuous-integration/travis-ci"), "{guard}");
    assert!(
        g[4].starts_with(
            "✗ review_approved: branch protection of master asks for 2 approving reviews, 1 so far"
        ),
        "{guard}"
    );
    assert!(g[4].contains(&format!("see {pr}/reviews")), "{guard}");
    assert!(g[5].starts_with("✗ can_write: could not read your (octocat) permission on octocat/Hello-World (GitHub said: Not Found)"), "{guard}");
    // The call checks again and is refused with the guard's words.
    assert_eq!(
        m.call(&format!("{pr}/ops/merge"), "{\"method\":\"squash\"}\n"),
        Err(libc::EPERM)
    );
    let r = m.result(&format!("{pr}/ops/merge"));
    assert!(
        r.contains("blocked by guard mergeable: GitHub has not computed"),
        "{r}"
    );
    // Approving your own pull request is refused before GitHub is asked.
    let g = m.read(&format!("{pr}/ops/approve/guard"));
    assert!(
        g.contains("✗ not_author: you (octocat) opened PR #1347"),
        "{g}"
    );
}

#[test]
fn without_a_token_the_world_still_mounts_and_says_how_to_configure_it() {
    let replay = Replay::start();
    let m = Mount::start(Some(&manifest(
        replay.port,
        "WIP_GITHUB_TEST_NO_SUCH_TOKEN",
    )));
    let root = m.read("github/description");
    assert!(
        root.contains("no token") && root.contains("set GITHUB_TOKEN"),
        "{root}"
    );
    // Anonymous reads still work where GitHub allows them.
    assert!(m
        .read(&format!("github/{ORG}/hello-world/description"))
        .contains("public"));
    let g = m.read(&format!(
        "github/{ORG}/add-labels-to-issue/ops/create_issue/guard"
    ));
    assert!(g.starts_with("blocked\n✗ token: no GitHub token"), "{g}");
    assert_eq!(
        m.call(
            &format!("github/{ORG}/add-labels-to-issue/ops/create_issue"),
            "x\n"
        ),
        Err(libc::EPERM)
    );
}

#[test]
fn the_token_never_leaks_into_tree_journal_or_logs() {
    let canary = "ghp_wipLeakCanary9f8e7d6c5b4a3210ffeeddcc";
    let replay = Replay::start();
    let state = tempfile::tempdir().unwrap();
    let mnt = tempfile::Builder::new()
        .prefix("wip-mnt-")
        .tempdir()
        .unwrap();
    let manifest_path = state.path().join("manifest.toml");
    std::fs::write(&manifest_path, manifest(replay.port, "WIP_GITHUB_CANARY")).unwrap();
    // A background daemon: its stderr (debug logs included) goes to STATE/wip.log.
    let st = common::wip_command()
        .arg("mount")
        .arg(mnt.path())
        .arg("--state")
        .arg(state.path())
        .arg("--manifest")
        .arg(&manifest_path)
        .env("WIP_GITHUB_CANARY", canary)
        // Every crate at debug (a bare level would be wip's own only): the HTTP client's
        // logs are where a token would leak.
        .env("WIP_LOG", "debug,wip=debug")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let script = format!(
        "cd {dir}; cat github/description; ls -R github/{ORG}/labels github/octocat/Hello-World/pulls/1347 >/dev/null; \
         cat github/octocat/Hello-World/pulls/1347/ops/merge/guard; \
         echo '{{\"method\":\"merge\"}}' > github/octocat/Hello-World/pulls/1347/ops/merge/call; \
         echo '{{\"name\":\"foo\",\"color\":\"invalid\"}}' > github/{ORG}/errors/labels/ops/create_label/call; \
         echo sesame > github/{ORG}/search-issues/ops/search/call; \
         find github -maxdepth 4 -name description | head -50 | xargs cat; \
         cat github/*/*/ops/*/result github/*/*/*/ops/*/result github/*/*/*/*/ops/*/result 2>/dev/null; \
         cat .wip/* 2>/dev/null; true",
        dir = mnt.path().display()
    );
    let out = common::sh_in(mnt.path(), &script, std::time::Duration::from_secs(120));
    let seen = String::from_utf8_lossy(&out.stdout).to_string();
    let _ = common::wip_command().arg("umount").arg(mnt.path()).status();
    assert!(seen.contains("Validation Failed"), "the calls ran: {seen}");
    assert!(!seen.contains(canary), "the tree shows the token");
    // Every file the daemon wrote: journal, known world, its log.
    let grep = Command::new("grep")
        .args(["-r", "-a", "-l", canary])
        .arg(state.path())
        .output()
        .unwrap();
    assert!(
        grep.stdout.is_empty(),
        "token found in {}",
        String::from_utf8_lossy(&grep.stdout)
    );
    let log = std::fs::read_to_string(state.path().join("wip.log")).unwrap();
    assert!(log.contains("127.0.0.1"), "debug logs were written: {log}");
}

#[test]
fn relisting_within_the_ttl_costs_nothing() {
    let (replay, m) = start();
    let repo = format!("github/{ORG}/labels");
    m.ok(&format!("ls {repo}/labels"));
    let after_first = replay.requests();
    m.ok(&format!(
        "ls {repo}/labels; ls {repo}/labels; cat {repo}/description"
    ));
    assert_eq!(replay.requests(), after_first, "{}", replay.log());
}

/// `paged/`'s issues: five recorded pages, all under one ETag.
fn issue_pages() -> Vec<String> {
    let mut pages = vec![format!("/repos/{ORG}/paginate-issues/issues?per_page=3")];
    pages.extend((2..=5).map(|k| format!("/repositories/1000/issues?per_page=3&page={k}")));
    pages
}

const PAGED_ISSUES: &str = "paged/octokit-fixture-org/paginate-issues/issues";

/// List `paged/`'s issues (as `ls` does, without a shell) and return the names.
fn list_issues(m: &Mount) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(m.path(PAGED_ISSUES))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The description of `paged/`'s issue `n`, if it exists.
fn issue_description(m: &Mount, n: u64) -> std::io::Result<String> {
    std::fs::read_to_string(m.path(&format!("{PAGED_ISSUES}/{n}/description")))
}

/// paged/ keeps answers 1 s; then every page is asked again with its ETag, and GitHub's
/// 304 (free of rate limit) keeps what was shown.
#[test]
fn after_the_ttl_every_page_revalidates_by_etag_and_a_304_keeps_the_content() {
    let (replay, m) = start();
    let listing = list_issues(&m);
    assert_eq!(listing.len(), 13 + 3, "{listing:?}");
    let before: Vec<String> = (1..=13)
        .map(|n| issue_description(&m, n).unwrap())
        .collect();
    let pages = issue_pages();
    common::wait_until(
        "every page revalidated with a 304",
        Duration::from_secs(30),
        || {
            list_issues(&m);
            let log = replay.log();
            pages.iter().all(|p| log.contains(&format!("GET {p} 304")))
        },
    );
    let log = replay.log();
    for p in &pages {
        assert_eq!(
            log.matches(&format!("GET {p} 200")).count(),
            1,
            "fetched in full once, then only revalidated: {log}"
        );
    }
    assert_eq!(list_issues(&m), listing);
    let after: Vec<String> = (1..=13)
        .map(|n| issue_description(&m, n).unwrap())
        .collect();
    assert_eq!(after, before);
}

#[test]
fn a_200_with_a_new_etag_replaces_what_was_cached() {
    let (replay, m) = start();
    let listing = list_issues(&m);
    assert!(listing.contains(&"5".to_string()), "{listing:?}");
    let old7 = issue_description(&m, 7).unwrap();
    let old6 = issue_description(&m, 6).unwrap();
    // On GitHub, issue 7 is retitled and issue 5 closed: their page (7, 6, 5) answers
    // under a new ETag, without 5 (listings show open issues).
    let page = issue_pages()[2].clone();
    let mut body = replay.json(&page);
    let numbers: Vec<u64> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, vec![7, 6, 5]);
    body[0]["title"] = "Retitled on GitHub".into();
    body.as_array_mut().unwrap().pop();
    replay.script(
        "replace",
        &serde_json::json!({"method": "GET", "path": page, "etag": "\"v2\"", "body": body}),
    );
    let mut want = listing.clone();
    want.retain(|n| n != "5");
    common::wait_until(
        "the new page replaces the cached one",
        Duration::from_secs(30),
        || list_issues(&m) == want,
    );
    let new7 = issue_description(&m, 7).unwrap();
    let old_title = old7.split(" · ").nth(2).unwrap();
    assert_eq!(
        new7,
        old7.replacen(old_title, "Retitled on GitHub", 1),
        "only the title changed"
    );
    assert_eq!(issue_description(&m, 6).unwrap(), old6);
    // The old ETag no longer matched: GitHub's 200 carried the new body.
    let log = replay.log();
    let last = log
        .lines()
        .rev()
        .find(|l| l.starts_with(&format!("GET {page} ")))
        .unwrap();
    assert_eq!(last, format!("GET {page} 200"), "{log}");
}

#[test]
fn a_404_is_remembered_for_the_ttl_then_asked_again() {
    let (replay, m) = start();
    // github/ keeps answers 45 s: looking again at a missing issue costs nothing.
    let gone = m.path(&format!("github/{ORG}/hello-world/issues/4242"));
    assert!(!gone.exists());
    let after_first = replay.requests();
    assert!(!gone.exists());
    assert!(!gone.join("description").exists());
    assert_eq!(replay.requests(), after_first, "{}", replay.log());
    // paged/ keeps them 1 s: an issue opened on GitHub after the 404 shows up.
    assert!(issue_description(&m, 99).is_err());
    let path = format!("/repos/{ORG}/paginate-issues/issues/99");
    let mut issue = replay.json(&format!("/repos/{ORG}/paginate-issues/issues/7"));
    issue["number"] = 99.into();
    issue["title"] = "Opened after the 404".into();
    issue["url"] = format!("https://api.github.com{path}").into();
    replay.script(
        "record",
        &serde_json::json!({"method": "GET", "path": path, "status": 200, "body": issue}),
    );
    common::wait_until("issue 99 appears", Duration::from_secs(30), || {
        issue_description(&m, 99).is_ok()
    });
    let d = issue_description(&m, 99).unwrap();
    assert!(
        d.starts_with("Issue #99 · open · Opened after the 404 · "),
        "{d}"
    );
    let log = replay.log();
    let asked: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with(&format!("GET {path} ")))
        .collect();
    assert_eq!(
        asked.first(),
        Some(&format!("GET {path} 404").as_str()),
        "{log}"
    );
    assert_eq!(
        asked.last(),
        Some(&format!("GET {path} 200").as_str()),
        "{log}"
    );
}

#[test]
fn an_exhausted_rate_limit_refuses_at_once_until_its_reset_then_recovers() {
    let (replay, m) = start();
    let path = format!("/repos/{ORG}/paginate-issues/issues/99");
    let mut issue = replay.json(&format!("/repos/{ORG}/paginate-issues/issues/7"));
    issue["number"] = 99.into();
    issue["url"] = format!("https://api.github.com{path}").into();
    let reset_later = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600)
        .to_string();
    replay.script(
        "record",
        &serde_json::json!({
            "method": "GET", "path": path, "status": 200, "body": issue,
            "headers": {
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": "4990",
                "x-ratelimit-reset": reset_later,
            },
        }),
    );
    // GitHub's limit runs out for the next 3 s.
    replay.script("rate-limit", &serde_json::json!({"seconds": 3}));
    let timed_out = |what: &str| {
        let err = issue_description(&m, 99).expect_err(what);
        assert_eq!(err.raw_os_error(), Some(libc::ETIMEDOUT), "{what}: {err}");
    };
    timed_out("GitHub said the limit is exhausted");
    let root = m.read("paged/description");
    assert!(
        root.contains("rate limit: 0 of 5000 requests left, resets at "),
        "{root}"
    );
    // Known to be exhausted: refused at once, nothing sent to GitHub.
    let sent = replay.requests();
    timed_out("known exhausted");
    assert!(!m.path(&format!("{PAGED_ISSUES}/98")).exists());
    assert_eq!(replay.requests(), sent, "{}", replay.log());
    // After the reset, requests go out again by themselves.
    common::wait_until("GitHub answers again", Duration::from_secs(30), || {
        issue_description(&m, 99).is_ok()
    });
    assert!(replay.requests() > sent);
    let root = m.read("paged/description");
    assert!(
        root.contains("rate limit: 4990 of 5000 requests left"),
        "{root}"
    );
    assert_eq!(
        replay.log().lines().filter(|l| l.ends_with(" 403")).count(),
        1,
        "one refusal reached GitHub: {}",
        replay.log()
    );
}

/// What tests/errno.rs maps, through a mount: GitHub refusing (401, 403) is EACCES and
/// GitHub failing (5xx) is EIO, each with GitHub's words in `result`.
#[test]
fn githubs_refusals_and_failures_reach_the_caller_as_errno_and_words() {
    let (replay, m) = start();
    let op = format!("github/{ORG}/labels/labels/ops/create_label");
    let args = "{\"name\":\"scripted\",\"color\":\"663399\"}\n";
    for (status, message, errno, words) in [
        (
            401,
            "Bad credentials",
            libc::EACCES,
            "GitHub rejected the credentials (Bad credentials); set GITHUB_TOKEN to a valid token",
        ),
        (
            403,
            "Resource not accessible by integration",
            libc::EACCES,
            "GitHub refused (Resource not accessible by integration)",
        ),
        (
            500,
            "Server Error",
            libc::EIO,
            "GitHub answered 500: Server Error",
        ),
        (
            502,
            "Bad Gateway",
            libc::EIO,
            "GitHub answered 502: Bad Gateway",
        ),
    ] {
        replay.script(
            "record",
            &serde_json::json!({
                "method": "POST", "path": format!("/repos/{ORG}/labels/labels"),
                "status": status, "body": {"message": message},
            }),
        );
        assert_eq!(m.call(&op, args), Err(errno), "{status}");
        let r = m.result(&op);
        assert!(
            r.starts_with("error: ") && r.contains(words),
            "{status}: {r}"
        );
        assert!(!r.contains(FAKE_TOKEN));
    }
}

/// Reads have no side effects: walking the whole github world and reading every file, as
/// `grep -r` or a file manager would, changes nothing on GitHub and runs no op.
#[test]
fn reading_every_file_of_a_github_world_sends_only_gets_and_runs_nothing() {
    let (replay, m) = start();
    // Reached by path (results are not listed) so the walk covers them too.
    m.call(
        &format!("github/{ORG}/search-issues/ops/search"),
        "sesame\n",
    )
    .unwrap();
    let calls = m.journal_count();
    let before = replay.log().lines().count();
    let out = m.sh(
        "find -L github paged github/results/1 -maxdepth 8 -type f -print0 \
         | xargs -0 -n 64 cat > /dev/null 2>&1; \
         find -L github paged -maxdepth 8 -type f | wc -l",
    );
    let files: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(files > 500, "the walk read {files} files");
    let log = replay.log();
    let walk: Vec<&str> = log.lines().skip(before).collect();
    assert!(!walk.is_empty(), "the walk asked GitHub");
    let changes: Vec<&&str> = walk.iter().filter(|l| !l.starts_with("GET ")).collect();
    assert!(changes.is_empty(), "reads sent changes: {changes:?}");
    assert_eq!(m.journal_count(), calls, "reads ran ops");
}

/// An agent that learned the tracker knows GitHub: the ops both offer on an issue and on a
/// pull request have the same names and take the same arguments, as read through the mount.
#[test]
fn issues_and_pulls_share_the_trackers_vocabulary() {
    let (_replay, m) = start_with(&|port| {
        format!(
            "{}[[host]]\nkind = \"tracker\"\npath = \"tracker\"\n",
            manifest(port, TOKEN_ENV)
        )
    });
    let args = |schema: &str| {
        let v: serde_json::Value = serde_json::from_str(schema).unwrap();
        let mut keys: Vec<String> = v["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        let mut required: Vec<String> = v["required"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        required.sort();
        (keys, required)
    };
    for (tracker, github, shared) in [
        (
            "tracker/issues/42",
            format!("paged/{ORG}/paginate-issues/issues/7"),
            &[
                "read_body",
                "get_metadata",
                "comment",
                "close",
                "reopen",
                "label",
                "assign",
            ][..],
        ),
        (
            "tracker/pulls/50",
            "github/octocat/Hello-World/pulls/1347".to_string(),
            &[
                "read_body",
                "get_metadata",
                "comment",
                "close",
                "request_review",
                "approve",
                "merge",
            ][..],
        ),
    ] {
        let t_ops = lines(&m.ok(&format!("ls {tracker}/ops")));
        let g_ops = lines(&m.ok(&format!("ls {github}/ops")));
        for op in shared {
            assert!(
                t_ops.iter().any(|o| o == op),
                "tracker lacks {op}: {t_ops:?}"
            );
            assert!(
                g_ops.iter().any(|o| o == op),
                "github lacks {op}: {g_ops:?}"
            );
        }
        for op in t_ops.iter().filter(|o| g_ops.contains(o)) {
            assert_eq!(
                args(&m.read(&format!("{tracker}/ops/{op}/schema"))),
                args(&m.read(&format!("{github}/ops/{op}/schema"))),
                "{op} takes different arguments on the tracker and on GitHub"
            );
        }
    }
}

#[test]
fn titled_names_list_issues_with_their_titles() {
    let (replay, m) =
        start_with(&|port| format!("[world]\ntitled = true\n{}", manifest(port, TOKEN_ENV)));
    let dir = format!("paged/{ORG}/paginate-issues/issues");
    let listed = m.ok(&format!("ls {dir} | grep -vx 'description\\|ops\\|ref'"));
    assert_eq!(listed.lines().count(), 13, "{listed}");
    for name in listed.lines() {
        let (n, title) = name
            .split_once(' ')
            .unwrap_or_else(|| panic!("untitled: {name:?}"));
        assert!(n.parse::<u64>().is_ok() && !title.is_empty(), "{name:?}");
    }
    let seven = listed
        .lines()
        .find(|l| l.starts_with("7 "))
        .unwrap_or_else(|| panic!("{listed}"));
    let before = replay.requests();
    assert_eq!(
        m.read(&format!("{dir}/{seven}/ref")),
        format!("github://{ORG}/paginate-issues/issues/7\n")
    );
    assert_eq!(
        m.read(&format!("{dir}/{seven}/description")),
        m.read(&format!("{dir}/7/description"))
    );
    assert_eq!(
        replay.requests(),
        before,
        "a listed issue's titled name needs no request"
    );
}
