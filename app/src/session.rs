//! Who is signed in, as a resource every component can read.

use crate::{error::AppError, model::CurrentUser};
use leptos::prelude::*;

/// The signed-in user, or `None` on public pages (the server redirects anonymous visitors of app
/// pages to `/login` before any page renders).
#[server(prefix = "/api", endpoint = "session/current-user")]
pub async fn get_current_user() -> Result<Option<CurrentUser>, AppError> {
    Ok(crate::backend::request_user())
}

/// Context handle for the current user resource.
#[derive(Clone, Copy)]
pub struct CurrentUserResource(pub Resource<Result<Option<CurrentUser>, AppError>>);

/// Creates the current-user resource once for the whole app. Blocking, so the header is rendered
/// with the user on the server and hydrates without a second request.
pub fn provide_current_user() {
    let resource = Resource::new_blocking(|| (), |_| get_current_user());
    provide_context(CurrentUserResource(resource));
}

pub fn use_current_user() -> Resource<Result<Option<CurrentUser>, AppError>> {
    expect_context::<CurrentUserResource>().0
}
