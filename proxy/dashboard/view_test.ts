import { deepEqual, equal } from "node:assert/strict";
import type { Instance } from "../../rpc/base.ts";
import { buildView, type HealthInfo, instanceFacts } from "./view.ts";

const health: HealthInfo = {
  version: "0.0.0-test",
  pid: 1,
  caFingerprint: "ca",
  dnsConfigured: true,
  dnsManaged: true,
  configDrifted: false,
  configDriftedFiles: [],
  authError: null,
  missingCredentials: [],
  startedAt: 0,
  listen: {},
};

function listed(name: string, stamps: Record<string, string>): Instance {
  const config: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamps)) config[`user.incus-spawn.${k}`] = v;
  return {
    name,
    status: "Running",
    created_at: "2026-12-02T04:00:00Z",
    config,
    devices: {},
  } as unknown as Instance;
}

function view(list: Instance[]) {
  return buildView({
    instances: list.map(instanceFacts),
    activity: { instances: {}, model_usage_providers: [] },
    series: () => undefined,
    tasks: [],
    refusals: [],
    health,
  });
}

Deno.test("an unclaimed warm-pool member shows as a pool member, nobody's", () => {
  const v = view([
    listed("pool-minimal-a", { type: "instance", profile: "tpl-minimal", "mcp-pool": "ready" }),
    listed("pool-minimal-b", { type: "instance", profile: "tpl-minimal", "mcp-pool": "filling" }),
    listed("pool-minimal-c", { type: "instance", profile: "tpl-minimal", "mcp-pool": "draining" }),
  ]);
  deepEqual(v.instances.map((i) => [i.name, i.pool, i.standing, i.holder]), [
    ["pool-minimal-a", "ready", null, null],
    ["pool-minimal-b", "filling", null, null],
    ["pool-minimal-c", "draining", null, null],
  ]);
});

Deno.test("a claimed member (the claim empties mcp-pool) and other instances are no pool member", () => {
  const v = view([
    listed("pool-minimal-a", {
      type: "instance",
      profile: "tpl-minimal",
      "mcp-pool": "",
      "mcp-pool-claimed": "2026-12-02T04:01:00Z",
      "mcp-session": "s1",
      "mcp-client": "claude-code",
    }),
    listed("plain", { type: "instance", profile: "tpl-minimal" }),
    listed("odd", { type: "instance", "mcp-pool": "yes" }),
  ]);
  const byName = Object.fromEntries(v.instances.map((i) => [i.name, i]));
  equal(byName["pool-minimal-a"]!.pool, null);
  equal(byName["pool-minimal-a"]!.standing, "held");
  equal(byName["plain"]!.pool, null);
  equal(byName["odd"]!.pool, null, "an unknown word is no member");
});
