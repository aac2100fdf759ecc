"""The PyPI `mcp` SDK's high-level `Client` in its default mode ("auto":
probe `server/discover`, adopt 2026-07-28 when the server speaks it, else
fall back to `initialize`), run against a stdio server:

    python modern_client.py TOOL ARGUMENTS_JSON COMMAND [ARG...]

Prints one JSON line per step: the negotiated protocol version and the tool
names, the text of a call to TOOL, then `{"listening": true}` once a
`subscriptions/listen` for tool list changes is acknowledged; at the
first change event after which the tool names differ (within 30 s) the
tool names and how many events came; then it exits.
"""

import json
import os
import sys

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters


def say(**fields):
    print(json.dumps(fields), flush=True)


async def names(client):
    return sorted(tool.name for tool in (await client.list_tools()).tools)


async def main(argv):
    tool, arguments, command, args = argv[0], json.loads(argv[1]), argv[2], argv[3:]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with Client(params) as client:
        say(version=client.protocol_version, tools=await names(client))
        result = await client.call_tool(tool, arguments)
        say(call="\n".join(c.text for c in result.content if getattr(c, "text", None)))
        first = now = await names(client)
        events = 0
        async with client.listen(tools_list_changed=True) as subscription:
            say(listening=True)
            with anyio.fail_after(30):
                async for _event in subscription:
                    events += 1
                    now = await names(client)
                    if now != first:
                        break
        say(changed=now, events=events)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
