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

# Builds the site (wasm, JS, CSS) and the server binary with cargo-leptos.
# Sets SITE_ROOT and HOURGLASS_BIN.
build_site() {
  local mode="${1:-debug}"
  say "Building the app with cargo-leptos ($mode)"
  local flags=()
  [ "$mode" = release ] && flags+=(--release)
  (cd "$ROOT" && CARGO_TARGET_DIR="$LEPTOS_TARGET_DIR" cargo leptos build "${flags[@]}")
  SITE_ROOT="$ROOT/target/site"
  HOURGLASS_BIN="$LEPTOS_TARGET_DIR/$mode/hourglass"
  export SITE_ROOT HOURGLASS_BIN
}

ensure_cargo_fuzz() {
  if ! cargo fuzz --version >/dev/null 2>&1; then
    say "Installing cargo-fuzz (a few minutes, once)"
    cargo install cargo-fuzz --locked
  fi
}
