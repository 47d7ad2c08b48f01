/**
 * `isx proxy` as a process: `activity --json` against a running proxy matches its
 * `/activity`, and `start`/`status`/`stop` manage a background proxy through its pid,
 * token and log files (loopback only; bridge DNS management off).
 */

import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/ca.ts";
import { parseCredentials } from "../proxy/credentials.ts";
import { parseActivity, Policy, RECORD_FIELDS, startProxy, toRecords } from "../proxy/mod.ts";
import { spawnProgram } from "./helpers/spawn.ts";
import { guestRequest, PortCallers, startFakeUpstream } from "./fakes/upstream.ts";

const DENO_DIR = Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`;

async function runIsx(args: string[], env: Record<string, string> = {}) {
  const p = spawnProgram(args, { prog: "isx", env: { DENO_DIR, NO_COLOR: "1", ...env } });
  await p.closeStdin();
  const out: string[] = [];
  for (let l = await p.readLine(); l !== undefined; l = await p.readLine()) out.push(l);
  const status = await p.wait();
  await p[Symbol.asyncDispose]();
  return { code: status.code, out: out.join("\n"), err: p.stderr() };
}

Deno.test("isx proxy activity --json matches /activity and --plain has one line per instance", async () => {
  const dir = await Deno.makeTempDir();
  const up = startFakeUpstream();
  const ca = await loadCa(`${dir}/ca`);
  const callers = new PortCallers();
  const a = {
    name: "cli-a",
    incarnation: "x",
    view: 1,
    address: "a",
    pins: {},
    grant: "all" as const,
  };
  callers.instances = [a, { name: "cli-b", incarnation: "y", view: 1 }];
  const proxy = await startProxy({
    listen: {
      tls: { hostname: "127.0.0.1", port: 0 },
      forward: { hostname: "127.0.0.1", port: 0 },
      health: [{ hostname: "127.0.0.1", port: 0 }],
    },
    policy: new Policy(parseCredentials("")),
    ca,
    clients: callers,
    upstreamOverrides: { "api.anthropic.com": up.origin },
  });
  try {
    await guestRequest(callers, {
      port: proxy.addrs.tls.port,
      serverName: "api.anthropic.com",
      caCert: ca.certPem,
      caller: a,
      method: "POST",
      path: "/v1/messages",
      body: '{"stream":true}',
    });
    const url = `http://127.0.0.1:${proxy.addrs.health[0]!.port}`;
    const wire = parseActivity(await (await fetch(`${url}/activity`)).json());
    const json = await runIsx(["proxy", "activity", "--json", "--url", url]);
    equal(json.code, 0, json.err);
    const records = JSON.parse(json.out);
    const want = toRecords(wire);
    // idle_seconds may tick between the two reads; everything else is identical.
    assertEquals(
      records.map((r: Record<string, unknown>) => ({ ...r, idle_seconds: 0 })),
      want.map((r) => ({ ...r, idle_seconds: 0 })),
    );
    equal(records[0].requests, 1);
    equal(records[0].input_tokens, 11);
    const plain = await runIsx(["proxy", "activity", "--plain", "--url", url]);
    const lines = plain.out.split("\n");
    equal(lines.length, 2);
    for (const l of lines) equal(l.split("\t").length, RECORD_FIELDS.length);
    ok(lines[1]!.startsWith("cli-b\t"));
    const table = await runIsx(["proxy", "activity", "--url", url]);
    ok(table.out.startsWith("INSTANCE"), table.out);
  } finally {
    await proxy.close();
    await up.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("isx proxy start, status and stop manage a background proxy", async () => {
  const home = await Deno.makeTempDir();
  const port = () => 20000 + Math.floor(Math.random() * 20000);
  const ports = { tls: port(), forward: port(), health: port() };
  await Deno.mkdir(`${home}/.config/isx`, { recursive: true });
  await Deno.writeTextFile(
    `${home}/.config/isx/config.yaml`,
    `proxy:\n  gateway: 127.0.0.1\n  dns: false\n  ports: { tls: ${ports.tls}, forward: ${ports.forward}, health: ${ports.health} }\n`,
  );
  const env = { HOME: home, XDG_CONFIG_HOME: "", XDG_STATE_HOME: "", XDG_CACHE_HOME: "" };
  try {
    equal((await runIsx(["proxy", "status"], env)).code, 1);
    const started = await runIsx(["proxy", "start"], env);
    equal(started.code, 0, started.err);
    ok(started.out.includes("started (pid"), started.out);
    const st = await runIsx(["proxy", "status", "--json"], env);
    equal(st.code, 0);
    const s = JSON.parse(st.out);
    equal(s.status, "running");
    equal(s.health.listen.tls, `127.0.0.1:${ports.tls}`);
    equal((await runIsx(["proxy", "start"], env)).out, `isx proxy: already running (pid ${s.pid})`);
    const activity = await runIsx(["proxy", "activity", "--json"], env);
    equal(activity.code, 0, `activity --json failed: ${activity.err}`);
    // Other instances on the host may be listed; each record carries the counting fields.
    const records = JSON.parse(activity.out) as Record<string, unknown>[];
    ok(Array.isArray(records), activity.out);
    for (const r of records) {
      ok(typeof r.instance === "string" && "counting_since" in r && "requests" in r, activity.out);
    }
    const stopped = await runIsx(["proxy", "stop"], env);
    equal(stopped.code, 0, stopped.err);
    equal((await runIsx(["proxy", "status"], env)).code, 1);
    const logs = await runIsx(["proxy", "logs", "-n", "100"], env);
    ok(logs.out.includes("proxy: stopping"), logs.out);
  } finally {
    await runIsx(["proxy", "stop"], env).catch(() => {});
    await Deno.remove(home, { recursive: true });
  }
});
