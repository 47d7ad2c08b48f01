import { deepStrictEqual as assertEquals, equal } from "node:assert/strict";
import type { Instance, InstanceState } from "../../rpc/mod.ts";
import { admit, type InterceptDeps } from "./admit.ts";
import { ClientRegistry } from "./clients.ts";
import { instanceInfo, PIN_FILTERS } from "./_identity.ts";

const FILTERED = Object.fromEntries(PIN_FILTERS.map((k) => [k, "true"]));

function member(name: string, address: string, pool: string): Instance & { state: InstanceState } {
  const config = {
    "user.incus-spawn.type": "instance",
    "user.incus-spawn.trusted": "true",
    "user.incus-spawn.build-id": "b1",
    "user.incus-spawn.mcp-pool": pool,
    "volatile.eth0.hwaddr": "10:66:6a:00:00:01",
  };
  return {
    name,
    project: "default",
    status: "Running",
    created_at: "2026-12-01T00:00:00Z",
    config,
    devices: {},
    expanded_config: config,
    expanded_devices: {
      eth0: { type: "nic", network: "incusbr0", "ipv4.address": address, ...FILTERED },
    },
    state: { status: "Running", network: {} },
  } as unknown as Instance & { state: InstanceState };
}

Deno.test("a warm-pool member is known by its address but given nothing; claimed, all", async () => {
  const list = [member("pool-a", "10.77.0.20", "ready"), member("claimed", "10.77.0.21", "")];
  const reg = new ClientRegistry({ listInstances: () => Promise.resolve(list.map(instanceInfo)) }, {
    now: () => 0,
  });
  await reg.refresh();
  const a = await reg.identify({ hostname: "10.77.0.20", port: 1 });
  assertEquals([a?.name, a?.grant, a?.pooled], ["pool-a", [], true]);
  const b = await reg.identify({ hostname: "10.77.0.21", port: 1 });
  assertEquals([b?.name, b?.grant, b?.pooled], ["claimed", "all", undefined]);
  await reg.close();
});

Deno.test("admit answers an unclaimed member 403 before any counter or route is touched", async () => {
  const touched: string[] = [];
  const trap = (what: string) =>
    new Proxy({}, {
      get(_t, p) {
        touched.push(`${what}.${String(p)}`);
        throw new Error(`${what} touched`);
      },
    });
  const deps = {
    policy: trap("policy"),
    counter: trap("counter"),
    clients: trap("clients"),
    overrides: new Map(),
  } as unknown as InterceptDeps;
  const caller = {
    name: "pool-a",
    incarnation: "x",
    view: 1,
    address: "10.77.0.20",
    pins: {},
    grant: [] as [],
    pooled: true as const,
  };
  const r = await admit(deps, caller, {
    method: "POST",
    authority: "api.anthropic.com",
    pathAndQuery: "/v1/messages",
    headers: new Headers(),
    headBytes: 100,
  });
  assertEquals(r, {
    kind: "answer",
    status: 403,
    message: "this instance is a warm-pool member, not claimed yet",
  });
  equal(touched.length, 0);
});
