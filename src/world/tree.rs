//! Lookup and listing: which node a name leads to, and what a directory lists.

use std::collections::HashMap;

use super::error::{ErrorKind, WorldError, WorldResult};
use super::node::*;
use super::titles;
use super::World;
use super::RUNS_LISTED;
use crate::host::names;
use crate::host::Child;

/// The real name of an entry's op directory; `ops` is a link to it (see `NodeId::OpsLink`).
pub const OPS_DIR: &str = ".ops";
/// The file beside `schema` of an op that declares what its calls return.
pub const OUTPUT_SCHEMA: &str = "output_schema";

impl World {
    // ---- lookup and listing -------------------------------------------------------

    /// The child `name` of `parent`, or ENOENT.
    pub fn lookup(&self, parent: &NodeId, name: &str) -> WorldResult<NodeId> {
        let missing = || WorldError::not_found(format!("no entry named {name:?} here"));
        if !names::is_valid(name) {
            return Err(missing());
        }
        let found = match parent {
            NodeId::Root => match name {
                "README.md" => Some(NodeId::Readme),
                ".wip" => Some(NodeId::Wip),
                "ops" => Some(NodeId::OpsLink(Target::Root)),
                OPS_DIR => Some(NodeId::Ops(Target::Root)),
                _ => by_name(&InfoFile::ALL, name)
                    .map(|f| NodeId::Info(Target::Root, f))
                    .or_else(|| self.branch_child(&[], name)),
            },
            NodeId::Branch(prefix) if name == "description" => {
                Some(NodeId::BranchDescription(prefix.clone()))
            }
            NodeId::Branch(prefix) => self.branch_child(prefix, name),
            // `HOST@/paths/NAME`: the entry of any path, existing or once changed.
            NodeId::Entry(e)
                if e.path.is_empty() && name == "paths" && self.entries.is_tree(e.host) =>
            {
                Some(NodeId::TreePaths(e.host))
            }
            NodeId::TreePaths(h) => match names::unescape(name) {
                Some(raw) => self.child_entry(&EntryRef::new(*h, Vec::new()), raw)?,
                None => None,
            },
            // A working tree's folder, asked by a world path (not the kernel, which asks
            // `lookup_name`): a name with `@` is its entry; the tree's own files are
            // reached through the kernel only.
            NodeId::Tree(dir) => match self.tree_lookup(*dir, std::ffi::OsStr::new(name)) {
                Ok(super::working::Looked::Entry(node)) => Some(node),
                Ok(super::working::Looked::Tree(t, _)) => {
                    self.tree_forget(t, 1);
                    return Err(WorldError::new(
                        ErrorKind::NotSupported,
                        format!("{name:?} is a file of a working tree: name its entry, {name}@"),
                    ));
                }
                Err(_) => None,
            },
            NodeId::Entry(e) => {
                if name == "ops" {
                    Some(NodeId::OpsLink(Target::Entry(e.clone())))
                } else if name == OPS_DIR {
                    Some(NodeId::Ops(Target::Entry(e.clone())))
                } else if name == "body" {
                    self.entries
                        .host(e)?
                        .host
                        .body(&e.path)?
                        .map(|_| NodeId::Body(e.clone()))
                } else if let Some(f) = by_name(&InfoFile::ALL, name) {
                    Some(NodeId::Info(Target::Entry(e.clone()), f))
                } else {
                    let bare = match names::unescape(name) {
                        // A host may answer a name it cannot parse with NotFound rather
                        // than None: with titled names on, that name may still be one.
                        Some(raw) => match self.child_entry(e, raw) {
                            Err(err) if self.settings.titled && err.kind == ErrorKind::NotFound => {
                                None
                            }
                            other => other?,
                        },
                        None => None,
                    };
                    match bare {
                        Some(found) => Some(found),
                        None if self.settings.titled => self.titled_child(e, name)?,
                        None => None,
                    }
                }
            }
            // Through the link as through the folder (the kernel follows the link itself;
            // a world path is resolved here the same way).
            NodeId::Ops(t) | NodeId::OpsLink(t) => self
                .entries
                .ops(t)?
                .iter()
                .find(|o| o.name == name)
                .map(|o| NodeId::Op(t.clone(), intern(&o.name))),
            NodeId::Op(t, op) => {
                if name == "runs" {
                    Some(NodeId::Runs(t.clone(), op.clone()))
                } else if name == OUTPUT_SCHEMA {
                    self.entries
                        .op_spec(t, op)?
                        .output
                        .is_some()
                        .then(|| NodeId::OpFile(t.clone(), op.clone(), OpFile::OutputSchema))
                } else {
                    by_name(&OpFile::ALL, name).map(|f| NodeId::OpFile(t.clone(), op.clone(), f))
                }
            }
            // Named by its number among the op's runs (`runs/1` is the op's first call).
            NodeId::Runs(t, op) => match name.parse::<i64>() {
                Ok(seq) if seq >= 1 && name == seq.to_string() => self
                    .journal
                    .numbered(&self.calls.target_path(t), op, seq)?
                    .map(|id| NodeId::Run(t.clone(), op.clone(), id)),
                _ => None,
            },
            NodeId::Run(_, _, id) => {
                let run = Target::Run(*id);
                if name == "ops" {
                    Some(NodeId::OpsLink(run))
                } else if name == OPS_DIR {
                    Some(NodeId::Ops(run))
                } else if let Some(f) = by_name(&InfoFile::ALL, name) {
                    Some(NodeId::Info(run, f))
                } else if name == "discovered" {
                    Some(NodeId::Discovered(*id))
                } else if name == "content" {
                    self.calls
                        .has_content(*id)
                        .then_some(NodeId::RunContent(*id))
                } else if name == "approval" {
                    self.calls
                        .has_approval(*id)?
                        .then_some(NodeId::RunFile(*id, RunFile::Approval))
                } else {
                    by_name(&RunFile::ALL, name).map(|f| NodeId::RunFile(*id, f))
                }
            }
            NodeId::Discovered(id) => match name.parse::<usize>() {
                Ok(i) if i >= 1 => self
                    .journal
                    .get(*id)?
                    .filter(|r| i <= r.discovered.len())
                    .map(|_| NodeId::DiscoveredLink(*id, i)),
                _ => None,
            },
            NodeId::RunContent(id) => self
                .calls
                .content_names(*id)
                .into_iter()
                .find(|n| n == name)
                .map(|n| NodeId::RunContentFile(*id, intern(&n))),
            NodeId::Wip => by_name(&WipFile::ALL, name).map(NodeId::WipFile),
            _ => None,
        };
        found.ok_or_else(missing)
    }

    /// The host child `raw` (a host name, unescaped) of entry `e`, remembered if it exists.
    fn child_entry(&self, e: &EntryRef, raw: String) -> WorldResult<Option<NodeId>> {
        let child = e.child(raw);
        // A hidden path is not there, for every reader.
        if self.entries.is_hidden(&child) {
            return Ok(None);
        }
        Ok(match self.entries.entry_info(&child)? {
            Some(info) => {
                self.entries.remember(&child, &info);
                Some(NodeId::Entry(child))
            }
            // Removed by a call of its own: its ops' results stay at the path a while.
            None if self.entries.is_gone(&child) => Some(NodeId::Entry(child)),
            // A working tree's path that is gone keeps its runs reachable for good.
            None if self.entries.is_tree(child.host) => {
                let path = self.entries.entry_path(child.host, &child.path);
                let under = self.entries.object_path(child.host, &child.path);
                self.journal
                    .ran_at(&path, &under)?
                    .then_some(NodeId::Entry(child))
            }
            None => None,
        })
    }

    /// A titled name (`42 Crash when config is missing`) of a child of `e`: the node of the
    /// bare child whose title gives back exactly this name (the same node as the bare name).
    fn titled_child(&self, e: &EntryRef, name: &str) -> WorldResult<Option<NodeId>> {
        for bare in titles::bare_candidates(name) {
            let Some(raw) = names::unescape(bare) else {
                continue;
            };
            let child = e.child(raw);
            let Some(info) = self.entries.entry_info(&child)? else {
                continue;
            };
            if self.entries.is_hidden(&child) {
                continue;
            }
            let matches = info
                .title
                .as_deref()
                .and_then(|t| titles::titled_name(bare, t))
                .is_some_and(|titled| titled == name);
            if matches {
                self.entries.remember(&child, &info);
                return Ok(Some(NodeId::Entry(child)));
            }
        }
        Ok(None)
    }

    /// A child of the root or a branch: a host mounted exactly there, or a deeper branch.
    fn branch_child(&self, prefix: &[String], name: &str) -> Option<NodeId> {
        let mut path = prefix.to_vec();
        path.push(name.to_string());
        if let Some(i) = self.entries.hosts().iter().position(|m| m.path == path) {
            let root = EntryRef::new(i, Vec::new());
            if self.entries.is_hidden(&root) {
                return None;
            }
            // A working tree is its folder; its entry is `NAME@`.
            return Some(match self.tree_root(i) {
                Some(t) => NodeId::Tree(t),
                None => NodeId::Entry(root),
            });
        }
        if let Some(base) = name.strip_suffix('@') {
            let mut at = prefix.to_vec();
            at.push(base.to_string());
            if let Some(i) = self.entries.hosts().iter().position(|m| m.path == at) {
                let root = EntryRef::new(i, Vec::new());
                if self.entries.is_tree(i) && !self.entries.is_hidden(&root) {
                    return Some(NodeId::Entry(root));
                }
            }
        }
        self.entries
            .hosts()
            .iter()
            .any(|m| m.path.len() > path.len() && m.path.starts_with(&path))
            .then_some(NodeId::Branch(path))
    }

    /// The children a listing shows (non-indexable ones are reachable by name only).
    pub fn list(&self, dir: &NodeId) -> WorldResult<Vec<(String, NodeId)>> {
        let info = |t: &Target| {
            InfoFile::ALL
                .iter()
                .map(|(n, f)| (n.to_string(), NodeId::Info(t.clone(), *f)))
                .collect::<Vec<_>>()
        };
        Ok(match dir {
            NodeId::Root => {
                let mut out = vec![("README.md".to_string(), NodeId::Readme)];
                out.extend(info(&Target::Root));
                out.push(("ops".into(), NodeId::OpsLink(Target::Root)));
                out.push((".wip".into(), NodeId::Wip));
                out.extend(self.branch_children(&[]));
                out
            }
            NodeId::Branch(prefix) => {
                let mut out = vec![(
                    "description".to_string(),
                    NodeId::BranchDescription(prefix.clone()),
                )];
                out.extend(self.branch_children(prefix));
                out
            }
            NodeId::TreePaths(_) => Vec::new(),
            NodeId::Entry(e)
                if (self.entries.is_gone(e) || self.entries.is_tree(e.host))
                    && !self.entries.host(e)?.host.exists(&e.path)? =>
            {
                // Only the ops that removed it: the rest of it is gone.
                vec![("ops".into(), NodeId::OpsLink(Target::Entry(e.clone())))]
            }
            NodeId::Entry(e) => {
                let target = Target::Entry(e.clone());
                let mut out = info(&target);
                let (body, children) = self.entries.body_and_children(e)?;
                // A body the host cannot give now leaves the listing (and `ls`) whole.
                match body {
                    Ok(Some(_)) => out.push(("body".into(), NodeId::Body(e.clone()))),
                    Ok(None) => {}
                    Err(err) => tracing::debug!(path = ?e.path, "body not listed: {err}"),
                }
                out.push(("ops".into(), NodeId::OpsLink(target)));
                let children: Vec<_> = children
                    .into_iter()
                    .filter(|c| c.info.indexable && names::is_valid(&c.name))
                    .filter(|c| !self.entries.is_hidden(&e.child(c.name.clone())))
                    .collect();
                let shown = self.listed_names(&children);
                for (child, shown) in children.into_iter().zip(shown) {
                    // No file name is longer (the kernel refuses it): a host name whose
                    // escape would be is left out (its escaped neighbour keeps the name).
                    if shown.len() > names::NAME_MAX {
                        tracing::debug!(name = child.name, "too long to list once escaped");
                        continue;
                    }
                    let entry = e.child(child.name);
                    self.entries.note_info(&entry, &child.info);
                    out.push((shown, NodeId::Entry(entry)));
                }
                out
            }
            NodeId::Ops(t) => self
                .entries
                .ops(t)?
                .iter()
                .map(|o| (o.name.clone(), NodeId::Op(t.clone(), intern(&o.name))))
                .collect(),
            NodeId::Op(t, op) => {
                let mut out: Vec<(String, NodeId)> = OpFile::ALL
                    .iter()
                    .map(|(n, f)| (n.to_string(), NodeId::OpFile(t.clone(), op.clone(), *f)))
                    .collect();
                if self.entries.op_spec(t, op)?.output.is_some() {
                    out.insert(
                        2,
                        (
                            OUTPUT_SCHEMA.to_string(),
                            NodeId::OpFile(t.clone(), op.clone(), OpFile::OutputSchema),
                        ),
                    );
                }
                out
            }
            NodeId::Runs(t, op) => self
                .journal
                .runs_of(&self.calls.target_path(t), op, RUNS_LISTED)?
                .into_iter()
                .map(|b| (b.seq.to_string(), NodeId::Run(t.clone(), op.clone(), b.id)))
                .collect(),
            NodeId::Run(_, _, id) => {
                let run = Target::Run(*id);
                let mut out: Vec<(String, NodeId)> = InfoFile::ALL
                    .iter()
                    .map(|(n, f)| (n.to_string(), NodeId::Info(run.clone(), *f)))
                    .collect();
                // A run is an entry: its ops behind the link, as everywhere.
                out.push(("ops".into(), NodeId::OpsLink(run)));
                out.extend(
                    RunFile::ALL
                        .iter()
                        .map(|(n, f)| (n.to_string(), NodeId::RunFile(*id, *f))),
                );
                out.push(("discovered".into(), NodeId::Discovered(*id)));
                if self.calls.has_content(*id) {
                    out.push(("content".into(), NodeId::RunContent(*id)));
                }
                if self.calls.has_approval(*id)? {
                    out.push(("approval".into(), NodeId::RunFile(*id, RunFile::Approval)));
                }
                out
            }
            NodeId::Discovered(id) => {
                let n = self.calls.run(*id)?.discovered.len();
                (1..=n)
                    .map(|i| (i.to_string(), NodeId::DiscoveredLink(*id, i)))
                    .collect()
            }
            NodeId::RunContent(id) => self
                .calls
                .content_names(*id)
                .into_iter()
                .map(|n| (n.clone(), NodeId::RunContentFile(*id, intern(&n))))
                .collect(),
            NodeId::Wip => WipFile::ALL
                .iter()
                .map(|(n, f)| (n.to_string(), NodeId::WipFile(*f)))
                .collect(),
            _ => return Err(WorldError::new(ErrorKind::NotSupported, "not a directory")),
        })
    }

    /// The names a listing shows for these children: escaped bare names, or titled names
    /// when they are on and the child has a title (unless it would collide with another
    /// name of the listing: then that child keeps its bare name).
    fn listed_names(&self, children: &[Child]) -> Vec<String> {
        let bare: Vec<String> = children.iter().map(|c| names::escape(&c.name)).collect();
        if !self.settings.titled {
            return bare;
        }
        let titled: Vec<Option<String>> = children
            .iter()
            .zip(&bare)
            .map(|(c, b)| {
                c.info
                    .title
                    .as_deref()
                    .and_then(|t| titles::titled_name(b, t))
            })
            .collect();
        let mut count: HashMap<&str, usize> = HashMap::new();
        for name in bare.iter().chain(titled.iter().flatten()) {
            *count.entry(name.as_str()).or_default() += 1;
        }
        titled
            .iter()
            .zip(&bare)
            .map(|(t, b)| match t {
                Some(t) if count.get(t.as_str()) == Some(&1) => t.clone(),
                _ => b.clone(),
            })
            .collect()
    }

    fn branch_children(&self, prefix: &[String]) -> Vec<(String, NodeId)> {
        let mut out: Vec<(String, NodeId)> = Vec::new();
        for m in self.entries.hosts() {
            if m.path.len() > prefix.len() && m.path.starts_with(prefix) {
                let name = m.path[prefix.len()].clone();
                if out.iter().any(|(n, _)| *n == name) {
                    continue;
                }
                if let Some(node) = self.branch_child(prefix, &name) {
                    out.push((name, node));
                }
            }
        }
        out
    }
}
