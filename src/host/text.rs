//! Words every host uses in descriptions and results.

use std::fmt::Display;

/// `1 issue` / `3 issues`.
pub fn plural<N: Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    let word = if n == N::from(1) { one } else { many };
    format!("{n} {word}")
}

/// `a, b and c`.
pub fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Text on one line: each run of white space (newlines included) becomes one space.
pub fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `flat(text)` cut to `max` characters, with `…` where it was cut.
pub fn one_line(text: &str, max: usize) -> String {
    let flat = flat(text);
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

/// `12.3 KiB`: a size for people.
pub fn bytes(n: u64) -> String {
    let mut v = n as f64;
    for unit in ["bytes", "KiB", "MiB", "GiB"] {
        if v < 1024.0 || unit == "GiB" {
            return if unit == "bytes" {
                format!("{n} bytes")
            } else {
                format!("{v:.1} {unit}")
            };
        }
        v /= 1024.0;
    }
    format!("{n} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(plural(1u64, "issue", "issues"), "1 issue");
        assert_eq!(plural(0i64, "issue", "issues"), "0 issues");
        assert_eq!(plural(2usize, "file", "files"), "2 files");
        assert_eq!(and_list(&[]), "");
        assert_eq!(and_list(&["a".into()]), "a");
        assert_eq!(
            and_list(&["a".into(), "b".into(), "c".into()]),
            "a, b and c"
        );
        assert_eq!(flat(" a\n\tb  c "), "a b c");
        assert_eq!(one_line("a\nb c", 3), "a b…");
        assert_eq!(one_line("a\nb", 3), "a b");
    }
}
