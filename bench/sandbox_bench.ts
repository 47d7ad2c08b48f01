// deno-lint-ignore-file no-console -- a benchmark prints its figures
/**
 * Sandbox engine benchmarks against the real daemon (run by hand; prints medians and ratios
 * against named baselines, asserts nothing):
 *
 *   deno run -A bench/sandbox_bench.ts [--runs N (default 20)] [--creates N (default 3)]
 *     [--part ensure|get|create|all]
 *
 * Two baselines, because they answer different questions:
 * - **the `incus` CLI** (what a person or a script would run; it pays a Go process start per
 *   call): `incus config show NAME` for an unchanged ensure, `incus launch` + polling the
 *   state until Running for a create;
 * - **raw REST in one process** (no process start, no engine, no protocol): the very requests
 *   the engine made for an unchanged ensure (recorded once and replayed), `GET
 *   /1.0/instances/NAME` for a get, `POST /1.0/instances` (start) + polling the state for a
 *   create. The replayed requests are timed one after another and all at once (the engine
 *   overlaps some; all at once is the floor, and the baseline). Against it: the library
 *   (`createEngine` in this process) and `isb rpc` through its process (`bin/isb rpc`, one
 *   long-lived process, line JSON on its stdin/stdout).
 *
 * Runs of the variants alternate, so a drifting shared daemon weighs on all of them alike;
 * a failed run is counted and left out. Everything created is deleted.
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  bindClient,
  createIncusClient,
  DEFAULT_TIMEOUTS,
  type HttpRequest,
  type HttpResponse,
  HttpTransport,
  type IncusClient,
  IncusConn,
} from "../rpc/mod.ts";
import { createEngine } from "../rpc/sandbox/mod.ts";
import { parseSpec } from "../rpc/sandbox/spec/spec.ts";
import { RpcClient } from "../tests/helpers/rpc_client.ts";

const SOCKET = Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket";
const IMAGE = Deno.env.get("ISX_TEST_IMAGE") || "debian-base";
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "20" },
    creates: { type: "string", default: "3" },
    part: { type: "string", default: "all" },
  },
});
const RUNS = Number(values.runs);
const CREATES = Number(values.creates);
const part = (p: string) => values.part === "all" || values.part === p;

/** A transport that notes each request (method and path) before making it. */
class RecordingTransport extends HttpTransport {
  log: string[] | undefined;
  override request(req: HttpRequest): Promise<HttpResponse> {
    this.log?.push(`${req.method} ${req.path}`);
    return super.request(req);
  }
}

const tag = crypto.randomUUID().slice(0, 6);
const steady = `t-bench-${tag}`;
const created = new Set<string>();
let seq = 0;
let failures = 0;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
}

function row(label: string, ms: number, baselines: [string, number][] = []): void {
  const ratios = baselines.map(([n, b]) => `${(ms / b).toFixed(2)}x ${n}`).join(", ");
  console.log(`${label.padEnd(52)} ${ms.toFixed(1).padStart(8)} ms${ratios ? `  ${ratios}` : ""}`);
}

/** Runs each variant `n` times, alternating variants run by run; medians by name. */
async function alternate(
  n: number,
  variants: Record<string, (timed: (f: () => Promise<void>) => Promise<void>) => Promise<void>>,
): Promise<Record<string, number>> {
  const times: Record<string, number[]> = Object.fromEntries(
    Object.keys(variants).map((k) => [k, []]),
  );
  const names = Object.keys(variants);
  for (let i = 0; i < n; i++) {
    const order = i % 2 === 0 ? names : [...names].reverse();
    for (const k of order) {
      try {
        // a variant times only the part inside `timed` (set-up and clean-up stay out)
        await variants[k]!(async (f) => {
          const t = performance.now();
          await f();
          times[k]!.push(performance.now() - t);
        });
      } catch (e) {
        failures++;
        console.error(`${k}: run failed: ${e instanceof Error ? e.message : e}`);
      }
    }
  }
  return Object.fromEntries(names.map((k) => [k, median(times[k]!)]));
}

async function incusCli(args: string[]): Promise<void> {
  const r = await new Deno.Command("incus", { args, stdout: "null", stderr: "piped" }).output();
  if (!r.success) {
    throw new TypeError(`incus ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
  }
}

async function waitRunning(incus: IncusClient, name: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if ((await incus.getInstanceState(name)).status === "Running") return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new TypeError(`${name} never became Running`);
}

async function restCreate(incus: IncusClient, name: string): Promise<void> {
  await incus.createInstance(
    { name, type: "container", source: { type: "image", alias: IMAGE }, start: true },
    { step: `create instance ${name}` },
  );
  await waitRunning(incus, name);
}

async function ensureParts(
  incus: IncusClient,
  rec: RecordingTransport,
  engine: ReturnType<typeof createEngine>,
  rpc: RpcClient,
) {
  const spec = { container_name: steady, image: IMAGE };
  const ensureLib = async () => {
    const r = await engine.ensure({ spec: parseSpec(spec) });
    if (r.report.applied.length > 0) throw new TypeError("ensure was not a no-op");
  };
  rec.log = [];
  await ensureLib();
  const requests = rec.log;
  rec.log = undefined;
  console.log(`\n# ensure of an unchanged sandbox (median of ${RUNS} runs)`);
  console.log(`the engine's requests, replayed as the REST baseline: ${requests.join(", ")}`);
  const send = (r: string) => {
    const [method, path] = r.split(" ") as [string, string];
    return incus.raw(method, path);
  };
  // the engine overlaps some of its requests: one after another is an upper bound of the REST
  // time, all at once its floor (the baseline)
  const inSeries = async () => {
    for (const r of requests) await send(r);
  };
  const atOnce = async () => void await Promise.all(requests.map(send));
  const m = await alternate(RUNS, {
    cli: (timed) => timed(() => incusCli(["config", "show", steady])),
    series: (timed) => timed(inSeries),
    rest: (timed) => timed(atOnce),
    lib: (timed) => timed(ensureLib),
    rpc: (timed) =>
      timed(async () => {
        const r = await rpc.call("sandbox.ensure", { spec });
        if (r.error) throw new TypeError(JSON.stringify(r.error));
      }),
  });
  const cli: [string, number] = ["CLI", m.cli!];
  const rest: [string, number] = ["REST", m.rest!];
  row("incus config show NAME (CLI process)", m.cli!);
  row(`the same ${requests.length} requests, raw REST, one after another`, m.series!);
  row(`the same ${requests.length} requests, raw REST, all at once`, m.rest!);
  row("sandbox.ensure, library", m.lib!, [cli, rest]);
  row("sandbox.ensure through isb rpc (bin/isb rpc)", m.rpc!, [cli, rest]);
}

async function getPart(
  incus: IncusClient,
  engine: ReturnType<typeof createEngine>,
  rpc: RpcClient,
) {
  console.log(`\n# get of one sandbox (median of ${RUNS} runs)`);
  const m = await alternate(RUNS, {
    cli: (timed) => timed(() => incusCli(["list", steady, "-f", "csv", "-c", "ns"])),
    rest: (timed) => timed(async () => void await incus.getInstance(steady)),
    lib: (timed) => timed(async () => void await engine.get(steady)),
    rpc: (timed) =>
      timed(async () => {
        const r = await rpc.call("sandbox.get", { name: steady });
        if (r.error) throw new TypeError(JSON.stringify(r.error));
      }),
  });
  const cli: [string, number] = ["CLI", m.cli!];
  const rest: [string, number] = ["REST", m.rest!];
  row("incus list NAME (CLI process)", m.cli!);
  row("GET /1.0/instances/NAME, raw REST in one process", m.rest!);
  row("sandbox.get, library", m.lib!, [cli, rest]);
  row("sandbox.get through isb rpc (bin/isb rpc)", m.rpc!, [cli, rest]);
}

async function createPart(
  incus: IncusClient,
  engine: ReturnType<typeof createEngine>,
  rpc: RpcClient,
) {
  console.log(`\n# create until ready (median of ${CREATES} runs)`);
  const fresh = (k: string) => {
    const name = `t-bench-${tag}-${k}${seq++}`;
    created.add(name);
    return name;
  };
  const drop = async (name: string) => {
    await incusCli(["delete", "-f", name]);
    created.delete(name);
  };
  const m = await alternate(CREATES, {
    cli: async (timed) => {
      const name = fresh("l");
      await timed(async () => {
        await incusCli(["launch", IMAGE, name]);
        await waitRunning(incus, name);
      });
      await drop(name);
    },
    rest: async (timed) => {
      const name = fresh("r");
      await timed(() => restCreate(incus, name));
      await drop(name);
    },
    lib: async (timed) => {
      const name = fresh("c");
      await timed(async () =>
        void await engine.create({ spec: parseSpec({ container_name: name, image: IMAGE }) })
      );
      await drop(name);
    },
    rpc: async (timed) => {
      const name = fresh("p");
      await timed(async () => {
        const r = await rpc.call("sandbox.create", {
          spec: { container_name: name, image: IMAGE },
        });
        if (r.error) throw new TypeError(JSON.stringify(r.error));
      });
      await drop(name);
    },
  });
  const cli: [string, number] = ["CLI", m.cli!];
  const rest: [string, number] = ["REST", m.rest!];
  row("incus launch + state polled until Running (CLI)", m.cli!);
  row("POST /1.0/instances (start) + state polled, raw REST", m.rest!);
  row("sandbox.create until ready, library", m.lib!, [cli, rest]);
  row("sandbox.create through isb rpc (bin/isb rpc)", m.rpc!, [cli, rest]);
}

if (import.meta.main) {
  // the daemon is shared: a request may wait behind other work for longer than the default
  const timeouts = { ...DEFAULT_TIMEOUTS, requestMs: 120_000 };
  const rec = new RecordingTransport({ socket: SOCKET });
  const incus = bindClient(new IncusConn(rec, "", timeouts, ""));
  const plain = createIncusClient({ socket: SOCKET, timeouts });
  const dir = await Deno.makeTempDir({ prefix: "isb-bench-" });
  const engine = createEngine({
    incus,
    cwd: dir,
    env: { HOME: Deno.env.get("HOME") ?? "/root" },
    lockDir: `${dir}/lock`,
    isbStateDir: `${dir}/state`,
  });
  created.add(steady);
  try {
    await engine.ensure({ spec: parseSpec({ container_name: steady, image: IMAGE }) });
    await using rpc = await RpcClient.start(["--socket", SOCKET], { launcher: true, cwd: dir });
    if (part("ensure")) await ensureParts(plain, rec, engine, rpc);
    if (part("get")) await getPart(plain, engine, rpc);
    if (part("create")) await createPart(plain, engine, rpc);
    if (failures) console.log(`(${failures} runs failed and were left out)`);
  } finally {
    for (const name of created) await incusCli(["delete", "-f", name]).catch(() => {});
    incus.close();
    plain.close();
    await Deno.remove(dir, { recursive: true });
  }
}
