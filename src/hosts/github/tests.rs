//! Unit tests: paths, GitHub's words, errno mapping, rate-limit words. The host against
//! recorded GitHub responses is tested in tests/github.rs.

use super::client::{github_message, next_link, reset_words, GhError};
use super::{decode_name, encode_name, GithubHost, GithubSettings, Kind, Node, TokenSource};
use crate::world::host::{Host, HostError};

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
    let words =
        |s: GithubSettings| match GithubHost::with_token("github", s, None, TokenSource::None) {
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
    let host =
        GithubHost::with_token("github", settings(&["o/r"]), None, TokenSource::None).unwrap();
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
        matches!(err, HostError::Backend(_) | HostError::TimedOut(_)),
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
            let body = if echo_auth {
                format!("{{\"message\":\"Bad credentials: {auth}\"}}")
            } else {
                "{\"message\":\"API rate limit exceeded\"}".to_string()
            };
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
