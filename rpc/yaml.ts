/**
 * The YAML reader of the config files isx and isb read (`config.yaml`, `credentials.yaml`, the
 * incus client's `config.yml`): js-yaml 5 with its core schema (YAML 1.2: null, booleans,
 * integers, floats, everything else a string; no custom tags, no merge keys), loaded from the
 * pre-built `rpc/vendor/js_yaml.js` (scripts/vendor.ts), which costs a process ~2–3 ms and
 * under 1 MiB more than the hand-written reader it replaced (docs/decisions.md, "js-yaml and
 * SHA-256 measured again"). A parser that reads credentials is better kept by a library with
 * a test suite and users of its own; what this module adds is the readers' contract:
 *
 * - an empty or comments-only text is `null` (js-yaml's `load` refuses it; `isx init` writes
 *   an all-comments skeleton), and a text of several documents is refused;
 * - duplicate keys are refused (js-yaml's default), `__proto__` is a plain key;
 * - an error is `IsbError("parse")` naming the line and never the text: js-yaml's message
 *   carries a snippet of the source lines, and its reason can quote a tag or alias name, so
 *   only the reason is kept, with any name taken from the text replaced by `…` (the text may
 *   hold a credential).
 *
 * Pure.
 *
 * @module
 */

import { CORE_SCHEMA, loadAll, YAMLException } from "js-yaml";
import { IsbError } from "./errors.ts";

/** Parses one YAML document (core schema); empty or comments only gives null. */
export function parseYaml(text: string): unknown {
  let docs: unknown[];
  try {
    docs = loadAll(text, { schema: CORE_SCHEMA });
  } catch (e) {
    throw new IsbError("parse", describe(e));
  }
  if (docs.length > 1) {
    throw new IsbError("parse", `only one document is supported (found ${docs.length})`);
  }
  return docs[0] ?? null;
}

/** js-yaml's error as `line N: reason`, without the snippet or a name from the text. */
function describe(e: unknown): string {
  if (!(e instanceof YAMLException)) return "the text is not readable YAML";
  const reason = e.reason.replace(/!<[^>]*>/g, "!<…>").replace(/"[^"]*"/g, '"…"')
    .replace(/(characters): .*$/s, "$1");
  return e.mark ? `line ${e.mark.line + 1}: ${reason}` : reason;
}
