//! The memory pipeline: ingest, supersede, index, retrieve.
