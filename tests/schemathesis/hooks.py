"""schemathesis hooks for Engram: how to write the bodies of media types it has no writer for.

`POST /v1/eval-sets/{set_id}/cases/import` takes JSONL (`application/x-ndjson`): the body is
a string of lines, written as it is (a generated non-string is written as one JSON line).
"""
import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return (json.dumps(value) + "\n").encode("utf-8")
