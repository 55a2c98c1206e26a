#!/usr/bin/env bash
# Benchmark: ratios against baselines measured in this same run (the machine is shared and
# noisy; absolute numbers mean little, ratios a lot). Needs root (drop_caches, mounting).
#
#   scripts/bench.sh              # ~100,000 paths (ISSUES=1500 synthetic issues)
#   ISSUES=300 scripts/bench.sh   # a quick run
#   scripts/bench-compare.sh REV  # this tree against revision REV, in one run
#
# Walks: `find` (every path) and `stat` (find -printf %s: lstat of every path) on a fresh
# mount (cold) and again (warm); `cat` of every `description`, first and second pass. Each
# against the same tree copied to tmpfs and against the FUSE floor (fuse-floor: a minimal
# fuser file system serving the same shape from memory). Then call latency through the
# mount vs in-process, and daemon memory per materialised node, before and after
# `echo 2 > /proc/sys/vm/drop_caches` (forget must free it).
set -euo pipefail
cd "$(dirname "$0")/.."
ISSUES=${ISSUES:-1500}
# Which parts to run: walk (seeding, find/stat/cat, memory, call latency), calls (reads
# while calls are in flight, large results, the log), db, search, feed (tail -f of the
# change feed), agent, exec, mcp, github, titled (titled names vs bare ones), shared
# (state, and the tracker, on PostgreSQL against SQLite; needs PostgreSQL running with a
# role for root, as .ci/run sets it up).
# tree (not in the default run) works in one tree natively, through bindfs, rclone mount,
# the FUSE floor and wip's files host: reads of a copy of /usr/include (TREE_TASKS: some of
# grep,find,cat,du,tar), cold and warm; git status and checkout in a clone of this
# project; tar x of 10,000 files and cargo build of a small crate, with the runs they made.
# overlay (not in the default run): a files host in overlay mode against the same host
# plain over one tree (/usr/include and a clone of this project): grep -r cold and warm,
# git status, and how long the first mount takes to make the layer.
# nfs: the default world over `wip serve-nfs` against its FUSE mount (walks with libnfs's
# nfs-ls against ls -lR; calls from one Python client each way).
# undo (not in the default run): what before-images cost: tar x over existing files, git
# checkout of a commit ~100 back and back, appends to 1,000 files and SQLite inserts, each
# through a files host with keep_before at its default and at 0, native and bindfs beside.
# shared24 (not in the default run; root, ip netns, PostgreSQL with ssl = on): 3 mounts in
# network namespaces share a journal and a tracker on PostgreSQL over TCP with TLS; 24
# bash agents call on issues of their own; latency against one idle agent's, exact counts.
SECTIONS=${SECTIONS:-walk,calls,db,search,feed,agent,exec,long,mcp,github,titled,shared,nfs}
on() { [[ ",$SECTIONS," == *",$1,"* ]]; }
CALLS=${CALLS:-2000}

# BIN=DIR runs another build's binaries (scripts/bench-compare.sh: an earlier revision).
if [ -n "${BIN:-}" ]; then
  bin=$(cd "$BIN" && pwd)
else
  cargo build --release --bins -q
  bin=${CARGO_TARGET_DIR:-$PWD/target}/release
fi
work=$(mktemp -d /tmp/wip-bench.XXXXXX)
shm=$(mktemp -d /dev/shm/wip-bench.XXXXXX)
m=$work/world f=$work/floor
floor_pid=""
exec_pid=""
cleanup() {
  cd /
  for d in "$work/peer/wip" "$work/peer/bindfs" "$work/peer/rclone" "$work/peer/floor" "$m" "$f" "$work/titledworld" "$work/callworld" "$work/feedworld" "$work/dbworld" "$work/bigm" "$work/smallm" "$work/searchworld" "$work/agentworld" "$work/execworld" "$work/execbad" "$work/longworld" "$work/mcpworld" "$work/ghworld" "$work/sqm" "$work/pgm" "$work/pgm2" "$work/floorcall" "$work/nfsfuse" "${uw:-/nonexistent}/mnt" "${uw:-/nonexistent}/bindfs" "$work/s24m1" "$work/s24m2" "$work/s24m3"; do
    mountpoint -q "$d" 2>/dev/null && { umount "$d" 2>/dev/null || umount -l "$d"; }
  done
  [ -n "$floor_pid" ] && kill "$floor_pid" 2>/dev/null || true
  [ -n "${nfs_pid:-}" ] && kill "$nfs_pid" 2>/dev/null || true
  [ -n "$exec_pid" ] && kill $exec_pid 2>/dev/null || true
  [ -n "${tail_pid:-}" ] && kill "$tail_pid" 2>/dev/null || true
  [ -n "${pgdb:-}" ] && psql -h /var/run/postgresql -d postgres -qc "DROP DATABASE IF EXISTS $pgdb WITH (FORCE)" 2>/dev/null || true
  [ -n "${s24watch:-}" ] && kill "$s24watch" 2>/dev/null || true
  [ -n "${s24relays:-}" ] && kill "${s24relays[@]}" 2>/dev/null || true
  for ns in ${s24ns[@]+"${s24ns[@]}"}; do ip netns del "$ns" 2>/dev/null || true; done
  if [ -n "${s24role:-}" ]; then
    for db in state tracker; do psql -h /var/run/postgresql -d postgres -qc "DROP DATABASE IF EXISTS ${s24role}_$db WITH (FORCE)" 2>/dev/null || true; done
    psql -h /var/run/postgresql -d postgres -qc "DROP ROLE IF EXISTS $s24role" 2>/dev/null || true
  fi
  [ -n "${pgtracker:-}" ] && psql -h /var/run/postgresql -d postgres -qc "DROP DATABASE IF EXISTS $pgtracker WITH (FORCE)" 2>/dev/null || true
  [ -n "${uw:-}" ] && rm -rf "$uw"
  rm -rf "$work" "$shm"
}
trap cleanup EXIT
mkdir -p "$work/files" "$m" "$f"

cat > "$work/bench.toml" <<TOML
[world]
name = "bench"
[identity]
user = "alex"
role = "maintainer"
[[host]]
kind = "tracker"
path = "tracker"
seed = "demo"
extra_issues = $ISSUES
page_size = 100000
TOML

now() { date +%s%N; }
# secs CMD…: wall time of a command in seconds.
secs() { local t0 t1; t0=$(now); "$@" > /dev/null 2>&1; t1=$(now); echo "scale=4; ($t1 - $t0) / 1000000000" | bc; }
ratio() { echo "scale=2; $1 / $2" | bc; }
# best3 FN DIR: the fastest of three passes (a warm walk, all caches filled).
best3() { local a b c; a=$(secs "$1" "$2"); b=$(secs "$1" "$2"); c=$(secs "$1" "$2"); printf '%s\n' "$a" "$b" "$c" | sort -n | head -n 1; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# The daemon's pid from what `wip mount` prints (pgrep would read every process's command
# line, and hangs on one stuck on some other dead FUSE mount).
daemon_pid() { sed -n 's/.*(daemon pid \([0-9]*\),.*/\1/p'; }
mount_wip() {
  wip_pid=$(cd "$work/files" && "$bin/wip" mount "$m" --state "$work/state" --manifest "$work/bench.toml" | daemon_pid)
}
umount_wip() { "$bin/wip" umount "$m"; while kill -0 "$wip_pid" 2>/dev/null; do sleep 0.05; done; }
mount_floor() {
  "$bin/fuse-floor" "$f" "$work/shape" & floor_pid=$!
  for _ in $(seq 1 500); do mountpoint -q "$f" && return; sleep 0.02; done
  echo "fuse-floor did not mount"; exit 1
}
umount_floor() { umount "$f"; wait "$floor_pid" 2>/dev/null || true; floor_pid=""; }
# floor_call N: the p50 of N calls (`open(O_TRUNC)`, one write, close) through a floor that
# serves one `call` file: the least a call through any FUSE mount costs on this machine.
# Empty when this build's fuse-floor takes no writes.
floor_call() {
  local fm=$work/floorcall out
  mkdir -p "$fm"; printf 'd\t0\tx\nf\t0\tx/call\n' > "$work/floorcall.shape"
  "$bin/fuse-floor" "$fm" "$work/floorcall.shape" & floor_pid=$!
  for _ in $(seq 1 500); do mountpoint -q "$fm" && break; sleep 0.02; done
  out=$("$bin/wip-bench" mount-call "$fm/x/call" $'\n' "$1" 2>/dev/null | sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p') || true
  umount "$fm"; wait "$floor_pid" 2>/dev/null || true; floor_pid=""
  echo "$out"
}
# floor_bound WHAT BASELINE_P50 FLOOR_P50: the least ratio a call through FUSE can reach
# against BASELINE, when its host took no more time than the baseline and wip none.
floor_bound() {
  [ -n "$3" ] || return 0
  echo "$1: the FUSE floor's call ${3} us + the baseline ${2} us = $(echo "$2 + $3" | bc) us, the least through any FUSE mount here: ratio $(ratio "$(echo "$2 + $3" | bc)" "$2") at best"
}

walk_find() { find "$1" > /dev/null; }
walk_stat() { find "$1" -printf '%s\n' > /dev/null; }
walk_cat() { find "$1" -name description -print0 | xargs -0 cat > /dev/null; }

p50() { sed -n "s/^$1.*p50_us=\([0-9.]*\).*/\1/p" "$2"; }

if on walk; then
echo "# seeding and mounting (ISSUES=$ISSUES)"
# Baseline: the same world seeded with the demo project alone, on a fresh state too.
sed '/^extra_issues/d' "$work/bench.toml" > "$work/demo.toml"
t_demo=$(secs bash -c "cd '$work/files' && '$bin/wip' mount '$work/smallm' --state '$work/demostate' --manifest '$work/demo.toml'")
"$bin/wip" umount "$work/smallm"
t0=$(now)
mount_wip
t1=$(now)
t_seed=$(echo "scale=4; ($t1 - $t0) / 1000000000" | bc)
echo "first mount: ${t_seed} s with $ISSUES extra issues, ${t_demo} s with the demo seed alone; ratio $(ratio "$t_seed" "$t_demo")"
rss_empty=$(rss_kb "$wip_pid")
paths=$(find "$m" | wc -l)
find "$m" -mindepth 1 -printf '%y\t%s\t%P\t%l\n' > "$work/shape"
# The op directory the call latency below writes into: unlisted, as wip's `.ops` are.
printf 'd\t0\ttracker/issues/1/.ops\nd\t0\ttracker/issues/1/.ops/get_metadata\nf\t0\ttracker/issues/1/.ops/get_metadata/call\n' >> "$work/shape"
umount_wip
# The same tree on tmpfs: same names, types and sizes.
python3 - "$work/shape" "$shm" <<'PY'
import os, sys
shape, root = sys.argv[1], sys.argv[2]
for line in open(shape, encoding="utf-8"):
    t, size, path, *target = line.rstrip("\n").split("\t", 3)
    if "/.ops" in "/" + path:
        continue
    p = os.path.join(root, path)
    if t == "d":
        os.makedirs(p, exist_ok=True)
    elif t == "l":
        os.symlink(target[0] if target and target[0] else "../x", p)
    else:
        with open(p, "wb") as fh:
            fh.write(b"x" * int(size))
PY
echo "paths: $paths"

echo "# find / stat, cold (fresh mount) and warm"
sync; echo 3 > /proc/sys/vm/drop_caches
t_find_tmpfs=$(best3 walk_find "$shm")
t_stat_tmpfs=$(best3 walk_stat "$shm")
t_cat1_tmpfs=$(secs walk_cat "$shm"); t_cat2_tmpfs=$(secs walk_cat "$shm")
# Cold: the first pass over a fresh mount. Warm: the best of the three passes after it.
mount_floor; t_find_floor_cold=$(secs walk_find "$f"); t_find_floor_warm=$(best3 walk_find "$f"); umount_floor
mount_floor; t_stat_floor_cold=$(secs walk_stat "$f"); t_stat_floor_warm=$(best3 walk_stat "$f")
t_cat1_floor=$(secs walk_cat "$f"); t_cat2_floor=$(secs walk_cat "$f"); umount_floor
mount_wip; t_find_wip_cold=$(secs walk_find "$m"); t_find_wip_warm=$(best3 walk_find "$m"); umount_wip
mount_wip; t_stat_wip_cold=$(secs walk_stat "$m"); t_stat_wip_warm=$(best3 walk_stat "$m")
t_cat1_wip=$(secs walk_cat "$m"); t_cat2_wip=$(secs walk_cat "$m")

printf '%-26s %9s %9s %9s %12s %12s\n' walk "tmpfs s" "floor s" "wip s" "wip/tmpfs" "wip/floor"
row() { printf '%-26s %9s %9s %9s %12s %12s\n' "$1" "$2" "$3" "$4" "$(ratio "$4" "$2")" "$(ratio "$4" "$3")"; }
row "find, cold"   "$t_find_tmpfs" "$t_find_floor_cold" "$t_find_wip_cold"
row "find, warm"   "$t_find_tmpfs" "$t_find_floor_warm" "$t_find_wip_warm"
row "stat, cold"   "$t_stat_tmpfs" "$t_stat_floor_cold" "$t_stat_wip_cold"
row "stat, warm"   "$t_stat_tmpfs" "$t_stat_floor_warm" "$t_stat_wip_warm"
row "cat description, 1st" "$t_cat1_tmpfs" "$t_cat1_floor" "$t_cat1_wip"
row "cat description, 2nd" "$t_cat2_tmpfs" "$t_cat2_floor" "$t_cat2_wip"

echo "# memory"
rss_full=$(rss_kb "$wip_pid")
nodes_full=$(awk '/^materialised_nodes/ {print $2}' "$m/.wip/stats")
sync; echo 2 > /proc/sys/vm/drop_caches; sleep 1
rss_dropped=$(rss_kb "$wip_pid")
nodes_dropped=$(awk '/^materialised_nodes/ {print $2}' "$m/.wip/stats")
echo "daemon RSS: ${rss_empty} KiB mounted, ${rss_full} KiB with ${nodes_full} nodes materialised, ${rss_dropped} KiB with ${nodes_dropped} after drop_caches"
echo "RSS per materialised node: $(echo "scale=0; ($rss_full - $rss_empty) * 1024 / ($nodes_full + 1)" | bc) bytes"

echo "# call latency (get_metadata on an issue, $CALLS calls)"
"$bin/wip-bench" mount-call "$m/tracker/issues/1/ops/get_metadata/call" $'\n' "$CALLS" | tee "$work/mount.txt"
# A plain-text document (`echo hello > ops/comment/call`) can still grow, so it runs at the
# descriptor's last close, which the daemon judges from /proc.
"$bin/wip-bench" mount-call "$m/tracker/issues/2/ops/comment/call" "hello" $((CALLS / 4)) | tee "$work/mountc.txt"
# The same op as JSON, which runs at the first flush that completes the document.
"$bin/wip-bench" mount-call "$m/tracker/issues/3/ops/comment/call" '{"body":"hello"}' $((CALLS / 4)) | tee "$work/mountcj.txt"
# The same four round trips (OPEN, GETXATTR, WRITE, FLUSH) with nothing behind them: the
# floor's `call` files take writes. What a call costs beyond it is wip's own.
umount_wip
mount_floor
# (An earlier build's fuse-floor takes no writes: its figure is then missing.)
if "$bin/wip-bench" mount-call "$f/tracker/issues/1/ops/get_metadata/call" $'\n' "$CALLS" > "$work/floorcall.raw" 2>&1; then
  sed 's/^through the mount/through the FUSE floor/' "$work/floorcall.raw" | tee "$work/floorcall.txt"
else
  echo "this build's fuse-floor takes no writes: $(tail -n 1 "$work/floorcall.raw")"; : > "$work/floorcall.txt"
fi
umount_floor
# One daemon per state directory: the in-process world takes it once the mount is gone.
"$bin/wip-bench" host-call --state "$work/state" --manifest "$work/bench.toml" /tracker/issues/1 get_metadata '{}' "$CALLS" | tee "$work/inproc.txt"
"$bin/wip-bench" host-call --state "$work/state" --manifest "$work/bench.toml" /tracker/issues/2 comment '{"body":"hello"}' $((CALLS / 4)) | tee "$work/inprocc.txt"
mount_p50=$(p50 "through the mount" "$work/mount.txt")
host_p50=$(p50 "in-process host.call" "$work/inproc.txt")
echo "call overhead p50 (mount - host in-process): $(echo "$mount_p50 - $host_p50" | bc) us; ratio $(ratio "$mount_p50" "$host_p50")"
floor_p50=$(p50 "through the FUSE floor" "$work/floorcall.txt")
world_p50=$(p50 "in-process world.call" "$work/inproc.txt")
if [ -n "$floor_p50" ]; then
  echo "the same four round trips through the FUSE floor: ${floor_p50} us p50, itself $(ratio "$floor_p50" "$host_p50")x the host in-process"
  echo "wip's own share (mount - floor): $(echo "$mount_p50 - $floor_p50" | bc) us, of which the runtime in-process (world.call) ${world_p50} us; mount/floor $(ratio "$mount_p50" "$floor_p50")"
  journal_p50=$(p50 "in-process journal begin+finish" "$work/inproc.txt")
  [ -z "$journal_p50" ] || echo "the journal's two commits alone (the run before it runs, its outcome after): ${journal_p50} us p50, $(ratio "$journal_p50" "$floor_p50")x the floor's call: the least wip's own share can be while every call survives a crash"
fi
c_mount=$(p50 "through the mount" "$work/mountc.txt")
c_host=$(p50 "in-process host.call" "$work/inprocc.txt")
cj_mount=$(p50 "through the mount" "$work/mountcj.txt")
echo "plain-text comment p50: ${c_mount} us through the mount, ${c_host} us host in-process; ratio $(ratio "$c_mount" "$c_host")"
echo "the same comment as JSON p50: ${cj_mount} us through the mount; plain text / JSON $(ratio "$c_mount" "$cj_mount")"
fi

if on calls; then
echo "# calls in flight: reads elsewhere while 32 calls of one op wait (no call holds the mount)"
cm=$work/callworld marks=$work/marks
mkdir -p "$marks" "$work/callfiles"
cat > "$work/calls.toml" <<TOML
[[host]]
kind = "agent"
path = "slow"
command = ["sh", "-c", "cat > /dev/null; touch \$MARK/in.\$\$; while [ ! -e \$MARK/go ]; do sleep 0.02; done; echo released"]
wait_ms = 20000
env = { MARK = "$marks" }
[[host]]
kind = "tracker"
path = "tracker"
[[host]]
kind = "files"
path = "files"
root = "$work/callfiles"
TOML
(cd "$work/files" && "$bin/wip" mount "$cm" --state "$work/callstate" --manifest "$work/calls.toml" > /dev/null)
"$bin/wip-bench" read "$cm/tracker/issues/42/description" 2000 | tee "$work/idle.txt"
for i in $(seq 1 32); do echo "q$i" > "$cm/slow/ops/ask/call" & done
for _ in $(seq 1 1000); do [ "$(ls "$marks" | grep -c '^in\.')" = 32 ] && break; sleep 0.05; done
echo "calls in flight: $(ls "$marks" | grep -c '^in\.')"
"$bin/wip-bench" read "$cm/tracker/issues/42/description" 2000 | tee "$work/busy.txt"
t_ls_busy=$(secs ls "$cm/tracker/labels")
touch "$marks/go"; wait
p99() { sed -n "s/^$1.*p99_us=\([0-9.]*\).*/\1/p" "$2"; }
echo "read p50: idle $(p50 read "$work/idle.txt") us, 32 calls in flight $(p50 read "$work/busy.txt") us; p99 $(p99 read "$work/idle.txt") vs $(p99 read "$work/busy.txt") us (ratio $(ratio "$(p99 read "$work/busy.txt")" "$(p99 read "$work/idle.txt")")); ls of labels while busy ${t_ls_busy} s"
echo "# a large result: read back by wip call vs cat"
python3 -c "
import sys
with open(sys.argv[1], 'w') as f:
    for i in range(190000):
        f.write(('line %d ' % i).ljust(79, 'x') + '\n')
" "$work/callfiles/big.txt"
t_wipcall=$(secs "$bin/wip" call "$cm/files/big.txt/ops/read" limit=1000000)
t_echo=$(secs bash -c "echo limit=1000000 > '$cm/files/big.txt/ops/read/call'")
t_cat=$(secs cat "$cm/files/big.txt/ops/read/result")
size=$(stat -c %s "$cm/files/big.txt/ops/read/result")
echo "result of $size bytes: wip call ${t_wipcall} s (call and read back), echo ${t_echo} s + cat ${t_cat} s (ratio $(ratio "$t_wipcall" "$(echo "$t_echo + $t_cat" | bc)"))"
echo "# .wip/log with a large journal"
"$bin/wip-bench" mount-call "$cm/tracker/issues/1/ops/get_metadata/call" $'\n' 20000 > /dev/null
"$bin/wip-bench" read "$cm/.wip/log" 50 | tee "$work/log.txt"
echo ".wip/log: $(wc -l < "$cm/.wip/log") lines, $(stat -c %s "$cm/.wip/log") bytes, read p50 $(p50 read "$work/log.txt") us over a journal of $(awk '/^calls/ {print $2}' "$cm/.wip/stats") calls"
"$bin/wip" umount "$cm"
fi

if on db; then
echo "# db host (Chinook, zipcodes.db; a generated 1 GB database)"
scripts/fixtures.sh "$work/fx" > /dev/null
dbm=$work/dbworld
cat > "$work/db.toml" <<TOML
[[host]]
kind = "db"
path = "db/chinook"
file = "$work/fx/chinook.db"
[[host]]
kind = "db"
path = "db/zip"
file = "$work/fx/zipcodes.db"
TOML
db_pid=$(cd "$work/files" && "$bin/wip" mount "$dbm" --state "$work/dbstate" --manifest "$work/db.toml" | daemon_pid)
sql="SELECT TrackId, Name FROM Track WHERE AlbumId = 1 ORDER BY TrackId"
"$bin/wip-bench" mount-call "$dbm/db/chinook/ops/query/call" "{\"sql\":\"$sql\"}" 500 | tee "$work/dbmount.txt"
"$bin/wip-bench" sql "$work/fx/chinook.db" "$sql" 500 | tee "$work/dbsql.txt"
q_mount=$(p50 "through the mount" "$work/dbmount.txt")
q_sql=$(p50 "in-process rusqlite" "$work/dbsql.txt")
echo "query p50: ${q_mount} us through the mount, ${q_sql} us rusqlite in-process; ratio $(ratio "$q_mount" "$q_sql")"
floor_bound "query" "$q_sql" "$(floor_call 500)"
t_ls_zip=$(secs ls "$dbm/db/zip/tables/ZipCodes/rows")
echo "ls of ZipCodes/rows (43,191 rows, first page): ${t_ls_zip} s, $(ls "$dbm/db/zip/tables/ZipCodes/rows" | wc -l) names"
rss_db_before=$(rss_kb "$db_pid")
for db in chinook zip; do
  for t in $(ls "$dbm/db/$db/tables" | grep -v -x -e description -e ref -e ops); do
    ls "$dbm/db/$db/tables/$t/rows" > /dev/null
  done
done
echo "daemon RSS: ${rss_db_before} KiB before, $(rss_kb "$db_pid") KiB after listing every table's rows"
"$bin/wip" umount "$dbm"
python3 - "$work/big.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, payload BLOB)")
db.execute("""WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000000)
              INSERT INTO big SELECT x, randomblob(1000) FROM c""")
db.commit()
PY
printf '[[host]]\nkind = "db"\npath = "db/big"\nfile = "%s"\n' "$work/big.db" > "$work/big.toml"
printf '[[host]]\nkind = "files"\npath = "files"\n' > "$work/empty.toml"
t_mount_big=$(secs bash -c "cd '$work/files' && '$bin/wip' mount '$work/bigm' --state '$work/bigstate' --manifest '$work/big.toml'")
"$bin/wip" umount "$work/bigm"
t_mount_small=$(secs bash -c "cd '$work/files' && '$bin/wip' mount '$work/smallm' --state '$work/smallstate' --manifest '$work/empty.toml'")
"$bin/wip" umount "$work/smallm"
echo "mount time: $(du -h "$work/big.db" | cut -f1) database ${t_mount_big} s, a files-only world ${t_mount_small} s"
fi

if on search; then
echo "# search host (the Rust documentation installed with the toolchain)"
docs=${DOCS:-$(rustc --print sysroot)/share/doc/rust/html}
sm=$work/searchworld
printf '[[host]]\nkind = "files"\npath = "docs"\nroot = "%s"\nread_only = true\n[[host]]\nkind = "search"\npath = "search"\n' "$docs" > "$work/search.toml"
t0=$(now)
(cd "$work/files" && "$bin/wip" mount "$sm" --state "$work/searchstate" --manifest "$work/search.toml" > /dev/null)
while grep -q "indexing" "$sm/search/description"; do sleep 0.5; done
t1=$(now)
idx_s=$(echo "scale=2; ($t1 - $t0) / 1000000000" | bc)
cat "$sm/search/description"
docs_n=$(sed -n 's/.* over \([0-9]*\) documents.*/\1/p' "$sm/search/description")
echo "wip indexing (walk, read, HTML to text, index): ${docs_n} documents in ${idx_s} s = $(echo "scale=0; $docs_n / $idx_s" | bc) docs/s"
"$bin/wip-bench" tantivy "$docs"
"$bin/wip-bench" mount-call "$sm/search/ops/search/call" '{"query":"ownership borrow checker"}' 100 | tee "$work/searchmount.txt"
"$bin/wip" umount "$sm"
"$bin/wip-bench" host-call --state "$work/searchstate" --manifest "$work/search.toml" /search search '{"query":"ownership borrow checker"}' 100 | tee "$work/searchin.txt"
s_mount=$(p50 "through the mount" "$work/searchmount.txt")
s_in=$(p50 "in-process host.call" "$work/searchin.txt")
echo "search p50: ${s_mount} us through the mount, ${s_in} us in-process; ratio $(ratio "$s_mount" "$s_in")"
echo "index size on disk: $(du -sh "$work/searchstate"/search-search | cut -f1)"
fi

if on feed; then
echo "# change feed: how soon tail -f sees an event, vs tail -f of a file on tmpfs"
# Both with tail's polling (once a second; inotify sees no change inside a FUSE file), so
# the ratio is what the feed adds to tail's own wait.
fm=$work/feedworld
FEEDS=${FEEDS:-8}
printf '[[host]]\nkind = "tracker"\npath = "tracker"\n' > "$work/feed.toml"
(cd "$work/files" && "$bin/wip" mount "$fm" --state "$work/feedstate" --manifest "$work/feed.toml" > /dev/null)
: > "$shm/feed.log"
# seen FILE CMD…: seconds from running CMD until `tail -f FILE` prints a new line.
seen() {
  local file=$1 fifo=$work/feed.fifo tp t0 t1 line; shift
  rm -f "$fifo"; mkfifo "$fifo"
  tail -n 0 ---disable-inotify -f "$file" > "$fifo" & tp=$!
  exec 7< "$fifo"
  until [ -n "$(find "/proc/$tp/fd" -lname "$file" 2>/dev/null)" ]; do sleep 0.01; done
  # At a random point of tail's one-second wait, as an event comes.
  sleep "0.$((RANDOM % 10))"
  t0=$(now); "$@" > /dev/null; read -r -u 7 line; t1=$(now)
  kill "$tp"; wait "$tp" 2>/dev/null || true; exec 7<&-
  echo "scale=3; ($t1 - $t0) / 1000000000" | bc
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
append() { echo "line" >> "$shm/feed.log"; }
comment() { echo "feed $RANDOM" > "$fm/tracker/issues/17/ops/comment/call"; }
t_feed_tmpfs=$(for _ in $(seq 1 "$FEEDS"); do seen "$shm/feed.log" append; done | median)
t_feed_wip=$(for _ in $(seq 1 "$FEEDS"); do seen "$fm/.wip/events" comment; done | median)
"$bin/wip" umount "$fm"
echo "tail -f sees a new line after (median of $FEEDS): ${t_feed_tmpfs} s on tmpfs, ${t_feed_wip} s on .wip/events after a call; ratio $(ratio "$t_feed_wip" "$t_feed_tmpfs")"
fi

if on agent; then
echo "# agents host: ask on an instant agent vs running the command directly"
am=$work/agentworld
ASKS=${ASKS:-200}
mkdir -p "$am"
printf '[[host]]\nkind = "agent"\npath = "agents/echo"\ncommand = ["sh", "-c", "cat > /dev/null; echo hi"]\n' > "$work/agent.toml"
(cd "$work/files" && "$bin/wip" mount "$am" --state "$work/agentstate" --manifest "$work/agent.toml" > /dev/null)
direct() { for _ in $(seq 1 "$ASKS"); do printf '{"role":"user","content":"hi"}\n' | sh -c 'cat > /dev/null; echo hi' > /dev/null; done; }
asks() { for _ in $(seq 1 "$ASKS"); do echo hi > "$am/agents/echo/ops/ask/call"; done; }
t_direct=$(secs direct)
t_ask=$(secs asks)
"$bin/wip" umount "$am"
echo "agent: $ASKS turns, direct $(echo "scale=2; $t_direct * 1000 / $ASKS" | bc) ms each, ask through the mount $(echo "scale=2; $t_ask * 1000 / $ASKS" | bc) ms each; ratio $(ratio "$t_ask" "$t_direct")"
fi

if on exec; then
echo "# exec host (examples/hosts/processes.py, Python): read_body of a sleep process, $CALLS calls"
em=$work/execworld
sock=$work/processes.sock
python3 examples/hosts/processes.py --listen "unix:$sock" 2> /dev/null & exec_pid=$!
sleep 3600 & target=$!; exec_pid="$exec_pid $target"
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
cat > "$work/exec.toml" <<TOML
[[host]]
kind = "exec"
path = "stdio"
command = ["python3", "$PWD/examples/hosts/processes.py"]
[[host]]
kind = "exec"
path = "unix"
connect = "unix:$sock"
TOML
mkdir -p "$em"
(cd "$work/files" && "$bin/wip" mount "$em" --state "$work/execstate" --manifest "$work/exec.toml" > /dev/null)
for t in stdio unix; do
  "$bin/wip-bench" mount-call "$em/$t/$target/ops/read_body/call" $'\n' "$CALLS" | tee "$work/exec-$t-mount.txt"
done
"$bin/wip" umount "$em"
for t in stdio unix; do
  "$bin/wip-bench" host-call --state "$work/execstate" --manifest "$work/exec.toml" "/$t/$target" read_body '{}' "$CALLS" | tee "$work/exec-$t-in.txt"
  e_mount=$(p50 "through the mount" "$work/exec-$t-mount.txt")
  e_in=$(p50 "in-process host.call" "$work/exec-$t-in.txt")
  echo "exec over $t p50: ${e_mount} us through the mount, ${e_in} us calling the host over $t without FUSE; ratio $(ratio "$e_mount" "$e_in")"
  floor_bound "exec over $t" "$e_in" "${e_floor:=$(floor_call "$CALLS")}"
done
kill $exec_pid; exec_pid=""

echo "# exec host misbehaving: reads of a healthy host while another hangs a call, and of hosts that are down"
bm=$work/execbad
cat > "$work/execbad.toml" <<TOML
[[host]]
kind = "exec"
path = "processes"
command = ["python3", "$PWD/examples/hosts/processes.py"]
[[host]]
kind = "exec"
path = "bad/hang"
command = ["python3", "$PWD/tests/hosts/misbehave.py", "hang"]
call_timeout_ms = 20000
[[host]]
kind = "exec"
path = "bad/mute"
command = ["python3", "$PWD/tests/hosts/misbehave.py", "mute"]
start_timeout_ms = 1000
TOML
mkdir -p "$bm"
(cd "$work/files" && "$bin/wip" mount "$bm" --state "$work/execbadstate" --manifest "$work/execbad.toml" > /dev/null)
until grep -q "^Processes of" "$bm/processes/description"; do sleep 0.05; done
until grep -q "is down" "$bm/bad/mute/description"; do sleep 0.05; done
READS=${READS:-500}
# A guard is read with direct I/O and evaluated by the host (the runtime keeps it 0.5 s):
# every read reaches the daemon, and some the host.
guard=$bm/processes/1/ops/signal/guard
"$bin/wip-bench" mount-read "$guard" "$READS" | tee "$work/read-idle.txt"
(echo > "$bm/bad/hang/ops/misbehave/call") 2> /dev/null & hung=$!
until grep -q "running .*/bad/hang misbehave" "$bm/.wip/log"; do sleep 0.05; done
"$bin/wip-bench" mount-read "$guard" "$READS" | tee "$work/read-hung.txt"
"$bin/wip-bench" mount-read "$bm/bad/mute/" "$READS" | tee "$work/read-mute.txt"
"$bin/wip-bench" mount-read "$bm/bad/mute/description" "$READS" | tee "$work/read-mute-root.txt"
r_idle=$(p50 "read" "$work/read-idle.txt")
r_hung=$(p50 "read" "$work/read-hung.txt")
r_mute=$(p50 "read" "$work/read-mute.txt")
r_root=$(p50 "read" "$work/read-mute-root.txt")
echo "cat processes/1/ops/signal/guard p50: ${r_idle} us idle, ${r_hung} us while bad/hang hangs a call; ratio $(ratio "$r_hung" "$r_idle")"
echo "a host that never shakes hands: ls bad/mute fails in ${r_mute} us (p50), cat bad/mute/description ${r_root} us; vs the healthy guard read $(ratio "$r_mute" "$r_idle")"
"$bin/wip" umount "$bm"
wait "$hung" 2> /dev/null || true
fi

if on long; then
echo "# long calls: a run outlives its caller's wait; wait wakes at its end; progress reads while it runs"
lm=$work/longworld
cat > "$work/long.toml" <<TOML
[world]
call_timeout_ms = 500
[[host]]
kind = "exec"
path = "slow"
command = ["python3", "$PWD/tests/hosts/misbehave.py", "crash"]
TOML
mkdir -p "$lm"
(cd "$work/files" && "$bin/wip" mount "$lm" --state "$work/longstate" --manifest "$work/long.toml" > /dev/null)
until grep -q "misbehaves" "$lm/slow/description"; do sleep 0.05; done
# 20 steps of 100 ms: the host's own 2.0 s, through four of the caller's 0.5 s waits.
t_wait=$(secs "$bin/wip" call --wait "$lm/slow/ops/slow" '{"steps":20,"ms":100}')
echo "wip call --wait of a 2.0 s call (call_timeout_ms 500): ${t_wait} s end to end; beyond the host's own time $(echo "scale=3; $t_wait - 2.0" | bc) s"
# ETIMEDOUT is the point: the caller stops waiting, the run goes on.
(echo '{"steps":100,"ms":100}' > "$lm/slow/ops/slow/call") 2> /dev/null || true
run=$lm/slow/ops/slow/runs/2
"$bin/wip-bench" mount-read "$run/progress" 500 | tee "$work/progress.txt"
"$bin/wip-bench" mount-read "$lm/slow/description" 500 | tee "$work/longdesc.txt"
echo "cat RUN/progress p50 while the run runs: $(p50 read "$work/progress.txt") us; the host root's description $(p50 read "$work/longdesc.txt") us (ratio $(ratio "$(p50 read "$work/progress.txt")" "$(p50 read "$work/longdesc.txt")"))"
t_cancel=$(secs bash -c "echo > '$run/ops/cancel/call' || true")
echo "cancel of a running run (the host told, the run ended cancelled): ${t_cancel} s; status $(cat "$run/status")"
"$bin/wip-bench" mount-call "$lm/slow/ops/echo/call" 'hi' "$CALLS" | tee "$work/long-echo.txt"
"$bin/wip" umount "$lm"
"$bin/wip-bench" host-call --state "$work/longstate" --manifest "$work/long.toml" "/slow" echo '{"text":"hi"}' "$CALLS" | tee "$work/long-echo-in.txt"
l_mount=$(p50 "through the mount" "$work/long-echo.txt")
l_in=$(p50 "in-process host.call" "$work/long-echo-in.txt")
echo "a quick exec call (a run with its signal, progress routing and cancel hook) p50: ${l_mount} us through the mount, ${l_in} us calling the host without FUSE; ratio $(ratio "$l_mount" "$l_in")"
fi

if on mcp; then
echo "# mcp host (server-everything over stdio: its echo tool)"
scripts/fixtures.sh > /dev/null
js=$PWD/target/fixtures/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js
mm=$work/mcpworld
printf '[[host]]\nkind = "mcp"\npath = "mcp/everything"\ncommand = ["node", "%s", "stdio"]\n' "$js" > "$work/mcp.toml"
t0=$(now)
(cd "$work/files" && "$bin/wip" mount "$mm" --state "$work/mcpstate" --manifest "$work/mcp.toml" > /dev/null)
t1=$(now)
until grep -q "· ready ·" "$mm/mcp/everything/description"; do sleep 0.05; done
t2=$(now)
echo "mount: $(echo "scale=3; ($t1 - $t0) / 1000000000" | bc) s; server ready after $(echo "scale=3; ($t2 - $t0) / 1000000000" | bc) s"
"$bin/wip-bench" mount-call "$mm/mcp/everything/ops/echo/call" '{"message":"hi"}' "$CALLS" | tee "$work/mcpmount.txt"
"$bin/wip" umount "$mm"
"$bin/wip-bench" mcp-call echo '{"message":"hi"}' "$CALLS" -- node "$js" stdio 2>/dev/null | tee "$work/mcpdirect.txt"
m_mount=$(p50 "through the mount" "$work/mcpmount.txt")
m_rmcp=$(p50 "rmcp client over stdio" "$work/mcpdirect.txt")
m_host=$(p50 "in-process host.call" "$work/mcpdirect.txt")
p99() { sed -n "s/^$1.*p99_us=\([0-9.]*\).*/\1/p" "$2"; }
echo "echo p50: ${m_mount} us through the mount, ${m_host} us host in-process, ${m_rmcp} us rmcp alone; mount/rmcp $(ratio "$m_mount" "$m_rmcp"), mount/host $(ratio "$m_mount" "$m_host")"
echo "echo p99: $(p99 "through the mount" "$work/mcpmount.txt") us through the mount, $(p99 "rmcp client over stdio" "$work/mcpdirect.txt") us rmcp alone"
floor_bound "echo" "$m_rmcp" "$(floor_call "$CALLS")"
"$bin/wip-bench" mcp-open 20 | tee "$work/mcpopen.txt"
o_never=$(p50 "open, a server that never answers" "$work/mcpopen.txt")
o_exits=$(p50 "open, a server that exits at once" "$work/mcpopen.txt")
echo "McpHost::open p50: ${o_never} us for a server that never answers, ${o_exits} us for one that exits at once; ratio $(ratio "$o_never" "$o_exits") (opening waits for neither)"
fi

if on github; then
echo "# github host: recorded GitHub responses (@octokit/fixtures, octocrab's tests/resources) replayed on 127.0.0.1"
scripts/fixtures.sh > /dev/null
sc=$PWD/target/fixtures/node/node_modules/@octokit/fixtures/scenarios/api.github.com
res=$(cargo metadata --format-version 1 | python3 -c 'import json, os, sys
m = json.load(sys.stdin)
print([os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == "octocrab"][0])')/tests/resources
# The replay server exits when this script (its stdin) goes away.
coproc REPLAY { "$bin/github-replay" --fixture "$sc/get-repository/normalized-fixture.json" \
  --fixture "$sc/paginate-issues/normalized-fixture.json" --resources "$res" \
  --route "GET /repos/octocat/Hello-World 200 pull_requests_list.json#/0/base/repo" \
  --route "GET /repos/octocat/Hello-World/pulls 200 pull_requests_list.json" \
  --route "GET /repos/octocat/Hello-World/pulls/1347/reviews 200 get_pull_request_review.json#[]" \
  --route "GET /repos/octocat/Hello-World/commits/6dcb09b5b57875f334f61aebed695e2e4193db5e/check-runs?per_page=100 200 commit_check_runs.json" \
  --route "GET /repos/octocat/Hello-World/branches/master/protection 200 repo_branch_protection.json" \
  --route "GET /user 200 user_data.json"; }
read -r port <&"${REPLAY[0]}"
# reqs: requests the replay server answered so far.
reqs() { exec 5<>"/dev/tcp/127.0.0.1/$port"; printf 'GET /__wip/requests HTTP/1.0\r\n\r\n' >&5; tail -n 1 <&5; exec 5>&-; }
gm=$work/ghworld
mkdir -p "$gm"
cat > "$work/gh.toml" <<TOML
[[host]]
kind = "github"
path = "github"
repos = ["octokit-fixture-org/hello-world", "octocat/Hello-World"]
base_uri = "http://127.0.0.1:$port"
token_env = "WIP_BENCH_GITHUB_TOKEN"
gh = false
per_page = 30
cache_ttl_secs = 3
# paginate-issues was recorded at 3 issues a page.
[[host]]
kind = "github"
path = "paged"
repos = ["octokit-fixture-org/paginate-issues"]
base_uri = "http://127.0.0.1:$port"
token_env = "WIP_BENCH_GITHUB_TOKEN"
gh = false
per_page = 3
cache_ttl_secs = 3
TOML
org=$gm/github/octokit-fixture-org
porg=$gm/paged/octokit-fixture-org
WIP_BENCH_GITHUB_TOKEN=bench-token-not-real "$bin/wip" mount "$gm" --state "$work/ghstate" --manifest "$work/gh.toml" > /dev/null
r0=$(reqs); echo "requests made by mounting: $r0"
r=$(reqs); t_cold=$(secs ls "$org/hello-world"); a=$(reqs)
echo "requests made by ls of a repo: $((a - r)) (${t_cold} s)"
r=$(reqs); t_warm=$(secs ls "$org/hello-world"); a=$(reqs)
echo "requests made by the same ls again within the TTL: $((a - r)) (${t_warm} s)"
r=$(reqs); t_icold=$(secs ls "$porg/paginate-issues/issues"); a=$(reqs)
echo "requests made by ls of a repo's issues (13 issues, pages of 3): $((a - r)) (${t_icold} s)"
r=$(reqs); t_iwarm=$(secs ls "$porg/paginate-issues/issues"); a=$(reqs)
echo "requests made by the same ls again within the TTL: $((a - r)) (${t_iwarm} s; $(ratio "$t_icold" "$t_iwarm")x faster)"
r=$(reqs); cat "$gm/github/octocat/Hello-World/pulls/1347/ops/merge/guard" > /dev/null; a=$(reqs)
echo "requests made by a guard read (merge of a pull request): $((a - r))"
r=$(reqs); cat "$gm/github/octocat/Hello-World/pulls/1347/ops/merge/guard" > /dev/null; a=$(reqs)
echo "requests made by the same guard read again within the TTL: $((a - r))"
sleep 3.2
n304() { exec 5<>"/dev/tcp/127.0.0.1/$port"; printf 'GET /__wip/log HTTP/1.0\r\n\r\n' >&5; grep -c ' 304$' <&5 || true; exec 5>&-; }
r=$(reqs); c=$(n304); ls "$porg/paginate-issues/issues" > /dev/null; a=$(reqs)
echo "requests made by the issues ls after the TTL: $((a - r)), of which $(( $(n304) - c )) answered 304 Not Modified to If-None-Match (free of GitHub's rate limit)"
"$bin/wip" umount "$gm"
fi

if on titled; then
echo
echo "== titled names: the same tracker ($ISSUES synthetic issues) listed and walked with --titled vs bare =="
# Each pass on a fresh mount (cold: every name looked up once), then the best of three warm.
tw=$work/titledworld
mkdir -p "$tw"
walk_issues() { find "$1/tracker/issues" -mindepth 1 -maxdepth 2 -printf '%s\n' > /dev/null; }
list_issues() { ls -f "$1/tracker/issues" > /dev/null; }
for mode in bare titled; do
  flag=(); [ "$mode" = titled ] && flag=(--titled)
  rm -rf "$work/titledstate"; cp -a "$work/state" "$work/titledstate" 2>/dev/null || true
  (cd "$work/files" && "$bin/wip" mount "$tw" --state "$work/titledstate" --manifest "$work/bench.toml" "${flag[@]}" > /dev/null)
  eval "list_cold_$mode=$(secs list_issues "$tw")"
  eval "walk_cold_$mode=$(secs walk_issues "$tw")"
  eval "walk_warm_$mode=$(best3 walk_issues "$tw")"
  "$bin/wip" umount "$tw"
done
echo "ls of tracker/issues, cold: titled ${list_cold_titled} s, bare ${list_cold_bare} s ($(ratio "$list_cold_titled" "$list_cold_bare")x)"
echo "find -maxdepth 2 (every issue looked up, its files stat'ed), cold: titled ${walk_cold_titled} s, bare ${walk_cold_bare} s ($(ratio "$walk_cold_titled" "$walk_cold_bare")x)"
echo "the same walk warm (best of 3): titled ${walk_warm_titled} s, bare ${walk_warm_bare} s ($(ratio "$walk_warm_titled" "$walk_warm_bare")x)"
fi

if on shared; then
SHARED_CALLS=${SHARED_CALLS:-1000}
echo "# shared state: call overhead with the journal on PostgreSQL against SQLite (get_metadata, $SHARED_CALLS calls)"
pgdb=wip_bench_$$
psql -h /var/run/postgresql -d postgres -qc "CREATE DATABASE $pgdb"
pgurl="postgresql:///$pgdb?host=/var/run/postgresql"
cat > "$work/shared.toml" <<TOML
[[host]]
kind = "tracker"
path = "tracker"
database = "$work/shared-tracker.db"
TOML
"$bin/wip-bench" host-call --state "$work/sqstate" --manifest "$work/shared.toml" /tracker/issues/1 get_metadata '{}' "$SHARED_CALLS" | tee "$work/sq.txt"
"$bin/wip-bench" host-call --state "$work/pgstate" --manifest "$work/shared.toml" --state-url "$pgurl" /tracker/issues/1 get_metadata '{}' "$SHARED_CALLS" | tee "$work/pg.txt"
host_sq=$(p50 "in-process host.call" "$work/sq.txt"); host_pg=$(p50 "in-process host.call" "$work/pg.txt")
world_sq=$(p50 "in-process world.call" "$work/sq.txt"); world_pg=$(p50 "in-process world.call" "$work/pg.txt")
echo "runtime overhead p50 (world.call - host.call): SQLite $(echo "$world_sq - $host_sq" | bc) us, PostgreSQL $(echo "$world_pg - $host_pg" | bc) us; world.call PostgreSQL/SQLite $(ratio "$world_pg" "$world_sq")"
mkdir -p "$work/sqm" "$work/pgm" "$work/pgm2"
"$bin/wip" mount "$work/sqm" --state "$work/sqstate" --manifest "$work/shared.toml" > /dev/null
WIP_STATE_URL=$pgurl "$bin/wip" mount "$work/pgm" --state "$work/pgstate" --manifest "$work/shared.toml" > /dev/null
"$bin/wip-bench" mount-call "$work/sqm/tracker/issues/1/ops/get_metadata/call" $'\n' "$SHARED_CALLS" | tee "$work/sqmount.txt"
"$bin/wip-bench" mount-call "$work/pgm/tracker/issues/1/ops/get_metadata/call" $'\n' "$SHARED_CALLS" | tee "$work/pgmount.txt"
m_sq=$(p50 "through the mount" "$work/sqmount.txt"); m_pg=$(p50 "through the mount" "$work/pgmount.txt")
echo "call through the mount p50: SQLite $m_sq us, PostgreSQL $m_pg us; PostgreSQL/SQLite $(ratio "$m_pg" "$m_sq")"
"$bin/wip" umount "$work/sqm"
echo "# shared state: a call on mount A seen by tail -f of .wip/events on mount B (tail polls a FUSE file once a second)"
WIP_STATE_URL=$pgurl "$bin/wip" mount "$work/pgm2" --state "$work/pgstate2" --manifest "$work/shared.toml" > /dev/null
tail -n 0 -f "$work/pgm2/.wip/events" > "$work/tail.txt" & tail_pid=$!
sleep 1.5
lat=()
for i in $(seq 1 10); do
  t0=$(now)
  echo 'seen by B' > "$work/pgm/tracker/issues/1/ops/comment/call"
  until [ "$(grep -c '"op":"comment"' "$work/tail.txt")" -ge "$i" ]; do sleep 0.005; done
  t1=$(now)
  lat+=("$(echo "scale=3; ($t1 - $t0) / 1000000000" | bc)")
done
kill "$tail_pid"; tail_pid=""
echo "A's call in B's tail -f: median $(printf '%s\n' "${lat[@]}" | sort -n | sed -n 5p) s, worst $(printf '%s\n' "${lat[@]}" | sort -n | tail -1) s over 10 calls"
"$bin/wip" umount "$work/pgm2"
"$bin/wip" umount "$work/pgm"
echo "# the tracker on PostgreSQL against the tracker on SQLite (state on SQLite for both; $SHARED_CALLS calls each)"
# A call is one write transaction: on SQLite BEGIN IMMEDIATE in-process, on PostgreSQL
# BEGIN + the tracker's advisory lock, the reads and writes, COMMIT, each a round trip.
pgtracker=wip_bench_tracker_$$
psql -h /var/run/postgresql -d postgres -qc "CREATE DATABASE $pgtracker"
cat > "$work/pgtracker.toml" <<TOML
[[host]]
kind = "tracker"
path = "tracker"
database = "postgresql:///$pgtracker?host=/var/run/postgresql"
TOML
for op in get_metadata comment; do
  args='{}'; [ "$op" = comment ] && args='{"body":"bench"}'
  "$bin/wip-bench" host-call --state "$work/trsq" --manifest "$work/shared.toml" /tracker/issues/2 "$op" "$args" "$SHARED_CALLS" > "$work/trsq-$op.txt"
  "$bin/wip-bench" host-call --state "$work/trpg" --manifest "$work/pgtracker.toml" /tracker/issues/2 "$op" "$args" "$SHARED_CALLS" > "$work/trpg-$op.txt"
  h_sq=$(p50 "in-process host.call" "$work/trsq-$op.txt"); h_pg=$(p50 "in-process host.call" "$work/trpg-$op.txt")
  echo "tracker $op, host.call p50: SQLite $h_sq us, PostgreSQL $h_pg us; PostgreSQL/SQLite $(ratio "$h_pg" "$h_sq")"
done
mkdir -p "$work/trsqm" "$work/trpgm"
"$bin/wip" mount "$work/trsqm" --state "$work/trsq" --manifest "$work/shared.toml" > /dev/null
"$bin/wip" mount "$work/trpgm" --state "$work/trpg" --manifest "$work/pgtracker.toml" > /dev/null
"$bin/wip-bench" mount-call "$work/trsqm/tracker/issues/2/ops/get_metadata/call" $'\n' "$SHARED_CALLS" > "$work/trsqmount.txt"
"$bin/wip-bench" mount-call "$work/trpgm/tracker/issues/2/ops/get_metadata/call" $'\n' "$SHARED_CALLS" > "$work/trpgmount.txt"
m_sq=$(p50 "through the mount" "$work/trsqmount.txt"); m_pg=$(p50 "through the mount" "$work/trpgmount.txt")
echo "tracker get_metadata through the mount p50: SQLite $m_sq us, PostgreSQL $m_pg us; PostgreSQL/SQLite $(ratio "$m_pg" "$m_sq")"
"$bin/wip" umount "$work/trsqm"
"$bin/wip" umount "$work/trpgm"
fi

if on shared24; then
echo "# many mounts, one world: 3 mounts, each in its own network namespace, share a journal and a tracker on"
echo "# PostgreSQL over TCP with TLS; 24 bash agents (8 a mount) each comment and label on an issue of its own"
for tool in ip nsenter psql openssl; do
  command -v "$tool" > /dev/null || { echo "shared24 needs $tool"; exit 1; }
done
S24_ROUNDS=${S24_ROUNDS:-38}
S24_IDLE=${S24_IDLE:-40}
cert=/etc/ssl/certs/ssl-cert-snakeoil.pem
psql1() { psql -h /var/run/postgresql -d postgres -qAtc "$1"; }
[ "$(psql1 'SHOW ssl')" = on ] || { echo "shared24 needs PostgreSQL with ssl = on (Debian's snakeoil certificate, as .ci/run sets it up)"; exit 1; }
# The name the certificate carries, verified; the address dialled is another (hostaddr).
certname=$(openssl x509 -noout -ext subjectAltName -in "$cert" | tr ', ' '\n\n' | sed -n 's/^DNS://p' | head -n 1)
# A login role with a password (Debian's pg_hba.conf asks for one over TCP), its two
# databases: the shared state (journal, approvals) and the tracker.
s24role=wip_b24_$$
s24pw=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
psql1 "CREATE ROLE $s24role LOGIN PASSWORD '$s24pw'"
psql1 "CREATE DATABASE ${s24role}_state OWNER $s24role"
psql1 "CREATE DATABASE ${s24role}_tracker OWNER $s24role"
s24psql() { psql "postgresql:///${s24role}_$1?host=/var/run/postgresql" -qAtc "$2"; }
# A network namespace per mount, joined to this one by a veth pair; PostgreSQL listens
# on this namespace's loopback only, so a relay on the pair's near end carries each
# connection to it byte for byte (TLS end to end). S24_NETNS=0: every mount here, over
# the loopback (no relay: what the relays cost shows against it).
S24_NETNS=${S24_NETNS:-1}
s24ns=() s24relays=() s24pids=()
for i in 1 2 3; do
  if [ "$S24_NETNS" = 1 ]; then
    ns=wipb24_$$_$i here=wb$$h$i there=wb$$n$i net=10.$((230 + i)).$(($$ % 250))
    ip netns add "$ns"; s24ns+=("$ns")
    ip link add "$here" type veth peer name "$there"
    ip link set "$there" netns "$ns"
    ip addr add "$net.1/30" dev "$here"; ip link set "$here" up
    ip -n "$ns" addr add "$net.2/30" dev "$there"; ip -n "$ns" link set "$there" up; ip -n "$ns" link set lo up
    "$bin/wip-bench" relay "$net.1" 127.0.0.1:5432 $$ > "$work/relay$i.port" 2> /dev/null & s24relays+=($!)
    until [ -s "$work/relay$i.port" ]; do sleep 0.02; done
    addr=$net.1 port=$(cat "$work/relay$i.port") in_ns=(nsenter --net="/var/run/netns/$ns" --)
  else
    addr=127.0.0.1 port=5432 in_ns=()
  fi
  url() { echo "postgresql://$s24role:$s24pw@$certname:$port/${s24role}_$1?hostaddr=$addr&sslmode=verify-full&sslrootcert=$cert"; }
  printf '[world]\nname = "shared24"\n[identity]\nuser = "alex"\nrole = "maintainer"\n[[host]]\nkind = "tracker"\npath = "tracker"\nseed = "demo"\ndatabase = "%s"\n' \
    "$(url tracker)" > "$work/s24-$i.toml"
  mkdir -p "$work/s24m$i" "$work/s24files$i"
  # One after the other: the first seeds the tracker.
  s24pids+=("$(cd "$work/s24files$i" && WIP_STATE_URL=$(url state) ${in_ns[@]+"${in_ns[@]}"} \
    "$bin/wip" mount "$work/s24m$i" --state "$work/s24state$i" --manifest "$work/s24-$i.toml" | daemon_pid)")
done
[ "$S24_NETNS" = 1 ] && echo "mounts in network namespaces, each reaching PostgreSQL through a TCP relay" || echo "mounts in this network namespace, over the loopback"
echo "TLS: $(s24psql state "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = '$s24role'" | tr '|' ' ' | awk '{print $1 " of the " $2 " connections the mounts hold are encrypted"}')"
# The first 25 issues (pull requests share their numbers): 24 agents' and the idle one's.
s24issues=($(ls "$work/s24m1/tracker/issues" | grep -xE '[0-9]+' | sort -n | head -n 25))
idle_issue=${s24issues[24]}
# Each mount's first call opens its connections.
for i in 1 2 3; do echo "{\"body\":\"warm\"}" > "$work/s24m$i/tracker/issues/$idle_issue/ops/comment/call"; done

# s24_agent MOUNT ISSUE ROUNDS TAG: each round a comment and a label call (adding, then
# removing, `question`); one line per call: op, ok or fail, microseconds.
s24_agent() {
  local ops=$1/tracker/issues/$2/ops k t0 t1 v labels
  for ((k = 1; k <= $3; k++)); do
    t0=$EPOCHREALTIME
    if echo "{\"body\":\"$4-$k\"}" > "$ops/comment/call" 2> /dev/null; then v=ok; else v=fail; fi
    t1=$EPOCHREALTIME
    echo "comment $v $(( ${t1/[.,]/} - ${t0/[.,]/} ))"
    if ((k % 2)); then labels='{"add":["question"]}'; else labels='{"remove":["question"]}'; fi
    t0=$EPOCHREALTIME
    if echo "$labels" > "$ops/label/call" 2> /dev/null; then v=ok; else v=fail; fi
    t1=$EPOCHREALTIME
    echo "label $v $(( ${t1/[.,]/} - ${t0/[.,]/} ))"
  done
  # This agent's own CPU time (bash and what it ran), to the side.
  [ -z "${5:-}" ] || times > "$5"
}
# Where the CPU went: clock ticks of the given processes; the machine's busy and all ticks.
ticks_of() { local s=0 p; for p in "$@"; do [ -r "/proc/$p/stat" ] && s=$((s + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'))); done; echo "$s"; }
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
hz=$(getconf CLK_TCK)
# pcts FILE…: n, p50, p95 and max (ms) of the latencies in the files' third column.
pcts() { cat "$@" | awk '{print $3}' | sort -n | awk '{ v[NR] = $1 } END { printf "%d %.1f %.1f %.1f\n", NR, v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.95 + 0.999)] / 1000, v[NR] / 1000 }'; }
comments_of() { sed -n 's/.* · \([0-9]*\) comments\{0,1\}\( ·.*\)\{0,1\}$/\1/p' "$1/tracker/issues/$2/description"; }

# Idle: one agent alone on mount 1, on an issue none of the 24 uses.
s24_agent "$work/s24m1" "$idle_issue" $((S24_IDLE / 2)) idle > "$work/s24idle.txt"
read -r idle_n idle_p50 idle_p95 idle_max <<< "$(pcts "$work/s24idle.txt")"

# The 24 agents: mount i's agent a on the (8(i-1)+a)th issue.
declare -A before=()
for i in 1 2 3; do for n in "${s24issues[@]:0:24}"; do before[$i,$n]=$(comments_of "$work/s24m$i" "$n"); done; done
s24agents=()
mkfifo "$work/s24go"
for i in 1 2 3; do
  for a in $(seq 1 8); do
    n=${s24issues[8 * (i - 1) + a - 1]}
    # Each waits at the start line (a fifo: its open returns once the line is open).
    { : < "$work/s24go"; s24_agent "$work/s24m$i" "$n" "$S24_ROUNDS" "b24-$n" "$work/s24times$n"; } > "$work/s24agent$n.txt" & s24agents+=($!)
  done
done
sleep 0.5
# The mounts' PostgreSQL backends (their pools are open by now), and what they wait for:
# sampled every 0.1 s, how many of them run a statement and how many of those wait for a lock.
backends=$(psql1 "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE usename = '$s24role'")
{ cat <<SQL
SELECT 'sample' UNION ALL
SELECT concat_ws(' | ', 'active', coalesce(wait_event_type, '-'), coalesce(wait_event, '-')
    || coalesce((SELECT ' ' || coalesce(l.classid::regclass::text, '') || ' ' || coalesce(l.objid::text, '')
                   FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1), ''),
    regexp_replace(left(query, 80), '\s+', ' ', 'g'))
  FROM pg_stat_activity a WHERE usename = '$s24role' AND state = 'active';
SQL
  echo '\watch 0.1'; } | psql -h /var/run/postgresql -d postgres -qAt > "$work/s24waits.txt" 2> /dev/null & s24watch=$!
read -r busy0 all0 <<< "$(machine_ticks)"
d0=$(ticks_of "${s24pids[@]}"); b0=$(ticks_of $backends); r0=$(ticks_of "${s24relays[@]}")
load=$(cut -d ' ' -f 1 /proc/loadavg)
t0=$(now); exec 8> "$work/s24go"
wait "${s24agents[@]}"
t1=$(now); exec 8>&-
d1=$(ticks_of "${s24pids[@]}"); b1=$(ticks_of $backends); r1=$(ticks_of "${s24relays[@]}")
read -r busy1 all1 <<< "$(machine_ticks)"
kill "$s24watch"; wait "$s24watch" 2> /dev/null || true; s24watch=""
s24_secs=$(echo "scale=2; ($t1 - $t0) / 1000000000" | bc)
read -r n p50 p95 max <<< "$(pcts "$work"/s24agent*.txt)"
failed=$(cat "$work"/s24agent*.txt | grep -c ' fail ' || true)
for op in comment label; do
  grep -h "^$op " "$work"/s24agent*.txt > "$work/s24-$op.txt"
  grep -h "^$op " "$work/s24idle.txt" > "$work/s24idle-$op.txt"
done
printf '%-34s %6s %9s %9s %9s\n' "" calls "p50 ms" "p95 ms" "max ms"
printf '%-34s %6s %9s %9s %9s\n' "one agent alone (idle), mount 1" $idle_n "$idle_p50" "$idle_p95" "$idle_max"
for op in comment label; do
  read -r a b c d <<< "$(pcts "$work/s24idle-$op.txt")"; printf '%-34s %6s %9s %9s %9s\n' "  of which $op" "$a" "$b" "$c" "$d"
done
printf '%-34s %6s %9s %9s %9s\n' "24 agents on 3 mounts" "$n" "$p50" "$p95" "$max"
for op in comment label; do
  read -r a b c d <<< "$(pcts "$work/s24-$op.txt")"; printf '%-34s %6s %9s %9s %9s\n' "  of which $op" "$a" "$b" "$c" "$d"
done
echo "24 agents: $n calls in ${s24_secs} s ($(echo "scale=0; $n / $s24_secs" | bc) calls/s), $failed failed; p50 against one idle call's p50: $(ratio "$p50" "$idle_p50") (target <= 3), p95 $(ratio "$p95" "$idle_p50")"
# bash's `times`: the shell's user and system time, then its children's (0m1.234s each).
agents_s=$(cat "$work"/s24times* | tr 'ms' '  ' | awk '{ s += $1 * 60 + $2 + $3 * 60 + $4 } END { printf "%.2f", s }')
d_s=$(echo "scale=2; ($d1 - $d0) / $hz" | bc); b_s=$(echo "scale=2; ($b1 - $b0) / $hz" | bc); r_s=$(echo "scale=2; ($r1 - $r0) / $hz" | bc)
cpu_s=$(echo "$d_s + $b_s + $r_s + $agents_s" | bc)
echo "CPU during the run: the 3 daemons ${d_s} s, their PostgreSQL backends ${b_s} s, the TCP relays ${r_s:-0} s, the agents ${agents_s} s: $(echo "scale=1; $cpu_s * 1000 / $n" | bc) ms a call; the machine's $(nproc) cores $(( 100 * (busy1 - busy0) / (all1 - all0) ))% busy (load average $load as it began)"
echo "the least mean latency $(nproc) cores allow 24 agents at that CPU a call: $(echo "scale=1; 24 * $cpu_s * 1000 / $n / $(nproc)" | bc) ms (nothing else running; the mean of these calls: $(cat "$work"/s24agent*.txt | awk '{ s += $3 } END { printf "%.1f", s / NR / 1000 }') ms)"
awk -F ' [|] ' '$0 == "sample" { s++ } $1 == "active" { a++ } $2 == "Lock" { l++; w[$3 ": " $4]++ }
  END { printf "backends running a statement, sampled every 0.1 s: %d samples, %.1f on average, %.1f of them waiting for a lock (%d%%)\n", s, a / (s ? s : 1), l / (s ? s : 1), a ? 100 * l / a : 0
        fflush(); for (k in w) printf "  %5d waiting for %s\n", w[k], k | "sort -rn | head -n 6" }' "$work/s24waits.txt"
# Exact counts: every issue grew by exactly its agent's comments, on every mount, and
# in the tracker's own table; no run left running, none failed, in the journal.
wrong=0
for i in 1 2 3; do
  for n in "${s24issues[@]:0:24}"; do
    want=$(( ${before[$i,$n]:-0} + S24_ROUNDS ))
    got=$(comments_of "$work/s24m$i" "$n")
    # Another mount learns of a change from the feed: allow it a moment.
    for _ in $(seq 1 50); do [ "$got" = "$want" ] && break; sleep 0.1; got=$(comments_of "$work/s24m$i" "$n"); done
    [ "$got" = "$want" ] || { echo "mount $i, issue $n: $got comments, want $want"; wrong=$((wrong + 1)); }
  done
done
db_ok=$(s24psql tracker "SELECT count(*) FROM (SELECT number, count(*) AS c FROM comments WHERE body LIKE 'b24-%' GROUP BY number) g WHERE c = $S24_ROUNDS")
runs=$(s24psql state "SELECT string_agg(status || ' ' || c, ', ') FROM (SELECT status, count(*) AS c FROM calls GROUP BY status ORDER BY status) s")
echo "exact counts: $((72 - wrong)) of 72 (24 issues on each of 3 mounts) grew by exactly $S24_ROUNDS comments; the tracker's table: $db_ok of 24 issues; the journal's runs: $runs"
for i in 1 2 3; do "$bin/wip" umount "$work/s24m$i"; done
fi

if on tree; then
echo "# tree: a working tree natively, through bindfs, rclone mount, the FUSE floor and wip's files host"
for tool in bindfs rclone rsync tar git cargo; do
  command -v "$tool" > /dev/null || { echo "tree needs $tool (apt-get install $tool)"; exit 1; }
done
pw=$work/peer
mkdir -p "$pw/wip" "$pw/bindfs" "$pw/rclone" "$pw/floor"
# SYSTEM TREE: mount TREE (read-write) for SYSTEM; prints the directory to work in.
peer_mount() {
  case $1 in
    native) echo "$2" ;;
    floor)
      "$bin/fuse-floor" "$pw/floor" "$pw/shape" > /dev/null 2>&1 & floor_pid=$!
      for _ in $(seq 1 500); do mountpoint -q "$pw/floor" && break; sleep 0.02; done
      echo "$pw/floor" ;;
    bindfs) bindfs "$2" "$pw/bindfs"; echo "$pw/bindfs" ;;
    rclone)
      rclone mount ":local:$2" "$pw/rclone" --daemon > /dev/null 2>&1
      for _ in $(seq 1 250); do mountpoint -q "$pw/rclone" && break; sleep 0.02; done
      echo "$pw/rclone" ;;
    wip)
      printf '[world]\nname = "peer"\n[[host]]\nkind = "files"\npath = "files"\nroot = "%s"\npage_size = 1000000\n' "$2" > "$pw/files.toml"
      rm -rf "$pw/state"
      "$bin/wip" mount "$pw/wip" --state "$pw/state" --manifest "$pw/files.toml" > /dev/null
      echo "$pw/wip/files" ;;
  esac
}
peer_umount() {
  case $1 in
    floor) umount "$pw/floor"; wait "$floor_pid" 2>/dev/null || true; floor_pid="" ;;
    bindfs) umount "$pw/bindfs" ;;
    rclone) fusermount3 -u "$pw/rclone" 2>/dev/null || umount "$pw/rclone" ;;
    wip) "$bin/wip" umount "$pw/wip" ;;
  esac
}
# The journal's runs so far (reading .wip/ writes the queued ones first).
wip_runs() {
  cat "$pw/wip/.wip/status" > /dev/null 2>&1 || true
  python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("select count(*) from calls").fetchone()[0])' "$pw/state/journal.db"
}
t_grep() { grep -rl deprecated "$1"; }
t_find() { find "$1" -type f; }
t_cat() { find "$1" -type f -print0 | xargs -0 cat; }
t_du() { du -s "$1"; }
t_tar() { tar cf - -C "$1" . | wc -c; }
# A row: TASK PASS and one time per system, then the ratios.
row() {
  local task=$1 pass=$2; declare -n r=$3
  printf '%-9s %-5s %8s %8s %8s %8s %8s %8s %8s %8s %9s\n' "$task" "$pass" "${r[native]:--}" "${r[bindfs]:--}" "${r[rclone]:--}" \
    "${r[floor]:--}" "${r[wip]}" "$(ratio "${r[wip]}" "${r[native]}")" "$(ratio "${r[wip]}" "${r[bindfs]}")" \
    "$( [ -n "${r[floor]:-}" ] && ratio "${r[wip]}" "${r[floor]}" || echo -)" "$( [ -n "${r[floor]:-}" ] && ratio "${r[floor]}" "${r[bindfs]}" || echo -)"
}
header() {
  printf '%-9s %-5s %8s %8s %8s %8s %8s %8s %8s %8s %9s\n' task pass native bindfs rclone floor wip \
    wip/nat wip/bfs wip/flr floor/bfs
}

# Reads: a copy of /usr/include, each task cold (a fresh mount, caches dropped) and warm.
src=$pw/include; rm -rf "$src"; cp -a /usr/include "$src"
find "$src" -mindepth 1 -printf '%y\t%s\t%P\t%l\n' > "$pw/shape"
echo "## reads: $(find "$src" -type f | wc -l) files, $(du -sh "$src" | cut -f1) (a copy of /usr/include)"
header
TREE_TASKS=${TREE_TASKS:-grep,find,cat,du,tar}
for task in ${TREE_TASKS//,/ }; do
  declare -A cold=() warm=()
  for sys in native bindfs rclone floor wip; do
    dir=$(peer_mount "$sys" "$src")
    sync; echo 3 > /proc/sys/vm/drop_caches
    cold[$sys]=$(secs "t_$task" "$dir")
    warm[$sys]=$(secs "t_$task" "$dir")
    peer_umount "$sys"
  done
  row "$task" cold cold; row "$task" warm warm
done
rm -rf "$src"

git_status() { git -C "$1" status; }
# A git repository: this project's own history, cloned into the tree.
repo_root=$pw/reporoot; rm -rf "$repo_root"; mkdir -p "$repo_root"
git clone -q --no-hardlinks "$PWD" "$repo_root/repo"
back=$(git -C "$repo_root/repo" rev-list --count HEAD)
old=$(git -C "$repo_root/repo" rev-list -n 1 HEAD~$(( back > 60 ? 50 : back / 2 )))
echo "## git: this project's history ($back commits) cloned into the tree"
header
declare -A status=() checkout=()
status_runs=
for sys in native bindfs wip; do
  dir=$(peer_mount "$sys" "$repo_root")
  # Fills the index's stat data and the caches; a moment later the index is no longer
  # racily clean, so a status rewrites nothing (natively neither).
  git -C "$dir/repo" status > /dev/null; sleep 2; git -C "$dir/repo" status > /dev/null
  [ "$sys" = wip ] && before=$(wip_runs)
  status[$sys]=$(best3 git_status "$dir/repo")
  [ "$sys" = wip ] && status_runs=$(( $(wip_runs) - before ))
  checkout[$sys]=$(secs sh -c "git -C '$dir/repo' checkout -q $old && git -C '$dir/repo' checkout -q -")
  peer_umount "$sys"
done
row "git-status" warm status; row "checkout" warm checkout
echo "(runs a warm git status made through wip: $status_runs)"
rm -rf "$repo_root"

# Writes: tar x of a 10,000-file archive, and cargo build of a small crate.
gen=$pw/gen; rm -rf "$gen"
python3 - "$gen" 10000 <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i // 100:03}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:05}.txt"), "w") as f:
        f.write(f"file {i}\n" + "a line of text\n" * (1 + i % 40))
PY
tar cf "$pw/gen.tar" -C "$gen" .; rm -rf "$gen"
crate=$pw/crate-src; rm -rf "$crate"; mkdir -p "$crate/src"
printf '[package]\nname = "small"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\n' > "$crate/Cargo.toml"
python3 - "$crate/src/lib.rs" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(300):
        f.write(f"pub fn f{i}(x: u64) -> u64 {{ (0..x).map(|v| v * {i} + 1).filter(|v| v % 3 == 0).sum() }}\n")
    f.write("#[cfg(test)]\nmod tests { #[test] fn works() { assert_eq!(super::f1(3), 3); } }\n")
PY
# rustc's own files into the page cache, so the first system timed does not pay for it.
(cd "$crate" && CARGO_TARGET_DIR="$pw/warmup" cargo build --offline -q > /dev/null 2>&1); rm -rf "$pw/warmup"
echo "## writes: tar x of 10,000 files; cargo build of a small crate (300 functions)"
header
declare -A untar=() build=()
tar_runs=
for sys in native bindfs wip; do
  wr=$pw/wr; rm -rf "$wr"; mkdir -p "$wr"; cp -a "$crate" "$wr/crate"
  dir=$(peer_mount "$sys" "$wr")
  mkdir "$dir/x"
  [ "$sys" = wip ] && before=$(wip_runs)
  untar[$sys]=$(secs tar xf "$pw/gen.tar" -C "$dir/x")
  [ "$sys" = wip ] && tar_runs=$(( $(wip_runs) - before ))
  build[$sys]=$(secs sh -c "cd '$dir/crate' && CARGO_TARGET_DIR=target cargo build --offline -q")
  peer_umount "$sys"
  rm -rf "$wr"
done
row "tar-x" cold untar; row "cargo" cold build
echo "(runs the tar x made through wip: $tar_runs, $(( tar_runs / 100 )) per 100 files)"
fi

if on overlay; then
echo "# overlay: a files host in overlay mode against the same host plain (one binary, one tree)"
for tool in git; do command -v "$tool" > /dev/null || { echo "overlay needs $tool"; exit 1; }; done
pw=$work/peer
mkdir -p "$pw/wip"
# ov_mount ROOT OVERLAY: mount the files host over ROOT, plain (false) or as an overlay.
ov_mount() {
  printf '[world]\nname = "ov"\n[[host]]\nkind = "files"\npath = "files"\nroot = "%s"\npage_size = 1000000\noverlay = %s\n' "$1" "$2" > "$pw/ov-$2.toml"
  "$bin/wip" mount "$pw/wip" --state "$pw/ovstate-$2" --manifest "$pw/ov-$2.toml" > /dev/null
}
ov_grep() { grep -rl deprecated "$1"; }
ov_status() { git -C "$1/repo" status; }
src=$pw/ovtree; rm -rf "$src" "$pw"/ovstate-*; mkdir -p "$src"
cp -a /usr/include "$src/include"
git clone -q --no-hardlinks "$PWD" "$src/repo"
files=$(find "$src" -type f | wc -l)
t_layer=$(secs ov_mount "$src" true); "$bin/wip" umount "$pw/wip"
echo "## $files files (/usr/include and this project's clone); the first overlay mount made its layer in ${t_layer} s"
declare -A og=() ogw=() ost=()
for ov in false true; do
  ov_mount "$src" "$ov"
  git -C "$pw/wip/files/repo" status > /dev/null; sleep 2; git -C "$pw/wip/files/repo" status > /dev/null
  sync; echo 3 > /proc/sys/vm/drop_caches
  og[$ov]=$(secs ov_grep "$pw/wip/files")
  ogw[$ov]=$(best3 ov_grep "$pw/wip/files")
  ost[$ov]=$(best3 ov_status "$pw/wip/files")
  "$bin/wip" umount "$pw/wip"
done
printf '%-14s %9s %9s %9s\n' task plain overlay ov/plain
printf '%-14s %9s %9s %9s\n' "grep -r cold" "${og[false]}" "${og[true]}" "$(ratio "${og[true]}" "${og[false]}")"
printf '%-14s %9s %9s %9s\n' "grep -r warm" "${ogw[false]}" "${ogw[true]}" "$(ratio "${ogw[true]}" "${ogw[false]}")"
printf '%-14s %9s %9s %9s\n' "git status" "${ost[false]}" "${ost[true]}" "$(ratio "${ost[true]}" "${ost[false]}")"
echo "(target: overlay/plain <= 1.3 for grep -r and git status)"
rm -rf "$src" "$pw"/ovstate-*
fi

if on undo; then
echo "# undo: what before-images cost write-heavy work (a files host with keep_before 1 GiB, its default, against keep_before = 0)"
for tool in bindfs tar git python3; do
  command -v "$tool" > /dev/null || { echo "undo needs $tool (apt-get install $tool)"; exit 1; }
done
# Each workload on a fresh copy of its tree (prepared natively, then synced) for each of:
# native, bindfs, wip with before-images (on) and wip with keep_before = 0 (off), each
# wip mount on a fresh state. Timed: the workload alone, as in the tree section (the
# journal's group commits of its runs are off the request path; a before-image is taken
# on it). UNDO_ROUNDS repeats it all, on and off in alternating order. UNDO_DIR: where
# the trees and states go (default: beside the rest, in /tmp).
#
# On an ext4 without a journal (this machine's) a new inode is never one freed in the
# last 60 s (360 s while its inode table block is dirty: ext4's recently_deleted), and
# each create reads past every such inode of its group: creating files soon after many
# were removed costs far more than the create. A workload's own removals are its cost
# (tar x over existing files removes and creates each); an earlier run's are not. So
# nothing is removed until the end, and each timed run waits UNDO_SETTLE seconds after a
# sync (default 61 on such a file system, else 0) for other removals to age out.
UNDO_ROUNDS=${UNDO_ROUNDS:-1}
uw=${UNDO_DIR:-$work}/wip-undo.$$
mkdir -p "$uw/mnt" "$uw/bindfs"
undo_pid=""
# undo_mount SYSTEM TREE STATE: mount TREE for SYSTEM (wip on the state directory STATE);
# udir is the directory to work in.
undo_mount() {
  case $1 in
    native) udir=$2 ;;
    bindfs) bindfs "$2" "$uw/bindfs"; udir=$uw/bindfs ;;
    on|off)
      { printf '[world]\nname = "undo"\n[[host]]\nkind = "files"\npath = "files"\nroot = "%s"\npage_size = 1000000\n' "$2"
        if [ "$1" = off ]; then printf 'keep_before = 0\n'; fi; } > "$uw/files.toml"
      undo_pid=$("$bin/wip" mount "$uw/mnt" --state "$3" --manifest "$uw/files.toml" | daemon_pid)
      udir=$uw/mnt/files ;;
  esac
}
# undo_umount SYSTEM: unmount, and for wip record what the daemon wrote to the disk first.
undo_umount() {
  case $1 in
    bindfs) umount "$uw/bindfs" ;;
    on|off)
      # Reading .wip/ writes the runs still queued first.
      cat "$uw/mnt/.wip/status" > /dev/null 2>&1 || true
      undo_wrote=$(awk '/^write_bytes/ {print $2}' "/proc/$undo_pid/io")
      "$bin/wip" umount "$uw/mnt"
      while kill -0 "$undo_pid" 2>/dev/null; do sleep 0.05; done; undo_pid="" ;;
  esac
}
# usecs CMD…: as secs, but a failed workload stops the benchmark with its words.
usecs() {
  local t0 t1; t0=$(now)
  "$@" > "$uw/out" 2>&1 || { echo "failed: $* ($(tail -n 3 "$uw/out"))" >&2; return 1; }
  t1=$(now); echo "scale=4; ($t1 - $t0) / 1000000000" | bc
}
mb() { echo "scale=1; $1 / 1048576" | bc; }
# store_of STATE: the store after a run with before-images: its size, how many images.
store_of() {
  if [ -d "$1/before" ]; then
    echo "$(du -sh "$1/before" | cut -f1) in $(find "$1/before" -type f | wc -l) images"
  else
    echo "none"
  fi
}

# (a) tar x of 10,000 files over the same names (GNU tar unlinks each and creates it anew).
python3 - "$uw/gen" 10000 <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for v in (1, 2):
    for i in range(n):
        d = os.path.join(root, f"v{v}", f"d{i // 100:03}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:05}.txt"), "w") as f:
            f.write(f"file {i}, version {v}\n" + "a line of text\n" * (1 + (i + v) % 40))
PY
tar cf "$uw/v1.tar" -C "$uw/gen/v1" .; tar cf "$uw/v2.tar" -C "$uw/gen/v2" .; rm -rf "$uw/gen"
prep_tar() { tar xf "$uw/v1.tar" -C "$1"; }
work_tar() { tar xf "$uw/v2.tar" -C "$1"; }
# (b) git checkout of a commit ~100 back and back again in a clone of this project.
git clone -q --no-hardlinks "$PWD" "$uw/repo"
back=$(git -C "$uw/repo" rev-list --count HEAD)
old=$(git -C "$uw/repo" rev-list -n 1 HEAD~$(( back > 120 ? 100 : back / 2 )))
changed=$(git -C "$uw/repo" diff --name-only "$old" HEAD | wc -l)
prep_git() { cp -a "$uw/repo" "$1/repo"; }
# The index's stat data filled through the mount, then no longer racily clean (as in the
# tree section): the checkout itself rewrites only what it must.
ready_git() { git -C "$1/repo" status > /dev/null; sleep 2; git -C "$1/repo" status > /dev/null; }
work_git() { git -C "$1/repo" checkout -q "$old" && git -C "$1/repo" checkout -q -; }
# (c) in place: 1,000 files of 16 KiB each appended to (O_WRONLY|O_APPEND, no O_TRUNC),
# and 500 inserts, one transaction each, into a 20 MB SQLite database (rollback journal):
# such writers are served through the daemon, and their before-image is a copy taken at
# their first write.
prep_append() {
  python3 - "$1/app" <<'PY'
import os, sys
os.makedirs(sys.argv[1])
for i in range(1000):
    with open(os.path.join(sys.argv[1], f"log{i:04}.txt"), "w") as f:
        f.write((f"entry {i} " * 2000)[:16384])
PY
}
work_append() {
  python3 - "$1/app" <<'PY'
import os, sys
for i in range(1000):
    fd = os.open(os.path.join(sys.argv[1], f"log{i:04}.txt"), os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"one more line\n")
    os.close(fd)
PY
}
prep_sqlite() {
  python3 - "$1/bench.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, payload BLOB)")
db.execute("""WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20000)
              INSERT INTO t SELECT x, randomblob(1000) FROM c""")
db.commit()
PY
}
work_sqlite() {
  python3 - "$1/bench.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
for i in range(500):
    db.execute("BEGIN")
    db.execute("INSERT INTO t (payload) VALUES (randomblob(1000))")
    db.execute("COMMIT")
PY
}
ready_none() { :; }

# Trees and states side by side in $uw: one file system, which this checks.
mkdir -p "$uw/t" "$uw/s"
dev=$(df --output=source "$uw" | tail -n 1)
if [ "$(stat -c %d "$uw/t")" = "$(stat -c %d "$uw/s")" ]; then
  journal=$(cat "/sys/fs/ext4/${dev#/dev/}/journal_task" 2>/dev/null || echo "?")
  echo "trees and state directories on one file system ($dev, $(df --output=fstype "$uw" | tail -n 1)$([ "$journal" = "<none>" ] && echo ", without a journal")): a removed file is linked into the store, not copied"
  [ "$journal" = "<none>" ] && UNDO_SETTLE=${UNDO_SETTLE:-61}
else
  echo "trees and state directories on different file systems: a removed file is copied into the store"
fi
echo "tar x: 10,000 files over the same names; git: checkout of a commit $(( back > 120 ? 100 : back / 2 )) back ($changed files differ) and back again;"
echo "append: 1,000 files of 16 KiB appended to; sqlite: 500 one-row transactions into a 20 MB database"
printf '%-8s %5s %8s %8s %8s %8s %8s %8s %8s\n' task round native bindfs "wip off" "wip on" "on/off" "on/nat" "on/bfs"
declare -A ut=() ustore=() uwrote=()
for round in $(seq 1 "$UNDO_ROUNDS"); do
  order="on off"; [ $((round % 2)) = 0 ] && order="off on"
  for name in tar git append sqlite; do
    ready=ready_none; [ "$name" = git ] && ready=ready_git
    for sys in native bindfs $order; do
      tree=$uw/t/$round-$name-$sys state=$uw/s/$round-$name-$sys
      mkdir -p "$tree"
      "prep_$name" "$tree"
      sync; sleep "${UNDO_SETTLE:-0}"
      undo_mount "$sys" "$tree" "$state"
      "$ready" "$udir"
      ut[$sys]=$(usecs "work_$name" "$udir")
      undo_umount "$sys"
      case $sys in
        on|off) ustore[$sys]=$(store_of "$state"); uwrote[$sys]=$(mb "$undo_wrote") ;;
      esac
    done
    printf '%-8s %5s %8s %8s %8s %8s %8s %8s %8s\n' "$name" "$round" "${ut[native]}" "${ut[bindfs]}" "${ut[off]}" "${ut[on]}" \
      "$(ratio "${ut[on]}" "${ut[off]}")" "$(ratio "${ut[on]}" "${ut[native]}")" "$(ratio "${ut[on]}" "${ut[bindfs]}")"
    echo "  the store after it: ${ustore[on]} (keep_before = 0: ${ustore[off]}); the daemon wrote ${uwrote[on]} MB to the disk with before-images, ${uwrote[off]} MB without"
  done
done
rm -rf "$uw"
fi

if on nfs; then
echo "# nfs: the default world served over NFSv3 against its FUSE mount (same manifest, own states)"
command -v nfs-ls > /dev/null || { echo "nfs-ls missing (Debian's libnfs-utils)"; exit 1; }
nm=$work/nfsfuse
mkdir -p "$nm" "$work/nfsfiles"
(cd "$work/nfsfiles" && "$bin/wip" mount "$nm" --state "$work/nfsfusestate" > /dev/null)
(cd "$work/nfsfiles" && exec "$bin/wip" serve-nfs . --state "$work/nfsstate" --mount-point /mnt/w > "$work/nfs.out" 2> /dev/null) &
nfs_pid=$!
until grep -q "serving over NFSv3" "$work/nfs.out" 2>/dev/null; do sleep 0.05; done
port=$(sed -n 's/^serving over NFSv3 on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/nfs.out")
url="nfs://127.0.0.1/?version=3&nfsport=$port&mountport=$port"
t_fuse_cold=$(secs ls -lR "$nm"); t_fuse_warm=$(secs ls -lR "$nm")
t_nfs_cold=$(secs nfs-ls -R "$url"); t_nfs_warm=$(secs nfs-ls -R "$url")
printf '%-22s %9s %9s %9s\n' walk "fuse s" "nfs s" nfs/fuse
printf '%-22s %9s %9s %9s\n' "ls -lR / nfs-ls -R, 1st" "$t_fuse_cold" "$t_nfs_cold" "$(ratio "$t_nfs_cold" "$t_fuse_cold")"
printf '%-22s %9s %9s %9s\n' "the same, 2nd" "$t_fuse_warm" "$t_nfs_warm" "$(ratio "$t_nfs_warm" "$t_fuse_warm")"
n=$((CALLS / 4))
python3 - "$nm/tracker/issues/2/ops/comment/call" "$n" > "$work/nfs-fuse-call.txt" <<'PY'
import os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
took = []
for i in range(n):
    t0 = time.perf_counter_ns()
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, f"bench {i}\n".encode())
    os.close(fd)
    took.append((time.perf_counter_ns() - t0) / 1000)
took.sort()
print(f"fuse call n={n} p50_us={took[n // 2]:.1f}")
PY
python3 tests/nfs/client.py "$port" bench-call tracker/issues/2/ops/comment/call "$n" > "$work/nfs-call.txt"
cat "$work/nfs-fuse-call.txt" "$work/nfs-call.txt"
echo "plain-text comment from one Python client: FUSE $(p50 fuse "$work/nfs-fuse-call.txt") us, NFS $(p50 nfs "$work/nfs-call.txt") us p50 (nfs/fuse $(ratio "$(p50 nfs "$work/nfs-call.txt")" "$(p50 fuse "$work/nfs-fuse-call.txt")"))"
kill "$nfs_pid"; nfs_pid=""
umount "$nm"
fi
