/**
 * Runs live test files again with this host's incusd as an Incus *remote* (issue 11: the
 * remote path tested on every change, not once): a trusted client certificate in a throwaway
 * incus client config, made by the real `incus config trust add` / `incus remote add --token`
 * against `core.https_address` on loopback (tests/helpers/incus_remote.ts), then
 * `deno test` of the files with `ISX_TEST_INCUS_REMOTE` and `INCUS_CONF` naming it, so the
 * tests' clients and the programs they spawn speak HTTPS, never the socket
 * (tests/helpers/live.ts). The trust and the directory are removed afterwards, whatever the
 * outcome. scripts/test.sh runs it for the isb rpc live suite; by hand:
 * `deno run -A scripts/test_over_remote.ts tests/live/rpc_exec_test.ts`.
 *
 * @module
 */

import { createIncusClient } from "../rpc/mod.ts";
import { liveRemote } from "../tests/helpers/incus_remote.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const files = Deno.args.length
  ? Deno.args
  : [...Deno.readDirSync(`${ROOT}/tests/live`)].map((e) => e.name)
    .filter((n) => /^rpc_.*_test\.ts$/.test(n)).sort().map((n) => `tests/live/${n}`);
const socket = Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket";
// a busy incusd may stall for tens of seconds (as tests/helpers/live.ts allows for)
const local = createIncusClient({ socket, timeouts: { requestMs: 120_000 } });
try {
  await using remote = await liveRemote(local, `isxtest-ci-${crypto.randomUUID().slice(0, 8)}`);
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-all", "--no-prompt", "--frozen", ...files],
    cwd: ROOT,
    env: { ISX_TEST_INCUS_REMOTE: remote.name, INCUS_CONF: remote.conf },
    stdin: "null",
  }).spawn();
  const status = await child.status;
  Deno.exitCode = status.code;
} finally {
  local.close();
}
