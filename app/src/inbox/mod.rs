//! The in-app inbox: what waits for the signed-in person and what happened to their work.

pub mod api;

use serde::{Deserialize, Serialize};

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InboxKind {
    /// A change request waits for their decision.
    Approval,
    /// A request they proposed was approved or rejected.
    Decision,
    /// A workload of theirs was preempted or drained.
    Preempted,
    /// A workload of theirs failed.
    Failed,
}

impl InboxKind {
    pub fn label(self) -> &'static str {
        match self {
            InboxKind::Approval => "Waiting for you",
            InboxKind::Decision => "Decision",
            InboxKind::Preempted => "Preempted",
            InboxKind::Failed => "Failed",
        }
    }
}

/// One notification, its sentence written by the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxItem {
    pub at: i64,
    pub kind: InboxKind,
    pub title: String,
    pub sentence: String,
    /// The page that shows it.
    pub href: String,
    pub unread: bool,
}

/// The signed-in person's notifications of the last 30 days, newest first (at most 100).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inbox {
    pub items: Vec<InboxItem>,
    pub unread: usize,
}

/// The counts every page's navigation shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NavCounts {
    /// Change requests waiting for their decision.
    pub awaiting: usize,
    /// Inbox notifications since they last read it.
    pub unread: usize,
}
