import { deepEqual, equal, ok, throws } from "node:assert/strict";
import { createCa, signerFromPem } from "./ca.ts";
import { issuerInfo, pem, signLeaf, unpem } from "./_leaf_der.ts";
import { x509Lib } from "../../rpc/mod.ts";

const DAY = 86_400_000;

/** The library, independent of leaf_der.ts, reads and checks every field of a leaf. */
async function check(
  leafPem: string,
  caPem: string,
  names: string[],
  notAfter: number,
  keyId?: string,
) {
  const x = await x509Lib();
  const [leaf, ca] = [new x.X509Certificate(leafPem), new x.X509Certificate(caPem)];
  ok(await leaf.verify({ publicKey: ca.publicKey, signatureOnly: true }), "CA signature");
  equal(leaf.issuer, ca.subject);
  equal(leaf.subject, `CN=${names[0]!.replace(/^\*\./, "")}`);
  equal(leaf.notAfter.getTime(), Math.floor(notAfter / 1000) * 1000);
  const san = leaf.getExtension(x.SubjectAlternativeNameExtension)!;
  deepEqual(san.names.items.map((n) => [n.type, n.value]), names.map((n) => ["dns", n]));
  const bc = leaf.getExtension(x.BasicConstraintsExtension)!;
  ok(bc.critical && !bc.ca);
  const ku = leaf.getExtension(x.KeyUsagesExtension)!;
  ok(ku.critical);
  equal(ku.usages, x.KeyUsageFlags.digitalSignature);
  deepEqual(leaf.getExtension(x.ExtendedKeyUsageExtension)!.usages, ["1.3.6.1.5.5.7.3.1"]);
  const aki = leaf.getExtension(x.AuthorityKeyIdentifierExtension)!;
  equal(aki.keyId, keyId ?? ca.getExtension(x.SubjectKeyIdentifierExtension)!.keyId);
  equal(leaf.publicKey.algorithm.name, "ECDSA");
}

Deno.test("signLeaf writes a leaf the x509 library parses and verifies, field by field", async () => {
  const caPem = await createCa({ commonName: "leaf der test CA" });
  const ca = await signerFromPem(caPem.certPem, caPem.keyPem);
  const now = Date.UTC(2026, 11, 1, 15, 51, 15, 123);
  const names = ["*.example.test", "api.example.test", "a-very-long-name.".repeat(10) + "test"];
  const leaf = await ca.issueLeaf(names, { now });
  await check(leaf.certPem, caPem.certPem, names, now + 397 * DAY);
  ok(leaf.certPem.trimEnd().endsWith(caPem.certPem.trim()), "the chain carries the CA");
  // the private key is PKCS#8 P-256 and matches the certificate's public key
  const key = await crypto.subtle.importKey(
    "pkcs8",
    unpem("PRIVATE KEY", leaf.keyPem),
    { name: "ECDSA", namedCurve: "P-256" },
    false,
    ["sign"],
  );
  const data = new TextEncoder().encode("proof");
  const sig = await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, key, data);
  const x = await x509Lib();
  const pub = await new x.X509Certificate(leaf.certPem).publicKey.export(crypto);
  ok(await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, pub, sig, data));
});

Deno.test("signLeaf: GeneralizedTime from 2050, and a CA without a key identifier", async () => {
  const x = await x509Lib();
  const keys = await crypto.subtle.generateKey(
    { name: "ECDSA", namedCurve: "P-256" },
    true,
    ["sign", "verify"],
  ) as CryptoKeyPair;
  const bare = await x.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=bare CA, O=isx, OU=tests",
    notBefore: new Date(Date.UTC(2026, 0, 1)),
    notAfter: new Date(Date.UTC(2060, 0, 1)),
    signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
    keys,
  });
  const info = await issuerInfo(new Uint8Array(bare.rawData));
  equal(info.keyId.length, 20); // SHA-1 of the public key, as RFC 5280 §4.2.1.2 (1)
  const notAfter = Date.UTC(2051, 5, 30, 23, 59, 59);
  const { certDer } = await signLeaf(info, keys.privateKey, {
    names: ["late.example.test"],
    serial: Uint8Array.of(0x80, 1), // high bit set: encoded with a leading zero, still positive
    notBefore: Date.UTC(2049, 11, 31, 23, 59, 59),
    notAfter,
  });
  const leafPem = pem("CERTIFICATE", certDer);
  const hex = Array.from(info.keyId, (b) => b.toString(16).padStart(2, "0")).join("");
  await check(leafPem, bare.toString("pem"), ["late.example.test"], notAfter, hex);
  const leaf = new x.X509Certificate(leafPem);
  equal(leaf.serialNumber, "8001");
  // right after the [0] version: INTEGER of 3 bytes, 00 80 01 (positive, minimal)
  const at = certDer.findIndex((b, i) => b === 0xa0 && certDer[i + 1] === 3);
  deepEqual([...certDer.subarray(at + 5, at + 10)], [0x02, 0x03, 0x00, 0x80, 0x01]);
  equal(leaf.notBefore.getTime(), Date.UTC(2049, 11, 31, 23, 59, 59));
});

Deno.test("issuerInfo and unpem refuse what is not a certificate or a PEM block", async () => {
  throws(() =>
    unpem("PRIVATE KEY", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----")
  );
  let failed = false;
  try {
    await issuerInfo(Uint8Array.of(0x30, 0x05, 0x02, 0x01, 0x01));
  } catch {
    failed = true;
  }
  ok(failed, "a truncated DER is refused");
});
