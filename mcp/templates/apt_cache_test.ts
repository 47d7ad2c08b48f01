import assert from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import {
  type DebEntry,
  downloadArgs,
  parsePrintUris,
  readCachedDeb,
  storeDeb,
  withHashes,
} from "./apt_cache.ts";

const A = "a".repeat(64);
const B = "B".repeat(64);

Deno.test("parsePrintUris lists the .deb files apt would fetch with their SHA-256", () => {
  const out = [
    `'http://deb.debian.org/debian/pool/main/j/jq/jq_1.6-2.1_amd64.deb' jq_1.6-2.1_amd64.deb 64400 SHA256:${A}`,
    `'http://deb.debian.org/debian/pool/main/s/sudo/sudo_1.9.13p3-1%2bdeb12u1_amd64.deb' sudo_1.9.13p3-1%2bdeb12u1_amd64.deb 1890 SHA256:${B}`,
    "'http://x/old.deb' old_1_amd64.deb 12 MD5Sum:0123456789abcdef0123456789abcdef",
    "'http://x/short.deb' short_1_amd64.deb 12 SHA256:abcd",
    `'http://x/evil.deb' ../../etc/passwd.deb 1 SHA256:${A}`,
    "Reading package lists...",
  ].join("\n");
  assert.deepEqual(parsePrintUris(out), [
    { name: "jq_1.6-2.1_amd64.deb", sha256: A },
    { name: "sudo_1.9.13p3-1%2bdeb12u1_amd64.deb", sha256: B.toLowerCase() },
    { name: "old_1_amd64.deb" },
    { name: "short_1_amd64.deb" },
  ]);
});

async function sha(data: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("readCachedDeb pushes only a cached copy that matches apt's SHA-256", async () => {
  const dir = await Deno.makeTempDir({ prefix: "isx-debcache-" });
  try {
    const good = new TextEncoder().encode("the real package");
    const deb: DebEntry = { name: "jq_1_amd64.deb", sha256: await sha(good) };
    assert.equal(await readCachedDeb(dir, deb), undefined, "not cached yet");
    await Deno.writeFile(`${dir}/${deb.name}`, good);
    assert.deepEqual(await readCachedDeb(dir, deb), good);
    assert.equal(await readCachedDeb(dir, { name: deb.name }), undefined, "no hash: not used");
    // tampered: another build (or anyone who can write the cache) replaced it
    await Deno.writeFile(`${dir}/${deb.name}`, new TextEncoder().encode("evil postinst"));
    await assert.rejects(readCachedDeb(dir, deb), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === "operation_failed", String(e));
      assert.match(e.message, /^cached package jq_1_amd64\.deb does not match the SHA-256 apt/);
      assert.ok(e.message.includes(`want ${deb.sha256}`), e.message);
      assert.match(e.message, /removed .* from the host cache; run the build again/);
      return true;
    });
    await assert.rejects(Deno.stat(`${dir}/${deb.name}`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("storeDeb caches only what matches apt's SHA-256", async () => {
  const dir = await Deno.makeTempDir({ prefix: "isx-debcache-" });
  try {
    const good = new TextEncoder().encode("the real package");
    const deb: DebEntry = { name: "jq_1_amd64.deb", sha256: await sha(good) };
    await assert.rejects(
      storeDeb(dir, deb, new TextEncoder().encode("swapped in the guest")),
      (e: unknown) =>
        e instanceof IsbError && e.code === "operation_failed" &&
        e.message.includes("pulled back from the build instance does not match") &&
        e.message.endsWith("not cached"),
    );
    assert.deepEqual([...Deno.readDirSync(dir)], [], "nothing written");
    assert.equal(await storeDeb(dir, { name: deb.name }, good), false, "no hash: not cached");
    assert.equal(await storeDeb(dir, deb, good), true);
    assert.deepEqual(await Deno.readFile(`${dir}/${deb.name}`), good);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), [deb.name]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("downloadArgs and withHashes take SHA-256 from apt-get download for unhashed entries", () => {
  const install = [
    "'http://x/libonig5_6.9.8-1_amd64.deb' libonig5_6.9.8-1_amd64.deb 187828 MD5Sum:7e359432d638eee2be29dfd20ddcd493",
    "'http://x/jq_1.6-2.1%2bdeb12u3_amd64.deb' jq_1.6-2.1+deb12u3_amd64.deb 64432 ",
    "'http://x/tzdata_2024a-0%2bdeb12u1_all.deb' tzdata_2024a-0+deb12u1_all.deb 1 ",
    "'http://x/e.deb' libfoo_1%3a2.0-1_amd64.deb 1 ",
    `'http://x/h.deb' hashed_1_amd64.deb 1 SHA256:${A}`,
  ].join("\n");
  const debs = parsePrintUris(install);
  assert.deepEqual(downloadArgs(debs), [
    "libonig5:amd64=6.9.8-1",
    "jq:amd64=1.6-2.1+deb12u3",
    "tzdata=2024a-0+deb12u1",
    "libfoo:amd64=1:2.0-1",
  ]);
  const download = [
    `'http://x/libonig5_6.9.8-1_amd64.deb' libonig5_6.9.8-1_amd64.deb 187828 SHA256:${B}`,
    `'http://x/jq.deb' jq_1.6-2.1+deb12u3_amd64.deb 64432 SHA256:${A}`,
  ].join("\n");
  assert.deepEqual(withHashes(debs, download), [
    { name: "libonig5_6.9.8-1_amd64.deb", sha256: B.toLowerCase() },
    { name: "jq_1.6-2.1+deb12u3_amd64.deb", sha256: A },
    { name: "tzdata_2024a-0+deb12u1_all.deb" },
    { name: "libfoo_1%3a2.0-1_amd64.deb" },
    { name: "hashed_1_amd64.deb", sha256: A },
  ]);
});
