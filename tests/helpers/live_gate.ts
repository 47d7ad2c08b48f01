/**
 * The decision of the live-test gate (tests/helpers/live.ts), apart from its probe so it can
 * be tested: with `CI` set a missing Incus is retried for a while and then fails the run
 * (CI always sets Incus up, so a broken one must not pass as skipped tests); without `CI` the
 * live tests are ignored with the printed reason.
 *
 * @module
 */

/** What the gate needs: the probe (a reason when Incus does not answer) and a clock. */
export interface GateDeps {
  /** Asks Incus once; undefined when it answers. */
  probe(): Promise<string | undefined>;
  /** True when `CI` is set (non-empty). */
  ci: boolean;
  /** How long CI keeps asking a stalled incusd (ms). */
  retryMs: number;
  /** Monotonic milliseconds. */
  now(): number;
  /** Waits between probes. */
  sleep(ms: number): Promise<void>;
}

/** Undefined when Incus answers; the skip reason outside CI; throws in CI after retrying. */
export async function liveGate(d: GateDeps): Promise<string | undefined> {
  let reason = await d.probe();
  for (const until = d.now() + d.retryMs; reason !== undefined && d.ci && d.now() < until;) {
    await d.sleep(1000);
    reason = await d.probe();
  }
  if (reason !== undefined && d.ci) throw new Error(`CI requires a live Incus: ${reason}`);
  return reason;
}

/** True when the `CI` variable asks for a live Incus (set and neither empty nor `0`/`false`). */
export function ciRequiresIncus(value: string | undefined): boolean {
  return value !== undefined && value !== "" && value !== "0" && value.toLowerCase() !== "false";
}
