//! Names, words and content exactly as they are, through a real mount and bash: the
//! second example host (`examples/hosts/kv.sh`, POSIX shell and jq, written from
//! docs/host-protocol.md alone), bodies as stored, text that looks like `key=value`, a
//! result that outlives its entry, and search freshness in words.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use common::Mount;

fn kv_sh() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/hosts/kv.sh")
        .display()
        .to_string()
}

/// A world with the kv host over `data` (and nothing else).
fn kv_world(data: &std::path::Path, env: &[(&str, &str)]) -> Mount {
    let manifest = format!(
        "[[host]]\nkind = \"exec\"\npath = \"kv\"\ncommand = [\"sh\", {:?}, {:?}]\npass_env = [\"KV_READONLY\"]\n",
        kv_sh(),
        data.display().to_string()
    );
    Mount::start_with_env(Some(&manifest), env)
}

/// The errno a bash redirection into `call` failed with, from its words.
fn refused_with(m: &Mount, script: &str) -> String {
    let out = m.sh(script);
    assert!(!out.status.success(), "{script} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_shell_and_jq_host_works_as_its_doc_says() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("greeting"), "hello").unwrap();
    std::fs::write(data.path().join("img"), b"\x89PNG\r\n\x1a\n\x00\x01\xff").unwrap();
    let m = kv_world(data.path(), &[]);

    // The root answers null to entry: initialize's name and description describe it.
    assert_eq!(
        m.read("kv/description"),
        "kv (exec host kv): a key-value store in a directory; set(key, value) adds a key\n"
    );
    assert_eq!(m.ok("ls kv"), "description\ngreeting\nimg\nops\nref\n");
    // A text body is its bytes, no newline added; a binary one (base64 on the wire) too.
    m.ok("cmp kv/greeting/body <(printf hello)");
    assert_eq!(
        std::fs::read(m.path("kv/img/body")).unwrap(),
        b"\x89PNG\r\n\x1a\n\x00\x01\xff"
    );
    // Text is writable (the host gave `write`); bytes are not.
    m.ok("test -w kv/greeting/body && ! test -w kv/img/body");

    // A call with no arguments reaches the host as {} (delete takes none), key=value lines
    // are typed by the schema, and a body write is one call of set_value.
    m.ok("printf 'key=notes\\nvalue=first line\\nsecond line\\n' > kv/ops/set/call");
    assert_eq!(
        m.read("kv/ops/set/result"),
        format!(
            "created key notes\n{}/kv/notes\tkey notes · 22 bytes\n",
            m.mount.display()
        )
    );
    m.ok("cmp kv/notes/body <(printf 'first line\\nsecond line')");
    m.ok("printf 'rewritten\\n' > kv/notes/body");
    assert_eq!(
        std::fs::read_to_string(data.path().join("notes")).unwrap(),
        "rewritten\n"
    );
    assert!(m.ok("ls kv/notes/ops/set_value/runs/").lines().count() == 1);

    // A locked key: the guard says why, and opening call is refused (EPERM).
    std::fs::set_permissions(
        data.path().join("greeting"),
        std::fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    common::wait_until(
        "the lock to show",
        std::time::Duration::from_secs(10),
        || {
            m.read("kv/greeting/ops/delete/guard")
                .starts_with("blocked")
        },
    );
    let guard = m.read("kv/greeting/ops/delete/guard");
    assert!(
        guard.contains("✗ not_locked: kv/greeting is read-only"),
        "{guard}"
    );
    let err = refused_with(&m, "echo > kv/greeting/ops/delete/call");
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(data.path().join("greeting").exists());

    // Deleting an entry through its own op: the result stays readable at the same path,
    // the run stays reachable, the change feed says removed and the listing drops it.
    m.ok("echo > kv/notes/ops/delete/call");
    assert_eq!(m.read("kv/notes/ops/delete/result"), "deleted key notes\n");
    assert_eq!(
        m.ok("ls kv/notes kv/notes/ops"),
        "kv/notes:\nops\n\nkv/notes/ops:\ndelete\n"
    );
    let run = m.ok("ls kv/notes/ops/delete/runs/");
    assert_eq!(
        m.read(&format!("kv/notes/ops/delete/runs/{}/status", run.trim())),
        "ok\n"
    );
    assert!(!m.ok("ls kv").contains("notes"));
    assert!(m
        .ok("ls kv/notes/description 2>&1 || true")
        .contains("No such file"));
    let events = m.read(".wip/events");
    assert!(
        events.contains("\"kind\":\"removed\",\"path\":\"/kv/notes\""),
        "{events}"
    );
    // Made again: an entry like any other, with all its ops.
    m.ok("echo '{\"key\":\"notes\",\"value\":\"back\"}' > kv/ops/set/call");
    assert_eq!(m.ok("ls kv/notes/ops/"), "delete\nset_value\n");
    m.ok("cmp kv/notes/body <(printf back)");
}

#[test]
fn a_policy_refusal_from_the_host_is_eacces_with_its_words() {
    let data = tempfile::tempdir().unwrap();
    let m = kv_world(data.path(), &[("KV_READONLY", "1")]);
    let guard = m.read("kv/ops/set/guard");
    assert!(
        guard.contains("✗ writable_store: KV_READONLY=1: this store takes no changes"),
        "{guard}"
    );
    let err = refused_with(
        &m,
        "echo '{\"key\":\"a\",\"value\":\"b\"}' > kv/ops/set/call",
    );
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(std::fs::read_dir(data.path()).unwrap().count(), 0);
}

#[test]
fn text_that_looks_like_key_value_is_sent_exactly_after_a_first_line_of_two_dashes() {
    let m = Mount::start(None);
    let schema = m.read("tracker/issues/42/ops/comment/schema");
    assert!(
        schema.contains("make the first line --"),
        "the schema says how: {schema}"
    );
    // Without the mark, a known key on the first line makes key=value lines.
    m.ok("printf 'body=looks like a key\\n' > tracker/issues/42/ops/comment/call");
    // With it, the text goes as it is, and a body is the bytes stored: no newline added.
    m.ok("printf -- '--\\nbody=kept\\ntimeout=30 is not the cause' > tracker/issues/42/ops/comment/call");
    let comments = m.ok("ls tracker/issues/42/comments | sort -n | tail -n 2");
    let ids: Vec<&str> = comments.split_whitespace().collect();
    assert_eq!(ids.len(), 2, "{comments}");
    m.ok(&format!(
        "cmp tracker/issues/42/comments/{}/body <(printf 'looks like a key')",
        ids[0]
    ));
    m.ok(&format!(
        "cmp tracker/issues/42/comments/{}/body <(printf 'body=kept\\ntimeout=30 is not the cause')",
        ids[1]
    ));
    // An op that takes no plain text says so.
    let err = refused_with(
        &m,
        "env printf -- '--\\nhello\\n' > tracker/issues/42/ops/label/call",
    );
    assert!(err.contains("Invalid argument"), "{err}");
    assert!(m
        .read("tracker/issues/42/ops/label/result")
        .contains("a first line -- means plain text, but this op takes none"));
}

#[test]
fn the_policy_asks_a_sign_off_never_an_approval_beside_review_approvals() {
    let m = Mount::start(Some(
        "[[host]]\nkind = \"tracker\"\npath = \"tracker\"\n\
         [[policy]]\nmatch = \"tracker/pulls/*/ops/merge\"\naction = \"approve\"\n",
    ));
    let guard = m.read("tracker/pulls/50/ops/merge/guard");
    assert!(
        guard.contains("sign_off: needs a person's sign-off"),
        "{guard}"
    );
    assert!(
        !guard.contains("approval"),
        "the policy's line is not called approval: {guard}"
    );
    assert!(m.read("README.md").contains("## A person's sign-off"));
}

#[test]
fn search_says_it_is_up_to_date_rather_than_how_old_its_last_pass_is() {
    let m = Mount::start(None);
    common::wait_until(
        "the first index",
        std::time::Duration::from_secs(60),
        || !m.read("search/description").contains("indexing"),
    );
    // The tracker and a small files tree are read again before every search.
    let d = m.read("search/description");
    assert!(d.contains("up to date: "), "{d}");
    assert!(!d.contains(" s ago"), "{d}");
    m.ok("echo 'zanzibar quokka' > tracker/issues/42/ops/comment/call");
    m.ok("echo zanzibar > search/ops/search/call");
    let r = m.read("search/ops/search/result");
    assert!(
        r.contains("tracker/issues/42"),
        "a comment made a moment ago is found: {r}"
    );
}

/// The mount's README.md teaches the protocol in at most 1,500 tokens, counted by a real
/// tokenizer that ships its vocabulary (npm's @anthropic-ai/tokenizer, an older Claude
/// tokenizer: the budget is defined by it), with the working tree's files section.
#[test]
fn the_mounts_readme_fits_in_1500_tokens_and_teaches_the_working_tree() {
    let m = Mount::start(None);
    let readme = m.read("README.md");
    for must in [
        "## Files are files",
        "PATH@",
        "files@/paths/P",
        "ops/NAME/guard",
        "## A person's sign-off",
    ] {
        assert!(readme.contains(must), "{must}: {readme}");
    }
    let tokenizer = common::fixtures().join("tokenizer");
    let file = m.state.join("readme.md");
    std::fs::write(&file, &readme).unwrap();
    let out = std::process::Command::new("node")
        .current_dir(&tokenizer)
        .arg("-e")
        .arg(
            "const {countTokens} = require('@anthropic-ai/tokenizer'); \
             console.log(countTokens(require('fs').readFileSync(process.argv[1], 'utf8')))",
        )
        .arg(&file)
        .output()
        .expect("node");
    assert!(
        out.status.success(),
        "the tokenizer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tokens: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(tokens <= 1500, "the README is {tokens} tokens");
    // A real count, not a byte count passed off as one.
    assert!(
        tokens > 500 && tokens < readme.len() / 2,
        "{tokens} tokens for {} bytes",
        readme.len()
    );
}
