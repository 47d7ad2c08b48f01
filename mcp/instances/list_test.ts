import assert from "node:assert/strict";
import type { Instance } from "../../rpc/mod.ts";
import { formatTable, mcpState, toRecord } from "./list.ts";

function inst(name: string, config: Record<string, string>, status = "Running"): Instance {
  return {
    name,
    type: "container",
    status,
    status_code: 103,
    architecture: "x86_64",
    config,
    devices: {},
    profiles: ["default"],
    ephemeral: false,
    stateful: false,
    description: "",
    created_at: "2026-11-30T10:00:00Z",
  };
}

Deno.test("toRecord ignores instances isx did not make", () => {
  assert.equal(toRecord(inst("other", { "user.foo": "x" })), undefined);
});

Deno.test("toRecord reads kind, template, network and the address", () => {
  const r = toRecord({
    ...inst("w1", {
      "user.incus-spawn.type": "instance",
      "user.incus-spawn.profile": "tpl-dev",
      "user.incus-spawn.network": "airgap",
    }),
    state: {
      status: "Running",
      status_code: 103,
      pid: 1,
      network: {
        lo: { addresses: [{ family: "inet", address: "127.0.0.1", netmask: "8", scope: "local" }] },
        eth0: {
          addresses: [{ family: "inet", address: "10.77.0.9", netmask: "24", scope: "global" }],
        },
      },
    },
  });
  assert.deepEqual(r, {
    name: "w1",
    kind: "instance",
    status: "Running",
    template: "tpl-dev",
    ip: "10.77.0.9",
    network: "airgap",
    created: "2026-11-30T10:00:00Z",
    mcp_state: null,
    mcp_purpose: null,
    ca_outdated: null,
  });
});

Deno.test("mcpState tells held, orphaned and kept apart", () => {
  assert.equal(mcpState({}), null);
  assert.equal(mcpState({ "mcp-session": "1-2" }), "held");
  assert.equal(
    mcpState({ "mcp-session": "1-2", "mcp-orphaned": "2026-11-30T10:00:00Z 1-2" }),
    "orphaned",
  );
  assert.equal(
    mcpState({ "mcp-session": "3-4", "mcp-orphaned": "2026-11-30T10:00:00Z 1-2" }),
    "held",
  );
  assert.equal(mcpState({ "mcp-kept": "2026-11-30T10:00:00Z" }), "kept");
});

Deno.test("mcpState with liveness: a dead holder's instance is orphaned before any sweep stamps it", () => {
  const s = { "mcp-session": "1-2", "mcp-owner": "0:/st" };
  const asked: string[] = [];
  const alive = (live: boolean) => (session: string, owner: string) => {
    asked.push(`${session} ${owner}`);
    return live;
  };
  assert.equal(mcpState(s, alive(true)), "held");
  assert.equal(mcpState(s, alive(false)), "orphaned");
  assert.deepEqual(asked, ["1-2 0:/st", "1-2 0:/st"]);
  // a released or kept instance is not asked about
  assert.equal(mcpState({ ...s, "mcp-orphaned": "t 1-2" }, alive(true)), "orphaned");
  assert.equal(mcpState({ ...s, "mcp-kept": "t" }, alive(false)), "kept");
  assert.equal(asked.length, 2);
});

Deno.test("formatTable adds the MCP column only when some instance has MCP stamps", () => {
  const plain = toRecord(
    inst("a", { "user.incus-spawn.type": "base", "user.incus-spawn.profile": "a" }),
  )!;
  assert.doesNotMatch(formatTable([plain]), /MCP/);
  const held = toRecord(inst("b", {
    "user.incus-spawn.type": "instance",
    "user.incus-spawn.mcp-session": "1-2",
    "user.incus-spawn.mcp-purpose": "fix\u0007 #1",
  }))!;
  const t = formatTable([plain, held]);
  assert.match(t, /MCP/);
  assert.ok(t.includes("held: fix  #1"));
});

Deno.test("toRecord and formatTable mark a template built under another CA", () => {
  const tpl = (name: string, ca: string) =>
    inst(name, {
      "user.incus-spawn.type": "base",
      "user.incus-spawn.profile": name,
      "user.incus-spawn.ca-sha256": ca,
    }, "Stopped");
  const current = toRecord(tpl("tpl-a", "AA:01"), "AA:01")!;
  const old = toRecord(tpl("tpl-b", "BB:02"), "AA:01")!;
  const unstamped = toRecord(inst("tpl-c", { "user.incus-spawn.type": "base" }), "AA:01")!;
  assert.equal(current.ca_outdated, false);
  assert.equal(old.ca_outdated, true);
  assert.equal(unstamped.ca_outdated, null);
  assert.equal(toRecord(tpl("tpl-b", "BB:02"))!.ca_outdated, null, "no current CA: unknown");
  assert.doesNotMatch(formatTable([current, unstamped]), /CA/);
  const t = formatTable([current, old, unstamped]);
  assert.match(t, /\bCA\b/);
  assert.ok(t.includes("out of date: isx build tpl-b"), t);
});
