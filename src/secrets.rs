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

/// Where a URL's authority (`user:pw@host:port`) ends in `tail` (what follows `://`):
/// at the path, query or fragment, a quote or a line end; at white space only when no
/// `@` follows before the next one of those, so a password holding a tab or a space is
/// still taken for one (a secret is better hidden once too often than shown once).
fn authority_of(tail: &str) -> (&str, &str) {
    let hard = tail
        .find(['/', '?', '#', '"', '\'', '\n', '\r'])
        .unwrap_or(tail.len());
    let soft = tail[..hard].find(char::is_whitespace).unwrap_or(hard);
    let end = if tail[..hard].contains('@') && tail[soft..hard].contains('@') {
        // The last `@` before the hard end closes the user info.
        hard
    } else {
        soft
    };
    tail.split_at(end)
}

/// The password of every URL in `text` (`postgresql://user:pw@host/db`) replaced.
pub fn redact_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let (authority, after) = authority_of(tail);
        match authority.rsplit_once('@') {
            Some((userinfo, host)) if userinfo.contains(':') => {
                let user = userinfo.split(':').next().unwrap_or_default();
                out.push_str(&format!("{user}:{REDACTED}@{host}"));
            }
            _ => out.push_str(authority),
        }
        rest = after;
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

// ---- the secrets this daemon knows: nothing the world prints shows them --------------

/// A value shorter than this is not scrubbed by value (it would hit ordinary words).
pub const MIN_SCRUBBED: usize = 6;

fn known() -> &'static std::sync::RwLock<Vec<String>> {
    static KNOWN: OnceLock<std::sync::RwLock<Vec<String>>> = OnceLock::new();
    KNOWN.get_or_init(Default::default)
}

/// Never print `value` again (see `scrub`): a secret the manifest, the environment or a
/// URL holds. Values shorter than `MIN_SCRUBBED` are only redacted where they stand.
pub fn register(value: &str) {
    let value = value.trim();
    if value.chars().count() < MIN_SCRUBBED || value == REDACTED {
        return;
    }
    let Ok(mut known) = known().write() else {
        return;
    };
    if !known.iter().any(|k| k == value) {
        known.push(value.to_string());
        // Longest first: a secret that contains another is replaced whole.
        known.sort_by_key(|k| std::cmp::Reverse(k.len()));
    }
}

/// `text` with every registered secret replaced by `REDACTED` (borrowed when it holds
/// none). What the world prints (descriptions, guards, results, the README, xattrs, the
/// known world, logs) goes through here.
pub fn scrub(text: &str) -> std::borrow::Cow<'_, str> {
    let Ok(known) = known().read() else {
        return std::borrow::Cow::Borrowed(text);
    };
    if !known.iter().any(|k| text.contains(k.as_str())) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for k in known.iter() {
        if out.contains(k.as_str()) {
            out = out.replace(k.as_str(), REDACTED);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// For logs: registered secrets and every token-shaped word or URL password.
pub fn scrub_log(text: &str) -> String {
    redact_tokens(&scrub(text))
}

/// The passwords of URLs in `text` (`scheme://user:PASSWORD@host`, `?password=…`).
fn url_passwords(text: &str, out: &mut Vec<String>) {
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let tail = &rest[at + 3..];
        let (authority, _) = authority_of(tail);
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            if let Some((_, pw)) = userinfo.split_once(':') {
                out.push(pw.to_string());
            }
        }
        rest = tail;
    }
    let mut rest = text;
    while let Some(at) = rest.find("password=") {
        let tail = &rest[at + "password=".len()..];
        let end = tail
            .find(|c: char| c == '&' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = tail;
    }
}

/// Token-shaped words of `text`.
fn token_words(text: &str, out: &mut Vec<String>) {
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
        if is_token_word(word) {
            out.push(word.to_string());
        }
    }
}

/// Every secret a string value holds wherever it stands: token shapes, URL passwords.
fn shaped(s: &str, out: &mut Vec<String>) {
    token_words(s, out);
    url_passwords(s, out);
}

fn collect_value(key: &str, v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::String(s) => {
            shaped(s, out);
            // A key that names a variable (`token_env`) holds a name, not the secret.
            if is_secret_name(key) && !key.ends_with("_env") {
                out.push(s.clone());
            }
        }
        toml::Value::Array(items) => {
            let mut after_flag = false;
            for item in items {
                if let toml::Value::String(s) = item {
                    if after_flag {
                        out.push(s.clone());
                    }
                    after_flag = false;
                    if s.starts_with('-') {
                        match s.split_once('=') {
                            Some((flag, value)) if is_secret_name(flag) => {
                                out.push(value.to_string())
                            }
                            Some(_) => {}
                            None => after_flag = is_secret_name(s),
                        }
                    }
                }
                collect_value(key, item, out);
            }
        }
        toml::Value::Table(t) => collect_table(t, key == "env", out),
        _ => {}
    }
}

fn collect_table(t: &toml::Table, env: bool, out: &mut Vec<String>) {
    for (k, v) in t {
        shaped(k, out);
        match v {
            // An `env` table's variables: secret by their names (or their shapes).
            toml::Value::String(s) if env && is_secret_name(k) => out.push(s.clone()),
            _ => collect_value(k, v, out),
        }
    }
}

/// Remember every secret of a manifest's text (see `register`): values of secret-named
/// keys and `env` variables, values after secret flags on command lines, token-shaped
/// words and URL passwords anywhere (a description, a policy's reason).
pub fn register_manifest(text: &str) {
    let mut found = Vec::new();
    match toml::from_str::<toml::Table>(text) {
        Ok(t) => collect_table(&t, false, &mut found),
        Err(_) => shaped(text, &mut found),
    }
    found.iter().for_each(|v| register(v));
}

/// Remember the secrets of an environment: values of secret-named variables, token-shaped
/// words and URL passwords in any value.
pub fn register_env(vars: impl IntoIterator<Item = (String, String)>) {
    let mut found = Vec::new();
    for (k, v) in vars {
        if is_secret_name(&k) {
            found.push(v.clone());
        }
        shaped(&v, &mut found);
    }
    found.iter().for_each(|v| register(v));
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
    fn a_password_holding_white_space_is_still_hidden() {
        for url in [
            "postgresql://u:pw\t@h/db",
            "postgresql://u:p w@h/db",
            "postgresql://u:pw\t\tx@h:5432/db?sslmode=require",
        ] {
            let shown = redact_url_passwords(&format!("url = \"{url}\""));
            assert!(
                shown.contains(&format!("u:{REDACTED}@h")),
                "{url:?} → {shown:?}"
            );
            assert!(!shown.contains("pw") && !shown.contains("p w"), "{shown:?}");
        }
        // White space with no `@` after it still ends a URL in prose.
        assert_eq!(
            redact_url_passwords("see http://example.org and a@b"),
            "see http://example.org and a@b"
        );
    }

    #[test]
    fn registered_secrets_are_scrubbed_wherever_they_are_printed() {
        register_manifest(
            r#"
[world]
description = "a world with ghp_canaryWORLDabcdefghij0123"
[[host]]
kind = "agent"
path = "a"
command = ["helper", "--api-key", "canary-arg-73519"]
env = { OPENAI_API_KEY = "canary-env-12345", PLAIN_PATH = "/srv/not-a-secret" }
token_env = "MY_GITHUB_TOKEN_VAR"
[[policy]]
match = "x/ops/y"
action = "deny"
reason = "ask xoxb-canary-reason-99887"
"#,
        );
        register_env([
            (
                "SOME_SERVICE_TOKEN".to_string(),
                "canary-env-token-424242".to_string(),
            ),
            (
                "DATABASE_URL".to_string(),
                "postgresql://u:canary-url-pw@db/x".to_string(),
            ),
            ("HOME".to_string(), "/root".to_string()),
        ]);
        let printed = "ghp_canaryWORLDabcdefghij0123 canary-arg-73519 canary-env-12345 \
                       xoxb-canary-reason-99887 canary-env-token-424242 canary-url-pw";
        let shown = scrub(printed);
        assert!(!shown.contains("canary"), "{shown}");
        assert_eq!(shown.matches(REDACTED).count(), 6, "{shown}");
        // Names and ordinary values stay: only secrets are registered.
        for kept in [
            "/srv/not-a-secret",
            "MY_GITHUB_TOKEN_VAR",
            "/root",
            "helper",
        ] {
            assert_eq!(scrub(kept), kept);
        }
        assert!(matches!(
            scrub("nothing here"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            scrub_log("token sk-abcdefghijklmnop"),
            format!("token {REDACTED}")
        );
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
