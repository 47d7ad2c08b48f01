/**
 * The user's side of a machine as a flat map (`what` → a value that changes when it does),
 * and the difference of two such maps, for tests/guest/user_side.ts. Pure, so what counts
 * as a difference is tested without an Incus (snapshot_test.ts).
 *
 * Keys name one thing each (`project default instance tpl-minimal`, `network incusbr0
 * raw.dnsmasq`, `proxy listen`, `nft table inet isx_connlimit`): a difference reads as the
 * thing that changed, with its value before and after.
 *
 * @module
 */

/** One snapshot: a sorted-independent map of keys to values. */
export type Snapshot = Record<string, string>;

/** One difference between two snapshots. */
export interface Change {
  /** What changed. */
  key: string;
  /** `added` (only after), `removed` (only before) or `changed`. */
  kind: "added" | "removed" | "changed";
  /** The value before (absent for `added`). */
  before?: string;
  /** The value after (absent for `removed`). */
  after?: string;
}

/** The differences from `before` to `after`, sorted by key. */
export function diffSnapshots(before: Snapshot, after: Snapshot): Change[] {
  const out: Change[] = [];
  for (const key of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) {
    const [a, b] = [before[key], after[key]];
    if (a === b) continue;
    if (a === undefined) out.push({ key, kind: "added", after: b! });
    else if (b === undefined) out.push({ key, kind: "removed", before: a });
    else out.push({ key, kind: "changed", before: a, after: b });
  }
  return out;
}

const show = (v: string) => JSON.stringify(v.length > 300 ? `${v.slice(0, 300)}…` : v);

/** One line per change, for the log. */
export function formatChanges(changes: readonly Change[]): string {
  return changes.map((c) =>
    c.kind === "added"
      ? `  added    ${c.key}: ${show(c.after!)}`
      : c.kind === "removed"
      ? `  removed  ${c.key} (was ${show(c.before!)})`
      : `  changed  ${c.key}: ${show(c.before!)} -> ${show(c.after!)}`
  ).join("\n");
}

/** A short digest of a JSON-able value (keys sorted, so key order does not count). */
export async function digest(v: unknown): Promise<string> {
  const sorted = (x: unknown): unknown =>
    Array.isArray(x) ? x.map(sorted) : x && typeof x === "object"
      ? Object.fromEntries(
        Object.entries(x as Record<string, unknown>).sort(([a], [b]) => a < b ? -1 : 1)
          .map(([k, y]) => [k, sorted(y)]),
      )
      : x;
  const bytes = new TextEncoder().encode(JSON.stringify(sorted(v)));
  const h = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...h.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** `config` without Incus's `volatile.*` keys (they change on every start and stop). */
export function stableConfig(config: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(config ?? {}).filter(([k]) => !k.startsWith("volatile.")),
  );
}

/**
 * The listeners of `pid` in `ss -Hltnp` output, as sorted `address:port` (an ephemeral
 * port is the same until the process restarts, so it counts too).
 */
export function listenersOf(ssOutput: string, pid: number): string[] {
  const out = new Set<string>();
  for (const line of ssOutput.split("\n")) {
    if (!line.includes(`pid=${pid},`)) continue;
    const local = line.trim().split(/\s+/)[3];
    if (local) out.add(local);
  }
  return [...out].sort();
}
