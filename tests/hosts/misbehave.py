#!/usr/bin/env python3
"""A wip host that misbehaves on purpose, for tests (standard library only).

    misbehave.py MODE

It serves a root entry with two ops: `echo(text)` answers its text back, and `misbehave`
does what MODE says:
    crash   exits with status 3 in the middle of the call
    hang    never answers (nor anything after it)
    junk    prints a line that is not JSON-RPC instead of an answer
More modes misbehave from the start:
    mute    never answers initialize
    future  answers initialize with protocol version 99
    slow    answers initialize after $MISBEHAVE_START_MS ms (default 1500), then behaves
Its stderr says what it does, so the daemon's log shows it. $MISBEHAVE_NOTE, if set, is
appended to its root's description (to see a manifest's `env` arrive).
"""

import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "crash"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def ok(mid, result):
    send({"jsonrpc": "2.0", "id": mid, "result": result})


OPS = [
    {"name": "echo", "description": "echo(text): answers the text",
     "schema": {"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"], "additionalProperties": False}},
    {"name": "misbehave", "description": f"misbehaves: {MODE}",
     "schema": {"type": "object", "properties": {}, "additionalProperties": False}},
]


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            if MODE == "mute":
                print("misbehave: not answering initialize", file=sys.stderr, flush=True)
                continue
            if MODE == "slow":
                time.sleep(int(os.environ.get("MISBEHAVE_START_MS", "1500")) / 1000)
            ok(mid, {"protocol": "wip-host-protocol", "version": 99 if MODE == "future" else 1,
                     "name": f"misbehave-{MODE}"})
        elif method == "entry":
            note = os.environ.get("MISBEHAVE_NOTE", "")
            ok(mid, {"description": f"a host that misbehaves ({MODE}){note}, pid {os.getpid()}",
                     "ref": f"misbehave://{MODE}"} if params.get("path") == [] else None)
        elif method == "children":
            ok(mid, {"children": []})
        elif method == "ops":
            ok(mid, OPS if params.get("path") == [] else [])
        elif method == "guard":
            ok(mid, {"conditions": []})
        elif method == "call" and params.get("op") == "echo":
            ok(mid, {"result": f"echo: {params['args'].get('text', '')}\n"})
        elif method == "call" and params.get("op") == "misbehave":
            print(f"misbehave: {MODE} now", file=sys.stderr, flush=True)
            if MODE == "crash":
                os._exit(3)
            if MODE == "hang":
                while True:
                    time.sleep(3600)
            sys.stdout.write("<html>this is not JSON-RPC</html>\n")
            sys.stdout.flush()
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
