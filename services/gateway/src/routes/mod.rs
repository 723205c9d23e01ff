//! Route handlers, one module per resource.

pub mod memories;
pub mod service;
