/**
 * Test fixture of resolution: a plain btrfs host whose file system knows a few paths
 * (`/link` is a symlink to `/real`), and {@link run}, which resolves a spec of sandbox `web`
 * from `debian-base` against it.
 *
 * @module
 */

import type { Desired, HostFacts, ResolveOptions } from "../../rpc/sandbox/resolve/resolve.ts";
import { resolve } from "../../rpc/sandbox/resolve/resolve.ts";
import { parseSpec } from "../../rpc/sandbox/spec/spec.ts";
import { testHost } from "./host_facts.ts";

/** Paths that exist; `/link` is a symlink to `/real`. */
export const FS: Record<string, string> = {
  "/work/app/src": "/work/app/src",
  "/work/app": "/work/app",
  "/home/dev/proj": "/home/dev/proj",
  "/link": "/real",
  "/real": "/real",
};

/** The host facts, with the known paths. */
export function host(over: Partial<HostFacts> = {}): HostFacts {
  return testHost({ serverVersion: "6.0.4", realPath: (p) => FS[p], ...over });
}

/** Resolves `spec` (over sandbox `web` from `debian-base`) against {@link host}. */
export function run(spec: Record<string, unknown>, over: Partial<ResolveOptions> = {}): Desired {
  return resolve(parseSpec({ container_name: "web", image: "debian-base", ...spec }), {
    host: host(),
    baseDir: "/work/app",
    ...over,
  });
}
