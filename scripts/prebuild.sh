#!/usr/bin/env bash
# prebuild.sh DENO -- writes the pre-built program (scripts/prebuild.ts) now unless it is fresh,
# so the starts that follow load it (bin/launcher.bash). scripts/demo.sh and scripts/test.sh run
# it; a failure only means isx runs from its sources, so it says so and exits 0.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deno="${1:?usage: prebuild.sh DENO}"
if ! "$deno" run --quiet --no-prompt --cached-only --allow-read --allow-write="$root/.prebuilt" \
  --allow-run="$deno" --allow-env --config "$root/deno.json" "$root/scripts/prebuild.ts" \
  --if-stale --quiet; then
  echo "prebuild.sh: the pre-built program was not written; isx and isb run from their sources" >&2
fi
