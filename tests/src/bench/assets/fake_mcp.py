#!/usr/bin/env python3
"""A fake MCP server started by an interpreter (steward-bench: what a
sandbox costs a Python server). Standard library only; newline-delimited
JSON-RPC on stdio; reads the compiled fake's FAKE_MCP_CONFIG for its name,
tools and prompts, and answers initialize, tools/list, prompts/list,
tools/call (echo) and ping."""
import json
import os
import sys

config = json.loads(os.environ.get("FAKE_MCP_CONFIG") or "{}")
name = config.get("name", "py")
tools = config.get("tools", ["t1"])
prompts = config.get("prompts", [])


def answer(id_, result=None, error=None):
    msg = {"jsonrpc": "2.0", "id": id_}
    if error is not None:
        msg["error"] = error
    else:
        msg["result"] = result
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    method, id_ = req.get("method"), req.get("id")
    if id_ is None:
        continue
    if method == "initialize":
        answer(id_, {
            "protocolVersion": req.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}, "prompts": {}},
            "serverInfo": {"name": name, "version": "1"},
        })
    elif method == "tools/list":
        answer(id_, {"tools": [
            {"name": t, "description": "echo", "inputSchema": {"type": "object"}} for t in tools
        ]})
    elif method == "prompts/list":
        answer(id_, {"prompts": [{"name": p} for p in prompts]})
    elif method == "tools/call":
        args = req.get("params", {}).get("arguments", {})
        answer(id_, {"content": [{"type": "text", "text": json.dumps(args)}]})
    elif method == "ping":
        answer(id_, {})
    else:
        answer(id_, error={"code": -32601, "message": "method not found"})
