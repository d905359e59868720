//! The organisation file `hourglass admin import-tree` reads: the simulator's `[shares]` table plus
//! `[owners]` and `[members]` (path → usernames; the root is the empty path `""`).

use crate::ServerError;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    shares: BTreeMap<String, toml::Value>,
    #[serde(default)]
    owners: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    members: BTreeMap<String, Vec<String>>,
}

/// A validated organisation: every path's parent is listed, every share is a finite number ≥ 0,
/// owners and members name listed paths (members only leaves).
#[derive(Debug, Clone, PartialEq)]
pub struct OrgFile {
    /// Paths without leading/trailing `/`, parents before children.
    pub shares: Vec<(String, f64)>,
    pub owners: BTreeMap<String, Vec<String>>,
    pub members: BTreeMap<String, Vec<String>>,
}

impl OrgFile {
    pub fn parse(text: &str) -> Result<OrgFile, ServerError> {
        let raw: Raw =
            toml::from_str(text).map_err(|e| ServerError::invalid("file", e.to_string()))?;
        let mut shares = Vec::new();
        for (path, value) in raw.shares {
            let clean = normalize(&path);
            if clean.is_empty() {
                return Err(ServerError::invalid(
                    "shares",
                    "the root has no share; list its children",
                ));
            }
            if clean.split('/').any(str::is_empty) {
                return Err(ServerError::invalid(
                    "shares",
                    format!("\"{path}\" has an empty segment"),
                ));
            }
            let share = match value {
                toml::Value::Integer(i) => i as f64,
                toml::Value::Float(f) => f,
                other => {
                    return Err(ServerError::invalid(
                        "shares",
                        format!(
                            "the share of \"{path}\" must be a number, not {}",
                            other.type_str()
                        ),
                    ))
                }
            };
            if !share.is_finite() || share < 0.0 {
                return Err(ServerError::invalid(
                    "shares",
                    format!("the share of \"{path}\" must be 0 or more, not {share}"),
                ));
            }
            shares.push((clean, share));
        }
        if shares.is_empty() {
            return Err(ServerError::invalid(
                "shares",
                "the [shares] table is empty",
            ));
        }
        // Parents before children: sort by depth, then path (deterministic).
        shares.sort_by(|a, b| depth(&a.0).cmp(&depth(&b.0)).then_with(|| a.0.cmp(&b.0)));
        let known: std::collections::BTreeSet<&str> =
            shares.iter().map(|(p, _)| p.as_str()).collect();
        for (path, _) in &shares {
            if let Some((parent, _)) = path.rsplit_once('/') {
                if !known.contains(parent) {
                    return Err(ServerError::invalid(
                        "shares",
                        format!("\"{path}\" is listed but its parent \"{parent}\" has no share"),
                    ));
                }
            }
        }
        let is_leaf = |p: &str| !known.iter().any(|k| k.starts_with(&format!("{p}/")));
        let mut owners = BTreeMap::new();
        for (path, users) in raw.owners {
            let clean = normalize(&path);
            if !clean.is_empty() && !known.contains(clean.as_str()) {
                return Err(ServerError::invalid(
                    "owners",
                    format!("\"{path}\" is not in [shares]"),
                ));
            }
            owners.insert(clean, users);
        }
        let mut members = BTreeMap::new();
        for (path, users) in raw.members {
            let clean = normalize(&path);
            if !known.contains(clean.as_str()) {
                return Err(ServerError::invalid(
                    "members",
                    format!("\"{path}\" is not in [shares]"),
                ));
            }
            if !is_leaf(&clean) {
                return Err(ServerError::invalid(
                    "members",
                    format!("\"{path}\" is not a leaf; work is charged to leaves only"),
                ));
            }
            members.insert(clean, users);
        }
        Ok(OrgFile {
            shares,
            owners,
            members,
        })
    }
}

fn normalize(path: &str) -> String {
    path.trim().trim_matches('/').to_string()
}

fn depth(path: &str) -> usize {
    path.matches('/').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORG: &str = r#"
        [shares]
        "prog-a" = 60
        "prog-a/a1" = 35.5
        "prog-a/a2" = 64.5
        "prog-b" = 40

        [owners]
        "" = ["ceo"]
        "prog-a" = ["pat"]

        [members]
        "prog-a/a1" = ["ada", "bob"]
    "#;

    #[test]
    fn an_org_file_lists_parents_before_children() {
        let org = OrgFile::parse(ORG).unwrap();
        let paths: Vec<&str> = org.shares.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["prog-a", "prog-b", "prog-a/a1", "prog-a/a2"]);
        assert_eq!(org.owners[""], ["ceo"]);
        assert_eq!(org.members["prog-a/a1"], ["ada", "bob"]);
    }

    #[test]
    fn a_child_without_a_parent_share_is_refused_by_name() {
        let error = OrgFile::parse("[shares]\n\"x/y\" = 1\n").unwrap_err();
        assert!(error.to_string().contains("\"x\""), "{error}");
    }

    #[test]
    fn negative_or_non_numeric_shares_are_refused() {
        assert!(OrgFile::parse("[shares]\na = -1\n").is_err());
        assert!(OrgFile::parse("[shares]\na = \"lots\"\n").is_err());
    }

    #[test]
    fn members_of_inner_nodes_or_unknown_paths_are_refused() {
        let inner = "[shares]\na = 1\n\"a/b\" = 1\n[members]\na = [\"x\"]\n";
        assert!(OrgFile::parse(inner)
            .unwrap_err()
            .to_string()
            .contains("not a leaf"));
        let unknown = "[shares]\na = 1\n[owners]\nzz = [\"x\"]\n";
        assert!(OrgFile::parse(unknown)
            .unwrap_err()
            .to_string()
            .contains("zz"));
    }
}
