import assert from "node:assert/strict";
import { equal, ok } from "node:assert/strict";
import { parseActivity, RECORD_FIELDS, toRecord } from "./activity.ts";
import { activityTable, plainLine } from "./_format.ts";
import { ActivityCounter } from "./counter.ts";

Deno.test("isx proxy activity shows an instance's refused connections in every format", () => {
  const c = new ActivityCounter({ now: () => 60_000, providers: ["anthropic"] });
  const ref = { name: "web", incarnation: "1", view: 1 };
  c.traffic(ref).end();
  for (let i = 0; i < 3; i++) c.refused(ref);
  const rec = toRecord("web", {
    model_usage_providers: ["anthropic"],
    entry: c.snapshot().instances.web,
  }, { offsetMinutes: 0 });
  equal(rec.refused, 3);
  equal(RECORD_FIELDS.at(-1), "refused", "appended last: older columns keep their places");
  equal(plainLine(rec).split("\t").at(-1), "3");
  const [head, row] = activityTable([rec], { now: 60_000, color: false }).split("\n");
  ok(head!.trimEnd().endsWith("REFUSED"), head);
  ok(row!.trimEnd().endsWith(" 3"), row);
});

Deno.test("parseActivity fills the appended counters, keeps unknown fields and refuses a bad count by field", () => {
  const entry = {
    counting_since: 1,
    requests: 2,
    in_flight: 0,
    input_tokens: 3,
    output_tokens: 4,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
    future_field: "kept",
  };
  const w = parseActivity({ instances: { a: entry }, later: 1 });
  assert.deepEqual(w.model_usage_providers, ["anthropic"]);
  assert.equal(w.instances.a!.traffic_requests, 0);
  assert.equal(w.instances.a!.refused, 0);
  assert.equal((w.instances.a as unknown as Record<string, unknown>).future_field, "kept");
  assert.equal((w as unknown as Record<string, unknown>).later, 1);
  const CASES: [unknown, string][] = [
    [{ instances: { a: { ...entry, requests: -1 } } }, "instances.a.requests"],
    [{ instances: { a: { ...entry, last_request_at: "now" } } }, "instances.a.last_request_at"],
    [{ instances: { a: { ...entry, output_tokens: undefined } } }, "instances.a.output_tokens"],
    [{ instances: [] }, "instances: expected a mapping"],
    [{ instances: {}, model_usage_providers: ["google"] }, "model_usage_providers.0"],
    [null, "document: expected a mapping"],
  ];
  for (const [body, msg] of CASES) {
    assert.throws(() => parseActivity(body), (e: unknown) => {
      assert.ok(e instanceof TypeError && e.message.startsWith("parse /activity: "), String(e));
      assert.ok(e.message.includes(msg), `${e.message} lacks ${msg}`);
      return true;
    });
  }
});
