//! The demo organisation: two programs, five projects, their managers and researchers.

use crate::{
    budget::{import::import_org, org_file::OrgFile},
    users::service,
    ServerError,
};
use sqlx::AnyPool;

pub const PASSWORD: &str = "hourglass-demo";

/// `(username, role, what they do)`.
pub const PEOPLE: [(&str, &str, &str); 8] = [
    ("admin", "admin", "runs the cluster: nodes, users, settings"),
    (
        "lee",
        "leadership",
        "reviews funded vs delivered each quarter; owns the tree's root",
    ),
    (
        "pat",
        "researcher",
        "manages the Language program (owner of lang)",
    ),
    (
        "rui",
        "researcher",
        "manages the Vision program (owner of vision)",
    ),
    (
        "ada",
        "researcher",
        "lead of lang/pretrain (owner) and member",
    ),
    ("bob", "researcher", "member of lang/pretrain and lang/eval"),
    (
        "cy",
        "researcher",
        "member of vision/robotics and vision/vlm",
    ),
    (
        "dee",
        "researcher",
        "member of lang/posttrain and vision/vlm",
    ),
];

pub const TREE: &str = r#"
[shares]
"lang" = 60
"lang/pretrain" = 50
"lang/posttrain" = 30
"lang/eval" = 20
"vision" = 40
"vision/vlm" = 60
"vision/robotics" = 40

[owners]
"" = ["lee"]
"lang" = ["pat"]
"vision" = ["rui"]
"lang/pretrain" = ["ada"]

[members]
"lang/pretrain" = ["ada", "bob"]
"lang/posttrain" = ["dee", "pat"]
"lang/eval" = ["bob"]
"vision/vlm" = ["cy", "dee", "rui"]
"vision/robotics" = ["cy"]
"#;

pub async fn seed(pool: &AnyPool, now: i64) -> Result<(), ServerError> {
    for (name, role, _) in PEOPLE {
        service::create_user(pool, name, role, PASSWORD.to_string(), now).await?;
    }
    let org = OrgFile::parse(TREE)?;
    import_org(pool, &org, now).await?;
    Ok(())
}
