//! `/mem0/openapi.json`: the Mem0-compatible routes, drawn from the permission table (what
//! each needs, what it does), kept apart from the native `/openapi.json`.

use super::ROUTES_WITHOUT_USE_CASE;
use engram_core::permissions::{Door, OPERATIONS};
use serde_json::{Map, Value, json};

pub fn document() -> Value {
    let mut paths: Map<String, Value> = Map::new();
    let mut add = |method: &str, path: &str, summary: String, needs: Vec<String>| {
        let parameters: Vec<Value> = path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        let entry = paths
            .entry(path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[method] = json!({
            "summary": summary,
            "parameters": parameters,
            "x-engram-permissions": needs,
            "security": [{"token": []}],
            "responses": {
                "200": {"description": "Mem0's shape of the answer", "content": {"application/json": {}}},
                "default": {"description": "An error: `{\"detail\": …}`", "content": {"application/json": {}}}
            }
        });
    };
    for rule in OPERATIONS {
        for door in rule.doors {
            if let Door::Mem0 { method, path } = door {
                let needs = rule
                    .operation
                    .required_permissions()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                add(method, path, rule.summary.to_string(), needs);
            }
        }
    }
    for (method, path) in ROUTES_WITHOUT_USE_CASE {
        let summary = if *path == "/v1/ping/" {
            "check the API key; answers its organization and project"
        } else {
            "not offered by Engram: answers a JSON `detail` saying why"
        };
        add(method, path, summary.to_string(), Vec::new());
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Engram — Mem0 Platform–compatible API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The routes the official mem0ai clients (2.x, 1.0.x, 0.1.x) call. Mounted at the root (only `Authorization: Token <key>`) and under /mem0 (`Token` or `Bearer`). Every path ends in a slash. Errors are `application/json` with `detail`. See docs: services/gateway/MEM0.md."
        },
        "servers": [{"url": "/mem0"}, {"url": "/"}],
        "components": {"securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "Authorization", "description": "`Token <Engram API key>`"}}},
        "paths": paths,
    })
}
