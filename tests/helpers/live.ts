/**
 * Gate for tests that need a real incusd: they run whenever the socket answers (always in
 * CI, where .ci/run sets up Incus first and scripts/test.sh sets `CI` as root, so a broken
 * Incus fails the run) and are otherwise ignored with a printed reason (live_gate.ts).
 *
 * @module
 */

import {
  createIncusClient,
  type IncusClient,
  type IncusClientOptions,
  isNotFound,
  resolveRemote,
} from "../../rpc/mod.ts";
import { ciRequiresIncus, liveGate } from "./live_gate.ts";

/** The socket live tests use. */
export const LIVE_SOCKET = Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket";

/**
 * The Incus remote the live rpc tests run over instead of the socket, when
 * `ISX_TEST_INCUS_REMOTE` names one of the incus client config (`INCUS_CONF`): scripts/test.sh
 * runs the rpc live suite a second time so, against this host's incusd over HTTPS on loopback
 * with a trusted client certificate. The programs the tests spawn get `--remote NAME` and a
 * socket that leads nowhere, so nothing can fall back to the socket unnoticed.
 */
export const LIVE_REMOTE: string | undefined = Deno.env.get("ISX_TEST_INCUS_REMOTE") || undefined;

const NOWHERE = "/nonexistent/isx-test/unix.socket";

/** The client options of the live incusd: the socket, or {@link LIVE_REMOTE} over HTTPS. */
export function liveIncusOptions(): IncusClientOptions {
  if (!LIVE_REMOTE) return { socket: LIVE_SOCKET };
  const confDir = Deno.env.get("INCUS_CONF") || `${Deno.env.get("HOME") ?? "/root"}/.config/incus`;
  const read = (path: string) => {
    try {
      return Deno.readTextFileSync(path);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return undefined;
      throw e;
    }
  };
  const ep = resolveRemote(LIVE_REMOTE, { confDir, socket: NOWHERE, read });
  if (!("url" in ep)) {
    throw new Error(`ISX_TEST_INCUS_REMOTE=${LIVE_REMOTE} is not an HTTPS remote`);
  }
  return { url: ep.url, tls: ep.tls };
}

/** A client of the live incusd (see {@link liveIncusOptions}). */
export function liveIncus(extra: Partial<IncusClientOptions> = {}): IncusClient {
  return createIncusClient({ ...liveIncusOptions(), ...extra });
}

/** The global flags a spawned `isb`/`isx` gets to reach the live incusd. */
export const LIVE_ARGS: readonly string[] = LIVE_REMOTE
  ? ["--socket", NOWHERE, "--remote", LIVE_REMOTE]
  : ["--socket", LIVE_SOCKET];

/** The image live tests launch (built by scripts/host-setup.sh). */
export const LIVE_IMAGE = Deno.env.get("ISX_TEST_IMAGE") || "debian-base";

async function probe(): Promise<string | undefined> {
  try {
    const client = Deno.createHttpClient({ proxy: { transport: "unix", path: LIVE_SOCKET } });
    try {
      const res = await fetch("http://incus/1.0/instances", {
        client,
        signal: AbortSignal.timeout(30_000),
      });
      await res.body?.cancel();
      return res.ok ? undefined : `incusd at ${LIVE_SOCKET} answered HTTP ${res.status}`;
    } finally {
      client.close();
    }
  } catch (e) {
    return `no incusd at ${LIVE_SOCKET}: ${(e as Error).message}`;
  }
}

// A busy incusd can stall for tens of seconds; in CI (where a live Incus is required) the
// probe is retried for up to two minutes before the live tests count as failed.
const reason = await liveGate({
  probe,
  ci: ciRequiresIncus(Deno.env.get("CI")),
  retryMs: 120_000,
  now: () => Date.now(),
  sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
}).catch((e: Error) => {
  // deno-lint-ignore no-console
  console.error(`live Incus tests cannot run: ${e.message} (run scripts/host-setup.sh)`);
  throw e;
});
if (reason !== undefined) {
  // deno-lint-ignore no-console
  console.error(`live Incus tests skipped: ${reason} (run scripts/host-setup.sh)`);
}

/** True when the live tests are ignored (no incusd). */
export const NO_INCUS: boolean = reason !== undefined;

/** A unique instance name for a test: `t-<area>-<random>`. */
export function testName(area: string): string {
  return `t-${area}-${crypto.randomUUID().slice(0, 8)}`;
}

/** Deletes `name` whatever state it is in, retrying while Incus is still busy with it. */
export async function removeInstance(incus: IncusClient, name: string): Promise<void> {
  let absent = 0;
  let seen = false;
  const until = Date.now() + 120_000;
  while (Date.now() < until) {
    try {
      await incus.getInstance(name);
      seen = true;
    } catch (e) {
      // A create that timed out on our side may still land: look a few times before leaving.
      if (isNotFound(e) && (seen || ++absent >= 5)) return;
      if (isNotFound(e)) {
        await new Promise((r) => setTimeout(r, 2000));
        continue;
      }
    }
    await incus.stopInstance(name, { step: `stop ${name}`, force: true }).catch(() => {});
    await incus.deleteInstance(name, { step: `delete ${name}` }).catch(() => {});
    await new Promise((r) => setTimeout(r, 1000)); // retry pace, not a wait for a state
  }
  throw new Error(`could not delete test instance ${name}`);
}

/** Polls `probe` every `everyMs` until it gives a value; after `ms` throws naming `what`. */
export async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  ms = 60_000,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
