// The globals of a run_code program (code mode), evaluated before each
// program as a function of the host's bridges. Nothing of the host is
// reachable from the program except through what this defines:
// tools, callTool, searchTools, console, sleep, ToolError.
(function (hostCall, hostSearch, hostCatalog, hostLog, hostSleep) {
  "use strict";

  const define = (name, value) =>
    Object.defineProperty(globalThis, name, {
      value,
      writable: false,
      enumerable: false,
      configurable: false,
    });

  class ToolError extends Error {
    constructor(message, tool, server) {
      super(message);
      this.name = "ToolError";
      this.tool = tool;
      this.server = server;
    }
  }

  // What JSON cannot say, said as JSON (results and console output).
  const replacer = (_key, value) => {
    if (typeof value === "bigint") return value.toString();
    if (value instanceof Map) return Object.fromEntries(value);
    if (value instanceof Set) return [...value];
    return value;
  };

  const kindOf = (value) =>
    value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;

  const failure = (error) => {
    switch (error.kind) {
      case "ToolError":
        return new ToolError(error.message, error.tool, error.server);
      case "TypeError":
        return new TypeError(error.message);
      default:
        return new Error(error.message);
    }
  };

  const argumentsOf = (what, args) => {
    if (args === undefined) return {};
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      throw new TypeError(
        `${what}: the arguments must be an object (like {"name": "value"}), not ${kindOf(args)}`,
      );
    }
    return args;
  };

  const call = async (target, what, args) => {
    // Taken while the program's frame is on the stack: a failure says
    // which line of the program made the call.
    const site = new Error();
    const request = JSON.stringify({ ...target, arguments: argumentsOf(what, args) }, replacer);
    const answer = JSON.parse(await hostCall(request));
    if (answer.error) {
      const error = failure(answer.error);
      error.stack = site.stack;
      throw error;
    }
    return answer.ok;
  };

  const catalog = () => JSON.parse(hostCatalog());

  // The names JavaScript itself looks up on an object (await, JSON,
  // conversions): a server or tool by such a name is reached only when it
  // is listed (else callTool reaches it).
  const protocol = new Set(["then", "toJSON", "toString", "valueOf", "constructor"]);
  const named = (name, listed) =>
    typeof name === "string" && (!protocol.has(name) || listed().includes(name));

  // tools.SERVER.TOOL(args): any name resolves at call time against the
  // live catalog (a tool added after the run began is reachable); the
  // listing (Object.keys, `in`) is the catalog now.
  const servers = new Map();
  const serverTools = (server) => {
    if (!servers.has(server)) {
      const listed = () => catalog()[server] || [];
      const functions = new Map();
      const tool = (name) => {
        if (!functions.has(name)) {
          const fn = (args) => call({ server, tool: name }, `tools.${server}.${name}`, args);
          functions.set(name, fn);
        }
        return functions.get(name);
      };
      servers.set(
        server,
        new Proxy(Object.create(null), {
          get: (_, name) => (named(name, listed) ? tool(name) : undefined),
          has: (_, name) => listed().includes(name),
          ownKeys: () => listed(),
          getOwnPropertyDescriptor: (_, name) =>
            listed().includes(name)
              ? { value: tool(name), enumerable: true, configurable: true, writable: false }
              : undefined,
          set: () => false,
          defineProperty: () => false,
          deleteProperty: () => false,
        }),
      );
    }
    return servers.get(server);
  };
  const tools = new Proxy(Object.create(null), {
    get: (_, server) =>
      named(server, () => Object.keys(catalog())) ? serverTools(server) : undefined,
    has: (_, server) => Object.hasOwn(catalog(), server),
    ownKeys: () => Object.keys(catalog()),
    getOwnPropertyDescriptor: (_, server) =>
      Object.hasOwn(catalog(), server)
        ? { value: serverTools(server), enumerable: true, configurable: true, writable: false }
        : undefined,
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
  });

  const callTool = (name, args) => {
    if (typeof name !== "string") {
      return Promise.reject(
        new TypeError(`callTool(name, args): name must be a string like "server__tool", not ${kindOf(name)}`),
      );
    }
    return call({ name }, `callTool("${name}")`, args);
  };

  const searchTools = async (query, limit) => {
    if (typeof query !== "string") {
      throw new TypeError(`searchTools(query, limit?): query must be a string, not ${kindOf(query)}`);
    }
    const count = limit === undefined ? 5 : Number(limit);
    if (!Number.isInteger(count) || count < 1) {
      throw new TypeError("searchTools(query, limit?): limit must be a whole number from 1");
    }
    const answer = JSON.parse(hostSearch(query, count));
    if (answer.error) throw failure(answer.error);
    return answer.ok;
  };

  const show = (value) => {
    if (typeof value === "string") return value;
    if (typeof value === "bigint") return value.toString();
    if (value instanceof Error) return `${value.name}: ${value.message}`;
    try {
      const text = JSON.stringify(value, replacer);
      return text === undefined ? String(value) : text;
    } catch {
      return String(value);
    }
  };
  const logger = (level) => (...values) => {
    hostLog(level, values.map(show).join(" "));
  };

  const sleep = async (ms) => {
    const n = Number(ms);
    if (!Number.isFinite(n) || n < 0) {
      throw new TypeError("sleep(ms): ms must be a number of milliseconds, 0 or more");
    }
    await hostSleep(n);
  };

  define("tools", tools);
  define("callTool", callTool);
  define("searchTools", searchTools);
  define("sleep", sleep);
  define("ToolError", ToolError);
  define(
    "console",
    Object.freeze({
      log: logger("log"),
      info: logger("info"),
      debug: logger("debug"),
      warn: logger("warn"),
      error: logger("error"),
    }),
  );

  // The program's result, as JSON text (undefined: nothing returned).
  return {
    run: async (program) => {
      const value = await program();
      return value === undefined ? undefined : JSON.stringify(value, replacer);
    },
  };
})
