//! Route handlers, one module per resource.

pub mod keys;
pub mod memories;
pub mod service;
