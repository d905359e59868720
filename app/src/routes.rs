//! Every page is loaded on demand: the main bundle holds the shell (header, navigation, router)
//! and each route's view is split into a chunk of its own that the browser fetches when the route
//! is first visited (cargo-leptos `--split`); the server names the current page's chunks in the
//! HTML it sends, so the browser fetches them beside the main bundle.

use leptos::prelude::*;
use leptos_router::{lazy_route, LazyRoute};

/// A route whose view (a page component without props) loads on demand.
macro_rules! lazy_page {
    ($route:ident, $page:path) => {
        pub struct $route;

        #[lazy_route]
        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(_this: Self) -> AnyView {
                $page().into_any()
            }
        }
    };
}

lazy_page!(HomePageRoute, crate::pages::home::HomePage);
lazy_page!(LoginPageRoute, crate::pages::login::LoginPage);
lazy_page!(UsersPageRoute, crate::pages::users::UsersPage);
lazy_page!(
    WorkloadsPageRoute,
    crate::pages::workloads::list::WorkloadsPage
);
lazy_page!(SubmitPageRoute, crate::pages::workloads::submit::SubmitPage);
lazy_page!(
    WorkloadPageRoute,
    crate::pages::workloads::detail::WorkloadPage
);
lazy_page!(QueuePageRoute, crate::pages::queue::QueuePage);
lazy_page!(NodesPageRoute, crate::pages::nodes::NodesPage);
lazy_page!(TokensPageRoute, crate::pages::tokens::TokensPage);
lazy_page!(SettingsPageRoute, crate::pages::settings::SettingsPage);
lazy_page!(TreePageRoute, crate::pages::tree::TreePage);
lazy_page!(ApprovalsPageRoute, crate::pages::approvals::ApprovalsPage);
lazy_page!(InboxPageRoute, crate::pages::inbox::InboxPage);
lazy_page!(ReportsPageRoute, crate::pages::reports::ReportsPage);
lazy_page!(LabPageRoute, crate::pages::lab::LabPage);
lazy_page!(LabRunPageRoute, crate::pages::lab::LabRunPage);
lazy_page!(LabComparePageRoute, crate::pages::lab::LabComparePage);
