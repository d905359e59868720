//! Validated user input. Past `parse`, values are valid by construction.

use crate::ServerError;
use app::model::Role;

/// A username: 2–32 characters of lowercase letters, digits, `.`, `_` or `-`, starting with a
/// letter. Stored lowercase, so sign-in is case-insensitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Username(String);

impl Username {
    pub fn parse(raw: &str) -> Result<Self, ServerError> {
        let name = raw.trim().to_ascii_lowercase();
        if name.is_empty() {
            return Err(ServerError::invalid("username", "Enter a username."));
        }
        if name.len() < 2 || name.len() > 32 {
            return Err(ServerError::invalid(
                "username",
                "A username has 2 to 32 characters.",
            ));
        }
        if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(ServerError::invalid(
                "username",
                "A username starts with a letter.",
            ));
        }
        if let Some(bad) = name.chars().find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
        }) {
            return Err(ServerError::invalid(
                "username",
                format!("A username may use letters, digits, '.', '_' and '-', not '{bad}'."),
            ));
        }
        Ok(Username(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A new password: 8–256 characters. Never logged, never serialized.
pub struct Password(String);

impl Password {
    pub const MIN_LEN: usize = 8;

    pub fn parse(raw: String) -> Result<Self, ServerError> {
        let length = raw.chars().count();
        if length < Self::MIN_LEN {
            return Err(ServerError::invalid(
                "password",
                format!("A password needs at least {} characters.", Self::MIN_LEN),
            ));
        }
        if length > 256 {
            return Err(ServerError::invalid(
                "password",
                "A password has at most 256 characters.",
            ));
        }
        if raw.trim().is_empty() {
            return Err(ServerError::invalid(
                "password",
                "A password cannot be only spaces.",
            ));
        }
        Ok(Password(raw))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(…)")
    }
}

pub fn parse_role(raw: &str) -> Result<Role, ServerError> {
    raw.parse::<Role>()
        .map_err(|message| ServerError::invalid("role", message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_trimmed_and_lowercased() {
        assert_eq!(Username::parse("  Alice.B ").unwrap().as_str(), "alice.b");
    }

    #[test]
    fn usernames_with_spaces_or_symbols_are_refused_naming_the_character() {
        let error = Username::parse("ali ce").unwrap_err();
        assert!(error.to_string().contains("' '"), "{error}");
        assert!(Username::parse("bob!").is_err());
        assert!(Username::parse("1bob").is_err());
        assert!(Username::parse("").is_err());
        assert!(Username::parse(&"a".repeat(33)).is_err());
    }

    #[test]
    fn short_passwords_are_refused_on_the_password_field() {
        match Password::parse("short".into()) {
            Err(ServerError::Invalid { field, .. }) => assert_eq!(field, "password"),
            other => panic!("expected a password error, got {other:?}"),
        }
        assert!(Password::parse("        ".into()).is_err());
        assert!(Password::parse("long enough".into()).is_ok());
    }

    #[test]
    fn unknown_roles_are_refused_on_the_role_field() {
        assert_eq!(parse_role("Admin").unwrap(), Role::Admin);
        match parse_role("boss") {
            Err(ServerError::Invalid { field, .. }) => assert_eq!(field, "role"),
            other => panic!("expected a role error, got {other:?}"),
        }
    }
}
