/**
 * Test fixture of the plan tests: the desired state of a spec resolved on a plain btrfs
 * host, the local images, and an instance as Incus answers it.
 *
 * @module
 */

import type { Image, Instance } from "../../rpc/incus/types.ts";
import { type Desired, type HostFacts, resolve } from "../../rpc/sandbox/resolve/resolve.ts";
import { parseSpec } from "../../rpc/sandbox/spec/spec.ts";
import { testHost } from "./host_facts.ts";

/** A btrfs host whose file system has every path under `/work/`. */
export const HOST: HostFacts = testHost({
  realPath: (p) => (p.startsWith("/work/") ? p : undefined),
});

/** The local images: `debian-base` only. */
export const IMAGES: Image[] = [
  {
    fingerprint: "0a20d81b790f" + "0".repeat(52),
    aliases: [{ name: "debian-base", description: "" }],
    properties: {},
    type: "container",
  },
];

/** The desired state of sandbox `web` from `debian-base` with `spec` over it. */
export function desired(spec: Record<string, unknown>): Desired {
  return resolve(parseSpec({ container_name: "web", image: "debian-base", ...spec }), {
    host: HOST,
    baseDir: "/work/app",
  });
}

/** A running `web` as Incus answers it, with `over` replacing fields. */
export function instance(over: Partial<Instance> = {}): Instance {
  return {
    name: "web",
    type: "container",
    status: "Running",
    status_code: 103,
    architecture: "x86_64",
    config: {},
    devices: { root: { type: "disk", path: "/", pool: "default" } },
    profiles: ["default"],
    ephemeral: false,
    stateful: false,
    description: "",
    created_at: "",
    ...over,
  };
}
