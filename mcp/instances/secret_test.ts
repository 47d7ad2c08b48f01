import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { type IncusClient, IsbError } from "../../rpc/base.ts";
import { GUEST_SECRET_PATH } from "../templates/steps.ts";
import { deliverSecret, InstanceSecret, prepareSecretDir, secretStamp } from "./secret.ts";

Deno.test("InstanceSecret is 64 random hex characters, new each time", () => {
  const a = InstanceSecret.generate(), b = InstanceSecret.generate();
  assert.match(a.reveal(), /^[0-9a-f]{64}$/);
  assert.notEqual(a.reveal(), b.reveal());
});

Deno.test("InstanceSecret never prints its value", () => {
  const s = InstanceSecret.generate();
  for (const shown of [JSON.stringify({ s }), Deno.inspect(s), String(s), `${s}`]) {
    assert.ok(!shown.includes(s.reveal()), shown);
  }
});

Deno.test("secretStamp records the SHA-256 of the value", () => {
  const s = new InstanceSecret("abc");
  assert.deepEqual(secretStamp(s), {
    "user.incus-spawn.instance-secret-sha256": createHash("sha256").update("abc").digest("hex"),
  });
});

/** A client whose /run is mounted from the `mountAt`-th check on; it records each call. */
function fakeGuest(mountAt: number, o: { earlyMkdir404?: boolean } = {}) {
  const calls: string[] = [];
  let checks = 0;
  const client = {
    pullFile(_name: string, path: string) {
      checks++;
      calls.push(`pull ${path}`);
      if (checks >= mountAt) return Promise.resolve({ data: new Uint8Array() });
      return Promise.reject(new IsbError("not_found", "no such file"));
    },
    async mkdir(_name: string, path: string) {
      await new Promise((r) => setTimeout(r, 5)); // slower than the check: the order shows
      calls.push(`mkdir ${path}`);
      if (o.earlyMkdir404 && checks < mountAt) throw new IsbError("not_found", "Not Found");
    },
    pushFile(_name: string, path: string) {
      calls.push(`push ${path}`);
      return Promise.resolve();
    },
  } as unknown as IncusClient;
  return { client, calls };
}

Deno.test("the secret is written only after /run is mounted and its directory is made on it", async () => {
  // mounted at the first check: the check and the directory together, then the file
  const a = fakeGuest(1);
  const ga = await prepareSecretDir(a.client, "c1", { gid: 1000 }); // as branchInstance does
  await deliverSecret(a.client, "c1", InstanceSecret.generate(), { gid: ga });
  assert.deepEqual(a.calls, [
    "pull /run/systemd/system",
    "mkdir /run/isx",
    `push ${GUEST_SECRET_PATH}`,
  ]);
  // not yet mounted: the directory made beside the check is under the mount, so it is made
  // again once the mount is there, and only then the file
  const b = fakeGuest(3);
  const gb = await prepareSecretDir(b.client, "c1", { gid: 1000 });
  await deliverSecret(b.client, "c1", InstanceSecret.generate(), { gid: gb });
  assert.deepEqual(b.calls, [
    "pull /run/systemd/system",
    "mkdir /run/isx",
    "pull /run/systemd/system",
    "pull /run/systemd/system",
    "mkdir /run/isx",
    `push ${GUEST_SECRET_PATH}`,
  ]);
  // incusd refusing the early directory (the guest's boot not far enough): made after the mount
  const c = fakeGuest(2, { earlyMkdir404: true });
  const gc = await prepareSecretDir(c.client, "c1", { gid: 1000 });
  await deliverSecret(c.client, "c1", InstanceSecret.generate(), { gid: gc });
  assert.deepEqual(c.calls, [
    "pull /run/systemd/system",
    "mkdir /run/isx",
    "pull /run/systemd/system",
    "mkdir /run/isx",
    `push ${GUEST_SECRET_PATH}`,
  ]);
});
