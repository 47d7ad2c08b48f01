/**
 * The sweep's dormancy edge (shared/spec/isx-mcp.md §4.4): for a running orphan past grace
 * kept alive only by unfinished agent runs, with nobody present, it feeds `decideDormancy` the
 * instance's cumulative CPU time from Incus and the newest agent task-file write (by the
 * guest's clock, read by the sweep's presence probe), then records the CPU sample or stops
 * the orphan. The stop is guarded like the destroy: `pending-op: stopping` first, the holder
 * re-read, `mcp-dormant` stamped before the stop and removed again if the stop failed and the
 * instance still runs. Kept apart from sweep.ts so each file reads on its own.
 *
 * @module
 */

import type { Instance } from "../../rpc/base.ts";
import { readStamps, withStamps } from "../host/stamps.ts";
import { stopReliably } from "../host/waits.ts";
import { CPU_SAMPLE_STAMP, decideDormancy, formatCpuSample } from "./dormancy.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session } from "./session.ts";

/** When a dormant stamp names the current holder, the time of the stop (ms), else undefined. */
export function dormantSince(st: Record<string, string>): number | undefined {
  const [at, by] = (st[MCP_STAMP.dormant] ?? "").split(" ");
  if (!at || by !== st[MCP_STAMP.session]) return undefined;
  const t = Date.parse(at);
  return Number.isNaN(t) ? undefined : t;
}

/** What the dormancy step did: the orphan still counts as in use, or it was stopped. */
export type DormancyOutcome = "in-use" | "dormant" | "skipped";

/** Runs the dormancy rule on one running, agent-only orphan past grace. */
export async function dormancyStep(
  s: Session,
  inst: Instance,
  writeAgeMs: number | undefined,
): Promise<DormancyOutcome> {
  const name = inst.name;
  const t0 = s.deps.now();
  const st = readStamps(inst.config);
  const holder = st[MCP_STAMP.session];
  const state = await s.incus.getInstanceState(name);
  const d = decideDormancy({
    now: s.deps.now(),
    afterMs: s.deps.readConfig().dormantAfterHours * 3_600_000,
    stamp: st[CPU_SAMPLE_STAMP],
    cpuNanos: typeof state.cpu?.usage === "number" ? state.cpu.usage : undefined,
    taskWriteAgeMs: writeAgeMs,
  });
  if (d.action === "none") return "in-use";
  if (d.action === "record") {
    await s.incus.updateInstance(name, (i) => {
      const cur = readStamps(i.config);
      if (cur[MCP_STAMP.session] !== holder || cur[MCP_STAMP.pendingOp]) return i;
      return withStamps({ [CPU_SAMPLE_STAMP]: formatCpuSample(d.sample) })(i);
    }, { step: `record CPU sample of ${name}` });
    return "in-use";
  }
  // guarded stop: mark, re-read the holder, back off if it changed
  await s.incus.updateInstance(name, withStamps({ [MCP_STAMP.pendingOp]: "stopping" }), {
    step: `mark ${name} for stopping`,
  });
  try {
    const again = readStamps((await s.incus.getInstance(name)).value.config);
    if (again[MCP_STAMP.session] !== holder || again[MCP_STAMP.kept]) return "skipped";
    const mark = `${new Date(s.deps.now()).toISOString()} ${holder}`;
    await s.incus.updateInstance(
      name,
      withStamps({ [MCP_STAMP.dormant]: mark, [CPU_SAMPLE_STAMP]: "" }),
      { step: `stamp ${name} dormant` },
    );
    try {
      await stopReliably(s.incus, name, { timeoutSecs: 30 });
    } catch (e) {
      const now = await s.incus.getInstanceState(name).catch(() => undefined);
      if (now?.status !== "Stopped") {
        await s.incus.updateInstance(name, withStamps({ [MCP_STAMP.dormant]: "" }), {
          step: `unstamp ${name} dormant`,
        });
      }
      throw e;
    }
    s.audit({
      tool: "reap-orphans",
      instance: name,
      outcome: "stopped(dormant)",
      ms: s.deps.now() - t0,
      detail: `quiet since ${new Date(d.quietSince).toISOString()}`,
    });
    return "dormant";
  } finally {
    await s.incus.updateInstance(name, withStamps({ [MCP_STAMP.pendingOp]: "" }), {
      step: `unmark ${name}`,
    });
  }
}
