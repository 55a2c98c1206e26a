#!/usr/bin/env bash
# The benchmark of this tree beside an earlier revision's, in one run on one machine, so
# both share its load: `scripts/bench-compare.sh REV`. SECTIONS and ISSUES as for
# scripts/bench.sh; each section runs for the earlier build, then at once for this one.
# PREV_BIN=DIR uses an earlier build already made instead of building REV.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/bench-compare.sh REV}
cargo build --release --bins -q
prev_bin=${PREV_BIN:-}
if [ -z "$prev_bin" ]; then
  prev=$PWD/target/bench-prev
  if [ "$(git -C "$prev/src" rev-parse HEAD 2>/dev/null)" != "$(git rev-parse "$rev^{commit}")" ]; then
    git worktree remove --force "$prev/src" 2>/dev/null || rm -rf "$prev/src"
    git worktree add --detach "$prev/src" "$rev" > /dev/null
  fi
  # Seeded from this tree's build, so mostly the crate itself is compiled again.
  if [ ! -d "$prev/target/release" ]; then
    mkdir -p "$prev/target"
    cp -a target/release "$prev/target/"
  fi
  (cd "$prev/src" && CARGO_TARGET_DIR="$prev/target" cargo build --release --bins -q)
  prev_bin=$prev/target/release
fi
sections=${SECTIONS:-walk,calls,db,exec,mcp}
out=$(mktemp -d /tmp/wip-compare.XXXXXX)
for section in ${sections//,/ }; do
  echo "## $section: earlier ($rev)"
  SECTIONS=$section BIN="$prev_bin" scripts/bench.sh 2>&1 | tee "$out/$section.prev"
  echo "## $section: this tree ($(git rev-parse --short HEAD))"
  SECTIONS=$section BIN=target/release scripts/bench.sh 2>&1 | tee "$out/$section.new"
done
echo "both outputs of each section: $out"
