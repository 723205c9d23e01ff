//! Route handlers, one module per resource.

pub mod audit;
pub mod keys;
pub mod memories;
pub mod service;
