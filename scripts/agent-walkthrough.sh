#!/usr/bin/env bash
# What an agent with only bash, ls, cat and echo does to go from "find the open PR that
# fixes the crash issue" to merged: explore, read the merge guard, satisfy each subgoal it
# names, merge. Mounts the default world in a temporary directory unless given a mount.
#
#   scripts/agent-walkthrough.sh            # mount, walk, unmount
#   scripts/agent-walkthrough.sh /mnt/world # walk an existing mount
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
WIP=${WIP:-$(command -v wip || echo "$here/target/debug/wip")}
case "$WIP" in */*) WIP=$(cd "$(dirname "$WIP")" && pwd)/$(basename "$WIP") ;; esac
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

if [ $# -ge 1 ]; then
  world=$1
else
  tmp=$(mktemp -d)
  world=$tmp/world
  cleanup() {
    cd /
    "$WIP" umount "$world" 2>/dev/null || umount -l "$world" 2>/dev/null || true
    rm -rf "$tmp"
  }
  trap cleanup EXIT
  mkdir -p "$tmp/files"
  (cd "$tmp/files" && timeout 60 "$WIP" mount "$world" --state "$tmp/state")
fi
cd "$world"

say "ls"; ls
say "cat README.md"; cat README.md
say "cat tracker/description"; cat tracker/description

# 1. The crash issue: read issue descriptions, keep the open one about a crash.
say "for d in tracker/issues/[0-9]*/; do cat \$d/description; done   # look for the crash"
issue=""
for d in tracker/issues/[0-9]*/; do
  desc=$(cat "$d/description")
  case "$desc" in
    *open*[Cc]rash*) issue=${d%/}; echo "$issue: $desc" ;;
  esac
done
[ -n "$issue" ] || { echo "no open crash issue found"; exit 1; }
number=${issue##*/}

# 2. The open PR that fixes it: PR descriptions, then its body must say "#N".
pr=""
for d in tracker/pulls/[0-9]*/; do
  desc=$(cat "$d/description")
  case "$desc" in *open*) ;; *) continue ;; esac
  echo > "$d/ops/read_body/call"
  body=$(cat "$d/ops/read_body/result")
  if [[ $body =~ \#$number([^0-9]|$) ]]; then
    pr=${d%/}; say "cat $pr/description"; echo "$desc"; break
  fi
done
[ -n "$pr" ] || { echo "no open PR fixes #$number"; exit 1; }

# 3. Read the merge guard; satisfy every subgoal it names by the op it names.
for round in 1 2 3 4 5; do
  say "cat $pr/ops/merge/guard"
  guard=$(cat "$pr/ops/merge/guard")
  echo "$guard"
  [ "${guard%%$'\n'*}" = allowed ] && break
  did=0
  while IFS= read -r line; do
    case "$line" in ✗*) ;; *) continue ;; esac
    [[ $line =~ ops/([a-z_]+) ]] || { echo "cannot satisfy: $line"; exit 1; }
    op=${BASH_REMATCH[1]}
    say "cat $pr/ops/$op/guard"; cat "$pr/ops/$op/guard"
    say "echo > $pr/ops/$op/call"
    echo > "$pr/ops/$op/call"
    cat "$pr/ops/$op/result"
    did=1
  done <<<"$guard"
  [ $did = 1 ] || { echo "guard blocked with nothing to do"; exit 1; }
done

# 4. Merge, then look at what changed.
say "echo '{\"method\":\"squash\"}' > $pr/ops/merge/call"
echo '{"method":"squash"}' > "$pr/ops/merge/call"
cat "$pr/ops/merge/result"
say "cat $pr/description"; cat "$pr/description"
say "cat $issue/description"; cat "$issue/description"
[[ $(cat "$pr/description") == *merged* ]]
[[ $(cat "$issue/description") == *closed* ]]
say "cat .wip/log"; cat .wip/log
echo
echo "walkthrough ok: $pr merged, $issue closed"
