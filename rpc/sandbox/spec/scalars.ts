/**
 * The lenient scalars of the spec format (isb-rpc.md §7) as zod schemas.
 *
 * Interpolation runs on the parsed YAML tree before typing, so `cpus: "${CPUS:-8}"` reaches
 * the schema as the string `"8"`. These schemas accept either the native scalar or a string
 * that means one, the way compose does, and store "int or string" values as strings.
 *
 * Polymorphic fields (a mount written short or long, a port in three forms, …) are parsed by
 * hand inside {@link poly} so that an error names the form the input was actually written in;
 * the union they document is attached as JSON Schema metadata for the `schema` method.
 *
 * @module
 */

import * as z from "zod";

/** The transform context zod hands to `.transform()`. */
export type Ctx = z.core.$RefinementCtx<unknown>;

/** Adds a custom issue (optionally below the current path) and returns `z.NEVER`. */
export function fail(ctx: Ctx, message: string, path: (string | number)[] = []): never {
  ctx.addIssue({ code: "custom", message, path });
  return z.NEVER;
}

/** Parses `v` with `schema`, forwarding its issues to `ctx`; `undefined` on failure. */
export function sub<S extends z.ZodType>(
  schema: S,
  v: unknown,
  ctx: Ctx,
  path: (string | number)[] = [],
): z.output<S> | undefined {
  const r = schema.safeParse(v);
  if (r.success) return r.data;
  for (const issue of r.error.issues) {
    ctx.addIssue({ ...issue, path: [...path, ...issue.path] } as never);
  }
  return undefined;
}

/** JSON Schema of `doc` (input side), without `$schema`, for use as metadata. */
function docSchema(doc: z.ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(doc, { io: "input", target: "draft-2020-12" }) as Record<
    string,
    unknown
  >;
  delete json.$schema;
  return json;
}

/**
 * Metadata computed when first read: the JSON Schema of a poly field's `doc`. Every spec
 * module makes such fields at import, and converting each `doc` there cost ~12 ms of every
 * `isb rpc` start (before its first answer) for a schema only `sandbox.schema`-like callers
 * ask for. zod's registry reads metadata by spreading it (`ownKeys`, descriptors, `get`) and
 * checks `"id" in meta` when it is added; a doc schema never has an `id`, so that check is
 * answered without converting.
 */
function lazyMeta(make: () => Record<string, unknown>): Record<string, unknown> {
  let made: Record<string, unknown> | undefined;
  const target = () => (made ??= make());
  return new Proxy({}, {
    get: (_, k) => Reflect.get(target(), k),
    has: (_, k) => k !== "id" && k in target(),
    ownKeys: () => Reflect.ownKeys(target()),
    getOwnPropertyDescriptor: (_, k) => {
      const d = Reflect.getOwnPropertyDescriptor(target(), k);
      return d && { ...d, configurable: true };
    },
  });
}

/**
 * A field parsed by hand: `parse` sees the raw value and reports through `ctx`; the JSON
 * Schema shows `doc`, the forms it accepts.
 */
export function poly<T>(
  doc: z.ZodType,
  parse: (v: unknown, ctx: Ctx) => T,
): z.ZodType<T, unknown> {
  return z.unknown().transform((v, ctx) => parse(v, ctx)).meta(
    lazyMeta(() => docSchema(doc)),
  ) as z.ZodType<
    T,
    unknown
  >;
}

const TRUE = new Set(["true", "yes", "on", "1"]);
const FALSE = new Set(["false", "no", "off", "0", ""]);

/** A boolean, or a string `true|yes|on|1` / `false|no|off|0|""` (any case). */
export const Bool = z.union([z.boolean(), z.string()]).transform((v, ctx): boolean => {
  if (typeof v === "boolean") return v;
  const s = v.trim().toLowerCase();
  if (TRUE.has(s)) return true;
  if (FALSE.has(s)) return false;
  return fail(ctx, `expected a boolean, got ${JSON.stringify(v)}`);
});

/** A non-negative integer or a string, stored as a string (floats rejected). */
export const IntOrString = z.union([z.int().nonnegative(), z.string()]).transform(String);

/** A whole number, also written as a string of digits (`retries: "3"`). */
export const Count = z.union([z.int().nonnegative(), z.string()]).transform(
  (v, ctx): number => {
    if (typeof v === "number") return v;
    if (/^\s*[0-9]+\s*$/.test(v)) return Number(v.trim());
    return fail(ctx, `expected a whole number, got ${JSON.stringify(v)}`);
  },
);

/** A scalar rendered as a string: `1` → "1", `true` → "true", `1.0` → "1", `0.5` → "0.5". */
export const Scalar = z.union([z.string(), z.number(), z.boolean()]).transform(scalarString);

/** The string form of a scalar (numbers in their shortest round-trip form). */
export function scalarString(v: string | number | boolean): string {
  return typeof v === "string" ? v : String(v);
}

/** A free-form map whose values are any scalar, stringified. */
export const StringMap = z.record(z.string(), Scalar);

/** A map of scalars, or a list of `KEY=VALUE`; `bare` decides what a bare `KEY` means. */
export function mapOrList(
  what: string,
  bare: (key: string) => string | { error: string },
): z.ZodType<Record<string, string>, unknown> {
  const doc = z.union([
    z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    z.array(z.string()),
  ]);
  return poly(doc, (v, ctx) => {
    if (Array.isArray(v)) {
      const out: Record<string, string> = {};
      for (const [i, item] of v.entries()) {
        if (typeof item !== "string") {
          return fail(ctx, `${what} entries are KEY=VALUE strings`, [i]);
        }
        const eq = item.indexOf("=");
        if (eq >= 0) {
          out[item.slice(0, eq)] = item.slice(eq + 1);
          continue;
        }
        const b = bare(item);
        if (typeof b !== "string") return fail(ctx, b.error, [i]);
        out[item] = b;
      }
      return out;
    }
    return sub(StringMap, v, ctx) ?? z.NEVER;
  });
}

/**
 * Splits a command line like a POSIX shell without expanding anything: whitespace separates,
 * quotes group, backslash escapes. Docker splits a string `command` the same way.
 */
export function splitWords(s: string): string[] {
  const words: string[] = [];
  let cur = "";
  let inWord = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (/\s/.test(c)) {
      if (inWord) words.push(cur), cur = "", inWord = false;
    } else if (c === "'") {
      inWord = true;
      const end = s.indexOf("'", i + 1);
      if (end < 0) throw new SyntaxError(`unterminated ' in ${JSON.stringify(s)}`);
      cur += s.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      inWord = true;
      for (i++;; i++) {
        if (i >= s.length) throw new SyntaxError(`unterminated " in ${JSON.stringify(s)}`);
        const d = s[i]!;
        if (d === '"') break;
        if (d === "\\") {
          const e = s[++i];
          if (e === undefined) throw new SyntaxError(`unterminated " in ${JSON.stringify(s)}`);
          if (e === "\n") continue;
          cur += '"\\$`'.includes(e) ? e : `\\${e}`;
        } else cur += d;
      }
    } else if (c === "\\") {
      inWord = true;
      const e = s[++i];
      if (e === undefined) throw new SyntaxError(`trailing \\ in ${JSON.stringify(s)}`);
      if (e !== "\n") cur += e;
    } else {
      inWord = true;
      cur += c;
    }
  }
  if (inWord) words.push(cur);
  if (words.length === 0) throw new SyntaxError("command is empty");
  return words;
}

/** A command: an argv list (scalars stringified) or a string split like a shell line. */
export const Command = poly(
  z.union([z.string(), z.array(z.union([z.string(), z.number(), z.boolean()]))]),
  (v, ctx): string[] => {
    if (typeof v === "string") {
      try {
        return splitWords(v);
      } catch (e) {
        return fail(ctx, (e as Error).message);
      }
    }
    return sub(z.array(Scalar), v, ctx) ?? z.NEVER;
  },
);
