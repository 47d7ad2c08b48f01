/**
 * Mounts (`volumes:` entries of a service, isb-rpc.md §7.1): the docker short syntax
 * `SOURCE:TARGET[:OPTIONS]` and the long form, both parsed into the long form minus its
 * defaults, which is also how a mount is serialised (`"./src:/home/dev/src:ro"` →
 * `{"type":"bind","source":"./src","target":"/home/dev/src","read_only":true}`).
 *
 * @module
 */

import * as z from "zod";
import { Bool, type Ctx, fail, IntOrString, poly, StringMap, sub } from "./scalars.ts";

/** A mount, in long form with defaults omitted. */
export interface MountSpec {
  /** `bind` (a host path) or `volume` (a named volume). */
  type: "bind" | "volume";
  /** Host path (bind) or volume key (volume). */
  source: string;
  /** Absolute path inside the guest. */
  target: string;
  /** The mount is read-only in the guest. */
  read_only?: true;
  /** Named volumes only: it must already exist (isb never creates it). */
  external?: true;
  /** Named volumes only: the storage pool. */
  pool?: string;
  /** Named volumes only: the owner the mount point is chowned to (name or id). */
  owner?: string;
  /** The Incus device name (default: derived from the target). */
  device?: string;
  /** Named volumes only: skip copying the image's files into a new volume. */
  volume?: { nocopy: true };
  /** Extra disk device properties, verbatim. */
  options?: Record<string, string>;
}

/** Whether a mount source names a host path (`/`, `.`, `~`, `$HOME`) rather than a named volume. */
export function isHostPath(source: string): boolean {
  return source.startsWith("/") || source.startsWith(".") || source.startsWith("~") ||
    /^\$(HOME|\{HOME\})(\/|$)/.test(source);
}

/** The long form as written. */
export const MountLong = z.strictObject({
  type: z.enum(["bind", "volume"]).optional().describe(
    "`bind` (a host path) or `volume` (a named volume); default from `source`",
  ),
  source: z.string().describe("Host path (`/`, `.` or `~`) or the key of a named volume"),
  target: z.string().describe("Absolute path inside the guest"),
  read_only: Bool.optional(),
  external: Bool.optional().describe("Named volumes only: it must already exist"),
  pool: z.string().optional().describe("Named volumes only: the storage pool"),
  owner: IntOrString.optional().describe("Named volumes only: chown the mount point"),
  device: z.string().optional().describe("incus device name (default: from the target)"),
  volume: z.strictObject({ nocopy: Bool.optional() }).optional(),
  options: StringMap.optional().describe("Extra disk device properties, verbatim"),
});

const PROPAGATION = new Set(["shared", "rshared", "slave", "rslave", "private", "rprivate"]);

/** Drops defaults so the object is the normalised long form. */
function normal(m: {
  type: "bind" | "volume";
  source: string;
  target: string;
  read_only?: boolean | undefined;
  external?: boolean | undefined;
  pool?: string | undefined;
  owner?: string | undefined;
  device?: string | undefined;
  nocopy?: boolean | undefined;
  options?: Record<string, string> | undefined;
}): MountSpec {
  const out: MountSpec = { type: m.type, source: m.source, target: m.target };
  if (m.read_only) out.read_only = true;
  if (m.external) out.external = true;
  if (m.pool !== undefined) out.pool = m.pool;
  if (m.owner !== undefined) out.owner = m.owner;
  if (m.device !== undefined) out.device = m.device;
  if (m.nocopy) out.volume = { nocopy: true };
  if (m.options && Object.keys(m.options).length > 0) out.options = m.options;
  return out;
}

/** Parses the short syntax; a message (not a throw) on error. */
export function parseShortMount(s: string): MountSpec | string {
  const first = s.indexOf(":");
  const second = first < 0 ? -1 : s.indexOf(":", first + 1);
  if (first < 0) {
    return `volume ${JSON.stringify(s)}: expected SOURCE:TARGET[:options] ` +
      "(isb has no anonymous volumes)";
  }
  const src = s.slice(0, first);
  const target = second < 0 ? s.slice(first + 1) : s.slice(first + 1, second);
  if (src === "" || !target.startsWith("/")) {
    return `volume ${JSON.stringify(s)}: expected SOURCE:TARGET with an absolute target`;
  }
  const m: Parameters<typeof normal>[0] = {
    type: isHostPath(src) ? "bind" : "volume",
    source: src,
    target,
  };
  const options: Record<string, string> = {};
  const opts = second < 0 ? "" : s.slice(second + 1);
  for (const o of opts.split(",").filter((o) => o !== "")) {
    const eq = o.indexOf("=");
    const [k, v] = eq < 0 ? [o, undefined] : [o.slice(0, eq), o.slice(eq + 1)];
    if (v === undefined && k === "ro") m.read_only = true;
    else if (v === undefined && k === "rw") m.read_only = false;
    else if (v === undefined && (k === "z" || k === "Z")) continue; // SELinux: nothing to do
    else if (v === undefined && PROPAGATION.has(k)) options.propagation = k;
    else if (v === undefined && k === "external") m.external = true;
    else if (v === undefined && k === "nocopy") m.nocopy = true;
    else if (v !== undefined && k === "owner") m.owner = v;
    else if (v !== undefined && k === "device") m.device = v;
    else if (v !== undefined && k === "pool") m.pool = v;
    else {
      return `volume ${JSON.stringify(s)}: unknown option ${JSON.stringify(o)} ` +
        "(ro, rw, nocopy, owner=, device=, pool=, external)";
    }
  }
  m.options = options;
  return normal(m);
}

function parseMount(v: unknown, ctx: Ctx): MountSpec {
  if (typeof v === "string") {
    const m = parseShortMount(v);
    return typeof m === "string" ? fail(ctx, m) : m;
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    return fail(ctx, "volume: expected SOURCE:TARGET[:OPTIONS] or {type, source, target, ...}");
  }
  const l = sub(MountLong, v, ctx);
  if (!l) return z.NEVER;
  return normal({
    ...l,
    type: l.type ?? (isHostPath(l.source) ? "bind" : "volume"),
    nocopy: l.volume?.nocopy,
  });
}

/** A mount in either syntax, parsed to {@link MountSpec}. */
export const Mount = poly(
  z.union([
    z.string().describe(
      "SOURCE:TARGET[:OPTIONS]; OPTIONS is a comma list of ro, rw, nocopy, owner=USER, " +
        "device=NAME, pool=POOL, external, and propagation modes",
    ),
    MountLong,
  ]).describe("A mount: `SOURCE:TARGET[:OPTIONS]` or the long form"),
  parseMount,
);

export { normalTarget } from "./target.ts";
