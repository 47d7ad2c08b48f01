/**
 * `isx mcp` driven by the Python MCP SDK 2.x (`mcp` 2.3.0, a venv that scripts/test.sh
 * makes at ~/.cache/isx-test/pyvenv) over stdio against real Incus: the seed-000 program flow
 * (list_templates, keyed create, background exec, the keyed repeat answering replayed,
 * destroy) in handshake mode, where the change arrives as `notifications/isx/task_changed`,
 * and pinned stateless (2026-07-28), where `wait_any` reports it (the SDK's `listen()` has no
 * filter for the isx extension). A second
 * SDK in another language shows the wire, not one SDK's habits, is what works. The script
 * prints each result as a JSON line; every structuredContent is checked here against the
 * golden schemas with the validator the other MCP tests use. A missing venv fails the test.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import { LIVE_PROJECT, LIVE_SOCKET, NO_INCUS, removeInstance } from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { checkResult, makeHome, mcpCommand } from "../helpers/mcp.ts";
import { ROOT } from "../helpers/spawn.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts): never the user's tpl-minimal
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
const VENV = Deno.env.get("ISX_TEST_PYVENV") ||
  `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/isx-test/pyvenv`;

type Line = {
  tool?: string;
  result?: Record<string, unknown>;
  notification?: Record<string, unknown>;
  initialize?: Record<string, unknown>;
  protocol?: string;
};

async function flow(mode: "legacy" | "modern"): Promise<void> {
  {
    const python = `${VENV}/bin/python`;
    const probe = await new Deno.Command(python, {
      args: ["-c", "import importlib.metadata as m; print(m.version('mcp'))"],
      stdout: "piped",
      stderr: "piped",
    }).output().catch((e) => ({ success: false, stdout: new Uint8Array(), stderr: String(e) }));
    assert.ok(
      probe.success && new TextDecoder().decode(probe.stdout).trim() === "2.3.0",
      `the Python venv with mcp==2.3.0 is missing at ${VENV}: run bash scripts/test.sh ` +
        `(it makes it) or python3 -m venv ${VENV} && ${VENV}/bin/pip install mcp==2.3.0`,
    );
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const built = await incus.getInstance(TEMPLATE).then(
      (i) => readStamps(i.value.config)["type"] === "base",
      () => false,
    );
    assert.ok(built, `${TEMPLATE} is not built: isx build ${TEMPLATE} (the other MCP tests do)`);
    const h = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
    const { args, env } = mcpCommand(h, ["--no-preflight"]);
    const cfg = { command: Deno.execPath(), args, env, cwd: h.dir, template: TEMPLATE };
    try {
      const out = await new Deno.Command(python, {
        args: [`${ROOT}/tests/live/mcp_python_client.py`, JSON.stringify(cfg), mode],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      const lines = new TextDecoder().decode(out.stdout).split("\n").filter((l) => l.trim())
        .map((l) => JSON.parse(l) as Line);
      assert.equal(out.code, 0, `the Python client failed:\n${stderr.slice(-4000)}`);
      if (mode === "legacy") {
        const init = lines.find((l) => l.initialize)!.initialize!;
        assert.equal((init.serverInfo as Record<string, unknown>).name, "isx");
      } else {
        assert.equal(lines.find((l) => l.protocol)?.protocol, "2026-07-28");
      }
      const modern = mode === "modern";
      const calls = lines.filter((l) => l.tool);
      for (const c of calls) checkResult(c.tool!, c.result!);
      assert.deepEqual(calls.map((c) => c.tool), [
        "list_templates",
        "create_instance",
        "exec",
        ...(modern ? ["wait_any"] : []),
        "task_result",
        "create_instance",
        "destroy_instance",
      ]);
      const sc = calls.map((c) => {
        assert.ok(!c.result!.isError, `${c.tool} refused: ${JSON.stringify(c.result)}`);
        return c.result!.structuredContent as Record<string, unknown>;
      });
      const tpls = sc[0]!.templates as Record<string, unknown>[];
      assert.deepEqual([tpls[0]!.template, tpls[0]!.built], [TEMPLATE, true]);
      const name = String(sc[1]!.instance);
      assert.match(name, new RegExp(`^mcp-minimal-py${modern ? "m" : ""}-[a-z2-7]{5}$`));
      const task = String(sc[2]!.task_id);
      if (modern) assert.deepEqual(sc[3]!.finished, [task]);
      const [res, again] = modern ? [sc[4]!, sc[5]!] : [sc[3]!, sc[4]!];
      assert.deepEqual([res.exit_code, res.stdout], [3, "done\n"]);
      assert.deepEqual([again.instance, again.replayed], [name, true]);
      assert.equal((await incus.listInstances()).some((i) => i.name === name), false);
      if (modern) return; // stateless mode has no handshake capability; changes came by wait_any
      const changes = lines.filter((l) => l.notification && l.notification.task_id === task)
        .map((l) => l.notification!);
      assert.deepEqual(changes.map((c) => c.state), ["running", "finished"]);
      assert.equal(changes[1]!.exit_code, 3);
      assert.equal(changes[1]!.instance, name);
    } finally {
      for (const i of await incus.listInstances()) {
        if (readStamps(i.config)["mcp-owner"]?.endsWith(`:${h.stateDir}`)) {
          await removeInstance(incus, i.name);
        }
      }
    }
  }
}

Deno.test({
  name: "the Python MCP SDK 2.3.0 runs the program flow against isx mcp on real Incus (handshake)",
  ignore: NO_INCUS,
  fn: () => flow("legacy"),
});

Deno.test({
  name: "the Python MCP SDK 2.3.0 runs the program flow against isx mcp on real Incus (stateless)",
  ignore: NO_INCUS,
  fn: () => flow("modern"),
});
