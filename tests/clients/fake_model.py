"""A scripted model behind an OpenAI-compatible chat completions endpoint, so
that a real agent (Qwen Code in headless mode) can be driven to call tools
without a real model.

    python fake_model.py PORT_FILE LOG_FILE TOOL[,TOOL...]

It listens on 127.0.0.1 (a free port, written to PORT_FILE once it
listens) and answers every `POST .../chat/completions`: a request that
holds N tool results and offers a function whose name ends with the
(N+1)-th TOOL gets a call of that function (no arguments); any other
request (the last tool answered, or a side question of the agent) gets the
text "done". Each request body is appended to LOG_FILE as one JSON line,
so that the test reads what each tool returned from the agent's next
request. Both plain and streamed (`"stream": true`) answers are given.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer(body, tools):
    """The assistant message for `body`, and why it ends: a tool call or "done"."""
    answered = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    if answered < len(tools):
        for offered in body.get("tools") or []:
            name = offered.get("function", {}).get("name", "")
            if name.endswith(tools[answered]):
                call = {"id": f"call_{answered + 1}", "type": "function", "function": {"name": name, "arguments": "{}"}}
                return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"role": "assistant", "content": "done"}, "stop"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with open(self.server.log, "a") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        message, finish = answer(body, self.server.tools)
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        base = {"id": "chatcmpl-1", "created": 0, "model": body.get("model", "fake")}
        if body.get("stream"):
            delta = dict(message)
            if "tool_calls" in delta:
                delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(delta["tool_calls"])]
            chunks = [
                {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
            ]
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            self.reply("text/event-stream", data.encode())
        else:
            whole = {**base, "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}
            self.reply("application/json", json.dumps(whole).encode())

    def do_GET(self):
        # Model listings, health checks: one model.
        self.reply("application/json", json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode())

    def reply(self, content_type, data):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(port_file, log, tools):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.log, server.tools = log, tools.split(",")
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    # Renamed into place: whoever sees the file sees the whole port.
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
