import assert from "node:assert/strict";
import { mcpChildSpec } from "./mcp_child.ts";
import { CTX } from "./_perm_fixture.ts";
import { contextFrom } from "./permissions.ts";
import type { CliContext } from "./command.ts";
import { spawnChild } from "../proxy/mod.ts";

function ctx(perm = CTX, env: Record<string, string> = {}): CliContext {
  return { prog: "isx", global: { socket: perm.socket }, perm, env } as unknown as CliContext;
}

Deno.test("mcpChildSpec starts isx mcp --caller-instance under the mcp mode's grants, never the proxy's", () => {
  const spec = mcpChildSpec(ctx(CTX, { DENO_DIR: "/cache/deno", ISX_LOG: "debug" }));
  const args = spec.args("coord", "proj");
  assert.deepEqual(args.slice(-7), [
    "--socket",
    CTX.socket,
    "--project",
    "proj",
    "mcp",
    "--caller-instance",
    "coord",
  ]);
  assert.deepEqual(args.slice(-3), ["mcp", "--caller-instance", "coord"]);
  assert.ok(args.includes("--project") && args[args.indexOf("--project") + 1] === "proj");
  const read = args.find((a) => a.startsWith("--allow-read="))!.slice(13).split(",");
  const write = args.find((a) => a.startsWith("--allow-write="))!.slice(14).split(",");
  for (const p of [...read, ...write]) {
    assert.ok(!p.endsWith("credentials.yaml"), p);
    assert.ok(p !== `${CTX.stateDir}/ca` && p !== `${CTX.stateDir}/proxy`, p);
  }
  assert.ok(read.includes(`${CTX.stateDir}/ca/ca.crt`));
  assert.ok(!args.some((a) => a.startsWith("--allow-run")), "the child runs no program");
  // a clean environment: the user's directories, the program's name, the module cache
  assert.deepEqual(Object.keys(spec.env).sort(), [
    "DENO_DIR",
    "HOME",
    "ISX_PROG",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
  ]);
  assert.equal(spec.env.XDG_CONFIG_HOME, `${CTX.home}/.config`);
  assert.equal(spec.args("coord", undefined).includes("--project"), false);
});

Deno.test({
  name:
    "the child the spec starts runs under those flags: it answers initialize and tools/list, and ends on TERM",
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "isx-mcpchild-" });
    try {
      const env = (k: string) =>
        ({
          HOME: dir,
          XDG_CONFIG_HOME: `${dir}/config`,
          XDG_STATE_HOME: `${dir}/state`,
          XDG_CACHE_HOME: `${dir}/cache`,
        } as Record<string, string>)[k];
      const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
      const perm = contextFrom(env, {
        cwd: dir,
        uid: Deno.uid() ?? 0,
        programDir: root,
        execPath: Deno.execPath(),
        socket: `${dir}/no-incus.socket`,
      });
      const deno = Deno.env.get("DENO_DIR") ||
        `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`;
      const spec = mcpChildSpec(ctx(perm, { DENO_DIR: deno }));
      const got: Record<string, unknown>[] = [];
      const child = spawnChild(spec, "coordx", (m) => got.push(m));
      // both at once: the handshake's answers come before the session loads (which, with no
      // Incus here to read the coordinator's grant from, ends the child)
      await child.send({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t" } },
      });
      await child.send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
      const deadline = Date.now() + 60_000;
      while (got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const byId = new Map(got.map((m) => [m.id, m.result as Record<string, unknown>]));
      assert.equal((byId.get(1)?.serverInfo as { name?: string })?.name, "isx");
      assert.equal((byId.get(2)?.tools as unknown[])?.length, 17);
      await child.stop(10_000);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
