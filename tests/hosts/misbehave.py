#!/usr/bin/env python3
"""A wip host that misbehaves on purpose, for tests (standard library only).

    misbehave.py MODE

It serves a root entry with three ops: `echo(text)` answers its text back, `slow(steps, ms)`
takes `steps` steps of `ms` each on a thread of its own, sending a `progress` notification
after each and stopping at the runtime's `cancel` (error -32007), and `misbehave` does
what MODE says:
    crash   exits with status 3 in the middle of the call
    hang    never answers (nor anything after it)
    junk    prints a line that is not JSON-RPC instead of an answer
    stubborn  starts a grandchild in a session of its own (which ignores SIGTERM and
            sleeps) and answers its own pid, the grandchild's and its SigBlk and SigIgn
            lines of /proc; this host does not end when its stdin ends
More modes misbehave from the start:
    mute    never answers initialize
    future  answers initialize with protocol version 99
    slow    answers initialize after $MISBEHAVE_START_MS ms (default 1500), then behaves
Its stderr says what it does, so the daemon's log shows it. $MISBEHAVE_NOTE, if set, is
appended to its root's description (to see a manifest's `env` arrive).
"""

import json
import os
import subprocess
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "crash"


OUT = threading.Lock()
# Calls of `slow` in flight: request id -> an Event set by the runtime's `cancel`.
RUNNING = {}


def send(msg):
    with OUT:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def slow(mid, steps, ms):
    stop = RUNNING[mid]
    for k in range(1, steps + 1):
        if stop.wait(ms / 1000):
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32007, "message": f"stopped at step {k} of {steps}"}})
            break
        send({"jsonrpc": "2.0", "method": "progress",
              "params": {"id": mid, "progress": k, "total": steps, "message": f"step {k}"}})
    else:
        ok(mid, {"result": f"{steps} steps done\n"})
    RUNNING.pop(mid, None)


def stubborn():
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint(flush=True)\ntime.sleep(600)\n"
    child = subprocess.Popen(
        [sys.executable, "-c", code, "misbehave-grandchild"],
        start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    # Answered once it ignores SIGTERM.
    child.stdout.readline()
    child.stdout.close()
    with open("/proc/self/status") as f:
        lines = [l.strip() for l in f if l.startswith(("SigBlk:", "SigIgn:"))]
    return f"pid {os.getpid()}\ngrandchild {child.pid}\n" + "\n".join(lines) + "\n"


def ok(mid, result):
    send({"jsonrpc": "2.0", "id": mid, "result": result})


OPS = [
    {"name": "echo", "description": "echo(text): answers the text",
     "schema": {"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"], "additionalProperties": False}},
    {"name": "slow", "description": "slow(steps, ms): takes steps of ms each, reporting each",
     "schema": {"type": "object", "properties": {"steps": {"type": "integer"}, "ms": {"type": "integer"}},
                "required": ["steps", "ms"], "additionalProperties": False}},
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
        elif method == "ping":
            ok(mid, {})
        elif method == "cancel" and mid is None:
            stop = RUNNING.get(params.get("id"))
            if stop is not None:
                stop.set()
        elif method == "call" and params.get("op") == "slow":
            RUNNING[mid] = threading.Event()
            args = params["args"]
            threading.Thread(target=slow, args=(mid, args["steps"], args["ms"]), daemon=True).start()
        elif method == "call" and params.get("op") == "echo":
            ok(mid, {"result": f"echo: {params['args'].get('text', '')}\n"})
        elif method == "call" and params.get("op") == "misbehave":
            print(f"misbehave: {MODE} now", file=sys.stderr, flush=True)
            if MODE == "crash":
                os._exit(3)
            if MODE == "hang":
                while True:
                    time.sleep(3600)
            if MODE == "stubborn":
                ok(mid, {"result": stubborn()})
                continue
            sys.stdout.write("<html>this is not JSON-RPC</html>\n")
            sys.stdout.flush()
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
    if MODE == "stubborn":
        print("misbehave: stdin ended; staying", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)
