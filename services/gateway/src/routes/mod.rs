//! Route handlers, one module per resource.

pub mod audit;
pub mod end_user_tokens;
pub mod feedback;
pub mod files;
pub mod governance;
pub mod keys;
pub mod memories;
pub mod messages;
pub mod prices;
pub mod recall_quality;
pub mod runs;
pub mod service;
pub mod sessions;
pub mod usage;
