/**
 * `isx proxy activity` as a process against a running proxy (fake callers, no Incus): `--json`
 * matches its `/activity`, `--plain` and the table have one line per instance. Managing a
 * background proxy (`start`/`status`/`stop`) needs the real Incus: tests/live/proxy_cli_test.ts.
 */

import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import { parseActivity, Policy, RECORD_FIELDS, startProxy, toRecords } from "../proxy/mod.ts";
import { spawnProgram } from "./helpers/spawn.ts";
import { guestRequest, PortCallers, startFakeUpstream } from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

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
    listen: loopbackListen(),
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
