//! The hosts as the world knows them: where each is mounted, what they said of their
//! entries (kept for a moment, see `keeps_infos`), the entries a call removed, the known
//! world, and what a call's outcome changed among them. The tree (`tree.rs`), the files'
//! content (`content.rs`) and the call pipeline (`call/`) all ask here; nothing here
//! knows a call or a kernel.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::call::live;
use super::call::run::RoutedOutcome;
use super::error::{ErrorKind, WorldError, WorldResult};
use super::node::*;
use super::{root_ops, Mounted, OpList};
use super::{BODY_CACHE, GONE_KEEP, INFO_CACHE, INFO_CACHE_MAX, OPS_CACHE, REPORTED_TTL};
use crate::cache::TtlCache;
use crate::host::{self, names, Body, Host, OpSpec};
use crate::state::{Event, Known, KnownEntry};

pub struct Entries {
    hosts: Vec<Mounted>,
    mount_point: PathBuf,
    ops_cache: TtlCache<Target, OpList>,
    infos: TtlCache<EntryRef, host::EntryInfo>,
    /// When entries last changed, reused like `infos` (every node of an entry shows it).
    mtimes: TtlCache<EntryRef, Option<SystemTime>>,
    /// Entries' bodies as their hosts last gave them, reused like `infos` (a listing shows
    /// `body` and the next `stat` sizes it).
    bodies: TtlCache<EntryRef, Body>,
    /// Entries a call of their own removed, with the ops that ran: the caller can still
    /// read `ENTRY/ops/NAME/result` (and `runs/`) at the path it used, for a while.
    gone: TtlCache<EntryRef, Arc<Vec<String>>>,
    known: Known,
    /// Entries seen to be non-indexable: their descendants are out of the indexable range.
    unindexed: Mutex<HashSet<EntryRef>>,
    /// The manifest's rules, of which `hide` ones make paths absent for every reader.
    policy: Arc<super::call::policy::Policy>,
    /// Ancestors of discovered entries seen to be indexable (bounded; see `note_ancestors`).
    shown: Mutex<HashSet<EntryRef>>,
    /// The journal, for what a run offers (`undo` on a working tree's change).
    journal: Arc<dyn crate::state::Journal>,
}

/// What a successful call did to the world: its `result` text, the world paths it
/// discovered, the nodes it changed and the change feed's events.
pub(super) struct Effect {
    pub text: String,
    pub discovered: Vec<String>,
    pub changed: Vec<NodeId>,
    pub events: Vec<Event>,
}

impl Entries {
    pub(super) fn new(
        hosts: Vec<Mounted>,
        mount_point: PathBuf,
        known: Known,
        policy: Arc<super::call::policy::Policy>,
        journal: Arc<dyn crate::state::Journal>,
    ) -> Entries {
        Entries {
            journal,
            hosts,
            mount_point,
            ops_cache: TtlCache::new(OPS_CACHE, 1024),
            infos: TtlCache::new(INFO_CACHE, INFO_CACHE_MAX),
            mtimes: TtlCache::new(INFO_CACHE, INFO_CACHE_MAX),
            bodies: TtlCache::new(BODY_CACHE, 20_000),
            gone: TtlCache::new(GONE_KEEP, 4096),
            known,
            unindexed: Mutex::new(HashSet::new()),
            policy,
            shown: Mutex::new(HashSet::new()),
        }
    }

    pub fn hosts(&self) -> &[Mounted] {
        &self.hosts
    }

    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    pub(super) fn known(&self) -> &Known {
        &self.known
    }

    /// Whether a listing gave only the short form of `e`'s description.
    pub(super) fn is_partial(&self, e: &EntryRef) -> bool {
        self.infos.get(e).is_some_and(|i| i.partial)
    }

    /// The world changed (a call, a host, another mount): every cached answer about
    /// entries (op lists, infos, times, bodies) may differ now.
    pub(super) fn forget(&self) {
        self.ops_cache.clear();
        self.infos.clear();
        self.mtimes.clear();
        self.bodies.clear();
    }

    pub(super) fn host(&self, entry: &EntryRef) -> WorldResult<&Mounted> {
        self.hosts
            .get(entry.host)
            .ok_or_else(|| WorldError::not_found("no such host"))
    }

    /// The world path of the entry at `path` of `host`, as ops and runs print it: for a
    /// working tree the path itself with `@` (`/files/src/main.rs@`, the root `/files@`),
    /// names exact; elsewhere the entry's folder (`/tracker/issues/42`), names escaped.
    pub(super) fn entry_path(&self, host: usize, path: &[String]) -> String {
        if self.is_tree(host) {
            return format!("{}@", self.object_path(host, path));
        }
        let mut segs: Vec<String> = self
            .hosts
            .get(host)
            .map(|m| m.path.clone())
            .unwrap_or_default();
        segs.extend(path.iter().map(|s| names::escape(s)));
        format!("/{}", segs.join("/"))
    }

    /// The working tree host and tree path of an entry path (`/files/src/a.rs@`).
    pub(super) fn tree_entry(&self, world_path: &str) -> Option<(usize, Vec<String>)> {
        let base = world_path.strip_suffix('@')?;
        for (h, m) in self.hosts.iter().enumerate() {
            if m.host.tree().is_none() {
                continue;
            }
            let root = format!("/{}", m.path.join("/"));
            if base == root {
                return Some((h, Vec::new()));
            }
            if let Some(rest) = base.strip_prefix(&format!("{root}/")) {
                return Some((h, rest.split('/').map(str::to_string).collect()));
            }
        }
        None
    }

    /// Whether the host at `host` is a working tree (`Host::tree`).
    pub(super) fn is_tree(&self, host: usize) -> bool {
        self.hosts
            .get(host)
            .is_some_and(|m| m.host.tree().is_some())
    }

    /// The world path of the object at `path` of `host` (`/files/src/main.rs`): where it
    /// is, which hide rules and a files host's path rules match.
    pub(super) fn object_path(&self, host: usize, path: &[String]) -> String {
        if !self.is_tree(host) {
            return self.entry_path(host, path);
        }
        let mut segs: Vec<&str> = self
            .hosts
            .get(host)
            .map(|m| m.path.iter().map(String::as_str).collect())
            .unwrap_or_default();
        segs.extend(path.iter().map(String::as_str));
        format!("/{}", segs.join("/"))
    }

    /// Whether a `hide` rule makes the entry absent for every reader.
    pub(super) fn is_hidden(&self, e: &EntryRef) -> bool {
        self.hides_path(&self.object_path(e.host, &e.path))
    }

    /// Whether any `hide` rule exists (nothing to check otherwise).
    pub(super) fn policy_hides(&self) -> bool {
        self.policy.hides_any()
    }

    /// Whether a `hide` rule matches the world path `path`.
    pub(super) fn hides_path(&self, path: &str) -> bool {
        self.policy.hides_any() && self.policy.hiding(path.trim_start_matches('/')).is_some()
    }

    /// `ENTRY/ops/NAME` (no leading `/`), the op's path the policy's rules match.
    pub(super) fn op_subject(&self, e: &EntryRef, op: &str) -> String {
        let base = self.entry_path(e.host, &e.path);
        match base.trim_start_matches('/') {
            "" => format!("ops/{op}"),
            base => format!("{base}/ops/{op}"),
        }
    }

    /// The names the policy's rules are matched against for `op` acting at `e`: its op
    /// path, and for a host whose entries are files, the file's own path (`files/a/b`,
    /// where `files/a/**` covers it); `subtree`: everything below `e` is acted on too.
    pub(super) fn subjects(
        &self,
        e: &EntryRef,
        op: &str,
        subtree: bool,
    ) -> super::call::policy::Subjects {
        let mut names = vec![self.op_subject(e, op)];
        let files = self.is_tree(e.host);
        let path = self
            .object_path(e.host, &e.path)
            .trim_start_matches('/')
            .to_string();
        if files {
            names.push(path.clone());
        }
        super::call::policy::Subjects {
            names,
            within: subtree.then_some(path),
        }
    }

    /// Absolute path in the mounted file system.
    pub fn absolute(&self, world_path: &str) -> String {
        let mount = self.mount_point.display().to_string();
        let mount = mount.trim_end_matches('/');
        if world_path == "/" {
            format!("{mount}/")
        } else {
            format!("{mount}{world_path}")
        }
    }

    /// Add an entry to the known world, with whether it is in the indexable range.
    pub(super) fn remember(&self, e: &EntryRef, info: &host::EntryInfo) {
        // A hidden entry is known to nobody.
        if self.is_hidden(e) {
            return;
        }
        let mut indexable = info.indexable;
        if let Ok(mut hidden) = self.unindexed.lock() {
            if !info.indexable {
                hidden.insert(e.clone());
            }
            indexable = indexable
                && !(1..e.path.len())
                    .any(|n| hidden.contains(&EntryRef::new(e.host, &e.path[..n])));
        }
        self.known.record(KnownEntry {
            path: self.object_path(e.host, &e.path),
            reference: info.reference.clone(),
            description: crate::secrets::scrub(&info.description).into_owned(),
            indexable,
        });
    }

    /// What the host says of an entry, reused for a moment after a listing or lookup said
    /// it (`None`: it does not exist; never cached).
    pub(super) fn entry_info(&self, e: &EntryRef) -> WorldResult<Option<host::EntryInfo>> {
        self.reused(&self.infos, e, |h| h.entry(&e.path))
    }

    /// What the host says of an entry with its whole description: a listing's short form
    /// (`EntryInfo::partial`) is replaced by what `Host::entry` says now.
    pub(super) fn full_info(&self, e: &EntryRef) -> WorldResult<Option<host::EntryInfo>> {
        match self.entry_info(e)? {
            Some(info) if info.partial => {
                let full = self.host(e)?.host.entry(&e.path)?;
                if let Some(f) = &full {
                    self.note_info(e, f);
                }
                Ok(full)
            }
            other => Ok(other),
        }
    }

    /// What `cache` holds for `e`, else what `ask` gets from its host, kept when the host's
    /// answers may be reused (`keeps_infos`; `None` is never kept).
    pub(super) fn reused<T: Clone>(
        &self,
        cache: &TtlCache<EntryRef, T>,
        e: &EntryRef,
        ask: impl FnOnce(&dyn Host) -> host::HostResult<Option<T>>,
    ) -> WorldResult<Option<T>> {
        if let Some(v) = cache.get(e) {
            return Ok(Some(v));
        }
        let found = ask(self.host(e)?.host.as_ref())?;
        if let Some(v) = &found {
            self.keep(cache, e, v);
        }
        Ok(found)
    }

    /// Keep `v` in `cache` for `e` when its host's answers may be reused (`keeps_infos`).
    fn keep<T: Clone>(&self, cache: &TtlCache<EntryRef, T>, e: &EntryRef, v: &T) {
        if self.keeps_infos(e) {
            cache.insert(e.clone(), v.clone());
        }
    }

    /// Keep what a host just said of an entry (see `entry_info`), for hosts that report
    /// every change (see `keeps_infos`): others change behind the mount's back (GitHub's
    /// rate limit, an unwatched directory) and are asked each time.
    pub(super) fn note_info(&self, e: &EntryRef, info: &host::EntryInfo) {
        self.keep(&self.infos, e, info);
    }

    /// Whether what `e`'s host says of it may be reused for a moment: only for hosts that
    /// report every change (their kernel cache lifetime is long, see `REPORTED_TTL`).
    pub(super) fn keeps_infos(&self, e: &EntryRef) -> bool {
        self.hosts
            .get(e.host)
            .is_some_and(|m| m.host.cache_ttl() >= REPORTED_TTL)
    }

    /// A call can discover an entry before anyone looked up its ancestors: ask the host
    /// about those not seen yet, so an entry under a non-indexable folder stays out of the
    /// indexable range.
    pub(super) fn note_ancestors(&self, e: &EntryRef) {
        const SHOWN_MAX: usize = 100_000;
        let Some(m) = self.hosts.get(e.host) else {
            return;
        };
        for n in 1..e.path.len() {
            let prefix = EntryRef::new(e.host, &e.path[..n]);
            if self.unindexed.lock().is_ok_and(|h| h.contains(&prefix)) {
                return;
            }
            if self.shown.lock().is_ok_and(|s| s.contains(&prefix)) {
                continue;
            }
            match m.host.entry(&prefix.path) {
                Ok(Some(info)) if !info.indexable => {
                    if let Ok(mut h) = self.unindexed.lock() {
                        h.insert(prefix);
                    }
                    return;
                }
                Ok(Some(_)) => {
                    if let Ok(mut s) = self.shown.lock() {
                        if s.len() >= SHOWN_MAX {
                            s.clear();
                        }
                        s.insert(prefix);
                    }
                }
                _ => return,
            }
        }
    }

    /// The host entry at a world path (`tracker/issues/42`), asking its host once rather than
    /// looking up every ancestor (a hit deep in a large directory tree stays cheap).
    pub(super) fn entry_at(&self, world_path: &str) -> Option<EntryRef> {
        let e = self.entry_ref_at(world_path)?;
        self.hosts
            .get(e.host)?
            .host
            .exists(&e.path)
            .ok()?
            .then_some(e)
    }

    /// The host entry a world path names, without asking whether it exists.
    pub(super) fn entry_ref_at(&self, world_path: &str) -> Option<EntryRef> {
        let mut segs: Vec<&str> = world_path.split('/').filter(|s| !s.is_empty()).collect();
        // A working tree's entry is its path with `@` (`files/a.txt@`, `files@`).
        let entry_form = segs.last().is_some_and(|l| l.ends_with('@'));
        let unmarked = segs.last().map(|l| l.strip_suffix('@').unwrap_or(l));
        let tree_at = |segs: &[&str]| {
            self.hosts
                .iter()
                .enumerate()
                .filter(|(_, m)| m.host.tree().is_some())
                .filter(|(_, m)| segs.len() >= m.path.len() && segs[..m.path.len()] == m.path[..])
                .max_by_key(|(_, m)| m.path.len())
                .map(|(i, m)| (i, m.path.len()))
        };
        if entry_form {
            if let (Some(last), Some(u)) = (segs.last_mut(), unmarked) {
                *last = u;
            }
            if let Some((host, n)) = tree_at(&segs) {
                let path = segs[n..].iter().map(|s| s.to_string()).collect::<Vec<_>>();
                return Some(EntryRef::new(host, path));
            }
            return None;
        }
        let (host, m) = self
            .hosts
            .iter()
            .enumerate()
            .filter(|(_, m)| segs.len() >= m.path.len() && segs[..m.path.len()] == m.path[..])
            .max_by_key(|(_, m)| m.path.len())?;
        // A working tree's names are exact; other hosts' are escaped.
        let exact = m.host.tree().is_some();
        let path = segs[m.path.len()..]
            .iter()
            .map(|s| {
                if exact {
                    Some(s.to_string())
                } else {
                    names::unescape(s)
                }
            })
            .collect::<Option<Vec<String>>>()?;
        Some(EntryRef::new(host, path))
    }

    /// The ops of a target. A walk asks for them once per op file, so they are kept
    /// briefly (and dropped after every call that changed something).
    pub fn ops(&self, target: &Target) -> WorldResult<OpList> {
        let ops: WorldResult<OpList> = self.ops_cache.get_or_try(target.clone(), || {
            Ok(Arc::new(match target {
                Target::Root => root_ops::root_ops(),
                Target::Entry(e) if e.path.is_empty() && self.is_tree(e.host) => {
                    let mut ops = self.host(e)?.host.ops(&e.path)?;
                    // The host's own op of a name wins (an overlay's `diff`).
                    let own: Vec<String> = ops.iter().map(|o| o.name.clone()).collect();
                    ops.extend(
                        super::undo::root_ops()
                            .into_iter()
                            .filter(|o| !own.contains(&o.name)),
                    );
                    ops
                }
                Target::Entry(e) => self.host(e)?.host.ops(&e.path)?,
                Target::Run(id) => {
                    let mut ops = live::run_ops();
                    let undoable =
                        self.journal.get(*id).ok().flatten().is_some_and(|r| {
                            r.status == "ok" && self.tree_entry(&r.path).is_some()
                        });
                    if undoable {
                        ops.push(super::undo::undo_op());
                    }
                    ops
                }
            }))
        });
        match (ops, target) {
            // Never cached: the host's own answer comes back with the entry.
            (Err(err), Target::Entry(e)) if err.kind == ErrorKind::NotFound => {
                self.gone_ops(e).ok_or(err)
            }
            (other, _) => other,
        }
    }

    /// The ops of an entry a call of its own removed: those that ran, each saying so, so
    /// that `ops/NAME/result` and `ops/NAME/runs/` stay readable at the path.
    fn gone_ops(&self, e: &EntryRef) -> Option<OpList> {
        let ran = self.gone.get(e)?;
        Some(Arc::new(
            ran.iter()
                .map(|op| host::OpSpec {
                    output: None,
                    name: op.clone(),
                    description: format!(
                        "{op}: this entry no longer exists (a call of {op} removed it); its result and runs stay readable here for a while"
                    ),
                    schema: serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
                })
                .collect(),
        ))
    }

    /// Whether `e` is an entry a call of its own removed (and the host has no entry there).
    pub(super) fn is_gone(&self, e: &EntryRef) -> bool {
        self.gone.get(e).is_some()
    }

    /// After a call on `e` that succeeded: when the entry is no longer there, remember it.
    pub(super) fn note_if_gone(&self, e: &EntryRef, op: &str) {
        if e.path.is_empty() {
            return;
        }
        let Ok(m) = self.host(e) else { return };
        if !matches!(m.host.exists(&e.path), Ok(false)) {
            return;
        }
        let mut ran: Vec<String> = self.gone.get(e).map(|r| r.to_vec()).unwrap_or_default();
        if !ran.iter().any(|o| o == op) {
            ran.push(op.to_string());
        }
        self.gone.insert(e.clone(), Arc::new(ran));
    }

    pub(super) fn op_spec(&self, target: &Target, op: &str) -> WorldResult<OpSpec> {
        self.ops(target)?
            .iter()
            .find(|o| o.name == op)
            .cloned()
            .ok_or_else(|| WorldError::not_found(format!("no op {op:?} here")))
    }

    /// When an entry last changed, as its host knows it. A host that cannot say now (a
    /// server restarting) costs the time, never the `stat`: the mount's start is shown.
    pub(super) fn entry_modified(&self, e: &EntryRef) -> WorldResult<Option<SystemTime>> {
        if let Some(t) = self.mtimes.get(e) {
            return Ok(t);
        }
        // What the host just said of the entry says it too (see `Host::modified`).
        if let Some(t) = self.infos.get(e).and_then(|i| i.modified) {
            return Ok(Some(t));
        }
        match self.host(e)?.host.modified(&e.path) {
            Ok(t) => {
                // Every node of the entry shows it: a walk asks once per entry.
                self.keep(&self.mtimes, e, &t);
                Ok(t)
            }
            Err(err) => {
                tracing::debug!(path = ?e.path, "no modification time: {err}");
                Ok(None)
            }
        }
    }

    /// The body of an entry, which must have one.
    pub(super) fn body_of(&self, e: &EntryRef) -> WorldResult<Body> {
        self.entry_body(e)?
            .ok_or_else(|| WorldError::not_found("this entry has no body (any more)"))
    }

    /// What the host gives as the entry's body, reused for a moment (see `keeps_infos`).
    pub(super) fn entry_body(&self, e: &EntryRef) -> WorldResult<Option<Body>> {
        self.reused(&self.bodies, e, |h| h.body(&e.path))
    }

    /// What a listing of `e` needs: its body (kept like `entry_body`; an error of its own)
    /// and its children, in one read of the host when the body is not kept already.
    pub(super) fn body_and_children(
        &self,
        e: &EntryRef,
    ) -> WorldResult<(WorldResult<Option<Body>>, Vec<host::Child>)> {
        let host = &self.host(e)?.host;
        if let Some(body) = self.bodies.get(e) {
            return Ok((Ok(Some(body)), host.children(&e.path)?));
        }
        let (body, children) = host.body_and_children(&e.path)?;
        if let Ok(Some(b)) = &body {
            self.keep(&self.bodies, e, b);
        }
        Ok((body.map_err(WorldError::from), children))
    }

    /// The whole body of an entry (a ranged one read piece by piece).
    pub fn body_bytes(&self, e: &EntryRef) -> WorldResult<Vec<u8>> {
        let body = self.body_of(e)?;
        if let Some(bytes) = body.bytes {
            return Ok(bytes.to_vec());
        }
        let host = &self.host(e)?.host;
        let mut out = Vec::new();
        loop {
            let piece = host.read_body(&e.path, out.len() as u64, 1 << 20)?;
            if piece.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&piece);
        }
    }

    /// What a successful call did: its result text with the entries it found (each
    /// remembered in the known world), and the nodes and events of what it changed.
    pub(super) fn took_effect(&self, outcome: &RoutedOutcome) -> Effect {
        let mut text = outcome.result.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let mut discovered = Vec::new();
        let mut found: Vec<(usize, Vec<String>)> = outcome.discovered.clone();
        for p in outcome.elsewhere.iter().filter(|p| !self.hides_path(p)) {
            match self.entry_at(p) {
                Some(e) => found.push((e.host, e.path.to_vec())),
                None => tracing::debug!(path = p, "a found path is not an entry"),
            }
        }
        found.retain(|(h, rel)| !self.is_hidden(&EntryRef::new(*h, rel.as_slice())));
        for (h, rel) in &found {
            let world_path = self.object_path(*h, rel);
            let info = self
                .hosts
                .get(*h)
                .and_then(|m| m.host.entry(rel).ok().flatten());
            let description = match &info {
                Some(i) => {
                    let e = EntryRef::new(*h, rel.clone());
                    self.note_ancestors(&e);
                    self.remember(&e, i);
                    i.description.clone()
                }
                None => String::new(),
            };
            text.push_str(&format!(
                "{}\t{}\n",
                names::shown(&self.absolute(&world_path)),
                names::shown(&description)
            ));
            discovered.push(world_path);
        }
        let mut events: Vec<Event> = discovered
            .iter()
            .map(|p| Event {
                kind: "discovered".into(),
                path: p.clone(),
                ..Default::default()
            })
            .collect();
        let (mut changed, change_events) = self.changed_entries(&outcome.changed);
        events.extend(change_events);
        // A new entry changes its parent's listing (hosts need not say so).
        for (h, rel) in &found {
            if let Some((_, parent)) = rel.split_last() {
                changed.push(NodeId::Entry(EntryRef::new(*h, parent)));
            }
            // A name the kernel may hold for it (the removed one's, made again) goes.
            let e = EntryRef::new(*h, rel.as_slice());
            changed.push(NodeId::EntryName(e.clone()));
            // Made again where a call had removed one: what the kernel holds of the
            // removed one (its ops that ran, and nothing else) goes.
            if self.is_gone(&e) {
                self.gone.forget(&e);
                self.entry_changed_nodes(*h, rel, &mut changed);
            }
        }
        Effect {
            text,
            discovered,
            changed,
            events,
        }
    }

    /// The nodes and change-feed events of entries that changed.
    pub(super) fn changed_entries(
        &self,
        entries: &[(usize, Vec<String>)],
    ) -> (Vec<NodeId>, Vec<Event>) {
        let mut changed = Vec::new();
        let mut events = Vec::new();
        for (h, p) in entries {
            // A host's root is never removed: not asking spares it.
            let gone = !p.is_empty()
                && self
                    .hosts
                    .get(*h)
                    .is_some_and(|m| matches!(m.host.exists(p), Ok(false)));
            events.push(Event {
                kind: if gone { "removed" } else { "changed" }.into(),
                path: self.object_path(*h, p),
                ..Default::default()
            });
            self.entry_changed_nodes(*h, p, &mut changed);
            if gone {
                changed.push(NodeId::EntryName(EntryRef::new(*h, p.as_slice())));
            }
        }
        (changed, events)
    }

    /// The kernel's nodes of a working tree that a change at the tree path `path` (made by
    /// an explicit op, behind the kernel's back) makes stale: the node there, its folder,
    /// and its name in its folder (the op may have replaced it with another file).
    fn tree_changed_nodes(&self, host: usize, path: &[String], out: &mut Vec<NodeId>) {
        let Some(tree) = self.hosts.get(host).and_then(|m| m.host.tree()) else {
            return;
        };
        let os: Vec<std::ffi::OsString> = path.iter().map(std::ffi::OsString::from).collect();
        if let Some(node) = tree.node_at(&os) {
            out.push(NodeId::Tree(TreeRef { host, node }));
        }
        if let Some((name, parent)) = os.split_last() {
            if let Some(node) = tree.node_at(parent) {
                let dir = TreeRef { host, node };
                out.push(NodeId::Tree(dir));
                out.push(NodeId::TreeName(dir, name.clone()));
            }
        }
    }

    /// The nodes whose kernel copies an entry's change makes stale.
    pub(super) fn entry_changed_nodes(&self, h: usize, p: &[String], changed: &mut Vec<NodeId>) {
        self.tree_changed_nodes(h, p, changed);
        let e = EntryRef::new(h, p);
        let target = Target::Entry(e.clone());
        changed.push(NodeId::Info(target.clone(), InfoFile::Description));
        changed.push(NodeId::Body(e.clone()));
        // The set of ops may change with the entry's state (a server's new tools).
        changed.push(NodeId::Ops(target.clone()));
        // The entry's guards depend on its state: their sizes may have changed.
        if let Ok(ops) = self.ops(&target) {
            for o in ops.iter() {
                changed.push(NodeId::OpFile(
                    target.clone(),
                    intern(&o.name),
                    OpFile::Guard,
                ));
            }
        }
        if p.is_empty() {
            // The root README quotes every host's root description.
            changed.push(NodeId::Readme);
        } else {
            // A child's description shows in its parent's listing (titles, counts),
            // and a removed child leaves it: the parent changed too.
            changed.push(NodeId::Entry(EntryRef::new(h, &p[..p.len() - 1])));
        }
        changed.push(NodeId::Entry(e));
    }
}
