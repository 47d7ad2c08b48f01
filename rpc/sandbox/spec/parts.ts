/**
 * The smaller pieces of a service spec (isb-rpc.md §7): readiness checks, idmap, exec
 * defaults and environment. Each parses to the form it is serialised in.
 *
 * @module
 */

import * as z from "zod";
import { Bool, Command, Count, fail, mapOrList, poly, Scalar, sub } from "./scalars.ts";

/** A readiness check (§7.3). */
export type ReadyCheck =
  | "running"
  | "agent"
  | "default_route"
  | { user_exists: string }
  | { path_writable: string }
  | { command: string[] };

const READY_NAMES = ["running", "agent", "default_route"] as const;
const READY_HINT = "running, agent, default_route, user_exists, path_writable, command";

/** One readiness check in its written form. */
export const Ready = poly(
  z.union([
    z.enum(READY_NAMES),
    z.strictObject({ user_exists: z.string() }),
    z.strictObject({ path_writable: z.string() }),
    z.strictObject({ command: z.array(z.union([z.string(), z.number(), z.boolean()])) }),
  ]),
  (v, ctx): ReadyCheck => {
    if (typeof v === "string") {
      if ((READY_NAMES as readonly string[]).includes(v)) return v as ReadyCheck;
      return fail(ctx, `unknown readiness check ${JSON.stringify(v)} (${READY_HINT})`);
    }
    if (v && typeof v === "object" && !Array.isArray(v)) {
      if ("user_exists" in v) {
        return sub(z.strictObject({ user_exists: z.string() }), v, ctx) ?? z.NEVER;
      }
      if ("path_writable" in v) {
        return sub(z.strictObject({ path_writable: z.string() }), v, ctx) ?? z.NEVER;
      }
      if ("command" in v) {
        return sub(z.strictObject({ command: z.array(Scalar) }), v, ctx) ?? z.NEVER;
      }
    }
    return fail(
      ctx,
      "expected running, agent, default_route, {user_exists: USER}, {path_writable: PATH} or " +
        "{command: [ARGV...]}",
    );
  },
);

/** An idmap mode. */
export type IdmapMode = "auto" | "none" | "always";
/** `idmap:` normalised: a mode, explicit ids (defaults filled), or a raw value. */
export type IdmapSpec =
  | IdmapMode
  | { mode: IdmapMode; host_uid: number; host_gid: number; guest_uid: number; guest_gid: number }
  | { raw: string };

const IdmapMap = z.strictObject({
  mode: z.enum(["auto", "none", "always"]).optional(),
  host_uid: Count.optional(),
  host_gid: Count.optional(),
  guest_uid: Count.optional(),
  guest_gid: Count.optional(),
});

/** `idmap:` in any of its forms. */
export const Idmap = poly(
  z.union([z.enum(["auto", "none", "always"]), IdmapMap, z.strictObject({ raw: z.string() })]),
  (v, ctx): IdmapSpec => {
    if (typeof v === "string") {
      if (v === "auto" || v === "none" || v === "always") return v;
      return fail(ctx, `unknown idmap ${JSON.stringify(v)} (auto, none, always, {raw: …})`);
    }
    if (v && typeof v === "object" && "raw" in v) {
      return sub(z.strictObject({ raw: z.string() }), v, ctx) ?? z.NEVER;
    }
    const m = sub(IdmapMap, v, ctx);
    if (!m) return z.NEVER;
    return {
      mode: m.mode ?? "auto",
      host_uid: m.host_uid ?? 1000,
      host_gid: m.host_gid ?? 1000,
      guest_uid: m.guest_uid ?? 1000,
      guest_gid: m.guest_gid ?? 1000,
    };
  },
);

/** A bare `KEY` in an environment list of a bare spec has nothing to take a value from. */
export function noBareEnv(key: string): { error: string } {
  return {
    error: `environment entry ${JSON.stringify(key)} has no value: write ${key}=VALUE`,
  };
}

/** The `exec:` block of a service (`exec.user`/`exec.cwd` point to the service fields). */
export const ExecSpec = poly(
  z.strictObject({
    env: z.union([
      z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
      z.array(z.string()),
    ]).optional().describe("Environment for exec only"),
    login: z.union([z.boolean(), z.string()]).optional().describe("Run through a login shell"),
  }),
  (v, ctx): { env?: Record<string, string>; login?: true } => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      for (const [k, to] of [["user", "user"], ["cwd", "working_dir"]]) {
        if (k! in v) return fail(ctx, `\`exec.${k}\` is not an isb key: use ${to} on the service`);
      }
    }
    const e = sub(
      z.strictObject({
        env: mapOrList("environment", noBareEnv).optional(),
        login: Bool.optional(),
      }),
      v,
      ctx,
    );
    if (!e) return z.NEVER;
    const out: { env?: Record<string, string>; login?: true } = {};
    if (e.env && Object.keys(e.env).length > 0) out.env = e.env;
    if (e.login) out.login = true;
    return out;
  },
);

export { type ExecDefaults, ExecDefaultsSchema } from "./exec_defaults.ts";

/** An environment value: a scalar, or a top-level secret delivered as the variable. */
export type EnvValue = string | { secret: string };

const EnvDoc = z.union([
  z.record(
    z.string(),
    z.union([z.string(), z.number(), z.boolean(), z.strictObject({ secret: z.string() })]),
  ),
  z.array(z.string()),
]);

/** `environment:` as a map (values may be `{secret: NAME}`) or a `KEY=VALUE` list. */
export function environment(
  bare: (key: string) => string | { error: string } = noBareEnv,
): z.ZodType<Record<string, EnvValue>, unknown> {
  const list = mapOrList("environment", bare);
  return poly(EnvDoc, (v, ctx) => {
    if (Array.isArray(v)) return sub(list, v, ctx) ?? z.NEVER;
    if (v === null || typeof v !== "object") return fail(ctx, "expected a map or a list");
    const out: Record<string, EnvValue> = {};
    for (const [k, val] of Object.entries(v)) {
      if (val && typeof val === "object" && !Array.isArray(val)) {
        const s = sub(z.strictObject({ secret: z.string() }), val, ctx, [k]);
        if (!s) return z.NEVER;
        if (s.secret === "") {
          return fail(ctx, `environment ${k}: secret needs a top-level secret's name`, [k]);
        }
        out[k] = s;
      } else {
        const s = sub(Scalar, val, ctx, [k]);
        if (s === undefined) return z.NEVER;
        out[k] = s;
      }
    }
    return out;
  });
}

export { Command };

// Kept here too for modules that imported it before service.ts was split off.
export { secretFileMode } from "./service.ts";
