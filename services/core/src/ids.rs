//! Typed identifiers. Each wraps a UUIDv7 so ids sort by creation time and one kind of id
//! can never be passed where another is expected.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

macro_rules! uuid_id {
    ($name:ident, $what:literal) => {
        #[doc = concat!("Identifier of ", $what, " (UUIDv7).")]
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn generate() -> Self {
                Self(Uuid::now_v7())
            }
            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(text).map(Self)
            }
        }
    };
}

uuid_id!(OrganizationId, "an organization (tenant)");
uuid_id!(ProjectId, "a project inside an organization");
uuid_id!(MemoryId, "a memory");
uuid_id!(ConsoleAccountId, "a console account");
uuid_id!(ApiKeyId, "a project API key");
