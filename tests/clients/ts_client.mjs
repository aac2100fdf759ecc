// A real MCP client (the TypeScript SDK's `Client`, `@modelcontextprotocol/sdk`
// from the peers directory), driven line by line like mcp_client.py so that a
// Rust test can act between steps.
//
//     node ts_client.mjs [OPTION]... stdio COMMAND [ARG...]
//     node ts_client.mjs [OPTION]... http URL [HEADER: VALUE]...
//
// The options mean what they mean to mcp_client.py: `--sampling` declares the
// capability and answers every `sampling/createMessage` with "sampled by the
// agent: <first message text>"; `--elicitation` declares it (form mode, what
// this SDK declares by default) and accepts every form with
// `{"name": "Agent"}` plus "Agent" for each other required string property of
// the requested schema; `--name=NAME` makes the agent answer as NAME instead
// of "the agent"/"Agent" (so that a test tells agents apart);
// `--roots=URI,...` declares roots and answers `roots/list` with those URIs;
// `--open-pages=COMMAND` declares URL-mode elicitation too and answers a
// URL-mode request by running `COMMAND URL` (the user's browser) and
// accepting.
//
// Each stdin line is one JSON command; each answer is one stdout line,
// `{"ok": ...}` or `{"error": "..."}`. Commands (`op`): `list_tools` (every
// page: `{"items": [...], "pages": N}`), `call_tool` (`name`, `arguments`,
// `progress`, `meta`: the request's `_meta`;
// `{"result": ..., "progress": [...]}`), `roots_changed` (sends
// `notifications/roots/list_changed`), `session` (the server's name and
// instructions), `notifications` (every server notification method received
// so far) and `wait_notification` (`method`, `count`, `timeout` seconds:
// until `count` of `method` arrived).
//
// The 2025-11-25 tasks (experimental in this SDK, `client.experimental.tasks`;
// the client needs no capability of its own for them, the server must declare
// `tasks.requests.tools.call`): `call_tool_stream` (`name`, `arguments`,
// `ttl`: the task's TTL in ms, which makes the call task-augmented even for a
// tool the SDK does not know as one; `until`: a message type to stop after,
// e.g. "taskCreated" to leave the task running) calls the tool through
// `callToolStream` and answers `{"messages": [...]}`, each message
// `{"type": "taskCreated", "taskId", "status"}`,
// `{"type": "taskStatus", "taskId", "status", "statusMessage"}`,
// `{"type": "result", "result": <the CallToolResult>}` or
// `{"type": "error", "error": "<message>"}`. The SDK makes the call a task
// only for a tool whose listed `execution.taskSupport` is "optional" or
// "required", so the command lists the tools first if it has not seen this
// one yet. It then polls `tasks/get` (every `pollInterval`) until the task
// ends, and gets the result with `tasks/result`; at `input_required` it calls
// `tasks/result` at once, which carries the server's requests (elicitation,
// sampling) and blocks until the result. (The SDK repeats the call's `task`
// in the params of those `tasks/get` and `tasks/result`.) `list_tasks` (every page:
// `{"tasks": [...]}`), `get_task` (`taskId`: the task), `cancel_task`
// (`taskId`: the cancelled task) and `task_result` (`taskId`: the
// CallToolResult) send `tasks/list`, `tasks/get`, `tasks/cancel` and
// `tasks/result`.
//
// The script ends when stdin closes; an HTTP session is ended with DELETE
// first, as the PyPI SDK does.
// The peers directory is $STEWARD_PEERS_DIR (set by .ci/run and the tests).

import { spawn } from "node:child_process";
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
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} = await sdk("types.js");

const argv = process.argv.slice(2);
const options = [];
while (argv.length > 0 && argv[0].startsWith("--")) {
  options.push(argv.shift());
}
// The value of `--name=VALUE` among the options, if given.
const option = (name) =>
  options.find((given) => given.startsWith(`--${name}=`))?.slice(name.length + 3);

const [mode, target, ...rest] = argv;
if (!["stdio", "http"].includes(mode) || !target) {
  console.error("usage: node ts_client.mjs [OPTION]... stdio COMMAND [ARG...]");
  console.error("       node ts_client.mjs [OPTION]... http URL [HEADER: VALUE]...");
  process.exit(2);
}

const name = option("name");
const roots = option("roots")?.split(",");
const capabilities = {};
if (options.includes("--sampling")) capabilities.sampling = {};
const openPages = option("open-pages");
if (options.includes("--elicitation")) capabilities.elicitation = { form: {} };
if (openPages) capabilities.elicitation = { form: {}, url: {} };
if (roots) capabilities.roots = { listChanged: true };

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({
    command: target,
    args: rest,
    env: process.env,
    stderr: "inherit",
  });
} else {
  const headers = Object.fromEntries(
    rest.map((h) => [h.slice(0, h.indexOf(": ")), h.slice(h.indexOf(": ") + 2)]),
  );
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
}
const client = new Client({ name: "steward-ts-test", version: "1.0.0" }, { capabilities });
if (capabilities.sampling) {
  const who = name ?? "the agent";
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    // Content is one block, or (2025-11-25) a list of them.
    const first = request.params.messages[0]?.content;
    const block = Array.isArray(first) ? first[0] : first;
    return {
      role: "assistant",
      content: { type: "text", text: `sampled by ${who}: ${block?.text ?? ""}` },
      model: "test-model",
    };
  });
}
if (capabilities.elicitation) {
  const answer = name ?? "Agent";
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    if (request.params.mode === "url" && openPages) {
      // The page opens on its own; the answer says the user went there.
      const opened = spawn("sh", ["-c", `${openPages} "$1"`, "sh", request.params.url], {
        stdio: ["ignore", "ignore", "inherit"],
      });
      opened.on("error", (error) => console.error(`open-pages: ${error}`));
      return { action: "accept" };
    }
    // `name`, and the answer for every other required string property (a
    // server that asks something else gets an answer all the same).
    const content = { name: answer };
    const schema = request.params.requestedSchema;
    for (const property of schema?.required ?? []) {
      if (schema.properties?.[property]?.type === "string") content[property] = answer;
    }
    return { action: "accept", content };
  });
}
if (roots) {
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: roots.map((uri) => ({ uri })),
  }));
}
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

// The names of the tools listed so far.
const listed = new Set();
// Every page of `tools/list`. The SDK keeps what it knows of the tools (output
// schemas, task support) from the last page only, so it is given them all.
async function listTools() {
  const items = [];
  let cursor;
  let pages = 0;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    items.push(...page.tools);
    cursor = page.nextCursor;
    pages += 1;
  } while (cursor);
  client.cacheToolMetadata(items);
  for (const tool of items) listed.add(tool.name);
  return { items, pages };
}

// A message of `callToolStream`, as `call_tool_stream` answers it.
function summary(message) {
  switch (message.type) {
    case "taskCreated":
      return { type: message.type, taskId: message.task.taskId, status: message.task.status };
    case "taskStatus":
      return {
        type: message.type,
        taskId: message.task.taskId,
        status: message.task.status,
        statusMessage: message.task.statusMessage ?? null,
      };
    case "result":
      return { type: message.type, result: message.result };
    case "error":
      return { type: message.type, error: message.error?.message ?? String(message.error) };
    default:
      return message;
  }
}

async function run(command) {
  switch (command.op) {
    case "list_tools":
      return await listTools();
    case "call_tool": {
      const progress = [];
      const params = { name: command.name, arguments: command.arguments ?? {} };
      if (command.meta) params._meta = command.meta;
      const result = await client.callTool(
        params,
        undefined,
        command.progress ? { onprogress: (p) => progress.push(p) } : {},
      );
      return { result, progress };
    }
    case "call_tool_stream": {
      if (!listed.has(command.name)) await listTools();
      const params = { name: command.name, arguments: command.arguments ?? {} };
      const options = command.ttl === undefined ? {} : { task: { ttl: command.ttl } };
      const messages = [];
      const stream = client.experimental.tasks.callToolStream(
        params,
        CallToolResultSchema,
        options,
      );
      for await (const message of stream) {
        messages.push(summary(message));
        if (message.type === command.until) break;
      }
      return { messages };
    }
    case "list_tasks": {
      const tasks = [];
      let cursor;
      do {
        const page = await client.experimental.tasks.listTasks(cursor);
        tasks.push(...page.tasks);
        cursor = page.nextCursor;
      } while (cursor);
      return { tasks };
    }
    case "get_task":
      return await client.experimental.tasks.getTask(command.taskId);
    case "cancel_task":
      return await client.experimental.tasks.cancelTask(command.taskId);
    case "task_result":
      return await client.experimental.tasks.getTaskResult(command.taskId, CallToolResultSchema);
    case "roots_changed":
      await client.sendRootsListChanged();
      return true;
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
if (mode === "http") {
  await transport.terminateSession();
}
await client.close();
