/**
 * Waiting on instances and operations from the host: operations of any length (a long
 * `wait` that runs out of time is not a failure), a start, a stop that must end Stopped,
 * an IPv4 address, systemd's /run. Polls use a deadline and a short fixed step.
 *
 * @module
 */

import { type AsyncReply, type IncusClient, IsbError, type Operation } from "../../rpc/base.ts";
import { after } from "../../rpc/timer.ts";
import type { LeaseWatch } from "./leases.ts";

// the runtime's timer, not the global setTimeout, whose first call loads Node's timers
// (rpc/timer.ts): isx branch's first poll would pay that beside the guest's boot
function sleep(ms: number): Promise<void> {
  return new Promise((r) => after(ms, r));
}

/**
 * Waits for an operation of any length. incusd 6.0 answers a long-poll `wait` that runs out
 * of time with HTTP 500 "context deadline exceeded", which says nothing about the
 * operation, so every error is checked against the operation's own state.
 */
export async function waitLong(
  client: IncusClient,
  op: AsyncReply,
  opts: { step: string; deadlineMs: number },
): Promise<Operation> {
  const id = op.metadata.id;
  const until = Date.now() + opts.deadlineMs;
  let cur: Operation = op.metadata;
  while (cur.status_code < 200) {
    if (Date.now() > until) {
      throw new IsbError(
        "operation_timeout",
        `${opts.step}: still ${cur.status} after ${opts.deadlineMs} ms`,
      );
    }
    try {
      const r = await client.call("GET", `/1.0/operations/${id}/wait`, {
        query: { timeout: 20 },
        timeoutMs: 40_000,
      });
      if (r.kind === "sync") cur = r.metadata as Operation;
    } catch {
      const r = await client.call("GET", `/1.0/operations/${id}`);
      if (r.kind === "sync") cur = r.metadata as Operation;
    }
  }
  if (cur.status_code !== 200) {
    throw new IsbError("operation_failed", `${opts.step} failed: ${cur.err || cur.status}`);
  }
  return cur;
}

/** Starts an instance and waits however long incusd takes. */
export async function startLong(client: IncusClient, name: string, step: string): Promise<void> {
  const r = await client.call("PUT", `/1.0/instances/${encodeURIComponent(name)}/state`, {
    body: { action: "start" },
  });
  if (r.kind === "async") await waitLong(client, r, { step, deadlineMs: 300_000 });
}

/** How often the state is read while a lease watch has not seen the lease (a guest that never
 * asks dnsmasq, or another address given, is still found). */
const UNLEASED_STATE_MS = 250;
/** How often a lease watch reads the lease file (a read of a few hundred bytes). */
const LEASE_STEP_MS = 5;
/** How often the state is read once the lease is seen (the guest sets it up in a few ms)... */
const LEASED_STEP_MS = 10;
/** ...for this long; a guest leased but still without the address is read every `stepMs`. */
const LEASED_FAST_MS = 1_000;

/**
 * Waits for an IPv4 address on a non-loopback interface; returns it. The state is read every
 * `stepMs` (25), or, with a `lease` watch (./leases.ts), every 250 ms before the guest's lease
 * appears and every 10 ms for a second after: each state read costs incusd a fork into the
 * guest's namespace, CPU the booting guest is short of.
 */
export async function waitForIpv4(
  client: IncusClient,
  name: string,
  opts: { deadlineMs?: number; stepMs?: number; lease?: LeaseWatch | undefined } = {},
): Promise<string> {
  const limit = opts.deadlineMs ?? 60_000;
  const until = Date.now() + limit;
  const step = opts.stepMs ?? 25;
  // the first read at once: a restarted guest may hold its address already
  let readAt = 0;
  let leasedAt: number | undefined;
  for (;;) {
    const lease = opts.lease?.state() ?? "off";
    if (lease === "leased") leasedAt ??= Date.now();
    if (lease !== "waiting" || Date.now() >= readAt) {
      const st = await client.getInstanceState(name);
      for (const [dev, n] of Object.entries(st.network ?? {})) {
        if (dev === "lo") continue;
        const a = n.addresses.find((x) => x.family === "inet" && x.scope === "global");
        if (a) return a.address;
      }
      if (st.status !== "Running") {
        throw new IsbError(
          "not_ready",
          `wait for an IPv4 address of "${name}": it is ${st.status}`,
        );
      }
      readAt = Date.now() + UNLEASED_STATE_MS;
    }
    if (Date.now() > until) {
      throw new IsbError(
        "not_ready",
        `wait for an IPv4 address of "${name}": none after ${limit} ms`,
      );
    }
    const fast = leasedAt !== undefined && Date.now() - leasedAt < LEASED_FAST_MS;
    await sleep(lease === "waiting" ? LEASE_STEP_MS : fast ? LEASED_STEP_MS : step);
  }
}

/** Whether systemd has mounted /run now (one read of `/run/systemd/system`). */
export async function runMounted(client: IncusClient, name: string): Promise<boolean> {
  try {
    await client.pullFile(name, "/run/systemd/system");
    return true;
  } catch (e) {
    if (!(e instanceof IsbError) || e.code !== "not_found") throw e;
    return false;
  }
}

/** Waits until systemd has mounted /run (files written earlier would be hidden under it). */
export async function waitForRun(
  client: IncusClient,
  name: string,
  opts: { deadlineMs?: number } = {},
): Promise<void> {
  const limit = opts.deadlineMs ?? 30_000;
  const until = Date.now() + limit;
  for (;;) {
    if (await runMounted(client, name)) return;
    if (Date.now() > until) {
      throw new IsbError(
        "not_ready",
        `wait for systemd in "${name}": /run is not mounted after ${limit} ms`,
      );
    }
    await sleep(20);
  }
}

/** Stops cleanly (then forcibly), and is satisfied by a Stopped state whatever errors came. */
export async function stopReliably(
  client: IncusClient,
  name: string,
  opts: { timeoutSecs?: number; force?: boolean } = {},
): Promise<void> {
  try {
    if (opts.force) await client.stopInstance(name, { step: `stop ${name}`, force: true });
    else {await client.stopInstanceOrKill(name, {
        step: `stop ${name}`,
        timeoutSecs: opts.timeoutSecs ?? 30,
      });}
    return;
  } catch (e) {
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      try {
        if ((await client.getInstanceState(name)).status === "Stopped") return;
      } catch { /* incusd answers 500 while a container is half stopped */ }
      await sleep(250);
    }
    throw e;
  }
}
