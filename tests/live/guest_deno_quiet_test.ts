/**
 * Guest Deno processes make no request of their own (issue 19): Deno's daily release check
 * would go out through the guest's proxy settings and count in the instance's `traffic_*`.
 * In an instance of a project this test made, on its bridge, with `HTTPS_PROXY` at the real
 * proxy's forward port (the test's, in this process; it resolves no name, so nothing leaves
 * the host): a `deno` started as isx starts every guest deno (`GUEST_DENO_ENV`,
 * guest/agents/argv.ts) adds nothing to the counts, while the same command without it is
 * counted (the check the prefix turns off, shown in the same test).
 *
 * @module
 */

import assert from "node:assert/strict";
import { NO_INCUS, until } from "../helpers/live.ts";
import { HostLab, incusCli } from "../helpers/host_lab.ts";
import { HostProxy } from "../helpers/host_proxy.ts";
import { GUEST_DENO_ENV } from "../../guest/mod.ts";
import { execRecorded } from "../../mcp/mod.ts";

const TEMPLATE = "tpl-minimal";
const DENO = "/usr/local/bin/deno";
// long enough for a release check started at launch to reach the proxy (`deno run` checks,
// `deno eval` does not)
const WAIT = "await new Promise((r) => setTimeout(r, 5000));";
const SCRIPT = "/tmp/isx-deno-quiet.ts";

Deno.test({
  name:
    "a guest deno started as isx starts it makes no request; without DENO_NO_UPDATE_CHECK it does",
  ignore: NO_INCUS,
  async fn() {
    await using lab = await HostLab.open({ template: TEMPLATE });
    await using proxy = await HostProxy.start(lab);
    const name = `ih-deno-${lab.id}`;
    await incusCli(["copy", TEMPLATE, name, "--project", lab.project]);
    await incusCli(["start", name, "--project", lab.project]);
    await until("an address on the lab bridge", async () => {
      const st = (await lab.scoped.call("GET", `/1.0/instances/${name}/state`, {})) as {
        metadata?: {
          network?: Record<string, { addresses: { family: string; address: string }[] }>;
        };
      };
      return st.metadata?.network?.eth0?.addresses.find((a) => a.family === "inet")?.address;
    }, 120_000);
    const key = `${lab.project}/${name}`;
    const wrote = await execRecorded(lab.scoped, name, [
      "sh",
      "-c",
      'printf "%s\\n" "$1" >"$2"',
      "sh",
      WAIT,
      SCRIPT,
    ], { step: "write the script" });
    assert.equal(wrote.exitCode, 0, wrote.stderr);
    const counted = async () => {
      const a = await proxy.activity(key);
      return Number(a?.traffic_requests ?? 0) + Number(a?.refused ?? 0);
    };
    const fwd = `http://${lab.gateway}:${proxy.forwardPort}`;
    const env = (n: number) => ({
      HTTPS_PROXY: fwd,
      HTTP_PROXY: fwd,
      https_proxy: fwd,
      http_proxy: fwd,
      // a fresh cache each time: no record of an earlier check
      DENO_DIR: `/tmp/isx-deno-quiet-${n}`,
      HOME: "/root",
    });
    const quiet = await execRecorded(lab.scoped, name, [...GUEST_DENO_ENV, DENO, "run", SCRIPT], {
      step: "guest deno with the release check off",
      env: env(1),
    });
    assert.equal(quiet.exitCode, 0, quiet.stderr);
    assert.equal(await counted(), 0, JSON.stringify(await proxy.activity(key)));
    const loud = await execRecorded(lab.scoped, name, [DENO, "run", SCRIPT], {
      step: "guest deno with the release check on",
      env: env(2),
    });
    assert.equal(loud.exitCode, 0, loud.stderr);
    assert.ok(
      await counted() > 0,
      `without the prefix the release check is counted: ${
        JSON.stringify(await proxy.activity(key))
      }`,
    );
  },
});
