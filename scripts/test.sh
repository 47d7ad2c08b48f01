#!/usr/bin/env bash
# test.sh -- the whole test suite, from a fresh Debian machine (root) or an already set-up one:
# installs Deno (pinned, from npm), brings up Incus with the test images (scripts/host-setup.sh),
# runs fmt/lint/check, the compile-flags check and every test (the live Incus tests included,
# in a lab of their own; the user's side is compared before and after: tests/guest/user_side.ts),
# and prints `N passed, N failed` as its last line. Idempotent. `.ci/run` runs scripts/demo.sh,
# then this.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
unset RUST_BACKTRACE
export DENO_NO_UPDATE_CHECK=1 NO_COLOR=1
log=$(mktemp -t isx-test.XXXXXX)
fail() { echo "test.sh: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

deno=$(bash scripts/install-deno.sh) || fail "installing deno failed"
export PATH="$(dirname "$deno"):$PATH"
bash scripts/prebuild.sh "$deno" # the pre-built program every start loads (docs/decisions.md)
if [ "$(id -u)" = 0 ]; then
  bash scripts/host-setup.sh || fail "host setup failed (Incus); see the lines above"
  # Incus is set up now: a live test that finds it down fails instead of skipping
  # (tests/helpers/live_gate.ts).
  export CI="${CI:-1}"
  # what the tests themselves drive: a real terminal (isx shell), openssl (TLS checks), curl and
  # python3 (the frame attacks from a network namespace, tests/live/attack_frames_test.ts),
  # firefox-esr and chromium (the dashboard in Firefox and in Chromium,
  # tests/dashboard_firefox_test.ts and tests/live/dashboard_live_test.ts)
  need=()
  for tool in tmux openssl curl python3 firefox-esr chromium; do command -v "$tool" >/dev/null 2>&1 || need+=("$tool"); done
  if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; } \
      || fail "installing test tools failed: ${need[*]}"
  fi
  # the Python MCP SDK the Python client test drives (tests/live/mcp_python_test.ts); a failed
  # install is reported here and that test fails with its own message, the others still run
  pyvenv="${XDG_CACHE_HOME:-$HOME/.cache}/isx-test/pyvenv"
  if ! "$pyvenv/bin/python" -c "import importlib.metadata as m; assert m.version('mcp') == '2.3.0'" 2>/dev/null; then
    mkvenv() { python3 -m venv "$pyvenv" >/dev/null 2>&1; }
    mkvenv || { rm -rf "$pyvenv"; { DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv \
      || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv; }; } >/dev/null 2>&1 && mkvenv; } \
      || echo "test.sh: python3 -m venv $pyvenv failed (python3-venv?): the Python MCP client test will fail" >&2
    "$pyvenv/bin/pip" install -q mcp==2.3.0 >/dev/null 2>&1 \
      || echo "test.sh: pip install mcp==2.3.0 into $pyvenv failed: the Python MCP client test will fail" >&2
  fi
else
  echo "test.sh: not root: skipping host setup; live tests run only if an Incus socket answers" >&2
fi

deno fmt --check >/dev/null || { deno fmt --check 2>&1 | tail -20; fail "deno fmt --check: run deno fmt"; }
deno lint || fail "deno lint"
# Exported symbols of every folder's mod.ts (the public surface) are documented and name no
# unexported type; the list comes from git so a new folder is covered without editing this.
mods=()
while IFS= read -r f; do [ -f "$f" ] && mods+=("$f"); done \
  < <(git -c safe.directory="$root" ls-files -- 'mod.ts' '*/mod.ts')
[ "${#mods[@]}" -gt 0 ] || fail "deno doc --lint: git ls-files found no mod.ts"
deno doc --lint "${mods[@]}" || fail "deno doc --lint"
deno check || fail "deno check"

# counts of one `deno test` log: "passed failed ignored" (0 1 0 when it has no summary)
counts() {
  local summary p f i
  summary=$(grep -E '^(ok|FAILED) \| [0-9]+ passed' "$1" | tail -1 || true)
  p=$(sed -nE 's/.*\| ([0-9]+) passed.*/\1/p' <<<"$summary")
  f=$(sed -nE 's/.*\| ([0-9]+) failed.*/\1/p' <<<"$summary")
  i=$(sed -nE 's/.*\| ([0-9]+) ignored.*/\1/p' <<<"$summary")
  [ -n "$p" ] || { p=0; f=${f:-1}; }
  [ "$2" = 0 ] || [ "${f:-0}" != 0 ] || f=1
  echo "$p ${f:-0} ${i:-0}"
}

# The suite is a guest on this machine (docs/testing.md): record the user's side (projects,
# bridges, proxy, nft tables, isx home) and make the suite's own lab (an Incus project and
# bridges named isxtest-*, tests/helpers/lab.ts) that every live test works in; after the
# tests, remove the lab and compare: a difference is one more failure, printed.
lab=
snap=
if [ "$(id -u)" = 0 ]; then
  snap=$(mktemp -t isx-user-side.XXXXXX)
  lab=$(deno run --allow-all --no-prompt --frozen tests/guest/user_side.ts begin "$snap" --owner-pid $$) \
    || fail "recording the user's side or making the suite's lab failed; see the lines above"
  export ISX_TEST_LAB="$lab"
  # an interrupted run takes its lab away too (a killed one: the next run's begin sweeps it)
  trap 'deno run --allow-all --no-prompt --frozen tests/guest/user_side.ts end "$snap" --lab "$lab" >/dev/null 2>&1; exit 130' INT TERM
fi

deno test --allow-all --no-prompt --frozen 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
read -r passed failed ignored < <(counts "$log" "$rc")
# The isb rpc live suite a second time over HTTPS, with this host's incusd as an Incus remote
# (core.https_address on loopback, a trusted client certificate): the remote path is tested
# on every change (scripts/test_over_remote.ts; docs/scale.md). Only where Incus was set up.
if [ "$(id -u)" = 0 ]; then
  echo "test.sh: the isb rpc live suite again, over an HTTPS remote" >&2
  deno run --allow-all --no-prompt --frozen scripts/test_over_remote.ts 2>&1 | tee "$log"
  rc2=${PIPESTATUS[0]}
  read -r p2 f2 i2 < <(counts "$log" "$rc2")
  passed=$((passed + p2)); failed=$((failed + f2)); ignored=$((ignored + i2))
  [ "$rc2" = 0 ] || rc=$rc2
fi
rm -f "$log"
if [ -n "$lab" ]; then
  trap - INT TERM
  if deno run --allow-all --no-prompt --frozen tests/guest/user_side.ts end "$snap" --lab "$lab"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    [ "$rc" != 0 ] || rc=1
  fi
  rm -f "$snap"
fi
[ "$ignored" != 0 ] || ignored=
echo "${passed} passed, ${failed} failed${ignored:+, ${ignored} skipped}"
exit "$rc"
