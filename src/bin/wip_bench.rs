//! Call-latency measurements for `scripts/bench.sh`: the same op called in-process (host
//! alone, and through the world runtime with validation and journal) and through a mount.
//!
//!   wip-bench host-call --state DIR [--manifest FILE] [--state-url URL] ENTRY OP ARGS N
//!   wip-bench mount-call CALL_FILE ARGS N
//!   wip-bench read FILE N            (open, read whole, close: read latency of any file)
//!   wip-bench sql DB_FILE SQL N      (the same SQL through rusqlite, read-only, in-process)
//!   wip-bench tantivy DIR            (index DIR's HTML text with tantivy directly)
//!   wip-bench mcp-call TOOL ARGS N -- COMMAND…  (an MCP tool over stdio: rmcp directly, then
//!                                    the mcp host in-process, both without FUSE)
//!   wip-bench mount-read PATH N      (open and read a file N times, or list a directory when
//!                                    PATH ends with `/`; failures are timed like successes)
//!   wip-bench mcp-open N             (McpHost::open for a server that never answers, and for
//!                                    one that exits at once: opening must wait for neither)
//!   wip-bench relay LISTEN_IP TARGET PARENT_PID  (TCP on LISTEN_IP, a free port printed, each
//!                                    connection relayed byte for byte to TARGET (host:port),
//!                                    so TLS stays end to end; exits when PARENT_PID is gone)

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use wip::host::Caller;
use wip::launch::{build_world, MountOptions};
use wip::world::node::{NodeId, Target};

fn percentiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn report(label: &str, samples: Vec<f64>) {
    let n = samples.len();
    let (p50, p99) = percentiles(samples);
    println!("{label} n={n} p50_us={p50:.1} p99_us={p99:.1}");
}

fn host_call(args: &[String]) -> Result<()> {
    let mut state = None;
    let mut manifest = None;
    let mut state_url = None;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--state" => state = it.next().map(PathBuf::from),
            "--manifest" => manifest = it.next().map(PathBuf::from),
            "--state-url" => state_url = it.next().cloned(),
            _ => rest.push(a.clone()),
        }
    }
    let [entry, op, op_args, n] = rest.as_slice() else {
        bail!(
            "usage: wip-bench host-call --state DIR [--manifest FILE] [--state-url URL] ENTRY OP ARGS N"
        );
    };
    let n: usize = n.parse()?;
    let world = build_world(
        &MountOptions {
            mount_point: PathBuf::from("/nonexistent-bench-mount"),
            manifest,
            state_dir: state.ok_or_else(|| anyhow!("--state is required"))?,
            titled: false,
            wait: false,
            allow_other: false,
            state_url,
        },
        std::sync::Arc::new(wip::world::Unsubscribed),
    )?;
    let NodeId::Entry(e) = world.resolve_path(entry)? else {
        bail!("{entry} is not a host entry");
    };
    let value: serde_json::Value =
        serde_json::from_str(op_args).context("ARGS must be JSON here")?;
    let caller = Caller::from_pid(std::process::id(), 0);
    let host = &world.hosts()[e.host].host;
    let mut direct = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        host.call(&e.path, op, &value, &caller)?;
        direct.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("in-process host.call", direct);
    let target = Target::Entry(e);
    let mut runtime = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = world.calls().call(&target, op, op_args.as_bytes(), &caller);
        runtime.push(t.elapsed().as_secs_f64() * 1e6);
        r.outcome?;
    }
    report("in-process world.call", runtime);
    journal_commits(op, op_args, &caller, n)
}

/// The two commits every call makes (its run recorded before it runs, its outcome after),
/// timed alone on a fresh journal of the default engine: what durability costs a call,
/// which no call through the mount can go below.
fn journal_commits(op: &str, op_args: &str, caller: &Caller, n: usize) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let opened = wip::state::open(dir.path(), None, "bench")?;
    let journal = opened.journal;
    let guard = wip::state::Clean::new("allowed\n");
    let result = wip::state::Clean::new("{\"ok\":true}\n");
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let began = journal.begin(caller, "/tracker/issues/1", op, op_args, &guard)?;
        journal.finish(began.id, "ok", 0, &result, &[], &[])?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("in-process journal begin+finish", samples);
    Ok(())
}

fn mount_call(args: &[String]) -> Result<()> {
    let [path, op_args, n] = args else {
        bail!("usage: wip-bench mount-call CALL_FILE ARGS N");
    };
    let n: usize = n.parse()?;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        // What `echo ARGS > call` does: open with O_TRUNC, one write, close.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("open {path}"))?;
        f.write_all(op_args.as_bytes())?;
        drop(f);
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("through the mount", samples);
    Ok(())
}

fn read_latency(args: &[String]) -> Result<()> {
    let [path, n] = args else {
        bail!("usage: wip-bench read FILE N");
    };
    let n: usize = n.parse()?;
    let mut samples = Vec::with_capacity(n);
    let mut buf = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        buf.clear();
        std::io::Read::read_to_end(
            &mut std::fs::File::open(path).with_context(|| format!("open {path}"))?,
            &mut buf,
        )?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("read", samples);
    Ok(())
}

fn sql(args: &[String]) -> Result<()> {
    let [db, query, n] = args else {
        bail!("usage: wip-bench sql DB_FILE SQL N");
    };
    let n: usize = n.parse()?;
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut st = conn.prepare_cached(query)?;
        let cols = st.column_count();
        let mut rows = st.query([])?;
        let mut text = String::new();
        while let Some(row) = rows.next()? {
            for i in 0..cols {
                text.push_str(&format!("{:?}\t", row.get_ref(i)?));
            }
            text.push('\n');
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("in-process rusqlite", samples);
    Ok(())
}

/// The baseline for the search host's indexing: the same pages' text (extracted first, not
/// timed) indexed by tantivy directly with the same field options, one writer thread.
fn tantivy_direct(args: &[String]) -> Result<()> {
    use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
    let [dir] = args else {
        bail!("usage: wip-bench tantivy DIR");
    };
    let mut pages = Vec::new();
    let mut stack = vec![PathBuf::from(dir)];
    let extract = Instant::now();
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "html" || e == "htm") {
                let html = std::fs::read_to_string(&path).unwrap_or_default();
                let page = wip::hosts::files::documents::html_to_text(&html);
                pages.push((page.title.unwrap_or_default(), page.text));
            }
        }
    }
    let extract_s = extract.elapsed().as_secs_f64();
    let mut b = Schema::builder();
    let opts = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("en_stem")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let title = b.add_text_field("title", opts.clone());
    let text = b.add_text_field("text", opts);
    let index_dir = tempfile::tempdir()?;
    let index = tantivy::Index::create_in_dir(index_dir.path(), b.build())?;
    let t = Instant::now();
    let mut w: tantivy::IndexWriter = index.writer_with_num_threads(1, 64 << 20)?;
    for (t_title, t_text) in &pages {
        let mut d = tantivy::TantivyDocument::default();
        d.add_text(title, t_title);
        d.add_text(text, t_text);
        w.add_document(d)?;
    }
    w.commit()?;
    let index_s = t.elapsed().as_secs_f64();
    println!(
        "tantivy direct: {} pages, extraction {:.1} s, indexing {:.1} s = {:.0} docs/s (with extraction {:.0} docs/s)",
        pages.len(),
        extract_s,
        index_s,
        pages.len() as f64 / index_s,
        pages.len() as f64 / (index_s + extract_s)
    );
    Ok(())
}

/// The baseline for the mcp host: the same tool called over the same transport by the rmcp
/// client alone (no host, no runtime, no FUSE), then by the mcp host in-process.
fn mcp_call(args: &[String]) -> Result<()> {
    use rmcp::model::CallToolRequestParams;
    use rmcp::ServiceExt;
    let sep = args.iter().position(|a| a == "--");
    let (Some(sep), [tool, op_args, n, ..]) = (sep, args) else {
        bail!("usage: wip-bench mcp-call TOOL ARGS N -- COMMAND…");
    };
    let command = &args[sep + 1..];
    let Some((program, rest)) = command.split_first() else {
        bail!("no command after --");
    };
    let n: usize = n.parse()?;
    let value: serde_json::Value = serde_json::from_str(op_args).context("ARGS must be JSON")?;
    let serde_json::Value::Object(map) = value.clone() else {
        bail!("ARGS must be a JSON object");
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let direct = rt.block_on(async {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(rest);
        let transport = rmcp::transport::TokioChildProcess::new(cmd)?;
        let client = ().serve(transport).await?;
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let params = CallToolRequestParams::new(tool.clone()).with_arguments(map.clone());
            let t = Instant::now();
            client.call_tool(params).await?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        client.cancel().await?;
        anyhow::Ok(samples)
    })?;
    report("rmcp client over stdio", direct);

    let settings: wip::hosts::mcp::McpSettings =
        toml::from_str(&format!("command = {}", serde_json::to_string(command)?))?;
    let ctx = host_context()?;
    let host = wip::hosts::mcp::McpHost::open(settings, &ctx.at("mcp"))?;
    use wip::host::Host;
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while !host
        .guard(&[], tool, None)
        .map(|g| g.allowed())
        .unwrap_or(false)
    {
        if Instant::now() > deadline {
            bail!("the server did not get ready: {:?}", host.entry(&[]));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let caller = Caller::from_pid(std::process::id(), 0);
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        host.call(&[], tool, &value, &caller)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("in-process host.call", samples);
    Ok(())
}

/// What a host opened by the benchmark sees: no mount, no change feed, default timeouts.
fn host_context() -> Result<wip::hosts::HostContext> {
    Ok(wip::hosts::HostContext {
        launch_dir: std::env::current_dir()?,
        ..wip::hosts::HostContext::for_tests(&std::env::temp_dir())
    })
}

fn mount_read(args: &[String]) -> Result<()> {
    let [path, n] = args else {
        bail!("usage: wip-bench mount-read PATH N");
    };
    let n: usize = n.parse()?;
    let (mut samples, mut failed) = (Vec::with_capacity(n), 0usize);
    for _ in 0..n {
        let t = Instant::now();
        let ok = if path.ends_with('/') {
            std::fs::read_dir(path).is_ok_and(|d| d.collect::<Result<Vec<_>, _>>().is_ok())
        } else {
            std::fs::read(path).is_ok()
        };
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        failed += usize::from(!ok);
    }
    report(&format!("read {path} ({failed} failed)"), samples);
    Ok(())
}

fn mcp_open(args: &[String]) -> Result<()> {
    let [n] = args else {
        bail!("usage: wip-bench mcp-open N");
    };
    let n: usize = n.parse()?;
    let ctx = host_context()?;
    for (label, command) in [
        ("open, a server that never answers", "[\"sleep\", \"600\"]"),
        ("open, a server that exits at once", "[\"true\"]"),
    ] {
        let settings: wip::hosts::mcp::McpSettings = toml::from_str(&format!(
            "command = {command}\nstartup_timeout_ms = 3600000"
        ))?;
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let host = wip::hosts::mcp::McpHost::open(settings.clone(), &ctx.at("mcp"))?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
            drop(host);
        }
        report(label, samples);
    }
    Ok(())
}

/// A TCP relay: how a mount in a network namespace reaches a server listening on the
/// host's loopback only (the benchmark's shared24 section). Bytes are copied as they come
/// (no Nagle delay on either side), so the client's TLS session is the server's.
fn relay(args: &[String]) -> Result<()> {
    let [listen, target, parent] = args else {
        bail!("usage: wip-bench relay LISTEN_IP TARGET_HOST:PORT PARENT_PID");
    };
    let parent: libc::pid_t = parent.parse()?;
    let listener = std::net::TcpListener::bind((listen.as_str(), 0))
        .with_context(|| format!("listen on {listen}"))?;
    println!("{}", listener.local_addr()?.port());
    std::io::stdout().flush()?;
    // Gone with the benchmark that started it, however that ended.
    std::thread::spawn(move || loop {
        // SAFETY: signal 0 only asks whether the process exists.
        if unsafe { libc::kill(parent, 0) } != 0 {
            std::process::exit(0);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    });
    for conn in listener.incoming() {
        let Ok(inward) = conn else { continue };
        let Ok(outward) = std::net::TcpStream::connect(target.as_str()) else {
            continue;
        };
        let _ = inward.set_nodelay(true);
        let _ = outward.set_nodelay(true);
        for (mut from, mut to) in [
            (inward.try_clone()?, outward.try_clone()?),
            (outward, inward),
        ] {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(std::net::Shutdown::Both);
            });
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("host-call") => host_call(&args[1..]),
        Some("mount-call") => mount_call(&args[1..]),
        Some("read") => read_latency(&args[1..]),
        Some("sql") => sql(&args[1..]),
        Some("tantivy") => tantivy_direct(&args[1..]),
        Some("mcp-call") => mcp_call(&args[1..]),
        Some("mount-read") => mount_read(&args[1..]),
        Some("mcp-open") => mcp_open(&args[1..]),
        Some("relay") => relay(&args[1..]),
        _ => bail!("usage: wip-bench host-call … | mount-call …"),
    }
}
