/**
 * The reconcile rules (isb-rpc.md §9.1): {@link Desired} against the instance incus holds →
 * the actions that bring it there. Pure: the actual instance, the volumes that exist and the
 * local images are passed in, so the rules are table-tested.
 *
 * The rules that matter most:
 * - a device that is already correct is never touched (re-adding a disk remounts it, which
 *   silently kills inotify watches a live dev server holds);
 * - device names are deterministic, from the spec, never random;
 * - isb never removes config keys or devices it was not told about, unless asked to prune
 *   devices: another tool, or another spec for the same instance, may own them.
 *
 * @module
 */

import { invalid } from "../../errors.ts";
import type { Image, Instance } from "../../incus/types.ts";
import type { DesiredDevice } from "../resolve/devices.ts";
import { type Desired, REDACTED } from "../resolve/resolve.ts";
import { findLocalImage, missingLocalImage } from "../resolve/image.ts";
import { splitAddr } from "../spec/addr.ts"; // not ports.ts: the spec's schemas
import { type Action, type Props, restartNeeded, type SandboxPlan } from "./_actions.ts";

export * from "./_actions.ts";

/** What {@link plan} compares against. */
export interface PlanOptions {
  /** The instance as `GET /1.0/instances/N` returns it; undefined when it does not exist. */
  actual?: Instance | undefined;
  /** Custom volumes that exist, by pool (a pool missing here has none). */
  volumes?: Record<string, readonly string[]>;
  /** The local images (`GET /1.0/images?recursion=1`); undefined skips the image checks. */
  images?: readonly Image[] | undefined;
  /** Remove instance-local devices the spec does not mention (never `root`). */
  pruneDevices?: boolean;
}

const FALSE_IS_ABSENT = ["readonly", "shift", "nat"];

function normalize(p: Props): Props {
  const out: Props = { ...p };
  for (const k of FALSE_IS_ABSENT) if (out[k] === "false") delete out[k];
  if (out.type === "disk") {
    for (const k of ["source", "path"]) {
      const v = out[k];
      if (v !== undefined && v.length > 1) out[k] = v.replace(/\/+$/, "");
    }
  }
  return out;
}

function sameProps(a: Props, b: Props): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => b[k] === a[k]);
}

/**
 * Whether an existing device satisfies a desired one: props compared after dropping
 * `readonly`/`shift`/`nat` = "false", a trailing `/` on a disk's source/path, and a disk's
 * `initial.copy`; a searched port also matches anywhere in its range.
 */
export function deviceMatches(want: DesiredDevice, actual: Props): boolean {
  const d = normalize(want.props);
  const a = normalize(actual);
  if (d.type === "disk") {
    delete d["initial.copy"];
    delete a["initial.copy"];
  }
  if (sameProps(d, a)) return true;
  if (!want.search || d.listen === undefined || a.listen === undefined) return false;
  const dl = splitAddr(d.listen);
  const al = splitAddr(a.listen);
  if (!dl || !al || dl[0] !== al[0] || dl[1] !== al[1]) return false;
  if (al[2] < dl[2] || al[2] > dl[2] + want.search) return false;
  delete d.listen;
  delete a.listen;
  return sameProps(d, a);
}

function stringMap(m: Record<string, unknown> | undefined): Props {
  const out: Props = {};
  for (const [k, v] of Object.entries(m ?? {})) {
    out[k] = typeof v === "string" ? v : JSON.stringify(v);
  }
  return out;
}

function sorted<T>(o: Record<string, T>): [string, T][] {
  return Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Diffs desired against actual. Throws `invalid` for a missing external volume or local image. */
export function plan(desired: Desired, opts: PlanOptions = {}): SandboxPlan {
  const actions: Action[] = [];
  for (const v of desired.volumes) {
    if ((opts.volumes?.[v.pool] ?? []).includes(v.name)) continue;
    if (v.external) {
      throw invalid(`volume ${v.name} is external but does not exist in pool ${v.pool}`);
    }
    actions.push({
      action: "create_volume",
      pool: v.pool,
      volume: v.name,
      config: { ...v.config },
    });
  }
  const local = desired.image.server === null && !desired.image.local_registry;
  const found = local && opts.images ? findLocalImage(opts.images, desired.image.alias) : undefined;
  const actual = opts.actual;
  if (!actual) {
    if (local && opts.images && !found) throw missingLocalImage(desired.image.alias, opts.images);
    actions.push({
      action: "create_instance",
      image: desired.image.spec,
      pool: desired.pool,
      config: Object.fromEntries(
        sorted(desired.config).map(([k, v]) => [k, desired.sensitive.includes(k) ? REDACTED : v]),
      ),
      devices: Object.fromEntries(
        sorted(desired.devices).filter(([, d]) => !d.search).map(([k, d]) => [k, { ...d.props }]),
      ),
      profiles: [...desired.profiles],
    });
    actions.push({ action: "start_instance" });
    for (const [k, d] of sorted(desired.devices)) {
      if (d.search) {
        actions.push({ action: "add_port", device: k, props: { ...d.props }, search: d.search });
      }
    }
    for (const o of desired.owners) {
      actions.push({ action: "fix_owner", path: o.path, owner: o.owner });
    }
    return { name: desired.name, status: null, actions };
  }
  const config = stringMap(actual.config);
  const devices: Record<string, Props> = Object.fromEntries(
    Object.entries(actual.devices ?? {}).map(([k, d]) => [k, stringMap(d)]),
  );
  driftNotes(desired, actual, { config, devices, found, actions });
  for (const [k, v] of sorted(desired.config)) {
    const cur = config[k];
    if (cur === v) continue;
    const secret = desired.sensitive.includes(k);
    const a: Action = {
      action: "set_config",
      key: k,
      to: secret ? REDACTED : v,
      restart: restartNeeded(k),
    };
    if (cur !== undefined) a.from = secret ? REDACTED : cur;
    if (secret) a.secret = true;
    actions.push(a);
  }
  if (!("raw.idmap" in desired.config) && "raw.idmap" in config) {
    const why = desired.idmapMode === "auto"
      ? "not needed on this host"
      : desired.idmapMode === "none"
      ? "the spec says idmap: none"
      : undefined;
    if (why) {
      actions.push({
        action: "note",
        message: `raw.idmap is set but ${why}; isb never removes config keys, unset it by hand`,
      });
    }
  }
  const fresh: string[] = [];
  const claimed = new Set<string>();
  const deferred: string[] = [];
  for (const [name, want] of sorted(desired.devices)) {
    if (name === "root") continue;
    const have = devices[name];
    if (have) {
      claimed.add(name);
      if (deviceMatches(want, have)) continue;
      if (want.search) {
        actions.push({ action: "remove_device", device: name, props: have });
        deferred.push(name);
      } else {
        actions.push({
          action: "replace_device",
          device: name,
          replaces: name,
          from: have,
          to: { ...want.props },
        });
        fresh.push(name);
      }
      continue;
    }
    const foreign = sorted(devices).filter(([n]) => n !== "root" && !(n in desired.devices));
    const adopted = foreign.find(([, p]) => deviceMatches(want, p));
    if (adopted) {
      claimed.add(adopted[0]);
      actions.push({
        action: "note",
        message: `device ${name} already present as ${adopted[0]}; left as is`,
      });
      continue;
    }
    const wantPath = normalize(want.props).path;
    const samePath = want.props.type === "disk"
      ? foreign.find(([, p]) => p.type === "disk" && normalize(p).path === wantPath)
      : undefined;
    if (samePath) {
      claimed.add(samePath[0]);
      actions.push({
        action: "replace_device",
        device: name,
        replaces: samePath[0],
        from: samePath[1],
        to: { ...want.props },
      });
      fresh.push(name);
      continue;
    }
    if (want.search) deferred.push(name);
    else {
      actions.push({ action: "add_device", device: name, props: { ...want.props } });
      fresh.push(name);
    }
  }
  if (opts.pruneDevices) {
    for (const [name, p] of sorted(devices)) {
      if (name !== "root" && !(name in desired.devices) && !claimed.has(name)) {
        actions.push({ action: "remove_device", device: name, props: p });
      }
    }
  }
  if (actual.status.toLowerCase() !== "running") actions.push({ action: "start_instance" });
  for (const name of deferred) {
    const d = desired.devices[name]!;
    actions.push({
      action: "add_port",
      device: name,
      props: { ...d.props },
      search: d.search ?? 0,
    });
  }
  for (const o of desired.owners) {
    if (fresh.includes(o.device)) {
      actions.push({ action: "fix_owner", path: o.path, owner: o.owner });
    }
  }
  return { name: desired.name, status: actual.status, actions };
}

/** Notes for what is fixed at creation: type, root pool, profiles, the image's fingerprint. */
function driftNotes(
  desired: Desired,
  actual: Instance,
  ctx: {
    config: Props;
    devices: Record<string, Props>;
    found: Image | undefined;
    actions: Action[];
  },
): void {
  const note = (message: string) => ctx.actions.push({ action: "note", message });
  if (actual.type && actual.type !== desired.instance_type) {
    note(`type is ${actual.type} (spec: ${desired.instance_type}); fixed at creation`);
  }
  const rootPool = ctx.devices.root?.pool;
  if (rootPool !== undefined && rootPool !== desired.pool) {
    note(`root disk is on pool ${rootPool} (spec: ${desired.pool}); fixed at creation`);
  }
  const profiles = actual.profiles ?? [];
  if (profiles.join("\0") !== desired.profiles.join("\0")) {
    note(
      `profiles are [${profiles.join(", ")}] (spec: [${
        desired.profiles.join(", ")
      }]); fixed at creation`,
    );
  }
  const base = ctx.config["volatile.base_image"];
  if (ctx.found && base && ctx.found.fingerprint !== base) {
    note(
      `image ${desired.image.alias} now points to ${
        ctx.found.fingerprint.slice(0, 12)
      }; this sandbox ` +
        `was created from ${base.slice(0, 12)} and keeps it (recreate it to use the new image)`,
    );
  }
}
