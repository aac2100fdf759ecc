"""A real MCP client (the PyPI `mcp` SDK's `ClientSession`), driven line by
line so that a Rust test can act between steps (edit a file, then wait for a
notification).

    python mcp_client.py [OPTION]... stdio COMMAND [ARG...]
    python mcp_client.py [OPTION]... http URL [HEADER: VALUE]...

`--sampling` declares the capability and answers every
`sampling/createMessage` with "sampled by the agent: <first message text>";
`--elicitation` declares it and accepts every form with `{"name": "Agent"}`;
`--name=NAME` makes the agent answer as NAME instead of "the agent"/"Agent"
(so that a test tells agents apart); `--roots=URI,...` declares roots and
answers `roots/list` with those URIs; `--open-pages=COMMAND` declares
elicitation (form and URL mode) and, asked to open a page (URL mode), runs
`COMMAND URL` in the background — the user opening it — and accepts.

Each stdin line is one JSON command; each answer is one stdout line,
`{"ok": ...}` or `{"error": "..."}`. Commands (`op`):

- `list_tools`, `list_prompts`, `list_resources`, `list_resource_templates`:
  every page, followed (`{"items": [...], "pages": N}`).
- `call_tool` (`name`, `arguments`, `progress`: ask for progress): the
  result as the SDK parsed it, plus `progress` (the notifications received).
- `read_resource` (`uri`), `get_prompt` (`name`, `arguments`).
- `notifications`: every server notification method received so far.
- `wait_notification` (`method`, `count`, `timeout`): until `count` of
  `method` have arrived, or an error after `timeout` seconds.
- `session`: what `initialize` negotiated.

The script ends when stdin closes; leaving the `async with` blocks closes the
session the way an agent does (stdin close, or DELETE for HTTP).

It runs under the SDK's 1.x (`.peers/venv-mcp1`) as under its 2.x
(`.peers/venv`); where their APIs differ, `V1` says which is which.
"""

import json
import os
import subprocess
import sys
import threading
from importlib.metadata import version

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# The SDK's 1.x: the protocol's types are `mcp.types` (2.x: the `mcp_types`
# package), notifications reach the message handler wrapped in a `RootModel`,
# results keep the wire's camelCase field names, the session keeps no
# `initialize_result`, and the HTTP transport yields a third item (the
# session id getter).
V1 = version("mcp").startswith("1.")
if V1:
    from mcp import types
else:
    import mcp_types as types


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Driver:
    def __init__(self, session):
        self.session = session
        # What `initialize` returned (1.x keeps it nowhere else).
        self.initialized = None
        self.seen = []
        # The params of the log lines and resource updates received.
        self.messages = []
        self.arrived = anyio.Event()

    async def on_message(self, message):
        if V1 and isinstance(message, types.ServerNotification):
            message = message.root
        if isinstance(message, Exception):
            self.seen.append(f"exception: {message}")
        else:
            self.seen.append(message.method)
            if message.method in ("notifications/message", "notifications/resources/updated"):
                self.messages.append({"method": message.method, "params": dump(message.params)})
        self.arrived.set()
        self.arrived = anyio.Event()

    async def all_pages(self, method, field):
        items, cursor, pages = [], None, 0
        while True:
            params = {"cursor": cursor} if cursor else None
            result = dump(await getattr(self.session, method)(params=params))
            pages += 1
            items.extend(result[field])
            cursor = result.get("nextCursor")
            if not cursor:
                return {"items": items, "pages": pages}

    async def run(self, command):
        op = command["op"]
        if op == "list_tools":
            return await self.all_pages("list_tools", "tools")
        if op == "list_prompts":
            return await self.all_pages("list_prompts", "prompts")
        if op == "list_resources":
            return await self.all_pages("list_resources", "resources")
        if op == "list_resource_templates":
            return await self.all_pages("list_resource_templates", "resourceTemplates")
        if op == "call_tool":
            progress = []

            async def on_progress(value, total, message):
                progress.append({"progress": value, "total": total, "message": message})

            result = await self.session.call_tool(
                command["name"],
                command.get("arguments") or {},
                progress_callback=on_progress if command.get("progress") else None,
                meta=command.get("meta"),
            )
            return {"result": dump(result), "progress": progress}
        if op == "subscribe":
            return dump(await self.session.subscribe_resource(command["uri"]))
        if op == "unsubscribe":
            return dump(await self.session.unsubscribe_resource(command["uri"]))
        if op == "set_level":
            return dump(await self.session.set_logging_level(command["level"]))
        if op == "roots_changed":
            await self.session.send_roots_list_changed()
            return True
        if op == "messages":
            return list(self.messages)
        if op == "read_resource":
            return dump(await self.session.read_resource(command["uri"]))
        if op == "get_prompt":
            return dump(await self.session.get_prompt(command["name"], command.get("arguments")))
        if op == "notifications":
            return list(self.seen)
        if op == "wait_notification":
            method, count = command["method"], command.get("count", 1)
            with anyio.fail_after(command.get("timeout", 20)):
                while self.seen.count(method) < count:
                    await self.arrived.wait()
            return list(self.seen)
        if op == "session":
            result = self.initialized if V1 else self.session.initialize_result
            return dump(result) if result is not None else None
        raise ValueError(f"unknown op {op!r}")


def option(options, name):
    """The value of `--name=VALUE` among `options`, if given."""
    for given in options:
        if given.startswith(f"--{name}="):
            return given.split("=", 1)[1]
    return None


def sampler(who):
    async def sample(context, params):
        first = params.messages[0].content if params.messages else None
        asked = getattr(first, "text", "")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled by {who}: {asked}"),
            model="test-model",
        )

    return sample


def elicitor(name, open_pages=None):
    async def elicit(context, params):
        url = getattr(params, "url", None)
        if url is not None and open_pages:
            opened = subprocess.Popen(
                ["sh", "-c", f'{open_pages} "$1"', "sh", url],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
            threading.Thread(target=opened.wait, daemon=True).start()
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": name})

    return elicit


def rooter(uris):
    async def list_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in uris])

    return list_roots


async def serve(read, write, options):
    driver = None

    async def handler(message):
        await driver.on_message(message)

    callbacks = {}
    name = option(options, "name")
    if "--sampling" in options:
        callbacks["sampling_callback"] = sampler(name or "the agent")
    open_pages = option(options, "open-pages")
    if "--elicitation" in options or open_pages:
        callbacks["elicitation_callback"] = elicitor(name or "Agent", open_pages)
    roots = option(options, "roots")
    if roots:
        callbacks["list_roots_callback"] = rooter(roots.split(","))
    async with ClientSession(read, write, message_handler=handler, **callbacks) as session:
        driver = Driver(session)
        driver.initialized = await session.initialize()
        print(json.dumps({"ok": "initialized"}), flush=True)
        stdin = anyio.wrap_file(sys.stdin)
        async for line in stdin:
            if not line.strip():
                continue
            try:
                answer = {"ok": await driver.run(json.loads(line))}
            except Exception as error:  # the test reads the message
                answer = {"error": f"{type(error).__name__}: {error}"}
            print(json.dumps(answer), flush=True)


async def main(argv):
    options = []
    while argv and argv[0].startswith("--"):
        options.append(argv.pop(0))
    if len(argv) < 2 or argv[0] not in ("stdio", "http"):
        sys.exit(__doc__)
    if argv[0] == "stdio":
        # The SDK passes only HOME, PATH and a few more by default; agents
        # that register Steward pass QWEN_HOME and friends the same way.
        params = StdioServerParameters(command=argv[1], args=argv[2:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            await serve(read, write, options)
    else:
        headers = dict(h.split(": ", 1) for h in argv[2:])
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(argv[1], http_client=http) as streams:
                read, write = streams[:2]  # 1.x: and the session id getter
                await serve(read, write, options)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
