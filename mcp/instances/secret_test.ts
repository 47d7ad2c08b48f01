import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { type IncusClient, IsbError } from "../../rpc/base.ts";
import { GUEST_SECRET_PATH } from "../templates/steps.ts";
import {
  beginSecretDir,
  deliverSecret,
  finishSecret,
  InstanceSecret,
  prepareSecretDir,
  secretStamp,
} from "./secret.ts";

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
function fakeGuest(
  mountAt: number,
  o: {
    earlyMkdir404?: boolean;
    mkdirFails?: boolean;
    firstPush404?: boolean;
    pushFails?: boolean;
  } = {},
) {
  const calls: string[] = [];
  let checks = 0;
  let pushes = 0;
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
      if (o.mkdirFails) throw new IsbError("io", "Internal Server Error");
    },
    pushFile(_name: string, path: string) {
      calls.push(`push ${path}`);
      if (o.firstPush404 && pushes++ === 0) {
        return Promise.reject(new IsbError("not_found", "Not Found"));
      }
      if (o.pushFails) return Promise.reject(new IsbError("io", "permission denied"));
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

Deno.test("the directory begun beside the boot: made only on a mounted /run, with the gid", async () => {
  // mounted at the first check: the check, then the directory; the gid says it is made
  const a = fakeGuest(1);
  assert.equal(await beginSecretDir(a.client, "c1", Promise.resolve(1000)), 1000);
  assert.deepEqual(a.calls, ["pull /run/systemd/system", "mkdir /run/isx"]);
  // not yet mounted: one check and nothing made (a directory now would lie under the mount)
  const b = fakeGuest(2);
  assert.equal(await beginSecretDir(b.client, "c1", Promise.resolve(1000)), undefined);
  assert.deepEqual(b.calls, ["pull /run/systemd/system"]);
  // the gid unread: nothing made
  const c = fakeGuest(1);
  assert.equal(await beginSecretDir(c.client, "c1", Promise.resolve(undefined)), undefined);
  assert.deepEqual(c.calls, ["pull /run/systemd/system"]);
  // incusd refusing the directory: undefined, not a rejection
  const d = fakeGuest(1, { mkdirFails: true });
  assert.equal(await beginSecretDir(d.client, "c1", Promise.resolve(1000)), undefined);
});

Deno.test("the secret after the address: into the early directory, else one made then", async () => {
  const gid = Promise.resolve(1000);
  // the early directory made: only the file
  const a = fakeGuest(1);
  await finishSecret(a.client, "c1", InstanceSecret.generate(), {
    early: Promise.resolve(1000),
    gid,
  });
  assert.deepEqual(a.calls, [`push ${GUEST_SECRET_PATH}`]);
  // none made early: the check and the directory, then the file
  const b = fakeGuest(1);
  await finishSecret(b.client, "c1", InstanceSecret.generate(), { early: undefined, gid });
  assert.deepEqual(b.calls, [
    "pull /run/systemd/system",
    "mkdir /run/isx",
    `push ${GUEST_SECRET_PATH}`,
  ]);
  // the early directory gone (the guest restarted itself): made again, the file written again
  const c = fakeGuest(1, { firstPush404: true });
  await finishSecret(c.client, "c1", InstanceSecret.generate(), {
    early: Promise.resolve(1000),
    gid,
  });
  assert.deepEqual(c.calls, [
    `push ${GUEST_SECRET_PATH}`,
    "pull /run/systemd/system",
    "mkdir /run/isx",
    `push ${GUEST_SECRET_PATH}`,
  ]);
  // any other failure is the branch's failure
  const d = fakeGuest(1, { pushFails: true });
  await assert.rejects(
    () =>
      finishSecret(d.client, "c1", InstanceSecret.generate(), {
        early: Promise.resolve(1000),
        gid,
      }),
    /denied/,
  );
});
