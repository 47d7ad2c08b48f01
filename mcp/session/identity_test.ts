import assert from "node:assert/strict";
import { heartbeatFresh, Heartbeats, newSessionId, STALE_MS } from "./identity.ts";

Deno.test("heartbeatFresh is true only within STALE_MS of the last beat", () => {
  assert.equal(heartbeatFresh(1000, 1000 + STALE_MS - 1), true);
  assert.equal(heartbeatFresh(1000, 1000 + STALE_MS), false);
  assert.equal(heartbeatFresh(undefined, 5), false);
});

Deno.test("Heartbeats: a started session is alive to others until it stops; junk ids are dead", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const a = new Heartbeats(`${dir}/sessions`);
    const b = new Heartbeats(`${dir}/sessions`);
    const id = newSessionId(4242, 1_700_000_000_000);
    a.start(id);
    assert.equal(b.alive(id), true);
    assert.equal(b.alive("4242-1"), false);
    assert.equal(b.alive("../etc/passwd"), false);
    const old = new Date(Date.now() - STALE_MS - 1000);
    Deno.utimeSync(`${dir}/sessions/${id}`, old, old);
    assert.equal(b.alive(id), false, "a stale heartbeat is a dead session");
    a.stop();
    assert.equal(b.alive(id), false);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
