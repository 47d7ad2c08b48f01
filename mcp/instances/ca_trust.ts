/**
 * CA repair (shared/spec/isx-mcp.md §2.16): an instance trusts the proxy CA its template
 * was built with (stamped `ca-sha256` at build, copied to each branch). When the proxy now
 * signs with another CA (a template built under another isx home, or before the CA was
 * renewed), every TLS call of the guest would fail with "self-signed certificate in
 * certificate chain". {@link repairGuestCa} writes the served CA where the guest's trust
 * store and `NODE_EXTRA_CA_CERTS` look, runs `update-ca-certificates`, and restamps the
 * instance, so the next start sees nothing to do. The template keeps its build-time CA
 * until rebuilt (`isx list` marks it); only instances are repaired.
 *
 * @module
 */

import { type IncusClient, IsbError } from "../../rpc/mod.ts";
import { capture } from "../host/guest.ts";
import { waitForRun } from "../host/waits.ts";
import { readStamps, STAMP, stampKey } from "../host/stamps.ts";
import { GUEST_CA_PATH } from "../templates/steps.ts";

/** The fingerprint an instance or template trusts, if stamped (older builds are not). */
export function trustedCa(config: Record<string, string> | undefined): string | undefined {
  return readStamps(config)[STAMP.caFingerprint] || undefined;
}

/** Whether a guest trusting `trusted` must be repaired to work with `served` (pure). */
export function needsCaRepair(trusted: string | undefined, served: string): boolean {
  return trusted !== served;
}

/** Writes the served CA into a running guest, refreshes its trust store, restamps it. */
export async function repairGuestCa(
  client: IncusClient,
  name: string,
  ca: { pem: string; fingerprint: string },
): Promise<void> {
  await waitForRun(client, name);
  await client.pushFile(name, GUEST_CA_PATH, ca.pem, {
    step: `write the proxy CA into ${name}`,
    uid: 0,
    gid: 0,
    mode: 0o644,
  });
  try {
    await capture(client, name, ["update-ca-certificates"], {
      step: "refresh the trust store (update-ca-certificates)",
      // early in boot /tmp may not be mounted yet; /var/tmp is on the root file system
      env: { TMPDIR: "/var/tmp" },
    });
  } catch (e) {
    throw new IsbError(
      "operation_failed",
      `repair the proxy CA of "${name}": ${(e as Error).message}; rebuild its template (isx build)`,
      { cause: e },
    );
  }
  await client.updateInstance(name, (i) => {
    i.config = { ...i.config, [stampKey(STAMP.caFingerprint)]: ca.fingerprint };
  }, { step: `stamp the trusted CA of ${name}` });
}
