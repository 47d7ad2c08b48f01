/**
 * What the proxy refused, for people: the last refusals (a forward-proxy target, a caller
 * no instance owns, a connection over the per-instance cap, a request the policy fails
 * closed on), each with when, for which instance, what, and the one-line fix where there
 * is one. A ring of {@link REFUSALS_KEPT}, so a guest hammering a refused target costs a
 * bounded amount of memory; repeats of the same refusal within a second fold into one
 * entry's `count`. The dashboard shows them (proxy/dashboard); `/activity` still carries
 * only the `refused` count. Pure: the clock is the caller's.
 *
 * @module
 */

/** The kinds of refusal the proxy records. */
export type RefusalKind =
  | "forward_target"
  | "unknown_caller"
  | "connection_cap"
  | "policy";

/** One refusal as recorded. */
export interface Refusal {
  /** Epoch ms of the (last) occurrence. */
  at: number;
  /** What kind of thing was refused. */
  kind: RefusalKind;
  /** The instance, or `null` for a caller no instance owns. */
  instance: string | null;
  /** What was refused (`host:port`, a source address, a host name). */
  target: string;
  /** Why, in words. */
  reason: string;
  /** The one-line fix, when there is one. */
  fix: string | null;
  /** How many times in a row (same kind, instance and target, within a second). */
  count: number;
}

/** How many refusals are kept. */
export const REFUSALS_KEPT = 200;

/** The one-line fix per kind (`null`: nothing the person can change). */
export const REFUSAL_FIX: Record<RefusalKind, string | null> = {
  forward_target:
    "the forward proxy reaches public addresses only; for a LAN or host service give the instance network: full",
  unknown_caller:
    "an address no instance's NIC configuration names; start the instance with isx (isx start) so its address is pinned",
  connection_cap:
    "raise proxy.limits.connections_per_instance in config.yaml, then isx proxy restart",
  policy: null,
};

/** The last refusals, newest last. */
export class RefusalLog {
  readonly #ring: Refusal[] = [];
  #version = 0;

  /** Records one refusal at `at`. */
  add(at: number, r: Omit<Refusal, "at" | "count" | "fix"> & { fix?: string | null }): void {
    this.#version++;
    const last = this.#ring.at(-1);
    if (
      last && last.kind === r.kind && last.instance === r.instance && last.target === r.target &&
      at - last.at < 1000
    ) {
      last.count++;
      last.at = at;
      return;
    }
    this.#ring.push({ at, ...r, fix: r.fix === undefined ? REFUSAL_FIX[r.kind] : r.fix, count: 1 });
    if (this.#ring.length > REFUSALS_KEPT) this.#ring.shift();
  }

  /** Every kept refusal, newest last (copies). */
  list(): Refusal[] {
    return this.#ring.map((r) => ({ ...r }));
  }

  /** Grows on every change (a cheap "anything new?"). */
  get version(): number {
    return this.#version;
  }
}
