//! Engram's domain vocabulary: identifiers, tenant scopes, memory records and the limits
//! every input is checked against. Nothing here performs IO or knows about HTTP or SQL.

pub mod access;
pub mod audit;
pub mod conversation;
pub mod embedding;
pub mod files;
pub mod ids;
pub mod limits;
pub mod memory;
pub mod permissions;
pub mod pii;
pub mod principal;
pub mod recall;
pub mod scope;
pub mod usage;
pub mod validation;

pub use access::{ApiScope, ApiScopes, ConsoleRole, KeyEnvironment};
pub use embedding::ProjectEmbedding;
pub use ids::{MemoryId, OrganizationId, ProjectId};
pub use memory::{Memory, MemoryKind, MemorySource, MemoryState, NewMemory};
pub use permissions::{Operation, Permission};
pub use principal::Principal;
pub use scope::{ProjectScope, SubjectFilter};
pub use validation::{ExternalId, FieldError, InvalidInput};
