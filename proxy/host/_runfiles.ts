/**
 * The files a running proxy leaves in `<stateDir>/proxy/` (0700): `proxy.pid` (its pid),
 * `proxy.token` (0600; the secret `isx proxy stop` presents to `POST /shutdown`) and
 * `proxy.log`, and `task-report.token` (0600; what `isx mcp` presents to `POST /tasks`, a
 * one-way derivation of the shutdown token: reading it cannot stop the proxy). The proxy
 * writes the pid and tokens itself when it is up and removes them
 * when it exits, but only if they are still its own, so a racing second start cannot
 * delete a live proxy's files.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

/** The paths under a state directory. */
export function runPaths(
  stateDir: string,
): { dir: string; pid: string; token: string; log: string; report: string } {
  const dir = `${stateDir}/proxy`;
  return {
    dir,
    pid: `${dir}/proxy.pid`,
    token: `${dir}/proxy.token`,
    log: `${dir}/proxy.log`,
    report: `${dir}/task-report.token`,
  };
}

async function readOrUndefined(path: string): Promise<string | undefined> {
  try {
    return (await Deno.readTextFile(path)).trim();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new IsbError("io", `read "${path}": ${(e as Error).message}`);
  }
}

/** A fresh shutdown token (256 bits, hex). */
export function newToken(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(32)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
}

/** Writes the pid and the tokens (`report`: the task-report token, when served). */
export async function writeRunFiles(
  stateDir: string,
  pid: number,
  token: string,
  report?: string,
): Promise<void> {
  const p = runPaths(stateDir);
  await Deno.mkdir(p.dir, { recursive: true, mode: 0o700 });
  await Deno.writeTextFile(p.token, token + "\n", { mode: 0o600 });
  await Deno.chmod(p.token, 0o600);
  if (report !== undefined) {
    await Deno.writeTextFile(p.report, report + "\n", { mode: 0o600 });
    await Deno.chmod(p.report, 0o600);
  }
  await Deno.writeTextFile(p.pid, `${pid}\n`, { mode: 0o644 });
}

/** The recorded pid and token (either may be missing). */
export async function readRunFiles(
  stateDir: string,
): Promise<{ pid: number | undefined; token: string | undefined }> {
  const p = runPaths(stateDir);
  const pidText = await readOrUndefined(p.pid);
  const pid = pidText && /^\d+$/.test(pidText) ? Number(pidText) : undefined;
  return { pid, token: await readOrUndefined(p.token) };
}

/** Removes the pid and token files if they belong to `pid` (any pid when `undefined`). */
export async function removeRunFiles(stateDir: string, pid?: number): Promise<void> {
  const have = await readRunFiles(stateDir);
  if (pid !== undefined && have.pid !== undefined && have.pid !== pid) return;
  const p = runPaths(stateDir);
  for (const f of [p.pid, p.token, p.report]) await Deno.remove(f).catch(() => {});
}
