/**
 * Every method of the protocol (the 29 of shared/spec/isb-rpc.md §17.6), by group. The server
 * imports this module after its hello line (`rpc/server/mod.ts`); it holds no schema itself.
 * Each group's module (its handlers and the zod schemas of their params) is imported on the
 * first call of any of its methods, so a request waits for its own group only: `version` for
 * none (it is `general.ts`'s, which builds no schema), `sandbox.list` for the seven methods of
 * `sandbox.ts`, not for the spec's schemas or the exec group's. `rpc/server/mod_test.ts` checks
 * each group's list against its module's table.
 *
 * @module
 */

import { engineFree, type Handler } from "../dispatch.ts";
import { generalMethods } from "./general.ts";

/** A group's handlers by method name. */
// deno-lint-ignore no-explicit-any -- each group types its own engine (the sandbox Engine)
export type MethodTable = Record<string, Handler<any>>;

/** A group of methods: their names, and the import of the module that handles them. */
export interface MethodGroup {
  /** The methods the group's table holds. */
  readonly methods: readonly string[];
  /**
   * Those of them whose handler is engine-free (`exec.*` on an id: §14, they need no incus),
   * so the server knows it before the group is loaded. mod_test.ts checks it against the table.
   */
  readonly engineFree?: readonly string[];
  /** Imports the group's module; its table. */
  load(): Promise<MethodTable>;
}

/** The groups loaded on first call, by module. */
export const GROUPS: Readonly<Record<string, MethodGroup>> = {
  sandbox: {
    methods: ["get", "list", "remove", "start", "stop", "restart", "remove_device"]
      .map((m) => `sandbox.${m}`),
    load: () => import("./sandbox.ts").then((m) => m.sandboxMethods),
  },
  // the spec's schemas, the most of them: only the methods whose params hold a spec
  sandbox_spec: {
    methods: ["create", "ensure", "plan", "resolve", "wait_ready", "add_port"]
      .map((m) => `sandbox.${m}`),
    load: () => import("./sandbox_spec.ts").then((m) => m.sandboxSpecMethods),
  },
  exec: {
    methods: ["sandbox.exec", "exec.write", "exec.close_stdin", "exec.signal", "exec.resize"],
    engineFree: ["exec.write", "exec.close_stdin", "exec.signal", "exec.resize"],
    load: () => import("./exec.ts").then((m) => m.execMethods),
  },
  volume: {
    methods: ["volume.list", "volume.get", "volume.create", "volume.remove", "prune"],
    load: () => import("./volume.ts").then((m) => m.volumeMethods),
  },
  compose: {
    methods: ["load", "up", "plan", "down"].map((m) => `compose.${m}`),
    load: () => import("./compose.ts").then((m) => m.composeMethods),
  },
};

/** A handler that imports `group` on its first call, then runs `name`'s handler. */
function onFirstCall(
  group: MethodGroup,
  loaded: { table?: Promise<MethodTable> },
  name: string,
): MethodTable[string] {
  const run: MethodTable[string] = async (raw, ctx) => {
    loaded.table ??= group.load();
    return (await loaded.table)[name]!(raw, ctx);
  };
  return group.engineFree?.includes(name) ? engineFree(run) : run;
}

/** Every method of the protocol: `version` and `schema`, and each group's, loaded on first call. */
// deno-lint-ignore no-explicit-any -- each group types its own engine (the sandbox Engine)
export const METHODS: Readonly<Record<string, Handler<any>>> = Object.freeze({
  ...generalMethods,
  ...Object.fromEntries(
    Object.values(GROUPS).flatMap((g) => {
      const loaded: { table?: Promise<MethodTable> } = {};
      return g.methods.map((m) => [m, onFirstCall(g, loaded, m)]);
    }),
  ),
});
