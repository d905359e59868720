//! Who may propose and decide, and what a proposal means: pure rules over data the service loads.

use crate::ServerError;
use app::{
    budget::{ChangeAction, ChangeItem, ChangeState, ProposalInput},
    model::CurrentUser,
};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

/// `POST /api/v1/change-requests`: `shares` lists every child after the change, by full path
/// (a new path adds a child, a missing one removes it); `renames` maps a child's path to its new name.
#[derive(Debug, Clone, Deserialize)]
pub struct Proposal {
    pub node: String,
    pub shares: BTreeMap<String, f64>,
    #[serde(default)]
    pub renames: BTreeMap<String, String>,
    pub justification: String,
    #[serde(default)]
    pub effective_at: Option<i64>,
    /// A change for one cluster only (its shares there override the tree's); none: every cluster.
    #[serde(default)]
    pub cluster: Option<String>,
}

impl Proposal {
    /// The rebalancing form's proposal: every child with its share, blank new names ignored.
    pub fn from_form(input: ProposalInput, effective_at: Option<i64>) -> Proposal {
        Proposal {
            node: input.node,
            shares: input
                .children
                .iter()
                .map(|c| (c.path.clone(), c.share))
                .collect(),
            renames: input
                .children
                .iter()
                .filter_map(|c| {
                    c.new_name
                        .clone()
                        .filter(|n| !n.trim().is_empty())
                        .map(|n| (c.path.clone(), n))
                })
                .collect(),
            justification: input.justification,
            effective_at,
            cluster: Some(input.cluster).filter(|c| !c.trim().is_empty()),
        }
    }
}

/// Owners of every budget node by path, loaded once per request.
#[derive(Debug, Clone, Default)]
pub struct Owners(pub HashMap<String, Vec<i64>>);

impl Owners {
    /// Owners of `path` and of each ancestor, nearest first (the root, `""`, last).
    pub fn chain<'a>(&'a self, path: &'a str) -> Vec<(&'a str, &'a [i64])> {
        let mut chain = Vec::new();
        let mut current = Some(path);
        while let Some(p) = current {
            let owners = self.0.get(p).map(Vec::as_slice).unwrap_or(&[]);
            chain.push((p, owners));
            current = (!p.is_empty()).then(|| p.rsplit_once('/').map(|(a, _)| a).unwrap_or(""));
        }
        chain
    }

    pub fn owns_at_or_above(&self, path: &str, user: i64) -> bool {
        self.chain(path)
            .iter()
            .any(|(_, owners)| owners.contains(&user))
    }
}

/// Anyone in the subtree may propose: an owner of the node or an ancestor, a member of a node
/// at or under it (`member_paths`: the actor's), or an admin.
pub fn may_propose(
    owners: &Owners,
    member_paths: &[String],
    actor: &CurrentUser,
    path: &str,
) -> bool {
    actor.is_admin()
        || owners.owns_at_or_above(path, actor.id)
        || member_paths
            .iter()
            .any(|m| path.is_empty() || m == path || m.starts_with(&format!("{path}/")))
}

/// An owner of the node decides (owners of ancestors too); no one decides their own request,
/// and an owner's own proposal needs another owner of the node or an owner of the parent.
/// `Err` says why not, for the person who tried.
pub fn may_decide(
    owners: &Owners,
    actor: &CurrentUser,
    path: &str,
    proposer_id: i64,
) -> Result<(), String> {
    if actor.id == proposer_id {
        return Err("You cannot decide your own request; another owner must.".into());
    }
    let chain = owners.chain(path);
    let node_owners = chain[0].1;
    let proposer_owns_node = node_owners.contains(&proposer_id);
    let allowed = if proposer_owns_node {
        node_owners.contains(&actor.id)
            || chain
                .get(1)
                .is_some_and(|(_, parent)| parent.contains(&actor.id))
    } else {
        chain.iter().any(|(_, owners)| owners.contains(&actor.id))
    };
    if allowed {
        Ok(())
    } else if proposer_owns_node {
        Err(
            "An owner's own proposal needs another owner of this node or an owner of its parent."
                .into(),
        )
    } else {
        Err("Only an owner of this node (or of a node above it) can decide this request.".into())
    }
}

/// Only its proposer withdraws a request, and only while it still waits (pending, or stale).
/// `state` is the stored one. `Err` says why not.
pub fn may_withdraw(
    actor: &CurrentUser,
    proposer_id: i64,
    state: ChangeState,
) -> Result<(), String> {
    if actor.id != proposer_id {
        return Err("Only the person who proposed a request can withdraw or rebase it.".into());
    }
    match state {
        ChangeState::Pending | ChangeState::Stale => Ok(()),
        other => Err(format!(
            "This request is already {other}; only a waiting one can be withdrawn."
        )),
    }
}

/// The proposal a stale request becomes on today's children: what it set, added, renamed and
/// removed, applied to the shares now in force; children it did not name keep today's share (a
/// child added since stays; one it changed that was removed since is left out). The effective
/// date stays if it is still ahead.
pub fn rebased(
    node_path: &str,
    items: &[ChangeItem],
    current: &[Child],
    justification: &str,
    effective_at: Option<i64>,
    now: i64,
) -> Proposal {
    let path = |name: &str| {
        if node_path.is_empty() {
            name.to_string()
        } else {
            format!("{node_path}/{name}")
        }
    };
    let mut shares: BTreeMap<String, f64> =
        current.iter().map(|c| (path(&c.name), c.share)).collect();
    let mut renames = BTreeMap::new();
    for item in items {
        let key = path(&item.child);
        let exists = shares.contains_key(&key);
        match item.action {
            ChangeAction::Remove => {
                shares.remove(&key);
            }
            ChangeAction::Add if !exists => {
                shares.insert(key, item.new_share.unwrap_or(0.0));
            }
            ChangeAction::Set | ChangeAction::Add | ChangeAction::Rename if exists => {
                if let Some(share) = item.new_share {
                    shares.insert(key.clone(), share);
                }
                if let Some(name) = item.new_name.clone().filter(|n| *n != item.child) {
                    renames.insert(key, name);
                }
            }
            _ => {}
        }
    }
    Proposal {
        node: node_path.to_string(),
        shares,
        renames,
        justification: justification.to_string(),
        effective_at: effective_at.filter(|&at| at > now),
        cluster: None,
    }
}

/// A change for one cluster only sets the shares of existing children: the tree's shape is the
/// same on every cluster.
pub fn check_cluster_plan(plan: &Plan, cluster: &str) -> Result<(), ServerError> {
    match plan
        .items
        .values()
        .find(|item| item.action != ChangeAction::Set)
    {
        Some(item) => Err(ServerError::invalid(
            "shares",
            format!(
                "A change for cluster \"{cluster}\" only sets the shares of existing children; \
                 \"{}\" would be {}: add, rename or remove nodes in a change for every cluster.",
                item.child,
                match item.action {
                    ChangeAction::Add => "added",
                    ChangeAction::Remove => "removed",
                    _ => "renamed",
                }
            ),
        )),
        None => Ok(()),
    }
}

/// The state people see: a pending request whose node's shares changed since is stale.
pub fn shown_state(stored: ChangeState, base_version: i64, children_version: i64) -> ChangeState {
    if stored == ChangeState::Pending && children_version != base_version {
        ChangeState::Stale
    } else {
        stored
    }
}

pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
}

/// A live child of the node a proposal changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Child {
    pub id: i64,
    pub name: String,
    pub share: f64,
}

/// What a valid proposal does to each child, by child name; removed children carry their id
/// (the service checks they hold nothing before the request is recorded).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub items: BTreeMap<String, ChangeItem>,
    pub removed: Vec<(i64, String)>,
}

/// Checks a proposal against the node's children (`node_path` is its full path) at `now`.
pub fn plan(
    proposal: &Proposal,
    node_path: &str,
    current: &[Child],
    now: i64,
) -> Result<Plan, ServerError> {
    if proposal.justification.trim().is_empty() {
        return Err(ServerError::invalid(
            "justification",
            "Say why: a decision needs a justification.",
        ));
    }
    if proposal.effective_at.is_some_and(|at| at < now - 60) {
        return Err(ServerError::invalid(
            "effective_at",
            "The effective date is in the past.",
        ));
    }
    if proposal.shares.is_empty() {
        return Err(ServerError::invalid(
            "shares",
            "List the shares of the node's children after the change.",
        ));
    }
    let prefix = if node_path.is_empty() {
        String::new()
    } else {
        format!("{node_path}/")
    };
    let mut items: BTreeMap<String, ChangeItem> = BTreeMap::new();
    let mut total = 0.0;
    for (path, &share) in &proposal.shares {
        let name = path.trim().strip_prefix(&prefix).unwrap_or("");
        if !valid_name(name) {
            return Err(ServerError::invalid(
                "shares",
                format!("\"{path}\" is not a child of \"{node_path}\" with a valid name (lowercase letters, digits, '-', '_', '.')."),
            ));
        }
        if !share.is_finite() || share < 0.0 {
            return Err(ServerError::invalid(
                "shares",
                format!("The share of \"{path}\" must be 0 or more."),
            ));
        }
        total += share;
        let old = current.iter().find(|c| c.name == name).map(|c| c.share);
        let new_name = proposal
            .renames
            .get(path.trim())
            .map(|n| n.trim().to_string());
        if let Some(new_name) = &new_name {
            if !valid_name(new_name)
                || (new_name != name
                    && (current.iter().any(|c| c.name == *new_name)
                        || proposal.shares.contains_key(&format!("{prefix}{new_name}"))))
            {
                return Err(ServerError::invalid(
                    "renames",
                    format!("\"{new_name}\" is not a valid, unused name."),
                ));
            }
        }
        let action = match (old, &new_name) {
            (None, _) => ChangeAction::Add,
            (Some(_), Some(n)) if n != name => ChangeAction::Rename,
            _ => ChangeAction::Set,
        };
        items.insert(
            name.to_string(),
            ChangeItem {
                child: name.to_string(),
                action,
                old_share: old,
                new_share: Some(share),
                new_name,
            },
        );
    }
    if total <= 0.0 {
        return Err(ServerError::invalid(
            "shares",
            "At least one child needs a share above 0.",
        ));
    }
    let mut removed = Vec::new();
    for child in current {
        if !items.contains_key(&child.name) {
            removed.push((child.id, child.name.clone()));
            items.insert(
                child.name.clone(),
                ChangeItem {
                    child: child.name.clone(),
                    action: ChangeAction::Remove,
                    old_share: Some(child.share),
                    new_share: None,
                    new_name: None,
                },
            );
        }
    }
    Ok(Plan { items, removed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::model::Role;

    fn user(id: i64) -> CurrentUser {
        CurrentUser {
            id,
            username: format!("u{id}"),
            role: Role::Researcher,
        }
    }

    fn owners() -> Owners {
        Owners(HashMap::from([
            ("".to_string(), vec![1]),
            ("ai".to_string(), vec![2, 3]),
            ("ai/nlp".to_string(), vec![4]),
        ]))
    }

    fn item(
        child: &str,
        action: ChangeAction,
        new_share: Option<f64>,
        new_name: Option<&str>,
    ) -> ChangeItem {
        ChangeItem {
            child: child.into(),
            action,
            old_share: None,
            new_share,
            new_name: new_name.map(Into::into),
        }
    }

    fn child(id: i64, name: &str, share: f64) -> Child {
        Child {
            id,
            name: name.into(),
            share,
        }
    }

    #[test]
    fn a_rebased_request_applies_what_it_changed_to_todays_shares_and_keeps_what_it_did_not_name() {
        // The request set eval to 40 and pretrain to 60, added rl, renamed old to legacy, removed junk.
        let items = [
            item("eval", ChangeAction::Set, Some(40.0), None),
            item("pretrain", ChangeAction::Set, Some(60.0), None),
            item("rl", ChangeAction::Add, Some(10.0), None),
            item("old", ChangeAction::Rename, Some(5.0), Some("legacy")),
            item("junk", ChangeAction::Remove, None, None),
        ];
        // Since then: posttrain was added, pretrain removed, eval moved to 30.
        let today = [
            child(1, "eval", 30.0),
            child(3, "posttrain", 25.0),
            child(4, "old", 5.0),
            child(5, "junk", 1.0),
        ];
        let proposal = rebased("lang", &items, &today, "Spring", Some(500), 1_000);
        let shares: Vec<(&str, f64)> = proposal
            .shares
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            shares,
            [
                ("lang/eval", 40.0),
                ("lang/old", 5.0),
                ("lang/posttrain", 25.0),
                ("lang/rl", 10.0)
            ]
        );
        assert_eq!(
            proposal.renames.get("lang/old").map(String::as_str),
            Some("legacy")
        );
        assert_eq!(proposal.effective_at, None, "a date now past is dropped");
        assert_eq!(proposal.justification, "Spring");
        let plan =
            plan(&proposal, "lang", &today, 1_000).expect("a valid proposal on today's children");
        assert_eq!(plan.removed, vec![(5, "junk".to_string())]);
        assert_eq!(
            rebased("", &items[..1], &today[..1], "x", Some(2_000), 1_000).effective_at,
            Some(2_000)
        );
    }

    #[test]
    fn only_the_proposer_withdraws_and_only_while_the_request_waits() {
        assert!(may_withdraw(&user(7), 7, ChangeState::Pending).is_ok());
        assert!(may_withdraw(&user(7), 7, ChangeState::Stale).is_ok());
        assert!(may_withdraw(&user(1), 7, ChangeState::Pending).is_err());
        for done in [
            ChangeState::Applied,
            ChangeState::Scheduled,
            ChangeState::Rejected,
            ChangeState::Withdrawn,
        ] {
            assert!(may_withdraw(&user(7), 7, done).is_err());
        }
    }

    #[test]
    fn an_owners_own_proposal_needs_another_owner_of_the_node_or_of_its_parent() {
        let owners = owners();
        assert!(may_decide(&owners, &user(2), "ai", 2).is_err());
        assert!(may_decide(&owners, &user(3), "ai", 2).is_ok());
        assert!(may_decide(&owners, &user(1), "ai", 2).is_ok());
        // An owner two levels up is not enough for a node owner's own proposal.
        assert!(may_decide(&owners, &user(1), "ai/nlp", 4).is_err());
        assert!(may_decide(&owners, &user(2), "ai/nlp", 4).is_ok());
        // Anyone else's proposal: any owner at or above the node.
        assert!(may_decide(&owners, &user(1), "ai/nlp", 9).is_ok());
        assert!(may_decide(&owners, &user(9), "ai/nlp", 8).is_err());
    }

    #[test]
    fn members_below_a_node_and_owners_above_it_may_propose_and_no_one_else() {
        let owners = owners();
        let mine = vec!["ai/nlp/chat".to_string()];
        assert!(may_propose(&owners, &mine, &user(9), "ai/nlp"));
        assert!(may_propose(&owners, &mine, &user(9), "ai"));
        assert!(!may_propose(&owners, &mine, &user(9), "vision"));
        assert!(!may_propose(&owners, &[], &user(9), "ai"));
        assert!(may_propose(&owners, &[], &user(2), "ai/nlp"));
        assert!(!may_propose(&owners, &[], &user(4), "ai"));
    }

    #[test]
    fn a_plan_adds_renames_sets_and_removes_children_and_refuses_a_zero_total() {
        let current = vec![
            Child {
                id: 10,
                name: "a".into(),
                share: 1.0,
            },
            Child {
                id: 11,
                name: "b".into(),
                share: 2.0,
            },
            Child {
                id: 12,
                name: "c".into(),
                share: 3.0,
            },
        ];
        let proposal = Proposal {
            node: "ai".into(),
            shares: BTreeMap::from([
                ("ai/a".to_string(), 2.0),
                ("ai/b".to_string(), 2.0),
                ("ai/d".to_string(), 1.0),
            ]),
            renames: BTreeMap::from([("ai/b".to_string(), "bee".to_string())]),
            justification: "growth".into(),
            effective_at: None,
            cluster: None,
        };
        let plan = plan(&proposal, "ai", &current, 0).expect("valid");
        let action = |n: &str| plan.items[n].action;
        assert_eq!(action("a"), ChangeAction::Set);
        assert_eq!(action("b"), ChangeAction::Rename);
        assert_eq!(action("c"), ChangeAction::Remove);
        assert_eq!(action("d"), ChangeAction::Add);
        assert_eq!(plan.removed, vec![(12, "c".to_string())]);

        let zero = Proposal {
            shares: BTreeMap::from([("ai/a".to_string(), 0.0)]),
            ..proposal
        };
        assert!(plan_fails(&zero, &current).contains("above 0"));
    }

    fn plan_fails(proposal: &Proposal, current: &[Child]) -> String {
        plan(proposal, "ai", current, 0).unwrap_err().to_string()
    }

    #[test]
    fn a_pending_request_over_newer_shares_shows_as_stale() {
        assert_eq!(shown_state(ChangeState::Pending, 3, 4), ChangeState::Stale);
        assert_eq!(
            shown_state(ChangeState::Pending, 4, 4),
            ChangeState::Pending
        );
        assert_eq!(
            shown_state(ChangeState::Applied, 3, 4),
            ChangeState::Applied
        );
    }
}
