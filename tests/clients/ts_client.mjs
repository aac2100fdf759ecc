// A real MCP client (the TypeScript SDK's `Client`, `@modelcontextprotocol/sdk`
// from the peers directory), driven line by line like mcp_client.py so that a
// Rust test can act between steps.
//
//     node ts_client.mjs stdio COMMAND [ARG...]
//
// Each stdin line is one JSON command; each answer is one stdout line,
// `{"ok": ...}` or `{"error": "..."}`. Commands (`op`): `list_tools` (every
// page: `{"items": [...], "pages": N}`), `call_tool` (`name`, `arguments`,
// `progress`: `{"result": ..., "progress": [...]}`),
// `session` (the server's name and instructions), `notifications` (every
// server notification method received so far) and `wait_notification`
// (`method`, `count`, `timeout` seconds: until `count` of `method` arrived).
// The peers directory is $STEWARD_PEERS_DIR (set by .ci/run and the tests).

import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const peers = process.env.STEWARD_PEERS_DIR;
if (!peers) {
  console.error("STEWARD_PEERS_DIR is not set: run .ci/run to install the peers");
  process.exit(2);
}
const sdk = (path) =>
  import(pathToFileURL(join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");

const [mode, command, ...args] = process.argv.slice(2);
if (mode !== "stdio" || !command) {
  console.error("usage: node ts_client.mjs stdio COMMAND [ARG...]");
  process.exit(2);
}

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "steward-ts-test", version: "1.0.0" });
// Every notification the server sends, by method (no specific handler is
// registered, so each reaches the fallback).
const seen = [];
let arrived = () => {};
client.fallbackNotificationHandler = async (notification) => {
  seen.push(notification.method);
  arrived();
};
await client.connect(transport);
console.log(JSON.stringify({ ok: "initialized" }));

async function run(command) {
  switch (command.op) {
    case "list_tools": {
      const items = [];
      let cursor;
      let pages = 0;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        items.push(...page.tools);
        cursor = page.nextCursor;
        pages += 1;
      } while (cursor);
      return { items, pages };
    }
    case "call_tool": {
      const progress = [];
      const result = await client.callTool(
        { name: command.name, arguments: command.arguments ?? {} },
        undefined,
        command.progress ? { onprogress: (p) => progress.push(p) } : {},
      );
      return { result, progress };
    }
    case "notifications":
      return [...seen];
    case "wait_notification": {
      const count = command.count ?? 1;
      const deadline = Date.now() + (command.timeout ?? 20) * 1000;
      while (seen.filter((m) => m === command.method).length < count) {
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new Error(`no ${count} ${command.method} within ${command.timeout ?? 20} s: ${seen}`);
        }
        // The timer is cleared once a notification came: a pending one
        // would keep Node running after stdin closes.
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, left);
          arrived = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      return [...seen];
    }
    case "session":
      return {
        server: client.getServerVersion() ?? null,
        instructions: client.getInstructions() ?? null,
      };
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = { ok: await run(JSON.parse(line)) };
  } catch (error) {
    answer = { error: `${error.name}: ${error.message}` };
  }
  console.log(JSON.stringify(answer));
}
await client.close();
