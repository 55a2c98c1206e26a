#!/usr/bin/env python3
"""A wip host that records every request it gets, for tests (standard library only).

    recorder.py LOG [--kinds]

Each request is appended to LOG as one JSON line: {"pid", "method", "path", "op"}, so a
test can count what the runtime asked (a walk of the mount must run no `call`; an entry is
asked once within its lifetime; with --kinds, `ops` is never asked).

The tree (host-relative):
    /           ops: echo(text), crash (exits with status 3 in the middle of the call)
    items/      three items; no ops
    items/N     N = 1, 2, 3; ops: read_body, touch (changes its description; reports it)
With --kinds, `initialize` declares the ops of the kinds "root", "folder" and "item", and
every entry names its kind.
"""

import json
import os
import sys

LOG = sys.argv[1]
KINDS = "--kinds" in sys.argv[2:]

ITEM_OPS = [
    {"name": "read_body", "description": "read_body(): the item's text",
     "schema": {"type": "object", "properties": {}}},
    {"name": "touch", "description": "touch(): changes the item's description",
     "schema": {"type": "object", "properties": {}}},
]
ROOT_OPS = [
    {"name": "echo", "description": "echo(text): answers the text",
     "schema": {"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]}},
    {"name": "crash", "description": "crash(): exits in the middle of the call",
     "schema": {"type": "object", "properties": {}, "additionalProperties": False}},
]
touched = {}


def record(msg):
    p = msg.get("params") or {}
    line = {"pid": os.getpid(), "method": msg.get("method"), "path": p.get("path"),
            "op": p.get("op")}
    with open(LOG, "a") as f:
        f.write(json.dumps(line) + "\n")


def node(path):
    """(kind, entry) for a path, or (None, None)."""
    if path == []:
        return "root", {"description": f"a recording host, pid {os.getpid()}", "ref": "rec://"}
    if path == ["items"]:
        return "folder", {"description": "three items", "ref": "rec://items"}
    if len(path) == 2 and path[0] == "items" and path[1] in ("1", "2", "3"):
        n = path[1]
        return "item", {"description": f"item {n}, touched {touched.get(n, 0)} times",
                        "ref": f"rec://items/{n}"}
    return None, None


def entry(path):
    kind, e = node(path)
    if e is not None and KINDS:
        e = dict(e, kind=kind)
    return e


OPS = {"root": ROOT_OPS, "folder": [], "item": ITEM_OPS}


def answer(msg):
    method, p = msg.get("method"), msg.get("params") or {}
    path = p.get("path", [])
    if method == "initialize":
        caps = {"cache_ttl_ms": 1000}
        if KINDS:
            caps["kinds"] = OPS
        return {"protocol": "wip-host-protocol", "version": 1, "name": "recorder",
                "capabilities": caps}
    if method == "entry":
        return entry(path)
    kind, _ = node(path)
    if kind is None:
        raise LookupError(f"no entry {'/'.join(path)}")
    if method == "children":
        if kind == "root":
            return {"children": [dict(entry(["items"]), name="items")]}
        if kind == "folder":
            return {"children": [dict(entry(["items", n]), name=n) for n in ("1", "2", "3")]}
        return {"children": []}
    if method == "ops":
        return OPS[kind]
    if method == "guard":
        return {"conditions": []}
    if method == "call":
        op = p.get("op")
        if kind == "root" and op == "echo":
            return {"result": f"echo: {p['args'].get('text', '')}\n"}
        if kind == "root" and op == "crash":
            print("recorder: crashing as asked", file=sys.stderr, flush=True)
            os._exit(3)
        if kind == "item" and op == "read_body":
            return {"result": f"the text of item {path[1]}\n"}
        if kind == "item" and op == "touch":
            touched[path[1]] = touched.get(path[1], 0) + 1
            return {"result": "touched\n", "changed": [path]}
        raise LookupError(f"no op {op!r} here")
    raise NotImplementedError(method)


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        record(msg)
        try:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
        except LookupError as e:
            reply = {"jsonrpc": "2.0", "id": msg["id"],
                     "error": {"code": -32003, "message": str(e)}}
        except NotImplementedError as e:
            reply = {"jsonrpc": "2.0", "id": msg["id"],
                     "error": {"code": -32601, "message": f"no method {e}"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
