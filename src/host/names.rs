//! Reserved names and the reversible escape that keeps host children from shadowing them.
//!
//! A host child named like a reserved name (or like an already escaped one) gets one `~`
//! appended in the tree: `ops` → `ops~`, `ops~` → `ops~~`. Unescaping drops one `~`.

/// Names every entry reserves for itself: a host child so named is shown escaped.
pub const RESERVED: &[&str] = &["description", "ref", "ops", ".ops", "body"];

/// Names the world's root reserves besides: no host's child is ever at the root (a host's
/// path has at least one segment), so these only bound host paths and are never escaped.
pub const ROOT_RESERVED: &[&str] = &["README.md", ".wip"];

/// The longest file name, in bytes (Linux's NAME_MAX): no listed name is longer.
pub const NAME_MAX: usize = 255;

pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// What an entry's description adds when the tree shows its name escaped: its real name
/// and why (`None` for a name shown as it is).
pub fn escape_note(name: &str) -> Option<String> {
    let shown = escape(name);
    if shown == name {
        return None;
    }
    let stem = name.trim_end_matches('~');
    Some(if stem == name {
        format!(
            "really named {}; shown as {} because every entry reserves {stem}",
            self::shown(name),
            self::shown(&shown)
        )
    } else {
        format!(
            "really named {}; shown as {} because one ~ is added to names like {stem} and its escapes",
            self::shown(name),
            self::shown(&shown)
        )
    })
}

/// Whether `name` is `reserved` followed by zero or more `~`.
fn reserved_stem(name: &str) -> bool {
    is_reserved(name.trim_end_matches('~'))
}

/// Host name → name in the tree.
pub fn escape(name: &str) -> String {
    if reserved_stem(name) {
        format!("{name}~")
    } else {
        name.to_string()
    }
}

/// Name in the tree → host name, or `None` when the name is a reserved one (not a child).
pub fn unescape(name: &str) -> Option<String> {
    if is_reserved(name) {
        None
    } else if reserved_stem(name) {
        Some(name[..name.len() - 1].to_string())
    } else {
        Some(name.to_string())
    }
}

/// One control character as the world prints it: `\n`, `\t`, `\r`, `\e`, else `\xHH`
/// (C0 and DEL) or `\u{HH}` (C1), so no name or text can drive a terminal.
fn escape_control(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\u{1b}' => out.push_str("\\e"),
        c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// Text the world prints on one line (a name or path in a row, a description): every
/// control character escaped, newlines and tabs included, so one row stays one row.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            escape_control(c, &mut out);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Text the world prints over several lines (a result, a guard, the README): control
/// characters escaped but for the newlines and tabs that shape it.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let raw = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(raw) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if raw(c) {
            escape_control(c, &mut out);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether a name can appear in the tree at all.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

/// A positive number written canonically (no sign, no leading zero, at most 18 digits), so
/// that a numbered object (issue, run, row position) has exactly one name.
pub fn canonical_number<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || s.len() > 18 || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

/// Where one host's entries are in the world: its mount path, then each segment of a
/// host-relative path escaped as the tree shows it (`ops` → `ops~`). Every path
/// a host prints (in guards, results, discovered entries, search hits) is built here, so
/// each one exists in the tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Paths {
    mount: String,
    /// A working tree's (`Host::tree`): names exact, an entry's own files at `PATH@/…`.
    exact: bool,
}

impl Paths {
    /// For a host mounted at `mount` (`tracker`, `db/chinook`; `""`: the world's root).
    pub fn new(mount: &str) -> Paths {
        Paths {
            mount: mount.trim_matches('/').to_string(),
            exact: false,
        }
    }

    /// For a working tree mounted at `mount`: its names are the files' own, and each
    /// path's entry is `PATH@` (`files/src/main.rs@/ops/edit`).
    pub fn exact(mount: &str) -> Paths {
        Paths {
            exact: true,
            ..Paths::new(mount)
        }
    }

    /// For `host` mounted at `mount`, whichever it is.
    pub fn of(mount: &str, host: &dyn super::Host) -> Paths {
        if host.tree().is_some() {
            Paths::exact(mount)
        } else {
            Paths::new(mount)
        }
    }

    /// The host's mount path in the world.
    pub fn mount(&self) -> &str {
        &self.mount
    }

    /// World path of the entry at host-relative `segments`.
    pub fn entry<S: AsRef<str>>(&self, segments: &[S]) -> String {
        let mut out = self.mount.clone();
        for s in segments {
            if !out.is_empty() {
                out.push('/');
            }
            if self.exact {
                out.push_str(s.as_ref());
            } else {
                out.push_str(&escape(s.as_ref()));
            }
        }
        out
    }

    /// World path of one of the entry's own files or folders (`body`, `description`,
    /// `ops`), which is not escaped.
    pub fn file<S: AsRef<str>>(&self, segments: &[S], own: &str) -> String {
        let entry = self.entry(segments);
        if self.exact {
            return format!("{entry}@/{own}");
        }
        if entry.is_empty() {
            own.to_string()
        } else {
            format!("{entry}/{own}")
        }
    }

    /// World path of the entry's op `op` (its folder under `ops/`).
    pub fn op<S: AsRef<str>>(&self, segments: &[S], op: &str) -> String {
        self.file(segments, &format!("ops/{op}"))
    }

    /// World path of the `call` file of the entry's op `op`.
    pub fn call<S: AsRef<str>>(&self, segments: &[S], op: &str) -> String {
        self.file(segments, &format!("ops/{op}/call"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn printed_paths_escape_each_segment_and_keep_own_files() {
        let p = Paths::new("/files/");
        // README.md and .wip are the root's alone: no host child is escaped for them.
        assert_eq!(p.entry(&["docs", "README.md"]), "files/docs/README.md");
        assert_eq!(p.entry(&[".wip"]), "files/.wip");
        assert_eq!(p.entry(&["ops", "x"]), "files/ops~/x");
        assert_eq!(p.entry::<&str>(&[]), "files");
        assert_eq!(p.op(&["ops"], "read"), "files/ops~/ops/read");
        assert_eq!(p.call(&["a"], "write"), "files/a/ops/write/call");
        assert_eq!(p.file(&["body"], "body"), "files/body~/body");
        let tree = Paths::exact("files");
        assert_eq!(
            tree.entry(&["ops", "x"]),
            "files/ops/x",
            "a tree's names are exact"
        );
        assert_eq!(tree.call(&["a"], "write"), "files/a@/ops/write/call");
        assert_eq!(tree.op::<&str>(&[], "revert"), "files@/ops/revert");
        let root = Paths::new("");
        assert_eq!(root.entry(&["description"]), "description~");
        assert_eq!(root.op::<&str>(&[], "search"), "ops/search");
    }

    use super::*;

    #[test]
    fn escape_roundtrips() {
        for n in [
            "ops",
            "ops~",
            "ops~~",
            "description",
            "x",
            "ref~x",
            "~",
            "README.md",
            "body",
            "body~",
        ] {
            let e = escape(n);
            assert!(!is_reserved(&e), "{n} escaped to reserved {e}");
            assert_eq!(unescape(&e).as_deref(), Some(n));
        }
        assert_eq!(escape("ops"), "ops~");
        assert_eq!(unescape("ops"), None);
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape("body"), "body~");
        assert_eq!(unescape("body"), None);
        assert_eq!(escape("README.md"), "README.md");
        assert_eq!(unescape("README.md~").as_deref(), Some("README.md~"));
    }

    #[test]
    fn an_escaped_name_says_what_it_is_really_called() {
        assert_eq!(escape_note("README.md"), None);
        assert_eq!(
            escape_note("ops").as_deref(),
            Some("really named ops; shown as ops~ because every entry reserves ops")
        );
        assert!(escape_note("body~")
            .is_some_and(|n| n.starts_with("really named body~; shown as body~~")));
    }

    #[test]
    fn printed_text_carries_no_raw_control_character() {
        assert_eq!(
            shown("a\nb\tc\u{1b}[31md\u{7f}\u{9b}"),
            "a\\nb\\tc\\e[31md\\x7f\\u{9b}"
        );
        assert!(matches!(shown("plain · ü"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            printable("row 1\tx\nrow\r2\u{1b}]0;t\u{7}\n"),
            "row 1\tx\nrow\\r2\\e]0;t\\x07\n"
        );
    }

    #[test]
    fn numbers_have_one_spelling() {
        assert_eq!(canonical_number::<i64>("42"), Some(42));
        for bad in ["", "0", "042", "+1", "-1", "1e3", "1234567890123456789"] {
            assert_eq!(canonical_number::<i64>(bad), None, "{bad}");
        }
    }
}
