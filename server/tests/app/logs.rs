//! `HOURGLASS_LOG_FORMAT=json`: the server process's log as a collector reads it.

use crate::live::client;
use crate::support::{fake_site, free_port, TestDb};
use std::process::Stdio;
use tokio::{io::AsyncReadExt, process::Command};

const BIN: &str = env!("CARGO_BIN_EXE_hourglass");

#[tokio::test]
async fn json_logs_are_one_object_per_line_and_carry_the_request_id() {
    let test_db = TestDb::new().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut server = Command::new(BIN)
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .arg("--site-root")
        .arg(fake_site(test_db.dir.path()))
        .env("HOURGLASS_DATABASE_URL", &test_db.url)
        .env("HOURGLASS_LOG_FORMAT", "json")
        .env("HOURGLASS_LOG", "info,tower_http=debug")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let http = client();
    crate::restart::healthy(&http, &url).await;
    let answered = http
        .get(format!("{url}/livez"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(answered.headers()["x-request-id"], "trace-me-42");
    server.start_kill().unwrap();
    server.wait().await.unwrap();
    let mut log = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .await
        .unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines
        .iter()
        .all(|l| l["level"].is_string() && l["timestamp"].is_string()));
    let traced = lines
        .iter()
        .find(|l| l["span"]["id"] == "trace-me-42")
        .unwrap_or_else(|| panic!("no line of the request: {log}"));
    assert_eq!(traced["span"]["path"], "/livez", "{traced}");
    assert_eq!(traced["span"]["method"], "GET", "{traced}");
}
