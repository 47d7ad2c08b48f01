#!/usr/bin/env bash
# demo.sh -- the main job on a fresh Debian machine (root) or an already set-up one: installs
# Deno (pinned, from npm), brings up Incus with the images if missing (scripts/host-setup.sh),
# then drives a sandbox through `isb rpc` (scripts/demo.ts prints every protocol line), and
# drives `isx mcp` as a program would (scripts/demo_mcp.ts): it runs `isx init`, approves
# tpl-minimal in ~/.config/isx/mcp.yaml unless that file exists, builds tpl-minimal when it
# is missing and starts the proxy when it is not running. As root it puts `isx` and `isb` on
# PATH: links in /usr/local/bin to this checkout's launchers (which find Deno themselves).
# Idempotent: a re-run reuses everything and recreates the demo sandbox and instance.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
unset RUST_BACKTRACE
export NO_COLOR=1 DENO_NO_UPDATE_CHECK=1
deno=$(bash "$root/scripts/install-deno.sh")
export PATH="$(dirname "$deno"):$PATH"
bash "$root/scripts/prebuild.sh" "$deno" # the pre-built program every start loads (docs/decisions.md)
if [ "$(id -u)" = 0 ]; then
  INCUS_SMOKE_TEST=0 bash "$root/scripts/host-setup.sh"
fi
"$deno" run --quiet --no-prompt --allow-run="$root/bin/isb" --allow-env=ISX_DEMO_IMAGE \
  "$root/scripts/demo.ts" "$@"

isx="$root/bin/isx"
# `isx` and `isb` as commands (docs/mcp.md: `claude mcp add ... -- isx mcp`); a file there
# that is not a link is someone else's and stays
if [ "$(id -u)" = 0 ] && [ -d /usr/local/bin ]; then
  for p in isx isb; do
    if [ -L "/usr/local/bin/$p" ] || [ ! -e "/usr/local/bin/$p" ]; then
      ln -sfn "$root/bin/$p" "/usr/local/bin/$p"
    else
      echo "demo: /usr/local/bin/$p exists and is not a link; left as it is" >&2
    fi
  done
fi
"$isx" init >/dev/null
mcp_yaml="${XDG_CONFIG_HOME:-$HOME/.config}/isx/mcp.yaml"
[ -e "$mcp_yaml" ] || printf 'templates: [tpl-minimal]\n' >"$mcp_yaml"
"$isx" list --json | grep -q '"name": "tpl-minimal"' || "$isx" build -q tpl-minimal
"$isx" proxy status >/dev/null 2>&1 || "$isx" proxy start
exec "$deno" run --quiet --no-prompt --allow-run="$isx" --allow-env=ISX_DEMO_TEMPLATE \
  "$root/scripts/demo_mcp.ts"
