//! Enums that travel by name (states, actions, granularities): one stable kebab-case name each,
//! as stored, in the JSON API and in forms, read back with a specific error.

use std::fmt;

/// A name that is not one of an enum's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\" is not a {}", self.name, self.what)
    }
}

impl std::error::Error for UnknownName {}

#[macro_export]
macro_rules! named {
    ($ty:ident, $what:literal, $($variant:ident => $name:literal),+ $(,)?) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The stable name, as stored and in the JSON API.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::names::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::names::UnknownName { what: $what, name: s.to_string() }),
                }
            }
        }

        impl TryFrom<String> for $ty {
            type Error = $crate::names::UnknownName;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::{budget::ChangeState, nodes::NodeHealth, workloads::WorkloadState};

    #[test]
    fn every_name_reads_back_as_its_value_and_serde_writes_the_same_name() {
        for state in WorkloadState::ALL {
            assert_eq!(state.as_str().parse::<WorkloadState>(), Ok(*state));
            let json = serde_json::to_string(state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        for state in ChangeState::ALL {
            assert_eq!(state.to_string().parse::<ChangeState>(), Ok(*state));
        }
        assert_eq!("down".parse::<NodeHealth>(), Ok(NodeHealth::Down));
    }

    #[test]
    fn an_unknown_name_says_what_it_is_not() {
        let error = "sleeping".parse::<WorkloadState>().unwrap_err();
        assert_eq!(error.to_string(), "\"sleeping\" is not a workload state");
    }
}
