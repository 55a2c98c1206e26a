//! The GitHub client: octocrab on a small runtime of our own, a per-URL cache with a TTL and
//! ETag revalidation (a 304 costs no rate limit), and the rate-limit state GitHub reports.
//!
//! Host methods are synchronous and called from FUSE threads, never from inside a runtime:
//! every request is `block_on` with a deadline, so nothing here can hang a caller.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::header::{HeaderMap, HeaderValue, ACCEPT, ETAG, IF_NONE_MATCH, LINK};
use http::{Method, StatusCode};
use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde_json::Value;

use crate::host::{Condition, Guard, HostError};
use crate::hosts::lock;

/// A response body (JSON, or the raw text of a non-JSON media type) and its next page.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    pub body: Value,
    /// Path and query of the next page (from `Link: rel="next"`), relative to the API root.
    pub next: Option<String>,
}

struct Cached {
    /// A 404 is remembered too (kernels look names up again and again).
    missing: Option<String>,
    etag: Option<String>,
    page: Arc<Page>,
    at: Instant,
    /// Seeded from a listing (GitHub lists fewer fields than it shows one by one).
    partial: bool,
}

/// What GitHub last said of the rate limit (the `x-ratelimit-*` headers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rate {
    pub limit: Option<u64>,
    pub remaining: Option<u64>,
    /// Unix seconds.
    pub reset: Option<u64>,
}

/// Counts, for the benchmark and tests.
#[derive(Debug, Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub not_modified: AtomicU64,
    pub cache_hits: AtomicU64,
}

/// Why a request failed, in GitHub's words where it gave some.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GhError {
    #[error("GitHub answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("{0}")]
    RateLimited(String),
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Transport(String),
}

impl GhError {
    pub fn status(&self) -> Option<u16> {
        match self {
            GhError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// GitHub's own message (without the status prefix).
    pub fn message(&self) -> String {
        match self {
            GhError::Status { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }

    /// The host error, errno by GitHub's status: 404 ENOENT, 401/403 EACCES, 405/409 EPERM
    /// (a guard GitHub enforces), 422 EINVAL, rate limit and timeouts ETIMEDOUT, else EIO.
    /// `what` names what was asked, e.g. `merge of octo/hello#7`.
    pub fn into_host(self, what: &str) -> HostError {
        match &self {
            GhError::Status { status, message } => match status {
                404 => HostError::NotFound(format!("{what}: GitHub says Not Found ({message})")),
                401 => HostError::Forbidden(format!(
                    "{what}: GitHub rejected the credentials ({message}); set GITHUB_TOKEN to a valid token or run `gh auth login`, then remount"
                )),
                403 => HostError::Forbidden(format!("{what}: GitHub refused ({message})")),
                405 | 409 => HostError::Blocked(Guard::new(vec![Condition::check(
                    "github_accepts",
                    false,
                    format!("GitHub refused the {what} ({status}): {message}"),
                )])),
                422 => HostError::InvalidArgs(format!("{what}: GitHub rejected it: {message}")),
                _ => HostError::failed(what, self),
            },
            GhError::RateLimited(m) | GhError::Timeout(m) => {
                HostError::TimedOut(format!("{what}: {m}"))
            }
            GhError::Transport(_) => HostError::failed(what, self),
        }
    }
}

pub type GhResult<T> = Result<T, GhError>;

pub struct Client {
    octo: Octocrab,
    rt: tokio::runtime::Runtime,
    cache: Mutex<HashMap<String, Cached>>,
    ttl: Duration,
    timeout: Duration,
    rate: Mutex<Rate>,
    /// Only to scrub it from any text we pass on; never sent anywhere but the header.
    secret: Option<String>,
    pub stats: Stats,
}

/// `HH:MM:SS UTC (in N min)` for a Unix time.
pub fn reset_words(reset: u64, now: u64) -> String {
    let secs = reset % 86_400;
    let wait = reset.saturating_sub(now);
    let mins = wait.div_ceil(60);
    format!(
        "{:02}:{:02}:{:02} UTC (in {} min)",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        mins
    )
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// GitHub's reset header is Unix seconds; some recordings store milliseconds.
fn parse_reset(v: &str) -> Option<u64> {
    let n: u64 = v.trim().parse().ok()?;
    Some(if n > 100_000_000_000 { n / 1000 } else { n })
}

fn header_str(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The `rel="next"` target of a Link header as path and query (GitHub gives absolute URLs;
/// the client adds its own base URI).
pub fn next_link(link: &str) -> Option<String> {
    for part in link.split(',') {
        let mut pieces = part.split(';');
        let url = pieces
            .next()?
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>');
        if pieces.any(|p| p.trim() == "rel=\"next\"") {
            let rest = match url.split_once("://") {
                Some((_, r)) => r,
                None => url,
            };
            return rest.find('/').map(|i| rest[i..].to_string());
        }
    }
    None
}

/// GitHub's error words: `message`, then each entry of `errors`.
pub fn github_message(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        let t = body.trim();
        return if t.is_empty() {
            "no message".to_string()
        } else {
            t.chars().take(300).collect()
        };
    };
    let mut msg = v["message"].as_str().unwrap_or("no message").to_string();
    if let Some(errors) = v["errors"].as_array() {
        let parts: Vec<String> = errors
            .iter()
            .map(|e| match e {
                Value::String(s) => s.clone(),
                _ => match e["message"].as_str() {
                    Some(m) => m.to_string(),
                    None => [&e["resource"], &e["field"], &e["code"]]
                        .iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                },
            })
            .filter(|s| !s.is_empty())
            .collect();
        if !parts.is_empty() {
            msg.push_str(&format!(" ({})", parts.join("; ")));
        }
    }
    msg
}

/// Percent-encode one path segment (branch names hold `/`, labels hold spaces).
pub fn seg(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Percent-encode a query value.
pub fn query_value(s: &str) -> String {
    seg(s)
}

/// Why the GitHub client cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("base_uri {uri:?} is not a URI: {source}")]
    BaseUri {
        uri: String,
        source: octocrab::Error,
    },
    #[error("cannot build the GitHub client: {0}")]
    Build(#[source] octocrab::Error),
}

impl Client {
    pub fn new(
        base_uri: &str,
        token: Option<&str>,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("github-http")
            .enable_all()
            .build()
            .map_err(ClientError::Runtime)?;
        // octocrab's service stack spawns onto the current runtime while it is built.
        let octo = {
            let _in = rt.enter();
            let mut b = Octocrab::builder()
                .base_uri(base_uri)
                .map_err(|source| ClientError::BaseUri {
                    uri: base_uri.to_string(),
                    source,
                })?
                // Never wait out a rate limit inside a call: we answer ETIMEDOUT instead.
                .add_retry_config(RetryConfig::None)
                .set_connect_timeout(Some(timeout))
                .set_read_timeout(Some(timeout))
                .set_write_timeout(Some(timeout));
            if let Some(t) = token {
                b = b.personal_token(t.to_string());
            }
            b.build().map_err(ClientError::Build)?
        };
        Ok(Client {
            octo,
            rt,
            cache: Mutex::new(HashMap::new()),
            ttl,
            timeout,
            rate: Mutex::new(Rate::default()),
            secret: token.map(str::to_string).filter(|t| !t.is_empty()),
            stats: Stats::default(),
        })
    }

    pub fn rate(&self) -> Rate {
        lock(&self.rate).clone()
    }

    fn scrub(&self, s: String) -> String {
        match &self.secret {
            Some(t) => s.replace(t.as_str(), "[token]"),
            None => s,
        }
    }

    fn exhausted(&self) -> Option<GhError> {
        let r = lock(&self.rate).clone();
        let now = now_secs();
        match (r.remaining, r.reset) {
            (Some(0), Some(reset)) if reset > now => Some(GhError::RateLimited(format!(
                "GitHub rate limit exhausted; resets at {}",
                reset_words(reset, now)
            ))),
            _ => None,
        }
    }

    pub(super) fn note_rate(&self, h: &HeaderMap) {
        let mut r = lock(&self.rate);
        if let Some(v) = header_str(h, "x-ratelimit-limit").and_then(|v| v.parse().ok()) {
            r.limit = Some(v);
        }
        if let Some(v) = header_str(h, "x-ratelimit-remaining").and_then(|v| v.parse().ok()) {
            r.remaining = Some(v);
        }
        if let Some(v) = header_str(h, "x-ratelimit-reset").and_then(|v| parse_reset(&v)) {
            r.reset = Some(v);
        }
    }

    /// One request, bounded by the timeout: status, headers, body text.
    fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: HeaderMap,
    ) -> GhResult<(StatusCode, HeaderMap, String)> {
        if let Some(e) = self.exhausted() {
            return Err(e);
        }
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let octo = self.octo.clone();
        let path_owned = path.to_string();
        let body = body.cloned();
        let fut = async move {
            let mut builder = http::Request::builder().method(method).uri(path_owned);
            for (k, v) in headers.iter() {
                builder = builder.header(k, v);
            }
            let req = octo.build_request(builder, body.as_ref())?;
            let res = octo.execute(req).await?;
            let status = res.status();
            let headers = res.headers().clone();
            let text = octo.body_to_string(res).await?;
            Ok::<_, octocrab::Error>((status, headers, text))
        };
        let limit = self.timeout;
        // The deadline's timer must be made inside the runtime.
        let out = self
            .rt
            .block_on(async move { tokio::time::timeout(limit, fut).await });
        let (status, headers, text) = match out {
            Err(_) => {
                return Err(GhError::Timeout(format!(
                    "GitHub did not answer within {} s",
                    self.timeout.as_secs()
                )))
            }
            Ok(Err(e)) => {
                let words = self.scrub(format!("cannot reach GitHub: {e}"));
                tracing::warn!("{words}");
                return Err(GhError::Transport(words));
            }
            Ok(Ok(r)) => r,
        };
        self.note_rate(&headers);
        if status.is_success() || status == StatusCode::NOT_MODIFIED {
            return Ok((status, headers, text));
        }
        let remaining = header_str(&headers, "x-ratelimit-remaining");
        if status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::FORBIDDEN && remaining.as_deref() == Some("0"))
        {
            let now = now_secs();
            let reset = header_str(&headers, "x-ratelimit-reset")
                .and_then(|v| parse_reset(&v))
                .or_else(|| {
                    header_str(&headers, "retry-after")
                        .and_then(|v| v.parse::<u64>().ok())
                        .map(|s| now + s)
                });
            return Err(GhError::RateLimited(match reset {
                Some(r) => format!(
                    "GitHub rate limit exhausted; resets at {}",
                    reset_words(r, now)
                ),
                None => "GitHub rate limit exhausted; try again in a minute".to_string(),
            }));
        }
        Err(GhError::Status {
            status: status.as_u16(),
            message: self.scrub(github_message(&text)),
        })
    }

    fn parse_body(headers: &HeaderMap, text: &str) -> Value {
        let json = header_str(headers, "content-type")
            .map(|c| c.contains("json"))
            .unwrap_or(true);
        if json {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
        } else {
            Value::String(text.to_string())
        }
    }

    /// GET through the cache: within the TTL a stored answer costs nothing; after it, the
    /// stored ETag is sent and a 304 keeps the stored body.
    pub fn get(&self, path: &str) -> GhResult<Arc<Page>> {
        self.get_as(path, None, false)
    }

    /// GET a full object, not one seeded from a listing.
    pub fn get_full(&self, path: &str) -> GhResult<Arc<Page>> {
        self.get_as(path, None, true)
    }

    /// GET revalidated now, whatever the TTL (guards right before a change).
    pub fn get_fresh(&self, path: &str) -> GhResult<Arc<Page>> {
        self.revalidate(path, None)
    }

    /// GET with another media type (`application/vnd.github.raw`).
    pub fn get_media(&self, path: &str, accept: &'static str) -> GhResult<Arc<Page>> {
        self.get_as(path, Some(accept), true)
    }

    fn key(path: &str, accept: Option<&str>) -> String {
        match accept {
            Some(a) => format!("{path} {a}"),
            None => path.to_string(),
        }
    }

    fn get_as(&self, path: &str, accept: Option<&'static str>, full: bool) -> GhResult<Arc<Page>> {
        let key = Self::key(path, accept);
        if let Some(c) = lock(&self.cache).get(&key) {
            if c.at.elapsed() < self.ttl && !(full && c.partial) {
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                if let Some(message) = &c.missing {
                    return Err(GhError::Status {
                        status: 404,
                        message: message.clone(),
                    });
                }
                return Ok(c.page.clone());
            }
        }
        self.revalidate(path, accept)
    }

    fn revalidate(&self, path: &str, accept: Option<&'static str>) -> GhResult<Arc<Page>> {
        let key = Self::key(path, accept);
        let etag = lock(&self.cache)
            .get(&key)
            .filter(|c| !c.partial && c.missing.is_none())
            .and_then(|c| c.etag.clone());
        let mut headers = HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(ACCEPT, HeaderValue::from_static(a));
        }
        if let Some(e) = etag.as_deref().and_then(|e| HeaderValue::from_str(e).ok()) {
            headers.insert(IF_NONE_MATCH, e);
        }
        let (status, h, text) = match self.send(Method::GET, path, None, headers) {
            Err(GhError::Status {
                status: 404,
                message,
            }) => {
                lock(&self.cache).insert(
                    key,
                    Cached {
                        missing: Some(message.clone()),
                        etag: None,
                        page: Arc::new(Page {
                            body: Value::Null,
                            next: None,
                        }),
                        at: Instant::now(),
                        partial: false,
                    },
                );
                return Err(GhError::Status {
                    status: 404,
                    message,
                });
            }
            other => other?,
        };
        let mut cache = lock(&self.cache);
        if status == StatusCode::NOT_MODIFIED {
            self.stats.not_modified.fetch_add(1, Ordering::Relaxed);
            if let Some(c) = cache.get_mut(&key) {
                c.at = Instant::now();
                return Ok(c.page.clone());
            }
            // A 304 for something we no longer hold: ask again without the condition.
            drop(cache);
            let (_, h, text) = self.send(Method::GET, path, None, HeaderMap::new())?;
            return Ok(self.store(&key, &h, &text));
        }
        drop(cache);
        Ok(self.store(&key, &h, &text))
    }

    fn store(&self, key: &str, h: &HeaderMap, text: &str) -> Arc<Page> {
        let page = Arc::new(Page {
            body: Self::parse_body(h, text),
            next: header_str(h, LINK.as_str()).and_then(|l| next_link(&l)),
        });
        lock(&self.cache).insert(
            key.to_string(),
            Cached {
                missing: None,
                etag: header_str(h, ETAG.as_str()),
                page: page.clone(),
                at: Instant::now(),
                partial: false,
            },
        );
        page
    }

    /// Remember an object a listing showed, so entries listed need no request of their own.
    pub fn seed(&self, path: &str, body: &Value) {
        let mut cache = lock(&self.cache);
        let keep = cache
            .get(path)
            .is_some_and(|c| !c.partial && c.missing.is_none() && c.at.elapsed() < self.ttl);
        if !keep {
            cache.insert(
                path.to_string(),
                Cached {
                    missing: None,
                    etag: None,
                    page: Arc::new(Page {
                        body: body.clone(),
                        next: None,
                    }),
                    at: Instant::now(),
                    partial: true,
                },
            );
        }
    }

    /// Forget cached answers under these path prefixes (after a change of ours).
    pub fn forget(&self, prefixes: &[String]) {
        lock(&self.cache).retain(|k, _| !prefixes.iter().any(|p| k.starts_with(p.as_str())));
    }

    /// A change (POST, PATCH, PUT, DELETE); never cached.
    pub fn write(&self, method: Method, path: &str, body: Option<&Value>) -> GhResult<Value> {
        let (_, h, text) = self.send(method, path, body, HeaderMap::new())?;
        Ok(if text.trim().is_empty() {
            Value::Null
        } else {
            Self::parse_body(&h, &text)
        })
    }
}
