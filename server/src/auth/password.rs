//! argon2id password hashes, computed on the blocking pool so they never stall the async runtime.

use crate::{users::domain::Password, ServerError};
use argon2::{
    password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};
use std::sync::OnceLock;

pub async fn hash(password: Password) -> Result<String, ServerError> {
    blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|hash| hash.to_string())
            .map_err(|error| ServerError::PasswordHash(error.to_string()))
    })
    .await
}

pub async fn verify(password: String, stored_hash: String) -> Result<bool, ServerError> {
    blocking(move || verify_now(&password, &stored_hash)).await
}

/// Verifies against a fixed hash, to take as long as a real check for an unknown username.
pub async fn verify_dummy(password: String) -> Result<(), ServerError> {
    static DUMMY: OnceLock<String> = OnceLock::new();
    blocking(move || {
        let stored = DUMMY.get_or_init(|| {
            let salt = SaltString::generate(&mut OsRng);
            Argon2::default()
                .hash_password(b"no account has this password", &salt)
                .map(|hash| hash.to_string())
                .unwrap_or_default()
        });
        verify_now(&password, stored).map(|_| ())
    })
    .await
}

fn verify_now(password: &str, stored_hash: &str) -> Result<bool, ServerError> {
    let parsed = PasswordHash::new(stored_hash).map_err(|error| {
        ServerError::PasswordHash(format!("stored hash is unreadable: {error}"))
    })?;
    Ok(Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok())
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ServerError> + Send + 'static,
) -> Result<T, ServerError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ServerError::PasswordHash(format!("hashing task failed: {error}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_and_no_other() {
        let stored = hash(Password::parse("correct horse".into()).unwrap())
            .await
            .unwrap();
        assert!(stored.starts_with("$argon2id$"), "{stored}");
        assert!(verify("correct horse".into(), stored.clone())
            .await
            .unwrap());
        assert!(!verify("wrong horse!".into(), stored).await.unwrap());
    }
}
