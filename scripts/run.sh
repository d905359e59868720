#!/usr/bin/env bash
# Builds and runs Hourglass on SQLite. Installs whatever is missing first.
# Usage: scripts/run.sh [--release]   (HOURGLASS_ADDR, HOURGLASS_DATABASE_URL are honoured)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

mode=debug
[ "${1:-}" = "--release" ] && mode=release

ensure_rust_tools
build_site "$mode"

export HOURGLASS_DATABASE_URL="${HOURGLASS_DATABASE_URL:-sqlite://$ROOT/data/hourglass.db}"
export HOURGLASS_SITE_ROOT="$SITE_ROOT"
addr="${HOURGLASS_ADDR:-127.0.0.1:3000}"
# The simulator lab offers Microsoft's Philly trace when it is on this machine (never copied here).
philly="$ROOT/../shared/traces/philly/philly_by_vc.csv"
if [ -z "${HOURGLASS_PHILLY_TRACE:-}" ] && [ -f "$philly" ]; then
  export HOURGLASS_PHILLY_TRACE="$philly"
fi
say "Starting Hourglass with the demo organisation at http://$addr"
# --demo seeds people and a budget tree on an empty database (and prints how to sign in), runs
# simulated GPU nodes in-process, and keeps a trickle of workloads flowing.
exec "$HOURGLASS_BIN" serve --demo --addr "$addr"
