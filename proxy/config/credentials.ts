/**
 * The one host file that holds real credentials: `~/.config/isx/credentials.yaml`.
 *
 * It must be mode 0600 (or stricter); a file readable by group or others is refused, not
 * used. Accounts are grouped per provider namespace (`anthropic`, `openai`, `github`) with
 * an optional `default`; `custom` holds header rules per domain for other services. Every
 * value is wrapped in a {@link Secret} as soon as it is parsed, so nothing downstream can
 * print one by accident. A missing file, an empty one and the all-comments skeleton `isx init`
 * writes all mean "no credentials yet": the proxy still runs, counts, and says which
 * namespaces have none ({@link missingNamespaces}).
 *
 * ```yaml
 * anthropic:
 *   default: personal
 *   accounts:
 *     personal: { api_key: sk-ant-api03-… }
 *     work: { oauth_token: sk-ant-oat01-… }
 *     gcp:                      # Vertex AI: the token comes from a command, never the file
 *       vertex: { project: my-proj, region: us-east5, token_command: [gcloud, auth, print-access-token] }
 * openai:
 *   accounts: { main: { api_key: sk-proj-… } }
 * github:
 *   accounts:
 *     me: { token: { command: [gh, auth, token], ttl: 55m } }   # any value may be a command
 * custom:
 *   - { domain: api.example.com, header: X-Api-Key, value: … }
 *   - { domain: "*.example.org", bearer: … }
 *   - { domain: git.example.net, basic: { user: bob, password: … } }
 * ```
 *
 * @module
 */

import { IsbError, parseYaml } from "../../rpc/base.ts";
import { Secret } from "./secret.ts";
import { checkFile, type FileRaw, type ValueRaw } from "./_credentials_shape.ts";
import {
  type CommandRef,
  DEFAULT_COMMAND_TTL_MS,
  isCommand,
  type Value,
} from "./command_source.ts";

export type { CommandRef, Value } from "./command_source.ts";

/** Where Vertex AI calls go and how the proxy gets an access token for them. */
export interface VertexConfig {
  /** The Google Cloud project id. */
  project: string;
  /** The region (`us-east5`, `europe-west1`, `global`, …). */
  region: string;
  /** The command printing an access token (run without a shell). */
  tokenCommand: string[];
  /** How long a token is reused (ms). */
  tokenTtlMs: number;
}

/** An Anthropic account: an API key, an OAuth token, or Vertex AI. */
export type AnthropicAccount =
  | { kind: "api_key" | "oauth"; value: Value }
  | { kind: "vertex"; vertex: VertexConfig };

/** The Claude auth mode of an account (what an instance is built for). */
export type ClaudeAuthMode = AnthropicAccount["kind"];

/** The default command for a Vertex access token. */
export const DEFAULT_TOKEN_COMMAND: readonly string[] = ["gcloud", "auth", "print-access-token"];
/** The default reuse time of a Vertex token (gcloud's tokens last an hour). */
export const DEFAULT_TOKEN_TTL_MS = 45 * 60_000;
/** A credential that is one bearer-style value (OpenAI key, GitHub token). */
export type TokenAccount = { kind: "token"; value: Value };

/** Accounts of one provider namespace. */
export interface Accounts<A> {
  /** Name of the default account (else the only/first one). */
  default: string | undefined;
  /** Accounts by name. */
  accounts: Map<string, A>;
}

/** A custom header rule for a domain (exact, or `*.suffix` for subdomains). */
export type CustomRule =
  | { domain: string; kind: "header"; header: string; value: Value }
  | { domain: string; kind: "bearer"; value: Value }
  | { domain: string; kind: "basic"; user: string; value: Value };

/** Everything in the credentials file. */
export interface Credentials {
  /** Anthropic accounts. */
  anthropic: Accounts<AnthropicAccount>;
  /** OpenAI accounts. */
  openai: Accounts<TokenAccount>;
  /** GitHub accounts. */
  github: Accounts<TokenAccount>;
  /** Header rules for other domains. */
  custom: CustomRule[];
}

/** No credentials at all. */
export function emptyCredentials(): Credentials {
  const none = () => ({ default: undefined, accounts: new Map() });
  return { anthropic: none(), openai: none(), github: none(), custom: [] };
}

function accounts<I, A>(
  where: string,
  raw: { default?: string | undefined; accounts: Record<string, I> } | undefined,
  wrap: (i: I) => A,
): Accounts<A> {
  const map = new Map<string, A>();
  for (const [name, a] of Object.entries(raw?.accounts ?? {})) map.set(name, wrap(a));
  const def = raw?.default;
  if (def !== undefined && !map.has(def)) {
    throw new IsbError("invalid", `read credentials: ${where}.default "${def}" names no account`);
  }
  return { default: def, accounts: map };
}

/** The provider namespaces of the file, in the order the skeleton lists them. */
export const NAMESPACES = ["anthropic", "openai", "github"] as const;
/** A provider namespace. */
export type CredentialNamespace = typeof NAMESPACES[number];

/** True for YAML text with no document: only blank lines and comments. */
export function isEmptyYaml(text: string): boolean {
  return text.split("\n").every((l) => /^\s*(#.*)?$/.test(l));
}

/** The namespaces with no account at all (the proxy relays their placeholders untouched). */
export function missingNamespaces(c: Credentials): CredentialNamespace[] {
  return NAMESPACES.filter((n) => c[n].accounts.size === 0);
}

/** A value as written, wrapped: a {@link Secret}, or the command printing it. */
function wrap(v: ValueRaw): Value {
  if (typeof v === "string") return new Secret(v);
  return { kind: "command", argv: v.command, ttlMs: v.ttl_ms ?? DEFAULT_COMMAND_TTL_MS };
}

/** Parses the file's text; messages never quote values. */
export function parseCredentials(text: string): Credentials {
  let raw: unknown = null;
  try {
    raw = parseYaml(text);
  } catch (e) {
    // the reader names the line and never quotes it (it may hold a value)
    throw new IsbError("parse", `read credentials: invalid YAML: ${(e as Error).message}`);
  }
  let f: FileRaw;
  try {
    f = checkFile(raw);
  } catch (e) {
    throw new IsbError("invalid", `read credentials: ${(e as Error).message}`);
  }
  return {
    anthropic: accounts(
      "anthropic",
      f.anthropic,
      (a): AnthropicAccount => {
        if ("api_key" in a) return { kind: "api_key", value: wrap(a.api_key) };
        if ("oauth_token" in a) return { kind: "oauth", value: wrap(a.oauth_token) };
        return {
          kind: "vertex",
          vertex: {
            project: a.vertex.project,
            region: a.vertex.region,
            tokenCommand: a.vertex.token_command ?? [...DEFAULT_TOKEN_COMMAND],
            tokenTtlMs: (a.vertex.token_ttl_seconds ?? 0) * 1000 || DEFAULT_TOKEN_TTL_MS,
          },
        };
      },
    ),
    openai: accounts(
      "openai",
      f.openai,
      (a) => ({ kind: "token" as const, value: wrap(a.api_key) }),
    ),
    github: accounts(
      "github",
      f.github,
      (a) => ({ kind: "token" as const, value: wrap(a.token) }),
    ),
    custom: (f.custom ?? []).map((c): CustomRule => {
      const domain = c.domain.toLowerCase();
      if ("header" in c) {
        return { domain, kind: "header", header: c.header, value: wrap(c.value) };
      }
      if ("bearer" in c) return { domain, kind: "bearer", value: wrap(c.bearer) };
      return { domain, kind: "basic", user: c.basic.user, value: wrap(c.basic.password) };
    }),
  };
}

/** Every value of the file, literal or command-sourced. */
function allValues(c: Credentials): Value[] {
  return [
    ...[...c.anthropic.accounts.values()].flatMap((a) => "value" in a ? [a.value] : []),
    ...[...c.openai.accounts.values()].map((a) => a.value),
    ...[...c.github.accounts.values()].map((a) => a.value),
    ...c.custom.map((r) => r.value),
  ];
}

/** Every literal value in the credentials (what responses and logs are scrubbed of). */
export function allSecrets(c: Credentials): Secret[] {
  return allValues(c).filter((v): v is Secret => !isCommand(v));
}

/** Every command the credentials name (Vertex token commands included). */
export function allCommands(c: Credentials): CommandRef[] {
  const vertex = [...c.anthropic.accounts.values()].flatMap((a): CommandRef[] =>
    a.kind === "vertex"
      ? [{ kind: "command", argv: a.vertex.tokenCommand, ttlMs: a.vertex.tokenTtlMs }]
      : []
  );
  return [...allValues(c).filter(isCommand), ...vertex];
}

/** Reads the file; refuses one readable by anyone but its owner. Missing = empty. */
export async function loadCredentials(path: string): Promise<Credentials> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return emptyCredentials();
    throw new IsbError("io", `read credentials "${path}": ${(e as Error).message}`);
  }
  const mode = (info.mode ?? 0) & 0o777;
  if (mode & 0o077) {
    throw new IsbError(
      "forbidden",
      `read credentials "${path}": mode ${
        mode.toString(8).padStart(4, "0")
      } is wider than 0600; run chmod 600 "${path}"`,
    );
  }
  return parseCredentials(await Deno.readTextFile(path));
}
