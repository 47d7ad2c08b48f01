import assert from "node:assert/strict";
import * as z from "zod";
import { IsbError } from "../errors.ts";
import { createIncusClient } from "../incus/mod.ts";
import { FakeExecClient } from "../../tests/fakes/exec_client.ts";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { type Handler, method } from "./dispatch.ts";
import type { ExecEngine } from "./methods/exec.ts";
import { GROUPS, METHODS } from "./methods/mod.ts";
import { sandboxSpecMethods } from "./methods/sandbox_spec.ts";
import { hello, loadMethods, serveRpc } from "./mod.ts";

type Line = Record<string, unknown>;

/** A server on in-memory streams; `next()` returns parsed output lines in order. */
function start<E>(engine: E, methods?: Record<string, Handler<E>>) {
  const input = new TransformStream<Uint8Array, Uint8Array>();
  const writer = input.writable.getWriter();
  const out: Line[] = [];
  const raw: string[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  let buf = "";
  const output = new WritableStream<Uint8Array>({
    write(chunk) {
      const text = new TextDecoder().decode(chunk);
      assert.ok(text.endsWith("\n"), "every write is one whole line");
      assert.equal(text.indexOf("\n"), text.length - 1, "one line per write");
      buf += text;
      raw.push(text);
      out.push(JSON.parse(text));
      wake?.();
    },
    close() {
      closed = true;
      wake?.();
    },
  });
  const done = serveRpc({ input: input.readable, output, engine, ...(methods ? { methods } : {}) });
  let read = 0;
  const enc = new TextEncoder();
  return {
    done,
    out,
    raw,
    isClosed: () => closed,
    write: (text: string) => writer.write(enc.encode(text)),
    send: (v: unknown) => writer.write(enc.encode(JSON.stringify(v) + "\n")),
    end: () => writer.close(),
    async next(): Promise<Line> {
      while (read >= out.length) {
        if (closed) throw new Error("output closed");
        await new Promise<void>((r) => (wake = r));
      }
      return out[read++]!;
    },
    /** Lines until the reply (result or error) of `id`. */
    async until(id: unknown): Promise<Line[]> {
      const seen: Line[] = [];
      for (;;) {
        const l = await this.next();
        seen.push(l);
        if (l.id === id && !("event" in l)) return seen;
      }
    },
  };
}

function execEngine(c: FakeExecClient): ExecEngine {
  return { client: () => c, term: undefined };
}

Deno.test("serveRpc writes the hello line before reading any input", async () => {
  const s = start({});
  assert.deepEqual(await s.next(), hello());
  assert.equal(s.raw[0], `{"isb":"${hello().isb}","protocol":1}\n`);
  await s.end();
  await s.done;
  assert.ok(s.isClosed());
});

/** A server whose engine is made by `make` (after the hello); returns its output lines. */
async function serveMade(
  make: () => Promise<unknown>,
  requests: unknown[],
  onLine?: (l: Line) => void,
) {
  const input = new TransformStream<Uint8Array, Uint8Array>();
  const w = input.writable.getWriter();
  const lines: Line[] = [];
  let first!: () => void;
  const hello = new Promise<void>((r) => (first = r));
  const output = new WritableStream<Uint8Array>({
    write(chunk) {
      const l = JSON.parse(new TextDecoder().decode(chunk));
      lines.push(l);
      if (lines.length === 1) first();
      onLine?.(l);
    },
  });
  const done = serveRpc({ input: input.readable, output, makeEngine: make });
  await hello;
  const before = [...lines];
  for (const r of requests) await w.write(new TextEncoder().encode(JSON.stringify(r) + "\n"));
  await w.close();
  await done;
  return { before, lines };
}

Deno.test("serveRpc writes the hello before the engine is made; version does not wait for it, sandbox.list does", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const timer = setTimeout(() => release(), 2000); // a version that waited would wait this long
  let made = false;
  let madeAtVersion: boolean | undefined;
  const run = serveMade(
    async () => {
      await gate;
      made = true;
      return { list: () => Promise.resolve([{ name: "a" }]) };
    },
    [{ id: 1, method: "sandbox.list" }, { id: 2, method: "version" }],
    (l) => {
      if (l.id !== 2) return;
      madeAtVersion = made;
      release();
    },
  );
  const { before, lines } = await run;
  clearTimeout(timer);
  assert.deepEqual(before, [hello()]);
  assert.equal(madeAtVersion, false, "version was answered before the engine was made");
  assert.deepEqual(lines.slice(1), [
    { id: 2, result: hello() },
    { id: 1, result: [{ name: "a" }] },
  ]);
});

Deno.test("serveRpc answers what needs the engine with the error when it cannot be made, version, schema and exec.* on an unknown id all the same", async () => {
  const { lines } = await serveMade(
    () => Promise.reject(new IsbError("connect", "cannot connect to incusd at /x: gone")),
    [
      { id: 1, method: "version" },
      { id: 2, method: "sandbox.list" },
      { id: 3, method: "schema" },
      { id: 4, method: "sandbox.nope" },
      { id: 5, method: "exec.signal", params: { exec: 99, signal: 15 } },
    ],
  );
  const byId = new Map(lines.slice(1).map((l) => [l.id, l]));
  assert.deepEqual(byId.get(1), { id: 1, result: hello() });
  assert.deepEqual(byId.get(2), {
    id: 2,
    error: { code: "connect", message: "cannot connect to incusd at /x: gone" },
  });
  assert.ok((byId.get(3)!.result as Record<string, unknown>).$defs as object, "schema answered");
  assert.equal((byId.get(4)!.error as Record<string, unknown>).code, "protocol");
  // the registry's answer on an id it never saw, not the engine's connect error
  const exec = byId.get(5)!.error as Record<string, unknown>;
  assert.notEqual(exec.code, "connect", JSON.stringify(exec));
  assert.match(String(exec.message), /99/);
});

Deno.test("loadMethods is the method table", async () => {
  assert.equal(await loadMethods(), METHODS);
});

Deno.test("version deep-equals the hello and schema names SandboxSpec", async () => {
  const s = start({});
  const h = await s.next();
  await s.send({ id: 1, method: "version", params: { ignored: true } });
  await s.send({ id: 2, method: "schema", params: 7 });
  await s.end();
  await s.done;
  const byId = new Map(s.out.slice(1).map((l) => [l.id, l]));
  assert.deepEqual(byId.get(1)?.result, h);
  const schema = byId.get(2)?.result as Record<string, Record<string, unknown>>;
  assert.ok(schema.$defs?.SandboxSpec);
  assert.ok(JSON.stringify(schema).includes("services"));
});

const BAD = [
  ["xx", /^not a request: /],
  ["[1,2]", /^not a request: invalid type/],
  ['{"id":1}', /^not a request: missing field `method`$/],
  ['{"id":1,"method":3}', /^not a request: invalid type for `method`/],
  ['"just a string"', /^not a request: invalid type/],
] as const;

Deno.test("serveRpc answers lines that are not requests with bad_request and id null", async () => {
  const s = start({});
  await s.next();
  for (const [line] of BAD) await s.write(line + "\n");
  await s.write("\n   \n\t\r\n"); // blank lines are skipped
  await s.send({ id: "after", method: "version" });
  await s.end();
  await s.done;
  const lines = s.out.slice(1);
  assert.equal(lines.length, BAD.length + 1);
  BAD.forEach(([, re], i) => {
    const l = lines[i]!;
    assert.equal(l.id, null);
    const err = l.error as { code: string; message: string };
    assert.equal(err.code, "bad_request");
    assert.match(err.message, re);
    assert.ok(!("data" in err));
  });
  assert.equal(lines.at(-1)?.id, "after");
});

Deno.test("an unknown method answers protocol, also for Object.prototype names", async () => {
  const s = start({});
  await s.next();
  for (const [id, m] of [[1, "nope"], [2, "toString"], [3, "__proto__"], [4, "exec.nope"]]) {
    await s.send({ id, method: m });
    const [reply] = await s.until(id);
    assert.deepEqual(reply!.error, {
      code: "protocol",
      message: `protocol: unknown method "${m}"`,
    });
  }
  await s.end();
  await s.done;
});

Deno.test("params absent or null are {}, and an unknown field is invalid naming it", async () => {
  const methods: Record<string, Handler<unknown>> = {
    echo: method(z.strictObject({ a: z.string().optional() }), (p) => Promise.resolve(p)),
  };
  const s = start({}, methods);
  await s.next();
  await s.send({ id: 1, method: "echo" });
  await s.send({ id: 2, method: "echo", params: null });
  await s.send({ id: 3, method: "echo", params: { cpu: 1 } });
  await s.send({ method: "echo", params: { a: "x" } });
  await s.end();
  await s.done;
  const r = new Map(s.out.slice(1).map((l) => [l.id, l]));
  assert.deepEqual(r.get(1)?.result, {});
  assert.deepEqual(r.get(2)?.result, {});
  const e = r.get(3)?.error as { code: string; message: string };
  assert.equal(e.code, "invalid");
  assert.match(e.message, /^params: .*cpu/);
  assert.deepEqual(r.get(null)?.result, { a: "x" });
});

Deno.test("requests run concurrently; EOF waits for those in flight", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const methods: Record<string, Handler<unknown>> = {
    slow: async () => (await gate, "slow"),
    fast: (_raw, ctx) => {
      ctx.emit("progress", "working");
      return Promise.resolve(undefined);
    },
  };
  const s = start({}, methods);
  await s.next();
  await s.send({ id: "s", method: "slow" });
  await s.send({ id: "f", method: "fast" });
  await s.end();
  assert.deepEqual(await s.next(), { id: "f", event: "progress", data: "working" });
  assert.deepEqual(await s.next(), { id: "f", result: null });
  assert.ok(!s.isClosed());
  release();
  assert.deepEqual(await s.next(), { id: "s", result: "slow" });
  await s.done;
  assert.ok(s.isClosed());
});

Deno.test("serveRpc reads a 10 MiB line", async () => {
  const s = start({});
  await s.next();
  const pad = "x".repeat(10 * 1024 * 1024);
  await s.write(`{"id":"big","method":"version","params":{"pad":"${pad}"}}\n`);
  await s.write(`{"id":"junk","pad":"${pad}"\n`);
  await s.end();
  await s.done;
  assert.deepEqual(s.out[1], { id: "big", result: hello() });
  assert.equal((s.out[2]?.error as { code: string }).code, "bad_request");
});

Deno.test("exec controls sent before the command starts are queued and replayed in order", async () => {
  const c = new FakeExecClient();
  let open!: () => void;
  c.gate = new Promise<void>((r) => (open = r));
  const s = start(execEngine(c));
  await s.next();
  await s.send({
    id: 2,
    method: "sandbox.exec",
    params: { name: "web", argv: ["cat"], stdin: "piped", stream: true },
  });
  await s.send({ id: 3, method: "exec.write", params: { exec: 2, data: "aGkK" } });
  assert.deepEqual(await s.next(), { id: 3, result: null });
  await s.send({ id: 4, method: "exec.write", params: { exec: 2, data: "dGhlcmUK" } });
  await s.send({ id: 5, method: "exec.close_stdin", params: { exec: 2 } });
  assert.deepEqual(await s.next(), { id: 4, result: null });
  assert.deepEqual(await s.next(), { id: 5, result: null });
  open();
  const rest = await s.until(2);
  assert.deepEqual(rest.at(-1), { id: 2, result: { exit_code: 0 } });
  const stdout = rest.filter((l) => l.event === "stdout").map((l) => atob(l.data as string));
  assert.equal(stdout.join(""), "hi\nthere\n");
  await s.send({ id: 6, method: "exec.signal", params: { exec: 2, signal: 15 } });
  assert.deepEqual((await s.next()).error, {
    code: "not_found",
    message: "running exec 2 not found",
  });
  await s.end();
  await s.done;
});

Deno.test("sandbox.exec without stream answers base64 stdout and stderr", async () => {
  const c = new FakeExecClient();
  c.program = (x) => {
    x.out(new Uint8Array([0, 255, 10]));
    x.err("e");
    x.end(7);
  };
  const s = start(execEngine(c));
  await s.next();
  await s.send({ id: "x", method: "sandbox.exec", params: { name: "w", argv: ["a"] } });
  assert.deepEqual(await s.next(), {
    id: "x",
    result: { exit_code: 7, stdout: "AP8K", stderr: "ZQ==" },
  });
  await s.end();
  await s.done;
});

const CONTROL_ERRORS = [
  { params: { exec: 1, signal: 9, project: "p" }, m: "exec.signal", code: "invalid" },
  { params: { exec: 1, data: "a$b" }, m: "exec.write", code: "invalid" },
  { params: { data: "aGk=" }, m: "exec.write", code: "invalid" },
  { params: { exec: "nope" }, m: "exec.close_stdin", code: "not_found" },
  { params: { exec: 41, width: 1, height: 2 }, m: "exec.resize", code: "not_found" },
];

for (const t of CONTROL_ERRORS) {
  Deno.test(`${t.m} with ${JSON.stringify(t.params)} answers ${t.code}`, async () => {
    const s = start(execEngine(new FakeExecClient()));
    await s.next();
    await s.send({ id: 1, method: t.m, params: t.params });
    assert.equal(((await s.next()).error as { code: string }).code, t.code);
    await s.end();
    await s.done;
  });
}

Deno.test("a failed sandbox.exec drops its queued controls; later ones are not_found", async () => {
  const c = new FakeExecClient();
  let fail!: (e: unknown) => void;
  c.gate = new Promise<void>((_, reject) => (fail = reject));
  const s = start(execEngine(c));
  await s.next();
  await s.send({ id: 9, method: "sandbox.exec", params: { name: "w", argv: ["cat"] } });
  await s.send({ id: 10, method: "exec.write", params: { exec: 9, data: "aGk=" } });
  assert.deepEqual(await s.next(), { id: 10, result: null });
  fail(new IsbError("not_found", "incusd: POST /1.0/instances/w/exec: not found (HTTP 404)"));
  assert.equal(((await s.next()).error as { code: string }).code, "not_found");
  await s.send({ id: 11, method: "exec.write", params: { exec: 9, data: "aGk=" } });
  assert.deepEqual((await s.next()).error, {
    code: "not_found",
    message: "running exec 9 not found",
  });
  await s.send({ id: 12, method: "sandbox.exec", params: { name: "w", argv: [] } });
  assert.deepEqual((await s.next()).error, { code: "invalid", message: "exec needs a command" });
  await s.end();
  await s.done;
});

Deno.test("an incusd that hangs or is gone answers request_timeout, then connect; serving goes on", async () => {
  const fake = await startFakeIncusd([
    { route: "POST /1.0/instances/web/exec", behaviour: "hang" },
  ]);
  const incus = createIncusClient({ socket: fake.socket, timeouts: { requestMs: 300 } });
  try {
    const s = start<ExecEngine>({ client: () => incus, term: undefined });
    await s.next();
    await s.send({ id: 1, method: "sandbox.exec", params: { name: "web", argv: ["true"] } });
    const timeout = (await s.next()).error as { code: string; data: Record<string, unknown> };
    assert.equal(timeout.code, "request_timeout");
    assert.deepEqual(Object.keys(timeout.data).sort(), ["method", "path", "timeout_secs"]);
    await fake.close();
    const params = { name: "web", argv: ["true"], user: "dev" };
    await s.send({ id: 2, method: "sandbox.exec", params });
    const gone = (await s.next()).error as { code: string; data: unknown };
    assert.equal(gone.code, "connect");
    assert.deepEqual(gone.data, { socket: fake.socket });
    await s.send({ id: 3, method: "version" });
    assert.deepEqual(await s.next(), { id: 3, result: hello() });
    await s.end();
    await s.done;
  } finally {
    incus.close();
  }
});

Deno.test("METHODS holds exactly the 29 methods of the spec", () => {
  const expected = [
    "version",
    "schema",
    ..."create ensure plan resolve get list remove start stop restart wait_ready add_port remove_device exec"
      .split(" ").map((m) => `sandbox.${m}`),
    ..."write close_stdin signal resize".split(" ").map((m) => `exec.${m}`),
    ..."list get create remove".split(" ").map((m) => `volume.${m}`),
    "prune",
    ..."load up plan down".split(" ").map((m) => `compose.${m}`),
  ].sort();
  assert.equal(expected.length, 29);
  assert.deepEqual(Object.keys(METHODS).sort(), expected);
});

Deno.test("each group's list is exactly its module's table, and a call through the table loads and answers as it does", async () => {
  const tables: Record<string, Record<string, unknown>> = {
    sandbox: (await import("./methods/sandbox.ts")).sandboxMethods,
    sandbox_spec: sandboxSpecMethods,
    exec: (await import("./methods/exec.ts")).execMethods,
    volume: (await import("./methods/volume.ts")).volumeMethods,
    compose: (await import("./methods/compose.ts")).composeMethods,
  };
  assert.deepEqual(Object.keys(GROUPS).sort(), Object.keys(tables).sort());
  for (const [name, g] of Object.entries(GROUPS)) {
    assert.deepEqual([...g.methods].sort(), Object.keys(tables[name]!).sort(), name);
    assert.equal(await g.load(), tables[name], name);
    for (const m of g.methods) {
      // the wrapper's engine-free mark (read before the group loads) is the handler's own
      const own = (tables[name]![m] as { engineFree?: true }).engineFree === true;
      assert.equal(METHODS[m]!.engineFree === true, own, m);
    }
  }
  // through the table: the group's own params check, the error naming the field
  const ctx = { id: 1, key: "1", emit: () => {}, engine: {} as never };
  await assert.rejects(
    METHODS["sandbox.ensure"]!({ spec: { image: "x" }, nope: 1 }, ctx),
    (e: unknown) => e instanceof IsbError && e.code === "invalid" && /nope/.test(e.message),
  );
  await assert.rejects(
    METHODS["sandbox.add_port"]!({ name: "a" }, ctx),
    (e: unknown) => e instanceof IsbError && e.code === "invalid" && /port/.test(e.message),
  );
  await assert.rejects(
    METHODS["volume.list"]!({ pools: 1 }, ctx),
    (e: unknown) => e instanceof IsbError && e.code === "invalid" && /pools/.test(e.message),
  );
});
