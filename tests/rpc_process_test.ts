/**
 * `isb rpc` as a process (`main.ts` under the launchers' permission flags): the hello line,
 * framing errors, a 10 MiB line, 60 concurrent requests matched by id, `connect` data for a
 * missing socket, and exit 0 at stdin EOF. Every stdout line must parse as JSON. No Incus is
 * needed: the socket points at a path where nothing listens.
 */

import assert from "node:assert/strict";
import { VERSION } from "../rpc/version.ts";
import { startFakeIncusd } from "./fakes/incusd.ts";
import { type ProgramHandle, spawnProgram } from "./helpers/spawn.ts";

type Line = Record<string, unknown>;

async function withServer(fn: (p: ProgramHandle, socket: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "isb-rpc-proc-" });
  const socket = `${dir}/missing.socket`;
  const p = spawnProgram(["rpc"], { env: { INCUS_SOCKET: socket }, cwd: dir });
  try {
    await fn(p, socket);
  } finally {
    await p[Symbol.asyncDispose]();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Reads JSON lines until every id in `ids` has its final reply; returns them by id. */
async function replies(p: ProgramHandle, ids: unknown[]): Promise<Map<unknown, Line>> {
  const want = new Set(ids.map((id) => JSON.stringify(id)));
  const got = new Map<unknown, Line>();
  while (want.size > 0) {
    const l = await p.readJson();
    if ("event" in l) continue;
    const key = JSON.stringify(l.id);
    assert.ok(want.delete(key), `one reply per id (unexpected ${key})`);
    got.set(l.id, l);
  }
  return got;
}

Deno.test("isb rpc writes the hello line first and version deep-equals it", async () => {
  await withServer(async (p) => {
    const hello = await p.readJson();
    assert.deepEqual(hello, { isb: VERSION, protocol: 1 });
    await p.send({ id: 1, method: "version" });
    assert.deepEqual(await p.readJson(), { id: 1, result: hello });
  });
});

Deno.test("isb rpc answers junk with bad_request and id null, then goes on", async () => {
  await withServer(async (p) => {
    await p.readJson();
    for (const junk of ["nonsense", "{", "[]", '{"id":4}', '{"id":5,"method":null}', "\x00\x01"]) {
      await p.write(junk + "\n");
      const l = await p.readJson();
      assert.equal(l.id, null);
      assert.equal((l.error as Line).code, "bad_request");
      assert.match(String((l.error as Line).message), /^not a request: /);
    }
    await p.write("\n  \n");
    await p.send({ id: "still", method: "version" });
    assert.equal((await p.readJson()).id, "still");
  });
});

Deno.test("isb rpc reads a 10 MiB line", async () => {
  await withServer(async (p) => {
    await p.readJson();
    const pad = "y".repeat(10 * 1024 * 1024);
    await p.write(`{"id":"big","method":"version","params":{"pad":"${pad}"}}\n`);
    const data = btoa("z".repeat(7_500_000));
    await p.send({ id: "w", method: "exec.write", params: { exec: 77, data } });
    const r = await replies(p, ["big", "w"]);
    assert.deepEqual(r.get("big")?.result, { isb: VERSION, protocol: 1 });
    assert.equal((r.get("w")?.error as Line).code, "not_found");
  });
});

Deno.test("isb rpc answers an unknown method with protocol", async () => {
  await withServer(async (p) => {
    await p.readJson();
    await p.send({ id: 3, method: "sandbox.teleport", params: {} });
    assert.deepEqual(await p.readJson(), {
      id: 3,
      error: { code: "protocol", message: 'protocol: unknown method "sandbox.teleport"' },
    });
  });
});

Deno.test("isb rpc answers connect with data exactly {socket} for a missing socket", async () => {
  await withServer(async (p, socket) => {
    await p.readJson();
    await p.send({ id: 1, method: "sandbox.exec", params: { name: "web", argv: ["true"] } });
    await p.send({ id: 2, method: "sandbox.get", params: { name: "web" } });
    const r = await replies(p, [1, 2]);
    for (const id of [1, 2]) {
      const e = r.get(id)?.error as Line;
      assert.equal(e.code, "connect");
      assert.deepEqual(e.data, { socket });
      assert.match(String(e.message), new RegExp(`^cannot connect to incusd at ${socket}: `));
    }
  });
});

Deno.test("exec.signal on an unknown exec answers not_found", async () => {
  await withServer(async (p) => {
    await p.readJson();
    await p.send({ id: 5, method: "exec.signal", params: { exec: 404, signal: 15 } });
    assert.deepEqual(await p.readJson(), {
      id: 5,
      error: { code: "not_found", message: "running exec 404 not found" },
    });
  });
});

Deno.test("isb rpc matches 60 concurrent mixed requests by id, every line JSON", async () => {
  await withServer(async (p, socket) => {
    await p.readJson();
    const sent: { id: unknown; expect: (l: Line) => void }[] = [];
    for (let i = 0; i < 60; i++) {
      const id = i % 2 ? `s${i}` : i;
      const kind = i % 6;
      const code = (c: string) => (l: Line) => assert.equal((l.error as Line)?.code, c, `${id}`);
      const [method, params, expect] = [
        ["version", {}, (l: Line) => assert.equal((l.result as Line).protocol, 1)],
        ["schema", {}, (l: Line) => assert.ok(((l.result as Line).$defs as Line).SandboxSpec)],
        ["sandbox.get", { name: `n${i}` }, (l: Line) => {
          code("connect")(l);
          assert.deepEqual((l.error as Line).data, { socket });
        }],
        ["sandbox.exec", { name: `n${i}`, argv: ["true"] }, code("connect")],
        ["exec.resize", { exec: `nope${i}`, width: 1, height: 1 }, code("not_found")],
        ["sandbox.list", { bogus: 1 }, code("invalid")],
      ][kind] as [string, unknown, (l: Line) => void];
      sent.push({ id, expect });
      await p.send({ id, method, params });
    }
    const r = await replies(p, sent.map((s) => s.id));
    for (const s of sent) s.expect(r.get(s.id)!);
  });
});

Deno.test("isb rpc exits 0 at stdin EOF after answering what it read", async () => {
  await withServer(async (p) => {
    await p.readJson();
    await p.send({ id: 1, method: "sandbox.get", params: { name: "x" } });
    await p.closeStdin();
    assert.equal(((await p.readJson()).error as Line).code, "connect");
    assert.equal(await p.readLine(), undefined);
    const status = await p.wait();
    assert.equal(status.code, 0);
    assert.equal(p.stderr(), "");
  });
});

Deno.test("isb rpc answers requests cut off by a daemon that stops, and keeps serving", async () => {
  const fake = await startFakeIncusd([{
    route: "POST /1.0/instances/web/exec",
    behaviour: "hang",
  }]);
  const p = spawnProgram(["rpc"], { env: { INCUS_SOCKET: fake.socket } });
  try {
    await p.readJson();
    await p.send({ id: 1, method: "sandbox.exec", params: { name: "web", argv: ["true"] } });
    for (let i = 0; fake.requests.length === 0; i++) {
      assert.ok(i < 500, "the request reaches the fake");
      await new Promise((r) => setTimeout(r, 20)); // poll until the request is in flight
    }
    await fake.close(); // the daemon goes away mid-request
    const cut = (await p.readJson()).error as Line;
    // A reset in the middle of an exchange is `io` (the spec's lower-level failure); a daemon
    // that hangs instead answers `request_timeout` (rpc/server/mod_test.ts, short deadline).
    assert.ok(["io", "connect", "request_timeout"].includes(String(cut.code)), String(cut.code));
    await p.send({ id: 2, method: "sandbox.get", params: { name: "web" } });
    const gone = (await p.readJson()).error as Line;
    assert.equal(gone.code, "connect");
    assert.deepEqual(gone.data, { socket: fake.socket });
    await p.send({ id: 3, method: "version" });
    assert.equal((await p.readJson()).id, 3);
    await p.closeStdin();
    assert.equal((await p.wait()).code, 0);
  } finally {
    await p[Symbol.asyncDispose]();
  }
});

Deno.test("compose.load of a file outside rpc mode's read grant says how to fix it", async () => {
  const home = Deno.env.get("HOME") ?? "/root";
  const outside = await Deno.makeTempDir({ dir: home, prefix: "isb-outside-" });
  try {
    await Deno.writeTextFile(`${outside}/isb.yaml`, "services:\n  web:\n    image: debian-base\n");
    await withServer(async (p) => {
      await p.readJson();
      await p.send({ id: 1, method: "compose.load", params: { files: [`${outside}/isb.yaml`] } });
      const r = await p.readJson();
      const err = r.error as { code: string; message: string; data: unknown };
      assert.equal(err.code, "invalid");
      const path = (err.data as { path: string }).path; // the first file it looked at (.env)
      assert.ok(path.startsWith(`${outside}/`), path);
      assert.ok(err.message.startsWith(`${path}: `), err.message);
      assert.match(err.message, /reads files only under its working directory/);
      assert.match(err.message, /start isb rpc from the project's directory/);
      assert.doesNotMatch(err.message, /--allow-read/);
    });
  } finally {
    await Deno.remove(outside, { recursive: true });
  }
});
