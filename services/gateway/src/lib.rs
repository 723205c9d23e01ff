//! HTTP API: auth, tenant scope, problem+json errors, OpenAPI.
