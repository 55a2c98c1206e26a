#!/usr/bin/env python3
"""An MCP server (stdio, standard library only) that misbehaves on purpose, for tests.

    mcp_misbehave.py [--stubborn]

Its tools, all read-only:
    image(bytes)      one image/png of that many bytes
    images(count)     that many images of 8 bytes each, in one result
    huge(mib, last)   a text of `mib` MiB: an answer longer than a stdio line may be; with
                      `last` its id is written at the end (as the TypeScript SDK does),
                      else first (as the Python SDK does)
    signals()         this process's pid and its SigBlk and SigIgn lines of /proc
    detach()          starts a grandchild in a session of its own, which ignores SIGTERM and
                      sleeps; answers its pid
With --stubborn it does not end when its stdin ends (it sleeps instead).
"""

import base64
import json
import os
import subprocess
import sys
import time

STUBBORN = "--stubborn" in sys.argv[1:]

SCHEMA = {"type": "object", "properties": {}, "additionalProperties": False}
ANNOTATIONS = {"readOnlyHint": True, "openWorldHint": False}
TOOLS = [
    ("image", "one image of N bytes", {"bytes": {"type": "integer"}}, ["bytes"]),
    ("images", "N small images", {"count": {"type": "integer"}}, ["count"]),
    ("huge", "a text of N MiB", {"mib": {"type": "integer"}, "last": {"type": "boolean"}}, ["mib"]),
    ("signals", "this server's signal mask", {}, []),
    ("detach", "starts a detached grandchild", {}, []),
]


def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(mid, result):
    send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}))


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def signals():
    with open("/proc/self/status") as f:
        lines = [l.strip() for l in f if l.startswith(("SigBlk:", "SigIgn:"))]
    return f"pid {os.getpid()}\n" + "\n".join(lines)


def detach():
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint(flush=True)\ntime.sleep(600)\n"
    child = subprocess.Popen(
        [sys.executable, "-c", code, "mcp-misbehave-grandchild"],
        start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    # Answered once it ignores SIGTERM.
    child.stdout.readline()
    child.stdout.close()
    return f"grandchild {child.pid}"


def call(mid, name, args):
    if name == "image":
        data = base64.b64encode(bytes(i % 251 for i in range(args["bytes"]))).decode()
        answer(mid, {"content": [{"type": "image", "mimeType": "image/png", "data": data}]})
    elif name == "images":
        data = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
        block = {"type": "image", "mimeType": "image/png", "data": data}
        answer(mid, {"content": [block] * args["count"]})
    elif name == "huge":
        body = json.dumps(text("x" * (args["mib"] << 20)))
        if args.get("last"):
            send('{"result":' + body + ',"jsonrpc":"2.0","id":' + json.dumps(mid) + "}")
        else:
            send('{"jsonrpc":"2.0","id":' + json.dumps(mid) + ',"result":' + body + "}")
    elif name == "signals":
        answer(mid, text(signals()))
    elif name == "detach":
        answer(mid, text(detach()))
    else:
        answer(mid, {**text(f"no tool {name}"), "isError": True})


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if mid is None or method is None:
            continue
        if method == "initialize":
            answer(mid, {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-misbehave", "version": "1.0.0"},
            })
        elif method == "tools/list":
            answer(mid, {"tools": [
                {"name": n, "description": d, "annotations": ANNOTATIONS,
                 "inputSchema": {**SCHEMA, "properties": p, "required": r}}
                for n, d, p, r in TOOLS
            ]})
        elif method == "tools/call":
            call(mid, params.get("name"), params.get("arguments") or {})
        elif method == "ping":
            answer(mid, {})
        else:
            send(json.dumps({"jsonrpc": "2.0", "id": mid,
                             "error": {"code": -32601, "message": f"no method {method}"}}))
    if STUBBORN:
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
