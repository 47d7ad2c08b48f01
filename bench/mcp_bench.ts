// deno-lint-ignore-file no-console
/**
 * `isx mcp` against its baselines, on real Incus (issue 9's benchmark):
 *
 * 1. start: spawn → `initialize` → `tools/list` → `list_templates` answered (target
 *    < 300 ms), through `deno run` with the permission table's flags and through `bin/isx`
 *    (which first computes those flags);
 * 2. exec of `true` through the `exec` tool against `incus exec NAME -- true` (target:
 *    faster) and the raw REST exec (POST with recorded output, wait; target ≤ 1.3x),
 *    interleaved per iteration so host noise hits all alike; with the tool's parts timed in
 *    the same rounds: the instance read of its holding check (which the tool overlaps with the
 *    exec's start), the foreground engine alone
 *    (websocket exec of the guest wrapper, no MCP), a bare websocket exec of `true`;
 * 3. `create_instance` to a usable instance against `isx branch` (target ≤ 1.1x).
 *
 * Run: `deno run -A bench/mcp_bench.ts [--starts 10] [--execs 50] [--creates 3]` (a count of
 * 0 skips its part). Needs a built tpl-minimal. Prints medians, the ratios against the named
 * baselines and the load average before and after.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient } from "../rpc/mod.ts";
import { createTaskEngine } from "../mcp/tasks/mod.ts";
import { makeHome, mcpCommand } from "../tests/helpers/mcp.ts";
import { ROOT, spawnProgram } from "../tests/helpers/spawn.ts";
import { removeInstance } from "../tests/helpers/incus_wait.ts";

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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const load = () => Deno.loadavg().map((x) => x.toFixed(2)).join(" ");
function count(flag: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${flag}: a whole number ≥ 0, not "${v}"`);
  return n;
}
const STARTS = count("starts", values.starts);
const EXECS = count("execs", values.execs);
const CREATES = count("creates", values.creates);
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
  await call("initialize", init);
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
  // the CLI was seen to hang for minutes on a loaded host: a bound, so the bench ends
  const out = await new Deno.Command("incus", {
    args: ["exec", name, "--", "true"],
    stdout: "null",
    stderr: "null",
    signal: AbortSignal.timeout(60_000),
  }).output();
  if (out.signal) throw new Error("incus exec -- true did not end within 60 s (killed)");
  if (!out.success) throw new Error("incus exec failed");
}

const made: string[] = [];
const init = { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench" } };

async function starts(): Promise<void> {
  const direct: number[] = [];
  const viaLauncher: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    direct.push(await startOnce(false));
    viaLauncher.push(await startOnce(true));
  }
  const version: number[] = [];
  for (let i = 0; i < STARTS; i++) {
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
}

async function execs(s: ReturnType<typeof server>): Promise<void> {
  const mk = await s.call("tools/call", {
    name: "create_instance",
    arguments: { template: TPL, name_hint: "bench" },
  });
  if (mk.isError) throw new Error(JSON.stringify(mk));
  const name = String((mk.structuredContent as { instance: string }).instance);
  made.push(name);
  const engine = createTaskEngine({ incus });
  const ways: Record<string, () => Promise<void>> = {
    async tool() {
      const r = await s.call("tools/call", {
        name: "exec",
        arguments: { instance: name, command: "true" },
      });
      if (r.isError || (r.structuredContent as { exit_code: number }).exit_code !== 0) {
        throw new Error(JSON.stringify(r));
      }
    },
    async engine() {
      const r = await engine.runForeground(name, {
        command: "true",
        outputBytes: 1024,
        signal: new AbortController().signal,
      });
      if (r.exit_code !== 0) throw new Error(`engine: exit ${r.exit_code}`);
    },
    read: async () => void await incus.getInstance(name),
    ws: async () => {
      if ((await incus.execCapture(name, ["true"])).exitCode !== 0) throw new Error("ws: exit");
    },
    raw: () => rawExec(name),
    cli: () => cliExec(name),
  };
  const order = Object.keys(ways);
  const times: Record<string, number[]> = Object.fromEntries(order.map((k) => [k, []]));
  for (const f of Object.values(ways)) for (let i = 0; i < 3; i++) await f();
  for (let i = 0; i < EXECS; i++) {
    for (let j = 0; j < order.length; j++) {
      const k = order[(i + j) % order.length]!;
      const t0 = performance.now();
      await ways[k]!();
      times[k]!.push(performance.now() - t0);
    }
  }
  const m = Object.fromEntries(order.map((k) => [k, median(times[k]!)]));
  console.log(`exec of true, median of ${EXECS} (interleaved):`);
  console.log(`  exec tool ${fmt(m.tool!)}, raw REST ${fmt(m.raw!)}, incus exec ${fmt(m.cli!)}`);
  console.log(
    `  tool/raw ${(m.tool! / m.raw!).toFixed(2)}x (target ≤ 1.3), tool/cli ${
      (m.tool! / m.cli!).toFixed(2)
    }x (target < 1)`,
  );
  console.log(
    `  parts: instance read ${fmt(m.read!)}, foreground engine (no MCP) ${fmt(m.engine!)}, ` +
      `websocket exec of true ${fmt(m.ws!)} (the tool overlaps the read with the exec's start; ` +
      `these run in the bench's own process, so a difference under ~5 ms is noise)`,
  );
}

async function creates(s: ReturnType<typeof server>): Promise<void> {
  const mcp: number[] = [];
  const branches: number[] = [];
  for (let i = 0; i < CREATES; i++) {
    const t0 = performance.now();
    const r = await s.call("tools/call", {
      name: "create_instance",
      arguments: { template: TPL, name_hint: `b${i}` },
    });
    mcp.push(performance.now() - t0);
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
  const [cm, bm] = [median(mcp), median(branches)];
  console.log(
    `create_instance ${fmt(cm)} vs isx branch (CLI process) ${fmt(bm)}: ${
      (cm / bm).toFixed(2)
    }x (target ≤ 1.1)`,
  );
}

try {
  console.log(`load average at start: ${load()}`);
  if (STARTS > 0) await starts();
  if (EXECS > 0 || CREATES > 0) {
    const s = server();
    try {
      await s.call("initialize", init);
      if (EXECS > 0) await execs(s);
      if (CREATES > 0) await creates(s);
    } finally {
      await s.p[Symbol.asyncDispose]();
    }
  }
  console.log(`load average at end: ${load()}`);
} finally {
  for (const n of made) await removeInstance(incus, n).catch(() => {});
  incus.close();
  http.close();
}
