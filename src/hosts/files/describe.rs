//! One-line descriptions of files and directories, and the small formatters they share
//! with `stat` and `list`.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::host::EntryInfo;

use super::beneath::Kind;
use super::resolve::{Located, Node};
use super::FilesHost;

/// Files up to this size get a line count in their description.
const COUNT_LINES_UP_TO: u64 = 1024 * 1024;
/// How much of a file decides text or binary (as git does: a NUL byte means binary).
const SNIFF_BYTES: usize = 8 * 1024;

pub(super) fn human_size(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

pub(super) use crate::host::text::plural;

/// `2026-11-30 12:04 UTC` (UTC: the daemon has no time zone database, and UTC is unambiguous).
pub(super) fn format_time(t: SystemTime) -> String {
    let secs: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = crate::calendar::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// `rw-r--r-- (0644)`
pub(super) fn mode_string(meta: &fs::Metadata) -> String {
    let mode = meta.permissions().mode() & 0o7777;
    let mut s = String::with_capacity(9);
    for shift in [6u32, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    format!("{s} ({mode:04o})")
}

/// What kind of thing a file type is, in words.
pub(super) fn kind_name(ft: &fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

pub(super) fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

/// Lines as `wc -l` would count them, plus a last line without its newline.
pub(super) fn count_lines(bytes: &[u8]) -> usize {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// What a look into a regular file says: text or binary, and its line count when small.
struct Sniff {
    binary: bool,
    lines: Option<usize>,
}

fn sniff(file: fs::File, size: u64) -> std::io::Result<Sniff> {
    let want = if size <= COUNT_LINES_UP_TO {
        COUNT_LINES_UP_TO
    } else {
        SNIFF_BYTES as u64
    };
    let mut bytes = Vec::new();
    // Bounded: the file may have grown since its size was read.
    file.take(want).read_to_end(&mut bytes)?;
    let binary = is_binary(&bytes);
    let lines = (!binary && size <= COUNT_LINES_UP_TO).then(|| count_lines(&bytes));
    Ok(Sniff { binary, lines })
}

/// Counts of a directory's visible children.
#[derive(Default)]
pub(super) struct Counts {
    pub total: usize,
    pub dirs: usize,
    pub files: usize,
    pub links: usize,
    pub other: usize,
}

impl Counts {
    pub(super) fn of(names: &[(String, Kind)]) -> Counts {
        let mut c = Counts {
            total: names.len(),
            ..Counts::default()
        };
        for (_, ft) in names {
            if ft.is_dir() {
                c.dirs += 1;
            } else if ft.is_file() {
                c.files += 1;
            } else if ft.is_symlink() {
                c.links += 1;
            } else {
                c.other += 1;
            }
        }
        c
    }

    /// `12 entries (3 directories, 9 files)`
    pub(super) fn words(&self) -> String {
        if self.total == 0 {
            return "empty".to_string();
        }
        let mut parts = vec![
            plural(self.dirs, "directory", "directories"),
            plural(self.files, "file", "files"),
        ];
        if self.links > 0 {
            parts.push(plural(self.links, "symlink", "symlinks"));
        }
        if self.other > 0 {
            parts.push(plural(self.other, "other", "others"));
        }
        format!(
            "{} ({})",
            plural(self.total, "entry", "entries"),
            parts.join(", ")
        )
    }
}

impl FilesHost {
    /// What an entry shows of itself.
    pub(super) fn info(&self, loc: &Located) -> EntryInfo {
        match &loc.node {
            Node::Dir { real, link } => {
                let mut description = match link {
                    Some(t) => format!("symlink → {} · ", t.display()),
                    None => String::new(),
                };
                if loc.segs.is_empty() {
                    let mode = if self.read_only {
                        "read-only"
                    } else {
                        "read-write"
                    };
                    description.push_str(&format!("Files of {} ({mode}) · ", self.root.display()));
                } else {
                    description.push_str("directory · ");
                }
                description.push_str(&self.dir_summary(real));
                // A link back to an ancestor would make `find` and `grep -r` loop forever:
                // such an entry stays reachable by path but out of listings.
                let cycle = link.is_some()
                    && loc
                        .segs
                        .split_last()
                        .and_then(|(_, parent)| self.parent_real(parent))
                        .is_some_and(|p| p.starts_with(real));
                if cycle {
                    description.push_str(" · loops back to an ancestor");
                }
                EntryInfo {
                    description,
                    reference: file_ref(real),
                    indexable: !cycle,
                    modified: self.beneath.metadata(real).and_then(|m| m.modified()).ok(),
                    title: None,
                    partial: false,
                }
            }
            Node::File { real, link } => {
                let prefix = match link {
                    Some(t) => format!("symlink → {} · ", t.display()),
                    None => String::new(),
                };
                let (summary, modified) = self.file_summary(real);
                EntryInfo::new(format!("{prefix}{summary}"), file_ref(real)).modified(modified)
            }
            Node::Broken { at, target, why } => EntryInfo::new(
                format!(
                    "symlink → {} · {why}: not followed, every op is refused",
                    target.display()
                ),
                file_ref(at),
            ),
        }
    }

    /// The physical directory of a host path (the parent of a child being described).
    fn parent_real(&self, segs: &[String]) -> Option<std::path::PathBuf> {
        match self.locate(segs).ok()??.node {
            Node::Dir { real, .. } => Some(real),
            _ => None,
        }
    }

    /// `12 entries (3 directories, 9 files)`, with the `list` op's paging when it is long
    /// (the folder itself lists every child).
    pub(super) fn dir_summary(&self, real: &Path) -> String {
        match self.read_dir_sorted(real) {
            Ok(names) => {
                let mut s = Counts::of(&names).words();
                if names.len() > self.page_size {
                    s.push_str(&format!(
                        "; its list op shows the first {} by name",
                        self.page_size
                    ));
                }
                s
            }
            Err(e) => format!("unreadable: {e}"),
        }
    }

    /// `file · 1.2 KiB · 34 lines · text · modified 2026-11-30 12:04 UTC`, and the time
    /// it was modified (from the same `statx`).
    pub(super) fn file_summary(&self, real: &Path) -> (String, Option<SystemTime>) {
        let modified = |meta: &fs::Metadata| {
            meta.modified()
                .map(|t| format!(" · modified {}", format_time(t)))
                .unwrap_or_default()
        };
        // Never open a FIFO or device to describe it: the open could block or act.
        let (file, meta) = match self.beneath.open_regular(real) {
            Ok(Ok(found)) => found,
            Ok(Err(meta)) => {
                let words = format!("{}{}", kind_name(&meta.file_type()), modified(&meta));
                return (words, meta.modified().ok());
            }
            Err(e) => return (format!("file · unreadable: {e}"), None),
        };
        let when = meta.modified().ok();
        let modified = modified(&meta);
        let size = meta.len();
        let mut parts = vec!["file".to_string(), human_size(size)];
        match sniff(file, size) {
            Ok(Sniff { binary: true, .. }) => parts.push("binary".into()),
            Ok(Sniff { lines, .. }) => {
                if let Some(n) = lines {
                    parts.push(plural(n, "line", "lines"));
                }
                parts.push("text".into());
            }
            Err(e) => parts.push(format!("unreadable: {e}")),
        }
        (format!("{}{modified}", parts.join(" · ")), when)
    }
}

/// `file:///abs/path`: the identity of a file is its physical path.
pub(super) fn file_ref(path: &Path) -> String {
    format!("file://{}", path.display())
}
