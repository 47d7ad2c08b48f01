// deno-lint-ignore-file no-console
/**
 * `isx mcp` against its baselines, on real Incus (issue 9's benchmark):
 *
 * 1. start: spawn → `initialize` → `tools/list` → `list_templates` answered (target
 *    < 300 ms), through `deno run` with the permission table's flags and through `bin/isx`
 *    (which first computes those flags);
 * 2. exec of `true` through the `exec` tool against `incus exec NAME -- true` (target:
 *    faster) and the raw REST exec (POST with recorded output, wait; target ≤ 1.3x),
 *    interleaved per iteration so host noise hits all alike;
 * 3. `create_instance` to a usable instance against `isx branch` (target ≤ 1.1x).
 *
 * Run: `deno run -A bench/mcp_bench.ts [--starts 10] [--execs 50] [--creates 3]`. Needs a
 * built tpl-minimal. Prints medians and the ratios against the named baselines.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient } from "../rpc/mod.ts";
import { makeHome, mcpCommand } from "../tests/helpers/mcp.ts";
import { ROOT, spawnProgram } from "../tests/helpers/spawn.ts";
import { removeInstance } from "../tests/helpers/live.ts";

const { values } = parseArgs({
  options: {
    starts: { type: "string", default: "10" },
    execs: { type: "string", default: "50" },
    creates: { type: "string", default: "3" },
    template: { type: "string", default: "tpl-minimal" },
  },
});
const TPL = values.template;
const home = makeHome({ mcp: `templates: [${TPL}]\nmax-instances: 20\n` });
const { env } = mcpCommand(home);
const incus = createIncusClient({});
const http = Deno.createHttpClient({
  proxy: { transport: "unix", path: "/var/lib/incus/unix.socket" },
});

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

/** A raw line client of one `isx mcp`. */
function server(args: string[] = []) {
  const p = spawnProgram(["mcp", "--no-preflight", ...args], { env, prog: "isx", cwd: home.dir });
  let id = 0;
  return {
    p,
    async call(method: string, params: Record<string, unknown> = {}) {
      const my = ++id;
      await p.send({ jsonrpc: "2.0", id: my, method, params });
      for (;;) {
        const m = await p.readJson(600_000);
        if (m.id === my) return m.result as Record<string, unknown>;
      }
    },
  };
}

async function startOnce(launcher: boolean): Promise<number> {
  const t0 = performance.now();
  let call: (m: string, p?: Record<string, unknown>) => Promise<Record<string, unknown>>;
  let close: () => Promise<void>;
  if (launcher) {
    const child = new Deno.Command(`${ROOT}/bin/isx`, {
      args: ["mcp", "--no-preflight"],
      env,
      cwd: home.dir,
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const w = child.stdin.getWriter();
    const r = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let id = 0;
    call = async (method, params = {}) => {
      const my = ++id;
      await w.write(
        new TextEncoder().encode(JSON.stringify({ jsonrpc: "2.0", id: my, method, params }) + "\n"),
      );
      for (;;) {
        const nl = buf.indexOf("\n");
        if (nl >= 0) {
          const m = JSON.parse(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          if (m.id === my) return m.result;
          continue;
        }
        const c = await r.read();
        if (c.done) throw new Error("isx mcp ended");
        buf += c.value;
      }
    };
    close = async () => {
      await w.close();
      await r.cancel();
      await child.status;
    };
  } else {
    const s = server();
    call = s.call;
    close = async () => await s.p[Symbol.asyncDispose]();
  }
  await call("initialize", {
    protocolVersion: "2025-11-25",
    capabilities: {},
    clientInfo: { name: "bench" },
  });
  await call("tools/list");
  const lt = await call("tools/call", { name: "list_templates", arguments: {} });
  const ms = performance.now() - t0;
  if (lt.isError) throw new Error(JSON.stringify(lt));
  await close();
  return ms;
}

async function rawExec(name: string): Promise<void> {
  const res = await fetch(`http://incus/1.0/instances/${name}/exec`, {
    client: http,
    method: "POST",
    body: JSON.stringify({
      command: ["true"],
      "wait-for-websocket": false,
      "record-output": true,
      interactive: false,
    }),
  });
  const op = await res.json();
  const wait = await fetch(`http://incus/1.0/operations/${op.metadata.id}/wait?timeout=30`, {
    client: http,
  });
  const done = await wait.json();
  if (done.metadata.metadata.return !== 0) throw new Error("raw: non-zero exit");
  for (const path of Object.values(done.metadata.metadata.output ?? {}) as string[]) {
    await (await fetch(`http://incus${path}`, { client: http, method: "DELETE" })).body?.cancel();
  }
}

async function cliExec(name: string): Promise<void> {
  const out = await new Deno.Command("incus", {
    args: ["exec", name, "--", "true"],
    stdout: "null",
    stderr: "null",
  }).output();
  if (!out.success) throw new Error("incus exec failed");
}

const made: string[] = [];
try {
  const direct: number[] = [];
  const viaLauncher: number[] = [];
  for (let i = 0; i < Number(values.starts); i++) {
    direct.push(await startOnce(false));
    viaLauncher.push(await startOnce(true));
  }
  const version: number[] = [];
  for (let i = 0; i < Number(values.starts); i++) {
    const t0 = performance.now();
    await using v = spawnProgram(["--version"], { env, prog: "isx", cwd: home.dir });
    await v.closeStdin();
    await v.wait();
    version.push(performance.now() - t0);
  }
  console.log(`start → initialize → tools/list → list_templates (target < 300 ms):`);
  console.log(`  baseline, isx --version with the same flags: ${fmt(median(version))}`);
  console.log(`  deno run with the table's flags: ${fmt(median(direct))}`);
  console.log(`  bin/isx (computes the flags first): ${fmt(median(viaLauncher))}`);

  const s = server();
  await s.call("initialize", {
    protocolVersion: "2025-11-25",
    capabilities: {},
    clientInfo: { name: "bench" },
  });
  const mk = await s.call("tools/call", {
    name: "create_instance",
    arguments: { template: TPL, name_hint: "bench" },
  });
  const name = String((mk.structuredContent as { instance: string }).instance);
  made.push(name);
  const tool = async () => {
    const r = await s.call("tools/call", {
      name: "exec",
      arguments: { instance: name, command: "true" },
    });
    if (r.isError || (r.structuredContent as { exit_code: number }).exit_code !== 0) {
      throw new Error(JSON.stringify(r));
    }
  };
  const ways: Record<string, () => Promise<void>> = {
    tool,
    raw: () => rawExec(name),
    cli: () => cliExec(name),
  };
  const times: Record<string, number[]> = { tool: [], raw: [], cli: [] };
  for (const f of Object.values(ways)) for (let i = 0; i < 3; i++) await f();
  const order = Object.keys(ways);
  for (let i = 0; i < Number(values.execs); i++) {
    for (let j = 0; j < order.length; j++) {
      const k = order[(i + j) % order.length]!;
      const t0 = performance.now();
      await ways[k]!();
      times[k]!.push(performance.now() - t0);
    }
  }
  const [t, r, c] = [median(times.tool!), median(times.raw!), median(times.cli!)];
  console.log(`exec of true, median of ${values.execs}:`);
  console.log(`  exec tool ${fmt(t)}, raw REST ${fmt(r)}, incus exec ${fmt(c)}`);
  console.log(
    `  tool/raw ${(t / r).toFixed(2)}x (target ≤ 1.3), tool/cli ${
      (t / c).toFixed(2)
    }x (target < 1)`,
  );

  const creates: number[] = [];
  const branches: number[] = [];
  for (let i = 0; i < Number(values.creates); i++) {
    const t0 = performance.now();
    const r = await s.call("tools/call", {
      name: "create_instance",
      arguments: { template: TPL, name_hint: `b${i}` },
    });
    creates.push(performance.now() - t0);
    if (r.isError) throw new Error(JSON.stringify(r));
    made.push(String((r.structuredContent as { instance: string }).instance));
    const bname = `bench-br-${crypto.randomUUID().slice(0, 6)}`;
    made.push(bname);
    await using b = spawnProgram(["branch", bname, "--from", TPL, "--no-preflight"], {
      env,
      prog: "isx",
      cwd: home.dir,
    });
    const t1 = performance.now();
    await b.closeStdin();
    const st = await b.wait(600_000);
    branches.push(performance.now() - t1);
    if (st.code !== 0) throw new Error(b.stderr());
  }
  const [cm, bm] = [median(creates), median(branches)];
  console.log(
    `create_instance ${fmt(cm)} vs isx branch (CLI process) ${fmt(bm)}: ${
      (cm / bm).toFixed(2)
    }x (target ≤ 1.1)`,
  );
  await s.p[Symbol.asyncDispose]();
} finally {
  for (const n of made) await removeInstance(incus, n).catch(() => {});
  incus.close();
  http.close();
}
