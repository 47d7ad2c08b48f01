/**
 * CA repair (shared/spec/isx-mcp.md §2.16): an instance trusts the proxy CA its template
 * was built with (stamped `ca-sha256` at build, copied to each branch). When the proxy now
 * signs with another CA (a template built under another isx home, or before the CA was
 * renewed), every TLS call of the guest would fail with "self-signed certificate in
 * certificate chain". {@link repairGuestCa} writes the served CA where the guest's trust
 * store and `NODE_EXTRA_CA_CERTS` look, refreshes the trust store, and restamps the
 * instance, so the next start sees nothing to do. The refresh is a file edit when it can be
 * (the old certificate's text replaced in `/etc/ssl/certs/ca-certificates.crt`; same subject,
 * so the hashed link still names `isx-proxy.pem`): 80 ms through the files API, where
 * `update-ca-certificates` (the fallback) takes 0.8 to 1.5 s (bench/ca_repair_bench.ts). The
 * guest's files are read only when Incus says they are regular files of a sane size (root in
 * the guest controls them); anything else takes the fallback, which runs in the guest. The template keeps its build-time CA
 * until rebuilt (`isx list` marks it); only instances are repaired.
 *
 * @module
 */

import { type IncusClient, IsbError, x509Lib } from "../../rpc/base.ts";
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

/** Debian's system bundle, which update-ca-certificates writes. */
export const GUEST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";

async function subject(pem: string): Promise<string | undefined> {
  try {
    return new (await x509Lib()).X509Certificate(pem).subject;
  } catch {
    return undefined;
  }
}

/** The bundle with `old` replaced by `pem`, when that keeps the store valid (pure but x509). */
export async function replacedBundle(
  bundle: string,
  old: string,
  pem: string,
): Promise<string | undefined> {
  const [o, n] = [old.trim(), pem.trim()];
  if (!o || !bundle.includes(o) || !n.startsWith("-----BEGIN CERTIFICATE-----")) return undefined;
  const [so, sn] = await Promise.all([subject(o), subject(n)]);
  if (!so || so !== sn) return undefined; // another subject hash: the hashed link must change
  return bundle.replace(o, n);
}

/** Sizes beyond which a guest's file is not read into this process (the guest controls it). */
const MAX_READ = { cert: 64 * 1024, bundle: 8 * 1024 * 1024 };

/** A guest file's text, or "" when it is missing, not a regular file or larger than `max`. */
async function pullText(
  client: IncusClient,
  name: string,
  path: string,
  max: number,
): Promise<string> {
  const at = `/1.0/instances/${encodeURIComponent(name)}/files`;
  try {
    // root in the guest may have planted a huge file or a link: look before reading
    const head = await client.raw("HEAD", at, { query: { path } });
    const size = Number(head.headers.get("content-length") ?? "NaN");
    if (head.status !== 200 || head.headers.get("x-incus-type") !== "file" || !(size <= max)) {
      return "";
    }
    return new TextDecoder().decode((await client.pullFile(name, path)).data);
  } catch {
    return "";
  }
}

/** Writes the served CA into a running guest, refreshes its trust store, restamps it. */
export async function repairGuestCa(
  client: IncusClient,
  name: string,
  ca: { pem: string; fingerprint: string },
): Promise<void> {
  const [old, bundle] = await Promise.all([
    pullText(client, name, GUEST_CA_PATH, MAX_READ.cert),
    pullText(client, name, GUEST_CA_BUNDLE, MAX_READ.bundle),
  ]);
  const file = { uid: 0, gid: 0, mode: 0o644 };
  await client.pushFile(name, GUEST_CA_PATH, ca.pem, {
    step: `write the proxy CA into ${name}`,
    ...file,
  });
  const edited = await replacedBundle(bundle, old, ca.pem);
  if (edited !== undefined) {
    await client.pushFile(name, GUEST_CA_BUNDLE, edited, {
      step: `update the trust store of ${name}`,
      ...file,
    });
  } else await refreshTrustStore(client, name);
  await client.updateInstance(name, (i) => {
    i.config = { ...i.config, [stampKey(STAMP.caFingerprint)]: ca.fingerprint };
  }, { step: `stamp the trusted CA of ${name}` });
}

async function refreshTrustStore(client: IncusClient, name: string): Promise<void> {
  await waitForRun(client, name);
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
}
