"""schemathesis hooks for Engram: how to write the bodies of media types it has no writer for.

`POST /v1/eval-sets/{set_id}/cases/import` takes JSONL (`application/x-ndjson`), published as
the array of its lines: an array is written one JSON value per line, a string as it is, any
other value as one line.
"""
import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):
        return "".join(json.dumps(line) + "\n" for line in value).encode("utf-8")
    return (json.dumps(value) + "\n").encode("utf-8")
