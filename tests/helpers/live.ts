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
  resolveRemote,
} from "../../rpc/base.ts";
import { ciRequiresIncus, liveGate } from "./live_gate.ts";
import {
  createLab,
  type Lab,
  labNames,
  newLabId,
  removeLab,
  setActiveLab,
  sweepLabs,
} from "./lab.ts";

export { removeInstance, testName, until } from "./incus_wait.ts";

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

/**
 * The lab this test file runs in (tests/helpers/lab.ts): the suite's (`ISX_TEST_LAB`, made by
 * scripts/test.sh through tests/guest/user_side.ts) or one of this file's own, made below
 * and removed after its last test.
 */
const SUITE_LAB = Deno.env.get("ISX_TEST_LAB") || undefined;
export const LAB: Lab = labNames(SUITE_LAB ?? newLabId());
/** The Incus project every live test works in (never the user's). */
export const LIVE_PROJECT: string = LAB.project;
/** The bridge live instances are on and test proxies listen on (never the user's). */
export const LIVE_BRIDGE: string = LAB.bridge;
/** The proxy-only bridge of tests that need one (never `isxproxy0`, which the user's proxy serves). */
export const LIVE_PROXY_ONLY_BRIDGE: string = LAB.proxyOnlyBridge;

/** The client options of the live incusd: the socket, or {@link LIVE_REMOTE} over HTTPS. */
export function liveIncusOptions(): IncusClientOptions {
  if (!LIVE_REMOTE) return { socket: LIVE_SOCKET, project: LIVE_PROJECT };
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
  return { url: ep.url, tls: ep.tls, project: LIVE_PROJECT };
}

/** A client of the live incusd (see {@link liveIncusOptions}). */
export function liveIncus(extra: Partial<IncusClientOptions> = {}): IncusClient {
  return createIncusClient({ ...liveIncusOptions(), ...extra });
}

/** The global flags a spawned `isb`/`isx` gets to reach the live incusd, in the lab's project. */
export const LIVE_ARGS: readonly string[] = LIVE_REMOTE
  ? ["--socket", NOWHERE, "--remote", LIVE_REMOTE, "--project", LIVE_PROJECT]
  : ["--socket", LIVE_SOCKET, "--project", LIVE_PROJECT];

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

let ownLab = false;

/**
 * Removes this process's own lab (not the suite's). `deno test` does it after a file's last
 * test; a script run with `deno run` (tests/live/_record_fixtures.ts) calls it when done, or
 * the next run's sweep does.
 */
export async function closeLiveLab(): Promise<void> {
  if (!ownLab) return;
  const c = liveIncus({ timeouts: { requestMs: 120_000 } });
  try {
    await removeLab(c, LAB);
    ownLab = false;
  } finally {
    c.close();
  }
}

if (!NO_INCUS) {
  const incus = liveIncus({ timeouts: { requestMs: 120_000 } });
  try {
    if (SUITE_LAB) {
      // made by the suite's first step; a missing one is an error, not a reason to use the user's
      await incus.withProject("default").call("GET", `/1.0/projects/${LAB.project}`).catch((e) => {
        throw new Error(`ISX_TEST_LAB=${SUITE_LAB}: no lab project ${LAB.project}: ${e.message}`);
      });
    } else {
      await sweepLabs(incus);
      await createLab(incus, LAB.id);
      ownLab = true;
      Deno.test.afterAll(closeLiveLab);
    }
  } finally {
    incus.close();
  }
  setActiveLab(LAB);
  // every isb/isx a test starts works in the lab's project unless it says otherwise; the
  // variable is the process's, so the next test file (maybe not a live one) gets it back
  const was = Deno.env.get("INCUS_PROJECT");
  Deno.env.set("INCUS_PROJECT", LIVE_PROJECT);
  Deno.test.afterAll(() => {
    if (was === undefined) Deno.env.delete("INCUS_PROJECT");
    else Deno.env.set("INCUS_PROJECT", was);
  });
}

/**
 * A proxy's `/activity` as the lab's instances: the proxy names an instance outside the
 * default project `<project>/<name>` (proxy/callers/_identity.ts); this keeps the lab's,
 * under their bare names, so a test looks its instances up by the names it gave them.
 */
export function ofLab<E, T extends { instances: Record<string, E> }>(activity: T): T {
  const prefix = `${LIVE_PROJECT}/`;
  const instances = Object.fromEntries(
    Object.entries(activity.instances).filter(([k]) => k.startsWith(prefix)).map((
      [k, v],
    ) => [k.slice(prefix.length), v]),
  );
  return { ...activity, instances };
}
