#!/usr/bin/env bash
# demo.sh -- the main job on a fresh Debian machine (root) or an already set-up one: installs
# Deno (pinned, from npm), brings up Incus with the images if missing (scripts/host-setup.sh),
# then drives a sandbox through `isb rpc` (scripts/demo.ts prints every protocol line).
# Idempotent: a re-run reuses everything and recreates the demo sandbox.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
unset RUST_BACKTRACE
export NO_COLOR=1 DENO_NO_UPDATE_CHECK=1
deno=$(bash "$root/scripts/install-deno.sh")
export PATH="$(dirname "$deno"):$PATH"
if [ "$(id -u)" = 0 ]; then
  INCUS_SMOKE_TEST=0 bash "$root/scripts/host-setup.sh"
fi
exec "$deno" run --quiet --no-prompt --allow-run="$root/bin/isb" --allow-env=ISX_DEMO_IMAGE \
  "$root/scripts/demo.ts" "$@"
