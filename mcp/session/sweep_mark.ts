/**
 * Adoption meeting the orphan sweep (shared/spec/isx-mcp.md §2.4): adoption checks for a
 * `pending-op` mark, then stamps itself as holder; a sweep may have marked the instance in
 * between. The sweep re-reads the holder after its mark and backs off when it changed, so
 * the mark usually clears within moments; if the sweep had already passed that re-read, it
 * finishes its delete or dormancy stop. So the adopter waits, up to {@link SWEEP_WAIT_MS},
 * polling every {@link SWEEP_POLL_MS}, for the mark to resolve: gone (the sweep deleted it),
 * taken (another session's stamp won), cleared (held, and the caller goes on with the
 * instance as it now is, perhaps stopped as dormant), or still marked when the time is up
 * (held, but the caller answers `busy`). The waiting is here, the I/O injected.
 *
 * @module
 */

import type { Instance } from "../../rpc/base.ts";
import { readStamps } from "../host/stamps.ts";
import { MCP_STAMP } from "./holding.ts";

/** How long adoption waits for a sweep's mark to resolve. */
export const SWEEP_WAIT_MS = 30_000;

/** How often it looks again meanwhile. */
export const SWEEP_POLL_MS = 500;

/** How a sweep's mark seen after adoption's stamp resolved. */
export type SweepMarkOutcome =
  | { kind: "clear"; inst: Instance }
  | { kind: "gone" }
  | { kind: "taken"; session: string }
  | { kind: "busy"; op: string };

/** What the wait reads and how it waits. */
export interface SweepMarkIo {
  /** Reads the instance again; undefined when it no longer exists. */
  read(): Promise<Instance | undefined>;
  /** The clock (ms). */
  now(): number;
  /** Sleeps; rejects when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** The call's signal (a cancelled adoption stops waiting). */
  signal?: AbortSignal;
}

/** Waits for a sweep mark on `inst`, which session `me` has just stamped as its own. */
export async function awaitSweepMark(
  inst: Instance,
  me: string,
  io: SweepMarkIo,
): Promise<SweepMarkOutcome> {
  const until = io.now() + SWEEP_WAIT_MS;
  let cur: Instance | undefined = inst;
  for (;;) {
    const st = readStamps(cur.config);
    const holder = st[MCP_STAMP.session] ?? "";
    if (holder !== me) return { kind: "taken", session: holder };
    const op = st[MCP_STAMP.pendingOp];
    if (!op) return { kind: "clear", inst: cur };
    if (io.now() >= until) return { kind: "busy", op };
    await io.sleep(SWEEP_POLL_MS, io.signal);
    cur = await io.read();
    if (!cur) return { kind: "gone" };
  }
}
