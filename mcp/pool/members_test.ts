import { deepStrictEqual as assertEquals, equal } from "node:assert/strict";
import type { Instance } from "../../rpc/base.ts";
import { memoryAllows, memoryFloor, poolViews } from "./keeper.ts";
import { memberName, placeFingerprint, poolMembers, type Present, staleness } from "./members.ts";
import { MCP_DEFAULTS } from "../session/config.ts";

const P = "user.incus-spawn.";
const place = placeFingerprint({ bridge: "incusbr0" }, {});
const NOW: Present = { buildId: "b2", servedCa: "ca1", place };

function inst(name: string, stamps: Record<string, string>, status = "Running"): Instance {
  const config = Object.fromEntries(Object.entries(stamps).map(([k, v]) => [P + k, v]));
  return { name, status, config } as unknown as Instance;
}

const FRESH = {
  type: "instance",
  profile: "tpl-minimal",
  "build-id": "b2",
  "ca-sha256": "ca1",
  "mcp-pool": "ready",
  "mcp-pool-place": place,
  "static-ip": "10.1.2.3",
};

Deno.test("staleness: a rebuilt template, another CA or another placement is never handed out", () => {
  equal(staleness(FRESH, NOW), undefined);
  equal(staleness({ ...FRESH, "build-id": "b1" }, NOW), "its template was rebuilt since");
  equal(staleness(FRESH, { ...NOW, buildId: undefined }), "its template was rebuilt since");
  equal(
    staleness({ ...FRESH, "ca-sha256": "ca0" }, NOW),
    "it trusts another proxy CA than the proxy serves",
  );
  // the proxy not answering cannot prove the CA stale (the claim's preflight refuses then)
  equal(staleness({ ...FRESH, "ca-sha256": "ca0" }, { ...NOW, servedCa: undefined }), undefined);
  const moved = placeFingerprint({ bridge: "incusbr1" }, {});
  equal(
    staleness(FRESH, { ...NOW, place: moved }),
    "the proxy's placement or the template's network or limits changed",
  );
  equal(
    placeFingerprint({ bridge: "incusbr0" }, { network: "proxy-only" }) === place,
    false,
  );
});

Deno.test("poolMembers and poolViews: ready, filling, stale; non-members ignored", () => {
  const all = [
    inst("pool-minimal-aaaaa", FRESH),
    inst("pool-minimal-bbbbb", { ...FRESH, "build-id": "b1" }),
    inst("pool-minimal-ccccc", { ...FRESH, "mcp-pool": "filling" }),
    inst("mcp-minimal-ddddd", { ...FRESH, "mcp-pool": "" }),
    inst("pool-minimal-eeeee", FRESH, "Stopped"),
  ];
  const m = poolMembers(all, () => NOW);
  assertEquals(m.map((x) => [x.name, x.state, x.stale ?? null]), [
    ["pool-minimal-aaaaa", "ready", null],
    ["pool-minimal-bbbbb", "ready", "its template was rebuilt since"],
    ["pool-minimal-ccccc", "filling", null],
    ["pool-minimal-eeeee", "ready", null],
  ]);
  const cfg = {
    ...MCP_DEFAULTS,
    templates: ["tpl-minimal"],
    warmPool: { "tpl-minimal": 2 },
    source: "x",
  };
  assertEquals(poolViews(cfg, m), [{
    template: "tpl-minimal",
    want: 2,
    ready: ["pool-minimal-aaaaa"],
    filling: ["pool-minimal-ccccc"],
    stale: [
      { name: "pool-minimal-bbbbb", why: "its template was rebuilt since" },
      { name: "pool-minimal-eeeee", why: "it is Stopped" },
    ],
  }]);
  equal(memberName("tpl-minimal", "abcde"), "pool-minimal-abcde");
});

Deno.test("the memory guard: no fill under max(2 GiB, 20%) available", () => {
  const G = 1024 ** 3;
  equal(memoryFloor(24 * G), Math.floor(24 * G * 0.2));
  equal(memoryFloor(4 * G), 2 * G);
  equal(memoryAllows({ total: 24 * G, available: 5 * G }), true);
  equal(memoryAllows({ total: 24 * G, available: 4 * G }), false);
  equal(memoryAllows(undefined), true);
});
