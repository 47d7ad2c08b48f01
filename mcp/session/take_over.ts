/**
 * Adoption's core (shared/spec/isx-mcp.md §2.4, §4.3): re-stamp an orphan (or, forced, a
 * stuck session's instance) as held here in one write, read it back, and register it. Two
 * adoptions at once: the last writer wins and the loser is told `not_held`. When the
 * read-back shows an orphan sweep's `pending-op` mark, adoption waits for the sweep to
 * resolve (sweep_mark.ts) before answering. Used by `adopt_instance` and by a keyed
 * `create_instance` whose instance is an orphan.
 *
 * @module
 */

import type { Instance } from "../../rpc/base.ts";
import { isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP, withStamps } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session } from "./session.ts";
import { awaitSweepMark } from "./sweep_mark.ts";

/**
 * Re-stamps `inst` as held by this session and registers it; returns the instance as it is
 * once any sweep under way has finished with it (it may have been stopped as dormant).
 */
export async function takeOver(
  s: Session,
  inst: Instance,
  signal?: AbortSignal,
): Promise<Instance> {
  const name = inst.name;
  await s.incus.updateInstance(name, withStamps(s.holderStamps()), { step: `adopt ${name}` });
  let back = (await s.incus.getInstance(name)).value;
  if (readStamps(back.config)[MCP_STAMP.session] !== s.deps.id) {
    throw new RefusalError("not_held", `another session adopted "${name}" first`);
  }
  const st = readStamps(back.config);
  s.held.set(name, {
    name,
    template: st[STAMP.profile] ?? "",
    ...(st[MCP_STAMP.purpose] ? { purpose: st[MCP_STAMP.purpose] } : {}),
    created: back.created_at,
    state: "ready",
    kept: false,
  });
  if (!st[MCP_STAMP.pendingOp]) return back;
  // an orphan sweep marked it between adoption's check and its stamp
  const r = await awaitSweepMark(back, s.deps.id, {
    read: () =>
      s.incus.getInstance(name).then((x) => x.value, (e) => {
        if (isNotFound(e)) return undefined;
        throw e;
      }),
    now: () => s.deps.now(),
    sleep: (ms, sig) => s.deps.sleep(ms, sig),
    ...(signal ? { signal } : {}),
  });
  switch (r.kind) {
    case "clear":
      back = r.inst;
      return back;
    case "gone":
      s.held.delete(name);
      throw new RefusalError(
        "not_found",
        `instance "${name}" was destroyed by the orphan sweep while it was being adopted`,
      );
    case "taken":
      s.held.delete(name);
      throw new RefusalError("not_held", `another session adopted "${name}" first`);
    case "busy":
      // held, as §2.4 says; adopting again reads the task records (mcp/tools/lifecycle.ts)
      s.held.get(name)!.tasksUnread = true;
      throw new RefusalError(
        "busy",
        `instance "${name}" is now held by this session, but the orphan sweep is still ${r.op} it; retry adopt_instance shortly`,
      );
  }
}
