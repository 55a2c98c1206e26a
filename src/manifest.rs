//! World manifests (`mounts/*.toml`): which hosts are mounted where, with what settings,
//! identity and policy. Each host parses its own settings table; this module only splits the
//! file into the world's part and one `HostSpec` per `[[host]]`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The world's own settings, as `[world]` and `[identity]` give them.
pub use crate::host::identity::{Identity, Role};
use crate::world::call::policy::{self, Action, Glob, Policy, Rule};
pub use crate::world::settings::WorldSettings;

/// The manifest of the embedded default world (tracker + files).
pub const DEFAULT_MANIFEST: &str = include_str!("../mounts/default.toml");

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read manifest {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid manifest {origin}: {message}")]
    Invalid { origin: String, message: String },
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub world: WorldSettings,
    #[serde(default)]
    pub identity: Identity,
    #[serde(default, rename = "host")]
    pub hosts: Vec<HostSpec>,
    /// `[[policy]]` rules, in order: the first that matches a call decides.
    #[serde(default, rename = "policy")]
    pub policy: Vec<PolicySpec>,
    /// `[state]`: where the journal, known world and approvals live.
    #[serde(default)]
    pub state: StateSettings,
}

/// The `[state]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StateSettings {
    /// `postgresql://…`: state shared by every mount that names the same database;
    /// without it, SQLite in the state directory (one mount).
    #[serde(default)]
    pub url: Option<String>,
}

/// One `[[policy]]` table as written; `Manifest::policy()` checks it and resolves users.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// A glob over the op's world path `ENTRY/ops/NAME` (`tracker/pulls/*/ops/merge`).
    #[serde(rename = "match")]
    pub pattern: String,
    pub action: Action,
    /// Only calls whose arguments contain these keys with these values.
    #[serde(default)]
    pub args: Option<toml::Table>,
    /// Who may decide (approve rules): user names or uids; default: the mount's owner.
    #[serde(default)]
    pub approvers: Option<Vec<Approver>>,
    /// A pending run nobody decided expires: `24h`, `30m`, `1h30m`.
    #[serde(default)]
    pub expires_after: Option<String>,
    /// Let a decision come from the caller's own session.
    #[serde(default)]
    pub self_approve: bool,
    /// Words the guard and the refusal show: why the rule exists.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A user who may decide, by name or uid.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Approver {
    Uid(u32),
    Name(String),
}

/// One `[[host]]` table: `kind` and `path` are common, the rest is the host's own settings.
#[derive(Clone, Debug, Deserialize)]
pub struct HostSpec {
    pub kind: String,
    /// Where in the world it is mounted, e.g. `tracker` or `data/db`.
    pub path: String,
    #[serde(flatten)]
    pub settings: toml::Table,
}

impl HostSpec {
    /// Parse this host's own settings into `T` (unknown keys are an error).
    pub fn settings<T: serde::de::DeserializeOwned>(&self) -> Result<T, ManifestError> {
        toml::Value::Table(self.settings.clone())
            .try_into()
            .map_err(|e: toml::de::Error| ManifestError::Invalid {
                origin: format!("[[host]] {:?}", self.path),
                message: e.message().to_string(),
            })
    }
}

impl Manifest {
    pub fn parse(text: &str, origin: &str) -> Result<Manifest, ManifestError> {
        let mut manifest: Manifest = toml::from_str(text).map_err(|e| ManifestError::Invalid {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        // A host's path is always inside the world: `/github` and `github/` mean `github`.
        for host in &mut manifest.hosts {
            let trimmed = host.path.strip_prefix('/').unwrap_or(&host.path);
            let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
            host.path = trimmed.to_string();
        }
        manifest.check(origin)?;
        Ok(manifest)
    }

    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Manifest::parse(&text, &path.display().to_string())
    }

    pub fn default_world() -> Manifest {
        // The embedded manifest is part of the binary and covered by a test.
        Manifest::parse(DEFAULT_MANIFEST, "default.toml").expect("embedded default manifest")
    }

    fn check(&self, origin: &str) -> Result<(), ManifestError> {
        let invalid = |message: String| ManifestError::Invalid {
            origin: origin.to_string(),
            message,
        };
        let mut seen = Vec::new();
        for host in &self.hosts {
            let segments: Vec<&str> = host.path.split('/').collect();
            if segments.iter().any(|s| {
                s.is_empty()
                    || *s == "."
                    || *s == ".."
                    || crate::host::names::is_reserved(s)
                    || crate::host::names::ROOT_RESERVED.contains(s)
            }) {
                return Err(invalid(format!(
                    "host path {:?} must be one or more plain names (not description, ref, ops, README.md or .wip)",
                    host.path
                )));
            }
            if seen.iter().any(|p: &&str| {
                *p == host.path
                    || p.starts_with(&format!("{}/", host.path))
                    || host.path.starts_with(&format!("{p}/"))
            }) {
                return Err(invalid(format!(
                    "host path {:?} overlaps another host",
                    host.path
                )));
            }
            seen.push(&host.path);
        }
        if self.world.call_timeout_ms == 0 {
            return Err(invalid("call_timeout_ms must be at least 1".into()));
        }
        if self.world.max_call_bytes == 0 {
            return Err(invalid("max_call_bytes must be at least 1".into()));
        }
        if self.world.max_call_threads == 0 {
            return Err(invalid("max_call_threads must be at least 1".into()));
        }
        self.policy().map_err(|e| ManifestError::Invalid {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        Ok(())
    }

    /// The `[[policy]]` rules, checked: globs, durations and user names resolved (the
    /// default approver is the user this process runs as, the mount's owner).
    pub fn policy(&self) -> Result<Policy, ManifestError> {
        // SAFETY: geteuid cannot fail.
        let owner = unsafe { libc::geteuid() };
        // A rule may also be a glob over a files host's paths (`files/secret/**`).
        let files_mounts: Vec<Vec<&str>> = self
            .hosts
            .iter()
            .filter(|h| h.kind == "files")
            .map(|h| h.path.split('/').collect())
            .collect();
        let mut rules = Vec::new();
        for (i, spec) in self.policy.iter().enumerate() {
            let number = i + 1;
            let invalid = |message: String| ManifestError::Invalid {
                origin: format!("[[policy]] rule {number} (match {:?})", spec.pattern),
                message,
            };
            let pattern = match Glob::new(&spec.pattern) {
                Ok(g) => g,
                Err(not_an_op) => {
                    let g = Glob::parse(&spec.pattern).map_err(|e| invalid(e.to_string()))?;
                    // Hide rules match any entry's path; others a files host's paths.
                    let over_files = files_mounts.iter().any(|m| g.starts_within(m));
                    if spec.action != Action::Hide && !over_files {
                        return Err(invalid(not_an_op.to_string()));
                    }
                    g
                }
            };
            if spec.action == Action::Hide && spec.args.is_some() {
                return Err(invalid(
                    "args do not apply to action = \"hide\": a hidden path is hidden from every call and reader".into(),
                ));
            }
            if spec.action != Action::Approve {
                let only = [
                    (spec.approvers.is_some(), "approvers"),
                    (spec.expires_after.is_some(), "expires_after"),
                    (spec.self_approve, "self_approve"),
                ];
                if let Some((_, key)) = only.iter().find(|(set, _)| *set) {
                    return Err(invalid(format!(
                        "{key} applies to action = \"approve\" only (this rule says {:?})",
                        spec.action.as_str()
                    )));
                }
            }
            let args = match &spec.args {
                None => None,
                Some(t) => match serde_json::to_value(t) {
                    Ok(serde_json::Value::Object(m)) if !m.is_empty() => Some(m),
                    Ok(_) => return Err(invalid("args must be a table with at least one key, e.g. args = { method = \"squash\" }".into())),
                    Err(e) => return Err(invalid(format!("args: {e}"))),
                },
            };
            let approvers = match &spec.approvers {
                None => vec![owner],
                Some(list) if list.is_empty() => {
                    return Err(invalid(
                        "approvers is empty: nobody could decide; list user names or uids, or leave it out (the mount's owner decides)".into(),
                    ))
                }
                Some(list) => list
                    .iter()
                    .map(|a| match a {
                        Approver::Uid(uid) => Ok(*uid),
                        Approver::Name(name) => policy::uid_of(name).ok_or_else(|| {
                            invalid(format!("approvers: no user named {name:?} on this system (give a uid instead?)"))
                        }),
                    })
                    .collect::<Result<Vec<u32>, _>>()?,
            };
            let expires_after = spec
                .expires_after
                .as_deref()
                .map(policy::parse_duration)
                .transpose()
                .map_err(|e| invalid(e.to_string()))?;
            rules.push(Rule {
                number,
                pattern,
                action: spec.action,
                args,
                approvers: if spec.action == Action::Approve {
                    approvers
                } else {
                    Vec::new()
                },
                expires_after,
                self_approve: spec.self_approve,
                reason: spec.reason.clone(),
            });
        }
        Ok(Policy::new(rules))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn default_manifest_parses() {
        let m = Manifest::default_world();
        assert!(m.hosts.iter().any(|h| h.kind == "tracker"));
        assert!(m.hosts.iter().any(|h| h.kind == "files"));
    }

    #[test]
    fn rejects_reserved_and_overlapping_paths() {
        let words = |text: &str| match Manifest::parse(text, "t.toml") {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        };
        let plain =
            "must be one or more plain names (not description, ref, ops, README.md or .wip)";
        assert_eq!(
            words("[[host]]\nkind='files'\npath='ops'\n"),
            format!("invalid manifest t.toml: host path \"ops\" {plain}")
        );
        assert_eq!(
            words("[[host]]\nkind='files'\npath='a//b'\n"),
            format!("invalid manifest t.toml: host path \"a//b\" {plain}")
        );
        let overlap = "[[host]]\nkind='files'\npath='a'\n[[host]]\nkind='files'\npath='a/b'\n";
        assert_eq!(
            words(overlap),
            "invalid manifest t.toml: host path \"a/b\" overlaps another host"
        );
        let unknown = words("[world]\nnope=1\n");
        assert!(
            unknown.starts_with("invalid manifest t.toml: TOML parse error at line 2, column 1")
                && unknown.contains(
                    "unknown field `nope`, expected one of `name`, `description`, `call_timeout_ms`"
                ),
            "{unknown}"
        );
        assert_eq!(
            words("[[host]]\nkind='files'\npath='/'\n"),
            format!("invalid manifest t.toml: host path \"\" {plain}")
        );
        assert_eq!(
            words("[[host]]\nkind='files'\npath='//a'\n"),
            format!("invalid manifest t.toml: host path \"/a\" {plain}")
        );
        assert_eq!(
            words("[world]\ncall_timeout_ms=0\n"),
            "invalid manifest t.toml: call_timeout_ms must be at least 1"
        );
    }

    #[test]
    fn a_leading_slash_in_a_host_path_is_accepted() {
        let m = Manifest::parse(
            "[[host]]\nkind='files'\npath='/github'\n[[host]]\nkind='files'\npath='/data/db/'\n",
            "t",
        )
        .unwrap();
        let paths: Vec<&str> = m.hosts.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(paths, vec!["github", "data/db"]);
        let m = Manifest::parse("[world]\ntitled=true\n", "t").unwrap();
        assert!(m.world.titled);
        assert_eq!(m.world.startup_wait_ms, 5_000);
        assert!(!m.world.allow_other, "only the mounting user, unless said");
        let m = Manifest::parse("[world]\nallow_other=true\n", "t").unwrap();
        assert!(m.world.allow_other);
    }

    #[test]
    fn policy_rules_parse_and_resolve() {
        let text = r#"
[[policy]]
match = "tracker/pulls/*/ops/merge"
action = "approve"
args = { method = "squash" }
approvers = ["root", 4242]
expires_after = "1h30m"

[[policy]]
match = "files/ops/write"
action = "deny"
reason = "read-only here"
"#;
        let p = Manifest::parse(text, "t").unwrap().policy().unwrap();
        let r = &p.rules()[0];
        assert_eq!(r.number, 1);
        assert_eq!(r.approvers, vec![0, 4242]);
        assert_eq!(r.expires_after, Some(Duration::from_secs(5400)));
        assert_eq!(r.args.as_ref().unwrap()["method"], "squash");
        assert_eq!(p.rules()[1].action, Action::Deny);
        assert!(p.rules()[1].approvers.is_empty());
        let owner = unsafe { libc::geteuid() };
        let p = Manifest::parse("[[policy]]\nmatch='**'\naction='approve'\n", "t")
            .unwrap()
            .policy()
            .unwrap();
        assert_eq!(
            p.rules()[0].approvers,
            vec![owner],
            "default: the mount's owner"
        );
    }

    #[test]
    fn path_rules_match_a_files_hosts_paths_and_hide_rules_any_entrys() {
        let text =
            "[[host]]\nkind='files'\npath='files'\n[[host]]\nkind='tracker'\npath='tracker'\n";
        for rule in [
            "match='files/secret/**'\naction='deny'",
            "match='files/*.py'\naction='approve'",
            "match='tracker/issues/13/**'\naction='hide'",
            "match='files/.env'\naction='hide'",
        ] {
            let m = Manifest::parse(&format!("{text}[[policy]]\n{rule}\n"), "t");
            assert!(m.is_ok(), "{rule}: {:?}", m.err());
        }
        // A path rule over a host whose entries are not files names no op: refused.
        let e = Manifest::parse(
            &format!("{text}[[policy]]\nmatch='tracker/issues/13'\naction='deny'\n"),
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("can never match an op"), "{e}");
    }

    #[test]
    fn bad_policy_rules_say_which_and_why() {
        for (rule, words) in [
            ("match='**'\naction='maybe'", "unknown variant"),
            ("match='**'\naction='deny'\napprovers=[1]", "approve\" only"),
            (
                "match='**'\naction='approve'\nexpires_after='soon'",
                "not a duration",
            ),
            (
                "match='**'\naction='approve'\napprovers=['no-such-user-here']",
                "no user named",
            ),
            (
                "match='**'\naction='approve'\napprovers=[]",
                "nobody could decide",
            ),
            ("match='a/b'\naction='deny'", "can never match an op"),
            (
                "match='**'\naction='hide'\nargs={a=1}",
                "do not apply to action = \"hide\"",
            ),
            ("match='**'\naction='deny'\nargs={}", "at least one key"),
            ("match='**'\naction='deny'\nwho='me'", "unknown field"),
        ] {
            let e = Manifest::parse(&format!("[[policy]]\n{rule}\n"), "t").unwrap_err();
            assert!(e.to_string().contains(words), "{rule}: {e}");
        }
    }
}
