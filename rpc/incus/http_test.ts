import assert from "node:assert/strict";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { createIncusClient } from "./mod.ts";
import { IsbError } from "../errors.ts";

async function rejectsWith(p: Promise<unknown>, code: string): Promise<IsbError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof IsbError, `not an IsbError: ${e}`);
    assert.equal(e.code, code, e.message);
    return e;
  }
  assert.fail(`expected ${code}`);
}

Deno.test("HttpTransport.request on a missing socket answers connect with data {socket} exactly", async () => {
  const socket = `${await Deno.makeTempDir()}/missing.socket`;
  const c = createIncusClient({ socket });
  try {
    const e = await rejectsWith(c.listInstances(), "connect");
    assert.deepEqual(e.data, { socket });
    assert.match(e.message, new RegExp(`^cannot connect to incusd at ${socket}: .*No such file`));
  } finally {
    c.close();
    await Deno.remove(socket.slice(0, socket.lastIndexOf("/")), { recursive: true });
  }
});

Deno.test("HttpTransport.request on a socket nobody listens on answers connect (refused)", async () => {
  const dir = await Deno.makeTempDir();
  const socket = `${dir}/dead.socket`;
  await Deno.writeTextFile(socket, ""); // a path that exists but accepts no connection
  const c = createIncusClient({ socket });
  try {
    const e = await rejectsWith(c.listInstances(), "connect");
    assert.deepEqual(e.data, { socket });
    assert.match(e.message, /refused/i);
  } finally {
    c.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("HttpTransport.request past its deadline answers request_timeout", async () => {
  await using fake = await startFakeIncusd([{ route: "GET /1.0/instances", behaviour: "hang" }]);
  const c = createIncusClient({ socket: fake.socket, timeouts: { requestMs: 300 } });
  try {
    const e = await rejectsWith(c.listInstances(), "request_timeout");
    assert.equal(e.message, "incusd did not answer GET /1.0/instances?recursion=1 within 300ms");
    assert.deepEqual(e.data, {
      method: "GET",
      path: "/1.0/instances?recursion=1",
      timeout_secs: 0.3,
    });
  } finally {
    c.close();
  }
});

Deno.test("HttpTransport.request on garbage bytes answers protocol", async () => {
  await using fake = await startFakeIncusd([{ route: "GET /1.0", behaviour: "garbage" }]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await c.serverInfo().then(() => assert.fail("no error"), (e) => e);
    assert.ok(e instanceof IsbError);
    assert.equal(e.code, "protocol");
    assert.match(e.message, /^GET \/1\.0: bad response from incusd: not HTTP/);
  } finally {
    c.close();
  }
});

Deno.test("HttpTransport.request on a dropped connection answers io", async () => {
  await using fake = await startFakeIncusd([{ route: "GET /1.0", behaviour: "drop" }]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await c.serverInfo().then(() => assert.fail("no error"), (e) => e);
    assert.ok(e instanceof IsbError);
    assert.equal(e.code, "io");
    assert.match(e.message, /^GET \/1\.0: connection to incusd failed: connection closed/);
  } finally {
    c.close();
  }
});
