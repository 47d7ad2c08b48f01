/**
 * Test fixture of the compose loader: in-memory project files under `/tmp/My Project`, and
 * the check that a load fails with a `parse` error naming its file.
 *
 * @module
 */

import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { type ComposeProject, loadCompose, type LoadOptions } from "./load.ts";

/** Loads in-memory files under `/tmp/My Project`. */
export function load(
  files: Record<string, string>,
  over: Partial<Omit<LoadOptions, "env">> & { env?: Record<string, string> } = {},
): Promise<ComposeProject> {
  const env: Record<string, string> = over.env ?? {};
  const fs: Record<string, string> = Object.fromEntries(
    Object.entries(files).map(([k, v]) => [k.startsWith("/") ? k : `/tmp/My Project/${k}`, v]),
  );
  const { env: _env, ...rest } = over;
  return loadCompose({
    cwd: "/tmp/My Project",
    files: Object.keys(files).filter((f) => f.endsWith(".yaml") || f.endsWith(".yml")),
    readTextFile: (p) => {
      const t = fs[p];
      return t === undefined
        ? Promise.reject(new Deno.errors.NotFound(`No such file or directory: ${p}`))
        : Promise.resolve(t);
    },
    isFile: (p) => Promise.resolve(p in fs),
    env: (k) => (Object.hasOwn(env, k) ? env[k] : undefined),
    ...rest,
  });
}

/** Asserts that `p` fails with `parse`, naming `path`, its message holding each of `has`. */
export async function parseFails(
  p: Promise<unknown>,
  path: string,
  ...has: string[]
): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof IsbError, String(e));
    assert.equal(e.code, "parse", e.message);
    assert.deepStrictEqual(e.data, { path });
    assert.ok(e.message.startsWith(`${path}: `), e.message);
    for (const h of has) assert.ok(e.message.includes(h), `${e.message} lacks ${h}`);
    return true;
  });
}
