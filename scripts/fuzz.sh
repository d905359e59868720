#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ (libFuzzer via cargo-fuzz) for a bounded time each; a crash
# leaves its input under fuzz/artifacts/ and fails the run. Usage: scripts/fuzz.sh [seconds]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

seconds="${1:-20}"
ensure_cargo_fuzz
# The stable toolchain: no sanitizer (that needs nightly); libFuzzer's coverage guidance and the
# crate's own assertions and overflow checks still apply.
export CARGO_TARGET_DIR="$CACHE/target-fuzz"
for target in $(cargo fuzz list --fuzz-dir fuzz); do
  say "Fuzzing $target for ${seconds}s"
  RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz --sanitizer none --debug-assertions "$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 2>&1 | tail -n 12
  [ "${PIPESTATUS[0]}" -eq 0 ]
done
