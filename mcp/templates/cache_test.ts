import assert from "node:assert/strict";
import { parsePrintUris } from "./cache.ts";

Deno.test("parsePrintUris lists the .deb file names apt would fetch", () => {
  const out = [
    "'http://deb.debian.org/debian/pool/main/j/jq/jq_1.6-2.1_amd64.deb' jq_1.6-2.1_amd64.deb 64400 SHA256:ab",
    "'http://deb.debian.org/debian/pool/main/s/sudo/sudo_1.9.13p3-1%2bdeb12u1_amd64.deb' sudo_1.9.13p3-1%2bdeb12u1_amd64.deb 1890 SHA256:cd",
    "'http://x/evil.deb' ../../etc/passwd.deb 1 SHA256:ee",
    "Reading package lists...",
  ].join("\n");
  assert.deepEqual(parsePrintUris(out), [
    "jq_1.6-2.1_amd64.deb",
    "sudo_1.9.13p3-1%2bdeb12u1_amd64.deb",
  ]);
});
