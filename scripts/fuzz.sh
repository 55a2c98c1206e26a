#!/usr/bin/env bash
# Fuzz wip's parsers on stable Rust: N generated inputs per target (default 1000000).
#   scripts/fuzz.sh [N] [TARGET...]        WIP_FUZZ_PROFILE=dev for an unoptimised build
# Prints per target "NAME: N inputs, K crashes"; exits non-zero if any input crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-1000000}"
shift || true
profile="${WIP_FUZZ_PROFILE:-release}"
cargo build --quiet --profile "$profile" --bin wip-fuzz
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
exec "target/$dir/wip-fuzz" "$n" "$@"
