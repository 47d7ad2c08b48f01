/**
 * The shape of credentials.yaml, checked by hand (proxy/config/shape.ts) rather than with
 * zod, which would stay resident in the proxy (issue 11). {@link checkFile} returns the file
 * as written (snake_case, plain strings); credentials.ts wraps every value as a secret at
 * once. Messages name the field, never the value. Pure.
 *
 * @module
 */

import { parseDuration } from "../../rpc/base.ts";
import {
  bad,
  integer,
  list,
  mapping,
  optional,
  type Path,
  strictMapping,
  string,
} from "./shape.ts";

/** A command printing a value, as written (`ttl` parsed to ms). */
export interface CommandRaw {
  command: string[];
  ttl_ms?: number | undefined;
}
/** A credential value as written: the value itself, or the command that prints it. */
export type ValueRaw = string | CommandRaw;

/** An Anthropic account as written. */
export type AnthropicRaw =
  | { api_key: ValueRaw }
  | { oauth_token: ValueRaw }
  | {
    vertex: {
      project: string;
      region: string;
      token_command?: string[] | undefined;
      token_ttl_seconds?: number | undefined;
    };
  };
/** A custom rule as written. */
export type CustomRaw =
  | { domain: string; header: string; value: ValueRaw }
  | { domain: string; bearer: ValueRaw }
  | { domain: string; basic: { user: string; password: ValueRaw } };
/** A provider namespace as written. */
export interface NsRaw<A> {
  default?: string | undefined;
  accounts: Record<string, A>;
}
/** The file as written. */
export interface FileRaw {
  anthropic?: NsRaw<AnthropicRaw> | undefined;
  openai?: NsRaw<{ api_key: ValueRaw }> | undefined;
  github?: NsRaw<{ token: ValueRaw }> | undefined;
  custom?: CustomRaw[] | undefined;
}

/** The longest `ttl` a command's value may be used for. */
const MAX_TTL_MS = 24 * 3600_000;

/** A duration at least 1 s and at most a day (`30s`, `55m`, `2h`, or seconds as a number). */
function ttl(v: unknown, p: Path): number {
  if (typeof v === "string" || typeof v === "number") {
    try {
      const ms = parseDuration(v);
      if (ms >= 1000 && ms <= MAX_TTL_MS) return ms;
    } catch { /* reported below */ }
  }
  return bad(p, "expected a duration from 1s to 24h, like 55m");
}

/** A value, or `{ command: [argv…], ttl }` printing it (the argv runs without a shell). */
export function value(v: unknown, p: Path): ValueRaw {
  if (typeof v === "object" && v !== null && !Array.isArray(v)) {
    const o = strictMapping(v, p, ["command", "ttl"]);
    return {
      command: list(o.command, [...p, "command"], (a, r) => string(a, r, { min: 1 }), 1),
      ttl_ms: optional(o.ttl, (t) => ttl(t, [...p, "ttl"])),
    };
  }
  return string(v, p, { min: 1, what: "a value or { command: [program, args…] }" });
}

/** One provider namespace: `default` and `accounts`, each account checked by `account`. */
function ns<A>(v: unknown, p: Path, account: (v: unknown, p: Path) => A): NsRaw<A> | undefined {
  if (v === undefined) return undefined;
  const o = strictMapping(v, p, ["default", "accounts"]);
  const accounts: Record<string, A> = {};
  for (const [name, a] of Object.entries(mapping(o.accounts, [...p, "accounts"]))) {
    Object.defineProperty(accounts, name, {
      value: account(a, [...p, "accounts", name]),
      enumerable: true,
    });
  }
  return { default: optional(o.default, (d) => string(d, [...p, "default"])), accounts };
}

/** The one field of a one-of mapping, among `keys`. */
function oneOf(v: unknown, p: Path, keys: readonly string[], also: string[] = []): string {
  const o = mapping(v, p);
  const found = keys.filter((k) => k in o);
  if (found.length !== 1) bad(p, `expected exactly one of ${keys.join(", ")}`);
  strictMapping(o, p, [...also, found[0]!]);
  return found[0]!;
}

function anthropicAccount(v: unknown, p: Path): AnthropicRaw {
  const k = oneOf(v, p, ["api_key", "oauth_token", "vertex"]);
  const o = v as Record<string, unknown>;
  if (k === "api_key") return { api_key: value(o.api_key, [...p, k]) };
  if (k === "oauth_token") return { oauth_token: value(o.oauth_token, [...p, k]) };
  const q = [...p, "vertex"];
  const x = strictMapping(o.vertex, q, ["project", "region", "token_command", "token_ttl_seconds"]);
  return {
    vertex: {
      project: string(x.project, [...q, "project"], {
        re: /^[a-z][a-z0-9-]{3,61}[a-z0-9]$/,
        what: "a Google Cloud project id",
      }),
      region: string(x.region, [...q, "region"], {
        re: /^[a-z][a-z0-9-]{1,40}$/,
        what: "a region like us-east5",
      }),
      token_command: optional(
        x.token_command,
        (c) => list(c, [...q, "token_command"], (a, r) => string(a, r, { min: 1 }), 1),
      ),
      token_ttl_seconds: optional(
        x.token_ttl_seconds,
        (t) => integer(t, [...q, "token_ttl_seconds"], 1, 86_400),
      ),
    },
  };
}

function customRule(v: unknown, p: Path): CustomRaw {
  const k = oneOf(v, p, ["header", "bearer", "basic"], ["domain", "value"]);
  const o = v as Record<string, unknown>;
  const domain = string(o.domain, [...p, "domain"], { min: 1 });
  if (k === "header") {
    return {
      domain,
      header: string(o.header, [...p, k], { min: 1 }),
      value: value(o.value, [...p, "value"]),
    };
  }
  if ("value" in o) bad([...p, "value"], "unknown field (only a header rule has a value)");
  if (k === "bearer") return { domain, bearer: value(o.bearer, [...p, k]) };
  const b = strictMapping(o.basic, [...p, k], ["user", "password"]);
  return {
    domain,
    basic: {
      user: string(b.user, [...p, k, "user"]),
      password: value(b.password, [...p, k, "password"]),
    },
  };
}

/** The file's shape (null: no document); throws `IsbError("invalid", "<path>: …")`. */
export function checkFile(raw: unknown): FileRaw {
  if (raw === null) return {};
  const f = strictMapping(raw, [], ["anthropic", "openai", "github", "custom"]);
  return {
    anthropic: ns(f.anthropic, ["anthropic"], anthropicAccount),
    openai: ns(f.openai, ["openai"], (v, p) => {
      strictMapping(v, p, ["api_key"]);
      return { api_key: value((v as Record<string, unknown>).api_key, [...p, "api_key"]) };
    }),
    github: ns(f.github, ["github"], (v, p) => {
      strictMapping(v, p, ["token"]);
      return { token: value((v as Record<string, unknown>).token, [...p, "token"]) };
    }),
    custom: optional(f.custom, (c) => list(c, ["custom"], customRule)),
  };
}
