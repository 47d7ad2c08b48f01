/**
 * The agent tools, built for real: one root template from the local base image with the
 * four agents (node comes in through their `requires`) and this program, fetched from npm
 * on the host. Slow (several hundred MB through the host cache), so it is the only test
 * that builds them, and it builds them once. Runs in CI (opt out: ISX_TEST_AGENTS=0).
 */

import assert from "node:assert/strict";
import { LIVE_IMAGE, LIVE_PROJECT, LIVE_SOCKET, NO_INCUS, testName } from "../helpers/live.ts";
import { IsxHome } from "../templates_env.ts";
import { createIncusClient } from "../../rpc/mod.ts";
import { execRecorded, SLOW_DAEMON_MS } from "../../mcp/mod.ts";

// The four agents come from the npm registry through the host (about 2.5 min cold, 700 MB in
// the host cache; a warm cache fetches nothing). A host without the registry opts out with
// ISX_TEST_AGENTS=0, and the test is then reported as skipped, never as passed.
const AGENTS_WANTED = Deno.env.get("ISX_TEST_AGENTS") !== "0";
if (!AGENTS_WANTED) {
  // deno-lint-ignore no-console
  console.error("agent build test skipped: ISX_TEST_AGENTS=0");
}

const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };

Deno.test({
  name: "isx build installs claude, codex, pi, opencode and isx, and each answers --version",
  ignore: NO_INCUS || !AGENTS_WANTED,
  async fn() {
    const name = testName("tpl-agents");
    // a shared cache outside the temp home: a second run fetches nothing from npm
    const cache = Deno.env.get("ISX_TEST_CACHE") ??
      `${Deno.env.get("HOME") ?? "/root"}/.cache/isx-test`;
    await using home = new IsxHome({ cacheDir: cache });
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    try {
      const init = await home.isx(["init", "--yes"]);
      assert.ok(Deno.statSync(`${home.stateDir}/ca/ca.crt`).isFile, init.stdout + init.stderr);
      home.define(
        "templates",
        name,
        `image: ${LIVE_IMAGE}\ntools: [isx, claude, codex, {name: pi, model: claude-haiku-4-5}, opencode]\n`,
      );
      const r = await home.isx(["build", "-q", name]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const inst = `${name}-i`;
      const b = await home.isx([
        "branch",
        inst,
        "--from",
        name,
        "--network",
        "airgap",
        "--no-preflight",
      ]);
      assert.equal(b.code, 0, b.stderr);
      for (const cmd of ["node", "claude", "codex", "pi", "opencode", "isx"]) {
        const v = await execRecorded(c, inst, ["bash", "-lc", `${cmd} --version`], {
          step: cmd,
          user: AGENT,
        });
        assert.equal(v.exitCode, 0, `${cmd} --version: ${v.stdout}${v.stderr}`);
        assert.match(v.stdout + v.stderr, /\d+\.\d+/, `${cmd} --version printed a version`);
      }
      const pi = await execRecorded(c, inst, ["cat", "/home/agentuser/.pi/agent/settings.json"], {
        step: "pi",
        user: AGENT,
      });
      assert.match(pi.stdout, /"defaultModel": "claude-haiku-4-5"/);
    } finally {
      for (const n of [`${name}-i`, name, `${name}-build`]) {
        await c.stopInstance(n, { step: "cleanup", force: true }).catch(() => {});
        await c.deleteInstance(n, { step: "cleanup" }).catch(() => {});
      }
      c.close();
    }
  },
});
