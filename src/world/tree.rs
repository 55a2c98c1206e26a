//! Lookup and listing: which node a name leads to, and what a directory lists.

use super::error::{ErrorKind, WorldError, WorldResult};
use super::names;
use super::node::*;
use super::World;
use super::RUNS_LISTED;

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
                "ops" => Some(NodeId::Ops(Target::Root)),
                _ => by_name(&InfoFile::ALL, name)
                    .map(|f| NodeId::Info(Target::Root, f))
                    .or_else(|| self.branch_child(&[], name)),
            },
            NodeId::Branch(prefix) if name == "description" => {
                Some(NodeId::BranchDescription(prefix.clone()))
            }
            NodeId::Branch(prefix) => self.branch_child(prefix, name),
            NodeId::Entry(e) => {
                if name == "ops" {
                    Some(NodeId::Ops(Target::Entry(e.clone())))
                } else if name == "body" {
                    self.host(e)?
                        .host
                        .body(&e.path)?
                        .map(|_| NodeId::Body(e.clone()))
                } else if let Some(f) = by_name(&InfoFile::ALL, name) {
                    Some(NodeId::Info(Target::Entry(e.clone()), f))
                } else {
                    match names::unescape(name) {
                        Some(raw) => {
                            let mut path = e.path.clone();
                            path.push(raw);
                            let m = self.host(e)?;
                            match m.host.entry(&path)? {
                                Some(info) => {
                                    let child = EntryRef { host: e.host, path };
                                    self.remember(&child, &info);
                                    Some(NodeId::Entry(child))
                                }
                                None => None,
                            }
                        }
                        None => None,
                    }
                }
            }
            NodeId::Ops(t) => self
                .ops(t)?
                .iter()
                .find(|o| o.name == name)
                .map(|o| NodeId::Op(t.clone(), o.name.clone())),
            NodeId::Op(t, op) => {
                if name == "runs" {
                    Some(NodeId::Runs(t.clone(), op.clone()))
                } else {
                    by_name(&OpFile::ALL, name).map(|f| NodeId::OpFile(t.clone(), op.clone(), f))
                }
            }
            NodeId::Runs(t, op) => match name.parse::<i64>() {
                Ok(id) => {
                    let path = self.target_path(t);
                    self.journal
                        .get(id)?
                        .filter(|r| r.path == path && &r.op == op)
                        .map(|_| NodeId::Run(t.clone(), op.clone(), id))
                }
                Err(_) => None,
            },
            NodeId::Run(_, _, id) => {
                if name == "discovered" {
                    Some(NodeId::Discovered(*id))
                } else if name == "approval" {
                    self.has_approval(*id)?
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
            NodeId::Wip => by_name(&WipFile::ALL, name).map(NodeId::WipFile),
            _ => None,
        };
        found.ok_or_else(missing)
    }

    /// A child of the root or a branch: a host mounted exactly there, or a deeper branch.
    fn branch_child(&self, prefix: &[String], name: &str) -> Option<NodeId> {
        let mut path = prefix.to_vec();
        path.push(name.to_string());
        if let Some(i) = self.hosts.iter().position(|m| m.path == path) {
            return Some(NodeId::Entry(EntryRef {
                host: i,
                path: Vec::new(),
            }));
        }
        self.hosts
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
                out.push(("ops".into(), NodeId::Ops(Target::Root)));
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
            NodeId::Entry(e) => {
                let target = Target::Entry(e.clone());
                let mut out = info(&target);
                let m = self.host(e)?;
                // A body the host cannot give now leaves the listing (and `ls`) whole.
                match m.host.body(&e.path) {
                    Ok(Some(_)) => out.push(("body".into(), NodeId::Body(e.clone()))),
                    Ok(None) => {}
                    Err(err) => tracing::debug!(path = ?e.path, "body not listed: {err}"),
                }
                out.push(("ops".into(), NodeId::Ops(target)));
                for child in m.host.children(&e.path)? {
                    if !child.info.indexable || !names::is_valid(&child.name) {
                        continue;
                    }
                    let mut path = e.path.clone();
                    path.push(child.name.clone());
                    out.push((
                        names::escape(&child.name),
                        NodeId::Entry(EntryRef { host: e.host, path }),
                    ));
                }
                out
            }
            NodeId::Ops(t) => self
                .ops(t)?
                .iter()
                .map(|o| (o.name.clone(), NodeId::Op(t.clone(), o.name.clone())))
                .collect(),
            NodeId::Op(t, op) => OpFile::ALL
                .iter()
                .map(|(n, f)| (n.to_string(), NodeId::OpFile(t.clone(), op.clone(), *f)))
                .collect(),
            NodeId::Runs(t, op) => self
                .journal
                .runs_of(&self.target_path(t), op, RUNS_LISTED)?
                .into_iter()
                .map(|id| (id.to_string(), NodeId::Run(t.clone(), op.clone(), id)))
                .collect(),
            NodeId::Run(_, _, id) => {
                let mut out: Vec<(String, NodeId)> = RunFile::ALL
                    .iter()
                    .map(|(n, f)| (n.to_string(), NodeId::RunFile(*id, *f)))
                    .collect();
                out.push(("discovered".into(), NodeId::Discovered(*id)));
                if self.has_approval(*id)? {
                    out.push(("approval".into(), NodeId::RunFile(*id, RunFile::Approval)));
                }
                out
            }
            NodeId::Discovered(id) => {
                let n = self.run(*id)?.discovered.len();
                (1..=n)
                    .map(|i| (i.to_string(), NodeId::DiscoveredLink(*id, i)))
                    .collect()
            }
            NodeId::Wip => WipFile::ALL
                .iter()
                .map(|(n, f)| (n.to_string(), NodeId::WipFile(*f)))
                .collect(),
            _ => return Err(WorldError::new(ErrorKind::NotSupported, "not a directory")),
        })
    }

    fn branch_children(&self, prefix: &[String]) -> Vec<(String, NodeId)> {
        let mut out: Vec<(String, NodeId)> = Vec::new();
        for m in &self.hosts {
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
