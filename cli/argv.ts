/**
 * A strict command-line parser with the behaviour of `node:util`'s `parseArgs` in strict mode,
 * for the subset the commands use (long and short flags, `--flag=value`, grouped short
 * booleans, `-nVALUE`, `multiple`, `default`, `--`). Importing `node:util` starts part of
 * Deno's Node layer, ~8 ms of every start of every command (issue 11, start-up);
 * `argv_test.ts` compares this parser with `parseArgs` on a table of argument lists.
 *
 * @module
 */

/** One option's description (as `parseArgs` takes it). */
export interface OptionSpec {
  type: "string" | "boolean";
  short?: string;
  multiple?: boolean;
  default?: string | boolean | string[] | boolean[];
}

type One<S extends OptionSpec> = S["type"] extends "string" ? string : boolean;
type ValueOf<S extends OptionSpec> = S["multiple"] extends true ? One<S>[] : One<S>;
type Defaulted<O> = { [K in keyof O]: O[K] extends { default: unknown } ? K : never }[keyof O];

/** The parsed flags: those with a default are always present. */
export type ParsedValues<O extends Record<string, OptionSpec>> =
  & { [K in Defaulted<O>]: ValueOf<O[K]> }
  & { [K in Exclude<keyof O, Defaulted<O>>]?: ValueOf<O[K]> };

/** Parses `args` strictly; throws TypeError with `parseArgs`'s message on a mistake. */
export function parseArgv<const O extends Record<string, OptionSpec>>(
  args: readonly string[],
  options: O,
  allowPositionals: boolean,
): { values: ParsedValues<O>; positionals: string[] } {
  const values: Record<string, unknown> = {};
  const positionals: string[] = [];
  const byShort = new Map<string, string>();
  for (const [name, o] of Object.entries(options)) if (o.short) byShort.set(o.short, name);
  const store = (name: string, value: string | boolean) => {
    if (options[name]!.multiple) ((values[name] ??= []) as unknown[]).push(value);
    else values[name] = value;
  };
  const positional = (a: string) => {
    if (!allowPositionals) {
      throw new TypeError(
        `Unexpected argument '${a}'. This command does not take positional arguments`,
      );
    }
    positionals.push(a);
  };
  const unknown = (flag: string) =>
    new TypeError(
      `Unknown option '${flag}'` + (allowPositionals
        ? `. To specify a positional argument starting with a '-', place it at the end of the command after '--', as in '-- "${flag}"`
        : ""),
    );
  /** `-s, --name` or `--name`, as parseArgs names an option in its messages. */
  const label = (name: string) =>
    options[name]!.short ? `-${options[name]!.short}, --${name}` : `--${name}`;
  /** The value of string option `name` (written `shown`) from the next argument. */
  const nextValue = (i: number, name: string, shown: string): string => {
    const v = args[i + 1];
    if (v === undefined) throw new TypeError(`Option '${label(name)} <value>' argument missing`);
    if (v.startsWith("-")) {
      const eg = shown.startsWith("--") ? `'${shown}=-XYZ'` : `'--${name}=-XYZ' or '${shown}-XYZ'`;
      throw new TypeError(
        `Option '${shown}' argument is ambiguous.\nDid you forget to specify the option argument for '${shown}'?\nTo specify an option argument starting with a dash use ${eg}.`,
      );
    }
    return v;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      for (const p of args.slice(i + 1)) positional(p);
      break;
    }
    if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      const name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
      const o = Object.hasOwn(options, name) ? options[name] : undefined;
      if (!o) {
        throw unknown(`--${name}`);
      }
      if (o.type === "boolean") {
        if (eq >= 0) throw new TypeError(`Option '${label(name)}' does not take an argument`);
        store(name, true);
      } else if (eq >= 0) store(name, a.slice(eq + 1));
      else store(name, nextValue(i++, name, `--${name}`));
      continue;
    }
    if (a.startsWith("-") && a !== "-") {
      for (let j = 1; j < a.length; j++) {
        const c = a[j]!;
        const name = byShort.get(c);
        if (!name) {
          throw unknown(`-${c}`);
        }
        if (options[name]!.type === "boolean") {
          store(name, true);
          continue;
        }
        if (j + 1 < a.length) store(name, a.slice(j + 1));
        else store(name, nextValue(i++, name, `-${c}`));
        break;
      }
      continue;
    }
    positional(a);
  }
  for (const [name, o] of Object.entries(options)) {
    if (o.default !== undefined && values[name] === undefined) values[name] = o.default;
  }
  return { values: values as ParsedValues<O>, positionals };
}
