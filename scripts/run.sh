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
credentials="$ROOT/data/first-admin.txt"

if [ ! -f "$credentials" ]; then
  mkdir -p "$ROOT/data"
  password="$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)"
  if printf '%s\n' "$password" | "$HOURGLASS_BIN" admin create-user --username admin --role admin --password-stdin; then
    (umask 077 && printf 'username: admin\npassword: %s\n' "$password" > "$credentials")
  fi
fi

say "Hourglass: open http://$addr and sign in with"
if [ -f "$credentials" ]; then
  sed 's/^/    /' "$credentials"
else
  echo "    an existing account (reset one with: $HOURGLASS_BIN admin reset-password --username NAME --password-stdin)"
fi
exec "$HOURGLASS_BIN" serve --addr "$addr"
