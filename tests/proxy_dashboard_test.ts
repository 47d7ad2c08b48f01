/**
 * The dashboard on a real proxy's ops port (loopback, in process): the fences (the page
 * token or its cookie, else 401; a `Host` of 127.0.0.1:<port> or localhost:<port>, else
 * 421; GET only), the page's own bytes with a self-only CSP, the event stream that sends a
 * view when something changed (a refused forward-proxy target, a task report), and
 * `POST /tasks` with its token. The browser test is tests/live/dashboard_live_test.ts.
 */

import { deepStrictEqual, equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { emptyCredentials } from "../proxy/config/credentials.ts";
import {
  cookieName,
  dashboardToken,
  type DashboardView,
  InstanceShelf,
  Policy,
  type ProxyHandle,
  startProxy,
  writeRunFiles,
} from "../proxy/mod.ts";
import { spawnProgram } from "./helpers/spawn.ts";
import type { Instance } from "../rpc/mod.ts";
import { PortCallers } from "./fakes/guest_client.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const A: Caller = { name: "dash-a", incarnation: "1", view: 1, address: "a", pins: {}, grant: [] };
const TOKEN = "a".repeat(64);
const REPORT = "b".repeat(64);
const enc = new TextEncoder();
const dec = new TextDecoder();

function fakeInstance(name: string, stamps: Record<string, string>): Instance {
  const config: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamps)) config[`user.incus-spawn.${k}`] = v;
  return {
    name,
    type: "container",
    status: "Running",
    status_code: 103,
    architecture: "x86_64",
    config,
    devices: { eth0: { type: "nic", network: "b0", "ipv4.address": "10.9.8.7" } },
    profiles: ["default"],
    ephemeral: false,
    stateful: false,
    description: "",
    created_at: "2026-12-01T10:00:00Z",
    last_used_at: "2026-12-01T10:00:00Z",
    location: "none",
    project: "default",
  } as unknown as Instance;
}

/** One raw HTTP/1.1 exchange, so the Host header is exactly what the test says. */
async function raw(port: number, head: string): Promise<{ status: number; text: string }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(enc.encode(head));
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(65536);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
    const text = chunks.map((c) => dec.decode(c)).join("");
    return { status: Number(text.split(" ", 2)[1]), text };
  } finally {
    conn.close();
  }
}

async function withProxy(
  fn: (p: ProxyHandle, port: number, callers: PortCallers) => Promise<void>,
) {
  const dir = await Deno.makeTempDir();
  const callers = new PortCallers();
  callers.instances = [A];
  const shelf = new InstanceShelf();
  shelf.set([
    fakeInstance("dash-a", { type: "instance", profile: "tpl-minimal", network: "full" }),
    fakeInstance("a-template", { type: "base" }),
  ]);
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(emptyCredentials()),
    ca: await loadCa(`${dir}/ca`),
    clients: callers,
    dashboard: { token: TOKEN, reportToken: REPORT, shelf },
    hostNets: () => ({ own: new Set(), subnets: [] }),
  });
  try {
    await fn(proxy, proxy.addrs.health[0]!.port, callers);
  } finally {
    await proxy.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const get = (path: string, host: string, extra = "") =>
  `GET ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n${extra}\r\n`;

Deno.test("dashboard: no token or cookie is 401; the token is traded for a cookie once; the cookie opens every page", async () => {
  await withProxy(async (_p, port) => {
    const host = `127.0.0.1:${port}`;
    for (
      const path of [
        "/dashboard",
        "/dashboard/",
        "/dashboard/app.js",
        "/dashboard/events",
        "/dashboard/view.json",
      ]
    ) {
      equal((await raw(port, get(path, host))).status, 401, path);
      equal(
        (await raw(port, get(path, host, `cookie: ${cookieName(port)}=${"c".repeat(64)}\r\n`)))
          .status,
        401,
        `${path} with a wrong cookie`,
      );
    }
    equal((await raw(port, get(`/dashboard?token=${"c".repeat(64)}`, host))).status, 401);
    const first = await raw(port, get(`/dashboard?token=${TOKEN}`, host));
    equal(first.status, 303);
    ok(first.text.includes("location: /dashboard/\r\n"), "the token leaves the address bar");
    ok(
      first.text.includes(
        `set-cookie: ${cookieName(port)}=${TOKEN}; Path=/dashboard; HttpOnly; SameSite=Strict`,
      ),
      first.text,
    );
    const cookie = `cookie: ${cookieName(port)}=${TOKEN}\r\n`;
    const page = await raw(port, get("/dashboard/", host, cookie));
    equal(page.status, 200);
    ok(page.text.includes("<title>isx dashboard</title>"));
    ok(page.text.includes("content-security-policy: default-src 'none'; script-src 'self'"));
    ok(!/src="https?:|href="https?:/.test(page.text), "nothing from outside the program");
    const uplot = await raw(port, get("/dashboard/uplot.js", localhostOf(port), cookie));
    equal(uplot.status, 200, "localhost:<port> is allowed too");
    ok(uplot.text.includes("https://github.com/leeoniya/uPlot (v1.6.32)"));
    const view = await raw(port, get("/dashboard/view.json", host, cookie));
    const doc = JSON.parse(view.text.slice(view.text.indexOf("\r\n\r\n") + 4)) as DashboardView;
    deepStrictEqual(doc.instances.map((i) => [i.name, i.template, i.address]), [
      ["dash-a", "tpl-minimal", "10.9.8.7"],
    ], "isx instances only, templates left out");
    equal(doc.health.state, "running");
    for (const m of ["POST", "PUT", "DELETE"]) {
      equal(
        (await raw(
          port,
          `${m} /dashboard/ HTTP/1.1\r\nhost: ${host}\r\n${cookie}content-length: 0\r\nconnection: close\r\n\r\n`,
        )).status,
        405,
        `${m} is refused: read-only`,
      );
    }
  });
});

function localhostOf(port: number) {
  return `localhost:${port}`;
}

Deno.test("dashboard: a foreign Host (DNS rebinding) or another port is 421, even with the token", async () => {
  await withProxy(async (_p, port) => {
    const cookie = `cookie: ${cookieName(port)}=${TOKEN}\r\n`;
    for (
      const host of [
        `evil.example:${port}`,
        `127.0.0.1.nip.io:${port}`,
        `127.0.0.1:${port + 1}`,
        "127.0.0.1",
        `[::1]:${port}`,
        "",
      ]
    ) {
      equal((await raw(port, get(`/dashboard?token=${TOKEN}`, host))).status, 421, host);
      equal((await raw(port, get("/dashboard/", host, cookie))).status, 421, `${host} cookie`);
    }
  });
});

/** Reads the event stream's `view` events. */
async function* views(port: number): AsyncGenerator<DashboardView> {
  const res = await fetch(`http://127.0.0.1:${port}/dashboard/events`, {
    headers: { cookie: `${cookieName(port)}=${TOKEN}` },
  });
  equal(res.status, 200);
  equal(res.headers.get("content-type"), "text/event-stream");
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = ev.split("\n").find((l) => l.startsWith("data: "));
        if (ev.includes("event: view") && data) yield JSON.parse(data.slice(6));
      }
    }
  } finally {
    await reader.cancel();
  }
}

async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, rej) =>
        t = setTimeout(() => rej(new Error(`not within ${ms} ms`)), ms)
      ),
    ]);
  } finally {
    clearTimeout(t);
  }
}

Deno.test("dashboard: the stream sends a view when a forward-proxy target is refused and when a task is reported, each within 2 s", async () => {
  await withProxy(async (proxy, port, callers) => {
    const it = views(port);
    try {
      const first = (await within(3000, it.next())).value as DashboardView;
      deepStrictEqual(first.refusals, []);
      deepStrictEqual(first.tasks, []);
      // a refused target: a host address (loopback is refused without the test hook)
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.addrs.forward.port });
      callers.byPort.set((conn.localAddr as Deno.NetAddr).port, A);
      await conn.write(enc.encode("CONNECT 127.0.0.1:22 HTTP/1.1\r\nhost: 127.0.0.1:22\r\n\r\n"));
      await conn.read(new Uint8Array(1024));
      conn.close();
      const second = (await within(2000, it.next())).value as DashboardView;
      equal(second.refusals[0]?.kind, "forward_target");
      equal(second.refusals[0]?.target, "127.0.0.1:22");
      equal(second.refusals[0]?.instance, "dash-a");
      ok(second.refusals[0]?.fix?.includes("network: full"));
      // a task report: wrong token, bad body, then a good one
      const post = (token: string, body: unknown) =>
        fetch(`http://127.0.0.1:${port}/tasks`, {
          method: "POST",
          headers: { "x-isx-task-token": token },
          body: JSON.stringify(body),
        });
      const fact = {
        task_id: "t1-abcd",
        instance: "dash-a",
        kind: "command",
        run: 1,
        state: "finished",
        exit_code: 3,
      };
      let r = await post(TOKEN, fact);
      equal(r.status, 403, "the page token cannot report");
      await r.body?.cancel();
      r = await post(REPORT, { ...fact, exit_code: "3" });
      equal(r.status, 400);
      ok((await r.text()).includes("exit_code"), "the bad field is named");
      r = await post(REPORT, { ...fact, extra: 1 });
      equal(r.status, 400);
      await r.body?.cancel();
      r = await post(REPORT, fact);
      equal(r.status, 200);
      await r.body?.cancel();
      const third = (await within(2000, it.next())).value as DashboardView;
      equal(third.tasks[0]?.task_id, "t1-abcd");
      equal(third.tasks[0]?.exit_code, 3);
      equal(third.tasks[0]?.state, "finished");
    } finally {
      await it.return(undefined);
    }
  });
});

Deno.test("isx dashboard prints the address of this user's running proxy, which opens the page; a proxy it did not start is refused", async () => {
  const home = await Deno.makeTempDir();
  const dir = await Deno.makeTempDir();
  const shutdown = "s".repeat(64);
  const token = await dashboardToken(shutdown);
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(emptyCredentials()),
    ca: await loadCa(`${dir}/ca`),
    clients: new PortCallers(),
    dashboard: { token, reportToken: REPORT, shelf: new InstanceShelf() },
  });
  const port = proxy.addrs.health[0]!.port;
  const env = {
    HOME: home,
    XDG_CONFIG_HOME: `${home}/.config`,
    XDG_STATE_HOME: `${home}/.local/state`,
    DENO_DIR: Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`,
  };
  const run = async () => {
    const p = spawnProgram(["dashboard"], { prog: "isx", env });
    await p.closeStdin();
    const out: string[] = [];
    for (let l = await p.readLine(); l !== undefined; l = await p.readLine()) out.push(l);
    const status = await p.wait();
    await p[Symbol.asyncDispose]();
    return { code: status.code, out: out.join("\n"), err: p.stderr() };
  };
  try {
    await Deno.mkdir(`${home}/.config/isx`, { recursive: true });
    await Deno.writeTextFile(
      `${home}/.config/isx/config.yaml`,
      `proxy:\n  ports:\n    health: ${port}\n`,
    );
    let r = await run();
    ok(r.code !== 0, "no run files: not this user's proxy");
    ok(r.err.includes("was not started by this user's isx proxy start"), r.err);
    await writeRunFiles(`${home}/.local/state/isx`, Deno.pid, shutdown);
    r = await run();
    equal(r.code, 0, r.err);
    equal(r.out, `http://127.0.0.1:${port}/dashboard?token=${token}`);
    const res = await fetch(r.out, { redirect: "manual" });
    equal(res.status, 303, "the printed address opens the page");
    await res.body?.cancel();
  } finally {
    await proxy.close();
    await Deno.remove(home, { recursive: true });
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("dashboard: stopping the proxy ends open streams (no hang, no timer left)", async () => {
  let body: ReadableStreamDefaultReader<Uint8Array> | undefined;
  await withProxy(async (_p, port) => {
    const res = await fetch(`http://127.0.0.1:${port}/dashboard/events`, {
      headers: { cookie: `${cookieName(port)}=${TOKEN}` },
    });
    body = res.body!.getReader();
    ok(!(await body.read()).done, "the stream is open");
  });
  // withProxy closed the proxy: the stream ends rather than waiting for the client
  for (;;) {
    const r = await body!.read().catch(() => ({ done: true }));
    if (r.done) break;
  }
});
