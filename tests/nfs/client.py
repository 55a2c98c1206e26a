#!/usr/bin/env python3
"""A small NFSv3 client over TCP that sends what the Linux kernel's client sends for the
shell's moves, for the tests of `wip serve-nfs` on machines whose kernel has no NFS
client. One process is one client: one connection, one AUTH_SYS uid.

  client.py PORT cat PATH                  LOOKUP each segment, READ to EOF, print
  client.py PORT write PATH CHUNK...       `> PATH`: ACCESS, SETATTR size 0, a WRITE
                                           (UNSTABLE) per chunk at its offset, COMMIT;
                                           prints each status, exits 1 on a failed one
  client.py PORT write-open PATH CHUNK      ACCESS, SETATTR size 0 and one WRITE, and no
                                           COMMIT: a client that went away mid-document
  client.py PORT access PATH               ACCESS of read|modify|extend: prints the bits
  client.py PORT fh PATH                   the file handle, hex
  client.py PORT getattr-fh HEX            GETATTR of a handle: its status
  client.py PORT ls PATH                   READDIRPLUS in pages of 3: the names
  client.py PORT bench-call PATH N         N `> PATH` of one line: prints p50_us
  client.py PORT comments PATH N           N calls of `> PATH/.ops/comment/call`, each
                                           followed by a read of `result` (must be its own)
  client.py PORT scatter PATH OFFSET N SIZE SETATTR size 0, then N WRITEs of SIZE bytes at
                                           OFFSET, OFFSET+SIZE, … (none at 0: all out of
                                           order), 16 in flight; prints the count of each
                                           status, then the server's VmRSS (kB)
                                           while the connection is still open
  client.py PORT scatter-many PATH N       N lookups of PATH (N documents), each with one
                                           WRITE of 64 KiB at 4 MiB: the count of each status
  client.py PORT write-reversed PATH CHUNK... `write`, with the chunks' WRITEs sent last first

Before the command, `--uid N` claims uid N in the AUTH_SYS credential (default: the
process's own), and `--auth none` sends no credential at all (AUTH_NONE). A request the
server refuses prints its status (`MNT3ERR_ACCES`, `NFS3ERR_ACCES`, or `RPC denied …`)
and exits 1.
"""
import os
import random
import socket
import struct
import sys

NFS_PROG, NFS_VERS = 100003, 3
MOUNT_PROG, MOUNT_VERS = 100005, 3
STATUS = {
    0: "NFS3_OK", 1: "NFS3ERR_PERM", 2: "NFS3ERR_NOENT", 5: "NFS3ERR_IO",
    13: "NFS3ERR_ACCES", 17: "NFS3ERR_EXIST", 22: "NFS3ERR_INVAL", 27: "NFS3ERR_FBIG",
    28: "NFS3ERR_NOSPC", 30: "NFS3ERR_ROFS", 63: "NFS3ERR_NAMETOOLONG",
    70: "NFS3ERR_STALE", 10001: "NFS3ERR_BADHANDLE", 10003: "NFS3ERR_BAD_COOKIE",
    10004: "NFS3ERR_NOTSUPP", 10006: "NFS3ERR_SERVERFAULT",
}
ACCESS_READ, ACCESS_LOOKUP, ACCESS_MODIFY, ACCESS_EXTEND = 0x1, 0x2, 0x4, 0x8
UNSTABLE = 0


class Xdr:
    def __init__(self, data=b""):
        self.b = bytearray(data)
        self.i = 0

    # packing
    def u32(self, v):
        self.b += struct.pack(">I", v)
        return self

    def u64(self, v):
        self.b += struct.pack(">Q", v)
        return self

    def opaque(self, v):
        self.u32(len(v))
        self.b += v + b"\0" * ((4 - len(v) % 4) % 4)
        return self

    # unpacking
    def gu32(self):
        v = struct.unpack_from(">I", self.b, self.i)[0]
        self.i += 4
        return v

    def gu64(self):
        v = struct.unpack_from(">Q", self.b, self.i)[0]
        self.i += 8
        return v

    def gopaque(self):
        n = self.gu32()
        v = bytes(self.b[self.i:self.i + n])
        self.i += n + (4 - n % 4) % 4
        return v

    def skip(self, n):
        self.i += n

    def fattr(self):
        kind = self.gu32()
        self.skip(16)  # mode nlink uid gid
        size = self.gu64()
        self.skip(8 + 8 + 8 + 8 + 24)  # used rdev fsid fileid times
        return {"type": kind, "size": size}

    def post_op_attr(self):
        return self.fattr() if self.gu32() else None

    def wcc(self):
        if self.gu32():
            self.skip(24)
        return self.post_op_attr()


class Refused(Exception):
    """The server denied the RPC itself (MSG_DENIED)."""


class Client:
    def __init__(self, port, uid=None, auth="sys"):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.uid = os.getuid() if uid is None else uid
        self.auth = auth
        self.xid = random.randrange(1, 1 << 30)

    def message(self, prog, vers, proc, args):
        self.xid += 1
        if self.auth == "none":
            cred = Xdr().u32(0).opaque(b"")
        else:
            cred = Xdr().u32(1).opaque(bytes(
                Xdr().u32(0).opaque(b"client").u32(self.uid).u32(self.uid).u32(0).b))
        msg = (Xdr().u32(self.xid).u32(0).u32(2).u32(prog).u32(vers).u32(proc).b
               + cred.b + Xdr().u32(0).opaque(b"").b + args)
        return self.xid, struct.pack(">I", 0x80000000 | len(msg)) + msg

    def reply(self):
        reply = b""
        while True:
            head = self._recv(4)
            n = struct.unpack(">I", head)[0]
            reply += self._recv(n & 0x7FFFFFFF)
            if n & 0x80000000:
                break
        x = Xdr(reply)
        xid, mtype, stat = x.gu32(), x.gu32(), x.gu32()
        assert mtype == 1, (xid, mtype)
        if stat != 0:
            why = x.gu32()
            raise Refused(f"RPC denied: {'AUTH_ERROR' if why == 1 else 'RPC_MISMATCH'} {x.gu32()}")
        x.gu32()
        x.gopaque()  # verifier
        accept = x.gu32()
        assert accept == 0, f"RPC not accepted: {accept}"
        return xid, x

    def call(self, prog, vers, proc, args=b""):
        xid, msg = self.message(prog, vers, proc, args)
        self.s.sendall(msg)
        got, x = self.reply()
        assert got == xid, (got, xid)
        return x

    def _recv(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            out += chunk
        return out

    def mount(self):
        x = self.call(MOUNT_PROG, MOUNT_VERS, 1, bytes(Xdr().opaque(b"/").b))
        st = x.gu32()
        if st:
            raise SystemExit("MNT " + {13: "MNT3ERR_ACCES"}.get(st, str(st)))
        return x.gopaque()

    def lookup(self, dirfh, name):
        x = self.call(NFS_PROG, NFS_VERS, 3, bytes(Xdr().opaque(dirfh).opaque(name.encode()).b))
        st = x.gu32()
        if st:
            return st, None
        return 0, x.gopaque()

    def walk(self, path):
        fh = self.mount()
        for seg in [s for s in path.split("/") if s]:
            st, fh = self.lookup(fh, seg)
            if st:
                raise SystemExit(f"lookup {seg}: {STATUS.get(st, st)}")
        return fh

    def getattr(self, fh):
        x = self.call(NFS_PROG, NFS_VERS, 1, bytes(Xdr().opaque(fh).b))
        st = x.gu32()
        return st, (x.fattr() if st == 0 else None)

    def read_all(self, fh):
        out, off = b"", 0
        while True:
            x = self.call(NFS_PROG, NFS_VERS, 6, bytes(Xdr().opaque(fh).u64(off).u32(65536).b))
            st = x.gu32()
            x.post_op_attr()
            if st:
                return st, out
            n, eof, data = x.gu32(), x.gu32(), x.gopaque()
            out += data
            off += n
            if eof or n == 0:
                return 0, out

    def access(self, fh, bits):
        x = self.call(NFS_PROG, NFS_VERS, 4, bytes(Xdr().opaque(fh).u32(bits).b))
        st = x.gu32()
        x.post_op_attr()
        return st, (x.gu32() if st == 0 else 0)

    def truncate(self, fh):
        # sattr3: mode, uid, gid unset; size set to 0; times unchanged; no guard.
        a = Xdr().opaque(fh).u32(0).u32(0).u32(0).u32(1).u64(0).u32(0).u32(0).u32(0)
        x = self.call(NFS_PROG, NFS_VERS, 2, bytes(a.b))
        return x.gu32()

    def write(self, fh, off, data):
        a = Xdr().opaque(fh).u64(off).u32(len(data)).u32(UNSTABLE).opaque(data)
        x = self.call(NFS_PROG, NFS_VERS, 7, bytes(a.b))
        st = x.gu32()
        x.wcc()
        if st:
            return st, None
        x.gu32()
        return 0, x.gu32()

    def commit(self, fh):
        x = self.call(NFS_PROG, NFS_VERS, 21, bytes(Xdr().opaque(fh).u64(0).u32(0).b))
        return x.gu32()

    def readdirplus(self, fh, cookie, verf, maxcount):
        a = Xdr().opaque(fh).u64(cookie)
        a.b += verf
        a.u32(4096).u32(maxcount)
        x = self.call(NFS_PROG, NFS_VERS, 17, bytes(a.b))
        st = x.gu32()
        x.post_op_attr()
        if st:
            return st, [], None, True
        verf = bytes(x.b[x.i:x.i + 8])
        x.skip(8)
        names = []
        while x.gu32():
            x.gu64()  # fileid
            name = x.gopaque().decode()
            cookie = x.gu64()
            x.post_op_attr()
            if x.gu32():
                x.gopaque()
            names.append((name, cookie))
        return 0, names, verf, bool(x.gu32())

    def shell_write(self, fh, chunks, reversed_order=False):
        """`printf … > FILE`: what the kernel sends. Returns the statuses."""
        out = []
        st, bits = self.access(fh, ACCESS_MODIFY | ACCESS_EXTEND)
        out.append(("ACCESS", st, bits))
        st = self.truncate(fh)
        out.append(("SETATTR", st))
        if st:
            return out
        pieces, off = [], 0
        for c in chunks:
            pieces.append((off, c))
            off += len(c)
        for off, c in (pieces[::-1] if reversed_order else pieces):
            st, committed = self.write(fh, off, c)
            out.append(("WRITE", st, committed))
            if st:
                return out
        out.append(("COMMIT", self.commit(fh)))
        return out


def server_rss_kb(port):
    """VmRSS of the process listening on 127.0.0.1:PORT (found through /proc/net/tcp)."""
    want = f"0100007F:{port:04X}"
    inode = None
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            col = line.split()
            if col[1] == want and col[3] == "0A":
                inode = col[9]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]" for fd in fds):
                with open(f"/proc/{pid}/status") as f:
                    rss = [int(l.split()[1]) for l in f if l.startswith("VmRSS:")]
                # A process gone meanwhile (a zombie has no VmRSS) is not the server.
                if rss:
                    return rss[0]
        except (OSError, ValueError):
            continue
    return -1


def scatter(c, port, path, offset, n, size):
    """N WRITEs past OFFSET into one handle, 16 in flight at a time."""
    fh = c.walk(path)
    print("SETATTR", STATUS.get(c.truncate(fh)))
    data = b"x" * size
    counts, inflight, sent = {}, {}, 0
    while sent < n or inflight:
        while sent < n and len(inflight) < 16:
            a = Xdr().opaque(fh).u64(offset + sent * size).u32(size).u32(UNSTABLE).opaque(data)
            xid, msg = c.message(NFS_PROG, NFS_VERS, 7, bytes(a.b))
            c.s.sendall(msg)
            inflight[xid] = sent
            sent += 1
        xid, x = c.reply()
        del inflight[xid]
        st = STATUS.get(x.gu32(), "?")
        counts[st] = counts.get(st, 0) + 1
    for st, k in sorted(counts.items()):
        print("WRITE", st, k)
    print("rss_kb", server_rss_kb(port))


def main():
    args = sys.argv[1:]
    port = int(args.pop(0))
    uid, auth = None, "sys"
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt == "--uid":
            uid = int(args.pop(0))
        elif opt == "--auth":
            auth = args.pop(0)
        else:
            sys.exit(f"unknown option {opt}")
    cmd, rest = args[0], args[1:]
    try:
        run(Client(port, uid, auth), port, cmd, rest)
    except Refused as e:
        print(e)
        sys.exit(1)


def run(c, port, cmd, rest):
    if cmd == "cat":
        st, data = c.read_all(c.walk(rest[0]))
        if st:
            print(STATUS.get(st, st))
            sys.exit(1)
        sys.stdout.write(data.decode(errors="replace"))
    elif cmd in ("write", "write-reversed"):
        steps = c.shell_write(c.walk(rest[0]), [a.encode().decode("unicode_escape").encode() for a in rest[1:]],
                              cmd == "write-reversed")
        failed = False
        for s in steps:
            print(s[0], STATUS.get(s[1], s[1]), *s[2:])
            failed |= s[0] != "ACCESS" and s[1] != 0
        sys.exit(1 if failed else 0)
    elif cmd == "write-open":
        fh = c.walk(rest[0])
        print("SETATTR", STATUS.get(c.truncate(fh)))
        st, _ = c.write(fh, 0, rest[1].encode())
        print("WRITE", STATUS.get(st, st))
    elif cmd == "access":
        st, bits = c.access(c.walk(rest[0]), ACCESS_READ | ACCESS_MODIFY | ACCESS_EXTEND)
        print(STATUS.get(st, st), "read" if bits & ACCESS_READ else "", "modify" if bits & ACCESS_MODIFY else "", "extend" if bits & ACCESS_EXTEND else "")
    elif cmd == "fh":
        print(c.walk(rest[0]).hex())
    elif cmd == "getattr-fh":
        st, _ = c.getattr(bytes.fromhex(rest[0]))
        print(STATUS.get(st, st))
    elif cmd == "ls":
        fh, cookie, verf, names, pages = c.walk(rest[0]), 0, b"\0" * 8, [], 0
        while True:
            pages += 1
            st, page, verf, eof = c.readdirplus(fh, cookie, verf, 3 * 200)
            if st:
                print(STATUS.get(st, st))
                sys.exit(1)
            names += [n for n, _ in page]
            if eof or not page:
                break
            cookie = page[-1][1]
        print("\n".join(names))
        print(f"pages {pages}", file=sys.stderr)
    elif cmd == "bench-call":
        import time
        fh, n, took = c.walk(rest[0]), int(rest[1]), []
        for i in range(n):
            t0 = time.perf_counter_ns()
            steps = c.shell_write(fh, [f"bench {i}\n".encode()])
            took.append((time.perf_counter_ns() - t0) / 1000)
            if any(s[0] != "ACCESS" and s[1] for s in steps):
                sys.exit(f"failed: {steps}")
        took.sort()
        print(f"nfs call n={n} p50_us={took[n // 2]:.1f}")
    elif cmd == "comments":
        path, n = rest[0], int(rest[1])
        call = c.walk(path + "/.ops/comment/call")
        result = c.walk(path + "/.ops/comment/result")
        for i in range(n):
            text = f"client {os.getpid()} comment {i}\n".encode()
            steps = c.shell_write(call, [text])
            if any(s[0] != "ACCESS" and s[1] for s in steps):
                print("failed", steps)
                sys.exit(1)
            st, data = c.read_all(result)
            # Its own call's result: the comment it added, with its words.
            if st or text.strip() not in data:
                print("result", st, data)
                sys.exit(1)
        print("ok", n)
    elif cmd == "scatter-many":
        counts = {}
        for _ in range(int(rest[1])):
            st, _ = c.write(c.walk(rest[0]), 4 << 20, b"x" * 65536)
            counts[STATUS.get(st, st)] = counts.get(STATUS.get(st, st), 0) + 1
        for st, k in sorted(counts.items()):
            print("WRITE", st, k)
    elif cmd == "scatter":
        scatter(c, port, rest[0], int(rest[1]), int(rest[2]), int(rest[3]))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
