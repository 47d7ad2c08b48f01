import assert from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { RefusalError } from "../errors.ts";
import { createInstance } from "./create.ts";
import { Session, type SessionDeps } from "./session.ts";

Deno.test("createInstance claims its key before its first Incus call: a repeat meanwhile is busy, and the key is free again after", async () => {
  // the first call's look-up of the key hangs (a slow incusd): the repeat must not get past it
  const fake = await startFakeIncusd([{ route: "GET /1.0/instances", behaviour: "hang" }]);
  const incus = createIncusClient({ socket: fake.socket, timeouts: { requestMs: 300 } });
  const s = new Session({
    incus,
    id: "1-1",
    owner: "0:/st",
    readConfig: () => ({ maxInstances: 8 }),
  } as unknown as SessionDeps);
  try {
    const args = { template: "tpl-dev", idempotency_key: "k1" };
    const first = createInstance(s, args);
    const second = await createInstance(s, args).catch((e) => e);
    assert.ok(second instanceof RefusalError, String(second));
    assert.equal(second.code, "busy");
    assert.equal(fake.requests.length <= 1, true, "the repeat made no Incus call");
    // the first ends (here: the look-up times out) and releases the key
    await assert.rejects(first);
    assert.equal(s.keysInFlight.has("k1"), false);
  } finally {
    incus.close();
    await fake.close();
  }
});
