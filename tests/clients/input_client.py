"""The PyPI `mcp` SDK's high-level `Client` in its default mode (it adopts
2026-07-28 when the server speaks it), calling one tool over stdio and
answering what the server asks — elicitation (`{"name": "Modern"}`) and
sampling ("sampled by Modern") — the way a 2026-07-28 client does: its
call comes back `input_required`, the SDK asks its callbacks and retries.

    python input_client.py TOOL ARGUMENTS_JSON COMMAND [ARG...]

Prints one JSON line: the negotiated version, the text of the result, and
how many times a callback was asked (`rounds`).
"""

import json
import os
import sys

import anyio
import mcp_types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

asked = 0


async def elicit(context, params):
    global asked
    asked += 1
    return types.ElicitResult(action="accept", content={"name": "Modern"})


async def sample(context, params):
    global asked
    asked += 1
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled by Modern"),
        model="test-model",
    )


async def main(argv):
    tool, arguments, command, args = argv[0], json.loads(argv[1]), argv[2], argv[3:]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with Client(params, elicitation_callback=elicit, sampling_callback=sample) as client:
        result = await client.call_tool(tool, arguments)
        text = "\n".join(c.text for c in result.content if getattr(c, "text", None))
        print(json.dumps({"version": client.protocol_version, "text": text, "rounds": asked}), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
