//! Unit tests: paths, GitHub's words, errno mapping, rate-limit words. The host against
//! recorded GitHub responses is tested in tests/github.rs.

use serde_json::json;

use super::client::{github_message, next_link, reset_words, GhError};
use super::ops::OPS;
use super::{
    decode_name, encode_name, GithubHost, GithubSettings, Hit, Kind, Node, Repo, SearchRun,
    TokenSource,
};
use crate::host::names::Paths;
use crate::host::{Caller, Host, HostError};

fn settings(repos: &[&str]) -> GithubSettings {
    toml::from_str::<GithubSettings>(&format!(
        "repos = [{}]\nbase_uri = \"http://127.0.0.1:9\"\ntimeout_secs = 2",
        repos
            .iter()
            .map(|r| format!("{r:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .unwrap()
}

#[test]
fn paths_round_trip() {
    for p in [
        vec![],
        vec!["o", "r"],
        vec!["o", "r", "issues", "4"],
        vec!["o", "r", "pulls", "7", "checks", "ci%2Fbuild"],
        vec!["o", "r", "branches", "feature%2Fx%25y"],
        vec!["results", "3", "hits", "2"],
    ] {
        let path: Vec<String> = p.iter().map(|s| s.to_string()).collect();
        let node = Node::parse(&path).unwrap_or_else(|| panic!("{p:?}"));
        assert_eq!(node.path(), path);
    }
    assert_eq!(
        Node::parse(&["o".into(), "r".into(), "issues".into(), "04".into()]),
        None,
        "one spelling per number"
    );
    assert_eq!(encode_name("a/b%c"), "a%2Fb%25c");
    assert_eq!(decode_name("a%2Fb%25c").as_deref(), Some("a/b%c"));
    assert_eq!(decode_name("a/b"), None);
}

#[test]
fn links_and_messages() {
    let link = "<https://api.github.com/repositories/1000/issues?per_page=3&page=2>; rel=\"next\", <https://api.github.com/repositories/1000/issues?per_page=3&page=5>; rel=\"last\"";
    assert_eq!(
        next_link(link).as_deref(),
        Some("/repositories/1000/issues?per_page=3&page=2")
    );
    assert_eq!(next_link("<https://x/y?page=5>; rel=\"last\""), None);
    let body = r#"{"message":"Validation Failed","errors":[{"resource":"Label","code":"invalid","field":"color"}]}"#;
    assert_eq!(
        github_message(body),
        "Validation Failed (Label color invalid)"
    );
    assert_eq!(github_message(""), "no message");
}

#[test]
fn reset_in_words() {
    // 2026-11-30 17:00:00 UTC, 23 minutes and a bit away.
    let reset = 1_796_058_000;
    assert_eq!(
        reset_words(reset, reset - 1_381),
        "17:00:00 UTC (in 24 min)"
    );
}

#[test]
fn statuses_become_errnos_with_githubs_words() {
    let st = |status, message: &str| GhError::Status {
        status,
        message: message.to_string(),
    };
    assert!(matches!(
        st(404, "Not Found").into_host("x"),
        HostError::NotFound(_)
    ));
    match st(401, "Bad credentials").into_host("x") {
        HostError::Forbidden(m) => {
            assert!(m.contains("Bad credentials") && m.contains("GITHUB_TOKEN"))
        }
        other => panic!("{other:?}"),
    }
    for code in [405, 409] {
        match st(code, "Pull Request is not mergeable").into_host("merge of o/r#1") {
            HostError::Blocked(g) => {
                let c = g.first_failure().unwrap();
                assert!(c.detail.contains("Pull Request is not mergeable"), "{c:?}");
            }
            other => panic!("{other:?}"),
        }
    }
    match st(422, "Validation Failed (Label color invalid)").into_host("new label") {
        HostError::InvalidArgs(m) => assert!(m.contains("Label color invalid")),
        other => panic!("{other:?}"),
    }
    match GhError::RateLimited(
        "GitHub rate limit exhausted; resets at 17:00:00 UTC (in 3 min)".into(),
    )
    .into_host("listing")
    {
        HostError::TimedOut(m) => assert!(m.contains("resets at 17:00:00 UTC")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn settings_are_checked() {
    let words = |s: GithubSettings| match GithubHost::with_token(
        Paths::new("github"),
        s,
        None,
        TokenSource::None,
    ) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        words(settings(&["no-slash"])),
        "repos entry \"no-slash\" is not owner/name"
    );
    assert_eq!(
        words(settings(&["results/x"])),
        "an owner named \"results\" would hide the search results folder"
    );
    let mut s = settings(&["o/r"]);
    s.per_page = 101;
    assert_eq!(
        words(s),
        "per_page must be 1..=100 and list_limit at least 1"
    );
    let mut s = settings(&["o/r"]);
    s.list_limit = 0;
    assert_eq!(
        words(s),
        "per_page must be 1..=100 and list_limit at least 1"
    );
    let unknown = toml::from_str::<GithubSettings>("repo = [\"o/r\"]")
        .unwrap_err()
        .to_string();
    assert!(
        unknown.contains("unknown field `repo`, expected one of `repos`, `owners`"),
        "unknown keys are refused: {unknown}"
    );
}

#[test]
fn unreachable_github_never_hangs_and_keeps_the_tree() {
    // Port 9 (discard) on loopback: connection refused at once.
    let host = GithubHost::with_token(
        Paths::new("github"),
        settings(&["o/r"]),
        None,
        TokenSource::None,
    )
    .unwrap();
    let root = host.entry(&[]).unwrap().unwrap();
    assert!(
        root.description.contains("no token"),
        "{}",
        root.description
    );
    assert!(root.description.contains("GITHUB_TOKEN"));
    let names: Vec<String> = host
        .children(&[])
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, vec!["o", "results"]);
    // The configured repository is there; its description says GitHub could not be reached.
    let repo = host.entry(&["o".into(), "r".into()]).unwrap().unwrap();
    assert!(
        repo.description.contains("could not be read"),
        "{}",
        repo.description
    );
    // An issue cannot be read: an error with words, not a hang.
    let err = host
        .entry(&["o".into(), "r".into(), "issues".into(), "1".into()])
        .unwrap_err();
    assert!(
        matches!(err, HostError::Failed { .. } | HostError::TimedOut(_)),
        "{err:?}"
    );
    // Changes need a token.
    let g = host
        .guard(
            &["o".into(), "r".into(), "issues".into()],
            "create_issue",
            None,
        )
        .unwrap();
    assert!(!g.allowed());
    assert!(g.render().contains("no GitHub token"));
    let _ = Kind::Issue;
}

/// One HTTP answer on 127.0.0.1 per connection, `count` connections; the answer may quote
/// the request's Authorization header (as a careless server or proxy might).
fn answer_on_loopback(count: usize, status: &'static str, headers: String, echo_auth: bool) -> u16 {
    let body = move |auth: &str| {
        if echo_auth {
            format!("{{\"message\":\"Bad credentials: {auth}\"}}")
        } else {
            "{\"message\":\"API rate limit exceeded\"}".to_string()
        }
    };
    serve_on_loopback(count, status, headers, body)
}

/// `count` connections on 127.0.0.1, each answered with `status`, `headers` and the JSON
/// `body` makes of the request's Authorization header.
fn serve_on_loopback(
    count: usize,
    status: &'static str,
    headers: String,
    body: impl Fn(&str) -> String + Send + 'static,
) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(count) {
            let mut stream = stream.unwrap();
            let mut auth = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if line.to_ascii_lowercase().starts_with("authorization:") {
                    auth = line[14..].trim().to_string();
                }
            }
            let body = body(&auth);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\n{headers}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn an_exhausted_rate_limit_answers_at_once_with_the_reset_time() {
    use super::client::{now_secs, Client};
    use std::sync::atomic::Ordering;
    let reset = now_secs() + 600;
    let port = answer_on_loopback(
        1,
        "403 Forbidden",
        format!(
            "x-ratelimit-limit: 60\r\nx-ratelimit-remaining: 0\r\nx-ratelimit-reset: {reset}\r\n"
        ),
        false,
    );
    let c = Client::new(
        &format!("http://127.0.0.1:{port}"),
        None,
        std::time::Duration::from_secs(30),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    let e = c.get("/repos/o/r").unwrap_err();
    assert!(matches!(e, GhError::RateLimited(_)), "{e:?}");
    assert!(
        e.to_string()
            .contains("GitHub rate limit exhausted; resets at"),
        "{e}"
    );
    assert!(e.to_string().contains("(in 10 min)"), "{e}");
    // Known exhausted: the next request is refused without being sent (no hang, no wait).
    let e = c.get("/repos/o/other").unwrap_err();
    assert!(matches!(e, GhError::RateLimited(_)));
    assert_eq!(c.stats.requests.load(Ordering::Relaxed), 1);
    match e.into_host("listing") {
        HostError::TimedOut(m) => assert!(m.contains("resets at")),
        other => panic!("{other:?}"),
    }
    // Headers alone set the state too (what the root's description shows).
    let mut h = http::HeaderMap::new();
    h.insert(
        "x-ratelimit-remaining",
        http::HeaderValue::from_static("4999"),
    );
    c.note_rate(&h);
    assert_eq!(c.rate().remaining, Some(4999));
}

#[test]
fn the_token_is_scrubbed_from_githubs_words() {
    use super::client::Client;
    let secret = "ghp_unitCanary0123456789abcdef";
    let port = answer_on_loopback(1, "401 Unauthorized", String::new(), true);
    let c = Client::new(
        &format!("http://127.0.0.1:{port}"),
        Some(secret),
        std::time::Duration::from_secs(30),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    let e = c.get("/user").unwrap_err();
    let words = e.clone().into_host("who am I").to_string();
    assert!(
        words.contains("Bad credentials") && words.contains("[token]"),
        "{words}"
    );
    assert!(!words.contains(secret), "{words}");
    assert!(matches!(e.into_host("x"), HostError::Forbidden(_)));
}

fn repo(owner: &str, name: &str) -> Repo {
    Repo {
        owner: owner.to_string(),
        name: name.to_string(),
    }
}

fn segs(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| s.to_string()).collect()
}

#[test]
fn each_entry_offers_its_ops_in_order_with_their_schemas() {
    let r = repo("o", "r");
    let issue = Node::Item(r.clone(), Kind::Issue, 1);
    let pull = Node::Item(r.clone(), Kind::Pull, 2);
    let common = [
        "read_body",
        "get_metadata",
        "comment",
        "close",
        "reopen",
        "label",
        "assign",
        "unassign",
    ];
    let cases: Vec<(Node, Vec<&str>)> = vec![
        (Node::Root, vec!["search"]),
        (
            Node::Repo(r.clone()),
            vec!["search", "create_issue", "create_status", "read_file"],
        ),
        (Node::Issues(r.clone()), vec!["create_issue"]),
        (Node::Labels(r.clone()), vec!["create_label"]),
        (issue.clone(), [&common[..], &["lock", "unlock"]].concat()),
        (
            pull.clone(),
            [&common[..], &["diff", "request_review", "approve", "merge"]].concat(),
        ),
        (Node::Check(r.clone(), 2, "ci".into()), vec!["read_log"]),
        (Node::Review(r.clone(), 2, 3), vec!["read_body"]),
        (Node::File(r.clone(), 2, "f".into()), vec!["read_body"]),
        (Node::Label(r.clone(), "bug".into()), vec!["issues"]),
        (Node::Branch(r.clone(), "main".into()), vec!["get_metadata"]),
        (Node::Pulls(r.clone()), vec![]),
        (Node::Results, vec![]),
    ];
    for (node, names) in cases {
        assert_eq!(OPS.names(&node), names, "{node:?}");
    }
    let schema = |node: &Node, op: &str| {
        OPS.specs(node)
            .into_iter()
            .find(|s| s.name == op)
            .unwrap_or_else(|| panic!("{op}"))
            .schema
    };
    // Optional arguments are left out, never null; enums and defaults as GitHub spells them.
    assert_eq!(
        schema(&issue, "lock")["properties"]["reason"],
        json!({"type": "string", "enum": ["off-topic", "too heated", "resolved", "spam"]})
    );
    assert_eq!(
        schema(&pull, "merge")["properties"]["method"],
        json!({"type": "string", "enum": ["merge", "squash", "rebase"], "default": "merge"})
    );
    let search = schema(&Node::Root, "search");
    assert_eq!(search["required"], json!(["query"]));
    assert_eq!(
        search["properties"]["limit"],
        json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "how many hits to keep"})
    );
    let status = schema(&Node::Repo(r.clone()), "create_status");
    assert_eq!(status["required"], json!(["sha", "state"]));
    assert_eq!(
        status["properties"]["context"],
        json!({"type": "string", "minLength": 1, "description": "the status's name, e.g. ci/build"})
    );
    assert_eq!(
        status["properties"]["description"],
        json!({"type": "string"})
    );
    let file = schema(&Node::Repo(r), "read_file");
    assert_eq!(file["properties"]["ref"]["type"], "string");
    assert_eq!(schema(&pull, "label")["minProperties"], 1);
    assert!(OPS.specs(&pull)[3]
        .description
        .starts_with("Close the pull request without merging"));
}

#[test]
fn bad_arguments_are_refused_with_the_op_and_argument_before_any_guard() {
    let host = GithubHost::with_token(
        Paths::new("github"),
        settings(&["o/r"]),
        None,
        TokenSource::None,
    )
    .unwrap();
    let nobody = Caller::default();
    let refused = |path: &[&str], op: &str, args: serde_json::Value| match host.call(
        &segs(path),
        op,
        &args,
        &nobody,
    ) {
        Err(HostError::InvalidArgs(m)) => m,
        other => panic!("{op} {args}: {other:?}"),
    };
    assert_eq!(
        refused(&[], "search", json!({"query": "x", "limit": 101})),
        "argument limit of search: must be 1..100, not 101"
    );
    assert!(refused(&[], "search", json!({"query": " \n"})).contains("must not be empty"));
    let labels = ["o", "r", "labels"];
    assert!(
        refused(&labels, "create_label", json!({"name": "bug"})).contains("missing field `color`")
    );
    assert!(refused(
        &["o", "r"],
        "create_status",
        json!({"sha": "1", "state": "done"})
    )
    .contains("argument state of create_status: unknown variant `done`"));
    // Good arguments reach the guard: without a token, nothing can change.
    match host.call(
        &segs(&labels),
        "create_label",
        &json!({"name": "bug", "color": "d73a4a"}),
        &nobody,
    ) {
        Err(HostError::Blocked(g)) => assert!(g.render().contains("no GitHub token")),
        other => panic!("{other:?}"),
    }
    match host.guard(
        &segs(&["o", "r", "issues"]),
        "create_issue",
        Some(&json!({"title": 1})),
    ) {
        Err(HostError::InvalidArgs(m)) => assert!(m.contains("argument title of create_issue")),
        other => panic!("{other:?}"),
    }
}

/// Repositories may be named like an entry's own files (`README.md`, `ops`): every path
/// the host prints escapes them as the tree does (`ops~`), so it names a real entry.
#[test]
fn printed_paths_escape_repositories_named_like_reserved_names() {
    let pull = r#"{"number": 1, "state": "open", "title": "t", "user": {"login": "a"}}"#;
    let port = serve_on_loopback(3, "200 OK", String::new(), move |_| pull.to_string());
    let mut s = settings(&["octo/README.md", "octo/ops"]);
    s.base_uri = format!("http://127.0.0.1:{port}");
    let host = GithubHost::with_token(Paths::new("github"), s, None, TokenSource::None).unwrap();
    crate::hosts::lock(&host.searches).push(SearchRun {
        id: 1,
        query: "q".into(),
        total: 1,
        hits: vec![Hit {
            repo: repo("octo", "README.md"),
            kind: Kind::Issue,
            number: 4,
            title: "t".into(),
            state: "open".into(),
        }],
    });
    let hit = host
        .entry(&segs(&["results", "1", "hits", "1"]))
        .unwrap()
        .unwrap();
    assert!(
        hit.description
            .ends_with(" — see github/octo/README.md/issues/4"),
        "{}",
        hit.description
    );
    let g = host
        .guard(&segs(&["octo", "ops", "pulls", "1"]), "reopen", None)
        .unwrap();
    assert!(
        g.render().contains(
            "PR #1 is open; nothing to reopen (close it with github/octo/ops~/pulls/1/ops/close)"
        ),
        "{}",
        g.render()
    );
}
