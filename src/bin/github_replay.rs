//! github-replay: serves recorded GitHub API responses on 127.0.0.1, for the github host's
//! tests and benchmark.
//!
//! Sources:
//!   --fixture FILE        an @octokit/fixtures `normalized-fixture.json` (a recorded session)
//!   --resources DIR       a folder of recorded response bodies (octocrab's tests/resources)
//!   --route 'METHOD PATH STATUS FILE[#/json/pointer]'
//!                         serve that recorded body (or the part the pointer names) at PATH
//!
//! It prints its port on the first line of stdout and serves until its stdin closes (so it
//! never outlives the test that started it). A request matches a recording by method, path,
//! query parameters (decoded, in any order) and, when the recording has one, the JSON body.
//! `If-None-Match` equal to the recorded ETag answers 304, as GitHub does. An object in a
//! recorded listing is also served at its own `url`, the way GitHub serves it. Anything else
//! is a 404 in GitHub's words. `GET /__wip/requests` answers how many requests were served
//! (itself not counted); `GET /__wip/log` lists them.
//!
//! Tests script what GitHub does next with `POST` (JSON bodies; a change takes precedence
//! over what was loaded, and objects in a new listing are served at their `url` too):
//!   /__wip/record   {"method","path","status","headers":{…},"body"}  a new recording
//!   /__wip/replace  {"method","path","etag","body"}  the recording at that path answers a
//!                   new body under a new ETag (its other headers, e.g. Link, are kept)
//!   /__wip/rate-limit {"seconds": N}  every request answers GitHub's 403 "API rate limit
//!                   exceeded" with `x-ratelimit-remaining: 0` until the reset N s from now

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

const GITHUB: &str = "https://api.github.com";

#[derive(Clone, Debug)]
enum Body {
    Json(Value),
    Text(String),
    Empty,
}

#[derive(Clone, Debug)]
struct Recording {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
    /// The request body it was recorded with, if any.
    request: Option<Value>,
}

#[derive(Debug, thiserror::Error)]
enum ReplayError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Json(PathBuf, serde_json::Error),
    #[error("{0}")]
    Usage(String),
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `/a/b?x=1&y=2` → (`/a/b`, sorted decoded pairs).
fn split_url(url: &str) -> (String, Vec<(String, String)>) {
    let (path, query) = match url.split_once('?') {
        Some((p, q)) => (p, q),
        None => (url, ""),
    };
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(kv), String::new()),
        })
        .collect();
    pairs.sort();
    (path.to_string(), pairs)
}

fn read_json(path: &Path) -> Result<Value, ReplayError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReplayError::Io(path.into(), e))?;
    serde_json::from_str(&text).map_err(|e| ReplayError::Json(path.into(), e))
}

fn load_fixture(path: &Path, out: &mut Vec<Recording>) -> Result<(), ReplayError> {
    let doc = read_json(path)?;
    let items = doc
        .as_array()
        .ok_or_else(|| ReplayError::Usage(format!("{}: not a list", path.display())))?;
    for r in items {
        let method = r["method"].as_str().unwrap_or("get").to_uppercase();
        let (p, query) = split_url(r["path"].as_str().unwrap_or("/"));
        let status = r["status"].as_u64().unwrap_or(200) as u16;
        let mut headers = Vec::new();
        if let Some(h) = r["headers"].as_object() {
            for (k, v) in h {
                let keep = matches!(k.as_str(), "etag" | "link" | "content-type" | "location")
                    || k.starts_with("x-ratelimit-");
                if keep {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    headers.push((k.clone(), v));
                }
            }
        }
        let body = match &r["response"] {
            Value::String(s) if s.is_empty() => Body::Empty,
            Value::String(s) => Body::Text(s.clone()),
            Value::Null => Body::Empty,
            v => Body::Json(v.clone()),
        };
        let request = match &r["body"] {
            Value::String(s) if s.is_empty() => None,
            Value::Null => None,
            v => Some(v.clone()),
        };
        out.push(Recording {
            method,
            path: p,
            query,
            status,
            headers,
            body,
            request,
        });
    }
    Ok(())
}

fn load_route(spec: &str, resources: &Path, out: &mut Vec<Recording>) -> Result<(), ReplayError> {
    let parts: Vec<&str> = spec.split_whitespace().collect();
    let [method, url, status, file] = parts.as_slice() else {
        return Err(ReplayError::Usage(format!(
            "route {spec:?}: want 'METHOD PATH STATUS FILE[#/pointer]'"
        )));
    };
    let (file, pointer) = file.split_once('#').unwrap_or((file, ""));
    // `#/pointer[]`: the object wrapped in a list, as a listing endpoint answers.
    let (pointer, listed) = match pointer.strip_suffix("[]") {
        Some(p) => (p, true),
        None => (pointer, false),
    };
    let doc = read_json(&resources.join(file))?;
    let body = if pointer.is_empty() {
        doc
    } else if let Some(v) = doc.pointer(pointer) {
        v.clone()
    } else {
        return Err(ReplayError::Usage(format!(
            "route {spec:?}: no {pointer} in {file}"
        )));
    };
    let body = if listed {
        Value::Array(vec![body])
    } else {
        body
    };
    let (path, query) = split_url(url);
    out.push(Recording {
        method: method.to_uppercase(),
        path,
        query,
        status: status
            .parse()
            .map_err(|_| ReplayError::Usage(format!("route {spec:?}: bad status")))?,
        headers: vec![(
            "content-type".into(),
            "application/json; charset=utf-8".into(),
        )],
        body: Body::Json(body),
        request: None,
    });
    Ok(())
}

/// The objects a recording shows that GitHub also serves at their own `url`: the items of
/// a listing (or of a search's `items`, a check-runs answer), or the object a change
/// answered with.
fn listed_objects(r: &Recording) -> Vec<Recording> {
    if !(200..300).contains(&r.status) {
        return Vec::new();
    }
    let Body::Json(v) = &r.body else {
        return Vec::new();
    };
    let one = std::slice::from_ref(v);
    let list = match v {
        Value::Array(a) if r.method == "GET" => a.as_slice(),
        Value::Object(o) if r.method == "GET" => {
            match o.get("items").or_else(|| o.get("check_runs")) {
                Some(Value::Array(a)) => a.as_slice(),
                _ => return Vec::new(),
            }
        }
        Value::Object(_) if r.method != "GET" => one,
        _ => return Vec::new(),
    };
    list.iter()
        .filter_map(|item| {
            let path = item.get("url")?.as_str()?.strip_prefix(GITHUB)?;
            let (path, query) = split_url(path);
            Some(Recording {
                method: "GET".into(),
                path,
                query,
                status: 200,
                headers: vec![(
                    "content-type".into(),
                    "application/json; charset=utf-8".into(),
                )],
                body: Body::Json(item.clone()),
                request: None,
            })
        })
        .collect()
}

/// Objects inside recorded listings, served at their own `url` unless recorded there.
fn derive_objects(recs: &mut Vec<Recording>) {
    let mut extra: Vec<Recording> = Vec::new();
    for r in recs.iter() {
        for item in listed_objects(r) {
            let taken = recs
                .iter()
                .chain(extra.iter())
                .any(|x| x.method == "GET" && x.path == item.path && x.query == item.query);
            if !taken {
                extra.push(item);
            }
        }
    }
    recs.extend(extra);
}

fn parse_args() -> Result<Vec<Recording>, ReplayError> {
    let mut recs = Vec::new();
    let mut resources = PathBuf::from(".");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| ReplayError::Usage(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--fixture" => load_fixture(Path::new(&value()?), &mut recs)?,
            "--resources" => resources = PathBuf::from(value()?),
            "--route" => load_route(&value()?, &resources, &mut recs)?,
            other => return Err(ReplayError::Usage(format!("unknown argument {other:?}"))),
        }
    }
    derive_objects(&mut recs);
    Ok(recs)
}

fn header(req: &tiny_http::Request, name: &str) -> Option<String> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

fn respond(req: tiny_http::Request, status: u16, headers: &[(String, String)], body: Vec<u8>) {
    let mut resp = tiny_http::Response::from_data(body).with_status_code(status);
    for (k, v) in headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            resp.add_header(h);
        }
    }
    let _ = req.respond(resp);
}

fn not_found() -> Vec<u8> {
    br#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}"#.to_vec()
}

/// What a test scripted: recordings that take precedence over the loaded ones, and a rate
/// limit exhausted until a Unix time.
#[derive(Default)]
struct Script {
    recordings: RwLock<Vec<Recording>>,
    exhausted_until: Mutex<Option<u64>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Why a scripting request was refused (answered with 400 and these words).
#[derive(Debug, thiserror::Error)]
enum ScriptError {
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("the script is poisoned")]
    Poisoned,
    #[error("{0:?} (a string) is missing")]
    NoString(String),
    #[error("\"seconds\" (a number) is missing")]
    NoSeconds,
    #[error("no recording of {method} {path} to replace")]
    NoRecording { method: String, path: String },
    #[error("unknown script request {0}")]
    Unknown(String),
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str, ScriptError> {
    v[key]
        .as_str()
        .ok_or_else(|| ScriptError::NoString(key.to_string()))
}

fn body_of(v: &Value) -> Body {
    match v {
        Value::Null => Body::Empty,
        Value::String(s) => Body::Text(s.clone()),
        other => Body::Json(other.clone()),
    }
}

/// One scripting request (`POST /__wip/…`); the answer is `ok` or what was wrong.
fn script(
    what: &str,
    raw: &str,
    loaded: &[Recording],
    script: &Script,
) -> Result<String, ScriptError> {
    let v: Value = serde_json::from_str(raw)?;
    let mut recs = script
        .recordings
        .write()
        .map_err(|_| ScriptError::Poisoned)?;
    let new = match what {
        "/__wip/record" => {
            let (path, query) = split_url(str_field(&v, "path")?);
            let mut headers = vec![(
                "content-type".to_string(),
                "application/json; charset=utf-8".to_string(),
            )];
            if let Some(h) = v["headers"].as_object() {
                for (k, val) in h {
                    let val = val.as_str().map(str::to_string).unwrap_or(val.to_string());
                    headers.retain(|(x, _)| !x.eq_ignore_ascii_case(k));
                    headers.push((k.to_ascii_lowercase(), val));
                }
            }
            Recording {
                method: str_field(&v, "method")?.to_uppercase(),
                path,
                query,
                status: v["status"].as_u64().unwrap_or(200) as u16,
                headers,
                body: body_of(&v["body"]),
                request: None,
            }
        }
        "/__wip/replace" => {
            let method = str_field(&v, "method")?.to_uppercase();
            let (path, query) = split_url(str_field(&v, "path")?);
            let old = recs
                .iter()
                .chain(loaded.iter())
                .find(|r| r.method == method && r.path == path && r.query == query)
                .ok_or_else(|| ScriptError::NoRecording {
                    method: method.clone(),
                    path: path.clone(),
                })?;
            let mut r = old.clone();
            r.headers.retain(|(k, _)| k != "etag");
            r.headers
                .push(("etag".to_string(), str_field(&v, "etag")?.to_string()));
            r.body = body_of(&v["body"]);
            r
        }
        "/__wip/rate-limit" => {
            let seconds = v["seconds"].as_u64().ok_or(ScriptError::NoSeconds)?;
            if let Ok(mut until) = script.exhausted_until.lock() {
                *until = Some(now_secs() + seconds);
            }
            return Ok("ok".to_string());
        }
        other => return Err(ScriptError::Unknown(other.to_string())),
    };
    // The objects a new listing shows are served at their own url from now on, as GitHub
    // would (ahead of what was derived at start).
    for item in listed_objects(&new).into_iter().rev() {
        recs.insert(0, item);
    }
    recs.insert(0, new);
    Ok("ok".to_string())
}

fn serve(
    loaded: Arc<Vec<Recording>>,
    script_state: &Script,
    mut req: tiny_http::Request,
    count: &AtomicUsize,
    log: &Mutex<Vec<String>>,
) {
    let method = req.method().as_str().to_uppercase();
    let (path, query) = split_url(req.url());
    let mut raw = String::new();
    let _ = req.as_reader().read_to_string(&mut raw);
    if path.starts_with("/__wip/") {
        let (status, text) = match (method.as_str(), path.as_str()) {
            ("GET", "/__wip/requests") => (200, count.load(Ordering::SeqCst).to_string()),
            ("GET", "/__wip/log") => (200, log.lock().map(|l| l.join("\n")).unwrap_or_default()),
            ("POST", what) => match script(what, &raw, &loaded, script_state) {
                Ok(t) => (200, t),
                Err(e) => (400, e.to_string()),
            },
            _ => (404, format!("no {method} {path} here")),
        };
        respond(req, status, &[], text.into_bytes());
        return;
    }
    count.fetch_add(1, Ordering::SeqCst);
    let json = vec![(
        "content-type".to_string(),
        "application/json; charset=utf-8".to_string(),
    )];
    let exhausted = script_state
        .exhausted_until
        .lock()
        .ok()
        .and_then(|u| *u)
        .filter(|until| *until > now_secs());
    if let Some(reset) = exhausted {
        let mut headers = json;
        headers.extend([
            ("x-ratelimit-limit".to_string(), "5000".to_string()),
            ("x-ratelimit-remaining".to_string(), "0".to_string()),
            ("x-ratelimit-reset".to_string(), reset.to_string()),
        ]);
        if let Ok(mut l) = log.lock() {
            l.push(format!("{method} {} 403", req.url()));
        }
        let body = br#"{"message":"API rate limit exceeded for 127.0.0.1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}"#;
        respond(req, 403, &headers, body.to_vec());
        return;
    }
    let sent: Option<Value> = serde_json::from_str(&raw).ok();
    let scripted = script_state
        .recordings
        .read()
        .map(|r| r.clone())
        .unwrap_or_default();
    let candidates: Vec<&Recording> = scripted
        .iter()
        .chain(loaded.iter())
        .filter(|r| r.method == method && r.path == path && r.query == query)
        .collect();
    let chosen = candidates
        .iter()
        .find(|r| r.request.is_some() && r.request == sent)
        .or_else(|| candidates.iter().find(|r| r.request.is_none()))
        .copied();
    let (status, headers, body) = match chosen {
        None => (404, json, not_found()),
        Some(r) => {
            let etag = r
                .headers
                .iter()
                .find(|(k, _)| k == "etag")
                .map(|(_, v)| v.clone());
            let inm = header(&req, "if-none-match");
            if r.status == 200 && etag.is_some() && inm == etag {
                let keep: Vec<(String, String)> = r
                    .headers
                    .iter()
                    .filter(|(k, _)| k != "content-type")
                    .cloned()
                    .collect();
                (304, keep, Vec::new())
            } else {
                let body = match &r.body {
                    Body::Json(v) => serde_json::to_vec(v).unwrap_or_default(),
                    Body::Text(t) => t.clone().into_bytes(),
                    Body::Empty => Vec::new(),
                };
                (r.status, r.headers.clone(), body)
            }
        }
    };
    if let Ok(mut l) = log.lock() {
        l.push(format!("{method} {} {status}", req.url()));
    }
    respond(req, status, &headers, body);
}

fn main() {
    let recs = match parse_args() {
        Ok(r) => Arc::new(r),
        Err(e) => {
            eprintln!("github-replay: {e}");
            std::process::exit(2);
        }
    };
    let server = match tiny_http::Server::http("127.0.0.1:0") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("github-replay: cannot listen on 127.0.0.1: {e}");
            std::process::exit(1);
        }
    };
    let port = server.server_addr().to_ip().map(|a| a.port()).unwrap_or(0);
    println!("{port}");
    let _ = std::io::stdout().flush();
    // Serve until whoever started us closes our stdin (or dies).
    std::thread::spawn(|| {
        let stdin = std::io::stdin();
        let mut sink = String::new();
        while stdin
            .lock()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            sink.clear();
        }
        std::process::exit(0);
    });
    let count = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let scripted = Arc::new(Script::default());
    for req in server.incoming_requests() {
        let (recs, scripted, count, log) =
            (recs.clone(), scripted.clone(), count.clone(), log.clone());
        std::thread::spawn(move || serve(recs, &scripted, req, &count, &log));
    }
}
