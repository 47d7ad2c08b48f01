import assert from "node:assert/strict";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { createIncusClient, isPreconditionFailed } from "./mod.ts";
import { IsbError } from "../errors.ts";

const WEB = {
  name: "web",
  type: "container",
  status: "Running",
  architecture: "x86_64",
  config: { "user.a": "1" },
  devices: {},
  ephemeral: false,
  profiles: ["default"],
  stateful: false,
  description: "",
};

Deno.test("getInstance returns the instance and its ETag", async () => {
  await using fake = await startFakeIncusd([
    { route: "GET /1.0/instances/web", metadata: WEB, etag: '"e1"' },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const got = await c.getInstance("web");
    assert.equal(got.value.name, "web");
    assert.equal(got.etag, '"e1"');
  } finally {
    c.close();
  }
});

Deno.test("getInstance on a missing instance answers not_found with the api data", async () => {
  await using fake = await startFakeIncusd();
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await c.getInstance("nope").then(() => undefined, (e) => e);
    assert.ok(e instanceof IsbError);
    assert.equal(e.code, "not_found");
    assert.deepEqual(e.data, { status: 404, method: "GET", path: "/1.0/instances/nope" });
  } finally {
    c.close();
  }
});

Deno.test("createInstance on a taken name answers already_exists (409)", async () => {
  await using fake = await startFakeIncusd([
    { route: "POST /1.0/instances", status: 409, error: 'Instance "web" already exists' },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const req = { name: "web", source: { type: "image" as const, alias: "x" } };
    const e = await c.createInstance(req, { step: "create instance web" }).then(() => 0, (e) => e);
    assert.ok(e instanceof IsbError);
    assert.equal(e.code, "already_exists");
  } finally {
    c.close();
  }
});

Deno.test("listInstances on a 500 answers api with status, method and path", async () => {
  await using fake = await startFakeIncusd([
    { route: "GET /1.0/instances", status: 500, error: "database is locked" },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const e = await c.listInstances().then(() => 0, (e) => e);
    assert.ok(e instanceof IsbError);
    assert.equal(e.code, "api");
    assert.equal(
      e.message,
      "incusd: GET /1.0/instances?recursion=1: database is locked (HTTP 500)",
    );
    assert.deepEqual(e.data, { status: 500, method: "GET", path: "/1.0/instances?recursion=1" });
  } finally {
    c.close();
  }
});

Deno.test("withProject scopes every call with ?project= and default sends none", async () => {
  await using fake = await startFakeIncusd([{ route: "GET /1.0/instances", metadata: [] }]);
  const c = createIncusClient({ socket: fake.socket, project: "default" });
  try {
    await c.listInstances();
    await c.withProject("p1").listInstances();
    await c.withProject("").listInstances();
    const q = fake.requests.map((r) => r.query.get("project"));
    assert.deepEqual(q, [null, "p1", null]);
    assert.equal(c.withProject("p1").project, "p1");
  } finally {
    c.close();
  }
});

Deno.test("a client scoped to a project sends no ?project= next to all-projects (Incus refuses both)", async () => {
  await using fake = await startFakeIncusd([{ route: "GET /1.0/instances", metadata: [] }]);
  const c = createIncusClient({ socket: fake.socket, project: "p1" });
  try {
    await c.call("GET", "/1.0/instances", { query: { recursion: 2, "all-projects": true } });
    await c.call("GET", "/1.0/instances", { query: { "all-projects": false } });
    const q = fake.requests.map((r) => [r.query.get("project"), r.query.get("all-projects")]);
    assert.deepEqual(q, [[null, "true"], ["p1", "false"]]);
  } finally {
    c.close();
  }
});

Deno.test("createInstance with a target sends ?target=", async () => {
  await using fake = await startFakeIncusd([{ route: "POST /1.0/instances", operation: {} }]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const req = { name: "web", source: { type: "image" as const, alias: "x" } };
    await c.createInstance(req, { step: "create instance web", target: "node2" });
    assert.equal(fake.requests[0]?.query.get("target"), "node2");
  } finally {
    c.close();
  }
});

Deno.test("a client made with a target places every create there, scoped copies too; nothing else carries it", async () => {
  await using fake = await startFakeIncusd([
    { route: "POST /1.0/instances", operation: {} },
    { route: "GET /1.0/instances", metadata: [] },
  ]);
  const c = createIncusClient({ socket: fake.socket, target: "node3" });
  try {
    const req = { name: "web", source: { type: "image" as const, alias: "x" } };
    await c.createInstance(req, { step: "create instance web" });
    await c.withProject("p").createInstance(req, { step: "create instance web" });
    await c.createInstance(req, { step: "create instance web", target: "node2" });
    await c.listInstances();
    const creates = fake.requests.filter((r) => r.method === "POST" && r.path === "/1.0/instances");
    assert.deepEqual(creates.map((r) => r.query.get("target")), ["node3", "node3", "node2"]);
    const list = fake.requests.find((r) => r.method === "GET" && r.path === "/1.0/instances");
    assert.equal(list?.query.get("target"), null);
  } finally {
    c.close();
  }
});

Deno.test("updateInstance retries a 412 with a fresh read and sends If-Match", async () => {
  await using fake = await startFakeIncusd([
    { route: "GET /1.0/instances/web", metadata: WEB, etag: '"e1"' },
    { route: "PUT /1.0/instances/web", status: 412, error: "ETag doesn't match" },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    let calls = 0;
    const e = await c.updateInstance("web", (i) => {
      calls++;
      i.config["user.b"] = "2";
    }, { step: "update instance web" }).then(() => 0, (e) => e);
    assert.ok(isPreconditionFailed(e));
    assert.equal(calls, 5);
    const puts = fake.requests.filter((r) => r.method === "PUT");
    assert.equal(puts.length, 5);
    assert.equal(puts[0]?.headers.get("if-match"), '"e1"');
    const body = JSON.parse(new TextDecoder().decode(puts[0]?.body));
    assert.deepEqual(body.config, { "user.a": "1", "user.b": "2" });
    assert.equal(body.name, undefined);
    fake.route({ route: "PUT /1.0/instances/web", metadata: {} });
    await c.updateInstance("web", () => {}, { step: "update instance web" });
  } finally {
    c.close();
  }
});

Deno.test("pullFile returns bytes and owner headers; pushFile sends them", async () => {
  const data = new Uint8Array([0, 1, 2, 255]);
  await using fake = await startFakeIncusd([
    {
      route: "GET /1.0/instances/web/files",
      body: data,
      headers: { "x-incus-uid": "1000", "x-incus-gid": "100", "x-incus-mode": "0640" },
    },
    { route: "POST /1.0/instances/web/files", metadata: {} },
  ]);
  const c = createIncusClient({ socket: fake.socket });
  try {
    const f = await c.pullFile("web", "/etc/x");
    assert.deepEqual(f.data, data);
    assert.deepEqual([f.uid, f.gid, f.mode, f.type], [1000, 100, 0o640, "file"]);
    await c.pushFile("web", "/root/y", data, { step: "push y", uid: 5, mode: 0o755 });
    await c.mkdir("web", "/root/d", { step: "mkdir d" });
    const [push, mk] = fake.requests.filter((r) => r.method === "POST");
    assert.equal(push?.query.get("path"), "/root/y");
    assert.deepEqual(push?.body, data);
    assert.equal(push?.headers.get("x-incus-uid"), "5");
    assert.equal(push?.headers.get("x-incus-mode"), "0755");
    assert.equal(mk?.headers.get("x-incus-type"), "directory");
  } finally {
    c.close();
  }
});
