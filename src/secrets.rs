//! Keeping secrets out of the world: what looks secret, the manifest as the world may show
//! it, and the environment a host's child starts from.
//!
//! Nothing here decides by the line a value sits on: the manifest is parsed and every value
//! judged by its key, the table it sits in (`env`), the flag before it on a command line and
//! its own shape (`ghp_…`, `sk-…`, `AKIA…`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

/// What a redacted value shows.
pub const REDACTED: &str = "<redacted>";

/// Words that make a name (a key, an environment variable, a flag) secret.
const SECRET_WORDS: [&str; 7] = [
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "credential",
    "auth",
];

/// Prefixes of well-known token formats (GitHub, OpenAI and Anthropic, Slack).
const TOKEN_PREFIXES: [&str; 10] = [
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "sk-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
];

/// What a child of a host inherits from the daemon's environment, at most.
const CHILD_ALLOWLIST: [&str; 8] = [
    "PATH", "HOME", "LANG", "TERM", "TZ", "USER", "TMPDIR", "LOGNAME",
];

/// Whether a name says its value is secret (`GITHUB_TOKEN`, `api_key`, `--password`).
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| lower.contains(w))
}

/// Whether one word has the shape of a known token.
fn is_token_word(word: &str) -> bool {
    let body_ok = |rest: &str| {
        rest.len() >= 8
            && rest
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if let Some(rest) = word
        .strip_prefix("AKIA")
        .or_else(|| word.strip_prefix("ASIA"))
    {
        return rest.len() == 16
            && rest
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    }
    TOKEN_PREFIXES
        .iter()
        .any(|p| word.strip_prefix(p).is_some_and(body_ok))
}

/// `text` with every word shaped like a known token replaced.
pub fn redact_tokens(text: &str) -> String {
    let text = &redact_url_passwords(text);
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if is_token_word(word) {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The password of every URL in `text` (`postgresql://user:pw@host/db`) replaced.
pub fn redact_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        // The authority ends at the path, or at white space or a quote around the URL.
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rsplit_once('@') {
            Some((userinfo, host)) if userinfo.contains(':') => {
                let user = userinfo.split(':').next().unwrap_or_default();
                out.push_str(&format!("{user}:{REDACTED}@{host}"));
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    redact_password_params(&out)
}

/// A `password=` parameter of a URL's query (`…/db?user=u&password=pw`) replaced, up to
/// the next parameter, white space or quote.
fn redact_password_params(text: &str) -> String {
    const KEY: &str = "password=";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let (head, tail) = rest.split_at(at + KEY.len());
        out.push_str(head);
        let in_query = matches!(head[..at].chars().last(), Some('?' | '&'));
        let end = tail
            .find(|c: char| c == '&' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        if in_query && end > 0 {
            out.push_str(REDACTED);
        } else {
            out.push_str(&tail[..end]);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Whether a string contains something shaped like a known token.
pub fn has_token(text: &str) -> bool {
    redact_tokens(text) != text
}

fn redact_value(v: &mut toml::Value) {
    match v {
        toml::Value::Array(items) => items.iter_mut().for_each(redact_value),
        toml::Value::Table(t) => t.iter_mut().for_each(|(_, v)| redact_value(v)),
        other => *other = toml::Value::String(REDACTED.to_string()),
    }
}

/// A command line with every value of a secret-sounding flag replaced: `--api-key X`,
/// `--token=X`.
fn redact_command(items: &mut [toml::Value]) {
    let mut after_flag = false;
    for item in items.iter_mut() {
        let toml::Value::String(s) = item else {
            after_flag = false;
            continue;
        };
        if after_flag {
            *s = REDACTED.to_string();
            after_flag = false;
            continue;
        }
        if s.starts_with('-') {
            match s.split_once('=') {
                Some((flag, _)) if is_secret_name(flag) => *s = format!("{flag}={REDACTED}"),
                Some(_) => {}
                None => after_flag = is_secret_name(s),
            }
        }
    }
}

/// A command line as it may be shown (in words, logs): values of secret flags and
/// token-shaped words replaced.
pub fn shown_command(argv: &[String]) -> String {
    let mut items: Vec<toml::Value> = argv
        .iter()
        .map(|a| toml::Value::String(a.clone()))
        .collect();
    redact_command(&mut items);
    items
        .iter()
        .map(|v| redact_tokens(v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn redact_table(table: &mut toml::Table) {
    for (key, value) in table.iter_mut() {
        if key == "env" || is_secret_name(key) {
            redact_value(value);
            continue;
        }
        redact_tree(value);
    }
}

/// A key may be a token itself (`ghp_… = true`), at any depth: rename it.
fn rename_token_keys(table: &mut toml::Table) {
    for (_, v) in table.iter_mut() {
        rename_token_keys_in(v);
    }
    if table.keys().any(|k| has_token(k)) {
        let entries = std::mem::take(table);
        for (k, v) in entries {
            table.insert(redact_tokens(&k), v);
        }
    }
}

fn rename_token_keys_in(value: &mut toml::Value) {
    match value {
        toml::Value::Table(t) => rename_token_keys(t),
        toml::Value::Array(items) => items.iter_mut().for_each(rename_token_keys_in),
        _ => {}
    }
}

fn redact_tree(value: &mut toml::Value) {
    match value {
        toml::Value::Table(t) => redact_table(t),
        toml::Value::Array(items) => {
            redact_command(items);
            items.iter_mut().for_each(redact_tree);
        }
        toml::Value::String(s) if has_token(s) => *s = redact_tokens(s),
        _ => {}
    }
}

/// The manifest as the world may show it (`.wip/config`, logs): parsed, every secret value
/// replaced, written back as TOML. Text that does not parse (it never reaches a mount) is
/// shown with its token-shaped words and secret-keyed lines replaced.
pub fn redact_manifest(text: &str) -> String {
    match toml::from_str::<toml::Table>(text) {
        Ok(mut table) => {
            redact_table(&mut table);
            rename_token_keys(&mut table);
            toml::to_string(&table).unwrap_or_else(|e| format!("# manifest not shown: {e}\n"))
        }
        Err(_) => text
            .lines()
            .map(|line| match line.split_once('=') {
                Some((k, _)) if is_secret_name(k) => {
                    format!("{} = \"{REDACTED}\"", redact_tokens(k.trim_end()))
                }
                _ => redact_tokens(line),
            })
            .map(|l| l + "\n")
            .collect(),
    }
}

fn withheld() -> &'static Mutex<BTreeSet<String>> {
    static NAMES: OnceLock<Mutex<BTreeSet<String>>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(BTreeSet::new()))
}

/// Never hand the variable `name` to a child unless its host names it (a github host's
/// `token_env`, whatever it is called).
pub fn withhold_env(name: &str) {
    if let Ok(mut names) = withheld().lock() {
        names.insert(name.to_string());
    }
}

/// Whether a daemon variable may reach a child without its host naming it.
fn inheritable(name: &str, withheld: &BTreeSet<String>) -> bool {
    let allowed = CHILD_ALLOWLIST.contains(&name)
        || name == "LC_ALL"
        || name.starts_with("LC_")
        || name.starts_with("WIP_");
    allowed && !is_secret_name(name) && !withheld.contains(name)
}

/// The whole environment of a host's child: the allowlisted part of `daemon` (minus
/// anything secret-sounding or withheld), the variables `pass` names (taken from `daemon`
/// as they are), then the host's own `env`, which wins.
pub fn child_env_from(
    daemon: impl IntoIterator<Item = (String, String)>,
    pass: &[String],
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let withheld = withheld().lock().map(|n| n.clone()).unwrap_or_default();
    let mut out = BTreeMap::new();
    for (k, v) in daemon {
        if inheritable(&k, &withheld) || pass.contains(&k) {
            out.insert(k, v);
        }
    }
    out.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords_in_credentials_and_queries() {
        assert_eq!(
            redact_url_passwords(
                "url = \"postgresql://db/wip?user=u&password=pw1&sslmode=require\""
            ),
            format!("url = \"postgresql://db/wip?user=u&password={REDACTED}&sslmode=require\"")
        );
        assert_eq!(
            redact_url_passwords("postgresql://u:pw2@db/wip?password=pw3"),
            format!("postgresql://u:{REDACTED}@db/wip?password={REDACTED}")
        );
        // Not a query parameter: left alone.
        assert_eq!(redact_url_passwords("no password=here"), "no password=here");
    }

    #[test]
    fn names_and_token_shapes() {
        for n in [
            "GITHUB_TOKEN",
            "api_key",
            "--password",
            "OPENAI_API_KEY",
            "AUTH_HEADER",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["PATH", "command", "page_size", "--model"] {
            assert!(!is_secret_name(n), "{n}");
        }
        for t in [
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0123456789_abc",
            "sk-proj-abcdefghijklmnop",
            "xoxb-1234-5678-abcdefgh",
            "AKIAIOSFODNN7EXAMPLE",
        ] {
            assert!(has_token(t), "{t}");
            assert_eq!(
                redact_tokens(&format!("x {t} y")),
                format!("x {REDACTED} y")
            );
        }
        for t in [
            "sk-1",
            "ghp_",
            "risk-assessment-x",
            "AKIAsmall",
            "task-force",
        ] {
            assert!(!has_token(t), "{t}");
        }
    }

    #[test]
    fn manifest_redaction_sees_inline_tables_commands_and_shapes() {
        let text = r#"
[world]
name = "demo"
[[host]]
kind = "agents"
path = "agents/helper"
command = ["helper", "--api-key", "plain-secret-1", "--model", "m1", "--token=plain-secret-2"]
env = { OPENAI_API_KEY = "sk-abcdefghijklmnop", PLAIN = "plain-secret-3" }
[[host]]
kind = "github"
path = "github"
token_env = "MY_GH"
description = "uses ghp_abcdefghijklmnopqrstuvwxyz0123"
labels = { ghp_abcdefghijklmnopqrstuvwxyz9999 = "x" }
[host.auth]
user = "plain-secret-4"
"#;
        let out = redact_manifest(text);
        for secret in [
            "plain-secret-1",
            "plain-secret-2",
            "plain-secret-3",
            "plain-secret-4",
            "sk-abcdefghijklmnop",
            "ghp_abcdefghijklmnopqrstuvwxyz0123",
            "ghp_abcdefghijklmnopqrstuvwxyz9999",
        ] {
            assert!(!out.contains(secret), "{secret} in\n{out}");
        }
        for kept in [
            "demo",
            "agents/helper",
            "--model",
            "m1",
            "--api-key",
            "OPENAI_API_KEY",
        ] {
            assert!(out.contains(kept), "{kept} missing in\n{out}");
        }
        // Still a manifest of the same shape.
        let back: toml::Table = toml::from_str(&out).unwrap();
        assert_eq!(back["host"].as_array().unwrap().len(), 2);
        // Text that does not parse still loses its secrets.
        let bad = redact_manifest("api_key = \"abc\nx = ghp_abcdefghijklmnopqrstuvwxyz0123\n");
        assert!(!bad.contains("abc") && !bad.contains("ghp_abc"), "{bad}");
    }

    #[test]
    fn commands_are_shown_without_their_secrets() {
        let argv = [
            "srv",
            "--api-key",
            "abc123",
            "--port",
            "8",
            "--token=xyz",
            "ghp_abcdefghijklmnop",
        ]
        .map(String::from);
        assert_eq!(
            shown_command(&argv),
            "srv --api-key <redacted> --port 8 --token=<redacted> <redacted>"
        );
    }

    #[test]
    fn a_child_env_holds_the_allowlist_the_passed_and_its_own() {
        withhold_env("MY_GH_FOR_TEST");
        let daemon = [
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("LC_CTYPE", "C.UTF-8"),
            ("WIP_SESSION", "7"),
            ("WIP_TOKEN", "t"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("MY_GH_FOR_TEST", "y"),
            ("RANDOM_THING", "z"),
            ("NEEDED_KEY", "k"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let own = BTreeMap::from([("EXTRA".to_string(), "e".to_string())]);
        let env = child_env_from(daemon, &["NEEDED_KEY".to_string()], &own);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "EXTRA",
                "HOME",
                "LC_CTYPE",
                "NEEDED_KEY",
                "PATH",
                "WIP_SESSION"
            ]
        );
    }
}
