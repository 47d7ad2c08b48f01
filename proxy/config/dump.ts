/**
 * `isx proxy dump`: what the running proxy holds, as it holds it (the files may have
 * changed since start; `/health` says so). Every credential shows only its kind and
 * length, so the dump can be pasted into a bug report. Pure.
 *
 * @module
 */

import type { Accounts, Credentials, CustomRule, Value, VertexConfig } from "./credentials.ts";
import { Secret } from "./secret.ts";

/** One credential as the dump shows it. */
export type DumpedAccount =
  | {
    /** api_key, oauth or token. */
    kind: string;
    /** The value's length: never the value. */
    length: number;
  }
  | {
    /** api_key, oauth or token, printed by a command. */
    kind: string;
    /** The command's program (its arguments are not shown) and ttl in seconds. */
    command: string;
    ttl_seconds: number;
  }
  | {
    /** vertex: no secret in the file, a command that prints a token. */
    kind: "vertex";
    /** The Google Cloud project and region, and the token command's program. */
    project: string;
    region: string;
    token_command: string;
  };

type Account = { kind: string; value: Value } | { kind: "vertex"; vertex: VertexConfig };

/** A value as the dump shows it: its length, or its command's program and ttl. */
function shown(v: Value): { length: number } | { command: string; ttl_seconds: number } {
  return v instanceof Secret
    ? { length: v.length }
    : { command: v.argv[0] ?? "", ttl_seconds: v.ttlMs / 1000 };
}

function accounts<A extends Account>(a: Accounts<A>) {
  const out: Record<string, DumpedAccount> = {};
  for (const [name, acc] of a.accounts) {
    out[name] = "value" in acc ? { kind: acc.kind, ...shown(acc.value) } : {
      kind: "vertex",
      project: acc.vertex.project,
      region: acc.vertex.region,
      token_command: acc.vertex.tokenCommand[0] ?? "",
    };
  }
  return { default: a.default ?? null, accounts: out };
}

function custom(r: CustomRule) {
  const base = { domain: r.domain, kind: r.kind, ...shown(r.value) };
  if (r.kind === "header") return { ...base, header: r.header };
  if (r.kind === "basic") return { ...base, user: r.user };
  return base;
}

/** The credentials as the dump shows them: names, kinds and lengths. */
export function dumpCredentials(c: Credentials): Record<string, unknown> {
  return {
    anthropic: accounts(c.anthropic),
    openai: accounts(c.openai),
    github: accounts(c.github),
    custom: c.custom.map(custom),
  };
}
