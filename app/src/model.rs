//! Data shared by the server and the browser. Nothing secret (hashes, session ids) lives here.

use serde::{Deserialize, Serialize};
use std::{fmt, str::FromStr};

/// What a person may do across the whole product. Tree-node ownership and project membership are
/// separate grants layered on top of this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Researcher,
    Leadership,
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Researcher, Role::Leadership, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Researcher => "researcher",
            Role::Leadership => "leadership",
            Role::Admin => "admin",
        }
    }

    /// The name shown to people.
    pub fn label(self) -> &'static str {
        match self {
            Role::Researcher => "Researcher",
            Role::Leadership => "Leadership",
            Role::Admin => "Admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "researcher" => Ok(Role::Researcher),
            "leadership" => Ok(Role::Leadership),
            "admin" => Ok(Role::Admin),
            other => Err(format!(
                "Unknown role \"{other}\": choose researcher, leadership or admin."
            )),
        }
    }
}

/// The signed-in person, as the server's session layer resolved them for this request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentUser {
    pub id: i64,
    pub username: String,
    pub role: Role,
}

impl CurrentUser {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// A row of the Users page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSummary {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub disabled: bool,
    /// Seconds since the Unix epoch.
    pub created_at: i64,
}

/// What the Users page's form submits; validated by the server into domain types.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewUser {
    pub username: String,
    pub role: String,
    pub password: String,
}
