//! Globs over world paths, as policy rules and a files host's settings write them: `*`
//! matches within one segment, `?` one character, a `**` segment any number of segments.

/// Why a pattern is not a glob (or, for `Glob::new`, not one over ops).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error(
        "match must not be empty (a glob over ENTRY/ops/NAME, e.g. \"tracker/pulls/*/ops/merge\")"
    )]
    Empty,
    #[error("match {0:?} has an empty segment (`//` or a trailing `/`)")]
    EmptySegment(String),
    #[error(
        "match {0:?}: `**` stands for whole segments only (`a/**/b`); within a segment use `*`"
    )]
    PartialDoubleStar(String),
    #[error("match {0:?} can never match an op: it is a glob over ENTRY/ops/NAME, e.g. \"tracker/pulls/*/ops/merge\" or \"tracker/**\" (or over a files host's paths, e.g. \"files/secret/**\")")]
    NeverAnOp(String),
}

/// A glob over an op's world path: `*` matches within one segment, `?` one character,
/// a `**` segment any number of segments (also none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    text: String,
    segments: Vec<String>,
}

impl Glob {
    /// A glob over an op's world path `ENTRY/ops/NAME`: one that can never match an op is
    /// refused (see `parse` for a glob over paths).
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        let glob = Glob::parse(pattern)?;
        // A rule that can never match an op is a mistake the manifest's author must hear of.
        if !glob.names_op() {
            return Err(GlobError::NeverAnOp(pattern.to_string()));
        }
        Ok(glob)
    }

    /// A glob over world paths, checked for its form only.
    pub fn parse(pattern: &str) -> Result<Glob, GlobError> {
        let text = pattern.trim_start_matches('/').to_string();
        if text.is_empty() {
            return Err(GlobError::Empty);
        }
        let segments: Vec<String> = text.split('/').map(str::to_string).collect();
        if segments.iter().any(String::is_empty) {
            return Err(GlobError::EmptySegment(pattern.to_string()));
        }
        if segments.iter().any(|s| s != "**" && s.contains("**")) {
            return Err(GlobError::PartialDoubleStar(pattern.to_string()));
        }
        Ok(Glob { text, segments })
    }

    /// Whether the glob can match an op's path (`…/ops/NAME`).
    pub fn names_op(&self) -> bool {
        let n = self.segments.len();
        self.segments.iter().any(|s| s == "**")
            || (n >= 2 && segment_matches(&self.segments[n - 2], "ops"))
    }

    /// Whether the glob's first segments match `prefix` (a host's mount path): a glob over
    /// that host's paths.
    pub fn starts_within(&self, prefix: &[&str]) -> bool {
        let mut pattern = self.segments.as_slice();
        for seg in prefix {
            match pattern.split_first() {
                Some((first, _)) if first == "**" => return true,
                Some((first, rest)) if segment_matches(first, seg) => pattern = rest,
                _ => return false,
            }
        }
        true
    }

    /// Whether some path at or below `prefix` (its segments) matches: what a directory op
    /// over a whole subtree must be judged by. With `op`, a glob that names an op
    /// (`…/ops/NAME`) counts only for that op.
    pub fn matches_within(&self, prefix: &str, op: Option<&str>) -> bool {
        let n = self.segments.len();
        if let Some(op) = op {
            if n >= 2
                && self.segments[n - 2] == "ops"
                && !segment_matches(&self.segments[n - 1], op)
            {
                return false;
            }
        }
        let parts: Vec<&str> = prefix.split('/').filter(|s| !s.is_empty()).collect();
        prefix_match(&self.segments, &parts)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the op path (`tracker/pulls/7/ops/merge`, no leading `/`) matches.
    pub fn matches(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        segments_match(&self.segments, &parts)
    }
}

/// Whether `pattern` matches `path` or some path below it.
fn prefix_match(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        // The pattern ends: it matches the prefix itself only.
        None => path.is_empty(),
        // `**` reaches below any prefix.
        Some((first, _)) if first == "**" => true,
        Some((first, rest)) => match path.split_first() {
            Some((seg, more)) => segment_matches(first, seg) && prefix_match(rest, more),
            // The prefix is used up: what is left of the pattern matches below it.
            None => true,
        },
    }
}

fn segments_match(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| segments_match(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((seg, more)) => segment_matches(first, seg) && segments_match(rest, more),
            None => false,
        },
    }
}

/// `*` and `?` within one segment.
pub(crate) fn segment_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Classic wildcard matching with one backtrack point for the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}
