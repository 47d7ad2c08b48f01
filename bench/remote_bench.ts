// deno-lint-ignore-file no-console
/**
 * What the remote path costs against the unix socket, and how many Incus API requests one
 * task poll makes: the figures docs/scale.md projects to a cluster from. Interleaved per
 * iteration so host noise hits both transports alike:
 *
 * - list:  `GET /1.0/instances?recursion=1`, what `isx list` and the proxy's registry do;
 * - exec:  `execCapture(name, ["true"])` (REST exec + websockets + the operation wait);
 * - probe: `engine.probe(name, [1 running task])`, the 2 s task poll of one instance;
 *
 * each over the socket (the baseline) and over HTTPS on loopback with a trusted client
 * certificate (the remote path; a real remote adds its network round trips). Requests and
 * websockets are counted by a transport that wraps the real one. Also prints the memory an
 * idle instance holds (cgroup usage from incusd), for the instances-per-host projection.
 *
 * Run: `deno run -A bench/remote_bench.ts [--iterations 50] [--image debian-base]`.
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
  type WsClient,
} from "../rpc/mod.ts";
import { createTaskEngine } from "../mcp/tasks/mod.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "50" },
    image: { type: "string", default: "debian-base" },
    socket: { type: "string", default: "/var/lib/incus/unix.socket" },
  },
});
const N = Number(values.iterations);
const name = `bench-remote-${crypto.randomUUID().slice(0, 8)}`;
const local = createIncusClient({ socket: values.socket });

/** The real transport, counting REST requests and websockets. */
class Counting extends HttpTransport {
  requests = 0;
  sockets = 0;
  override request(req: HttpRequest): Promise<HttpResponse> {
    this.requests++;
    return super.request(req);
  }
  override openWebSocket(
    path: string,
    timeoutMs: number,
    setup?: (ws: WsClient) => void,
  ): Promise<WsClient> {
    this.sockets++;
    return super.openWebSocket(path, timeoutMs, setup);
  }
}

function client(t: Counting): IncusClient {
  return bindClient(new IncusConn(t, "", DEFAULT_TIMEOUTS));
}

async function sh(args: string[]): Promise<string> {
  const out = await new Deno.Command(args[0]!, { args: args.slice(1), stderr: "piped" }).output();
  if (!out.success) throw new TypeError(`${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
  return new TextDecoder().decode(out.stdout);
}

function stats(xs: number[]) {
  const s = [...xs].sort((p, q) => p - q);
  const at = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))]!;
  return { median: at(0.5), p90: at(0.9) };
}

const dir = await Deno.makeTempDir({ prefix: "isx-remote-bench-" });
let fingerprint = "";
const transports: Counting[] = [];
try {
  // HTTPS on loopback (left as host-setup.sh sets it) and a trusted throwaway certificate
  const info = await local.serverInfo();
  let addr = String(info.config["core.https_address"] ?? "");
  if (!addr) {
    addr = "127.0.0.1:8443";
    await local.call("PATCH", "/1.0", { body: { config: { "core.https_address": addr } } });
  }
  await sh([
    "openssl",
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    `${dir}/k.pem`,
    "-out",
    `${dir}/c.pem`,
    "-days",
    "1",
    "-subj",
    `/CN=${name}`,
  ]);
  const cert = await Deno.readTextFile(`${dir}/c.pem`);
  const key = await Deno.readTextFile(`${dir}/k.pem`);
  const der = cert.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
  const raw = Uint8Array.from(atob(der), (c) => c.charCodeAt(0));
  fingerprint = [...new Uint8Array(await crypto.subtle.digest("SHA-256", raw))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  await local.call("POST", "/1.0/certificates", {
    body: { type: "client", name, certificate: der, restricted: false },
  });
  const sock = new Counting({ socket: values.socket });
  const https = new Counting({
    url: `https://127.0.0.1:${addr.split(":").pop()}`,
    tls: { cert, key, caCerts: [String(info.environment.certificate ?? "")] },
  });
  transports.push(sock, https);
  const via = { socket: client(sock), https: client(https) };
  const engines = {
    socket: createTaskEngine({ incus: via.socket }),
    https: createTaskEngine({ incus: via.https }),
  };

  console.log(`creating ${name} from ${values.image}…`);
  const req = { name, source: { type: "image" as const, alias: values.image }, start: true };
  await local.createInstance(req, { step: `create instance ${name}` });
  const setup = await local.execCapture(name, [
    "bash",
    "-c",
    "for i in $(seq 100); do [ -S /run/systemd/private ] && break; sleep 0.2; done; " +
    "useradd -m agentuser",
  ]);
  if (setup.exitCode !== 0) throw new TypeError("setup failed");
  await engines.socket.startCommand(name, { taskId: "t1-bnch", command: "sleep 3600" });
  await new Promise((r) => setTimeout(r, 3000)); // let the instance settle before its memory is read
  const mem = (await local.getInstanceState(name)).memory?.usage ?? 0;

  type Kind = "socket" | "https";
  const ops: Record<string, (k: Kind) => Promise<void>> = {
    list: async (k) => void await via[k].listInstances(),
    exec: async (k) => {
      const r = await via[k].execCapture(name, ["true"]);
      if (r.exitCode !== 0) throw new TypeError("exec: non-zero exit");
    },
    probe: async (k) => {
      const m = await engines[k].probe(name, ["t1-bnch"]);
      if (m.get("t1-bnch") !== "running") throw new TypeError(`probe: ${[...m]}`);
    },
  };
  const counts: Record<string, string> = {};
  for (const [op, f] of Object.entries(ops)) {
    const [r0, w0] = [sock.requests, sock.sockets];
    await f("socket");
    counts[op] = `${sock.requests - r0} requests + ${sock.sockets - w0} websockets`;
    for (let i = 0; i < 3; i++) await f("https"); // warm: TLS session, pooled connection
  }
  const times: Record<string, number[]> = {};
  const keys = Object.keys(ops).flatMap((op) => [`${op}/socket`, `${op}/https`]);
  for (const k of keys) times[k] = [];
  for (let i = 0; i < N; i++) {
    for (let j = 0; j < keys.length; j++) {
      const k = keys[(i + j) % keys.length]!;
      const [op, kind] = k.split("/") as [string, Kind];
      const t0 = performance.now();
      await ops[op]!(kind);
      times[k]!.push(performance.now() - t0);
    }
  }
  const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  console.log(`remote (HTTPS, loopback) vs unix socket, ${N} iterations each, load ${load} (ms):`);
  for (const op of Object.keys(ops)) {
    const s = stats(times[`${op}/socket`]!);
    const h = stats(times[`${op}/https`]!);
    console.log(
      `  ${op.padEnd(6)} socket median ${s.median.toFixed(1).padStart(6)} p90 ${
        s.p90.toFixed(1).padStart(6)
      }  https median ${h.median.toFixed(1).padStart(6)} p90 ${h.p90.toFixed(1).padStart(6)}  ` +
        `https/socket ${(h.median / s.median).toFixed(2)}x  (${counts[op]})`,
    );
  }
  console.log(`  idle instance memory (cgroup, 1 task running): ${(mem / 2 ** 20).toFixed(1)} MiB`);
} finally {
  await local.stopInstance(name, { step: `kill ${name}`, force: true }).catch(() => {});
  await local.deleteInstance(name, { step: `delete ${name}` }).catch(() => {});
  if (fingerprint) await local.call("DELETE", `/1.0/certificates/${fingerprint}`).catch(() => {});
  for (const t of transports) t.close();
  local.close();
  await Deno.remove(dir, { recursive: true });
}
