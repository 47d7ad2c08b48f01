#!/usr/bin/env bash
# install-deno.sh -- install the pinned Deno from the npm registry (Deno's own download host is
# not reachable from our machines) and cache the project's dependencies. Idempotent; prints the
# path of the deno binary on stdout. Needs node/npm (installed from Debian if missing).
set -euo pipefail
DENO_VERSION=2.9.6
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="${XDG_CACHE_HOME:-$HOME/.cache}/deno-npm/$DENO_VERSION"
deno="$tools/node_modules/@deno/linux-x64-glibc/deno"
if [ ! -x "$deno" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { echo "install-deno: npm is missing; run as root or install npm" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >&2
  fi
  npm install --prefix "$tools" --no-save --no-package-lock --ignore-scripts --no-audit --no-fund \
    "deno@$DENO_VERSION" >&2
fi
[ -x "$deno" ] || { echo "install-deno: $deno was not installed" >&2; exit 1; }
# The npm dependencies land in DENO_DIR (default ~/.cache/deno); nothing goes into the repo.
(cd "$root" && RUST_BACKTRACE= "$deno" install --frozen --quiet --entrypoint main.ts >&2)
echo "$deno"
