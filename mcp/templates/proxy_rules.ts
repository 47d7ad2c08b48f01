/**
 * Credential rules that tools declare for the proxy (`proxy:` in a tool's YAML,
 * shared/spec/isx-mcp.md §7.G): `bearer`, `basic` or `header`, each value a literal or
 * `${key}` from the tool's own `configuration:` map. Only the user layer
 * (`~/.config/isx/tools`) and search paths count: a project's `.isx/` is someone else's
 * repository, and a rule there could send the user's secrets to any domain it names (the
 * loader refuses such files outright, and this reader never looks there).
 *
 * {@link toolProxyRules} is pure (definitions in, rules out); {@link loadToolProxyRules}
 * reads only the `tools/` directories, so the proxy needs no other definition files.
 * Values are returned as plain strings (the proxy wraps them as secrets at once) or, from the
 * user layer only, as a command printing the value: a search path is someone else's
 * repository too, and a rule there naming `gh auth token` would send the user's token to a
 * domain of its choosing.
 *
 * @module
 */

import { IsbError } from "../../rpc/errors.ts";
import { parseDuration } from "../../rpc/base.ts";
import { parseYamlText } from "./load.ts";
import { parseTool, type ToolDef } from "./schema.ts";

/** A rule's value: the value itself, or the command printing it (ttl in ms, if given). */
export type ToolRuleValue = string | { command: string[]; ttlMs?: number };

/** One resolved rule: values substituted, ready for the proxy. */
export type ToolProxyRule =
  | { tool: string; domain: string; kind: "bearer"; value: ToolRuleValue }
  | { tool: string; domain: string; kind: "header"; header: string; value: ToolRuleValue }
  | { tool: string; domain: string; kind: "basic"; user: string; value: ToolRuleValue };

/** A value as written: substituted text, or a command (only where `commands` allows). */
function ruleValue(
  tool: ToolDef,
  file: string,
  where: string,
  v: string | { command: string[]; ttl?: string | number | undefined },
  commands: boolean,
): ToolRuleValue {
  if (typeof v === "string") return substitute(tool, file, where, v);
  if (!commands) {
    throw new IsbError(
      "invalid",
      `tool file "${file}": field "${where}": a command is allowed only in ~/.config/isx/tools ` +
        "(a search path's tool could send the printed value to any domain)",
    );
  }
  if (v.ttl === undefined) return { command: v.command };
  let ttlMs = NaN;
  try {
    ttlMs = parseDuration(v.ttl);
  } catch { /* reported below */ }
  if (!(ttlMs >= 1000 && ttlMs <= 86_400_000)) {
    throw new IsbError(
      "invalid",
      `tool file "${file}": field "${where}.ttl": expected a duration from 1s to 24h, like 55m`,
    );
  }
  return { command: v.command, ttlMs };
}

/** Substitutes `${key}` from the tool's configuration; an unknown key is an error. */
function substitute(tool: ToolDef, file: string, where: string, text: string): string {
  const out = text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, key: string) => {
    const v = tool.configuration?.[key];
    if (v === undefined) {
      throw new IsbError(
        "invalid",
        `tool file "${file}": field "${where}": \${${key}} is not in the tool's configuration`,
      );
    }
    return v;
  });
  if (out === "") {
    throw new IsbError("invalid", `tool file "${file}": field "${where}": the value is empty`);
  }
  return out;
}

/**
 * The rules of these tools (each with the file it came from and whether it is the user's
 * own, which alone may name commands), in order.
 */
export function toolProxyRules(
  tools: readonly { def: ToolDef; file: string; user?: boolean }[],
): ToolProxyRule[] {
  const out: ToolProxyRule[] = [];
  for (const { def, file, user } of tools) {
    const value = (where: string, v: Parameters<typeof ruleValue>[3]) =>
      ruleValue(def, file, where, v, user === true);
    (def.proxy ?? []).forEach((r, i) => {
      const at = (f: string) => `proxy[${i}].${f}`;
      const base = { tool: def.name, domain: r.domain };
      if ("bearer" in r) {
        out.push({ ...base, kind: "bearer", value: value(at("bearer"), r.bearer) });
      } else if ("header" in r) {
        out.push({
          ...base,
          kind: "header",
          header: r.header,
          value: value(at("value"), r.value),
        });
      } else {
        out.push({
          ...base,
          kind: "basic",
          user: r.basic.user,
          value: value(at("basic.password"), r.basic.password),
        });
      }
    });
  }
  return out;
}

function toolFiles(dir: string): string[] {
  try {
    const names: string[] = [];
    for (const e of Deno.readDirSync(`${dir}/tools`)) {
      if ((e.isFile || e.isSymlink) && /\.ya?ml$/.test(e.name)) names.push(e.name);
    }
    return names.sort().map((n) => `${dir}/tools/${n}`);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw new IsbError("io", `read tools directory "${dir}/tools": ${(e as Error).message}`);
  }
}

/**
 * Reads the tools of the user layer and the search paths (a later layer's tool replaces an
 * earlier one of the same name, as for builds) and returns their rules. A directory that
 * cannot be read or holds an invalid tool is skipped whole and reported to `onSkip` when
 * given (else the error is thrown), so one bad search path does not cost the others.
 */
export function loadToolProxyRules(
  dirs: { configDir: string; searchPaths?: readonly string[] },
  onSkip?: (dir: string, error: Error) => void,
): ToolProxyRule[] {
  const tools = new Map<string, { def: ToolDef; file: string; user: boolean }>();
  for (const dir of [dirs.configDir, ...(dirs.searchPaths ?? [])]) {
    const user = dir === dirs.configDir;
    const layer = new Map<string, { def: ToolDef; file: string; user: boolean }>();
    try {
      for (const file of toolFiles(dir)) {
        let text: string;
        try {
          text = Deno.readTextFileSync(file);
        } catch (e) {
          throw new IsbError("io", `read tool "${file}": ${(e as Error).message}`);
        }
        const def = parseTool(file, parseYamlText(file, text), file.replace(/^.*\/|\.ya?ml$/g, ""));
        layer.set(def.name, { def, file, user });
      }
      // Checked per layer too, so a bad ${key} skips its layer, not every rule.
      toolProxyRules([...layer.values()]);
    } catch (e) {
      if (!onSkip) throw e;
      onSkip(dir, e as Error);
      continue;
    }
    for (const [name, t] of layer) tools.set(name, t);
  }
  return toolProxyRules([...tools.values()]);
}
