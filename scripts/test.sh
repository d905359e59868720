#!/usr/bin/env bash
# Runs every test: formatting, lints, unit and integration tests (on SQLite, then the server's again
# on PostgreSQL when HOURGLASS_TEST_POSTGRES_URL is set), bounded fuzzing of the input parsers,
# then browser tests against the real server
# in Debian's Chromium, then the page-weight check on the release build (bytes of a first and a
# second visit against their budgets; time to interactive printed). Installs whatever is missing
# first. Usage: scripts/test.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

ensure_rust_tools
ensure_browser
ensure_openssl

say "Checking formatting"
cargo fmt --all -- --check

say "Linting (clippy, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

# Each pass gets a hard limit so that a hang fails the run loudly instead of stalling CI (no retry:
# a hang is a bug to find). Normal: about a minute per pass.
cargo_test() {
  timeout 600 cargo test "$@"
}

# The first pass runs on SQLite whatever the environment says; the second, on PostgreSQL.
postgres_url="${HOURGLASS_TEST_POSTGRES_URL:-}"
unset HOURGLASS_TEST_POSTGRES_URL

# The load test (200 sessions on every kind of page against `serve --demo`) runs alone after each
# pass, since it takes both cores: HOURGLASS_LOAD_SECONDS (here 60 unless set) each time; then
# `hourglass loadtest` at a small size.
export HOURGLASS_LOAD_SECONDS="${HOURGLASS_LOAD_SECONDS:-60}"
load_test() {
  cargo_test -p server --test app load:: -- --ignored --nocapture --test-threads=1
}

say "Unit and integration tests (SQLite)"
cargo test --workspace --no-run
# The server's tests alone (the load step, the PostgreSQL pass) may unify features differently:
# built here, outside the time limits, so that a cold build never eats into them.
cargo test -p server --no-run
cargo_test --workspace
say "Load test (SQLite): 200 sessions loading every kind of page"
load_test

if [ -n "$postgres_url" ]; then
  say "Server tests again on PostgreSQL (HOURGLASS_TEST_POSTGRES_URL)"
  HOURGLASS_TEST_POSTGRES_URL="$postgres_url" cargo_test -p server
  say "Load test (PostgreSQL): 200 sessions loading every kind of page"
  HOURGLASS_TEST_POSTGRES_URL="$postgres_url" load_test
else
  say "HOURGLASS_TEST_POSTGRES_URL is not set: skipping the PostgreSQL pass"
fi

say "Fuzzing the input parsers (10 s per target)"
bash scripts/fuzz.sh 10

build_site debug

say "Browser tests (Chromium)"
HOURGLASS_BIN="$HOURGLASS_BIN" HOURGLASS_SITE_ROOT="$SITE_ROOT" node --test --test-concurrency=1 e2e/tests/*.test.mjs

build_site release
say "Page weight (release build): first and second visits; time to interactive"
HOURGLASS_BIN="$HOURGLASS_BIN" HOURGLASS_SITE_ROOT="$SITE_ROOT" node --test --test-concurrency=1 e2e/weight/*.test.mjs
