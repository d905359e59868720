//! Bearer secrets (node tokens, API tokens): random, shown once, stored only as a SHA-256 hash.
//! They carry 256 bits of entropy, so a fast hash is enough (unlike passwords).

use argon2::password_hash::rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};

/// A new secret with a readable prefix (`hgn_` node, `hgt_` API token) and its hash.
pub fn generate(prefix: &str) -> (String, String) {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    let secret = format!("{prefix}{}", hex(&bytes));
    let hash = hash(&secret);
    (secret, hash)
}

/// 128 random bits as hex: an identifier nobody else will pick (not a secret).
pub fn random_id() -> String {
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    hex(&bytes)
}

pub fn hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.trim().as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_unique_and_verify_by_hash_only() {
        let (a, hash_a) = generate("hgt_");
        let (b, _) = generate("hgt_");
        assert_ne!(a, b);
        assert!(a.starts_with("hgt_") && a.len() == 4 + 64);
        assert_eq!(hash(&a), hash_a);
        assert_ne!(hash(&b), hash_a);
        assert!(!hash_a.contains(&a[4..]));
    }
}
