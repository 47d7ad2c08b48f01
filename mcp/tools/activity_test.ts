import { equal } from "node:assert/strict";
import { ActivityCounter } from "../../proxy/activity/counter.ts";
import { parseActivity, toRecord } from "../../proxy/activity/activity.ts";
import { activityTools } from "./activity.ts";

Deno.test("instance_activity's output schema admits every field the proxy's record has, refused included", () => {
  const c = new ActivityCounter({ now: () => 5000, providers: ["anthropic"] });
  const ref = { name: "web", incarnation: "1", view: 1 };
  c.modelCall(ref).end({ responded: true });
  c.traffic(ref).end();
  c.refused(ref);
  const wire = parseActivity(JSON.parse(JSON.stringify(c.snapshot())));
  const rec = toRecord("web", {
    model_usage_providers: wire.model_usage_providers,
    entry: wire.instances.web,
  });
  const structured = Object.fromEntries(Object.entries(rec).filter(([, v]) => v !== null));
  const r = activityTools[0]!.output.safeParse(structured);
  equal(r.success, true, r.success ? "" : r.error.message);
  equal(structured.refused, 1);
});
