// The official MCP TypeScript SDK (@modelcontextprotocol/sdk 1.32.2, the SDK family Claude
// Code is built on; legacy era: `initialize`, 2025-11-25) against a running `engram serve`.
//
// Run by tests/api/mcp_server.rs with the SDK `make setup-test` installs into the machine
// cache (MCP_SDK_DIR). Reads ENGRAM_URL, ENGRAM_KEY, ENGRAM_OTHER_KEY, ENGRAM_USER_TOKEN and
// ENGRAM_NATIVE_ID as the Python check does; prints `KEPT <id>` and `RESULT ok` or
// `RESULT <what failed>`.

const { createRequire } = require("node:module");
const path = require("node:path");

const sdk = createRequire(path.join(process.env.MCP_SDK_DIR, "package.json"));
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");

const URL_ = new URL(process.env.ENGRAM_URL.replace(/\/$/, "") + "/mcp");
const TOOLS = [
  "add_memory", "delete_all_memories", "delete_memory", "end_run", "get_context",
  "get_memory", "get_state", "list_memories", "memory_history", "record_step",
  "search_memories", "set_state", "start_run", "update_memory",
];

class Failed extends Error {}

function check(condition, what) {
  if (!condition) throw new Failed(what);
}

function textOf(result) {
  return result.content.filter((block) => block.type === "text").map((block) => block.text).join("");
}

function structured(result, what) {
  check(!result.isError, `${what} answered isError: ${textOf(result)}`);
  check(result.structuredContent !== undefined, `${what} has no structuredContent`);
  check(JSON.stringify(JSON.parse(textOf(result))) === JSON.stringify(result.structuredContent),
    `${what}: the text block is not the structured content`);
  return result.structuredContent;
}

function refused(result, what) {
  check(result.isError === true, `${what} was not refused: ${textOf(result)}`);
  return result.structuredContent ?? JSON.parse(textOf(result));
}

async function connect(token, body) {
  const transport = new StreamableHTTPClientTransport(URL_, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "engram-peer-check", version: "0.0.1" });
  await client.connect(transport);
  try {
    check(transport.sessionId === undefined, `the server issued a session id: ${transport.sessionId}`);
    return await body(client);
  } finally {
    await client.close();
  }
}

async function roundTrip(client) {
  const version = client.getServerVersion();
  check(version && version.name === "engram", `server info ${JSON.stringify(version)}`);
  const names = (await client.listTools()).tools.map((tool) => tool.name).sort();
  check(JSON.stringify(names) === JSON.stringify(TOOLS), `tools/list gave ${names}`);
  const user = "u-ts";
  const call = (name, args) => client.callTool({ name, arguments: args });

  const added = structured(await call("add_memory", {
    content: "Prefers answers in three bullet points", user_id: user, kind: "preference", key: "reply_style",
  }), "add_memory");
  const id = added.id;
  const found = structured(await call("search_memories", { query: "how should replies be formatted?", user_id: user }),
    "search_memories");
  check(found.results.length > 0 && found.results[0].memory.id === id, `search_memories gave ${JSON.stringify(found)}`);
  const got = structured(await call("get_memory", { id }), "get_memory");
  check(got.content === "Prefers answers in three bullet points", `get_memory gave ${JSON.stringify(got)}`);
  const updated = structured(await call("update_memory", {
    id, content: "Prefers answers in two short paragraphs", expected_version: got.version,
  }), "update_memory");
  check(updated.version === got.version + 1, `update_memory gave ${JSON.stringify(updated)}`);
  const history = structured(await call("memory_history", { id }), "memory_history");
  check(history.history.length >= 2, `memory_history gave ${JSON.stringify(history)}`);
  const context = structured(await call("get_context", { query: "reply format", user_id: user, token_budget: 400 }),
    "get_context");
  check(context.context.includes("two short paragraphs"), `get_context gave ${JSON.stringify(context)}`);
  const deleted = structured(await call("delete_memory", { id }), "delete_memory");
  check(deleted.deleted === id, `delete_memory gave ${JSON.stringify(deleted)}`);
  const gone = refused(await call("get_memory", { id }), "a deleted memory");
  check(gone.status === 404, `a deleted memory answered ${JSON.stringify(gone)}`);

  const native = structured(await call("get_memory", { id: process.env.ENGRAM_NATIVE_ID }), "the /v1 memory");
  check(native.content === "Added through the native API", `the /v1 memory read as ${JSON.stringify(native)}`);

  let unknown;
  try {
    unknown = await call("no_such_tool", {});
  } catch (error) {
    check(error.code === -32602, `an unknown tool raised code ${error.code}: ${error.message}`);
  }
  check(unknown === undefined, `an unknown tool answered ${JSON.stringify(unknown)}`);

  const kept = structured(await call("add_memory", { content: "Kept by the TypeScript client", user_id: user }),
    "add_memory (kept)");
  console.log(`KEPT ${kept.id}`);
  return kept.id;
}

async function main() {
  const keptId = await connect(process.env.ENGRAM_KEY, roundTrip);
  await connect(process.env.ENGRAM_OTHER_KEY, async (client) => {
    const hidden = refused(await client.callTool({ name: "get_memory", arguments: { id: keptId } }),
      "another project's memory");
    check(hidden.status === 404, `another project's key got ${JSON.stringify(hidden)}`);
  });
  await connect(process.env.ENGRAM_USER_TOKEN, async (client) => {
    const other = refused(await client.callTool({
      name: "list_memories", arguments: { user_id: "u-ts" },
    }), "a token naming another user");
    check(other.status === 403, `a token naming another user got ${JSON.stringify(other)}`);
  });
  let rejected = false;
  try {
    await connect("egk_live_wrong", async (client) => client.listTools());
  } catch (error) {
    rejected = String(error).includes("401") || String(error.code) === "401";
    check(rejected, `a wrong token raised ${error}`);
  }
  check(rejected, "a wrong token was accepted");
}

main().then(
  () => console.log("RESULT ok"),
  (error) => {
    console.log(`RESULT ${error instanceof Failed ? error.message : error.stack}`);
    process.exit(1);
  },
);
