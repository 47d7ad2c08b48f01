/**
 * Merging compose files the way docker compose does (isb-rpc.md §12.2): mappings merge key
 * by key, recursively; scalars and lists are replaced; except a service's `ports`, which are
 * appended (an identical entry once), and its `volumes`, which merge by target (trailing `/`
 * ignored; a later mount replaces an earlier one at the same target). Works on the plain
 * trees YAML parsing gives; pure, and it never mutates its inputs.
 *
 * @module
 */

type Tree = Record<string, unknown>;

function isMap(v: unknown): v is Tree {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  }
  if (isMap(a) && isMap(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && equal(a[k], b[k]));
  }
  return false;
}

/** `b` over `a`: mappings merge key by key, anything else is replaced. */
export function deepMerge(a: unknown, b: unknown): unknown {
  if (!isMap(a) || !isMap(b)) return b;
  const out: Tree = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in out ? deepMerge(out[k], v) : v;
  return out;
}

/** The guest path of a mount in either syntax, trailing `/` ignored. */
export function mountTarget(m: unknown): string | undefined {
  let t: unknown;
  if (typeof m === "string") t = m.split(":")[1];
  else if (isMap(m)) t = m.target;
  return typeof t === "string" ? t.replace(/\/+$/, "") : undefined;
}

/** One service over another: `ports` appended, `volumes` by target, the rest deep-merged. */
export function mergeService(a: unknown, b: unknown): unknown {
  if (!isMap(a) || !isMap(b)) return deepMerge(a, b);
  const out: Tree = { ...a };
  for (const [k, bv] of Object.entries(b)) {
    const av = out[k];
    if (k === "ports" && Array.isArray(av) && Array.isArray(bv)) {
      const ports = [...av];
      for (const p of bv) if (!ports.some((x) => equal(x, p))) ports.push(p);
      out[k] = ports;
    } else if (k === "volumes" && Array.isArray(av) && Array.isArray(bv)) {
      const vols = [...av];
      for (const m of bv) {
        const t = mountTarget(m);
        const at = t === undefined ? -1 : vols.findIndex((x) => mountTarget(x) === t);
        if (at >= 0) vols[at] = m;
        else vols.push(m);
      }
      out[k] = vols;
    } else {
      out[k] = k in out ? deepMerge(av, bv) : bv;
    }
  }
  return out;
}

/** A whole file over the files before it. */
export function mergeFiles(merged: Tree, next: Tree): Tree {
  const out: Tree = { ...merged };
  for (const [k, bv] of Object.entries(next)) {
    const av = out[k];
    if (k === "services" && isMap(av) && isMap(bv)) {
      const services: Tree = { ...av };
      for (const [name, svc] of Object.entries(bv)) {
        services[name] = name in services ? mergeService(services[name], svc) : svc;
      }
      out[k] = services;
    } else {
      out[k] = k in out ? deepMerge(av, bv) : bv;
    }
  }
  return out;
}
