/**
 * `get_diff`'s guest entry, run as the agent user under `deno run` with grants of its own
 * (`diffRunnerArgv`: read of the task directory and the repositories, write of the task
 * directory and the temporary directory, run of git):
 *
 *   main.ts record --dir TASK_DIR   (run 1) writes base.txt for the task's recorded cwd
 *   main.ts diff --dir TASK_DIR [--path P] [--stat] [--max-bytes N] [--timeout-ms N]
 *
 * `diff` prints one JSON object (core.ts DiffResult), or `{"error":…,"timeout":true}` and
 * exits 3 when the deadline (default 5 minutes) stopped it.
 *
 * @module
 */

import { readRegular, writeAside } from "../runner_io.ts";
import { formatBases, parseBases } from "./core.ts";
import { diffRepos, GitError, recordBases } from "./git.ts";

const USAGE = "usage: main.ts record|diff --dir TASK_DIR [--path P] [--stat] [--max-bytes N]";

/** Parsed arguments. */
export interface DiffArgs {
  /** record or diff. */
  sub: "record" | "diff";
  /** The task directory. */
  dir: string;
  /** A pathspec. */
  path?: string;
  /** Counts only. */
  stat: boolean;
  /** The patch limit. */
  maxBytes?: number;
  /** The deadline. */
  timeoutMs: number;
}

/** Parses the arguments; TypeError with the usage on anything else. */
export function parseDiffArgs(args: string[]): DiffArgs {
  const [sub, ...rest] = args;
  if (sub !== "record" && sub !== "diff") throw new TypeError(USAGE);
  const out: DiffArgs = { sub, dir: "", stat: false, timeoutMs: 300_000 };
  for (let i = 0; i < rest.length; i++) {
    const k = rest[i]!;
    const v = rest[i + 1];
    if (k === "--stat") {
      out.stat = true;
      continue;
    }
    if (v === undefined) throw new TypeError(`${k} needs a value: ${USAGE}`);
    i++;
    if (k === "--dir") out.dir = v;
    else if (k === "--path") out.path = v;
    else if (k === "--max-bytes") out.maxBytes = Number(v);
    else if (k === "--timeout-ms") out.timeoutMs = Number(v);
    else throw new TypeError(`unexpected argument "${k}": ${USAGE}`);
  }
  if (!out.dir.startsWith("/") || !(out.timeoutMs > 0)) throw new TypeError(USAGE);
  return out;
}

/** Runs one command; resolves to the exit code (the JSON answer goes to `print`). */
export async function diffMain(args: string[], print: (s: string) => void): Promise<number> {
  const a = parseDiffArgs(args);
  const signal = AbortSignal.timeout(a.timeoutMs);
  try {
    if (a.sub === "record") {
      const cwd = (await readRegular(`${a.dir}/cwd`, 4096))?.trim();
      if (!cwd) throw new TypeError(`no cwd in ${a.dir}`);
      const bases = await recordBases(cwd, { signal });
      await writeAside(`${a.dir}/base.txt`, formatBases(bases));
      print(JSON.stringify({ repos: bases.map((b) => b.repo) }));
      return 0;
    }
    const bases = parseBases((await readRegular(`${a.dir}/base.txt`, 1024 * 1024)) ?? "");
    const res = await diffRepos(bases, {
      signal,
      stat: a.stat,
      ...(a.path !== undefined ? { path: a.path } : {}),
      ...(a.maxBytes !== undefined ? { maxBytes: a.maxBytes } : {}),
    });
    print(JSON.stringify(res));
    return 0;
  } catch (e) {
    if (e instanceof GitError) {
      print(
        JSON.stringify({ error: e.message, ...(e.kind === "timeout" ? { timeout: true } : {}) }),
      );
      return e.kind === "timeout" ? 3 : 1;
    }
    throw e;
  }
}

if (import.meta.main) {
  try {
    const enc = new TextEncoder();
    Deno.exit(await diffMain(Deno.args, (s) => Deno.stdout.writeSync(enc.encode(s + "\n"))));
  } catch (e) {
    Deno.stderr.writeSync(new TextEncoder().encode(`isx get_diff: ${(e as Error).message}\n`));
    Deno.exit(2);
  }
}
