/**
 * Account pins on instances: `user.incus-spawn.account.<ns>` stamps, which the proxy reads
 * from its next listing of instances (Incus reports the change, so within moments). A pin
 * beats the template's `accounts:` (stamped `template-account.<ns>` at build and carried to
 * every copy), which beats the namespace default of credentials.yaml. The proxy checks the
 * names: a pin to a missing account fails closed there (502), so a typo never falls back
 * to another account. Setting a namespace clears its aliases (`claude` and `anthropic`,
 * `openai` and `codex`), so one instance never holds two pins for one namespace.
 *
 * @module
 */

import { type IncusClient, IsbError, isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP, stampKey } from "../host/stamps.ts";

/** Namespace keys that name the same namespace. */
const ALIASES: Readonly<Record<string, readonly string[]>> = {
  claude: ["claude", "anthropic"],
  openai: ["openai", "codex"],
  github: ["github"],
};

/** One instance's account choices. */
export interface AccountRecord {
  /** The instance. */
  instance: string;
  /** Its template. */
  template: string | null;
  /** Pins by namespace key. */
  pins: Record<string, string>;
  /** The template's `accounts:` by namespace key. */
  template_accounts: Record<string, string>;
}

function withPrefix(stamps: Record<string, string>, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamps)) {
    if (k.startsWith(prefix) && v) out[k.slice(prefix.length)] = v;
  }
  return out;
}

/** The account choices of every isx instance (templates and builds left out). */
export async function listAccountPins(client: IncusClient): Promise<AccountRecord[]> {
  const out: AccountRecord[] = [];
  for (const inst of await client.listInstances()) {
    const s = readStamps(inst.config);
    if (s[STAMP.type] !== "instance") continue;
    out.push({
      instance: inst.name,
      template: s[STAMP.profile] || null,
      pins: withPrefix(s, STAMP.account),
      template_accounts: withPrefix(s, STAMP.templateAccount),
    });
  }
  return out.sort((a, b) => a.instance.localeCompare(b.instance));
}

/** Sets (`name`) or clears (`null`) pins of one isx instance; returns its pins after. */
export async function updateAccountPins(
  client: IncusClient,
  name: string,
  changes: Readonly<Record<string, string | null>>,
): Promise<Record<string, string>> {
  let after: Record<string, string> = {};
  try {
    await client.updateInstance(name, (inst) => {
      const type = readStamps(inst.config)[STAMP.type];
      if (type !== "instance") {
        throw new IsbError(
          "invalid",
          `pin accounts of "${name}": it is not an instance made by isx branch${
            type === "base" ? " (it is a template: set accounts: in its definition)" : ""
          }`,
        );
      }
      const config = { ...inst.config };
      for (const [ns, value] of Object.entries(changes)) {
        for (const alias of ALIASES[ns] ?? [ns]) delete config[stampKey(STAMP.account + alias)];
        if (value !== null) config[stampKey(STAMP.account + ns)] = value;
      }
      inst.config = config;
      after = withPrefix(readStamps(config), STAMP.account);
    }, { step: `pin accounts of ${name}` });
  } catch (e) {
    if (isNotFound(e)) {
      throw new IsbError("not_found", `pin accounts of "${name}": no such instance`);
    }
    throw e;
  }
  return after;
}
