//! Titled names, for people (`--titled`, `[world] titled = true`): a collection member with
//! a short title lists as `42 Crash when config is missing` instead of `42`.
//!
//! The titled name is derived, never stored: a lookup of one splits it at a space, asks the
//! host for the bare name before it and accepts it only if that entry's title gives back
//! exactly the same name. The bare name keeps resolving to the same node, and every path
//! the world prints (results, `discovered/`, the known world) is the bare, canonical one.

/// A titled name is cut to about this many bytes (the bare name always stays whole).
pub const MAX_BYTES: usize = 60;
/// A bare name longer than `MAX_BYTES` still gets this much of its title.
const MIN_TITLE_BYTES: usize = 24;
/// How many spaces of a name a lookup tries as the end of the bare name.
const MAX_SPLITS: usize = 4;

/// The titled name of a child named `name` (as the tree shows it, escaped) with `title`:
/// `None` when the title has nothing printable. Control characters and runs of whitespace
/// become one space, `/` becomes `∕` (U+2215), and the title is cut at a character
/// boundary, with `…`, so the whole name stays within about `MAX_BYTES`.
pub fn titled_name(name: &str, title: &str) -> Option<String> {
    let mut clean = String::with_capacity(title.len());
    for word in title
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        if !clean.is_empty() {
            clean.push(' ');
        }
        clean.push_str(&word.replace('/', "∕"));
    }
    if clean.is_empty() {
        return None;
    }
    let budget = MAX_BYTES
        .saturating_sub(name.len() + 1)
        .max(MIN_TITLE_BYTES);
    if clean.len() > budget {
        let ellipsis = '…'.len_utf8();
        let mut cut = budget.saturating_sub(ellipsis);
        while cut > 0 && !clean.is_char_boundary(cut) {
            cut -= 1;
        }
        clean.truncate(cut);
        let trimmed = clean.trim_end().len();
        clean.truncate(trimmed);
        clean.push('…');
    }
    Some(format!("{name} {clean}"))
}

/// The bare names a titled `name` may have been made from: what precedes each of its first
/// few spaces, shortest first.
pub fn bare_candidates(name: &str) -> impl Iterator<Item = &str> {
    name.match_indices(' ')
        .take(MAX_SPLITS)
        .map(move |(i, _)| &name[..i])
        .filter(|bare| !bare.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_titles_are_kept_whole() {
        assert_eq!(
            titled_name("42", "Crash when config is missing").as_deref(),
            Some("42 Crash when config is missing")
        );
    }

    #[test]
    fn titles_are_flattened_and_slashes_replaced() {
        assert_eq!(
            titled_name("7", "  Fix a/b\tpaths\n(again) ").as_deref(),
            Some("7 Fix a∕b paths (again)")
        );
        assert_eq!(titled_name("7", " \n\t "), None);
        assert_eq!(titled_name("7", ""), None);
    }

    #[test]
    fn long_titles_are_cut_at_a_character_boundary() {
        let long = "Ünïcödé ".repeat(20);
        let name = titled_name("123", &long).unwrap();
        assert!(name.len() <= MAX_BYTES, "{} bytes: {name}", name.len());
        assert!(name.starts_with("123 Ünïcödé"));
        assert!(name.ends_with('…'), "{name}");
        assert!(!name.contains(" …"), "no space before the ellipsis: {name}");
        // A long bare name keeps it whole and still gets a short title.
        let key = "k".repeat(70);
        let name = titled_name(&key, &long).unwrap();
        assert!(name.starts_with(&format!("{key} Ünïcödé")), "{name}");
        assert!(name.len() <= key.len() + 1 + MIN_TITLE_BYTES);
    }

    #[test]
    fn a_titled_name_is_never_reserved_nor_invalid() {
        for (bare, title) in [("ops", "x"), ("description", "y/z"), ("1", "\0")] {
            if let Some(n) = titled_name(bare, title) {
                assert!(crate::host::names::is_valid(&n), "{n:?}");
                assert!(!crate::host::names::is_reserved(&n), "{n:?}");
            }
        }
        assert_eq!(titled_name("1", "\0"), None);
    }

    #[test]
    fn candidates_are_the_prefixes_before_spaces() {
        let c: Vec<&str> = bare_candidates("42 Crash when config").collect();
        assert_eq!(c, vec!["42", "42 Crash", "42 Crash when"]);
        assert_eq!(bare_candidates("42").count(), 0);
        assert_eq!(bare_candidates(" x").count(), 0);
    }
}
