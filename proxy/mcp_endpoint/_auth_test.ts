import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { admitCoordinator } from "./_auth.ts";
import type { Caller } from "../callers/clients.ts";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const GRANT = "0123456789abcdef0123456789abcdef";

function caller(o: Partial<Record<keyof Caller, unknown>> = {}): Caller {
  const c = {
    name: "coord",
    incarnation: "t",
    view: 1,
    address: "10.0.0.5",
    pins: {},
    grant: "all",
    secretSha256: sha("s3cret"),
    mcpCaller: GRANT,
    ...o,
  } as Record<string, unknown>;
  for (const k of Object.keys(c)) if (c[k] === undefined) delete c[k];
  return c as unknown as Caller;
}

const h = (secret?: string) =>
  new Headers(secret === undefined ? {} : { "x-isx-instance-secret": secret });

Deno.test("admitCoordinator admits the coordinator presenting its own secret", () => {
  assert.deepEqual(admitCoordinator(caller(), h("s3cret")), {
    ok: true,
    coordinator: { name: "coord", grant: GRANT },
  });
});

Deno.test("admitCoordinator refuses every other caller with 403 and a reason", () => {
  const cases: [string, Caller | undefined, Headers, RegExp][] = [
    ["unknown address", undefined, h("s3cret"), /belongs to no instance/],
    ["no secret", caller(), h(), /presents its instance secret/],
    ["empty secret", caller(), h(" "), /presents its instance secret/],
    ["wrong secret", caller(), h("other"), /does not belong to the calling instance/],
    [
      "another instance presenting the coordinator's secret",
      caller({ name: "other", secretSha256: sha("theirs"), mcpCaller: undefined }),
      h("s3cret"),
      /does not belong/,
    ],
    [
      "a plain branch with its own secret",
      caller({ mcpCaller: undefined }),
      h("s3cret"),
      /is not a coordinator/,
    ],
    ["no secret stamped", caller({ secretSha256: undefined }), h("s3cret"), /does not belong/],
  ];
  for (const [what, c, headers, reason] of cases) {
    const a = admitCoordinator(c, headers);
    assert.equal(a.ok, false, what);
    if (!a.ok) {
      assert.equal(a.status, 403, what);
      assert.match(a.reason, reason, what);
      assert.doesNotMatch(a.reason, /s3cret/, what);
    }
  }
});

Deno.test("instanceInfo and the registry give the grant only to a pinned isx instance, by its configured address", async () => {
  const { ClientRegistry, instanceInfo } = await import("../callers/clients.ts");
  const pinned = Object.fromEntries(
    ["security.ipv4_filtering", "security.ipv6_filtering", "security.mac_filtering"].map((k) => [
      k,
      "true",
    ]),
  );
  const inst = (o: { name: string; pinned: boolean; type?: string; reported?: string }) => ({
    name: o.name,
    created_at: "2026-12-01T00:00:00Z",
    status: "Running",
    config: {
      "user.incus-spawn.type": o.type ?? "instance",
      "user.incus-spawn.mcp-caller": GRANT,
      "volatile.eth0.hwaddr": "00:16:3e:00:00:01",
    },
    devices: {
      eth0: {
        type: "nic",
        network: "br",
        ...(o.pinned ? { "ipv4.address": `10.0.0.${o.name.length}`, ...pinned } : {}),
      },
    },
    state: {
      status: "Running",
      network: {
        eth0: {
          addresses: [{
            family: "inet",
            address: o.reported ?? `10.0.0.${o.name.length}`,
            scope: "global",
          }],
        },
      },
    },
  });
  // deno-lint-ignore no-explicit-any
  const info = (x: any) => instanceInfo(x);
  assert.equal(info(inst({ name: "a", pinned: true })).mcpCaller, GRANT);
  assert.equal(info(inst({ name: "bb", pinned: false })).mcpCaller, undefined);
  assert.equal(info(inst({ name: "ccc", pinned: true, type: "base" })).mcpCaller, undefined);
  const list = [info(inst({ name: "a", pinned: true })), info(inst({ name: "bb", pinned: false }))];
  const reg = new ClientRegistry({ listInstances: () => Promise.resolve(list) }, { now: Date.now });
  await reg.refresh();
  assert.equal((await reg.identify({ hostname: "10.0.0.1", port: 1 }))?.mcpCaller, GRANT);
  // a guest-reported address names the caller for counting, never as a coordinator
  const plain = await reg.identify({ hostname: "10.0.0.2", port: 1 });
  assert.equal(plain?.name, "bb");
  assert.equal(plain?.mcpCaller, undefined);
  await reg.close();
  // even a grant on record: an address the guest only reports never names a coordinator
  const forged = {
    ...info(inst({ name: "dddd", pinned: false })),
    mcpCaller: GRANT,
  };
  const reg2 = new ClientRegistry({ listInstances: () => Promise.resolve([forged]) }, {
    now: Date.now,
  });
  await reg2.refresh();
  const f = await reg2.identify({ hostname: "10.0.0.4", port: 1 });
  assert.equal(f?.name, "dddd");
  assert.equal(f?.mcpCaller, undefined);
  await reg2.close();
});
