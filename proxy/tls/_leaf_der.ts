/**
 * Leaf certificates written as DER by hand: the few structures a TLS server leaf needs
 * (RFC 5280), signed with the CA's key through WebCrypto. The proxy issues a leaf at every
 * start and per new server name; doing it with `@peculiar/x509` kept that library and its
 * reflect polyfill resident, ~20 MiB of the proxy's ~80 (issue 11). The library still makes
 * the CA (once per host, proxy/tls/ca.ts) and checks these leaves in the tests.
 *
 * Pure except for the key generation and signing (WebCrypto), which are the point.
 *
 * @module
 */

const ALG = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGN = { name: "ECDSA", hash: "SHA-256" } as const;

/** One DER element: tag, length, contents. */
function tlv(tag: number, ...parts: Uint8Array[]): Uint8Array {
  const n = parts.reduce((a, p) => a + p.length, 0);
  const len = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : n < 0x10000 ? [0x82, n >> 8, n & 0xff] : [
    0x83,
    n >> 16,
    (n >> 8) & 0xff,
    n & 0xff,
  ];
  const out = new Uint8Array(1 + len.length + n);
  out[0] = tag;
  out.set(len, 1);
  let at = 1 + len.length;
  for (const p of parts) out.set(p, at), at += p.length;
  return out;
}

const seq = (...parts: Uint8Array[]) => tlv(0x30, ...parts);
const enc = new TextEncoder();

function oid(dotted: string): Uint8Array {
  const [a, b, ...rest] = dotted.split(".").map(Number);
  const bytes = [a! * 40 + b!];
  for (const v of rest) {
    const groups = [v & 0x7f];
    for (let x = v >>> 7; x > 0; x >>>= 7) groups.unshift((x & 0x7f) | 0x80);
    bytes.push(...groups);
  }
  return tlv(0x06, Uint8Array.from(bytes));
}

/** A non-negative INTEGER from big-endian magnitude bytes (minimal, sign bit clear). */
function uint(bytes: Uint8Array): Uint8Array {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const b = bytes.subarray(i);
  return b[0]! & 0x80 ? tlv(0x02, Uint8Array.of(0), b) : tlv(0x02, b);
}

/** UTCTime through 2049, GeneralizedTime after (RFC 5280 §4.1.2.5). */
function time(ms: number): Uint8Array {
  const iso = new Date(Math.floor(ms / 1000) * 1000).toISOString(); // 2026-12-01T15:51:15.000Z
  const digits = iso.slice(0, 19).replace(/[-T:]/g, "") + "Z"; // 20261201155115Z
  const year = Number(iso.slice(0, 4));
  return year < 2050 ? tlv(0x17, enc.encode(digits.slice(2))) : tlv(0x18, enc.encode(digits));
}

function extension(id: string, critical: boolean, value: Uint8Array): Uint8Array {
  return seq(oid(id), ...(critical ? [Uint8Array.of(0x01, 0x01, 0xff)] : []), tlv(0x04, value));
}

/** An element read from DER: where its contents start and end, and where it ends. */
interface Elem {
  tag: number;
  start: number; // of the whole element
  body: number; // of the contents
  end: number;
}

function read(der: Uint8Array, at: number): Elem {
  const tag = der[at]!;
  let len = der[at + 1]!;
  let body = at + 2;
  if (len & 0x80) {
    const k = len & 0x7f;
    if (k < 1 || k > 3) throw new RangeError("DER: unsupported length");
    len = 0;
    for (let i = 0; i < k; i++) len = len * 256 + der[body + i]!;
    body += k;
  }
  if (body + len > der.length) throw new RangeError("DER: element past the end");
  return { tag, start: at, body, end: body + len };
}

function children(der: Uint8Array, parent: Elem): Elem[] {
  const out: Elem[] = [];
  for (let at = parent.body; at < parent.end; at = out[out.length - 1]!.end) {
    out.push(read(der, at));
  }
  return out;
}

/** What a leaf needs of its CA's certificate: its subject (as DER) and key identifier. */
export interface IssuerInfo {
  /** The CA's subject Name, the leaves' issuer, byte for byte. */
  subject: Uint8Array;
  /** The CA's subject key identifier (its extension, else SHA-1 of its public key). */
  keyId: Uint8Array;
}

/** Reads the subject and key identifier from a CA certificate's DER. */
export async function issuerInfo(certDer: Uint8Array): Promise<IssuerInfo> {
  const cert = read(certDer, 0);
  const tbs = children(certDer, children(certDer, cert)[0]!);
  const f = tbs[0]!.tag === 0xa0 ? tbs.slice(1) : tbs; // [0] version is optional (v1)
  const [subject, spki] = [f[4]!, f[5]!];
  if (subject.tag !== 0x30 || spki.tag !== 0x30) throw new RangeError("DER: not a certificate");
  let keyId: Uint8Array | undefined;
  const exts = f.find((e) => e.tag === 0xa3);
  for (const ext of exts ? children(certDer, children(certDer, exts)[0]!) : []) {
    const [id, ...rest] = children(certDer, ext);
    if (!equal(certDer.subarray(id!.start, id!.end), oid("2.5.29.14"))) continue;
    const value = rest[rest.length - 1]!; // OCTET STRING holding an OCTET STRING
    const inner = read(certDer, value.body);
    keyId = certDer.slice(inner.body, inner.end);
  }
  if (!keyId) {
    const bits = children(certDer, spki)[1]!; // BIT STRING: unused-bits byte, then the key
    const key = certDer.slice(bits.body + 1, bits.end);
    keyId = new Uint8Array(await crypto.subtle.digest("SHA-1", key));
  }
  return { subject: certDer.slice(subject.start, subject.end), keyId };
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** ECDSA's raw r‖s (WebCrypto) as the DER `Ecdsa-Sig-Value` X.509 carries. */
function ecdsaDer(raw: Uint8Array): Uint8Array {
  const half = raw.length / 2;
  return seq(uint(raw.subarray(0, half)), uint(raw.subarray(half)));
}

/** PEM armour around DER, 64 characters a line. */
export function pem(label: string, der: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < der.length; i += 0x8000) {
    bin += String.fromCharCode(...der.subarray(i, i + 0x8000));
  }
  const b64 = btoa(bin).replace(/.{64}/g, "$&\n").replace(/\n$/, "");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----`;
}

/** The DER inside the first PEM block of `label` in a text. */
export function unpem(label: string, text: string): Uint8Array<ArrayBuffer> {
  const re = new RegExp(`-----BEGIN ${label}-----([A-Za-z0-9+/=\\s]*?)-----END ${label}-----`);
  const m = re.exec(text);
  if (!m) throw new TypeError(`no PEM ${label} in the text`);
  return Uint8Array.from(atob(m[1]!.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
}

/** What a leaf is made of. */
export interface LeafSpec {
  /** DNS names (`*.` wildcards allowed); the first, without `*.`, is the CN. */
  names: readonly string[];
  /** Serial number, positive, big-endian. */
  serial: Uint8Array;
  notBefore: number;
  notAfter: number;
}

/** A new P-256 key and its leaf signed by `caKey`: certificate DER and PKCS#8 key DER. */
export async function signLeaf(
  issuer: IssuerInfo,
  caKey: CryptoKey,
  spec: LeafSpec,
): Promise<{ certDer: Uint8Array; keyDer: Uint8Array }> {
  const keys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]) as CryptoKeyPair;
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", keys.publicKey));
  const sigAlg = seq(oid("1.2.840.10045.4.3.2")); // ecdsa-with-SHA256, no parameters
  const cn = spec.names[0]!.replace(/^\*\./, "");
  const subject = seq(tlv(0x31, seq(oid("2.5.4.3"), tlv(0x0c, enc.encode(cn)))));
  const san = seq(...spec.names.map((n) => tlv(0x82, enc.encode(n))));
  const extensions = seq(
    extension("2.5.29.19", true, seq()), // basicConstraints: not a CA
    extension("2.5.29.15", true, Uint8Array.of(0x03, 0x02, 0x07, 0x80)), // digitalSignature
    extension("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1"))), // serverAuth
    extension("2.5.29.17", false, san),
    extension("2.5.29.35", false, seq(tlv(0x80, issuer.keyId))),
  );
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Uint8Array.of(2))), // v3
    uint(spec.serial),
    sigAlg,
    issuer.subject,
    seq(time(spec.notBefore), time(spec.notAfter)),
    subject,
    spki,
    tlv(0xa3, extensions),
  );
  const raw = new Uint8Array(await crypto.subtle.sign(SIGN, caKey, tbs as Uint8Array<ArrayBuffer>));
  const certDer = seq(tbs, sigAlg, tlv(0x03, Uint8Array.of(0), ecdsaDer(raw)));
  const keyDer = new Uint8Array(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { certDer, keyDer };
}
