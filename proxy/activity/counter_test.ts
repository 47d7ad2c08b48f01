import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { ActivityCounter, type CallerRef } from "./counter.ts";

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, tick: (ms: number) => (t += ms) };
}

const A: CallerRef = { name: "a", incarnation: "2026-11-30T10:00:00Z", view: 1 };
const usage = (i: number, o: number) => ({
  input_tokens: i,
  output_tokens: o,
  cache_read_input_tokens: 1,
  cache_creation_input_tokens: 2,
});

Deno.test("ActivityCounter.modelCall counts a call, its usage and its times", () => {
  const c = clock();
  const k = new ActivityCounter({ now: c.now, providers: ["anthropic"] });
  const call = k.modelCall(A);
  let e = k.snapshot().instances.a!;
  equal(e.requests, 1);
  equal(e.in_flight, 1);
  equal(e.last_request_at, 1_000_000);
  equal(e.idle_seconds, undefined);
  c.tick(2500);
  call.end({ responded: true, usage: usage(10, 20) });
  c.tick(12_300);
  e = k.snapshot().instances.a!;
  equal(e.in_flight, 0);
  equal(e.last_response_at, 1_002_500);
  equal(e.idle_seconds, 12);
  equal(e.input_tokens, 10);
  equal(e.cache_creation_input_tokens, 2);
});

Deno.test("ActivityCounter sums usage across calls and ends each call exactly once", () => {
  const k = new ActivityCounter({ now: clock().now, providers: ["anthropic"] });
  const one = k.modelCall(A);
  const two = k.modelCall(A);
  one.end({ responded: true, usage: usage(1, 2) });
  one.end({ responded: true, usage: usage(1, 2) });
  two.end({ responded: true, usage: usage(3, 4) });
  const e = k.snapshot().instances.a!;
  equal(e.in_flight, 0);
  equal(e.input_tokens, 4);
  equal(e.output_tokens, 6);
});

Deno.test("ActivityCounter sets last_response_at and idle_seconds when a call fails", () => {
  const c = clock();
  const k = new ActivityCounter({ now: c.now, providers: ["anthropic"] });
  const call = k.modelCall(A);
  equal(k.snapshot().instances.a!.idle_seconds, undefined);
  c.tick(2000);
  call.end({ responded: false });
  c.tick(5000);
  const e = k.snapshot().instances.a!;
  equal(e.last_response_at, 1_002_000);
  equal(e.idle_seconds, 5);
  equal(e.requests, 1);
  equal(e.in_flight, 0);
});

Deno.test("ActivityCounter starts fresh counters for a new incarnation of a name", () => {
  const c = clock();
  const k = new ActivityCounter({ now: c.now, providers: ["anthropic"] });
  k.modelCall(A).end({ responded: true });
  c.tick(1000);
  const again = { name: "a", incarnation: "2026-11-30T11:00:00Z", view: 2 };
  const e = k.snapshot([again]).instances.a!;
  equal(e.counting_since, 1_001_000);
  equal(e.requests, 0);
});

Deno.test("ActivityCounter never goes back to an older view", () => {
  const k = new ActivityCounter({ now: clock().now, providers: ["anthropic"] });
  const newer = { name: "a", incarnation: "new", view: 5 };
  k.snapshot([newer]);
  k.modelCall({ name: "a", incarnation: "old", view: 4 }).end({ responded: true });
  const e = k.snapshot([newer]).instances.a!;
  equal(e.requests, 0);
});

Deno.test("ActivityCounter.snapshot creates counters for known instances and drops idle unlisted ones", () => {
  const c = clock();
  const k = new ActivityCounter({ now: c.now, providers: ["anthropic", "openai"] });
  const b = { name: "b", incarnation: "x", view: 1 };
  const busy = k.modelCall(A);
  let w = k.snapshot([b]);
  assertEquals(Object.keys(w.instances), ["a", "b"]);
  assertEquals(w.model_usage_providers, ["anthropic", "openai"]);
  equal(w.instances.b!.counting_since, 1_000_000);
  busy.end({ responded: true });
  w = k.snapshot([b]);
  assertEquals(Object.keys(w.instances), ["b"]);
});

Deno.test("ActivityCounter.traffic counts bytes identically for every cut of a body", () => {
  const body = 1000;
  for (let cut = 0; cut <= body; cut += 37) {
    const k = new ActivityCounter({ now: clock().now, providers: ["anthropic"] });
    const t = k.traffic(A);
    t.sent(cut);
    t.sent(body - cut);
    t.received(body - cut);
    t.received(cut);
    t.end();
    const e = k.snapshot().instances.a!;
    equal(e.traffic_bytes_sent, body);
    equal(e.traffic_bytes_received, body);
  }
});

Deno.test("ActivityCounter.traffic keeps a WebSocket in flight while open", () => {
  const k = new ActivityCounter({ now: clock().now, providers: ["anthropic"] });
  const ws = k.traffic(A, { websocket: true });
  let e = k.snapshot().instances.a!;
  equal(e.traffic_websockets_in_flight, 1);
  equal(e.traffic_requests_in_flight, 1);
  ws.end();
  ws.end();
  e = k.snapshot().instances.a!;
  equal(e.traffic_websockets_in_flight, 0);
  equal(e.traffic_requests_in_flight, 0);
  equal(e.traffic_requests, 1);
  ok(e.traffic_last_response_at !== undefined);
});

Deno.test("ActivityCounter.refused counts per incarnation and reports refused on the wire", () => {
  const c = new ActivityCounter({ now: () => 1000, providers: ["anthropic"] });
  const ref = { name: "web", incarnation: "1", view: 1 };
  c.refused(ref);
  c.refused(ref);
  equal(c.snapshot().instances.web!.refused, 2);
  c.refused({ name: "web", incarnation: "2", view: 2 });
  equal(c.snapshot().instances.web!.refused, 1, "a new incarnation starts from zero");
});
