//! Engram's domain vocabulary: identifiers, tenant scopes, memory records and the limits
//! every input is checked against. Nothing here performs IO or knows about HTTP or SQL.

/// A closed set of values stored and sent as text: `as_str`, `Display`, `FromStr` (naming the
/// accepted values), serde as the same text, and `ALL`.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
            /// The accepted spellings, for error messages.
            pub fn allowed_values() -> String {
                [$($text),+].join(", ")
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result { f.write_str(self.as_str()) }
        }

        impl ::std::str::FromStr for $name {
            type Err = String;
            fn from_str(text: &str) -> Result<Self, String> {
                match text {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!("unknown value {other:?}; expected one of: {}", Self::allowed_values())),
                }
            }
        }
    };
}

pub mod access;
pub mod agent_teams;
pub mod api_keys;
pub mod audit;
pub mod conversation;
pub mod cursors;
pub mod embedding;
pub mod feedback;
pub mod files;
pub mod governance;
pub mod ids;
pub mod json_integers;
pub mod json_objects;
pub mod limits;
pub mod memory;
pub mod memory_filter;
pub mod memory_limits;
pub mod not_found;
#[cfg(feature = "openapi")]
pub mod openapi_schemas;
pub mod permissions;
pub mod pii;
pub mod principal;
pub mod query_names;
pub mod query_time;
pub mod recall;
pub mod request_bodies;
pub mod runs;
pub mod scope;
pub mod search;
pub mod session_state;
pub mod statements;
pub mod subject_stores;
pub mod tasks;
pub mod tenants;
pub mod token_header;
pub mod usage;
pub mod validation;

pub use access::{ApiScope, ApiScopes, ConsoleLanguage, ConsoleRole, KeyEnvironment};
pub use embedding::ProjectEmbedding;
pub use ids::{MemoryId, OrganizationId, ProjectId};
pub use memory::{Memory, MemoryKind, MemorySource, MemoryState, NewMemory, Visibility};
pub use memory_filter::MemoryFilter;
pub use not_found::NotFoundKind;
pub use permissions::{Operation, Permission};
pub use principal::{DeploymentOperator, Principal};
pub use scope::{AgentRestriction, MemoryScope, ProjectScope, SubjectFilter};
pub use tasks::{TaskKind, TaskStatus};
pub use validation::{ExternalId, FieldError, InvalidInput};
