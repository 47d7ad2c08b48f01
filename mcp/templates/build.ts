/**
 * `isx build`: turns a resolved template into a stopped Incus instance of the same name.
 * The build runs in `<name>-build` (a copy of the built parent, or a new instance from the
 * root's image), so the previous build stays usable until the new one is complete; on
 * success the build instance is stopped, stamped and swapped in for the old template
 * (swap.ts: the old one is deleted only once the new one holds the name). A
 * failed build keeps `<name>-build` running for inspection and says how to reach it; the
 * next build replaces it. Every line goes to a log in `<stateDir>/build/`.
 *
 * @module
 */

import { type IncusClient, IsbError, isNotFound, VERSION } from "../../rpc/base.ts";
import { guestUser } from "../host/guest.ts";
import { startLong, stopReliably, waitForIpv4, waitForRun } from "../host/waits.ts";
import { leaseFile, watchLease } from "../host/leases.ts";
import { pemFingerprint } from "../host/proxy_check.ts";
import {
  copyConfig,
  readStamps,
  STAMP,
  STAMP_PREFIX,
  stampConfig,
  templateAccountStamps,
} from "../host/stamps.ts";
import type { HostTools } from "./cache.ts";
import type { Definitions } from "./load.ts";
import { planBuilds, type PlannedBuild, type PlanOptions } from "./plan.ts";
import type { ProgramSource } from "./program.ts";
import { type Chain, resolveChain } from "./resolve.ts";
import { runStep, STAGING, type StepContext } from "./run_steps.ts";
import { accountsOf, AGENT_USER, type GuestFacts, planBuild, workdirOf } from "./steps.ts";
import { incusSwapOps, swapTemplate } from "./swap.ts";
import { type PinPlan, planPin, repinLeased, startPinned } from "../instances/static_ip.ts";

/** A progress event of a build. */
export type BuildEvent =
  | { kind: "plan"; builds: PlannedBuild[] }
  | { kind: "start"; template: string; instance: string; log: string }
  | { kind: "step"; template: string; index: number; total: number; label: string }
  | { kind: "output"; template: string; line: string }
  | { kind: "note"; template: string; line: string }
  | { kind: "done"; template: string; ms: number };

/** What builds need. */
export interface BuildContext {
  /** The Incus client. */
  client: IncusClient;
  /** What guests get from the host. */
  facts: GuestFacts;
  /** The download cache directory. */
  cacheDir: string;
  /** Build logs go here (`<stateDir>/build`). */
  logDir: string;
  /** Environment for host commands (npm, tar, deno bundle). */
  hostEnv: Record<string, string>;
  /** Needed when a template uses the `isx` tool. */
  program?: ProgramSource;
  /** Receives progress. */
  onEvent: (e: BuildEvent) => void;
}

/** One finished build. */
export interface BuildResult {
  /** The template. */
  template: string;
  /** The new build's id. */
  buildId: string;
  /** The build log. */
  log: string;
  /** Milliseconds it took. */
  ms: number;
}

/** The instance a template is built in. */
export function buildInstanceName(template: string): string {
  return `${template}-build`;
}

async function removeInstance(client: IncusClient, name: string): Promise<boolean> {
  try {
    const st = await client.getInstanceState(name);
    if (st.status !== "Stopped") {
      await client.stopInstance(name, { step: `stop ${name}`, force: true });
    }
    await client.deleteInstance(name, { step: `delete ${name}` });
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}

function chainTrusted(chain: Chain): boolean {
  return chain.every((l) => l.template.trusted && l.tools.every((u) => u.tool.trusted));
}

/**
 * The credential namespaces a build may get (the proxy reads the stamp): `github` when a
 * trusted chain clones repositories, nothing for an untrusted one, whose scripts run as root.
 */
export function buildCredentials(chain: Chain): string {
  const repos = chain.some((l) => (l.template.def.repos?.length ?? 0) > 0);
  return chainTrusted(chain) && repos ? "github" : "";
}

/** A pinned eth0 for the build (static_ip.ts), or none when eth0 is not on a managed bridge. */
async function buildPin(
  client: IncusClient,
  base: Record<string, string> | undefined,
  what: string,
): Promise<PinPlan | undefined> {
  if (!base?.network) return undefined; // no credentials for it then: the proxy needs the pin
  return await planPin(client, base, what);
}

/** Builds the last template of `chain` (its parent must be built). */
export async function buildOne(chain: Chain, ctx: BuildContext): Promise<BuildResult> {
  const started = Date.now();
  const link = chain[chain.length - 1]!;
  const def = link.template.def;
  const name = def.name;
  const tmp = buildInstanceName(name);
  const parent = chain.length > 1 ? chain[chain.length - 2]!.template.def.name : undefined;
  Deno.mkdirSync(ctx.logDir, { recursive: true });
  const log = `${ctx.logDir}/${name}-${new Date().toISOString().replace(/[:.]/g, "-")}.log`;
  const logFile = Deno.openSync(log, { create: true, append: true });
  const enc = new TextEncoder();
  const write = (line: string) =>
    logFile.writeSync(enc.encode(`${new Date().toISOString()} ${line}\n`));
  const note = (line: string) => {
    write(line);
    ctx.onEvent({ kind: "note", template: name, line });
  };
  const steps = planBuild(chain, ctx.facts);
  let at = "create the build instance";
  try {
    ctx.onEvent({ kind: "start", template: name, instance: tmp, log });
    if (await removeInstance(ctx.client, tmp)) {
      note(`removed the leftover ${tmp} of an earlier build`);
    }
    const stamps: Record<string, string> = {
      [STAMP.type]: "build",
      [STAMP.profile]: name,
      [STAMP.trusted]: String(chainTrusted(chain)),
      [STAMP.credentials]: buildCredentials(chain),
    };
    let parentBuild = "";
    let pin: PinPlan | undefined;
    const what = `build ${name}`;
    if (parent === undefined) {
      const profile = await ctx.client.call("GET", "/1.0/profiles/default", {});
      const devices = (profile.metadata as { devices?: Record<string, Record<string, string>> })
        ?.devices;
      pin = await buildPin(ctx.client, devices?.eth0, what);
      if (pin) stamps[STAMP.staticIp] = pin.address;
      await ctx.client.createInstance({
        name: tmp,
        type: def.type === "vm" ? "virtual-machine" : "container",
        source: { type: "image", alias: def.image! },
        config: stampConfig(stamps),
        ...(pin ? { devices: { eth0: pin.nic } } : {}),
        description: `isx build of ${name}`,
      }, { step: `create ${tmp} from image ${def.image}` });
    } else {
      const p = (await ctx.client.getInstance(parent)).value;
      parentBuild = readStamps(p.config)[STAMP.buildId] ?? "";
      pin = await buildPin(ctx.client, p.expanded_devices?.eth0 ?? p.devices.eth0, what);
      if (pin) stamps[STAMP.staticIp] = pin.address;
      await ctx.client.createInstance({
        name: tmp,
        source: { type: "copy", source: parent, instance_only: true },
        config: copyConfig(p.config, stamps),
        ...(pin ? { devices: { eth0: pin.nic } } : {}),
        description: `isx build of ${name}`,
      }, { step: `copy ${parent} to ${tmp}` });
    }
    at = "start the build instance";
    const start = () => startLong(ctx.client, tmp, `start ${tmp}`);
    const pinned = pin && {
      name: tmp,
      device: "eth0",
      network: pin.network,
      address: pin.address,
      stampKey: `${STAMP_PREFIX}${STAMP.staticIp}`,
      start,
    };
    // when to read its address: its lease on the bridge (mcp/host/leases.ts)
    const lease = pin
      ? watchLease(leaseFile(ctx.client.where, pin.network), { name: tmp, address: pin.address })
      : undefined;
    if (pinned) pinned.address = await startPinned(ctx.client, pinned);
    else await start();
    let ip = await waitForIpv4(ctx.client, tmp, { lease });
    if (pinned && ip !== pinned.address) {
      // the pin was leased to another client at start: the filters would drop the build's traffic
      ({ address: ip } = await repinLeased(ctx.client, pinned, ip));
    }
    await waitForRun(ctx.client, tmp);
    note(`${tmp} is running at ${ip}`);
    await ctx.client.mkdir(tmp, STAGING, { step: "create the staging directory", mode: 0o700 });
    const sctx: StepContext = {
      client: ctx.client,
      instance: tmp,
      cacheDir: ctx.cacheDir,
      host: { env: ctx.hostEnv, log: note } satisfies HostTools,
      ...(ctx.program ? { program: ctx.program } : {}),
      onOutput: (line) => {
        write(`  ${line}`);
        ctx.onEvent({ kind: "output", template: name, line });
      },
    };
    if (parent !== undefined) sctx.agent = await guestUser(ctx.client, tmp, AGENT_USER);
    for (const [i, step] of steps.entries()) {
      at = `step ${i + 1}/${steps.length} (${step.label})`;
      write(`[${i + 1}/${steps.length}] ${step.label}`);
      ctx.onEvent({
        kind: "step",
        template: name,
        index: i + 1,
        total: steps.length,
        label: step.label,
      });
      await runStep(sctx, step);
      if (!sctx.agent && step.kind === "script" && step.user === "root" && i < steps.length - 1) {
        try {
          sctx.agent = await guestUser(ctx.client, tmp, AGENT_USER);
        } catch { /* not created yet */ }
      }
    }
    at = "stop the build instance";
    // a kill loses nothing written (the page cache is the host's); a clean shutdown costs seconds
    await stopReliably(ctx.client, tmp, { force: true });
    at = "stamp and replace the template";
    const buildId = crypto.randomUUID().replaceAll("-", "").slice(0, 16);
    const final: Record<string, string> = {
      [STAMP.type]: "base",
      [STAMP.profile]: name,
      [STAMP.parent]: parent ?? "",
      [STAMP.definitionHash]: link.hash,
      [STAMP.buildId]: buildId,
      [STAMP.parentBuild]: parentBuild,
      [STAMP.version]: VERSION,
      [STAMP.builtAt]: new Date().toISOString(),
      [STAMP.layer]: link.template.layer,
      [STAMP.trusted]: String(chainTrusted(chain)),
      [STAMP.workdir]: workdirOf(chain),
      ...templateAccountStamps(accountsOf(chain)),
      // which CA its guests trust: branches are repaired when the proxy serves another
      [STAMP.caFingerprint]: await pemFingerprint(ctx.facts.caPem),
    };
    await ctx.client.updateInstance(tmp, (inst) => {
      inst.config = { ...inst.config, ...stampConfig(final) };
      // a template holds no address and grants nothing: its branches get their own pins
      for (const k of [STAMP.staticIp, STAMP.credentials]) delete inst.config[STAMP_PREFIX + k];
      if (pin) delete inst.devices.eth0;
      inst.description = def.description ?? `isx template ${name}`;
    }, { step: `stamp ${tmp}` });
    // the old template stays usable until the new one holds its name (swap.ts)
    if (await swapTemplate(incusSwapOps(ctx.client, note), tmp, name, note)) {
      note(`replaced the previous build of ${name}`);
    }
    const ms = Date.now() - started;
    note(`built ${name} in ${(ms / 1000).toFixed(1)} s`);
    ctx.onEvent({ kind: "done", template: name, ms });
    return { template: name, buildId, log, ms };
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    write(`FAILED at ${at}: ${why}`);
    throw new IsbError(
      "operation_failed",
      `build of template "${name}" failed at ${at}: ${why}. The half-built instance "${tmp}" is kept for ` +
        `inspection: isx shell ${tmp} (or incus exec ${tmp} -- bash); isx destroy ${tmp} removes it, ` +
        `and the next build replaces it. Log: ${log}`,
      { cause: e, data: { instance: tmp, log } },
    );
  } finally {
    logFile.close();
  }
}

/** The stamps of every template instance that exists (one listing). */
export async function builtTemplates(
  client: IncusClient,
): Promise<Map<string, Record<string, string>>> {
  const out = new Map<string, Record<string, string>>();
  for (const inst of await client.listInstances()) {
    const s = readStamps(inst.config);
    if (s[STAMP.type] === "base") out.set(inst.name, s);
  }
  return out;
}

/** Plans and runs the builds for `names` (see plan.ts); stops at the first failure. */
export async function buildTemplates(
  defs: Definitions,
  names: readonly string[],
  ctx: BuildContext & PlanOptions,
): Promise<BuildResult[]> {
  for (const n of names) resolveChain(defs, n); // refuse bad definitions before touching Incus
  const built = await builtTemplates(ctx.client);
  const plan = planBuilds(defs, names, built, ctx);
  ctx.onEvent({ kind: "plan", builds: plan });
  const results: BuildResult[] = [];
  for (const p of plan) results.push(await buildOne(resolveChain(defs, p.name), ctx));
  return results;
}
