//! Messages longer than the stdio transport takes. rmcp drops a line over
//! `DEFAULT_MAX_LINE_LENGTH` without a word, so the request it answered would wait for the
//! host's call limit. The server's stdout is watched on its way to rmcp (`WatchedStdout`):
//! each line's length is counted, and of a line too long only its first and last bytes are
//! kept, enough to tell a response and its `id`. rmcp is then handed, right after the line
//! it drops, an error response of that id which says the size: the request fails at once.

use serde_json::{json, Value};

/// The longest line rmcp's stdio transport takes, its newline included.
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
/// How many of a line's first and last bytes are kept (its top-level keys and `id`).
const KEPT: usize = 512;

/// A line too long for the transport, as far as it was seen.
#[derive(Debug, PartialEq, Eq)]
pub struct TooLong {
    /// Its length, without the newline.
    pub len: usize,
    /// A response (a `result` or `error` at its top level, seen before any `method`).
    pub response: bool,
    /// Its `id`, from its first or last bytes.
    pub id: Option<Value>,
}

impl TooLong {
    /// The error response rmcp is given in its place, one line.
    pub fn error_line(&self, id: &Value) -> Vec<u8> {
        let msg = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32603,
                "message": self.words(),
            },
        });
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        line
    }

    /// What happened, in words.
    pub fn words(&self) -> String {
        format!(
            "the server's answer was {} bytes, more than the {} bytes one message may hold on stdio; it was dropped",
            grouped(self.len),
            grouped(MAX_LINE - 1)
        )
    }
}

/// `17825792` as `17,825,792`.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The length of the line being read, and its first and last bytes.
#[derive(Default)]
pub struct Lines {
    len: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Lines {
    /// Follow `bytes`; at the end of a line too long, the index just past its newline and
    /// what it was (the caller hands rmcp the rest of `bytes` after its error line).
    pub fn feed(&mut self, bytes: &[u8]) -> Option<(usize, TooLong)> {
        let mut at = 0;
        while at < bytes.len() {
            let rest = &bytes[at..];
            let (piece, end) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], Some(i + 1)),
                None => (rest, None),
            };
            self.len = self.len.saturating_add(piece.len());
            if self.head.len() < KEPT {
                let room = KEPT - self.head.len();
                self.head.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            if piece.len() >= KEPT {
                self.tail.clear();
                self.tail.extend_from_slice(&piece[piece.len() - KEPT..]);
            } else {
                self.tail.extend_from_slice(piece);
                let over = self.tail.len().saturating_sub(KEPT);
                self.tail.drain(..over);
            }
            let Some(end) = end else {
                break;
            };
            at += end;
            // rmcp counts the newline too.
            if self.len.saturating_add(1) > MAX_LINE {
                return Some((at, std::mem::take(self).judge()));
            }
            self.len = 0;
            self.head.clear();
            self.tail.clear();
        }
        None
    }

    fn judge(self) -> TooLong {
        let top = top_level(&self.head);
        let id = top.id.or_else(|| {
            (self.len > self.head.len())
                .then(|| last_id(&self.tail))
                .flatten()
        });
        TooLong {
            len: self.len,
            response: top.response,
            id,
        }
    }
}

#[derive(Default)]
struct Top {
    response: bool,
    id: Option<Value>,
}

/// What the first bytes of a JSON object say at its top level: whether a `result` or
/// `error` key comes before any `method`, and its `id` if it came before the bytes ran out.
fn top_level(bytes: &[u8]) -> Top {
    let mut top = Top::default();
    let mut s = Scan { b: bytes, at: 0 };
    s.blank();
    if !s.eat(b'{') {
        return top;
    }
    let mut method = false;
    loop {
        s.blank();
        let Some(key) = s.string() else {
            return top;
        };
        s.blank();
        if !s.eat(b':') {
            return top;
        }
        s.blank();
        match key.as_slice() {
            b"method" => method = true,
            b"result" | b"error" if !method => top.response = true,
            _ => {}
        }
        if key == b"id" {
            let start = s.at;
            if !s.value() {
                return top;
            }
            top.id = scalar_id(&bytes[start..s.at]);
        } else if !s.value() {
            return top;
        }
        s.blank();
        if !s.eat(b',') {
            return top;
        }
    }
}

/// The `id` an object ends with (`…,"id":7}`), as the TypeScript SDK writes its responses
/// (`result` first, `id` last).
fn last_id(tail: &[u8]) -> Option<Value> {
    let t = trim_end(tail);
    let t = trim_end(t.strip_suffix(b"}")?);
    let start = if t.last() == Some(&b'"') {
        // A string id: back to its opening quote (an id with a quote inside is not read).
        t[..t.len() - 1].iter().rposition(|&b| b == b'"')?
    } else {
        t.iter()
            .rposition(|b| !(b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')))?
            + 1
    };
    let id = scalar_id(&t[start..])?;
    let before = trim_end(trim_end(&t[..start]).strip_suffix(b":")?);
    let before = trim_end(before.strip_suffix(b"\"id\"")?);
    matches!(before.last(), Some(b',') | Some(b'{')).then_some(id)
}

fn trim_end(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &b[..n]
}

/// A JSON-RPC id: a number or a string.
fn scalar_id(raw: &[u8]) -> Option<Value> {
    serde_json::from_slice::<Value>(raw)
        .ok()
        .filter(|v| v.is_number() || v.is_string())
}

/// A cursor over JSON bytes that may stop anywhere: every step says whether it got whole.
struct Scan<'a> {
    b: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn blank(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// A string's raw bytes (escapes kept as written), or `None` if it does not end here.
    fn string(&mut self) -> Option<Vec<u8>> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                b'\\' => self.at += 1,
                b'"' => return Some(self.b[start..self.at - 1].to_vec()),
                _ => {}
            }
        }
        None
    }

    /// Skip one value; false if the bytes end first.
    fn value(&mut self) -> bool {
        match self.peek() {
            Some(b'"') => self.string().is_some(),
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(c) = self.peek() {
                    match c {
                        b'"' => {
                            if self.string().is_none() {
                                return false;
                            }
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.at += 1;
                                return true;
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
                false
            }
            Some(_) => {
                while self
                    .peek()
                    .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
                {
                    self.at += 1;
                }
                self.at < self.b.len()
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long_line(prefix: &str, fill: usize, suffix: &str) -> Vec<u8> {
        let mut line = prefix.as_bytes().to_vec();
        line.resize(line.len() + fill, b'A');
        line.extend_from_slice(suffix.as_bytes());
        line.push(b'\n');
        line
    }

    #[test]
    fn a_line_too_long_is_told_with_its_id_first_or_last() {
        // The Python SDK writes the id first, the TypeScript SDK last.
        for (line, id) in [
            (
                long_line(
                    r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":""#,
                    MAX_LINE,
                    r#""}]}}"#,
                ),
                json!(7),
            ),
            (
                long_line(
                    r#"{"result":{"content":[{"type":"text","text":""#,
                    MAX_LINE,
                    r#""}]},"jsonrpc":"2.0","id":"r-9"}"#,
                ),
                json!("r-9"),
            ),
        ] {
            let mut lines = Lines::default();
            // Fed in pieces, as a pipe gives it, with the next message behind it.
            let mut input = line.clone();
            input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n");
            let mut seen = None;
            let mut offset = 0;
            for chunk in input.chunks(8192) {
                if let Some((at, t)) = lines.feed(chunk) {
                    seen = Some((offset + at, t));
                }
                offset += chunk.len();
            }
            let (at, t) = seen.expect("told");
            assert_eq!(at, line.len());
            assert_eq!(t.len, line.len() - 1);
            assert!(t.response);
            assert_eq!(t.id, Some(id.clone()));
            let err: Value = serde_json::from_slice(&t.error_line(&id)).unwrap();
            assert_eq!(err["id"], id);
            let words = err["error"]["message"].as_str().unwrap();
            assert!(words.contains(&grouped(line.len() - 1)), "{words}");
        }
    }

    #[test]
    fn lines_within_the_limit_and_requests_are_not_answered() {
        let mut lines = Lines::default();
        assert!(lines
            .feed(&long_line("{\"id\":1,\"result\":\"", MAX_LINE - 40, "\"}"))
            .is_none());
        let (_, t) = lines
            .feed(&long_line(
                r#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"x":""#,
                MAX_LINE,
                "\"}}",
            ))
            .unwrap();
        assert!(!t.response);
        // A nested `id` is not the message's.
        assert_eq!(top_level(br#"{"result":{"id":5,"content":"#).id, None);
        assert!(top_level(br#"{"result":{"id":5,"content":"#).response);
        assert_eq!(last_id(br#"AAAA"}],"structured":{"id":4}}"#), None);
        assert_eq!(
            last_id(br#"AAAA"}]}, "jsonrpc": "2.0", "id" : 12 } "#),
            Some(json!(12))
        );
    }
}
