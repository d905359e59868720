//! Server functions of the inbox and the navigation's counts.

use super::{Inbox, NavCounts};
use crate::error::AppError;
use leptos::prelude::*;

#[server(name = GetInbox, prefix = "/api", endpoint = "inbox")]
pub async fn get_inbox() -> Result<Inbox, AppError> {
    use crate::backend::*;
    with_status(async { backend()?.inbox(&require_user()?).await }.await)
}

/// Marks every notification so far as read.
#[server(name = MarkInboxRead, prefix = "/api", endpoint = "inbox/read")]
pub async fn mark_inbox_read() -> Result<(), AppError> {
    use crate::backend::*;
    with_status(async { backend()?.mark_inbox_read(&require_user()?).await }.await)
}

/// What every page's navigation counts for the signed-in person.
#[server(name = GetNavCounts, prefix = "/api", endpoint = "nav/counts")]
pub async fn nav_counts() -> Result<NavCounts, AppError> {
    use crate::backend::*;
    // Asked by every page's header, the sign-in page's too: nobody signed in has nothing waiting.
    let Ok(user) = require_user() else {
        return Ok(NavCounts::default());
    };
    with_status(async { backend()?.nav_counts(&user).await }.await)
}
