import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { McpEndpoint } from "./mod.ts";
import type { Caller } from "../callers/clients.ts";
import type { McpChild } from "./_child.ts";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

function fakeSpawn(log: { started: string[]; stopped: string[] }) {
  return (_spec: unknown, name: string, onMessage: (m: Record<string, unknown>) => void) => {
    log.started.push(name);
    let end!: () => void;
    const exited = new Promise<void>((r) => (end = r));
    const child: McpChild = {
      pid: log.started.length,
      exited,
      send(msg) {
        if (msg.id !== undefined) {
          queueMicrotask(() => onMessage({ jsonrpc: "2.0", id: msg.id, result: {} }));
        }
        return Promise.resolve();
      },
      stop() {
        log.stopped.push(name);
        end();
        return exited;
      },
    };
    return child;
  };
}

const caller = (name: string, grant: string): Caller => ({
  name,
  incarnation: "t",
  view: 1,
  address: "10.0.0.5",
  pins: {},
  grant: "all",
  secretSha256: sha("s"),
  mcpCaller: grant,
});

const init = () =>
  new Request("https://mcp.isx.internal/mcp", {
    method: "POST",
    headers: { "x-isx-instance-secret": "s", accept: "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
  });

Deno.test("McpEndpoint ends the child of a coordinator that left the listing, and of a replaced grant", async () => {
  const log = { started: [] as string[], stopped: [] as string[] };
  let known = [{ name: "coord", incarnation: "t", view: 1 }, {
    name: "other",
    incarnation: "t",
    view: 1,
  }];
  const ep = new McpEndpoint({
    spec: { command: "none", args: () => [], env: {} },
    // deno-lint-ignore no-explicit-any
    spawn: fakeSpawn(log) as any,
    clients: { known: () => known },
    reapMs: 20,
  });
  try {
    const g1 = "1".repeat(32);
    await (await ep.handle(init(), caller("coord", g1))).body?.cancel();
    await (await ep.handle(init(), caller("other", g1))).body?.cancel();
    assert.deepEqual(log.started, ["coord", "other"]);
    // destroyed and branched again under the name: another grant, another session
    await (await ep.handle(init(), caller("other", "2".repeat(32)))).body?.cancel();
    assert.deepEqual(log.stopped, ["other"]);
    known = [{ name: "other", incarnation: "t", view: 2 }];
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(log.stopped, ["other", "coord"]);
    assert.equal(ep.childPid("coord"), undefined);
    // refused callers never reach a bridge
    const bad = await ep.handle(
      init(),
      { ...caller("plain", g1), mcpCaller: undefined } as unknown as Caller,
    );
    assert.equal(bad.status, 403);
    await bad.body?.cancel();
    const wrongPath = await ep.handle(
      new Request("https://mcp.isx.internal/other", {
        method: "POST",
        headers: { "x-isx-instance-secret": "s" },
        body: "{}",
      }),
      caller("coord", g1),
    );
    assert.equal(wrongPath.status, 404);
    await wrongPath.body?.cancel();
    assert.deepEqual(log.started, ["coord", "other", "other"]);
  } finally {
    await ep.close();
  }
});
