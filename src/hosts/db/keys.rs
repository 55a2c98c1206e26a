//! Names in paths, reversibly: table names and row keys.
//!
//! A name component percent-encodes `%`, `/`, NUL (and `,` inside keys, where it joins the
//! components of a composite key). Special components: the empty text is `%`, `.` and `..`
//! become `%2E` and `%2E%2E`, NULL is `%N` and a blob is `%X` followed by its hex. A component
//! is parsed back by its column's affinity (INTEGER → i64, REAL → f64, else text), and only
//! the canonical spelling of a value is accepted, so every row has exactly one path.

use rusqlite::types::Value;

/// SQLite's column affinity, from the declared type (rules of §3.1 of "Datatypes in SQLite").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Affinity {
    Integer,
    Text,
    Blob,
    Real,
    Numeric,
}

pub(super) fn affinity(decl: &str) -> Affinity {
    let d = decl.to_ascii_uppercase();
    if d.contains("INT") {
        Affinity::Integer
    } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
        Affinity::Text
    } else if d.contains("BLOB") || d.trim().is_empty() {
        Affinity::Blob
    } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
        Affinity::Real
    } else {
        Affinity::Numeric
    }
}

/// Percent-encode the characters a path component cannot hold (and `,` when asked).
fn escape(s: &str, comma: bool) -> String {
    match s {
        "" => return "%".to_string(),
        "." => return "%2E".to_string(),
        ".." => return "%2E%2E".to_string(),
        _ => {}
    }
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            '\0' => out.push_str("%00"),
            ',' if comma => out.push_str("%2C"),
            c => out.push(c),
        }
    }
    out
}

/// Undo `escape` (any `%XX` is accepted; canonical form is checked by the callers).
fn unescape(s: &str) -> Option<String> {
    if s == "%" {
        return Some(String::new());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The path component of a table or view name.
pub(super) fn encode_name(name: &str) -> String {
    escape(name, false)
}

/// The name a path component stands for, if it is the canonical spelling of one.
pub(super) fn decode_name(segment: &str) -> Option<String> {
    let name = unescape(segment)?;
    (encode_name(&name) == segment).then_some(name)
}

/// A real number as text that parses back to the same value (`1.5`, `1e300`, `-0.25`).
fn format_real(f: f64) -> String {
    format!("{f:?}")
}

fn parse_real(s: &str) -> Option<f64> {
    // Only plain numerals: Rust would also take "inf" and "NaN".
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

fn parse_integer(s: &str) -> Option<i64> {
    let i: i64 = s.parse().ok()?;
    (i.to_string() == s).then_some(i)
}

/// One key component as text.
pub(super) fn encode_component(value: &Value) -> String {
    match value {
        Value::Null => "%N".to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => format_real(*f),
        Value::Text(t) => escape(t, true),
        Value::Blob(b) => {
            let mut out = String::from("%X");
            for byte in b {
                out.push_str(&format!("{byte:02x}"));
            }
            out
        }
    }
}

fn decode_component(s: &str, affinity: Affinity) -> Option<Value> {
    if s == "%N" {
        return Some(Value::Null);
    }
    if let Some(hex) = s.strip_prefix("%X") {
        if hex.len() % 2 != 0 {
            return None;
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        return Some(Value::Blob(bytes));
    }
    let text = unescape(s)?;
    let numeric_ok = text == s;
    let value = match affinity {
        Affinity::Text => Value::Text(text),
        Affinity::Real => match parse_real(&text).filter(|_| numeric_ok) {
            Some(f) => Value::Real(f),
            None => Value::Text(text),
        },
        Affinity::Integer | Affinity::Numeric | Affinity::Blob => {
            match (numeric_ok, parse_integer(&text), parse_real(&text)) {
                (true, Some(i), _) => Value::Integer(i),
                (true, None, Some(f)) => Value::Real(f),
                _ => Value::Text(text),
            }
        }
    };
    Some(value)
}

/// The path component of a row key (components joined by `,`).
pub(super) fn encode_key(values: &[Value]) -> String {
    values
        .iter()
        .map(encode_component)
        .collect::<Vec<_>>()
        .join(",")
}

/// The key a path component stands for, given the affinities of the key's columns; `None`
/// if it is not the canonical name of a key of that shape.
pub(super) fn decode_key(segment: &str, affinities: &[Affinity]) -> Option<Vec<Value>> {
    let parts: Vec<&str> = segment.split(',').collect();
    if parts.len() != affinities.len() {
        return None;
    }
    let values = parts
        .iter()
        .zip(affinities)
        .map(|(p, a)| decode_component(p, *a))
        .collect::<Option<Vec<Value>>>()?;
    (encode_key(&values) == segment).then_some(values)
}

/// One fuzz input against the name and key codecs: no panic, and every name that decodes is
/// the canonical spelling of what it decodes to.
pub(crate) fn fuzz_one(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let (head, segment) = text.split_at(text.char_indices().nth(1).map_or(text.len(), |(i, _)| i));
    if let Some(name) = decode_name(segment) {
        assert_eq!(encode_name(&name), segment, "decode_name is not canonical");
    }
    let name = encode_name(&text);
    assert_eq!(
        decode_name(&name).as_deref(),
        Some(&*text),
        "encode_name does not round-trip"
    );
    let all = [
        Affinity::Integer,
        Affinity::Text,
        Affinity::Blob,
        Affinity::Real,
        Affinity::Numeric,
    ];
    let pick = head.bytes().next().unwrap_or(0) as usize;
    let n = 1 + segment.matches(',').count().min(3);
    let affinities: Vec<Affinity> = (0..n).map(|i| all[(pick + i * 3) % all.len()]).collect();
    if let Some(values) = decode_key(segment, &affinities) {
        assert_eq!(encode_key(&values), segment, "decode_key is not canonical");
        assert_eq!(decode_key(&encode_key(&values), &affinities), Some(values));
    }
    let _ = affinity(segment);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(values: Vec<Value>, affinities: &[Affinity]) {
        let name = encode_key(&values);
        assert!(!name.contains('/') && !name.contains('\0') && !name.is_empty());
        assert!(name != "." && name != "..");
        assert_eq!(decode_key(&name, affinities), Some(values), "{name}");
    }

    #[test]
    fn keys_roundtrip() {
        use Affinity::*;
        roundtrip(vec![Value::Integer(4711)], &[Integer]);
        roundtrip(vec![Value::Integer(-3)], &[Integer]);
        roundtrip(vec![Value::Real(1.5)], &[Real]);
        roundtrip(vec![Value::Text("a/b,c%d".into())], &[Text]);
        roundtrip(vec![Value::Text("".into())], &[Text]);
        roundtrip(vec![Value::Text(".".into())], &[Text]);
        roundtrip(vec![Value::Text("..".into())], &[Text]);
        roundtrip(vec![Value::Text("nul\0here".into())], &[Text]);
        roundtrip(vec![Value::Text("42".into())], &[Text]);
        roundtrip(
            vec![Value::Integer(1), Value::Integer(3402)],
            &[Integer, Integer],
        );
        roundtrip(
            vec![Value::Text("x,y".into()), Value::Null],
            &[Text, Integer],
        );
        roundtrip(vec![Value::Blob(vec![0, 255])], &[Blob]);
        roundtrip(vec![Value::Text("abc".into())], &[Integer]);
        roundtrip(vec![Value::Text("%N".into())], &[Text]);
        assert_eq!(encode_key(&[Value::Integer(1), Value::Integer(2)]), "1,2");
    }

    #[test]
    fn non_canonical_names_are_refused() {
        assert_eq!(decode_key("01", &[Affinity::Integer]), None);
        assert_eq!(decode_key("1,2", &[Affinity::Integer]), None);
        assert_eq!(decode_key("%2f", &[Affinity::Text]), None);
        assert_eq!(decode_key("%zz", &[Affinity::Text]), None);
        assert_eq!(decode_name("a%2Fb"), Some("a/b".to_string()));
        assert_eq!(decode_name("a%2Cb"), None);
        assert_eq!(decode_name("a,b"), Some("a,b".to_string()));
    }

    #[test]
    fn affinities() {
        assert_eq!(affinity("INTEGER"), Affinity::Integer);
        assert_eq!(affinity("NVARCHAR(40)"), Affinity::Text);
        assert_eq!(affinity("NUMERIC(10,2)"), Affinity::Numeric);
        assert_eq!(affinity(""), Affinity::Blob);
        assert_eq!(affinity("double precision"), Affinity::Real);
    }
}
