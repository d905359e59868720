//! Page renders never hang. Leptos's route-list generation sets a process-wide flag under which a
//! resource first polled anywhere in the process waits forever (leptos#4773); `build_app` used to
//! generate the list every time it was called, so a test building its app while another rendered
//! a page could hang that render (the hang `scripts/test.sh` used to retry around).

use crate::support::TestApp;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_render_while_other_apps_are_being_built() {
    let app = TestApp::new().await;
    app.create_user("ada", "researcher", "long enough 1").await;
    let cookie = app.sign_in("ada", "long enough 1").await;
    let building = tokio::spawn(async {
        for _ in 0..30 {
            drop(TestApp::new().await);
        }
    });
    let mut renders = 0;
    while !building.is_finished() {
        for path in ["/no-such-page", "/login", "/tokens"] {
            let page = tokio::time::timeout(Duration::from_secs(10), app.get(path, Some(&cookie)))
                .await
                .unwrap_or_else(|_| panic!("render {renders} of {path} hung"));
            assert!(
                page.status.is_success()
                    || page.status.as_u16() == 404
                    || page.status.is_redirection()
            );
            renders += 1;
        }
    }
    building.await.unwrap();
    assert!(renders > 10, "{renders} renders overlapped the builds");
}
