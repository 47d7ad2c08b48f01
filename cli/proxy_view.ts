/**
 * The read-only views of `isx proxy`: `logs` (the log file, `-f` to follow) and `activity`
 * (every instance's counts from the proxy's `/activity`, as a table, tab-separated or JSON,
 * `--watch` to refresh in place). Split from `proxy.ts`, which starts and stops the proxy.
 *
 * @module
 */

import {
  type ActivityRecord,
  activityTable,
  parseActivity,
  plainLine,
  runPaths,
  toRecords,
} from "../proxy/mod.ts";
import { IsbError } from "../rpc/errors.ts";
import { UsageError } from "./args.ts";
import type { CliContext } from "./command.ts";

/** Parsed `isx proxy` options. */
export type Values = Record<string, string | boolean | undefined>;

const enc = new TextEncoder();

/** Prints one block of text on stdout. */
export function out(text: string): void {
  // deno-lint-ignore no-console
  console.log(text);
}

/** GETs a JSON document from the proxy's ops port; `undefined` when nothing answers. */
export async function getJson(url: string): Promise<{ status: number; body: unknown } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    const text = await res.text();
    return { status: res.status, body: res.ok ? JSON.parse(text) : text };
  } catch {
    return undefined;
  }
}

/** `isx proxy logs`. */
export async function logs(ctx: CliContext, values: Values): Promise<number> {
  const path = runPaths(ctx.perm.stateDir).log;
  const n = Number(values.lines ?? 50);
  if (!Number.isInteger(n) || n < 0) {
    throw new UsageError(`--lines: "${values.lines}" is not a count`);
  }
  let text = await Deno.readTextFile(path).catch(() => "");
  const lines = text.split("\n").filter((l, i, a) => l !== "" || i < a.length - 1);
  if (lines.length) out(lines.slice(-n).join("\n"));
  if (!values.follow) return 0;
  let size = enc.encode(text).length;
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    text = await Deno.readTextFile(path).catch(() => "");
    const bytes = enc.encode(text);
    if (bytes.length < size) size = 0;
    if (bytes.length > size) await Deno.stdout.write(bytes.slice(size));
    size = bytes.length;
  }
}

/** `isx proxy activity`. */
export async function activity(ctx: CliContext, url: string, values: Values): Promise<number> {
  const format = values.json ? "json" : values.plain ? "plain" : (values.format ?? "table");
  if (!["table", "plain", "json"].includes(String(format))) {
    throw new UsageError(`--format: "${format}" is not table, plain or json`);
  }
  const interval = Number(values.interval ?? 2);
  if (!(interval > 0)) {
    throw new UsageError(`--interval: "${values.interval}" is not a positive number`);
  }
  const color = !ctx.env.NO_COLOR && Deno.stdout.isTerminal();
  for (;;) {
    const got = await getJson(`${url}/activity`);
    if (!got) {
      throw new IsbError("connect", `proxy activity: no answer at ${url}; see isx proxy status`);
    }
    if (got.status === 404) {
      throw new IsbError("api", `proxy activity: ${url} has no /activity; restart the proxy`);
    }
    if (got.status !== 200) {
      throw new IsbError("api", `proxy activity: ${url}/activity answered HTTP ${got.status}`);
    }
    const records: ActivityRecord[] = toRecords(parseActivity(got.body));
    const text = format === "json"
      ? JSON.stringify(records, null, values.watch ? undefined : 2)
      : format === "plain"
      ? records.map(plainLine).join("\n")
      : activityTable(records, { now: Date.now(), color });
    if (!values.watch) {
      if (text) out(text);
      return 0;
    }
    const clear = format === "table" && Deno.stdout.isTerminal() ? "\x1b[H\x1b[2J" : "";
    await Deno.stdout.write(enc.encode(`${clear}${text}\n`));
    await new Promise((r) => setTimeout(r, interval * 1000));
  }
}
