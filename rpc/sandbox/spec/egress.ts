/**
 * The `egress:` field (isb-rpc.md §13): its three written forms, read into the validated
 * policy they mean (`egress_policy.ts`, re-exported here). Validation needs no instance: the placeholders, which depend on the sandbox's
 * egress bridge, are added later by `egress.ts` through the `placeholder` callback, so a
 * spec can be checked (and a compose file loaded) before anything is known about where it
 * will run.
 *
 * @module
 */

import * as z from "zod";
import { type Ctx, fail, poly, sub } from "./scalars.ts";
import { egressPolicy, type EgressSecretSpec, type EgressSpec } from "./egress_policy.ts";

// the policy, here too for the spec's readers (its home is egress_policy.ts)
export * from "./egress_policy.ts";

const SecretFull = z.strictObject({
  env: z.string().describe("The environment variable the guest sees (a placeholder)"),
  secret: z.string().optional().describe("The secret's store name (default: env)"),
  hosts: z.array(z.string()).describe("Hosts the real value may be sent to: host[:port]"),
});

/** Parses `ENV[=SECRET]@host1,host2`; a message on error. */
export function parseSecretShort(s: string): EgressSecretSpec | string {
  const at = s.indexOf("@");
  if (at < 0) {
    return `egress secret ${JSON.stringify(s)}: expected NAME@host1,host2 ` +
      "(the hosts it may be sent to)";
  }
  const head = s.slice(0, at);
  const eq = head.indexOf("=");
  const out: EgressSecretSpec = {
    env: eq < 0 ? head : head.slice(0, eq),
    hosts: s.slice(at + 1).split(",").map((h) => h.trim()),
  };
  if (eq >= 0) out.secret = head.slice(eq + 1);
  return out;
}

function parseEgress(v: unknown, ctx: Ctx): EgressSpec {
  let spec: EgressSpec;
  if (typeof v === "string") {
    if (v.toLowerCase() !== "none") {
      return fail(
        ctx,
        `egress: ${JSON.stringify(v)} is not \`none\`, a list of host[:port] or an object ` +
          "with allow/secrets",
      );
    }
    spec = "none";
  } else if (Array.isArray(v)) {
    spec = sub(z.array(z.string()), v, ctx) ?? z.NEVER;
  } else {
    const o = sub(
      z.strictObject({
        allow: z.array(z.string()).optional(),
        secrets: z.array(z.unknown()).optional(),
      }),
      v,
      ctx,
    );
    if (!o) return z.NEVER;
    const secrets: EgressSecretSpec[] = [];
    for (const [i, s] of (o.secrets ?? []).entries()) {
      if (typeof s === "string") {
        const p = parseSecretShort(s);
        if (typeof p === "string") return fail(ctx, p, ["secrets", i]);
        secrets.push(p);
      } else {
        const f = sub(SecretFull, s, ctx, ["secrets", i]);
        if (!f) return z.NEVER;
        secrets.push(
          f.secret === undefined
            ? { env: f.env, hosts: f.hosts }
            : { env: f.env, secret: f.secret, hosts: f.hosts },
        );
      }
    }
    spec = secrets.length === 0 ? o.allow ?? [] : { allow: o.allow ?? [], secrets };
  }
  try {
    egressPolicy(spec);
  } catch (e) {
    return fail(ctx, (e as Error).message);
  }
  return spec;
}

/** `egress:` in any written form, validated (§13) and normalised. */
export const Egress = poly(
  z.union([
    z.literal("none").describe("No network at all"),
    z.array(z.string()).describe("Hosts the sandbox may reach: host[:port] (443 by default)"),
    z.strictObject({
      allow: z.array(z.string()).optional(),
      secrets: z.array(z.union([z.string().describe("ENV[=SECRET]@host1,host2"), SecretFull]))
        .optional(),
    }),
  ]).describe("Which hostnames the sandbox may reach, and secrets that never enter it"),
  parseEgress,
);
