/**
 * The host-side files of a sandbox's egress secrets (isb-rpc.md §13): the per-bridge CA the
 * proxy terminates TLS with, the secrets file the proxy substitutes placeholders from, and
 * the guest-side work of trusting the CA.
 *
 * Everything lives under `<isbStateDir>/egress/<bridge>/` (0700): `ca.key` (0600), `ca.crt`,
 * and `secrets.json` (0600, the team contract:
 * `{"instance": "<project>/<name>", "secrets": [{"env","placeholder","hosts","value"}]}`).
 * The CA pair appears at once (a temp directory renamed into place; a loser of that race
 * uses the winner's); `secrets.json` is written to a temp file and renamed. Secret values
 * are held in {@link SecretValue}, which never prints or serialises its value; they are
 * read from the server's environment (`SECRET` if named, else `ENV`) and go nowhere but that
 * file. Only the certificate enters the guest.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";
import { x509Lib } from "../../x509.ts";
import type { IncusClient } from "../../incus/mod.ts";
import { entryString, type SecretBinding } from "../spec/egress_policy.ts"; // no schemas
import { ensureGuestDir } from "../instances/guest_dir.ts";

/** A secret's value: shows its length only, in every printing or serialising path. */
export class SecretValue {
  #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  /** The value, for the one place that stores it. */
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return `(secret, ${this.#value.length} chars)`;
  }
  toString(): string {
    return this.toJSON();
  }
  [Symbol.for("Deno.customInspect")](): string {
    return `SecretValue(${this.#value.length} chars)`;
  }
}

/** A CA: its certificate and key, PEM. */
export interface EgressCa {
  certPem: string;
  keyPem: string;
}

/** The directory of one bridge's egress state. */
export function egressDir(stateDir: string, bridge: string): string {
  return `${stateDir}/egress/${bridge}`;
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** The bridge's CA, if one exists. */
export async function loadCa(stateDir: string, bridge: string): Promise<EgressCa | undefined> {
  const d = egressDir(stateDir, bridge);
  const [certPem, keyPem] = [await readText(`${d}/ca.crt`), await readText(`${d}/ca.key`)];
  return certPem && keyPem ? { certPem, keyPem } : undefined;
}

async function generateCa(bridge: string): Promise<EgressCa> {
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = await crypto.subtle.generateKey(alg, true, ["sign", "verify"]) as CryptoKeyPair;
  const now = Date.now();
  const serial = Array.from(crypto.getRandomValues(new Uint8Array(12)))
    .map((b) => b.toString(16).padStart(2, "0")).join("").replace(/^[89a-f]/, "1");
  const x509 = await x509Lib();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial,
    name: `CN=isb egress CA ${bridge}`,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 5 * 365 * 86_400_000),
    signingAlgorithm: alg,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign |
          x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return {
    certPem: cert.toString("pem") + "\n",
    keyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY") + "\n",
  };
}

async function privateDir(path: string): Promise<void> {
  await Deno.mkdir(path, { recursive: true, mode: 0o700 });
  await Deno.chmod(path, 0o700);
}

let tmpCounter = 0;

/** The bridge's CA, made now when there is none; safe against a concurrent maker. */
export async function ensureCa(stateDir: string, bridge: string): Promise<EgressCa> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const have = await loadCa(stateDir, bridge);
    if (have) return have;
    const ca = await generateCa(bridge);
    const root = `${stateDir}/egress`;
    await privateDir(root);
    const tmp = `${root}/.${bridge}.${Deno.pid}.${tmpCounter++}.tmp`;
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    await privateDir(tmp);
    await Deno.writeTextFile(`${tmp}/ca.key`, ca.keyPem, { mode: 0o600 });
    await Deno.writeTextFile(`${tmp}/ca.crt`, ca.certPem, { mode: 0o644 });
    try {
      await Deno.rename(tmp, egressDir(stateDir, bridge));
      return ca;
    } catch {
      // Another process won, or an old directory without a CA is in the way.
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      const won = await loadCa(stateDir, bridge);
      if (won) return won;
      await Deno.remove(egressDir(stateDir, bridge), { recursive: true }).catch(() => {});
    }
  }
  throw new IsbError("io", `egress CA for ${bridge}: could not be created in ${stateDir}/egress`);
}

/** Touches `egress/kick`, so a running proxy notices a changed egress network now. */
export async function kick(stateDir: string): Promise<void> {
  try {
    await Deno.mkdir(`${stateDir}/egress`, { recursive: true, mode: 0o700 });
    await Deno.writeTextFile(`${stateDir}/egress/kick`, String(Date.now() * 1e6));
  } catch { /* best effort */ }
}

/** Deletes the bridge's CA and secrets (missing is fine). */
export async function forgetEgress(stateDir: string, bridge: string): Promise<void> {
  await Deno.remove(egressDir(stateDir, bridge), { recursive: true }).catch(() => {});
}

/** Each secret's value from the server environment; a missing one is `invalid`. */
export function secretValues(
  secrets: readonly SecretBinding[],
  env: Readonly<Record<string, string>>,
): Map<string, SecretValue> {
  const out = new Map<string, SecretValue>();
  for (const s of secrets) {
    const value = env[s.secret];
    if (value === undefined || value === "") {
      throw new IsbError(
        "invalid",
        `egress secret ${s.env}: ${s.secret} is not set in the environment of isb rpc`,
      );
    }
    out.set(s.env, new SecretValue(value));
  }
  return out;
}

/** Writes `secrets.json` (0600) for the proxy, atomically. */
export async function writeSecretsFile(
  stateDir: string,
  opts: {
    bridge: string;
    owner: string;
    secrets: readonly SecretBinding[];
    values: Map<string, SecretValue>;
  },
): Promise<void> {
  const dir = egressDir(stateDir, opts.bridge);
  await privateDir(dir);
  const doc = {
    instance: opts.owner,
    secrets: opts.secrets.map((s) => ({
      env: s.env,
      placeholder: s.placeholder,
      hosts: s.hosts.map(entryString),
      value: opts.values.get(s.env)?.reveal() ?? "",
    })),
  };
  const tmp = `${dir}/.secrets.${Deno.pid}.${tmpCounter++}.tmp`;
  await Deno.writeTextFile(tmp, JSON.stringify(doc) + "\n", { mode: 0o600 });
  await Deno.chmod(tmp, 0o600);
  await Deno.rename(tmp, `${dir}/secrets.json`);
}

/** A short fingerprint of a CA certificate: hex of the first 8 bytes of SHA-256 of the PEM. */
export async function caFingerprint(certPem: string): Promise<string> {
  const d = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(certPem)),
  );
  return Array.from(d.slice(0, 8)).map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Config key recording which CA the guest trusts. */
export const KEY_CA_INSTALLED = "user.isb.egress-ca";
const GUEST_CA = "/etc/isb/egress-ca.crt";

/** A fixed script (no input is ever spliced in): system store + a bundle of roots plus the CA. */
const INSTALL = `set -e
if [ -d /usr/local/share/ca-certificates ] || command -v update-ca-certificates >/dev/null 2>&1; then
  mkdir -p /usr/local/share/ca-certificates
  cp /etc/isb/egress-ca.crt /usr/local/share/ca-certificates/isb-egress-ca.crt
  update-ca-certificates >/dev/null 2>&1 || true
elif [ -d /etc/pki/ca-trust/source/anchors ]; then
  cp /etc/isb/egress-ca.crt /etc/pki/ca-trust/source/anchors/isb-egress-ca.crt
  update-ca-trust extract >/dev/null 2>&1 || true
fi
sys=
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/ca-bundle.pem /etc/ssl/cert.pem; do
  if [ -s "$f" ] && ! grep -q "isb egress CA" "$f" 2>/dev/null; then sys="$f"; break; fi
done
if [ -n "$sys" ]; then cat "$sys" /etc/isb/egress-ca.crt > /etc/isb/egress-ca-bundle.pem; else cp /etc/isb/egress-ca.crt /etc/isb/egress-ca-bundle.pem; fi
chmod 0644 /etc/isb/egress-ca-bundle.pem
`;

/** Makes the guest trust `ca` (once: the fingerprint is recorded on the instance). */
export async function installCa(incus: IncusClient, name: string, ca: EgressCa): Promise<void> {
  const want = await caFingerprint(ca.certPem);
  const inst = (await incus.getInstance(name)).value;
  if (inst.config[KEY_CA_INSTALLED] === want) return;
  await ensureGuestDir(incus, name, "/etc/isb");
  await incus.pushFile(name, GUEST_CA, ca.certPem, {
    step: `push the egress CA to ${name}`,
    uid: 0,
    gid: 0,
    mode: 0o644,
  });
  const r = await incus.execCapture(name, ["sh", "-c", INSTALL], { timeoutMs: 60_000 });
  if (r.exitCode !== 0) {
    const why = new TextDecoder().decode(r.stderr).trim();
    throw new IsbError("invalid", `${name}: installing the egress CA failed: ${why}`);
  }
  await incus.updateInstance(name, (i) => {
    i.config[KEY_CA_INSTALLED] = want;
  }, { step: `record the egress CA on ${name}` });
}
