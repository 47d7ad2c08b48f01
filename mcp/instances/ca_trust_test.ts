import { equal, ok } from "node:assert/strict";
import { createCa } from "../../proxy/tls/ca.ts";
import { needsCaRepair, replacedBundle } from "./ca_trust.ts";

Deno.test("replacedBundle swaps the old CA's text for the new one of the same subject", async () => {
  const [a, b] = [await createCa(), await createCa()];
  const bundle = `-----BEGIN CERTIFICATE-----\nSYSTEM\n-----END CERTIFICATE-----\n${a.certPem}`;
  const got = await replacedBundle(bundle, a.certPem, b.certPem);
  ok(got !== undefined);
  ok(got.includes(b.certPem.trim()) && !got.includes(a.certPem.trim()));
  ok(got.startsWith("-----BEGIN CERTIFICATE-----\nSYSTEM\n"), "other certificates are kept");
});

Deno.test("replacedBundle declines what would leave a wrong store (the fallback runs instead)", async () => {
  const [a, b] = [await createCa(), await createCa()];
  const other = await createCa({ commonName: "someone else" });
  equal(await replacedBundle("no certs here", a.certPem, b.certPem), undefined, "old not in it");
  equal(await replacedBundle(a.certPem, "", b.certPem), undefined, "no old certificate");
  equal(await replacedBundle(a.certPem, a.certPem, other.certPem), undefined, "another subject");
  equal(await replacedBundle(a.certPem, a.certPem, "garbage"), undefined, "not a certificate");
});

Deno.test("needsCaRepair: an unstamped or other CA needs repair, the served one does not", () => {
  equal(needsCaRepair(undefined, "AA"), true);
  equal(needsCaRepair("BB", "AA"), true);
  equal(needsCaRepair("AA", "AA"), false);
});
