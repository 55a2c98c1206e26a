//! Who a mount acts as: what hosts map onto their own permissions.

use serde::Deserialize;

/// Who the mount acts as. Hosts map the role onto their own permissions.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub user: String,
    /// `maintainer` (may write and merge), `contributor` (may comment and open), `reader`.
    #[serde(default = "default_role")]
    pub role: Role,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            user: "you".to_string(),
            role: Role::Maintainer,
        }
    }
}

fn default_role() -> Role {
    Role::Maintainer
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Maintainer,
    Contributor,
    Reader,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Maintainer => "maintainer",
            Role::Contributor => "contributor",
            Role::Reader => "reader",
        }
    }
}
