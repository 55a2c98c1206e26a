//! Unified diffs of a path's content before and now, as `git diff --no-index` prints them
//! (the working tree's `diff` ops: a world's runs, an overlay's pending changes).

/// What a path held, for a diff.
pub enum Content {
    Absent,
    Dir,
    /// A regular file's bytes and permission bits.
    Bytes(Vec<u8>, u32),
    /// A regular file too large to show.
    TooLarge(u64),
    Link(String),
    Unreadable(String),
}

/// Files larger than this are named in a diff, not shown.
pub const DIFF_MAX: u64 = 8 << 20;

/// One path's part of a diff (nothing when before and now hold the same).
pub fn unified(out: &mut String, path: &str, before: &Content, now: &Content) {
    let text = |c: &Content| -> Option<String> {
        match c {
            Content::Bytes(b, _) => std::str::from_utf8(b)
                .ok()
                .filter(|s| !s.contains('\0'))
                .map(str::to_string),
            Content::Link(t) => Some(t.clone()),
            _ => None,
        }
    };
    let mode = |c: &Content| match c {
        Content::Bytes(_, m) => format!("100{:03o}", m & 0o777),
        Content::Link(_) => "120000".into(),
        _ => String::new(),
    };
    match (before, now) {
        (Content::Absent | Content::Dir, Content::Absent | Content::Dir) => return,
        (Content::Bytes(a, ma), Content::Bytes(b, mb)) if a == b && ma == mb => return,
        (Content::Link(a), Content::Link(b)) if a == b => return,
        _ => {}
    }
    out.push_str(&format!("diff --git a/{path} b/{path}\n"));
    let absent = |c: &Content| matches!(c, Content::Absent | Content::Dir);
    if absent(before) {
        out.push_str(&format!("new file mode {}\n", mode(now)));
    } else if absent(now) {
        out.push_str(&format!("deleted file mode {}\n", mode(before)));
    } else if mode(before) != mode(now) {
        out.push_str(&format!(
            "old mode {}\nnew mode {}\n",
            mode(before),
            mode(now)
        ));
    }
    for c in [before, now] {
        match c {
            Content::Unreadable(why) => {
                out.push_str(&format!("# {path}: {why}\n"));
                return;
            }
            Content::TooLarge(n) => {
                out.push_str(&format!(
                    "# {path}: {n} bytes, larger than the diff shows\n"
                ));
                return;
            }
            _ => {}
        }
    }
    let (a, b) = (
        if absent(before) {
            Some(String::new())
        } else {
            text(before)
        },
        if absent(now) {
            Some(String::new())
        } else {
            text(now)
        },
    );
    let old = if absent(before) {
        "/dev/null".to_string()
    } else {
        format!("a/{path}")
    };
    let new = if absent(now) {
        "/dev/null".to_string()
    } else {
        format!("b/{path}")
    };
    let (Some(a), Some(b)) = (a, b) else {
        out.push_str(&format!("Binary files {old} and {new} differ\n"));
        return;
    };
    if a == b {
        return;
    }
    let diff = similar::TextDiff::from_lines(&a, &b);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&old, &new)
        .to_string();
    out.push_str(&text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

/// What the file at `path` holds, read through `open` (a regular file's bytes up to
/// `DIFF_MAX`).
pub fn read_file(mut f: std::fs::File, size: u64, perm: u32) -> Content {
    use std::io::Read;
    if size > DIFF_MAX {
        return Content::TooLarge(size);
    }
    let mut buf = Vec::new();
    match f.read_to_end(&mut buf) {
        Ok(_) => Content::Bytes(buf, perm),
        Err(e) => Content::Unreadable(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unified_diff_reads_as_gits() {
        let mut out = String::new();
        unified(
            &mut out,
            "README.md",
            &Content::Bytes(b"hello\n".to_vec(), 0o644),
            &Content::Bytes(b"junk\n".to_vec(), 0o644),
        );
        assert!(
            out.starts_with(
                "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@"
            ),
            "{out}"
        );
        assert!(out.contains("-hello\n+junk\n"), "{out}");
        let mut out = String::new();
        unified(
            &mut out,
            "n",
            &Content::Absent,
            &Content::Bytes(b"x\n".to_vec(), 0o755),
        );
        assert!(
            out.contains("new file mode 100755\n--- /dev/null\n+++ b/n\n"),
            "{out}"
        );
        let mut out = String::new();
        unified(
            &mut out,
            "b",
            &Content::Bytes(vec![0, 1], 0o644),
            &Content::Bytes(vec![0, 2], 0o644),
        );
        assert_eq!(out, "diff --git a/b b/b\nBinary files a/b and b/b differ\n");
    }
}
