//! The files host's offer to search: every UTF-8 text file under the root, a page at a time.
//!
//! Walk order is deterministic: names sorted byte-wise in every directory, depth first, so a
//! relative path compared segment by segment is the walk order and serves as the cursor. A
//! page re-walks only the directories on the cursor's path, skipping smaller siblings without
//! reading them. Skipped: hidden names (`.git`, `.env`), directories tagged as caches
//! (`CACHEDIR.TAG`, as cargo's `target/` is), symlinks (their targets inside the root are
//! indexed at their own path), files over 1 MiB, binaries (a NUL byte) and invalid UTF-8.
//! HTML files (`.html`, `.htm`) are converted to text with a real HTML parser.

use std::path::Path;
use std::time::UNIX_EPOCH;

use scraper::{ElementRef, Html, Node};

use crate::host::{Document, DocumentPage, HostError, HostResult};

use super::FilesHost;

/// Larger files are not indexed.
pub(super) const MAX_DOCUMENT_BYTES: u64 = 1024 * 1024;

/// Elements whose text is not content.
const SKIPPED_ELEMENTS: &[&str] = &[
    "script", "style", "nav", "noscript", "template", "head", "svg", "iframe", "object",
];

/// Elements that start a new line of text.
const BLOCK_ELEMENTS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "td",
    "th",
    "tr",
    "ul",
];

/// A walk in progress: the documents found so far and where to stop.
struct Walk<'a> {
    host: &'a FilesHost,
    limit: usize,
    out: Vec<Document>,
    /// The relative path of the last file looked at (the cursor when the page is full).
    last: Option<Vec<String>>,
}

impl FilesHost {
    /// One page of documents after `cursor` (a relative path, `/`-separated).
    pub(super) fn documents_page(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> HostResult<DocumentPage> {
        let after: Option<Vec<String>> = match cursor {
            None => None,
            Some(c) => {
                let segs: Vec<String> = c.split('/').map(str::to_string).collect();
                if segs.iter().any(|s| s.is_empty() || s == "." || s == "..") {
                    return Err(HostError::InvalidArgs(format!(
                        "bad documents cursor {c:?}: a relative path expected"
                    )));
                }
                Some(segs)
            }
        };
        let mut walk = Walk {
            host: self,
            limit: limit.max(1),
            out: Vec::new(),
            last: None,
        };
        let full = walk.dir(&self.root, &mut Vec::new(), after.as_deref())?;
        let next = if full {
            walk.last.map(|segs| segs.join("/"))
        } else {
            None
        };
        Ok((walk.out, next))
    }
}

impl Walk<'_> {
    /// Walk `dir` (relative path `segs`) in order, after `after` (the rest of the cursor
    /// below this directory). Returns true when the page filled up.
    fn dir(
        &mut self,
        dir: &Path,
        segs: &mut Vec<String>,
        after: Option<&[String]>,
    ) -> HostResult<bool> {
        let names = match self.host.read_dir_sorted(dir) {
            Ok(names) => names,
            // A directory that vanished or cannot be read offers nothing.
            Err(_) => return Ok(false),
        };
        let (first, rest) = match after.and_then(|a| a.split_first()) {
            Some((first, rest)) => (Some(first.as_str()), rest),
            None => (None, &[][..]),
        };
        for (name, ft) in names {
            if name.starts_with('.') || ft.is_symlink() {
                continue;
            }
            // Below the cursor: skip smaller names; descend into the cursor's own directory.
            let below: Option<&[String]> = match first {
                Some(f) if name.as_str() < f => continue,
                Some(f) if name == f => {
                    if !ft.is_dir() {
                        // The cursor itself: already offered.
                        continue;
                    }
                    // A directory sorts before its contents: a cursor naming it (a file
                    // replaced by a directory) leaves all of them to come.
                    (!rest.is_empty()).then_some(rest)
                }
                _ => None,
            };
            let path = dir.join(&name);
            segs.push(name);
            let full = if ft.is_dir() {
                let tag = path.join("CACHEDIR.TAG");
                if self.host.beneath.lstat(&tag).is_ok_and(|m| m.is_file()) {
                    false
                } else {
                    self.dir(&path, segs, below)?
                }
            } else if ft.is_file() {
                self.file(&path, segs);
                self.out.len() >= self.limit
            } else {
                false
            };
            segs.pop();
            if full {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn file(&mut self, path: &Path, segs: &[String]) {
        self.last = Some(segs.to_vec());
        if let Some(doc) = file_document(self.host, path, segs) {
            self.out.push(doc);
        }
    }
}

/// The document of one regular file, or None if it is not indexable text.
fn file_document(host: &FilesHost, path: &Path, segs: &[String]) -> Option<Document> {
    // Read below the root, links not followed, special files never opened.
    let (bytes, capped, meta) = host
        .beneath
        .read_capped(path, MAX_DOCUMENT_BYTES)
        .ok()?
        .ok()?;
    if capped || bytes.contains(&0) {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    let name = segs.last()?.clone();
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| format!("{}.{:09}", d.as_secs(), d.subsec_nanos()))
        .unwrap_or_default();
    let version = format!("{mtime}:{}", meta.len());
    let lower = name.to_ascii_lowercase();
    let (title, text) = if lower.ends_with(".html") || lower.ends_with(".htm") {
        let page = html_to_text(&text);
        (page.title.unwrap_or_else(|| name.clone()), page.text)
    } else {
        (name, text)
    };
    Some(Document {
        path: segs.to_vec(),
        title,
        text,
        version,
    })
}

/// The readable content of an HTML page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtmlText {
    /// The `<title>`, if the page has a non-empty one.
    pub title: Option<String>,
    /// The text a reader sees, one block per line, without scripts, styles and navigation.
    pub text: String,
}

/// What a walk over the element tree still has to do (iterative: pages nest arbitrarily deep).
enum Step<'a> {
    Element(ElementRef<'a>),
    Text(&'a str),
    Break,
}

/// Parse `html` as a browser would and keep the text a reader sees.
pub fn html_to_text(html: &str) -> HtmlText {
    let doc = Html::parse_document(html);
    let root = doc.root_element();
    let title = root
        .descendent_elements()
        .find(|e| e.value().name() == "title")
        .map(|e| collapse_spaces(&e.text().collect::<String>()))
        .filter(|t| !t.is_empty());
    let mut raw = String::new();
    let mut stack = vec![Step::Element(root)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(t) => raw.push_str(t),
            Step::Break => raw.push('\n'),
            Step::Element(el) => {
                let name = el.value().name();
                if SKIPPED_ELEMENTS.contains(&name) {
                    continue;
                }
                let block = BLOCK_ELEMENTS.contains(&name);
                if block {
                    raw.push('\n');
                    stack.push(Step::Break);
                }
                let mut kids = Vec::new();
                for child in el.children() {
                    match child.value() {
                        Node::Text(t) => kids.push(Step::Text(t)),
                        Node::Element(_) => {
                            if let Some(e) = ElementRef::wrap(child) {
                                kids.push(Step::Element(e));
                            }
                        }
                        _ => {}
                    }
                }
                stack.extend(kids.into_iter().rev());
            }
        }
    }
    let lines: Vec<String> = raw
        .lines()
        .map(collapse_spaces)
        .filter(|l| !l.is_empty())
        .collect();
    HtmlText {
        title,
        text: lines.join("\n"),
    }
}

/// Runs of white space as one space, trimmed.
fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_keeps_text_and_drops_scripts_styles_and_navigation() {
        let page = html_to_text(
            "<!doctype html><html><head><title> Release  notes </title>\
             <style>body { color: red }</style><script>var secret = 1;</script></head>\
             <body><nav><a href='/'>Home</a></nav><h1>Version 2</h1>\
             <p>Fixes the <b>config</b> crash.</p><script>alert('x')</script>\
             <ul><li>one</li><li>two &amp; three</li></ul></body></html>",
        );
        assert_eq!(page.title.as_deref(), Some("Release notes"));
        assert_eq!(
            page.text,
            "Version 2\nFixes the config crash.\none\ntwo & three"
        );
    }

    #[test]
    fn html_without_title_and_deep_nesting() {
        let page = html_to_text("<p>plain</p>");
        assert_eq!(page.title, None);
        assert_eq!(page.text, "plain");
        // Deep enough to overflow a recursive walk on a small stack; html5ever itself is
        // quadratic in depth, so deeper would only test its patience.
        let deep = format!("{}deep{}", "<div>".repeat(5_000), "</div>".repeat(5_000));
        assert_eq!(html_to_text(&deep).text, "deep");
    }
}
