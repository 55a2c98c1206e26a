//! What files contain and how the kernel may cache them: attributes, bytes, links, and the
//! generated texts of `.wip/`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::error::{ErrorKind, WorldError, WorldResult};
use super::node::*;
use super::root_ops::event_line;
use super::{line, readme, World};
use super::{EVENTS_SHOWN, KNOWN_SHOWN, STABLE_TTL};
use crate::calendar::parse_iso;
use crate::host::names;

use crate::host::{Readiness, Session};
use crate::secrets::scrub;
use crate::state::{self as journal};

/// How many runs in flight `.wip/status` names (all are in `.wip/runs`).
const STATUS_RUNS: usize = 20;
/// `12.3 KiB`: a size for people.
fn human_bytes(n: i64) -> String {
    crate::host::text::bytes(u64::try_from(n).unwrap_or(0))
}

/// What one open of a file reads: its content rendered once and served by offset, so a
/// large `result` read in small chunks is rendered once, not once per chunk.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub bytes: Arc<[u8]>,
    /// A body the host reads by offset: `bytes` is empty, reads go to the host.
    ranged: bool,
    /// For the change feed: the cursor of its last event, to append what follows, and
    /// how many events it shows.
    events_cursor: Option<i64>,
    events_shown: usize,
}

impl World {
    /// The content of a file node as one open sees it.
    pub fn snapshot(&self, node: &NodeId, session: Session) -> WorldResult<Snapshot> {
        if let NodeId::WipFile(WipFile::Events) = node {
            let events = self.journal.events_after(self.events_start, EVENTS_SHOWN)?;
            let text: String = events.iter().map(event_line).collect();
            return Ok(Snapshot {
                bytes: Arc::from(text.into_bytes()),
                ranged: false,
                events_cursor: Some(events.last().map(|e| e.cursor).unwrap_or(self.events_start)),
                events_shown: events.len(),
            });
        }
        if let NodeId::RunContentFile(..) = node {
            // Read by offset from its file (see `read_at`), never held whole.
            return Ok(Snapshot {
                bytes: Arc::from(Vec::new()),
                ranged: true,
                events_cursor: None,
                events_shown: 0,
            });
        }
        if let NodeId::Body(e) = node {
            let body = self.entries.body_of(e)?;
            return Ok(Snapshot {
                ranged: body.bytes.is_none(),
                bytes: body.bytes.unwrap_or_else(|| Arc::from(Vec::new())),
                events_cursor: None,
                events_shown: 0,
            });
        }
        Ok(Snapshot {
            bytes: Arc::from(self.read(node, session)?),
            ranged: false,
            events_cursor: None,
            events_shown: 0,
        })
    }

    /// An append-only file (the change feed) read past its end, as `tail -f` does: the
    /// snapshot with what was appended since, or `None` if nothing was.
    pub fn extend(&self, snap: &Snapshot) -> WorldResult<Option<Snapshot>> {
        let Some(cursor) = snap.events_cursor else {
            return Ok(None);
        };
        let room = EVENTS_SHOWN.saturating_sub(snap.events_shown);
        let events = self.journal.events_after(cursor, room)?;
        let Some(last) = events.last() else {
            return Ok(None);
        };
        let mut bytes = snap.bytes.to_vec();
        for e in &events {
            bytes.extend_from_slice(event_line(e).as_bytes());
        }
        Ok(Some(Snapshot {
            bytes: Arc::from(bytes),
            ranged: false,
            events_cursor: Some(last.cursor),
            events_shown: snap.events_shown + events.len(),
        }))
    }

    // ---- attributes and content ----------------------------------------------------

    /// Caching rule for what a target's host shows.
    fn target_caching(&self, target: &Target) -> Caching {
        match target {
            Target::Root => Caching::Stable(STABLE_TTL),
            // A run's description moves while it runs.
            Target::Run(_) => Caching::Direct(Duration::ZERO),
            Target::Entry(e) => Caching::Stable(
                self.entries
                    .hosts()
                    .get(e.host)
                    .map(|m| m.host.cache_ttl())
                    .unwrap_or(STABLE_TTL),
            ),
        }
    }

    /// A node's file type, known from the node alone (a listing needs no attributes).
    pub fn kind(&self, node: &NodeId) -> NodeKind {
        match node {
            NodeId::Tree(t) => match self.tree_stat(*t).map(|s| s.kind) {
                Ok(crate::host::tree::Kind::Dir) => NodeKind::Dir,
                Ok(crate::host::tree::Kind::Symlink) => NodeKind::Symlink,
                _ => NodeKind::File,
            },
            NodeId::Root
            | NodeId::Branch(_)
            | NodeId::Wip
            | NodeId::TreePaths(_)
            | NodeId::Discovered(_)
            | NodeId::Entry(_)
            | NodeId::Ops(_)
            | NodeId::Op(..)
            | NodeId::Runs(..)
            | NodeId::Run(..)
            | NodeId::RunContent(_) => NodeKind::Dir,
            NodeId::DiscoveredLink(..) | NodeId::OpsLink(_) => NodeKind::Symlink,
            _ => NodeKind::File,
        }
    }

    pub fn attr(&self, node: &NodeId, session: Session) -> WorldResult<NodeAttr> {
        let dir = |caching, modified| NodeAttr {
            kind: NodeKind::Dir,
            size: 0,
            writable: false,
            caching,
            modified,
        };
        Ok(match node {
            NodeId::Root | NodeId::Branch(_) | NodeId::Wip => {
                dir(Caching::Stable(STABLE_TTL), None)
            }
            NodeId::TreePaths(h) => dir(Caching::Stable(self.tree_ttl(*h)), None),
            // What an adapter without the tree's own attributes sees (the kernel is told
            // the backing file's, see `tree_stat`).
            NodeId::Tree(t) => {
                let st = self
                    .tree_stat(*t)
                    .map_err(|e| WorldError::from_io("stat", e))?;
                NodeAttr {
                    kind: self.kind(node),
                    size: st.size,
                    writable: st.kind == crate::host::tree::Kind::File,
                    caching: Caching::Stable(self.tree_ttl(t.host)),
                    modified: Some(st.mtime),
                }
            }
            NodeId::Entry(e) => {
                let caching = self.target_caching(&Target::Entry(e.clone()));
                dir(caching, self.entries.entry_modified(e)?)
            }
            NodeId::Body(e) => {
                let body = self.entries.body_of(e)?;
                NodeAttr {
                    kind: NodeKind::File,
                    size: body.size,
                    writable: body
                        .write
                        .as_ref()
                        .is_some_and(|w| self.calls.may_run(&Target::Entry(e.clone()), &w.op)),
                    caching: self.target_caching(&Target::Entry(e.clone())),
                    modified: match body.modified {
                        Some(t) => Some(t),
                        None => self.entries.entry_modified(e)?,
                    },
                }
            }
            NodeId::Ops(t) | NodeId::Op(t, _) => {
                dir(self.target_caching(t), self.target_modified(t)?)
            }
            // Its listing is invalidated with every call of the op.
            NodeId::Runs(t, op) => dir(
                Caching::Stable(STABLE_TTL),
                match self.journal.latest(&self.calls.target_path(t), op)? {
                    Some(id) => self.calls.run_time(id)?,
                    None => None,
                },
            ),
            NodeId::Run(_, _, id) | NodeId::Discovered(id) | NodeId::RunContent(id) => {
                dir(Caching::Stable(STABLE_TTL), self.calls.run_time(*id)?)
            }
            NodeId::RunContentFile(id, name) => NodeAttr {
                kind: NodeKind::File,
                size: std::fs::metadata(self.calls.content_file(*id, name))
                    .map(|m| m.len())
                    .map_err(|e| WorldError::not_found(format!("content {name}: {e}")))?,
                writable: false,
                caching: Caching::Stable(STABLE_TTL),
                modified: self.calls.run_time(*id)?,
            },
            NodeId::OpsLink(t) => NodeAttr {
                kind: NodeKind::Symlink,
                size: super::tree::OPS_DIR.len() as u64,
                writable: false,
                caching: Caching::Stable(STABLE_TTL),
                modified: self.target_modified(t)?,
            },
            NodeId::DiscoveredLink(id, _) => NodeAttr {
                kind: NodeKind::Symlink,
                size: self.readlink(node)?.len() as u64,
                writable: false,
                caching: Caching::Stable(STABLE_TTL),
                modified: self.calls.run_time(*id)?,
            },
            NodeId::OpFile(_, _, OpFile::Call) => NodeAttr {
                kind: NodeKind::File,
                size: 0,
                writable: true,
                caching: self.caching(node)?,
                modified: None,
            },
            _ => {
                let caching = self.file_caching(node)?;
                NodeAttr {
                    kind: NodeKind::File,
                    size: self.read(node, session)?.len() as u64,
                    writable: false,
                    caching,
                    modified: self.file_modified(node, session)?,
                }
            }
        })
    }

    /// A node's attributes for a listing that carries them (`readdirplus`), or `None`
    /// when they cost more than the listing should: a description a host gave only in
    /// short form (its size needs the whole one). The listing then names such a node
    /// without attributes, and whoever looks at it gets them then.
    pub fn listing_attr(&self, node: &NodeId) -> WorldResult<Option<NodeAttr>> {
        if let NodeId::Info(Target::Entry(e), InfoFile::Description) = node {
            if self.entries.is_partial(e) {
                return Ok(None);
            }
        }
        self.attr(node, Session::NONE).map(Some)
    }

    fn target_modified(&self, t: &Target) -> WorldResult<Option<SystemTime>> {
        match t {
            Target::Root => Ok(None),
            Target::Entry(e) => self.entries.entry_modified(e),
            Target::Run(id) => self.calls.run_time(*id),
        }
    }

    /// The time of a generated file: when what it shows last changed.
    fn file_modified(&self, node: &NodeId, session: Session) -> WorldResult<Option<SystemTime>> {
        Ok(match node {
            NodeId::OpFile(t, op, OpFile::Result) => match self.calls.result_run(t, op, session)? {
                Some(id) => self.calls.run_time(id)?,
                None => None,
            },
            NodeId::Info(t, _) | NodeId::OpFile(t, _, _) => self.target_modified(t)?,
            NodeId::RunFile(id, _) => self.calls.run_time(*id)?,
            NodeId::WipFile(WipFile::Events) => self
                .journal
                .last_event_at(self.events_start)?
                .as_deref()
                .and_then(parse_iso),
            NodeId::WipFile(WipFile::Log) => match self.journal.recent_brief(1, 1)?.first() {
                Some(run) => parse_iso(run.finished.as_deref().unwrap_or(&run.started)),
                None => None,
            },
            _ => None,
        })
    }

    /// Bytes `offset..offset+size` of what an open file shows: from its snapshot, or, for
    /// a body read by offset, from the host (a large file is never held whole).
    pub fn read_at(
        &self,
        node: &NodeId,
        snap: &Snapshot,
        offset: u64,
        size: u32,
    ) -> WorldResult<Vec<u8>> {
        if snap.ranged {
            if let NodeId::RunContentFile(id, name) = node {
                return self
                    .calls
                    .read_content(*id, name, offset, size)
                    .map_err(|e| WorldError::backend(format!("content {name} of run {id}: {e}")));
            }
            if let NodeId::Body(e) = node {
                return Ok(self
                    .entries
                    .host(e)?
                    .host
                    .read_body(&e.path, offset, size)?);
            }
        }
        let bytes = &snap.bytes;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let end = start.saturating_add(size as usize).min(bytes.len());
        Ok(bytes[start..end].to_vec())
    }

    /// How the kernel may cache a file, without computing its content.
    pub fn caching(&self, node: &NodeId) -> WorldResult<Caching> {
        match node {
            NodeId::OpFile(t, _, OpFile::Call) => Ok(Caching::Direct(self.target_caching(t).ttl())),
            _ => self.file_caching(node),
        }
    }

    fn file_caching(&self, node: &NodeId) -> WorldResult<Caching> {
        Ok(match node {
            NodeId::Info(t, _) => self.target_caching(t),
            NodeId::Body(e) => self.target_caching(&Target::Entry(e.clone())),
            NodeId::OpFile(t, _, OpFile::Description | OpFile::Schema | OpFile::OutputSchema) => {
                self.target_caching(t)
            }
            // Written once, before its run was recorded.
            NodeId::RunContentFile(..) => Caching::Stable(STABLE_TTL),
            // Guards and results change with calls, which invalidate them.
            NodeId::OpFile(t, ..) => Caching::Direct(self.target_caching(t).ttl()),
            NodeId::WipFile(
                WipFile::Log
                | WipFile::Stats
                | WipFile::Status
                | WipFile::Runs
                | WipFile::Known
                | WipFile::Events
                | WipFile::Pending,
            ) => Caching::Direct(STABLE_TTL),
            // It quotes every host's root description, which may change on its own (a
            // server starting, an index refreshing).
            NodeId::Readme => Caching::Direct(STABLE_TTL),
            NodeId::RunFile(id, _) => {
                // A run's files are final once it finished (a pending run is not).
                if matches!(
                    self.calls.run(*id)?.status.as_str(),
                    journal::RUNNING | journal::PENDING
                ) {
                    Caching::Direct(Duration::ZERO)
                } else {
                    Caching::Stable(STABLE_TTL)
                }
            }
            _ => Caching::Stable(STABLE_TTL),
        })
    }

    /// The bytes of a file node, as `session` sees them.
    pub fn read(&self, node: &NodeId, session: Session) -> WorldResult<Vec<u8>> {
        if let NodeId::Body(e) = node {
            return self.entries.body_bytes(e);
        }
        if let NodeId::RunContentFile(id, name) = node {
            return std::fs::read(self.calls.content_file(*id, name))
                .map_err(|e| WorldError::backend(format!("content {name} of run {id}: {e}")));
        }
        let text = match node {
            NodeId::Readme => readme::render(self),
            NodeId::BranchDescription(prefix) => {
                let held: Vec<String> = self
                    .entries
                    .hosts()
                    .iter()
                    .filter(|m| m.path.len() > prefix.len() && m.path.starts_with(prefix))
                    .map(|m| format!("{} ({})", m.path[prefix.len()..].join("/"), m.kind))
                    .collect();
                line(&format!(
                    "Folder of {}: {}",
                    if held.len() == 1 { "one host" } else { "hosts" },
                    held.join(", ")
                ))
            }
            NodeId::Info(Target::Root, InfoFile::Description) => {
                line(&names::shown(&self.description()))
            }
            NodeId::Info(Target::Root, InfoFile::Ref) => {
                line(&format!("wip://{}", self.settings.name))
            }
            NodeId::Info(Target::Run(id), f) => {
                let run = self.calls.run(*id)?;
                match f {
                    InfoFile::Description => line(&names::shown(&self.calls.run_description(&run))),
                    InfoFile::Ref => line(&self.calls.run_ref(&run)),
                }
            }
            NodeId::Info(Target::Entry(e), f) => {
                let info = match f {
                    InfoFile::Description => self.entries.full_info(e)?,
                    InfoFile::Ref => self.entries.entry_info(e)?,
                }
                .ok_or_else(|| WorldError::not_found("this entry no longer exists"))?;
                match f {
                    InfoFile::Description => line(&names::shown(&self.described(e, &info))),
                    InfoFile::Ref => line(&names::shown(&info.reference)),
                }
            }
            NodeId::OpFile(t, op, f) => {
                let spec = self.entries.op_spec(t, op)?;
                match f {
                    OpFile::Description => line(&spec.description),
                    OpFile::Schema => line(
                        &serde_json::to_string_pretty(&super::call::args::shown_schema(
                            &spec.schema,
                        ))
                        .map_err(|e| WorldError::backend(e.to_string()))?,
                    ),
                    OpFile::Guard => self.calls.guard(t, op)?.render(),
                    OpFile::Call => String::new(),
                    OpFile::Result => self.calls.result_for(t, op, session)?,
                    OpFile::OutputSchema => match &spec.output {
                        Some(o) => line(
                            &serde_json::to_string_pretty(o)
                                .map_err(|e| WorldError::backend(e.to_string()))?,
                        ),
                        None => return Err(WorldError::not_found("this op declares no output")),
                    },
                }
            }
            NodeId::RunFile(id, f) => {
                let run = self.calls.run(*id)?;
                match f {
                    RunFile::Args => line(&run.args),
                    RunFile::Status => line(&run.status),
                    RunFile::Result => self.calls.shown_result(&run),
                    RunFile::Progress => self.calls.progress_text(*id),
                    RunFile::Guard => run.guard,
                    RunFile::Approval => self.calls.approval_text(*id)?,
                    RunFile::Caller => format!(
                        "pid {} · uid {} · session {} · {}\nstarted {}\nfinished {}\n",
                        run.pid,
                        run.uid,
                        run.session,
                        names::shown(&run.command),
                        run.started,
                        run.finished.as_deref().unwrap_or("-")
                    ),
                }
            }
            NodeId::WipFile(WipFile::Log) => self.calls.log_text()?,
            NodeId::WipFile(WipFile::Config) => self.config_text.clone(),
            NodeId::WipFile(WipFile::Pending) => self.calls.pending_text()?,
            NodeId::WipFile(WipFile::Control) => self.calls.control_text(),
            NodeId::WipFile(WipFile::Known) => self.known_text()?,
            NodeId::WipFile(WipFile::Status) => self.status_text()?,
            NodeId::WipFile(WipFile::Runs) => self.calls.runs_text()?,
            NodeId::WipFile(WipFile::Events) => {
                let mut out = String::new();
                for e in self.journal.events_after(self.events_start, EVENTS_SHOWN)? {
                    out.push_str(&event_line(&e));
                }
                out
            }
            NodeId::WipFile(WipFile::Stats) => format!(
                "materialised_nodes {}\ncalls {}\nuptime_s {}\n",
                self.calls.held(),
                self.journal.count()?,
                self.started.elapsed().as_secs()
            ),
            _ => return Err(WorldError::new(ErrorKind::NotSupported, "not a file")),
        };
        // Every text the world prints: no raw control character, no secret of the daemon's.
        Ok(scrub(&names::printable(&text)).into_owned().into_bytes())
    }

    /// Extended attributes of a node: `user.xdg.comment` (what it is: the description)
    /// and `user.wip.ref` (the identity) of the entry it belongs to; an op's own
    /// description on its folder and files.
    pub fn xattrs(&self, node: &NodeId) -> WorldResult<Vec<(&'static str, String)>> {
        Ok(self
            .raw_xattrs(node)?
            .into_iter()
            .map(|(n, v)| (n, scrub(&names::shown(&v)).into_owned()))
            .collect())
    }

    fn raw_xattrs(&self, node: &NodeId) -> WorldResult<Vec<(&'static str, String)>> {
        const COMMENT: &str = "user.xdg.comment";
        const REF: &str = "user.wip.ref";
        let of_target = |t: &Target| -> WorldResult<Vec<(&'static str, String)>> {
            Ok(match t {
                Target::Root => vec![
                    (COMMENT, self.description()),
                    (REF, format!("wip://{}", self.settings.name)),
                ],
                Target::Entry(e) => match self.entries.full_info(e)? {
                    Some(info) => vec![(COMMENT, self.described(e, &info)), (REF, info.reference)],
                    None => Vec::new(),
                },
                Target::Run(id) => {
                    let run = self.calls.run(*id)?;
                    vec![
                        (COMMENT, self.calls.run_description(&run)),
                        (REF, self.calls.run_ref(&run)),
                    ]
                }
            })
        };
        Ok(match node {
            NodeId::Root => of_target(&Target::Root)?,
            NodeId::Entry(e) | NodeId::Body(e) => of_target(&Target::Entry(e.clone()))?,
            NodeId::Info(t, _) | NodeId::Ops(t) => of_target(t)?,
            NodeId::Op(t, op) | NodeId::OpFile(t, op, _) => {
                let mut out = of_target(t)?;
                out.retain(|(n, _)| *n == REF);
                out.insert(0, (COMMENT, self.entries.op_spec(t, op)?.description));
                out
            }
            _ => Vec::new(),
        })
    }

    /// The names `xattrs` gives for a node, without asking any host (`ls -l` and file
    /// managers list them for every file).
    pub fn xattr_names(&self, node: &NodeId) -> &'static [&'static str] {
        match node {
            NodeId::Root
            | NodeId::Entry(_)
            | NodeId::Body(_)
            | NodeId::Info(..)
            | NodeId::Ops(_)
            | NodeId::Op(..)
            | NodeId::OpFile(..) => &["user.xdg.comment", "user.wip.ref"],
            _ => &[],
        }
    }

    /// Target of a `discovered/N` link, relative to the link's folder; `.ops` for `ops`.
    pub fn readlink(&self, node: &NodeId) -> WorldResult<String> {
        if let NodeId::OpsLink(_) = node {
            return Ok(super::tree::OPS_DIR.to_string());
        }
        let NodeId::DiscoveredLink(id, i) = node else {
            return Err(WorldError::new(ErrorKind::NotSupported, "not a symlink"));
        };
        let run = self.calls.run(*id)?;
        let target = run
            .discovered
            .get(i - 1)
            .ok_or_else(|| WorldError::not_found("no such discovered entry"))?;
        // The link lives in <entry>/.ops/<op>/runs/<id>/discovered/.
        let depth = run.path.split('/').filter(|s| !s.is_empty()).count() + 5;
        Ok(format!(
            "{}{}",
            "../".repeat(depth),
            target.trim_start_matches('/')
        ))
    }

    /// An entry's description as the world prints it: the host's words, then, when the tree
    /// shows the entry's name escaped (`ops~`), what it is really called. A working tree
    /// escapes no name, so its entries say nothing of it.
    fn described(&self, e: &EntryRef, info: &crate::host::EntryInfo) -> String {
        let note = match self.tree_root(e.host) {
            Some(_) => None,
            None => e.path.last().and_then(|n| names::escape_note(n)),
        };
        match note {
            Some(note) => format!("{} · {note}", info.description),
            None => info.description.clone(),
        }
    }

    pub fn description(&self) -> String {
        let mut text = self
            .settings
            .description
            .clone()
            .unwrap_or_else(|| format!("World `{}`.", self.settings.name));
        let names: Vec<String> = self
            .entries
            .hosts()
            .iter()
            .map(|m| m.path.join("/"))
            .collect();
        text.push_str(&format!(
            " Hosts: {}. You act as {} ({}).",
            names.join(", "),
            self.identity.user,
            self.identity.role.as_str()
        ));
        text
    }

    /// Hosts still starting in the background: (world path, words).
    pub fn starting_hosts(&self) -> Vec<(String, String)> {
        self.entries
            .hosts()
            .iter()
            .filter_map(|m| match m.host.readiness() {
                Readiness::Starting(w) => Some((m.path.join("/"), w)),
                _ => None,
            })
            .collect()
    }

    /// `.wip/status`: the first line ends with `ready` once no host is starting.
    fn status_text(&self) -> WorldResult<String> {
        let starting = !self.starting_hosts().is_empty();
        let mut out = format!(
            "world {} at {} · daemon pid {} · up {} s · {}\nhosts:\n",
            self.settings.name,
            self.entries.mount_point().display(),
            std::process::id(),
            self.started.elapsed().as_secs(),
            if starting { "starting" } else { "ready" }
        );
        let width = self
            .entries
            .hosts()
            .iter()
            .map(|m| m.path.join("/").len() + 1)
            .max()
            .unwrap_or(0);
        for m in self.entries.hosts() {
            out.push_str(&format!(
                "  {:width$}  {:8} {}\n",
                format!("{}/", m.path.join("/")),
                m.kind,
                m.host.readiness().words()
            ));
        }
        let bytes = self.journal.bytes()?;
        let running = self.journal.running()?;
        out.push_str(&format!(
            "calls in flight: {running}\njournal: {} ({} runs)\ntitled names: {}\n",
            human_bytes(bytes),
            self.journal.count()?,
            if self.settings.titled { "on" } else { "off" }
        ));
        if running > 0 {
            out.push_str(
                "runs in flight (wait: RUN/ops/wait, stop: RUN/ops/cancel; all in .wip/runs):\n",
            );
            for run in self.journal.running_runs(STATUS_RUNS)? {
                out.push_str(&format!("  {}\n", self.calls.run_line(&run)));
            }
            if running as usize > STATUS_RUNS {
                out.push_str(&format!(
                    "  … {} more in .wip/runs\n",
                    running as usize - STATUS_RUNS
                ));
            }
        }
        Ok(out)
    }

    fn known_text(&self) -> WorldResult<String> {
        let (entries, total) = self.entries.known().recent(KNOWN_SHOWN)?;
        let mut out = String::new();
        for e in entries.iter().filter(|e| !self.entries.hides_path(&e.path)) {
            let mark = if e.indexable { "" } else { " (not indexable)" };
            out.push_str(&format!(
                "{}\t{}{mark}\n",
                names::shown(&e.path),
                names::shown(&e.description)
            ));
        }
        if total as usize > entries.len() {
            out.push_str(&format!(
                "… {} more known entries; search them all with ops/locate\n",
                total as usize - entries.len()
            ));
        }
        Ok(out)
    }
}
