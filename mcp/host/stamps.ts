/**
 * Instance stamps: `user.incus-spawn.*` config keys (shared/spec/isx-mcp.md §4.2) that say
 * what an instance is and where it came from. Templates carry `type=base` plus what their
 * build used (definition hash, build id, parent build, program version); instances carry
 * their template (`profile`), `parent`, `workdir`, network mode and the hash of the
 * per-start secret. The MCP server's `mcp-*` stamps share the prefix.
 *
 * Pure.
 *
 * @module
 */

import type { Instance } from "../../rpc/base.ts";

/** The prefix of every stamp. */
export const STAMP_PREFIX = "user.incus-spawn.";

/** The stamp keys this layer writes (without the prefix). */
export const STAMP = {
  /** `base` (a built template), `build` (a template being built) or `instance`. */
  type: "type",
  /** The leaf template an instance or template is. */
  profile: "profile",
  /** The parent template (templates) or the template or instance it was copied from. */
  parent: "parent",
  /** Hex SHA-256 of the definition a template was built from. */
  definitionHash: "definition-sha256",
  /** Random id of one build of a template. */
  buildId: "build-id",
  /** The parent's build id a template was built on. */
  parentBuild: "parent-build",
  /** The isx version that built a template. */
  version: "version",
  /** When a template was built (ISO). */
  builtAt: "built-at",
  /** Which layer the leaf definition came from (builtin, user, search, project). */
  layer: "definition-layer",
  /** `false` when any definition of the chain came from a project-local layer. */
  trusted: "trusted",
  /** The instance's working directory. */
  workdir: "workdir",
  /** full, proxy-only or airgap. */
  network: "network",
  /** Hex SHA-256 of the per-start secret in /run/isx/instance-secret. */
  secretHash: "instance-secret-sha256",
  /** Fingerprint of the proxy CA a template was built with, or an instance now trusts. */
  caFingerprint: "ca-sha256",
  /** Prefix: an instance's account pin per namespace (`account.claude=work`). */
  account: "account.",
  /** Prefix: a template's `accounts:` per namespace, carried to every copy. */
  templateAccount: "template-account.",
  /** The fixed IPv4 address of the instance's filtered NIC. */
  staticIp: "static-ip",
  /** A build container's credential namespaces, as its trusted definition declares them. */
  credentials: "credentials",
} as const;

/** The stamps of a template's `accounts:` (`template-account.<ns>`), prefix-less. */
export function templateAccountStamps(accounts: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [ns, name] of Object.entries(accounts)) out[STAMP.templateAccount + ns] = name;
  return out;
}

/** The `template-account.*` stamps among prefix-less stamps (what a copy carries on). */
export function carriedAccountStamps(stamps: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamps)) {
    if (k.startsWith(STAMP.templateAccount) && v) out[k] = v;
  }
  return out;
}

/** The full config key of a stamp. */
export function stampKey(key: string): string {
  return STAMP_PREFIX + key;
}

/** The stamps of an instance's config, without the prefix. */
export function readStamps(config: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(config ?? {})) {
    if (k.startsWith(STAMP_PREFIX)) out[k.slice(STAMP_PREFIX.length)] = v;
  }
  return out;
}

/** A config patch from prefix-less stamps. */
export function stampConfig(stamps: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamps)) out[stampKey(k)] = v;
  return out;
}

/**
 * An `updateInstance` updater that sets prefix-less stamps (an empty value unsets one) and
 * keeps the rest of the instance as read.
 */
export function withStamps(stamps: Record<string, string>): (i: Instance) => Instance {
  return (i) => ({ ...i, config: { ...i.config, ...stampConfig(stamps) } });
}

/**
 * The `config` of a copy request: `stamps`, and every other stamp of the source set to ""
 * (Incus copies the source's config and an empty value unsets a key), so no stamp of the
 * source survives into the copy unless restamped.
 */
export function copyConfig(
  source: Record<string, string>,
  stamps: Record<string, string>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(source)) if (k.startsWith(STAMP_PREFIX)) out[k] = "";
  return { ...out, ...stampConfig(stamps) };
}
