/**
 * The long-running-service parts of a spec (isb-rpc.md §7): `restart`, `healthcheck`,
 * `depends_on`, `deploy`, `domains` and secret references. Only compose uses them; each
 * parses to the form it is serialised in.
 *
 * @module
 */

import * as z from "zod";
import {
  Bool,
  Count,
  type Ctx,
  fail,
  IntOrString,
  mapOrList,
  poly,
  Scalar,
  scalarString,
  sub,
} from "./scalars.ts";

/** docker's `restart:` (YAML 1.1 habits: `no`/`false`/"" mean no). */
export const Restart = z.union([z.string(), z.boolean()]).transform((v, ctx) => {
  const s = scalarString(v);
  if (s === "no" || s === "false" || s === "") return "no" as const;
  if (s === "always" || s === "on-failure" || s === "unless-stopped") return s;
  return fail(ctx, `unknown restart ${JSON.stringify(s)} (no, always, on-failure, unless-stopped)`);
});

/** docker compose's `healthcheck:`; `test` normalised to an argv (`CMD-SHELL` for a string). */
export const Healthcheck = z.strictObject({
  test: poly(
    z.union([z.string(), z.array(z.union([z.string(), z.number(), z.boolean()]))]),
    (v, ctx): string[] =>
      typeof v === "string" ? ["CMD-SHELL", v] : sub(z.array(Scalar), v, ctx) ?? z.NEVER,
  ).optional(),
  interval: IntOrString.optional(),
  timeout: IntOrString.optional(),
  retries: Count.optional(),
  start_period: IntOrString.optional(),
  start_interval: IntOrString.optional(),
  disable: Bool.optional().transform((b) => b || undefined),
});

/** A parsed `healthcheck:`; durations stay as written (strings), `disable` only when true. */
export interface HealthcheckSpec {
  /** The probe: `["CMD", argv…]`, `["CMD-SHELL", line]` or `["NONE"]`. */
  test?: string[];
  /** Time between probes (docker's default 30s). */
  interval?: string;
  /** How long one probe may run (default 30s). */
  timeout?: string;
  /** Consecutive failures before the service counts as unhealthy (default 3). */
  retries?: number;
  /** Grace time after start during which failures do not count (default 0s). */
  start_period?: string;
  /** Time between probes during the start period (default 5s). */
  start_interval?: string;
  /** Turns the healthcheck off. */
  disable?: true;
}

/** A parsed `deploy.update_config` / `deploy.rollback_config` (accepted, not acted on). */
export interface UpdateConfigSpec {
  /** How many replicas change at once. */
  parallelism?: number;
  /** Wait between batches. */
  delay?: string;
  /** What to do when a batch fails. */
  failure_action?: "pause" | "rollback" | "continue";
  /** How long to watch a batch for failure. */
  monitor?: string;
  /** Whether the old replica stops before or after the new one starts. */
  order?: "stop-first" | "start-first";
}

/** A parsed `deploy:`; `isb up` acts only on `resources.limits`, folded into cpus/mem_limit. */
export interface DeploySpec {
  /** Swarm mode; only `replicated` is accepted by validation. */
  mode?: string;
  /** Replica count; more than one is refused by `compose.up`. */
  replicas?: number;
  /** How updates roll out. */
  update_config?: UpdateConfigSpec;
  /** How rollbacks roll out. */
  rollback_config?: UpdateConfigSpec;
  /** docker's restart policy, accepted for compatibility. */
  restart_policy?: {
    condition?: "none" | "on-failure" | "any";
    delay?: string;
    max_attempts?: number;
    window?: string;
  };
  /** Resource limits (`cpus`, `memory`), kept as written. */
  resources?: { limits?: { cpus?: string; memory?: string } };
  /** Service labels, normalised to a map. */
  labels?: Record<string, string>;
}

/** A parsed `domains:` entry: a public hostname routed to the service (stacks only). */
export interface DomainSpec {
  /** The public hostname. */
  host: string;
  /** The URL path prefix routed to the service. */
  path?: string;
  /** The service port traffic goes to. */
  port?: number;
  /** Whether the host is served over HTTPS. */
  https?: boolean;
  /** A URL to redirect to instead of proxying. */
  redirect?: string;
  /** Whether `path` is removed before forwarding. */
  strip_prefix?: boolean;
  /** Whether `www.<host>` redirects to the host. */
  www_redirect?: boolean;
}

/** What a dependency must reach before its dependents start. */
export interface Dependency {
  /** Started (`service_started`, the default) or passing its healthcheck (`service_healthy`). */
  condition: "service_started" | "service_healthy";
}

const DependencySchema = z.strictObject({
  condition: z.enum(["service_started", "service_healthy"]).optional(),
});

/** `depends_on:` as a list or a map, normalised to a map. */
export const DependsOn = poly(
  z.union([z.array(z.string()), z.record(z.string(), DependencySchema)]),
  (v, ctx): Record<string, Dependency> => {
    if (Array.isArray(v)) {
      const l = sub(z.array(z.string()), v, ctx);
      if (!l) return z.NEVER;
      return Object.fromEntries(l.map((s) => [s, { condition: "service_started" as const }]));
    }
    const m = sub(z.record(z.string(), DependencySchema.nullable()), v, ctx);
    if (!m) return z.NEVER;
    return Object.fromEntries(
      Object.entries(m).map(([k, d]) => [k, { condition: d?.condition ?? "service_started" }]),
    );
  },
);

const UpdateConfig = z.strictObject({
  parallelism: Count.optional(),
  delay: IntOrString.optional(),
  failure_action: z.enum(["pause", "rollback", "continue"]).optional(),
  monitor: IntOrString.optional(),
  order: z.enum(["stop-first", "start-first"]).optional(),
});

/** docker's `deploy:`. */
export const Deploy = z.strictObject({
  mode: z.string().optional(),
  replicas: Count.optional(),
  update_config: UpdateConfig.optional(),
  rollback_config: UpdateConfig.optional(),
  restart_policy: z.strictObject({
    condition: z.enum(["none", "on-failure", "any"]).optional(),
    delay: IntOrString.optional(),
    max_attempts: Count.optional(),
    window: IntOrString.optional(),
  }).optional(),
  resources: z.strictObject({
    limits: z.strictObject({ cpus: IntOrString.optional(), memory: IntOrString.optional() })
      .optional(),
  }).optional(),
  labels: mapOrList("labels", () => "").optional(),
});

/** A public hostname the ingress routes to (stacks only; ignored here). */
export const Domain = z.strictObject({
  host: z.string(),
  path: z.string().optional(),
  port: Count.optional(),
  https: Bool.optional(),
  redirect: z.string().optional(),
  strip_prefix: Bool.optional(),
  www_redirect: Bool.optional(),
});

/** A service's use of a top-level secret. */
export interface SecretRef {
  /** The top-level secret's key. */
  source: string;
  /** The file name under `/run/secrets/` (default: `source`). */
  target?: string;
  /** The file's owner uid. */
  uid?: number;
  /** The file's owner gid. */
  gid?: number;
  /** The file's octal mode as written (default 0400). */
  mode?: string;
}

const SecretRefLong = z.strictObject({
  source: z.string(),
  target: z.string().optional(),
  uid: Count.optional(),
  gid: Count.optional(),
  mode: IntOrString.optional(),
});

/** A secret name, or `{source, target, uid, gid, mode}`. */
export const SecretRefSchema = poly(
  z.union([z.string(), SecretRefLong]),
  (v, ctx: Ctx): SecretRef => {
    if (typeof v === "string") return { source: v };
    const r = sub(SecretRefLong, v, ctx);
    if (!r) return z.NEVER;
    const out: SecretRef = { source: r.source };
    if (r.target !== undefined) out.target = r.target;
    if (r.uid !== undefined) out.uid = r.uid;
    if (r.gid !== undefined) out.gid = r.gid;
    if (r.mode !== undefined) out.mode = r.mode;
    return out;
  },
);

/** The octal file mode of a secret reference (default 0400); a message on error. */
export function secretFileMode(ref: SecretRef): number | string {
  if (ref.mode === undefined) return 0o400;
  const m = ref.mode.trim().replace(/^0o/, "");
  const n = /^[0-7]+$/.test(m) ? parseInt(m, 8) : NaN;
  return n <= 0o7777 ? n : `secret mode ${JSON.stringify(ref.mode)} is not an octal mode like 0400`;
}
