import { equal, ok } from "node:assert/strict";
import { RECORD_FIELDS, toRecord } from "./activity.ts";
import { activityTable, plainLine } from "./activity_format.ts";
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
