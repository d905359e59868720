# Shared set-up for scripts/run.sh and scripts/test.sh: installs what is missing, idempotently.
# Source it; it exports PATH and the cargo target directories.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${HOURGLASS_CACHE:-$HOME/.cache/hourglass}"
TOOLS="$CACHE/tools"
# Plain cargo (tests, clippy) and cargo-leptos build with different flags; separate target
# directories keep each incremental. Both live outside the clone so CI reuses them.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
LEPTOS_TARGET_DIR="${LEPTOS_TARGET_DIR:-$CACHE/target-leptos}"
export PATH="$TOOLS/node_modules/.bin:$HOME/.cargo/bin:$PATH"
mkdir -p "$TOOLS"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Incremental caches only grow (tens of GB over weeks of builds) and a full disk fails the build
# mid-way; past 12 GiB they are dropped (the next build is slower once, nothing else changes).
prune_incremental() {
  local dir size
  for dir in "$CARGO_TARGET_DIR/debug/incremental" "$LEPTOS_TARGET_DIR/debug/incremental"; do
    [ -d "$dir" ] || continue
    size="$(du -sk "$dir" | cut -f1)"
    if [ "$size" -gt $((12 * 1024 * 1024)) ]; then
      say "Dropping $dir ($((size / 1024 / 1024)) GiB of incremental cache)"
      rm -rf "$dir"
    fi
  done
}
prune_incremental

# Every change relinks the test and bench executables under a new hash, each hundreds of MB, and
# the old ones stay (19 GB of them after a few days here). Those untouched for two days go.
prune_stale_executables() {
  local dir="$CARGO_TARGET_DIR/debug/deps"
  [ -d "$dir" ] || return 0
  find "$dir" -maxdepth 1 -type f -perm -u+x ! -name '*.so' ! -name '*.d' -mtime +2 -delete
}
prune_stale_executables

ensure_rust_tools() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "Adding the wasm32 target"
    rustup target add wasm32-unknown-unknown
  fi
  if ! cargo leptos --version 2>/dev/null | grep -q '0\.3\.10'; then
    say "Installing cargo-leptos 0.3.10 (about 20 minutes on 2 cores, once)"
    cargo install cargo-leptos@0.3.10 --locked
  fi
  local wb
  wb="$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' "$ROOT/Cargo.lock")"
  if ! wasm-bindgen --version 2>/dev/null | grep -q " $wb\$"; then
    say "Installing wasm-bindgen-cli $wb (must equal the wasm-bindgen crate in Cargo.lock)"
    # Without --locked: the CLI's own lockfile pins a crate the index lacks.
    cargo install wasm-bindgen-cli --version "$wb" --force
  fi
  # Debian's binaryen (wasm-opt 108) silently breaks hydration; use npm's binaryen 132.
  if ! wasm-opt --version 2>/dev/null | grep -q 'version 132'; then
    say "Installing wasm-opt 132 (npm binaryen)"
    npm install --prefix "$TOOLS" --no-audit --no-fund --no-package-lock binaryen@132.0.0
  fi
}

ensure_browser() {
  if [ ! -x /usr/bin/chromium ]; then
    say "Installing Debian's chromium"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  fi
  if [ ! -d "$ROOT/e2e/node_modules/playwright-core" ]; then
    say "Installing the browser tests' node packages"
    (cd "$ROOT/e2e" && npm ci --no-audit --no-fund)
  fi
}

# The agent's TLS test makes a throwaway CA and server certificate with the openssl CLI.
ensure_openssl() {
  if ! command -v openssl >/dev/null 2>&1; then
    say "Installing Debian's openssl (the agent's TLS test makes certificates with it)"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y openssl
  fi
}

# Builds the site (wasm, JS, CSS) and the server binary with cargo-leptos.
# Every page's view is a wasm chunk of its own (`--split`, needed by the lazy routes); a release
# build also writes each file brotli- and gzip-compressed beside it (`--precompress`). The build
# names the JS, wasm and CSS by content (`hash-files`) and lists the names in hash.txt beside the
# binary; the server reads it from the site root, so it is copied there.
# Sets SITE_ROOT and HOURGLASS_BIN.
build_site() {
  local mode="${1:-debug}"
  say "Building the app with cargo-leptos ($mode)"
  local flags=(--split)
  [ "$mode" = release ] && flags+=(--release --precompress)
  (cd "$ROOT" && CARGO_TARGET_DIR="$LEPTOS_TARGET_DIR" cargo leptos build "${flags[@]}")
  SITE_ROOT="$ROOT/target/site"
  HOURGLASS_BIN="$LEPTOS_TARGET_DIR/$mode/hourglass"
  cp "$LEPTOS_TARGET_DIR/$mode/hash.txt" "$SITE_ROOT/hash.txt"
  export SITE_ROOT HOURGLASS_BIN
}

ensure_cargo_fuzz() {
  if ! cargo fuzz --version >/dev/null 2>&1; then
    say "Installing cargo-fuzz (a few minutes, once)"
    cargo install cargo-fuzz --locked
  fi
}

# A local PostgreSQL for the test suite's second pass: installs Debian's postgresql when its
# server binaries are missing, creates a cluster (C collation, so ORDER BY sorts as SQLite does),
# starts it on 127.0.0.1:5432 unless something already answers there, makes a `hourglass` role
# that may create databases, and exports HOURGLASS_TEST_POSTGRES_URL (unless already set).
# PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user and
# lives in its home (it cannot reach root's $HOME); otherwise in $CACHE/pgdata.
ensure_postgres() {
  local bin url="postgres://hourglass:hourglass@127.0.0.1:5432/postgres"
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ] || [ ! -x "$bin/pg_ctl" ]; then
    say "Installing Debian's postgresql"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
    bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)"
    # The package may have started its own cluster on 5432; the tests want ours (more
    # connections, C collation), so stop that one.
    local version
    version="$(basename "$(dirname "$bin")")"
    pg_ctlcluster "$version" main stop 2>/dev/null || true
  fi
  local data run=()
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 ||
      useradd --system --home-dir /var/lib/postgresql --create-home --shell /bin/bash postgres
    data="${HOURGLASS_PGDATA:-/var/lib/postgresql/hourglass}"
    run=(runuser -u postgres --)
    mkdir -p "$data" && chown postgres: "$data" && chmod 700 "$data"
  else
    data="${HOURGLASS_PGDATA:-$CACHE/pgdata}"
    mkdir -p "$data" && chmod 700 "$data"
  fi
  if ! "$bin/pg_isready" -q -h 127.0.0.1 -p 5432; then
    if [ ! -f "$data/PG_VERSION" ]; then
      say "Creating a PostgreSQL cluster in $data"
      "${run[@]}" "$bin/initdb" -D "$data" -U postgres -E UTF8 --no-locale \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    fi
    say "Starting PostgreSQL on 127.0.0.1:5432"
    # Each test has its own database and pools; the default 100 connections is too few.
    "${run[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p 5432 -k $data -c max_connections=400 -c fsync=off" start >/dev/null
  fi
  if ! "$bin/psql" -q "$url" -c 'select 1' >/dev/null 2>&1; then
    say "Creating the PostgreSQL role hourglass"
    local create="do \$\$ begin
        if not exists (select from pg_roles where rolname = 'hourglass') then
          create role hourglass login createdb password 'hourglass';
        else
          alter role hourglass login createdb password 'hourglass';
        end if;
      end \$\$;"
    # Through the cluster's own socket (ours: in the data folder; Debian's: /var/run/postgresql).
    "${run[@]}" "$bin/psql" -q -h "$data" -p 5432 -U postgres -d postgres -c "$create" 2>/dev/null ||
      "${run[@]}" "$bin/psql" -q -p 5432 -d postgres -c "$create"
  fi
  export HOURGLASS_TEST_POSTGRES_URL="${HOURGLASS_TEST_POSTGRES_URL:-$url}"
}
