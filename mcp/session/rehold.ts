/**
 * A coordinator's session holds again what it held (shared/spec/isx-mcp.md §10; issue 20).
 * The session of an agent inside an instance is the instance, `instance:<name>:<grant>`,
 * not the `isx mcp --caller-instance` process the proxy runs for it: a dropped connection
 * releases nothing, and when the next process starts (a new `initialize`, a proxy restart)
 * it finds every instance still stamped with its session and registers it again with its
 * task records, as adoption does. An instance whose template is no longer approved is
 * released instead (stamped orphaned, as the end of a host session would), so withdrawing
 * approval takes effect on the next connection.
 *
 * @module
 */

import { readStamps, STAMP } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session } from "./session.ts";
import { approvedTemplate } from "./templates.ts";
import { takeOver } from "./take_over.ts";
import { adoptTasks } from "./adoption.ts";

/** What a re-hold did, by instance name. */
export interface ReholdOutcome {
  /** Held again. */
  held: string[];
  /** Released: the template is no longer approved. */
  released: string[];
}

/** Registers again every instance stamped with this session; see the module doc. */
export async function reholdSession(s: Session): Promise<ReholdOutcome> {
  const out: ReholdOutcome = { held: [], released: [] };
  const mine = (await s.incus.listInstances()).filter((i) => {
    const st = readStamps(i.config);
    return st[STAMP.type] === "instance" && st[MCP_STAMP.owner] === s.deps.owner &&
      st[MCP_STAMP.session] === s.deps.id && !st[MCP_STAMP.kept] && !s.held.has(i.name);
  });
  if (!mine.length) return out;
  const cfg = s.deps.readConfig();
  const defs = s.deps.definitions();
  for (const inst of mine) {
    const template = readStamps(inst.config)[STAMP.profile] ?? "";
    const t0 = s.deps.now();
    try {
      approvedTemplate(cfg, defs, template);
    } catch (e) {
      if (!(e instanceof RefusalError)) throw e;
      await s.releaseOne(inst.name);
      s.audit({
        tool: "rehold",
        instance: inst.name,
        outcome: "released",
        ms: s.deps.now() - t0,
        detail: e.message,
      });
      out.released.push(inst.name);
      continue;
    }
    try {
      await takeOver(s, inst);
      await adoptTasks(s, inst.name);
      s.audit({ tool: "rehold", instance: inst.name, outcome: "adopted", ms: s.deps.now() - t0 });
      out.held.push(inst.name);
    } catch (e) {
      s.audit({
        tool: "rehold",
        instance: inst.name,
        outcome: `failed: ${(e as Error).message}`,
        ms: s.deps.now() - t0,
      });
    }
  }
  return out;
}
