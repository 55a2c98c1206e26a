//! First-run content: the demo project (a small CLI tool, `demo`, that renames files in bulk
//! from templates) and optional synthetic issues for benchmarks.
//!
//! Pull requests are chosen so that each `merge` guard shows a different state:
//! #51 ready · #50 flaky check + unreviewed (fixes #42) · #52 lint fails for real ·
//! #53 review requested, none given · #54 authored by alex · #12 merged · #55 conflicts.

use super::db;
use super::store::{args, Store};
use crate::host::HostResult;
use crate::manifest::Identity;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Seed {
    Demo,
    None,
}

/// Timestamps of seeded items: item `n` is opened on day `2n` after this date.
fn base_day() -> i64 {
    db::days_from_civil(2026, 8, 2)
}

fn at(day: i64, hour: i64) -> String {
    db::iso(day * 86_400 + hour.rem_euclid(24) * 3600 + 17 * 60)
}

fn opened(n: i64) -> i64 {
    base_day() + 2 * n
}

struct Issue {
    n: i64,
    title: &'static str,
    author: &'static str,
    /// (closed by, reason) for closed issues.
    closed: Option<(&'static str, &'static str)>,
    labels: &'static [&'static str],
    assignees: &'static [&'static str],
    body: &'static str,
    comments: &'static [(&'static str, &'static str)],
}

struct Check {
    name: &'static str,
    status: &'static str,
    summary: &'static str,
    retryable: bool,
    log: &'static str,
}

struct Pull {
    n: i64,
    title: &'static str,
    author: &'static str,
    head: &'static str,
    /// Who merged it, for merged ones.
    merged_by: Option<&'static str>,
    mergeable: bool,
    conflicts: Option<&'static str>,
    fixes: &'static [i64],
    labels: &'static [&'static str],
    checks: &'static [Check],
    reviews: &'static [(&'static str, &'static str, &'static str)],
    requested: &'static [&'static str],
    comments: &'static [(&'static str, &'static str)],
    body: &'static str,
    diff: &'static str,
}

const USERS: &[(&str, &str, &str)] = &[
    ("alex", "maintainer", "Alex Morgan"),
    ("dana", "maintainer", "Dana Ruiz"),
    ("kim", "maintainer", "Kim Novak"),
    ("sam", "contributor", "Sam Okafor"),
    ("lee", "contributor", "Lee Chen"),
    ("jo", "contributor", "Jo Park"),
];

const LABELS: &[(&str, &str, &str)] = &[
    ("bug", "d73a4a", "Something isn't working"),
    ("enhancement", "a2eeef", "New feature or request"),
    (
        "docs",
        "0075ca",
        "Improvements or additions to documentation",
    ),
    ("good first issue", "7057ff", "Good for newcomers"),
    ("question", "d876e3", "Further information is requested"),
    ("performance", "fbca04", "Speed or memory use"),
    ("windows", "1d76db", "Only happens on Windows"),
    (
        "needs-triage",
        "ededed",
        "Not yet looked at by a maintainer",
    ),
    ("wontfix", "ffffff", "This will not be worked on"),
];

const LOG_BUILD_OK: &str = "$ cargo build --release --locked
   Compiling libc v0.2.169
   Compiling unicode-normalization v0.1.24
   Compiling globset v0.4.15
   Compiling demo v0.9.2 (/work/demo)
    Finished `release` profile [optimized] target(s) in 41.87s
build passed.";

const LOG_TEST_OK: &str = "$ cargo test --locked
running 48 tests
test config::tests::defaults_apply ... ok
test config::tests::parse_full ... ok
test template::tests::counter_padding ... ok
test template::tests::date_placeholder ... ok
test cli::rename_many ... ok
...
test result: ok. 48 passed; 0 failed; 0 ignored; finished in 3.92s
test passed.";

const LOG_LINT_OK: &str = "$ cargo clippy --all-targets -- -D warnings
    Checking demo v0.9.2 (/work/demo)
    Finished `dev` profile [unoptimized + debuginfo] target(s) in 6.02s
$ cargo fmt --check
lint passed.";

const OK_CHECKS: &[Check] = &[
    Check {
        name: "build",
        status: "success",
        summary: "built in 42s",
        retryable: false,
        log: LOG_BUILD_OK,
    },
    Check {
        name: "lint",
        status: "success",
        summary: "clippy and rustfmt clean",
        retryable: false,
        log: LOG_LINT_OK,
    },
    Check {
        name: "test",
        status: "success",
        summary: "48 passed",
        retryable: false,
        log: LOG_TEST_OK,
    },
];

const ISSUES: &[Issue] = &[
    Issue {
        n: 1,
        title: "Add a --dry-run flag",
        author: "dana",
        closed: Some(("alex", "shipped in 0.3.0")),
        labels: &["enhancement"],
        assignees: &["alex"],
        body: "Before letting `demo` loose on a photo library I want to see what it *would* do.\n\n\
               A `--dry-run` (or `-n`) flag that prints `old -> new` for every file and touches nothing would make the tool much less scary.",
        comments: &[
            ("alex", "Agreed, this should have been there from day one. I'll take it."),
            ("dana", "Could the dry run also flag collisions (two files mapping to the same name)?"),
            ("alex", "Yes: collisions are printed in red with a `!` prefix. Shipped in 0.3.0."),
        ],
    },
    Issue {
        n: 2,
        title: "README: installation instructions for cargo install",
        author: "sam",
        closed: Some(("dana", "README updated")),
        labels: &["docs", "good first issue"],
        assignees: &["sam"],
        body: "The README only says \"build from source\". Most people will want `cargo install demo` or a release binary.",
        comments: &[("dana", "Thanks for picking this up, Sam — merged your README change.")],
    },
    Issue {
        n: 3,
        title: "Panic on empty template string",
        author: "lee",
        closed: Some(("kim", "fixed in 0.3.1")),
        labels: &["bug"],
        assignees: &["kim"],
        body: "```\n$ demo rename '' *.txt\nthread 'main' panicked at src/template.rs:88:31:\nindex out of bounds: the len is 0 but the index is 0\n```\n\n\
               An empty template should be an error with a message, not a panic.",
        comments: &[
            ("kim", "Reproduced. The parser assumes at least one token."),
            ("kim", "Fixed on main: `error: the template is empty (try '{name}.{ext}')`."),
        ],
    },
    Issue {
        n: 4,
        title: "Support a {date} placeholder from EXIF data",
        author: "jo",
        closed: None,
        labels: &["enhancement"],
        assignees: &["sam"],
        body: "My main use case is photos: `demo rename '{date:%Y-%m-%d}-{counter}.{ext}' *.jpg`.\n\n\
               Today `{date}` is the file's mtime, which is useless after copying files from a phone. It should prefer the EXIF `DateTimeOriginal` when present and fall back to mtime.\n\n\
               ### Open questions\n\n- Which EXIF crate? `kamadak-exif` looks small.\n- Should there be an explicit `{exif.date}` instead of changing `{date}`?",
        comments: &[
            ("dana", "I'd rather not change `{date}` silently. An explicit `{exif.date}` with a fallback modifier is clearer."),
            ("sam", "I started on this in #52, using `{exif.date}`."),
        ],
    },
    Issue {
        n: 5,
        title: "Shell completions for bash, zsh and fish",
        author: "sam",
        closed: Some(("alex", "shipped in 0.4.0")),
        labels: &["enhancement", "good first issue"],
        assignees: &["lee"],
        body: "clap can generate completions with `clap_complete`. A hidden `demo completions <shell>` subcommand would do.",
        comments: &[("lee", "Done, and added to the release archives under `completions/`.")],
    },
    Issue {
        n: 6,
        title: "Renaming across filesystems fails with EXDEV",
        author: "kim",
        closed: Some(("kim", "fixed in 0.4.1")),
        labels: &["bug"],
        assignees: &["kim"],
        body: "When the template puts files into a directory on another mount, `rename(2)` fails with `EXDEV` (Invalid cross-device link).\n\n\
               We should fall back to copy + fsync + remove, and say so in `--verbose` output.",
        comments: &[
            ("alex", "Please make sure the fallback keeps permissions and mtime."),
            ("kim", "It does now; there is a test that mounts a tmpfs in CI."),
        ],
    },
    Issue {
        n: 7,
        title: "Colours are unreadable on light terminal themes",
        author: "jo",
        closed: None,
        labels: &["bug", "good first issue"],
        assignees: &[],
        body: "The dry-run output uses bright yellow for new names. On a white background (Solarized Light) it is nearly invisible.\n\n\
               Respecting `NO_COLOR` and offering `--color=never|auto|always` would already help.",
        comments: &[("dana", "We do respect `NO_COLOR` since 0.4. The palette could still use bold instead of bright colours. Good first issue.")],
    },
    Issue {
        n: 8,
        title: "Add a man page",
        author: "lee",
        closed: None,
        labels: &["docs", "good first issue"],
        assignees: &[],
        body: "Distributions will want `demo.1`. `clap_mangen` can generate it at build time.",
        comments: &[],
    },
    Issue {
        n: 9,
        title: "Undo log is not written when a rename is interrupted",
        author: "dana",
        closed: Some(("alex", "fixed by #12")),
        labels: &["bug"],
        assignees: &["dana"],
        body: "If I press Ctrl-C in the middle of a large batch, `demo undo` afterwards does nothing: the undo log is only written at the end.\n\n\
               The log should be appended (and flushed) before each rename, so an interrupted batch can be undone.",
        comments: &[
            ("kim", "Ouch. That defeats the point of `undo`. Marking as a bug."),
            ("dana", "I have a fix that writes one JSON line per rename before doing it: #12."),
            ("alex", "Fixed by #12."),
        ],
    },
    Issue {
        n: 10,
        title: "Question: can templates use regex capture groups?",
        author: "jo",
        closed: Some(("kim", "answered")),
        labels: &["question"],
        assignees: &[],
        body: "I want `IMG_1234.JPG` → `holiday-1234.jpg`. Can I capture the digits?",
        comments: &[
            ("kim", "Yes: `--match 'IMG_(\\d+)' '{1}'` — captures are numbered placeholders. `demo rename --match 'IMG_(\\d+)' 'holiday-{1}.{ext|lower}' *.JPG`."),
            ("jo", "Perfect, thank you!"),
        ],
    },
    Issue {
        n: 11,
        title: "Windows: backslashes in templates are mangled",
        author: "sam",
        closed: None,
        labels: &["bug", "windows"],
        assignees: &["sam"],
        body: "On Windows, `demo rename 'sorted\\{name}.{ext}' *` creates files literally named `sorted{name}...` because `\\{` is treated as an escape.\n\n\
               Either accept `/` as the separator everywhere (and document it) or stop treating `\\` as an escape character on Windows.",
        comments: &[
            ("alex", "Accepting `/` everywhere is the least surprising. Backslash escapes are needed for literal braces though."),
            ("sam", "Then `{{` and `}}` for literal braces, like Rust's format strings? That frees the backslash."),
        ],
    },
    Issue {
        n: 13,
        title: "Progress bar for large batches",
        author: "lee",
        closed: None,
        labels: &["enhancement"],
        assignees: &["lee"],
        body: "Renaming 50k files gives no feedback for a minute. A progress bar on stderr (only when it is a terminal) would be nice.",
        comments: &[("lee", "PR #51 adds one using `indicatif`, hidden for batches under 1000 files.")],
    },
    Issue {
        n: 14,
        title: "Slow on directories with 100k files",
        author: "kim",
        closed: None,
        labels: &["performance"],
        assignees: &["kim"],
        body: "`demo rename '{counter:06}.{ext}' big/*` takes 48 s on 100k files; `mv` in a shell loop takes 30 s, which should be the worst case.\n\n\
               Profiling shows most of the time in collecting and sorting `PathBuf`s, and in one `stat` per file that we do twice.",
        comments: &[
            ("alex", "The double stat is from the collision check. We can keep the metadata from the first one."),
            ("kim", "#53 streams the file list and reuses the metadata. Down to 19 s here."),
        ],
    },
    Issue {
        n: 15,
        title: "Document exit codes",
        author: "dana",
        closed: Some(("dana", "documented in README")),
        labels: &["docs"],
        assignees: &[],
        body: "Scripts need to know: 0 ok, 1 some renames failed, 2 usage error, 3 collision refused?",
        comments: &[],
    },
    Issue {
        n: 16,
        title: "undo should refuse when files changed since the rename",
        author: "alex",
        closed: None,
        labels: &["enhancement"],
        assignees: &["alex"],
        body: "`demo undo` blindly renames back. If a file was edited or replaced in between, we may move the wrong file.\n\n\
               Store size + mtime in the undo log and refuse (or ask) when they differ.",
        comments: &[("dana", "+1. `--force` to override, please.")],
    },
    Issue {
        n: 17,
        title: "Unicode normalisation: NFC vs NFD names on macOS",
        author: "jo",
        closed: None,
        labels: &["bug"],
        assignees: &[],
        body: "Files copied from macOS have NFD names (`e` + combining accent). `--match 'café'` does not match them.\n\n\
               We should normalise both the pattern and the names to NFC before matching, but keep the original bytes for the rename itself.",
        comments: &[
            ("kim", "`unicode-normalization` is already a dependency through globset, so this is cheap."),
            ("jo", "Happy to try a PR if nobody is on it."),
        ],
    },
    Issue {
        n: 18,
        title: "Typo in --help: 'recieve'",
        author: "sam",
        closed: Some(("alex", "fixed")),
        labels: &["docs", "good first issue"],
        assignees: &[],
        body: "`demo --help` says \"files that recieve a new name\".",
        comments: &[("alex", "Thanks! Fixed on main.")],
    },
    Issue {
        n: 19,
        title: "Add padding option to {counter}",
        author: "lee",
        closed: Some(("kim", "shipped in 0.5.0")),
        labels: &["enhancement"],
        assignees: &["lee"],
        body: "`{counter:04}` to get `0001`, `0002`, … so names sort correctly.",
        comments: &[("kim", "Shipped in 0.5.0, with `{counter:04+10}` for a start value too.")],
    },
    Issue {
        n: 20,
        title: "Symlinks are followed when they should be renamed",
        author: "kim",
        closed: None,
        labels: &["bug"],
        assignees: &["kim"],
        body: "`demo rename '{name|lower}.{ext}' *` on a symlink renames the link (correct) but computes `{ext}` and `{date}` from the *target*.\n\n\
               Use `symlink_metadata` throughout, and add `--follow-symlinks` for people who want the old behaviour.",
        comments: &[],
    },
    Issue {
        n: 21,
        title: "Config: allow a per-directory .demo.toml",
        author: "dana",
        closed: None,
        labels: &["enhancement"],
        assignees: &[],
        body: "I keep the same templates per photo folder. A `.demo.toml` in the working directory (merged over the user config) would save typing.",
        comments: &[
            ("alex", "Only if it cannot run anything. Templates only, no hooks."),
            ("dana", "Agreed, templates and defaults only."),
        ],
    },
    Issue {
        n: 22,
        title: "Error message for an invalid template is unhelpful",
        author: "jo",
        closed: None,
        labels: &["bug", "good first issue"],
        assignees: &[],
        body: "`demo rename '{name.{ext}' *` says `error: parse error at 6`. It should show the template with a caret under the problem and say that a `}` is missing.",
        comments: &[("kim", "The parser already has the span; we just print it badly. Good first issue.")],
    },
    Issue {
        n: 23,
        title: "Support --exclude glob patterns",
        author: "sam",
        closed: Some(("dana", "shipped in 0.5.0")),
        labels: &["enhancement"],
        assignees: &["sam"],
        body: "`demo rename ... --exclude '*.tmp' --exclude '.git/**'`.",
        comments: &[("dana", "Merged, thanks Sam.")],
    },
    Issue {
        n: 24,
        title: "Release 1.0 checklist",
        author: "alex",
        closed: None,
        labels: &[],
        assignees: &["alex"],
        body: "What we want before calling it 1.0:\n\n\
               - [x] `--dry-run` (#1)\n- [x] completions (#5)\n- [ ] no crash without a config file (#42)\n- [ ] man page (#8)\n- [ ] stable exit codes, documented (#15)\n- [ ] undo that refuses to clobber (#16)\n\n\
               Anything else that must be in 1.0, comment here.",
        comments: &[
            ("dana", "#42 is the one that worries me: every new user hits it."),
            ("kim", "I'd add #14, but it can be 1.1."),
        ],
    },
    Issue {
        n: 25,
        title: "Crash on file names that are not valid UTF-8",
        author: "lee",
        closed: None,
        labels: &["bug"],
        assignees: &[],
        body: "On Linux a name like `caf\\xe9.txt` (Latin-1) makes `demo` panic in `to_str().unwrap()`.\n\n\
               We should work on `OsStr` and only convert lossily for display.",
        comments: &[("alex", "Yes. `{name}` on a non-UTF-8 name should probably be an error for that file, not a panic for the batch.")],
    },
    Issue {
        n: 26,
        title: "Add JSON output for --dry-run",
        author: "kim",
        closed: None,
        labels: &["enhancement"],
        assignees: &[],
        body: "`--dry-run --json` printing one object per file (`{\"from\": ..., \"to\": ..., \"collision\": false}`) would let other tools consume the plan.",
        comments: &[],
    },
    Issue {
        n: 27,
        title: "CI: cache the cargo registry",
        author: "dana",
        closed: Some(("dana", "done")),
        labels: &["enhancement"],
        assignees: &["dana"],
        body: "Every CI run downloads the registry again; caching `~/.cargo/registry` and `target/` should halve the time.",
        comments: &[],
    },
    Issue {
        n: 28,
        title: "Case-only renames do nothing on case-insensitive filesystems",
        author: "jo",
        closed: None,
        labels: &["bug", "windows"],
        assignees: &[],
        body: "`demo rename '{name|lower}.{ext}' *` on NTFS or APFS: `Photo.JPG` → `photo.jpg` is reported as done but the name does not change, because the target \"exists\".\n\n\
               Rename through a temporary name when source and target differ only in case.",
        comments: &[("sam", "Confirmed on Windows 11. The collision check thinks it is a collision with itself.")],
    },
    Issue {
        n: 29,
        title: "Man page and --help disagree about -n",
        author: "sam",
        closed: None,
        labels: &["docs"],
        assignees: &[],
        body: "The draft man page says `-n` is `--no-clobber`; `--help` says it is `--dry-run`.",
        comments: &[],
    },
    Issue {
        n: 30,
        title: "Question: how do I rename only directories?",
        author: "lee",
        closed: Some(("kim", "answered")),
        labels: &["question"],
        assignees: &[],
        body: "Is there a `--type d` like `find`?",
        comments: &[("kim", "`--only dirs` since 0.4. I'll make it more visible in `--help`.")],
    },
    Issue {
        n: 31,
        title: "Read templates from a file (--template-file)",
        author: "kim",
        closed: None,
        labels: &["enhancement"],
        assignees: &["jo"],
        body: "Long templates with many `--match` rules are painful on the command line. `--template-file rules.toml` with a list of rules applied in order?",
        comments: &[("jo", "Working on it in #55.")],
    },
    Issue {
        n: 32,
        title: "Conflicting target names silently overwrite files",
        author: "dana",
        closed: Some(("alex", "fixed in 0.2.1")),
        labels: &["bug"],
        assignees: &["alex"],
        body: "Two files mapping to the same new name: the second rename overwrites the first. **Data loss.**\n\n\
               The plan must be checked for collisions before anything is renamed, and the batch refused (exit 3) unless `--suffix-on-collision` is given.",
        comments: &[
            ("alex", "Very sorry about this one. The plan is now checked as a whole first."),
            ("dana", "Confirmed fixed in 0.2.1."),
        ],
    },
    Issue {
        n: 33,
        title: "Add --interactive confirmation prompt",
        author: "jo",
        closed: None,
        labels: &["enhancement"],
        assignees: &["alex"],
        body: "Show the plan (like `--dry-run`), then ask `Rename 120 files? [y/N]`.",
        comments: &[("alex", "Implemented in #54.")],
    },
    Issue {
        n: 34,
        title: "Benchmark suite",
        author: "alex",
        closed: None,
        labels: &["performance"],
        assignees: &[],
        body: "We need reproducible numbers before and after #53: 1k, 10k, 100k files; tmpfs and ext4; with and without `--dry-run`.",
        comments: &[],
    },
    Issue {
        n: 35,
        title: "Hidden files are skipped without a warning",
        author: "sam",
        closed: None,
        labels: &["bug", "needs-triage"],
        assignees: &[],
        body: "`demo rename ... dir/*` skips `.env` because the shell glob skips it, but `demo rename ... --recursive dir` also skips dotfiles, silently.",
        comments: &[],
    },
    Issue {
        n: 36,
        title: "Publish a Homebrew formula",
        author: "lee",
        closed: None,
        labels: &["enhancement"],
        assignees: &[],
        body: "A tap (`brew install demo-cli/tap/demo`) until it is accepted in homebrew-core.",
        comments: &[],
    },
    Issue {
        n: 37,
        title: "Case filters in templates ({name|lower})",
        author: "kim",
        closed: Some(("kim", "shipped in 0.4.0")),
        labels: &["enhancement"],
        assignees: &["kim"],
        body: "`|lower`, `|upper`, `|title`, and `|slug` filters on any placeholder.",
        comments: &[],
    },
    Issue {
        n: 38,
        title: "Tests fail when TMPDIR is on tmpfs",
        author: "dana",
        closed: Some(("kim", "fixed")),
        labels: &["bug"],
        assignees: &["kim"],
        body: "`cli::cross_device_fallback` assumes `/tmp` and the target dir are on different devices.",
        comments: &[("kim", "The test now creates both directories explicitly and skips when they share a device.")],
    },
    Issue {
        n: 39,
        title: "Read the file list from stdin",
        author: "jo",
        closed: None,
        labels: &["enhancement", "good first issue"],
        assignees: &[],
        body: "`find . -name '*.JPG' -print0 | demo rename --stdin0 '{name|lower}.{ext|lower}'`.",
        comments: &[("alex", "Yes please, with `-0` for NUL-separated input.")],
    },
    Issue {
        n: 40,
        title: "Windows: long paths (over 260 characters) fail",
        author: "sam",
        closed: None,
        labels: &["windows"],
        assignees: &[],
        body: "`The filename or extension is too long. (os error 206)`. We need the `\\\\?\\` prefix or the long-path manifest.",
        comments: &[],
    },
    Issue {
        n: 41,
        title: "Document the config file format",
        author: "lee",
        closed: None,
        labels: &["docs"],
        assignees: &["lee"],
        body: "`~/.config/demo/config.toml` is mentioned in the README but none of its keys are documented.",
        comments: &[],
    },
    Issue {
        n: 42,
        title: "Crash when config is missing",
        author: "jo",
        closed: None,
        labels: &["bug"],
        assignees: &["dana"],
        body: "On a fresh machine, without `~/.config/demo/config.toml`, every command crashes:\n\n\
               ```\n$ demo rename '{name|lower}.{ext}' *.JPG\nthread 'main' panicked at src/config.rs:21:46:\n\
               called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound, message: \"No such file or directory\" }\n\
               note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n```\n\n\
               ### Expected\n\nNo config file should mean the defaults, silently. A config file that exists but cannot be read or parsed should be a clear error naming the file.\n\n\
               ### Environment\n\n- demo 0.9.2 (cargo install)\n- Debian 12, also reproduced on macOS 14",
        comments: &[
            ("kim", "Reproduced on main. `Config::load` unwraps the read; it was written when `demo init` always created the file."),
            ("jo", "Workaround for anyone landing here: `mkdir -p ~/.config/demo && touch ~/.config/demo/config.toml`.\n\nAn empty file parses fine."),
            ("dana", "I'll take this. Plan: treat `NotFound` as defaults, keep every other I/O error as an error with the path in it, and add a test that runs with `HOME` pointing to an empty directory.\n\nPR coming today."),
        ],
    },
    Issue {
        n: 43,
        title: "Add a --version that prints the git commit",
        author: "sam",
        closed: Some(("alex", "done")),
        labels: &["enhancement", "good first issue"],
        assignees: &["sam"],
        body: "`demo 0.9.2 (3f2c1ab 2026-09-12)` makes bug reports easier.",
        comments: &[],
    },
    Issue {
        n: 44,
        title: "demo eats CPU when stdin is a terminal",
        author: "jo",
        closed: None,
        labels: &["bug", "needs-triage"],
        assignees: &[],
        body: "`demo rename x` with no files and stdin a TTY spins at 100% CPU. Probably the new stdin support polling in a loop.",
        comments: &[],
    },
    Issue {
        n: 45,
        title: "Translate error messages",
        author: "lee",
        closed: Some(("alex", "not planned")),
        labels: &["wontfix"],
        assignees: &[],
        body: "Would you accept translations of the CLI messages (fluent)?",
        comments: &[
            ("alex", "Not for now, sorry: the messages still change every release, and we have no way to review translations. Let's revisit after 1.0."),
        ],
    },
    Issue {
        n: 46,
        title: "Dry-run output should look like a diff",
        author: "kim",
        closed: None,
        labels: &["enhancement"],
        assignees: &[],
        body: "Highlight only the changed part of each name, like `git diff --word-diff`, so long names are readable.",
        comments: &[],
    },
    Issue {
        n: 47,
        title: "Config option to keep the case of extensions",
        author: "dana",
        closed: None,
        labels: &["enhancement"],
        assignees: &[],
        body: "`keep_ext_case = true` so `{ext}` is never lowercased by default filters.",
        comments: &[],
    },
    Issue {
        n: 48,
        title: "Rename fails silently when the target directory does not exist",
        author: "sam",
        closed: None,
        labels: &["bug"],
        assignees: &[],
        body: "`demo rename 'out/{name}.{ext}' *` with no `out/` prints nothing and exits 0, but nothing is renamed.\n\n\
               It should either create the directory (`--parents`) or fail with exit 1 naming it.",
        comments: &[("kim", "Exit 0 here is definitely wrong. `--parents` sounds good.")],
    },
    Issue {
        n: 49,
        title: "A 'demo check' subcommand to validate templates",
        author: "jo",
        closed: None,
        labels: &["enhancement", "needs-triage"],
        assignees: &[],
        body: "`demo check '{name|slug}-{counter:03}.{ext}'` → prints the parsed template and any error, without looking at files.",
        comments: &[],
    },
];

const PULLS: &[Pull] = &[
    Pull {
        n: 12,
        title: "Write the undo log before each rename",
        author: "dana",
        head: "fix/undo-log-order",
        merged_by: Some("alex"),
        mergeable: true,
        conflicts: None,
        fixes: &[9],
        labels: &["bug"],
        checks: OK_CHECKS,
        reviews: &[("kim", "approved", "Nice and small. The fsync per line costs ~3% on my benchmark; worth it.")],
        requested: &[],
        comments: &[("alex", "Merging, thanks!")],
        body: "Fixes #9.\n\nThe undo log is now appended (one JSON line per rename) and flushed *before* each rename, so an interrupted batch can be undone up to the last completed rename.",
        diff: "diff --git a/src/undo.rs b/src/undo.rs
--- a/src/undo.rs
+++ b/src/undo.rs
@@ -31,14 +31,15 @@ impl UndoLog {
-    pub fn record_all(&mut self, plan: &[Rename]) -> io::Result<()> {
-        for r in plan {
-            self.entries.push(r.clone());
-        }
-        self.write()
+    /// Append one entry and flush it, before the rename it describes happens.
+    pub fn record(&mut self, r: &Rename) -> io::Result<()> {
+        serde_json::to_writer(&mut self.file, r)?;
+        self.file.write_all(b\"\\n\")?;
+        self.file.sync_data()
     }
diff --git a/src/rename.rs b/src/rename.rs
--- a/src/rename.rs
+++ b/src/rename.rs
@@ -58,7 +58,7 @@ pub fn apply(plan: &[Rename], log: &mut UndoLog) -> Result<Summary> {
     for r in plan {
+        log.record(r)?;
         fs::rename(&r.from, &r.to)?;
     }
-    log.record_all(plan)?;
     Ok(summary)
",
    },
    Pull {
        n: 50,
        title: "Fix crash when config is missing",
        author: "dana",
        head: "fix/missing-config",
        merged_by: None,
        mergeable: true,
        conflicts: None,
        fixes: &[42],
        labels: &["bug"],
        checks: &[
            Check {
                name: "build",
                status: "success",
                summary: "built in 40s",
                retryable: false,
                log: LOG_BUILD_OK,
            },
            Check {
                name: "lint",
                status: "success",
                summary: "clippy and rustfmt clean",
                retryable: false,
                log: LOG_LINT_OK,
            },
            Check {
                name: "test",
                status: "failure",
                summary: "timed out after 60s in cli::rename_many (runner overloaded, flaky)",
                retryable: true,
                log: "$ cargo test --locked
running 49 tests
test config::tests::defaults_apply ... ok
test config::tests::missing_file_is_default ... ok
test config::tests::unreadable_file_is_an_error ... ok
test template::tests::counter_padding ... ok
test cli::rename_many has been running for over 60 seconds
error: test timed out: cli::rename_many

note: runner ubuntu-latest-4 was at 100% CPU from another job (steal time 71%).
cli::rename_many is a known flaky test on shared runners (see #34); it does not touch
the code changed here. A rerun usually passes.
test failed.",
            },
        ],
        reviews: &[],
        requested: &[],
        comments: &[(
            "dana",
            "The `test` failure is the usual `rename_many` timeout on a busy runner, not this change. Could a maintainer rerun and review?",
        )],
        body: "Fixes #42.\n\n\
               `Config::load` no longer unwraps the read:\n\n\
               - a missing file (`NotFound`) means the defaults, silently;\n\
               - any other read error, or a parse error, is reported with the file's path.\n\n\
               Tests: `missing_file_is_default` (runs with `HOME` pointing to an empty directory) and `unreadable_file_is_an_error`.",
        diff: "diff --git a/src/config.rs b/src/config.rs
--- a/src/config.rs
+++ b/src/config.rs
@@ -1,5 +1,5 @@
-use std::fs;
+use std::{fs, io};
 use std::path::{Path, PathBuf};
 
 use serde::Deserialize;
@@ -18,9 +18,15 @@ impl Config {
     pub fn load(path: &Path) -> Result<Config, ConfigError> {
-        let text = fs::read_to_string(path).unwrap();
+        let text = match fs::read_to_string(path) {
+            Ok(text) => text,
+            // No config file is fine: every setting has a default.
+            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Config::default()),
+            Err(source) => {
+                return Err(ConfigError::Read { path: path.to_owned(), source });
+            }
+        };
         toml::from_str(&text).map_err(|e| ConfigError::Parse { path: path.to_owned(), source: e })
     }
 }
@@ -52,6 +58,22 @@ mod tests {
+    #[test]
+    fn missing_file_is_default() {
+        let dir = tempfile::tempdir().unwrap();
+        let config = Config::load(&dir.path().join(\"config.toml\")).unwrap();
+        assert_eq!(config, Config::default());
+    }
+
+    #[test]
+    fn unreadable_file_is_an_error() {
+        let dir = tempfile::tempdir().unwrap();
+        let err = Config::load(dir.path()).unwrap_err();
+        assert!(err.to_string().contains(&dir.path().display().to_string()));
+    }
",
    },
    Pull {
        n: 51,
        title: "Show a progress bar for batches over 1000 files",
        author: "lee",
        head: "feature/progress-bar",
        merged_by: None,
        mergeable: true,
        conflicts: None,
        fixes: &[13],
        labels: &["enhancement"],
        checks: OK_CHECKS,
        reviews: &[
            ("dana", "changes_requested", "Please hide the bar when stderr is not a terminal; it breaks logs in CI."),
            ("dana", "approved", "Thanks, looks good now."),
        ],
        requested: &[],
        comments: &[("lee", "Done: the bar is only drawn when stderr is a TTY, and `--quiet` hides it too.")],
        body: "Fixes #13.\n\nUses `indicatif`; the bar is drawn on stderr when it is a terminal and the batch has more than 1000 files. `--quiet` hides it.",
        diff: "diff --git a/Cargo.toml b/Cargo.toml
--- a/Cargo.toml
+++ b/Cargo.toml
@@ -14,6 +14,7 @@ globset = \"0.4\"
+indicatif = \"0.17\"
diff --git a/src/rename.rs b/src/rename.rs
--- a/src/rename.rs
+++ b/src/rename.rs
@@ -52,8 +52,14 @@ pub fn apply(plan: &[Rename], log: &mut UndoLog, opts: &Options) -> Result<Summary> {
+    let bar = (plan.len() > 1000 && !opts.quiet && io::stderr().is_terminal())
+        .then(|| ProgressBar::new(plan.len() as u64));
     for r in plan {
         log.record(r)?;
         fs::rename(&r.from, &r.to)?;
+        if let Some(bar) = &bar {
+            bar.inc(1);
+        }
     }
",
    },
    Pull {
        n: 52,
        title: "Add an {exif.date} placeholder",
        author: "sam",
        head: "feature/exif-date",
        merged_by: None,
        mergeable: true,
        conflicts: None,
        fixes: &[4],
        labels: &["enhancement"],
        checks: &[
            Check {
                name: "build",
                status: "success",
                summary: "built in 45s",
                retryable: false,
                log: LOG_BUILD_OK,
            },
            Check {
                name: "lint",
                status: "failure",
                summary: "1 error: unused import in src/main.rs",
                retryable: false,
                log: "$ cargo clippy --all-targets -- -D warnings
    Checking demo v0.9.2 (/work/demo)
error: unused import: `std::time::SystemTime`
 --> src/main.rs:4:5
  |
4 | use std::time::SystemTime;
  |     ^^^^^^^^^^^^^^^^^^^^^
  |
  = note: `-D unused-imports` implied by `-D warnings`

error: could not compile `demo` (bin \"demo\") due to 1 previous error
lint failed: the code on feature/exif-date does not pass clippy; rerunning gives the same result.",
            },
            Check {
                name: "test",
                status: "success",
                summary: "52 passed",
                retryable: false,
                log: LOG_TEST_OK,
            },
        ],
        reviews: &[("kim", "approved", "Works on my photo library. Fix the lint and it's good to go.")],
        requested: &[],
        comments: &[],
        body: "Part of #4.\n\nAdds `{exif.date}` (EXIF `DateTimeOriginal`, falling back to mtime with `{exif.date|or_mtime}`) using `kamadak-exif`.",
        diff: "diff --git a/src/main.rs b/src/main.rs
--- a/src/main.rs
+++ b/src/main.rs
@@ -1,6 +1,7 @@
 use std::process::ExitCode;
+use std::time::SystemTime;
 
 mod cli;
diff --git a/src/template.rs b/src/template.rs
--- a/src/template.rs
+++ b/src/template.rs
@@ -140,6 +140,18 @@ fn placeholder(name: &str, file: &FileInfo) -> Result<String> {
+        \"exif.date\" => match exif::date_original(&file.path)? {
+            Some(date) => Ok(date.format(fmt)),
+            None if filters.contains(&\"or_mtime\") => Ok(file.mtime.format(fmt)),
+            None => Err(Error::NoExifDate(file.path.clone())),
+        },
",
    },
    Pull {
        n: 53,
        title: "Stream the file list instead of collecting it",
        author: "kim",
        head: "perf/stream-walk",
        merged_by: None,
        mergeable: true,
        conflicts: None,
        fixes: &[],
        labels: &["performance"],
        checks: OK_CHECKS,
        reviews: &[],
        requested: &["lee"],
        comments: &[("kim", "19 s instead of 48 s on 100k files (tmpfs). Lee, could you review? You know the walker best.")],
        body: "Part of #14.\n\nThe walker now yields files as it finds them, and the collision check reuses the metadata from the walk instead of calling `stat` again.",
        diff: "diff --git a/src/walk.rs b/src/walk.rs
--- a/src/walk.rs
+++ b/src/walk.rs
@@ -20,12 +20,10 @@
-pub fn collect(roots: &[PathBuf], opts: &WalkOptions) -> Result<Vec<PathBuf>> {
-    let mut out = Vec::new();
-    for entry in walker(roots, opts) {
-        out.push(entry?.path().to_owned());
-    }
-    out.sort();
-    Ok(out)
+/// Files with their metadata, in walk order; callers that need an order sort the plan.
+pub fn stream<'a>(roots: &'a [PathBuf], opts: &'a WalkOptions)
+    -> impl Iterator<Item = Result<(PathBuf, Metadata)>> + 'a {
+    walker(roots, opts).map(|e| { let e = e?; Ok((e.path().to_owned(), e.metadata()?)) })
 }
",
    },
    Pull {
        n: 54,
        title: "Add --interactive confirmation prompt",
        author: "alex",
        head: "feature/interactive",
        merged_by: None,
        mergeable: true,
        conflicts: None,
        fixes: &[33],
        labels: &["enhancement"],
        checks: OK_CHECKS,
        reviews: &[],
        requested: &[],
        comments: &[],
        body: "Fixes #33.\n\n`-i/--interactive` prints the plan like `--dry-run`, then asks `Rename N files? [y/N]` on the terminal. Refuses with exit 2 when stdin is not a terminal.",
        diff: "diff --git a/src/cli.rs b/src/cli.rs
--- a/src/cli.rs
+++ b/src/cli.rs
@@ -40,6 +40,10 @@ pub struct RenameArgs {
+    /// Show the plan and ask before renaming.
+    #[arg(short, long, conflicts_with = \"dry_run\")]
+    pub interactive: bool,
diff --git a/src/main.rs b/src/main.rs
--- a/src/main.rs
+++ b/src/main.rs
@@ -30,6 +30,12 @@ fn run(args: Cli) -> Result<ExitCode> {
+    if args.interactive && !confirm(&plan)? {
+        eprintln!(\"nothing renamed\");
+        return Ok(ExitCode::SUCCESS);
+    }
",
    },
    Pull {
        n: 55,
        title: "Read templates from a file (--template-file)",
        author: "jo",
        head: "feature/template-file",
        merged_by: None,
        mergeable: false,
        conflicts: Some("src/cli.rs and src/config.rs"),
        fixes: &[31],
        labels: &["enhancement"],
        checks: OK_CHECKS,
        reviews: &[("dana", "approved", "Nice. The rules format is simple enough to document in one table.")],
        requested: &[],
        comments: &[("dana", "This now conflicts with the config changes on main; could you rebase?")],
        body: "Fixes #31.\n\n`--template-file rules.toml` reads an ordered list of `{ match, template }` rules; the first matching rule renames the file.",
        diff: "diff --git a/src/cli.rs b/src/cli.rs
--- a/src/cli.rs
+++ b/src/cli.rs
@@ -44,6 +44,9 @@ pub struct RenameArgs {
+    /// Read the rules from a TOML file instead of the command line.
+    #[arg(long, value_name = \"FILE\", conflicts_with = \"template\")]
+    pub template_file: Option<PathBuf>,
diff --git a/src/config.rs b/src/config.rs
--- a/src/config.rs
+++ b/src/config.rs
@@ -18,7 +18,7 @@ impl Config {
-        let text = fs::read_to_string(path).unwrap();
+        let text = fs::read_to_string(path).unwrap_or_default();
",
    },
];

pub(super) fn seed(conn: &Store, seed: Seed, extra: u64, me: &Identity) -> HostResult<()> {
    match seed {
        Seed::Demo => {
            conn.execute(
                "INSERT INTO project (name, description) VALUES ('demo', ?1)",
                args!["demo: a small command-line tool that renames files in bulk from templates"],
            )?;
            demo(conn)?;
        }
        Seed::None => {
            conn.execute(
                "INSERT INTO project (name, description) VALUES ('demo', 'an empty project')",
                &[],
            )?;
        }
    }
    db::ensure_user(conn, me)?;
    if extra > 0 {
        synthetic(conn, extra, seed == Seed::Demo)?;
    }
    Ok(())
}

fn demo(conn: &Store) -> HostResult<()> {
    for (name, role, full) in USERS {
        conn.execute(
            "INSERT INTO users (name, role, full_name) VALUES (?1, ?2, ?3)",
            args![name, role, full],
        )?;
    }
    for (name, color, desc) in LABELS {
        conn.execute(
            "INSERT INTO labels (name, color, description) VALUES (?1, ?2, ?3)",
            args![name, color, desc],
        )?;
    }
    for i in ISSUES {
        let day = opened(i.n);
        let created = at(day, 9 + i.n % 7);
        let (state, closed_at, closed_by, reason) = match i.closed {
            Some((by, reason)) => (
                "closed",
                Some(at(day + 3 * (i.comments.len() as i64 + 1), 16)),
                Some(by),
                Some(reason),
            ),
            None => ("open", None, None, None),
        };
        let last = closed_at
            .clone()
            .unwrap_or_else(|| at(day + 3 * i.comments.len() as i64, 15));
        conn.execute(
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at,
                                closed_at, closed_by, close_reason)
             VALUES (?1, 'issue', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            args![
                i.n,
                i.title,
                i.body,
                i.author,
                state,
                &created,
                &last,
                closed_at.as_deref(),
                closed_by,
                reason
            ],
        )?;
        tags(conn, i.n, i.labels, i.assignees)?;
        for (k, (who, body)) in i.comments.iter().enumerate() {
            let k = k as i64 + 1;
            conn.execute(
                "INSERT INTO comments (number, seq, author, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![i.n, k, who, body, &at(day + 3 * k, 10 + k)],
            )?;
        }
    }
    for p in PULLS {
        let day = opened(p.n);
        let created = at(day, 11);
        let (state, closed_at) = match p.merged_by {
            Some(_) => ("merged", Some(at(day + 2, 17))),
            None => ("open", None),
        };
        let updated = closed_at.clone().unwrap_or_else(|| at(day + 1, 12));
        conn.execute(
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at,
                                closed_at, closed_by, close_reason, head, base, mergeable, conflicts,
                                merge_method, diff)
             VALUES (?1, 'pull', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'main', ?12, ?13, ?14, ?15)",
            args![
                p.n,
                p.title,
                p.body,
                p.author,
                state,
                &created,
                &updated,
                closed_at.as_deref(),
                p.merged_by,
                p.merged_by.map(|_| "merged (squash)"),
                p.head,
                p.mergeable,
                p.conflicts,
                p.merged_by.map(|_| "squash"),
                p.diff,
            ],
        )?;
        tags(conn, p.n, p.labels, &[])?;
        for issue in p.fixes {
            conn.execute(
                "INSERT INTO fixes (pull, issue) VALUES (?1, ?2)",
                args![p.n, issue],
            )?;
        }
        for c in p.checks {
            conn.execute(
                "INSERT INTO checks (number, name, status, summary, log, retryable)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                args![p.n, c.name, c.status, c.summary, c.log, c.retryable],
            )?;
        }
        for (k, (who, state, body)) in p.reviews.iter().enumerate() {
            let k = k as i64 + 1;
            conn.execute(
                "INSERT INTO reviews (number, seq, author, state, body, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                args![p.n, k, who, state, body, &at(day + 1, 9 + 2 * k)],
            )?;
        }
        for who in p.requested {
            conn.execute(
                "INSERT INTO review_requests (number, \"user\") VALUES (?1, ?2)",
                args![p.n, who],
            )?;
        }
        for (k, (who, body)) in p.comments.iter().enumerate() {
            let k = k as i64 + 1;
            conn.execute(
                "INSERT INTO comments (number, seq, author, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                args![p.n, k, who, body, &at(day + 1, 8 + k)],
            )?;
        }
    }
    Ok(())
}

fn tags(conn: &Store, n: i64, labels: &[&str], assignees: &[&str]) -> HostResult<()> {
    for l in labels {
        conn.execute(
            "INSERT INTO item_labels (number, label) VALUES (?1, ?2)",
            args![n, l],
        )?;
    }
    for u in assignees {
        conn.execute(
            "INSERT INTO assignees (number, \"user\") VALUES (?1, ?2)",
            args![n, u],
        )?;
    }
    Ok(())
}

const PARTS: &[&str] = &[
    "template parser",
    "undo log",
    "config loader",
    "dry-run output",
    "glob matcher",
    "progress bar",
    "Windows path handling",
    "EXIF reader",
    "collision check",
    "shell completions",
];
const PROBLEMS: &[&str] = &[
    "panics on empty input",
    "is slow with many files",
    "prints a confusing error",
    "ignores --quiet",
    "leaks file handles",
    "breaks on non-ASCII names",
    "needs better docs",
];
const REPLIES: &[&str] = &[
    "Reproduced on main.",
    "Could you attach the output of `demo --version` and the exact command?",
    "I think this is the same root cause as the config loading bug.",
    "A fix would be welcome; happy to review.",
];

/// `extra` synthetic issues numbered after everything else, each with 0–3 comments, in
/// the caller's transaction (statements cached on SQLite: 100k issues take a few seconds).
fn synthetic(conn: &Store, extra: u64, with_people: bool) -> HostResult<()> {
    let start = conn.int("SELECT coalesce(max(number), 0) FROM items", &[])?;
    let people: Vec<String> = if with_people {
        USERS.iter().map(|u| u.0.to_string()).collect()
    } else {
        db::user_names(conn)?
    };
    let labels: Vec<String> = if with_people {
        ["bug", "enhancement", "docs", "performance"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let who = |i: u64| -> &str {
        people
            .get(i as usize % people.len().max(1))
            .map(String::as_str)
            .unwrap_or("you")
    };
    let base = db::days_from_civil(2026, 11, 1) * 86_400;
    for i in 0..extra {
        let n = start + 1 + i as i64;
        let part = PARTS[i as usize % PARTS.len()];
        let problem = PROBLEMS[(i as usize / PARTS.len()) % PROBLEMS.len()];
        let title = format!("The {part} {problem} (case {})", i + 1);
        let body = format!(
            "Synthetic issue for benchmarks.\n\nSteps: run `demo rename` on batch {} and watch the {part}.",
            i + 1
        );
        let created = db::iso(base + i as i64 * 7);
        let closed = i % 3 == 2;
        conn.execute(
            "INSERT INTO items (number, kind, title, body, author, state, created_at, updated_at,
                                closed_at, closed_by, close_reason)
             VALUES (?1, 'issue', ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9)",
            args![
                n,
                &title,
                &body,
                who(i),
                if closed { "closed" } else { "open" },
                &created,
                closed.then_some(created.as_str()),
                closed.then(|| who(i + 1)),
                closed.then_some("done"),
            ],
        )?;
        if let Some(l) = labels.get(i as usize % (labels.len() + 1)) {
            conn.execute(
                "INSERT INTO item_labels (number, label) VALUES (?1, ?2)",
                args![n, l],
            )?;
        }
        for k in 0..(i % 4) {
            conn.execute(
                "INSERT INTO comments (number, seq, author, body, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                args![
                    n,
                    k as i64 + 1,
                    who(i + k + 1),
                    REPLIES[((i + k) % REPLIES.len() as u64) as usize],
                    &created,
                ],
            )?;
        }
    }
    Ok(())
}
