"""The official MCP Python SDK (`mcp` 2.3.0) against a running `engram serve`.

Run by tests/api/mcp_server.rs with the venv `make setup-test` installs, once per protocol
era: `legacy` (the `initialize` handshake, 2025-11-25) and `auto` (which probes
`server/discover` first and must end on 2026-07-28). Reads ENGRAM_URL, ENGRAM_KEY,
ENGRAM_OTHER_KEY (another project's key), ENGRAM_USER_TOKEN (an end-user token of `u-token`)
and ENGRAM_NATIVE_ID (a memory added through /v1). Prints one `KEPT <id>` line for the memory
it leaves for the Rust side to read over /v1, and `RESULT ok` or `RESULT <what failed>`.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = os.environ["ENGRAM_URL"].rstrip("/") + "/mcp"
KEY = os.environ["ENGRAM_KEY"]
OTHER_KEY = os.environ["ENGRAM_OTHER_KEY"]
USER_TOKEN = os.environ["ENGRAM_USER_TOKEN"]
NATIVE_ID = os.environ["ENGRAM_NATIVE_ID"]
MODE = sys.argv[1]

TOOLS = sorted([
    "add_memory", "delete_all_memories", "delete_memory", "end_run", "get_context",
    "get_memory", "get_state", "list_memories", "memory_history", "record_step",
    "search_memories", "set_state", "start_run", "update_memory",
])


class Failed(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failed(what)


def structured(result, what):
    """The tool's answer: structuredContent, which must equal the JSON of its text block."""
    check(not result.is_error, f"{what} answered isError: {text_of(result)}")
    check(result.structured_content is not None, f"{what} has no structuredContent")
    check(json.loads(text_of(result)) == result.structured_content,
          f"{what}: the text block is not the structured content")
    return result.structured_content


def text_of(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def refused(result, what):
    check(result.is_error, f"{what} was not refused: {text_of(result)}")
    return result.structured_content or json.loads(text_of(result))


async def connect(token, body):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(URL, http_client=http), mode=MODE) as client:
        return await body(client)


async def round_trip(client):
    version = client.session.protocol_version
    expected = "2025-11-25" if MODE == "legacy" else "2026-07-28"
    check(version == expected, f"negotiated {version}, expected {expected}")
    names = sorted(tool.name for tool in (await client.list_tools()).tools)
    check(names == TOOLS, f"tools/list gave {names}")
    user = f"u-py-{MODE}"

    added = structured(await client.call_tool("add_memory", {
        "content": "Prefers answers in three bullet points", "user_id": user,
        "kind": "preference", "key": "reply_style"}), "add_memory")
    memory_id = added["id"]
    check(added["user_id"] == user and added["source"] == "model_inferred",
          f"add_memory stored {added}")

    found = structured(await client.call_tool("search_memories", {
        "query": "how should replies be formatted?", "user_id": user, "top_k": 5}), "search_memories")
    check([hit["memory"]["id"] for hit in found["results"]][:1] == [memory_id],
          f"search_memories did not find it first: {found}")
    check(found.get("recall_id"), "search_memories gave no recall_id")

    got = structured(await client.call_tool("get_memory", {"id": memory_id}), "get_memory")
    check(got["content"] == "Prefers answers in three bullet points", f"get_memory gave {got}")

    updated = structured(await client.call_tool("update_memory", {
        "id": memory_id, "content": "Prefers answers in two short paragraphs",
        "reason": "the user corrected it", "expected_version": got["version"]}), "update_memory")
    check(updated["version"] == got["version"] + 1, f"update_memory gave {updated}")
    stale = refused(await client.call_tool("update_memory", {
        "id": memory_id, "content": "stale", "expected_version": got["version"]}), "a stale update")
    check(stale["status"] == 409, f"a stale update answered {stale}")

    history = structured(await client.call_tool("memory_history", {"id": memory_id}), "memory_history")
    contents = [entry.get("content") for entry in history["history"]]
    check("Prefers answers in three bullet points" in contents
          and "Prefers answers in two short paragraphs" in contents, f"memory_history gave {history}")

    context = structured(await client.call_tool("get_context", {
        "query": "reply format", "user_id": user, "token_budget": 400}), "get_context")
    check("two short paragraphs" in context["context"], f"get_context gave {context}")

    listed = structured(await client.call_tool("list_memories", {"user_id": user}), "list_memories")
    check([memory["id"] for memory in listed["memories"]] == [memory_id], f"list_memories gave {listed}")

    run = structured(await client.call_tool("start_run", {"task": "answer a question", "user_id": user}), "start_run")
    structured(await client.call_tool("record_step", {
        "run_id": run["run_id"], "type": "note", "text": "looked up the reply style"}), "record_step")
    ended = structured(await client.call_tool("end_run", {"run_id": run["run_id"], "outcome": "success"}), "end_run")
    check(ended["status"] == "ended" and ended["step_count"] >= 1, f"end_run gave {ended}")

    first = structured(await client.call_tool("set_state", {
        "session_id": "task-1", "key": "plan", "value": {"step": 1}, "user_id": user}), "set_state")
    check(first["created"] is True and first["version"] == 1, f"set_state gave {first}")
    state = structured(await client.call_tool("get_state", {"session_id": "task-1", "key": "plan", "user_id": user}), "get_state")
    check(state["value"] == {"step": 1}, f"get_state gave {state}")
    conflict = refused(await client.call_tool("set_state", {
        "session_id": "task-1", "key": "plan", "value": {"step": 2}, "user_id": user,
        "expected_version": 7}), "a state write over the wrong version")
    check(conflict["status"] == 409, f"a stale state write answered {conflict}")

    deleted = structured(await client.call_tool("delete_memory", {"id": memory_id}), "delete_memory")
    check(deleted == {"deleted": memory_id}, f"delete_memory gave {deleted}")
    gone = refused(await client.call_tool("get_memory", {"id": memory_id}), "a deleted memory")
    check(gone["status"] == 404, f"a deleted memory answered {gone}")

    bad = refused(await client.call_tool("search_memories", {"query": "x", "top_k": 1000}), "top_k 1000")
    check(any(error["field"] == "top_k" for error in bad.get("errors", [])), f"top_k 1000 answered {bad}")
    unconfirmed = refused(await client.call_tool("delete_all_memories", {"user_id": user, "confirm": False}),
                          "delete_all_memories without confirm")
    check("confirm" in unconfirmed["detail"], f"an unconfirmed delete_all answered {unconfirmed}")

    native = structured(await client.call_tool("get_memory", {"id": NATIVE_ID}), "the /v1 memory")
    check(native["content"] == "Added through the native API", f"the /v1 memory read as {native}")

    kept = structured(await client.call_tool("add_memory", {
        "content": f"Kept by the {MODE} Python client", "user_id": user}), "add_memory (kept)")
    print(f"KEPT {kept['id']}")
    return kept["id"]


async def other_project(kept_id):
    async def body(client):
        hidden = refused(await client.call_tool("get_memory", {"id": kept_id}), "another project's memory")
        check(hidden["status"] == 404, f"another project's key got {hidden}")
        found = structured(await client.call_tool("search_memories", {"query": f"Kept by the {MODE} Python client"}),
                           "another project's search")
        check(found["results"] == [], f"another project's search found {found}")
    await connect(OTHER_KEY, body)


async def end_user(kept_id):
    async def body(client):
        own = structured(await client.call_tool("add_memory", {"content": "Token user likes tea"}), "a token's add")
        check(own["user_id"] == "u-token", f"a token's add stored user {own['user_id']}")
        other = refused(await client.call_tool("search_memories", {"query": "answers", "user_id": f"u-py-{MODE}"}),
                        "a token naming another user")
        check(other["status"] == 403, f"a token naming another user got {other}")
        hidden = refused(await client.call_tool("get_memory", {"id": kept_id}), "another user's memory")
        check(hidden["status"] == 404, f"a token reading another user's memory got {hidden}")
        await client.call_tool("delete_memory", {"id": own["id"]})
    await connect(USER_TOKEN, body)


async def wrong_token():
    try:
        await connect("egk_live_wrong", lambda client: client.list_tools())
    except BaseException as error:  # the SDK raises an ExceptionGroup around the HTTP 401
        check("API key is unknown" in repr(error), f"a wrong token raised {error!r}")
        return
    raise Failed("a wrong token was accepted")


async def unknown_tool():
    async def body(client):
        try:
            result = await client.call_tool("no_such_tool", {})
        except Exception as error:
            check("-32602" in repr(error) or "unknown tool" in str(error), f"an unknown tool raised {error!r}")
            return
        raise Failed(f"an unknown tool answered {result}")
    await connect(KEY, body)


async def main():
    kept_id = await connect(KEY, round_trip)
    await other_project(kept_id)
    await end_user(kept_id)
    await wrong_token()
    await unknown_tool()


try:
    asyncio.run(main())
except Failed as failure:
    print(f"RESULT {failure}")
    sys.exit(1)
print("RESULT ok")
