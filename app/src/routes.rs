//! Every page is loaded on demand: the main bundle holds the shell (header, navigation, router)
//! and the pages' views are split into modules the browser fetches when a page of theirs is first
//! visited (cargo-leptos `--split`); the server names the current page's module and the chunks it
//! needs in the HTML it sends, so the browser fetches them beside the main bundle.
//!
//! Pages used together share one module (a researcher's submit, detail, queue and nodes pages;
//! governance; administration; the lab): the splitter puts code that several modules need into a
//! chunk per set of modules needing it, so fewer modules make fewer, larger chunks — with 17
//! modules a first visit to the Reports page fetched about 200 chunks, most under 200 bytes and
//! each with its own response headers. The pages a first visit most often lands on (sign-in,
//! overview, workloads, reports) keep a module of their own, so no one downloads pages they did
//! not open to see their first one.

use leptos::prelude::*;
use leptos_router::LazyRoute;

/// A route whose view (a page component without props) loads on demand from split module
/// `$module`; `$view` names the loading function and `$preload` the one that only fetches it
/// (`#[lazy]` derives it as `__preload_` + `$view`).
macro_rules! lazy_page {
    ($module:ident: $route:ident, $view:ident, $preload:ident, $page:path) => {
        pub struct $route;

        #[::leptos::lazy($module)]
        fn $view() -> AnyView {
            $page().into_any()
        }

        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            async fn view(_this: Self) -> AnyView {
                $view().await
            }

            async fn preload() {
                #[cfg(target_arch = "wasm32")]
                $preload().await;
            }
        }
    };
}

lazy_page!(home_page: HomePageRoute, home_page, __preload_home_page, crate::pages::home::HomePage);
lazy_page!(login_page: LoginPageRoute, login_page, __preload_login_page, crate::pages::login::LoginPage);
lazy_page!(workloads_page: WorkloadsPageRoute, workloads_page, __preload_workloads_page, crate::pages::workloads::list::WorkloadsPage);
lazy_page!(reports_page: ReportsPageRoute, reports_page, __preload_reports_page, crate::pages::reports::ReportsPage);
lazy_page!(research_pages: SubmitPageRoute, submit_page, __preload_submit_page, crate::pages::workloads::submit::SubmitPage);
lazy_page!(research_pages: WorkloadPageRoute, workload_page, __preload_workload_page, crate::pages::workloads::detail::WorkloadPage);
lazy_page!(research_pages: QueuePageRoute, queue_page, __preload_queue_page, crate::pages::queue::QueuePage);
lazy_page!(research_pages: NodesPageRoute, nodes_page, __preload_nodes_page, crate::pages::nodes::NodesPage);
lazy_page!(governance_pages: TreePageRoute, tree_page, __preload_tree_page, crate::pages::tree::TreePage);
lazy_page!(governance_pages: ApprovalsPageRoute, approvals_page, __preload_approvals_page, crate::pages::approvals::ApprovalsPage);
lazy_page!(governance_pages: InboxPageRoute, inbox_page, __preload_inbox_page, crate::pages::inbox::InboxPage);
lazy_page!(admin_pages: UsersPageRoute, users_page, __preload_users_page, crate::pages::users::UsersPage);
lazy_page!(admin_pages: TokensPageRoute, tokens_page, __preload_tokens_page, crate::pages::tokens::TokensPage);
lazy_page!(admin_pages: SettingsPageRoute, settings_page, __preload_settings_page, crate::pages::settings::SettingsPage);
lazy_page!(lab_pages: LabPageRoute, lab_page, __preload_lab_page, crate::pages::lab::LabPage);
lazy_page!(lab_pages: LabRunPageRoute, lab_run_page, __preload_lab_run_page, crate::pages::lab::LabRunPage);
lazy_page!(lab_pages: LabComparePageRoute, lab_compare_page, __preload_lab_compare_page, crate::pages::lab::LabComparePage);
