#!/usr/bin/env python3
"""A deterministic agent command for wip's tests of the agents host (standard library only).

Reads the conversation as JSON lines on stdin ({"role": ..., "content": ...} per message) and
answers the last user message on stdout as JSON lines. What it does depends on that message:

  "slow N"   report a status, then sleep N seconds (default 30) before answering; the sleep
             runs in a child process of the same process group, so a cancel must stop both
  "fail"     write two lines on stderr and exit 1
  "bad"      write a line that is not JSON after a JSON line (invalid output)
  "silent"   exit 0 without an answer
  "json"     answer with a piece of JSON as content
  "detach"   start a grandchild in a session of its own (it ignores SIGTERM and sleeps),
             and answer its pid and this agent's SigBlk and SigIgn lines of /proc
  anything   answer "echo: <message> [N messages: roles]"

With --plain it answers in plain text instead ("plain echo: <message>" and a second line).
If AGENT_PIDS names a file, the agent appends its pid (and its sleeper's) to it.
"""

import json
import os
import subprocess
import sys


def note_pid(pid):
    path = os.environ.get("AGENT_PIDS")
    if path:
        with open(path, "a") as f:
            f.write(f"{pid}\n")


def main():
    messages = [json.loads(line) for line in sys.stdin if line.strip()]
    last = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    roles = ",".join(m["role"] for m in messages)
    note_pid(os.getpid())
    words = last.split()
    print(json.dumps({"status": f"read {len(messages)} messages"}), flush=True)
    if words and words[0] == "slow":
        seconds = words[1] if len(words) > 1 else "30"
        sleeper = subprocess.Popen(["sleep", seconds])
        note_pid(sleeper.pid)
        print(json.dumps({"status": f"sleeping {seconds} s"}), flush=True)
        sleeper.wait()
    elif last == "fail":
        print("loading the model", file=sys.stderr)
        print("something broke: no model named fail", file=sys.stderr)
        sys.exit(1)
    elif last == "bad":
        print(json.dumps({"content": "half"}))
        print("this is not json")
        return
    elif last == "silent":
        return
    elif last == "json":
        print(json.dumps({"content": json.dumps({"answer": 42})}))
        return
    elif last == "detach":
        code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint(flush=True)\ntime.sleep(600)\n"
        child = subprocess.Popen(
            [sys.executable, "-c", code, "agent-grandchild"], start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        # Answered once it ignores SIGTERM.
        child.stdout.readline()
        child.stdout.close()
        with open("/proc/self/status") as f:
            sig = "\n".join(l.strip() for l in f if l.startswith(("SigBlk:", "SigIgn:")))
        print(json.dumps({"content": f"grandchild {child.pid}\n{sig}\n"}))
        return
    print(json.dumps({"content": "echo: "}))
    print(json.dumps({"content": last}))
    print(json.dumps({"content": f" [{len(messages)} messages: {roles}]"}))


def plain():
    messages = [json.loads(line) for line in sys.stdin if line.strip()]
    last = messages[-1]["content"]
    print(f"plain echo: {last}")
    print("second line")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--plain":
        plain()
    else:
        main()
