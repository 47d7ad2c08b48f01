/**
 * The host CA and the leaf certificates the proxy terminates TLS with, ECDSA P-256 on Deno's
 * WebCrypto. The CA (once per host) is made with `@peculiar/x509`; leaves, issued at every
 * proxy start and per server name, are written by proxy/tls/_leaf_der.ts so the long-running
 * proxy never loads that library (issue 11).
 *
 * The CA is made once (`<stateDir>/ca/ca.crt` 0644, `ca.key` 0600 in a 0700 directory) and
 * its key never leaves the host; templates install `ca.crt` so guests trust the proxy. A
 * key file readable by anyone but its owner is refused. Leaves are issued in memory and never
 * written: one per server name a guest asks for, on first use (proxy/tls/leaf_cache.ts, served
 * per SNI by proxy/tls/sni.ts), or, where the runtime has no SNI hook, one naming every
 * intercepted domain and its one-level wildcard (see docs/decisions.md).
 *
 * @module
 */

import { IsbError, pemToDer, x509Lib } from "../../rpc/base.ts";
import { type IssuerInfo, issuerInfo, pem, signLeaf, unpem } from "./_leaf_der.ts";

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY = 86_400_000;

/** What anyone may know about the CA. */
export interface CaInfo {
  /** Path of the CA certificate. */
  certPath: string;
  /** The CA certificate, PEM. */
  certPem: string;
  /** SHA-256 of the certificate (DER), upper-case hex pairs joined by `:`. */
  fingerprint: string;
}

/** A CA able to sign (private key in memory; never printed). */
export class CaSigner {
  /** The CA certificate, PEM. */
  readonly certPem: string;
  /** SHA-256 fingerprint of the certificate. */
  readonly fingerprint: string;
  readonly #key: CryptoKey;
  #issuer: Promise<IssuerInfo> | undefined; // read from the certificate on first signing

  /** Creates it (nothing runs until a start or a call). */
  constructor(certPem: string, key: CryptoKey, fingerprint: string) {
    this.certPem = certPem;
    this.fingerprint = fingerprint;
    this.#key = key;
  }

  /** Signs a leaf for `names` (DNS names, `*.` wildcards allowed) valid for about a year. */
  async issueLeaf(
    names: readonly string[],
    opts: { now?: number } = {},
  ): Promise<{ certPem: string; keyPem: string }> {
    if (names.length === 0) throw new RangeError("issueLeaf: no names");
    const now = opts.now ?? Date.now();
    this.#issuer ??= issuerInfo(pemToDer(this.certPem));
    const { certDer, keyDer } = await signLeaf(await this.#issuer, this.#key, {
      names,
      serial: serial(),
      notBefore: now - DAY,
      notAfter: now + 397 * DAY,
    });
    return {
      certPem: `${pem("CERTIFICATE", certDer)}\n${this.certPem.trim()}\n`,
      keyPem: `${pem("PRIVATE KEY", keyDer)}\n`,
    };
  }

  /** What printing shows. */
  [Symbol.for("Deno.customInspect")](): string {
    return `CaSigner(${this.fingerprint})`;
  }
}

function serial(): Uint8Array {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[0] = b[0]! & 0x7f | 0x10;
  return b;
}

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** SHA-256 fingerprint of a PEM certificate (the first one in the text). */
export async function certFingerprint(certPem: string): Promise<string> {
  const der = pemToDer(certPem);
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", der));
  return Array.from(d, (x) => x.toString(16).padStart(2, "0").toUpperCase()).join(":");
}

/** Makes a new self-signed CA (not written anywhere). */
export async function createCa(
  opts: { commonName?: string; now?: number } = {},
): Promise<{ certPem: string; keyPem: string }> {
  const now = opts.now ?? Date.now();
  const keys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]) as CryptoKeyPair;
  const x509 = await x509Lib();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: hex(serial()),
    name: `CN=${opts.commonName ?? "isx proxy CA"}, O=isx`,
    notBefore: new Date(now - DAY),
    notAfter: new Date(now + 10 * 365 * DAY),
    signingAlgorithm: ALG,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return {
    certPem: `${cert.toString("pem")}\n`,
    keyPem: `${x509.PemConverter.encode(pkcs8, "PRIVATE KEY")}\n`,
  };
}

/** A signer from PEM texts. */
export async function signerFromPem(certPem: string, keyPem: string): Promise<CaSigner> {
  let key: CryptoKey;
  try {
    const der = unpem("PRIVATE KEY", keyPem);
    key = await crypto.subtle.importKey("pkcs8", der, ALG, false, ["sign"]);
  } catch (e) {
    throw new IsbError(
      "invalid",
      `load CA key: not a PKCS#8 ECDSA P-256 key: ${(e as Error).name}`,
    );
  }
  return new CaSigner(certPem, key, await certFingerprint(certPem));
}

async function exists(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new IsbError("io", `stat "${path}": ${(e as Error).message}`);
  }
}

function checkKeyMode(path: string, info: Deno.FileInfo): void {
  const mode = (info.mode ?? 0) & 0o777;
  if (mode & 0o077) {
    throw new IsbError(
      "forbidden",
      `load CA key "${path}": mode ${mode.toString(8).padStart(4, "0")} is wider than 0600`,
    );
  }
}

/** Creates the host CA in `dir` unless it exists; returns the public part. */
export async function ensureCa(dir: string): Promise<CaInfo> {
  const certPath = `${dir}/ca.crt`;
  const keyPath = `${dir}/ca.key`;
  const [c, k] = [await exists(certPath), await exists(keyPath)];
  if (c && k) {
    checkKeyMode(keyPath, k);
  } else if (c || k) {
    throw new IsbError(
      "invalid",
      `create CA in "${dir}": only one of ca.crt and ca.key exists; remove it first`,
    );
  } else {
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
    await Deno.chmod(dir, 0o700);
    const ca = await createCa();
    const tag = `${Deno.pid}.${crypto.randomUUID().slice(0, 8)}`;
    await Deno.writeTextFile(`${keyPath}.${tag}`, ca.keyPem, { mode: 0o600 });
    await Deno.chmod(`${keyPath}.${tag}`, 0o600);
    await Deno.writeTextFile(`${certPath}.${tag}`, ca.certPem, { mode: 0o644 });
    await Deno.chmod(`${certPath}.${tag}`, 0o644);
    await Deno.rename(`${keyPath}.${tag}`, keyPath);
    await Deno.rename(`${certPath}.${tag}`, certPath);
  }
  const certPem = await Deno.readTextFile(certPath);
  return { certPath, certPem, fingerprint: await certFingerprint(certPem) };
}

/** Loads the host CA for signing (creating it first if needed). */
export async function loadCa(dir: string): Promise<CaSigner> {
  const info = await ensureCa(dir);
  const keyPath = `${dir}/ca.key`;
  const k = await exists(keyPath);
  if (k) checkKeyMode(keyPath, k);
  return signerFromPem(info.certPem, await Deno.readTextFile(keyPath));
}
