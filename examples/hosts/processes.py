#!/usr/bin/env python3
"""This machine's processes as a wip world, over the wip host protocol (version 1).

Python 3 standard library only. Mount it with one manifest line (mounts/processes.toml):

    [[host]]
    kind = "exec"
    path = "processes"
    command = ["python3", "examples/hosts/processes.py"]

or run it as a server and let wip connect to it (connect = "unix:PATH" / "tcp:HOST:PORT"):

    examples/hosts/processes.py --listen unix:/run/wip-processes.sock
    examples/hosts/processes.py --listen tcp:127.0.0.1:7070

The tree (host-relative):
    /               this machine; ops: summary, find(pattern)
    PID/            one process, e.g. `1234/`: "sleep 1000 · S (sleeping) · root · RSS 1.0 MiB"
                    ref proc://HOST/PID/STARTTIME (a reused PID is another object)
                    ops: read_body, signal(signal) guarded by: exists, may_signal (same
                    user, or the caller is root), not_init, not_runtime (not the wip daemon),
                    not_host (not this program), signal (a known name)
Every entry names its kind ("machine" for the root, "process" for a PID) and `initialize`
declares the ops of each kind once, so the runtime never asks `ops` per process.
`call` checks the guard again itself and answers "blocked" with the conditions.
Listings are paged (`children` with cursor and limit). Processes looked at are watched:
when one exits, a `changed` notification tells the runtime, and the process stays reachable
by path (not listed) for 10 minutes as "exited", so the result of the call that stopped it
can still be read.

The protocol is JSON-RPC 2.0, one message per line on stdin/stdout (or per connection);
docs/host-protocol.md specifies it. Nothing is printed on stdout but protocol messages;
diagnostics go to stderr, which wip logs.
"""

import json
import os
import pwd
import queue
import signal as sig
import socket
import sys
import threading
import time

PROTOCOL = "wip-host-protocol"
VERSION = 1
HOSTNAME = socket.gethostname()
PAGE = 200
# How long a process that exited stays reachable by path (not listed), in seconds.
GONE_KEPT_S = 600
# Application error codes (docs/host-protocol.md).
INVALID_PARAMS, BLOCKED, FORBIDDEN, NOT_FOUND, BACKEND = -32602, -32001, -32002, -32003, -32004
SIGNALS = ["HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "CONT", "STOP", "TSTP"]
STATES = {
    "R": "running", "S": "sleeping", "D": "disk wait", "Z": "zombie", "T": "stopped",
    "t": "traced", "X": "dead", "I": "idle", "P": "parked", "W": "waking", "K": "wakekill",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")
# A read of /proc that takes longer than this is given up, and the process is not read again
# for STUCK_KEPT_S seconds (see ProcReader).
PROC_READ_TIMEOUT_S = 0.25
STUCK_KEPT_S = 30


class HostError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


# ---- /proc ----------------------------------------------------------------------------

class Stuck(Exception):
    """A process's /proc entry did not answer in time."""


class ProcReader:
    """Reads a process's /proc files on a helper thread, one helper per calling thread.

    A process stuck in the kernel (in a page fault on a hung FUSE mount, say) can make reads
    of its /proc entries block forever. A read that takes longer than PROC_READ_TIMEOUT_S is
    given up: its helper is left behind, a new one serves the caller, and that process is not
    read again for STUCK_KEPT_S, so one stuck process costs a listing one timeout instead of
    hanging the host (and with it every request of the mount).
    """

    def __init__(self):
        self.lock = threading.Lock()
        self.stuck = {}  # pid -> when its read was given up
        self.local = threading.local()

    def _helper(self):
        jobs = getattr(self.local, "jobs", None)
        if jobs is None:
            jobs = queue.SimpleQueue()

            def work():
                while True:
                    fn, box = jobs.get()
                    try:
                        box.put((True, fn()))
                    except BaseException as e:  # handed to the caller, who raises it
                        box.put((False, e))

            threading.Thread(target=work, daemon=True).start()
            self.local.jobs = jobs
        return jobs

    def call(self, pid, fn):
        """fn() on the helper: its value, or what it raised; Stuck if it took too long."""
        with self.lock:
            at = self.stuck.get(pid)
            if at is not None:
                if time.time() - at < STUCK_KEPT_S:
                    raise Stuck()
                del self.stuck[pid]
        box = queue.SimpleQueue()
        self._helper().put((fn, box))
        try:
            ok, value = box.get(timeout=PROC_READ_TIMEOUT_S)
        except queue.Empty:
            with self.lock:
                self.stuck[pid] = time.time()
            self.local.jobs = None  # the stuck helper is abandoned
            print(f"processes: /proc/{pid} does not answer; not read for {STUCK_KEPT_S} s",
                  file=sys.stderr, flush=True)
            raise Stuck()
        if ok:
            return value
        raise value

    def read(self, pid, name):
        """The bytes of /proc/PID/NAME (OSError if it cannot be read, Stuck)."""
        return self.call(pid, lambda: slurp(f"/proc/{pid}/{name}"))


def slurp(path):
    with open(path, "rb") as f:
        return f.read()


PROC = ProcReader()


def canonical_pid(name):
    """The PID a path segment names, only in its one spelling (`42`, not `042`)."""
    if not name.isdigit() or (len(name) > 1 and name[0] == "0"):
        return None
    return int(name)


def stat_of(pid):
    """Fields of /proc/PID/stat after the command (which may hold spaces and parens)."""
    try:
        raw = PROC.read(pid, "stat").decode("utf-8", "replace")
    except (OSError, Stuck):
        return None
    close = raw.rfind(")")
    comm = raw[raw.find("(") + 1:close]
    rest = raw[close + 2:].split()
    return {"comm": comm, "state": rest[0], "ppid": int(rest[1]), "starttime": int(rest[19]),
            "threads": int(rest[17]), "utime": int(rest[11]), "stime": int(rest[12])}


def status_of(pid):
    out = {}
    try:
        for line in PROC.read(pid, "status").decode("utf-8", "replace").splitlines():
            k, _, v = line.partition(":")
            out[k] = v.strip()
    except (OSError, Stuck):
        return None
    return out


def cmdline_of(pid):
    try:
        parts = PROC.read(pid, "cmdline").split(b"\0")
    except (OSError, Stuck):
        return ""
    return " ".join(p.decode("utf-8", "replace") for p in parts if p)


def own_line(pid):
    """The PIDs of a caller and its parents up to (not including) init."""
    out = set()
    while isinstance(pid, int) and pid > 1 and pid not in out:
        out.add(pid)
        st = stat_of(pid)
        if st is None:
            break
        pid = st["ppid"]
    return out


def uid_of(status):
    try:
        return int(status.get("Uid", "").split()[0])
    except (IndexError, ValueError):
        return None


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, TypeError):
        return str(uid)


def size(kib):
    kib = float(kib)
    for unit in ("KiB", "MiB", "GiB"):
        if kib < 1024:
            return f"{kib:.1f} {unit}" if unit != "KiB" else f"{int(kib)} KiB"
        kib /= 1024
    return f"{kib:.1f} TiB"


def pids():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            out.append(int(name))
    out.sort()
    return out


def stuck_process(pid):
    """What a process whose /proc entry does not answer shows (its identity unknown)."""
    return {"pid": pid, "uid": None, "cmd": "?", "state": "?", "stat": None, "status": None,
            "description": f"PID {pid} · its /proc entry does not answer: the process is "
                           f"stuck in the kernel (on a hung mount?); tried again in "
                           f"{STUCK_KEPT_S} s",
            "ref": f"proc://{HOSTNAME}/{pid}/unknown", "indexable": True}


def process(pid):
    """What one process shows of itself, or None if it does not exist."""
    st = stat_of(pid)
    status = status_of(pid)
    if (st is None or status is None) and pid in PROC.stuck and os.path.isdir(f"/proc/{pid}"):
        return stuck_process(pid)
    if st is None or status is None:
        return None
    uid = uid_of(status)
    cmd = cmdline_of(pid) or f"[{st['comm']}]"
    state = st["state"]
    rss = status.get("VmRSS", "0 kB").split()[0]
    line = (f"PID {pid} · {cmd[:120]} · {state} ({STATES.get(state, state)}) · "
            f"{user_name(uid)} · RSS {size(rss)}")
    return {"pid": pid, "uid": uid, "cmd": cmd, "state": state, "stat": st, "status": status,
            "description": line, "ref": f"proc://{HOSTNAME}/{pid}/{st['starttime']}"}


def entry_of(p):
    e = {"description": p["description"], "ref": p["ref"], "kind": "process"}
    if p.get("cmd") and p["cmd"] != "?":
        # With titled names on, `ls` shows `1234 sleep 300`.
        e["title"] = p["cmd"]
    if p.get("indexable") is False:
        e["indexable"] = False
    return e


# ---- the host -------------------------------------------------------------------------

SCHEMAS = {
    "summary": {"type": "object", "properties": {}, "additionalProperties": False},
    "find": {
        "type": "object",
        "properties": {"pattern": {"type": "string", "minLength": 1,
                                   "description": "text the command line contains (any case)"}},
        "required": ["pattern"], "additionalProperties": False,
    },
    "read_body": {"type": "object", "properties": {}, "additionalProperties": False},
    "signal": {
        "type": "object",
        "properties": {"signal": {"type": "string", "enum": SIGNALS,
                                  "description": "signal name without SIG"}},
        "required": ["signal"], "additionalProperties": False,
    },
}
OPS = {
    (): [("summary", "How many processes, by state; load and memory."),
         ("find", "find(pattern): processes whose command line contains pattern, as entries.")],
    ("pid",): [("read_body", "Command line, state, parent, user, threads, memory, CPU time, "
                             "working directory; the environment's size only (no values)."),
               ("signal", "signal(signal): send TERM, KILL, HUP, INT, STOP, CONT, ... "
                          "to this process.")],
}
# The kind each entry names, and the ops of each kind as `initialize` declares them.
KIND = {(): "machine", ("pid",): "process"}


def op_list(kind):
    return [{"name": n, "description": d, "schema": SCHEMAS[n]} for n, d in OPS[kind]]


class Session:
    """One connection to the runtime: its writer and the processes it watches."""

    def __init__(self, write):
        self.write_raw = write
        self.lock = threading.Lock()
        self.runtime_pid = None
        self.runtime_uid = os.getuid()
        self.watched = {}  # pid -> starttime
        # Processes seen that have exited since: pid -> (what they showed, when they went).
        # They stay reachable by path for a while, so the result of the call that stopped
        # one can still be read (`cat PID/ops/signal/result`).
        self.seen = {}
        self.gone = {}
        self.closed = False
        threading.Thread(target=self.watch, daemon=True).start()

    def send(self, msg):
        data = (json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8")
        with self.lock:
            self.write_raw(data)

    def watch(self):
        """Tell the runtime when a process it looked at exits."""
        while not self.closed:
            time.sleep(0.5)
            gone = []
            for pid, start in list(self.watched.items()):
                st = stat_of(pid)
                if st is None or st["starttime"] != start or st["state"] == "Z":
                    gone.append(pid)
            now = time.time()
            for pid, (_, at) in list(self.gone.items()):
                if now - at > GONE_KEPT_S:
                    self.gone.pop(pid, None)
            if gone:
                for pid in gone:
                    self.watched.pop(pid, None)
                    if pid in self.seen:
                        self.gone[pid] = (self.seen.pop(pid), now)
                try:
                    self.send({"jsonrpc": "2.0", "method": "changed",
                               "params": {"paths": [[str(p)] for p in gone] + [[]]}})
                except OSError:
                    return

    def look(self, p):
        if p["stat"] is None:
            return  # stuck: nothing to watch it by
        if len(self.watched) < 1000:
            self.watched[p["pid"]] = p["stat"]["starttime"]
            self.seen[p["pid"]] = p

    def tombstone(self, pid):
        """What a process that exited since it was seen shows, or None."""
        last = self.gone.get(pid) or ((self.seen[pid], time.time()) if pid in self.seen else None)
        if last is None:
            return None
        p, at = last
        ago = int(time.time() - at)
        return dict(p, state="X", indexable=False,
                    description=f"PID {pid} · {p['cmd'][:120]} · exited {ago} s ago "
                                f"(kept {GONE_KEPT_S // 60} min so its results stay readable)")

    # -- methods --

    def node(self, path):
        """(kind, process) for a path: kind is () for the root, ("pid",) for a process."""
        if path == []:
            return (), None
        if len(path) == 1:
            pid = canonical_pid(path[0])
            p = process(pid) if pid is not None else None
            if p is not None and p["state"] != "Z":
                return ("pid",), p
            t = self.tombstone(pid) if pid is not None else None
            if t is not None:
                return ("pid",), t
            if p is not None:
                return ("pid",), p
        return None, None

    def initialize(self, params):
        if params.get("protocol") != PROTOCOL or params.get("version") != VERSION:
            raise HostError(INVALID_PARAMS, f"this host speaks {PROTOCOL} version {VERSION}")
        rt = params.get("runtime") or {}
        self.runtime_pid = rt.get("pid")
        if isinstance(rt.get("uid"), int):
            self.runtime_uid = rt["uid"]
        return {"protocol": PROTOCOL, "version": VERSION, "name": "processes",
                "description": f"the processes of {HOSTNAME}",
                "capabilities": {"changes": True, "cache_ttl_ms": 1000, "body": True,
                                 "kinds": {KIND[k]: op_list(k) for k in OPS}}}

    def entry(self, params):
        path = params.get("path", [])
        kind, p = self.node(path)
        if kind == ():
            n = len(pids())
            return {"description": f"Processes of {HOSTNAME}: {n} now (host pid {os.getpid()}); "
                                   f"`ls` lists them by PID, paged; ops/find finds by command",
                    "ref": f"proc://{HOSTNAME}/", "kind": KIND[()],
                    # The set changes all the time: a new time makes the kernel re-list.
                    "modified": float(int(time.time()))}
        if kind is None:
            return None
        if p["state"] != "X":
            self.look(p)
        return entry_of(p)

    def children(self, params):
        path = params.get("path", [])
        if path != []:
            if self.node(path)[0] is None:
                raise HostError(NOT_FOUND, f"no process at {'/'.join(path)}")
            return {"children": []}
        limit = params.get("limit") or PAGE
        if not isinstance(limit, int) or limit < 1:
            raise HostError(INVALID_PARAMS, "limit must be a positive integer")
        start = params.get("cursor") or "0"
        if not start.isdigit():
            raise HostError(INVALID_PARAMS, f"bad cursor {start!r}")
        out, next_cursor = [], None
        for pid in pids():
            if pid < int(start):
                continue
            if len(out) == limit:
                next_cursor = str(pid)
                break
            p = process(pid)
            if p is not None:
                out.append(dict(entry_of(p), name=str(pid)))
        page = {"children": out}
        if next_cursor:
            page["next_cursor"] = next_cursor
        return page

    def body(self, params):
        """A process's body: its /proc/PID/status as the kernel writes it."""
        kind, p = self.node(params.get("path", []))
        if kind is None:
            raise HostError(NOT_FOUND, "no such process")
        if kind != ("pid",):
            return None
        if p["state"] in ("X", "?"):
            return {"text": p["description"] + "\n"}
        try:
            text = PROC.read(p["pid"], "status").decode("utf-8", "replace")
        except OSError as e:
            text = f"status not readable ({e.strerror})\n"
        except Stuck:
            text = "status not readable (the process does not answer)\n"
        return {"text": text, "modified": float(int(time.time()))}

    def ops(self, params):
        # Asked only by a runtime that does not use the kinds declared in initialize.
        kind, _ = self.node(params.get("path", []))
        if kind is None:
            raise HostError(NOT_FOUND, "no such process")
        return op_list(kind)

    def conditions(self, kind, p, op, args, uid):
        if kind != ("pid",) or op != "signal":
            return []
        me = os.getpid()
        alive = p is not None and p["state"] not in ("Z", "X", "?")
        owner = p["uid"] if p else None
        who = "root" if uid == 0 else user_name(uid)
        conds = [
            {"name": "exists", "ok": alive,
             "detail": f"process {p['pid']} is {STATES.get(p['state'], p['state'])}" if alive
             else "its /proc entry does not answer" if p and p["state"] == "?"
             else "the process has exited"},
            {"name": "may_signal", "ok": uid == 0 or uid == owner, "policy": True,
             "detail": f"you are {who}; the process belongs to {user_name(owner)}"
             + ("" if uid == 0 or uid == owner else " (only its user or root may signal it)")},
            {"name": "not_init", "ok": p is None or p["pid"] != 1, "policy": True,
             "detail": "PID 1 (init) is never signalled from here" if p and p["pid"] == 1
             else "not PID 1"},
            {"name": "not_runtime", "ok": p is None or p["pid"] != self.runtime_pid,
             "policy": True,
             "detail": "this is the wip daemon serving the mount" if p and
             p["pid"] == self.runtime_pid else "not the wip daemon"},
            {"name": "not_host", "ok": p is None or p["pid"] != me, "policy": True,
             "detail": "this is the processes host itself" if p and p["pid"] == me
             else "not this host"},
        ]
        if args is not None:
            name = str(args.get("signal", "")).upper().removeprefix("SIG")
            conds.append({"name": "signal", "ok": name in SIGNALS,
                          "detail": f"SIG{name} is a known signal" if name in SIGNALS
                          else f"{args.get('signal')!r} is not one of {', '.join(SIGNALS)}"})
        return conds

    def guard(self, params):
        path, op = params.get("path", []), params.get("op")
        kind, p = self.node(path)
        if kind is None or op not in dict(OPS[kind]):
            raise HostError(NOT_FOUND, f"no op {op!r} here")
        return {"conditions": self.conditions(kind, p, op, params.get("args"),
                                              self.runtime_uid)}

    def call(self, params):
        path, op = params.get("path", []), params.get("op")
        args = params.get("args") or {}
        caller = params.get("caller") or {}
        kind, p = self.node(path)
        if kind is None:
            raise HostError(NOT_FOUND, "no such process (it may have exited)")
        if op not in dict(OPS[kind]):
            raise HostError(NOT_FOUND, f"no op {op!r} here")
        if not isinstance(args, dict) or set(args) - set(SCHEMAS[op]["properties"]):
            raise HostError(INVALID_PARAMS, f"arguments of {op} must be an object with "
                                            f"{', '.join(SCHEMAS[op]['properties']) or 'no keys'}")
        return getattr(self, "op_" + op)(p, args, caller)

    def op_summary(self, _p, _args, _caller):
        states, threads = {}, 0
        for pid in pids():
            st = stat_of(pid)
            if st:
                states[st["state"]] = states.get(st["state"], 0) + 1
                threads += st["threads"]
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        mem = {}
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                mem[k] = v.split()[0]
        by_state = ", ".join(f"{n} {STATES.get(s, s)}" for s, n in sorted(states.items()))
        text = (f"{sum(states.values())} processes ({by_state}), {threads} threads\n"
                f"load average {load}\n"
                f"memory: {size(mem.get('MemAvailable', 0))} available of "
                f"{size(mem.get('MemTotal', 0))}\n")
        return {"result": text}

    def op_find(self, _p, args, caller):
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise HostError(INVALID_PARAMS, "pattern must be a non-empty string")
        # The command that asked (`bash -c "echo 'sleep 4242' > …/find/call"`) holds the
        # pattern in its own command line, and so may its parents: they are left out.
        own = own_line(caller.get("pid"))
        found, skipped = [], []
        for pid in pids():
            if pattern.lower() in cmdline_of(pid).lower():
                if pid in own:
                    skipped.append(pid)
                    continue
                found.append([str(pid)])
                if len(found) == 50:
                    break
        text = f"{len(found)} processes whose command line contains {pattern!r}"
        text += " (the first 50)" if len(found) == 50 else ""
        if skipped:
            text += (f"; left out: {', '.join(f'PID {p}' for p in skipped)}, the command "
                     f"that called find and its parents")
        return {"result": text + "\n", "discovered": found}

    def op_read_body(self, p, _args, _caller):
        if p["state"] in ("X", "?"):
            return {"result": p["description"] + "\n"}
        st, s = p["stat"], p["status"]
        pid = p["pid"]

        def proc(fn, show):
            try:
                return show(PROC.call(pid, fn))
            except OSError as e:
                return f"not readable ({e.strerror})"
            except Stuck:
                return "not readable (it does not answer)"

        def variables(raw):
            count = len([e for e in raw.split(b"\0") if e])
            return f"{count} variables (values not shown)"

        env = proc(lambda: slurp(f"/proc/{pid}/environ"), variables)
        cwd = proc(lambda: os.readlink(f"/proc/{pid}/cwd"), str)
        fds = proc(lambda: os.listdir(f"/proc/{pid}/fd"), lambda names: str(len(names)))
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - st["starttime"] / CLK_TCK
        cpu = (st["utime"] + st["stime"]) / CLK_TCK
        text = "\n".join([
            f"pid: {p['pid']}",
            f"command: {p['cmd']}",
            f"name: {st['comm']}",
            f"state: {p['state']} ({STATES.get(p['state'], p['state'])})",
            f"parent: {st['ppid']}",
            f"user: {user_name(p['uid'])} (uid {p['uid']})",
            f"threads: {st['threads']}",
            f"rss: {s.get('VmRSS', 'n/a')}",
            f"virtual: {s.get('VmSize', 'n/a')}",
            f"cpu time: {cpu:.2f} s",
            f"running for: {age:.0f} s",
            f"working directory: {cwd}",
            f"open files: {fds}",
            f"environment: {env}",
        ]) + "\n"
        self.look(p)
        return {"result": text}

    def op_signal(self, p, args, caller):
        uid = caller.get("uid", self.runtime_uid)
        conds = self.conditions(("pid",), p, "signal", args, uid)
        failing = [c for c in conds if not c["ok"]]
        if failing:
            first = next((c for c in failing if c.get("policy")), failing[0])
            raise HostError(BLOCKED, f"blocked by guard {first['name']}: {first['detail']}",
                            {"conditions": conds})
        name = args["signal"].upper().removeprefix("SIG")
        try:
            os.kill(p["pid"], getattr(sig, "SIG" + name))
        except ProcessLookupError:
            raise HostError(NOT_FOUND, f"process {p['pid']} exited before the signal")
        except PermissionError as e:
            raise HostError(FORBIDDEN, f"the host may not signal {p['pid']}: {e.strerror}")
        self.look(p)
        return {"result": f"sent SIG{name} to {p['pid']} ({p['cmd'][:80]})\n",
                "changed": [[str(p["pid"])]]}

    # -- dispatch --

    METHODS = ("initialize", "entry", "children", "ops", "guard", "call", "body", "ping")

    def ping(self, _params):
        # The runtime asks while a call of ours runs and we have been silent: we are alive.
        return {}

    def handle(self, line):
        try:
            msg = json.loads(line)
        except ValueError as e:
            # The runtime sends well-formed lines only: this stream is broken. An error with
            # "id": null would answer no request; say why and end, the runtime restarts us.
            print(f"processes: a line that is not JSON ({e}); stopping", file=sys.stderr,
                  flush=True)
            sys.exit(2)
        if not isinstance(msg, dict) or "method" not in msg:
            return  # a response or junk: the runtime sends us no responses we await
        mid, method = msg.get("id"), msg["method"]
        params = msg.get("params") or {}
        if mid is None:
            return  # notifications from the runtime: none defined
        try:
            if method not in self.METHODS:
                raise HostError(-32601, f"no method {method!r} (this host offers "
                                        f"{', '.join(self.METHODS)})")
            result = getattr(self, method)(params)
            reply = {"jsonrpc": "2.0", "id": mid, "result": result}
        except HostError as e:
            err = {"code": e.code, "message": e.message}
            if e.data is not None:
                err["data"] = e.data
            reply = {"jsonrpc": "2.0", "id": mid, "error": err}
        except Exception as e:  # a bug here must not kill the connection
            print(f"processes: {method} failed: {e!r}", file=sys.stderr, flush=True)
            reply = {"jsonrpc": "2.0", "id": mid,
                     "error": {"code": BACKEND, "message": f"{method} failed: {e}"}}
        self.send(reply)


def serve(rfile, write):
    session = Session(write)
    try:
        for line in rfile:
            if line.strip():
                session.handle(line.decode("utf-8", "replace"))
    finally:
        session.closed = True


def listen(spec):
    if spec.startswith("unix:"):
        path = spec[5:]
        if os.path.exists(path):
            os.unlink(path)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
    elif spec.startswith("tcp:"):
        host, _, port = spec[4:].rpartition(":")
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host, int(port)))
    else:
        sys.exit(f"--listen wants unix:PATH or tcp:HOST:PORT, not {spec!r}")
    server.listen(16)
    print(f"processes: listening on {spec}", file=sys.stderr, flush=True)

    def one(conn):
        if conn.family == socket.AF_INET:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn, conn.makefile("rb") as rfile:
            try:
                serve(rfile, conn.sendall)
            except OSError:
                pass

    while True:
        conn, _ = server.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def main():
    args = sys.argv[1:]
    if args[:1] == ["--listen"] and len(args) == 2:
        listen(args[1])
    elif args:
        sys.exit("usage: processes.py [--listen unix:PATH | --listen tcp:HOST:PORT]")
    else:
        out = sys.stdout.buffer

        def write(data):
            out.write(data)
            out.flush()

        serve(sys.stdin.buffer, write)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
