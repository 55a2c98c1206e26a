#!/usr/bin/env python3
"""Per-request FUSE latency, from the kernel's tracepoints (Linux 6.14 and later):

    perf record -e fuse:fuse_request_send -e fuse:fuse_request_end -a -o fuse.data -- CMD
    perf script -i fuse.data | scripts/fuse-latency.py

prints, for each opcode, how many requests CMD caused and the time from the kernel sending
each one to the daemon's answer (p50, mean): where a call's time goes, request by request.
"""
import collections
import re
import statistics
import sys

LINE = re.compile(
    r"(\d+\.\d+):\s+fuse:fuse_request_(send|end): connection (\d+) req (\d+)"
    r"(?: opcode \d+ \((\w+)\))?"
)


def main() -> None:
    sent = {}
    latency = collections.defaultdict(list)
    for line in sys.stdin:
        m = LINE.search(line)
        if not m:
            continue
        at, kind, conn, req, op = m.groups()
        key = (conn, req)
        if kind == "send":
            sent[key] = (float(at), op)
        elif key in sent:
            t0, op = sent.pop(key)
            latency[op].append((float(at) - t0) * 1e6)
    if not latency:
        sys.exit("no fuse:fuse_request_send/end pairs in the input")
    for op, v in sorted(latency.items()):
        print(f"{op:18} n={len(v):7}  p50={statistics.median(v):8.1f} us  mean={statistics.mean(v):8.1f} us")


if __name__ == "__main__":
    main()
