//! Tests of the search host over real peers: a files host on a temporary directory and the
//! tracker's demo project.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::hosts::files::{FilesHost, FilesSettings};
use crate::hosts::tracker::{TrackerHost, TrackerSettings};

struct World {
    dir: tempfile::TempDir,
    root: PathBuf,
    tracker: Arc<TrackerHost>,
    ctx: HostContext,
}

fn p(s: &str) -> Vec<String> {
    s.split('/')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    fs::create_dir_all(root.join("notes")).unwrap();
    fs::create_dir_all(root.join(".hidden")).unwrap();
    fs::write(
        root.join("notes/zebra.txt"),
        "The quokka migration plan mentions flamingo pipelines twice.\n",
    )
    .unwrap();
    fs::write(
        root.join("notes/other.md"),
        "Pipelines of another kind; no flamingo here.\n",
    )
    .unwrap();
    fs::write(
        root.join("guide.html"),
        "<!doctype html><html><head><title>Deployment guide</title>\
         <script>var hiddenscriptword = 1;</script><style>.stylishword { }</style></head>\
         <body><nav>navlinkword</nav><h1>Secrets</h1>\
         <p>Rotate the <b>walrus</b> credentials weekly.</p></body></html>",
    )
    .unwrap();
    fs::write(root.join("bin.dat"), b"binaryword\0\x01\x02").unwrap();
    fs::write(root.join(".hidden/secret.txt"), "hiddenword\n").unwrap();
    fs::write(root.join("big.txt"), "bigword ".repeat(200_000)).unwrap();
    let mut ctx = HostContext {
        state_dir: base.join("state"),
        mount_point: base.join("mnt"),
        ..HostContext::for_tests(&base)
    };
    let tracker =
        Arc::new(TrackerHost::open(TrackerSettings::default(), &ctx.at("tracker")).unwrap());
    let files = FilesHost::open(
        FilesSettings {
            root: Some(PathBuf::from("root")),
            ..FilesSettings::default()
        },
        &ctx.at("files"),
    )
    .unwrap();
    ctx.peers.push(Peer {
        path: "tracker".to_string(),
        host: tracker.clone(),
    });
    ctx.peers.push(Peer {
        path: "files".to_string(),
        host: Arc::new(files),
    });
    World {
        dir,
        root,
        tracker,
        ctx,
    }
}

/// A search host on the world, its first pass done.
fn open(w: &World) -> SearchHost {
    let h = SearchHost::open(SearchSettings::default(), &w.ctx.at("search")).unwrap();
    assert!(
        h.inner.shared.wait(1, Duration::from_secs(60)),
        "first pass"
    );
    h
}

fn call(h: &SearchHost, path: &str, op: &str, args: Value) -> HostResult<CallOutcome> {
    h.call(&p(path), op, &args, &Caller::default())
}

fn ok(h: &SearchHost, path: &str, op: &str, args: Value) -> CallOutcome {
    call(h, path, op, args).unwrap_or_else(|e| panic!("{path} {op}: {e:?}"))
}

/// The world paths of a search's hits, best first, and the result id.
fn search(h: &SearchHost, query: &str) -> (i64, Vec<String>) {
    let out = ok(h, "", "search", json!({ "query": query }));
    assert_eq!(out.discovered.len(), 1, "{out:?}");
    let id: i64 = out.discovered[0][1].parse().unwrap();
    let hits = h.inner.store.hits(id).unwrap();
    (id, hits.iter().map(|hit| h.hit_target(hit)).collect())
}

fn reindex(h: &SearchHost) -> worker::PassStats {
    let out = ok(h, "", "reindex", json!({}));
    assert!(out.result.starts_with("indexed:"), "{}", out.result);
    h.inner.shared.lock().last.clone().unwrap()
}

#[test]
fn settings_parse_strictly_and_sources_must_be_peers() {
    let s: SearchSettings = toml::from_str("sources = [\"files\"]\npage_size = 20").unwrap();
    assert_eq!(s.sources, Some(vec!["files".to_string()]));
    assert_eq!(s.page_size, 20);
    assert_eq!(SearchSettings::default().page_size, 50);
    assert!(toml::from_str::<SearchSettings>("sauces = []").is_err());
    let w = world();
    let bad = SearchSettings {
        sources: Some(vec!["nope".to_string()]),
        ..SearchSettings::default()
    };
    match SearchHost::open(bad, &w.ctx.at("search")) {
        Err(e @ SearchError::UnknownSource { .. }) => {
            assert!(e.to_string().contains("known: tracker, files"), "{e}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("unknown source accepted"),
    }
    let zero = SearchSettings {
        page_size: 0,
        ..SearchSettings::default()
    };
    assert!(matches!(
        SearchHost::open(zero, &w.ctx.at("search")),
        Err(SearchError::PageSize)
    ));
}

#[test]
fn a_distinctive_phrase_finds_its_document_first() {
    let w = world();
    let h = open(&w);
    let root = h.entry(&[]).unwrap().unwrap();
    assert!(
        root.description
            .starts_with("Full-text search (BM25) over "),
        "{}",
        root.description
    );
    assert!(
        root.description.contains("from tracker "),
        "{}",
        root.description
    );
    assert!(root.description.contains("files 3"), "{}", root.description);
    // Quick sources are read again before each search: the words say so, not an age.
    assert!(
        root.description
            .contains("up to date: tracker and files are read again before every search"),
        "{}",
        root.description
    );

    let (_, hits) = search(&h, "\"flamingo pipelines\"");
    assert_eq!(hits, vec!["files/notes/zebra.txt"]);
    let (_, hits) = search(&h, "quokka flamingo");
    assert_eq!(hits[0], "files/notes/zebra.txt");
    assert!(
        hits.contains(&"files/notes/other.md".to_string()),
        "{hits:?}"
    );

    let out = ok(
        &h,
        "",
        "search",
        json!({"query": "config crash", "limit": 3}),
    );
    let id = &out.discovered[0][1];
    assert_eq!(
        out.discovered,
        vec![vec!["results".to_string(), id.clone()]]
    );
    let first = out.result.lines().find(|l| l.starts_with("1. ")).unwrap();
    assert!(
        first.contains(" tracker/issues/42 — Issue #42: Crash when config is missing")
            || first.contains(" tracker/pulls/50 — PR #50:"),
        "{}",
        out.result
    );
    let result = h.entry(&p(&format!("results/{id}"))).unwrap().unwrap();
    assert!(!result.indexable);
    assert!(
        result
            .description
            .starts_with(&format!("Search {id} · \"config crash\" · ")),
        "{}",
        result.description
    );
    assert_eq!(
        h.children(&p(&format!("results/{id}"))).unwrap()[0].name,
        "hits"
    );
    let hits = h.children(&p(&format!("results/{id}/hits"))).unwrap();
    assert_eq!(hits.len(), 3);
    let hit42 = hits
        .iter()
        .find(|c| c.info.description.contains("tracker/issues/42"))
        .expect("issue 42 among the best 3");
    assert_eq!(hit42.info.reference, "tracker://demo/issues/42");
    assert!(
        hit42
            .info
            .description
            .contains(" · tracker/issues/42 · Issue #42: Crash when config is missing · "),
        "{}",
        hit42.info.description
    );
    // The result is reachable by id but not listed for crawlers.
    let listed = h.children(&p("results")).unwrap();
    assert!(listed.iter().all(|c| !c.info.indexable));
    // read_body prints the snippet with the matched words marked.
    let body = ok(
        &h,
        &format!("results/{id}/hits/{}", hit42.name),
        "read_body",
        json!({}),
    );
    assert!(body.result.contains("**"), "{}", body.result);
    assert!(body.result.contains("--- indexed text"), "{}", body.result);
    // Filtering by source.
    let out = ok(
        &h,
        "",
        "search",
        json!({"query": "crash", "source": "files"}),
    );
    assert!(out.result.starts_with("0 hits"), "{}", out.result);
}

#[test]
fn html_is_indexed_as_text_and_junk_is_skipped() {
    let w = world();
    let h = open(&w);
    let (id, hits) = search(&h, "walrus");
    assert_eq!(hits, vec!["files/guide.html"]);
    let hit = h.inner.store.hit(id, 1).unwrap().unwrap();
    assert_eq!(hit.title, "Deployment guide");
    let body = ok(&h, &format!("results/{id}/hits/1"), "read_body", json!({}));
    assert!(
        body.result
            .contains("Secrets\nRotate the walrus credentials weekly."),
        "{}",
        body.result
    );
    assert!(!body.result.contains('<'), "{}", body.result);
    for word in [
        "hiddenscriptword",
        "stylishword",
        "navlinkword",
        "binaryword",
        "hiddenword",
        "bigword",
    ] {
        let (_, hits) = search(&h, word);
        assert!(hits.is_empty(), "{word}: {hits:?}");
    }
}

#[test]
fn reindexing_is_incremental() {
    let w = world();
    let h = open(&w);
    let first = h.inner.shared.lock().last.clone().unwrap();
    assert_eq!(first.written, first.read);
    assert!(first.read >= 50, "{first:?}");

    let again = reindex(&h);
    assert_eq!((again.written, again.removed), (0, 0), "{again:?}");
    assert_eq!(again.read, first.read);

    // An edited file, a new file, a new comment and a deleted file.
    fs::write(
        w.root.join("notes/zebra.txt"),
        "Now about the narwhal schedule instead.\n",
    )
    .unwrap();
    fs::write(w.root.join("notes/new.txt"), "okapi sightings\n").unwrap();
    fs::remove_file(w.root.join("notes/other.md")).unwrap();
    w.tracker
        .call(
            &p("issues/7"),
            "comment",
            &json!({"body": "Seen again with the xylophone plugin."}),
            &Caller::default(),
        )
        .unwrap();
    let after = reindex(&h);
    assert_eq!((after.written, after.removed), (3, 1), "{after:?}");

    assert_eq!(search(&h, "narwhal").1, vec!["files/notes/zebra.txt"]);
    assert!(search(&h, "quokka").1.is_empty());
    assert_eq!(search(&h, "okapi").1, vec!["files/notes/new.txt"]);
    assert_eq!(search(&h, "xylophone").1, vec!["tracker/issues/7"]);
    assert!(search(&h, "\"another kind\"").1.is_empty());

    // A search re-reads quick sources by itself: no reindex needed.
    w.tracker
        .call(
            &p("issues/9"),
            "comment",
            &json!({"body": "The marmoset build fails too."}),
            &Caller::default(),
        )
        .unwrap();
    assert_eq!(search(&h, "marmoset").1, vec!["tracker/issues/9"]);
    fs::write(w.root.join("notes/later.txt"), "capybara\n").unwrap();
    assert_eq!(search(&h, "capybara").1, vec!["files/notes/later.txt"]);

    // A full rebuild reads and writes everything again.
    let out = ok(&h, "", "reindex", json!({"full": true}));
    assert!(out.result.starts_with("indexed:"), "{}", out.result);
    let full = h.inner.shared.lock().last.clone().unwrap();
    assert_eq!(full.written, full.read);
    assert_eq!(search(&h, "okapi").1, vec!["files/notes/new.txt"]);
}

#[test]
fn results_and_index_persist_across_reopen() {
    let w = world();
    let (id, hits, description) = {
        let h = open(&w);
        let (id, hits) = search(&h, "flamingo");
        let d = h
            .entry(&p(&format!("results/{id}")))
            .unwrap()
            .unwrap()
            .description;
        (id, hits, d)
    };
    let h = open(&w);
    let reopened = h.inner.shared.lock().last.clone().unwrap();
    assert_eq!(reopened.written, 0, "{reopened:?}");
    let again = h.entry(&p(&format!("results/{id}"))).unwrap().unwrap();
    assert_eq!(again.description, description);
    let listed: Vec<String> = h
        .children(&p(&format!("results/{id}/hits")))
        .unwrap()
        .into_iter()
        .map(|c| c.info.description)
        .collect();
    assert_eq!(listed.len(), hits.len());
    assert!(listed[0].contains(&hits[0]), "{listed:?}");
    let (next, _) = search(&h, "flamingo");
    assert_eq!(next, id + 1);
    assert!(h.entry(&p("results/999")).unwrap().is_none());
    assert!(h.entry(&p(&format!("results/0{id}"))).unwrap().is_none());
    drop(w.dir);
}

#[test]
fn bad_arguments_are_invalid_with_words() {
    let w = world();
    let h = open(&w);
    for (args, words) in [
        (json!({"query": "nosuchfield:x"}), "nosuchfield"),
        (json!({"query": "(config crash"}), "query"),
        (json!({"query": "  "}), "query"),
        (json!({"query": "x", "limit": 0}), "limit"),
        (json!({"query": "x", "limit": 51}), "limit"),
        (json!({"query": "x", "source": "db"}), "source"),
        (json!({"query": "x", "colour": 1}), "colour"),
    ] {
        match call(&h, "", "search", args.clone()) {
            Err(HostError::InvalidArgs(m)) => assert!(m.contains(words), "{args}: {m}"),
            other => panic!("{args}: {other:?}"),
        }
    }
    assert!(matches!(
        call(&h, "", "merge", json!({})),
        Err(HostError::NotFound(_))
    ));
    assert!(matches!(
        call(&h, "results/5", "read_body", json!({})),
        Err(HostError::NotFound(_))
    ));
}

#[test]
fn ops_have_strict_schemas_and_guards() {
    let w = world();
    let h = open(&w);
    let ops = h.ops(&[]).unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["search", "reindex"]);
    for op in &ops {
        assert_eq!(
            op.schema["additionalProperties"],
            json!(false),
            "{}",
            op.name
        );
    }
    assert_eq!(ops[0].schema["required"], json!(["query"]));
    assert_eq!(
        ops[0].schema["properties"]["source"]["enum"],
        json!(["tracker", "files"])
    );
    let g = h.guard(&[], "search", None).unwrap();
    assert!(g.allowed(), "{}", g.render());
    assert!(h.guard(&[], "nope", None).is_err());
    assert!(h.bounded_calls());
    assert_eq!(h.cache_ttl(), Duration::from_secs(1));

    // No sources: the guard says why.
    let mut ctx = w.ctx.clone();
    ctx.peers.clear();
    let settings = SearchSettings {
        index_dir: Some(PathBuf::from("other-index")),
        ..SearchSettings::default()
    };
    let empty = SearchHost::open(settings, &ctx.at("search")).unwrap();
    assert!(matches!(
        call(&empty, "", "search", json!({"query": "x"})),
        Err(HostError::Blocked(_))
    ));
    assert!(Path::new(&w.ctx.launch_dir.join("other-index/state.db")).exists());
}

#[test]
fn files_documents_page_in_path_order() {
    let w = world();
    let files = &w.ctx.peers[1].host;
    let (all, next) = files.documents(None, 100).unwrap();
    assert_eq!(next, None);
    let paths: Vec<String> = all.iter().map(|d| d.path.join("/")).collect();
    assert_eq!(paths, ["guide.html", "notes/other.md", "notes/zebra.txt"]);
    assert_eq!(all[0].title, "Deployment guide");
    assert_eq!(all[2].title, "zebra.txt");
    let mut cursor = None;
    let mut paged = Vec::new();
    loop {
        let (docs, next) = files.documents(cursor.as_deref(), 1).unwrap();
        paged.extend(docs.into_iter().map(|d| d.path.join("/")));
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(paged, paths);
    // Resuming after a path that is gone continues in order.
    let (docs, _) = files.documents(Some("notes/aaa.txt"), 10).unwrap();
    assert_eq!(docs.len(), 2);
    assert!(files.documents(Some("../x"), 1).is_err());
}

#[test]
fn tracker_documents_cover_items_and_change_with_comments() {
    let w = world();
    let t = &w.tracker;
    let (page, next) = t.documents(None, 10).unwrap();
    assert_eq!(page.len(), 10);
    assert_eq!(next.as_deref(), Some(page[9].path[1].as_str()));
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let (docs, next) = t.documents(cursor.as_deref(), 20).unwrap();
        all.extend(docs);
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let issues = all.iter().filter(|d| d.path[0] == "issues").count();
    let pulls = all.iter().filter(|d| d.path[0] == "pulls").count();
    assert!(issues >= 40 && pulls >= 7, "{issues} {pulls}");
    let d42 = all.iter().find(|d| d.path == p("issues/42")).unwrap();
    assert_eq!(d42.title, "Issue #42: Crash when config is missing");
    assert!(d42
        .text
        .starts_with("Issue #42: Crash when config is missing\n\n"));
    let before = d42.version.clone();
    t.call(
        &p("issues/42"),
        "comment",
        &json!({"body": "ping"}),
        &Caller::default(),
    )
    .unwrap();
    let (docs, _) = t.documents(Some("41"), 1).unwrap();
    assert_eq!(docs[0].path, p("issues/42"));
    assert_ne!(docs[0].version, before);
    assert!(docs[0].text.ends_with("you: ping"), "{}", docs[0].text);
    assert!(t.documents(Some("x"), 1).is_err());
}

#[test]
fn searches_reread_quick_sources_always_and_slow_ones_after_ten_passes() {
    let shared = worker::Shared::default();
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (cheap, fresh) = (Duration::from_millis(300), Duration::from_secs(2));
    // Never indexed: stale.
    assert_eq!(
        shared.ensure_fresh(&names(&["a"]), cheap, fresh),
        Some((1, true))
    );
    let mut s = shared.lock();
    s.pending_some.clear();
    let now = std::time::Instant::now();
    s.per_source
        .insert("quick".into(), (now, Duration::from_millis(5)));
    s.per_source
        .insert("slow".into(), (now, Duration::from_secs(1)));
    drop(s);
    assert_eq!(shared.ensure_fresh(&names(&["slow"]), cheap, fresh), None);
    assert_eq!(
        shared.ensure_fresh(&names(&["slow", "quick"]), cheap, fresh),
        Some((1, true))
    );
    assert_eq!(
        shared.lock().pending_some.iter().collect::<Vec<_>>(),
        ["quick"]
    );
    // A source whose pass took 1 s is re-read after ten times that, not after 2 s.
    let mut s = shared.lock();
    s.per_source.insert(
        "slow".into(),
        (now - Duration::from_secs(3), Duration::from_secs(1)),
    );
    drop(s);
    assert_eq!(shared.ensure_fresh(&names(&["slow"]), cheap, fresh), None);
    let mut s = shared.lock();
    s.per_source.insert(
        "slow".into(),
        (now - Duration::from_secs(11), Duration::from_secs(1)),
    );
    drop(s);
    // A slow source is refreshed in the background: the search does not wait for it.
    assert_eq!(
        shared.ensure_fresh(&names(&["slow"]), cheap, fresh),
        Some((1, false))
    );
    assert!(!shared.wait(1, Duration::from_millis(10)));
}

#[test]
fn search_arguments_keep_their_schema() {
    let w = world();
    let h = open(&w);
    let ops = h.ops(&[]).unwrap();
    let mut schema = ops[0].schema.clone();
    // The integer's width is the generator's addition, not a constraint.
    schema["properties"]["limit"]
        .as_object_mut()
        .unwrap()
        .remove("format");
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1,
                          "description": "what to look for (tantivy query syntax)"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50,
                          "description": "how many hits to keep"},
                "source": {"type": "string", "enum": ["tracker", "files"],
                           "description": "search only the documents of this host"}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    );
    assert!(ops[0].description.contains("limit (1–50, default 10)"));
    assert_eq!(
        ops[1].schema["properties"]["full"],
        json!({"type": "boolean", "default": false,
               "description": "drop the index and read everything again"})
    );
    let (id, _) = search(&h, "flamingo");
    let result = h.ops(&p(&format!("results/{id}"))).unwrap();
    assert_eq!(result.len(), 1);
    assert_eq!(result[0].name, "read_body");
    assert_eq!(result[0].schema["properties"], json!({}));
    assert!(h.ops(&p("results")).unwrap().is_empty());
}

/// Hits on files whose names other hosts' entries reserve (`README.md`, `ops`,
/// `description`, `body`) print the files' exact paths (a files host's names are its
/// files'), each an entry of the files host.
#[test]
fn hits_on_reserved_names_print_paths_that_exist() {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    fs::create_dir_all(root.join("ops")).unwrap();
    for (file, text) in [
        ("README.md", "The platypus readme."),
        ("ops/x.txt", "A platypus under ops."),
        ("description", "A platypus description."),
        ("body", "A platypus body."),
    ] {
        fs::write(root.join(file), format!("{text}\n")).unwrap();
    }
    let mut ctx = HostContext::for_tests(&base);
    let files: Arc<dyn Host> = Arc::new(
        FilesHost::open(
            FilesSettings {
                root: Some(root),
                ..FilesSettings::default()
            },
            &ctx.at("files"),
        )
        .unwrap(),
    );
    ctx.peers.push(Peer {
        path: "files".to_string(),
        host: files.clone(),
    });
    let h = SearchHost::open(SearchSettings::default(), &ctx.at("search")).unwrap();
    assert!(h.inner.shared.wait(1, Duration::from_secs(60)));
    let out = ok(&h, "", "search", json!({"query": "platypus"}));
    let mut found = out.found_elsewhere.clone();
    found.sort();
    assert_eq!(
        found,
        [
            "files/README.md",
            "files/body",
            "files/description",
            "files/ops/x.txt"
        ]
    );
    for path in &found {
        // The result's lines print the same paths.
        assert!(
            out.result.contains(&format!(" {path} (line 1) — ")),
            "{}",
            out.result
        );
        let segments: Vec<String> = path.split('/').skip(1).map(str::to_string).collect();
        assert!(
            files.entry(&segments).unwrap().is_some(),
            "{path} is no entry"
        );
    }
    let id = out.discovered[0][1].clone();
    let hit = h
        .entry(&p(&format!("results/{id}/hits/1")))
        .unwrap()
        .unwrap();
    assert!(!hit.description.starts_with("gone"), "{}", hit.description);
    assert!(found
        .iter()
        .any(|f| hit.description.contains(&format!(" · {f} · "))));
}

#[test]
fn what_the_policy_hides_is_never_indexed_nor_found() {
    let mut w = world();
    // Indexed first; then the rule comes (a remount with a new manifest): dropped.
    let h = open(&w);
    assert_eq!(
        search(&h, "\"flamingo pipelines\"").1,
        vec!["files/notes/zebra.txt"]
    );
    drop(h);
    w.ctx.hidden =
        crate::host::Hidden::new(|p| p == "files/notes" || p.starts_with("files/notes/"));
    let h = open(&w);
    let (_, hits) = search(&h, "flamingo");
    assert!(
        hits.is_empty(),
        "a hidden file is no search's oracle: {hits:?}"
    );
    let (_, hits) = search(&h, "walrus");
    assert_eq!(
        hits,
        vec!["files/guide.html"],
        "what is not hidden is still found"
    );
}

/// Identifiers are indexed whole beside their words: a quoted identifier matches that
/// identifier only, an unquoted one ranks the exact identifier first, and a file's hit
/// says the line it is on.
#[test]
fn identifiers_are_found_whole_and_hits_name_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    fs::create_dir_all(root.join("valgrind")).unwrap();
    fs::write(
        root.join("pthread.h"),
        "/* threads */\n#include <bits/types.h>\n\nextern int pthread_barrier_wait (pthread_barrier_t *__barrier);\n",
    )
    .unwrap();
    fs::write(
        root.join("valgrind/helgrind.h"),
        "/* helgrind */\n#define _VG_USERREQ__HG_PTHREAD_BARRIER_WAIT_PRE 1\n/* a pthread barrier wait is checked */\n",
    )
    .unwrap();
    let mut ctx = HostContext::for_tests(&base);
    let files: Arc<dyn Host> = Arc::new(
        FilesHost::open(
            FilesSettings {
                root: Some(root),
                ..FilesSettings::default()
            },
            &ctx.at("files"),
        )
        .unwrap(),
    );
    ctx.peers.push(Peer {
        path: "files".to_string(),
        host: files,
    });
    let h = SearchHost::open(SearchSettings::default(), &ctx.at("search")).unwrap();
    assert!(h.inner.shared.wait(1, Duration::from_secs(60)));
    let (_, quoted) = search(&h, "\"pthread_barrier_wait\"");
    assert_eq!(quoted, ["files/pthread.h"], "only the identifier itself");
    let (_, bare) = search(&h, "pthread_barrier_wait");
    assert_eq!(
        bare.first().map(String::as_str),
        Some("files/pthread.h"),
        "{bare:?}"
    );
    // The words still find both (the phrase in helgrind's comment too).
    let (_, words) = search(&h, "\"pthread barrier wait\"");
    assert!(
        words.contains(&"files/valgrind/helgrind.h".to_string()),
        "{words:?}"
    );
    let out = ok(
        &h,
        "",
        "search",
        json!({"query": "\"pthread_barrier_wait\""}),
    );
    assert!(
        out.result.contains("files/pthread.h (line 4) — "),
        "{}",
        out.result
    );
    // The identifier's own case does not matter.
    let (_, upper) = search(&h, "\"PTHREAD_BARRIER_WAIT\"");
    assert_eq!(upper, ["files/pthread.h"]);
}

/// The description says what is true at that moment: indexing (how far, and when it will
/// be done) while a pass runs, a pass about to start while one is asked for, and "up to
/// date" only when neither.
#[test]
fn the_description_says_indexing_while_it_indexes() {
    let w = world();
    let h = open(&w);
    let desc = || h.entry(&[]).unwrap().unwrap().description;
    assert!(desc().contains("up to date"), "{}", desc());
    let last_read = h.inner.shared.lock().last.clone().unwrap().read;
    {
        let mut s = h.inner.shared.lock();
        s.running = Some(std::time::Instant::now());
        s.progress = 3;
    }
    let d = desc();
    assert!(!d.contains("up to date"), "{d}");
    assert!(
        d.contains(&format!(
            "indexing now: 3 of about {last_read} documents read"
        )),
        "{d}"
    );
    assert!(d.contains("done in about"), "{d}");
    {
        let mut s = h.inner.shared.lock();
        s.running = None;
        s.pending_some.insert("files".into());
    }
    let d = desc();
    assert!(!d.contains("up to date"), "{d}");
    assert!(d.contains("a pass is about to start"), "{d}");
    h.inner.shared.lock().pending_some.clear();
}
