/**
 * `instance_activity` (§2.12, seed 000 "Telling working from stuck"): what the host proxy
 * counted of an instance's traffic, read from its `/activity`; nothing runs in the instance.
 * Fields the proxy has no value for are omitted (never a placeholder); `idle_seconds` only
 * while no model call is in flight; `counting_since` only once the proxy knows the instance.
 * The proxy knows instances of every project, outside `default` as `<project>/<name>`
 * (proxy/callers/_identity.ts), so the session's project (`--project`, `INCUS_PROJECT`)
 * names the entry.
 *
 * @module
 */

import * as z from "zod";
import { type ActivityRecord, parseActivity, toRecord } from "../../proxy/activity/activity.ts";
import { RefusalError } from "../errors.ts";
import { InstanceName, once, tool } from "./def.ts";

const N = z.number().int();

/** The name the proxy's `/activity` gives instance `name` of `project` (pure). */
export function proxyInstanceKey(project: string, name: string): string {
  return project && project !== "default" ? `${project}/${name}` : name;
}

const Output = once(() =>
  z.strictObject({
    instance: z.string(),
    counting_since: z.string().optional(),
    requests: N,
    requests_in_flight: N,
    last_request_at: z.string().optional(),
    last_response_at: z.string().optional(),
    idle_seconds: N.optional(),
    input_tokens: N,
    output_tokens: N,
    cache_read_input_tokens: N,
    cache_creation_input_tokens: N,
    model_usage_providers: z.array(z.string()),
    traffic_requests: N,
    traffic_requests_in_flight: N,
    traffic_bytes_sent: N,
    traffic_bytes_received: N,
    traffic_websockets_in_flight: N,
    traffic_last_request_at: z.string().optional(),
    traffic_last_response_at: z.string().optional(),
    /** Connections the proxy refused over the per-instance cap. */
    refused: N,
  })
);

const activity = tool({
  name: "instance_activity",
  description:
    "What the host proxy counted of an instance's traffic: model calls (in flight, tokens, idle_seconds) and every other request (traffic_*). Tells working from stuck without running anything in the instance.",
  input: () => z.strictObject({ instance: InstanceName }),
  output: () => Output(),
  hints: { readOnly: true, idempotent: true },
  async run(args, { session: s }) {
    await s.requireHeld(args.instance);
    const got = await s.deps.fetchActivity();
    if (!got) {
      throw new RefusalError(
        "unavailable",
        "the isx proxy is not answering; ask the user to check isx proxy status",
      );
    }
    if (got.status === 404) {
      throw new RefusalError(
        "refused",
        "the running isx proxy is older than /activity; ask the user to check isx proxy status and restart it",
      );
    }
    if (got.status !== 200) {
      throw new RefusalError(
        "unavailable",
        `the isx proxy answered /activity with HTTP ${got.status}; ask the user to check isx proxy status`,
      );
    }
    let rec: ActivityRecord;
    try {
      const wire = parseActivity(got.body);
      rec = toRecord(args.instance, {
        model_usage_providers: wire.model_usage_providers,
        entry: wire.instances[proxyInstanceKey(s.deps.incus.project, args.instance)],
      });
    } catch (e) {
      throw new RefusalError("unavailable", `the isx proxy's /activity: ${(e as Error).message}`);
    }
    // the schema's fields only (the record may grow); its nulls are "no value", omitted (§1.3)
    const structured = Object.fromEntries(
      Object.entries(rec).filter(([k, v]) => v !== null && k in Output().shape),
    );
    return { structured };
  },
});

/** instance_activity. */
export const activityTools = [activity];
