import { equal } from "node:assert/strict";
import type { Caller } from "./clients.ts";
import { Handoff } from "./handoff.ts";
import { callerOf } from "./admit.ts";

function caller(name: string): Caller {
  return { name, incarnation: "1", view: 1, address: name, pins: {}, grant: [] };
}

Deno.test("Handoff keeps two listeners' records for one client port apart", () => {
  const h = new Handoff();
  const [a, b] = [caller("a"), caller("b")];
  h.set(1000, 5555, a);
  h.set(2000, 5555, b);
  equal(h.get(1000, 5555), a);
  equal(h.get(2000, 5555), b);
  h.delete(1000, 5555);
  equal(h.get(1000, 5555), undefined);
  equal(h.get(2000, 5555), b);
  equal(h.size, 1);
});

Deno.test("callerOf takes a hand-over only for the listener it was made to", async () => {
  const h = new Handoff();
  const handed = caller("handed");
  const byAddress = caller("by-address");
  h.set(1000, 5555, handed);
  const deps = {
    handoff: h,
    clients: { identify: () => Promise.resolve(byAddress), known: () => [] },
  };
  const lo = { transport: "tcp" as const, hostname: "127.0.0.1", port: 5555 };
  equal(await callerOf(deps, lo, 1000), handed);
  equal(await callerOf(deps, lo, 2000), byAddress);
  equal(await callerOf(deps, lo), byAddress);
  // not from loopback: never a hand-over, whatever the ports
  equal(await callerOf(deps, { ...lo, hostname: "10.77.0.5" }, 1000), byAddress);
});
