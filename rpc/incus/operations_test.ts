import assert from "node:assert/strict";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { createIncusClient } from "./mod.ts";
import { IsbError } from "../errors.ts";

async function caught(p: Promise<unknown>): Promise<IsbError> {
  const e = await p.then(() => undefined, (e) => e);
  assert.ok(e instanceof IsbError, `expected an IsbError, got ${e}`);
  return e;
}

const WEB = { name: "web", source: { type: "image" as const, alias: "debian-base" } };

Deno.test("waitOperation past its deadline cancels the operation and answers operation_timeout", async () => {
  await using fake = await startFakeIncusd([
    { route: "POST /1.0/instances", operation: { status: "Running" } },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await caught(c.createInstance(WEB, { step: "create instance web", deadlineMs: 300 }));
    assert.equal(e.code, "operation_timeout");
    assert.match(
      e.message,
      /^create instance web stalled: operation [0-9a-f-]+ still Running after \d+ms \(cancelled\)$/,
    );
    assert.deepEqual(Object.keys(e.data ?? {}).sort(), [
      "cancelled",
      "operation",
      "step",
      "waited_secs",
    ]);
    assert.equal(e.data?.step, "create instance web");
    assert.equal(e.data?.cancelled, true);
    assert.deepEqual(fake.cancelled, [e.data?.operation]);
  } finally {
    c.close();
  }
});

Deno.test("waitOperation keeps waiting when incusd answers a running wait with HTTP 500", async () => {
  await using fake = await startFakeIncusd([{
    route: "POST /1.0/instances",
    operation: { status: "Running", waitError: "context deadline exceeded" },
  }]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await caught(c.createInstance(WEB, { step: "create instance web", deadlineMs: 300 }));
    assert.equal(e.code, "operation_timeout");
    assert.equal(e.data?.cancelled, true);
  } finally {
    c.close();
  }
});

Deno.test("waitOperation on an operation that cannot be cancelled says it was left running", async () => {
  await using fake = await startFakeIncusd([
    { route: "POST /1.0/instances", operation: { status: "Running", mayCancel: false } },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await caught(c.createInstance(WEB, { step: "create instance web", deadlineMs: 200 }));
    assert.equal(e.code, "operation_timeout");
    assert.match(e.message, /\(not cancellable; left running on the server\)$/);
    assert.equal(e.data?.cancelled, false);
    assert.deepEqual(fake.cancelled, []);
  } finally {
    c.close();
  }
});

Deno.test("waitOperation on a failed operation answers operation_failed naming the step", async () => {
  await using fake = await startFakeIncusd([
    { route: "POST /1.0/instances", operation: { status: "Failure", err: "Image not found" } },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await caught(c.createInstance(WEB, { step: "create instance web" }));
    assert.equal(e.code, "operation_failed");
    assert.equal(e.message, "create instance web failed: Image not found");
    assert.deepEqual(e.data, { step: "create instance web" });
  } finally {
    c.close();
  }
});

Deno.test("startInstance sends the action and waits for its operation", async () => {
  await using fake = await startFakeIncusd([
    { route: "PUT /1.0/instances/web/state", operation: { metadata: { x: 1 } } },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    await c.startInstance("web", { step: "start instance web" });
    const put = fake.requests.find((r) => r.method === "PUT");
    assert.deepEqual(JSON.parse(new TextDecoder().decode(put?.body)), { action: "start" });
    assert.ok(fake.requests.some((r) => r.path.endsWith("/wait")));
  } finally {
    c.close();
  }
});
