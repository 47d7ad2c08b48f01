/**
 * The address-form attack (issue 18, part 2) from inside a real proxy-only instance: a raw
 * `CONNECT 012.0.0.1:8080` was approved as 12.0.0.1 and dialled as 10.0.0.1. Here the test
 * makes a network namespace of its own holding a private address (10.213.N.1 on a veth whose
 * host end is 10.213.N.2, reachable from the host), runs a listener there that records
 * every connection, and from the proxy-only instance asks the real forward proxy (on the
 * proxy-only bridge's gateway, port 3128) for that address written as octal, hex, fewer
 * parts, a 32-bit integer and mixed forms, through `curl -x` (absolute form and, with `-p`,
 * a CONNECT that curl writes), a raw absolute-form request and a raw `CONNECT`. Every answer
 * must be byte for byte the one refusal (the same as for the canonical private address), and
 * the listener must see no connection. A control first shows the host does reach it.
 */

import { deepStrictEqual, equal, ok } from "node:assert/strict";
import { LIVE_SOCKET, NO_INCUS, removeInstance, testName } from "../helpers/live.ts";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import { ensureProxyOnlyBridge, proxyOnlyNic } from "../../mcp/mod.ts";
import { ClientRegistry, incusSource, loadCa, Policy, startProxy } from "../../proxy/mod.ts";
import { emptyCredentials } from "../../proxy/config/credentials.ts";
import { unreachable } from "../../proxy/relay/forward.ts";

const IMAGE = "dev-base"; // curl, python3 (scripts/host-setup.sh)
const dec = new TextDecoder();
const PORT = 8080;

async function run(cmd: string, args: string[], check = true): Promise<string> {
  const r = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (check && !r.success) {
    throw new TypeError(`${cmd} ${args.join(" ")}: ${dec.decode(r.stderr)}`);
  }
  return dec.decode(r.stdout);
}

async function sh(incus: IncusClient, name: string, script: string) {
  let r;
  try {
    r = await incus.execCapture(name, ["bash", "-c", script], { timeoutMs: 120_000 });
  } catch (e) {
    if (!(e instanceof IsbError && e.code === "websocket")) throw e;
    r = await incus.execCapture(name, ["bash", "-c", script], { timeoutMs: 120_000 });
  }
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 90_000) {
  const deadline = Date.now() + ms;
  let why = "";
  for (;;) {
    const v = await probe().catch((e) => void (why = String((e as Error)?.message ?? e)));
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new TypeError(`timed out waiting for ${what}: ${why}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** A namespace with `10.213.n.1/30` on a veth to the host (`.2`), and a recording listener. */
async function privateNamespace() {
  const routes = await run("ip", ["-4", "route", "show"]);
  const free = Array.from({ length: 250 }, (_, i) => i + 3).filter((n) =>
    !routes.includes(`10.213.${n}.`)
  );
  const n = free[Math.floor(Math.random() * free.length)]!;
  const id = crypto.randomUUID().slice(0, 6);
  const ns = `i-addr-${id}`;
  const [host, inner] = [`iah${id}`, `ian${id}`];
  const log = await Deno.makeTempFile({ prefix: "i-addr-accepted-" });
  let listener: Deno.ChildProcess | undefined;
  const close = async () => {
    if (listener) {
      try {
        listener.kill("SIGKILL");
      } catch { /* gone */ }
      await listener.status;
    }
    await run("ip", ["link", "del", host], false);
    await run("ip", ["netns", "del", ns], false);
    await Deno.remove(log).catch(() => {});
  };
  try {
    await run("ip", ["netns", "add", ns]);
    await run("ip", ["link", "add", host, "type", "veth", "peer", "name", inner]);
    await run("ip", ["link", "set", inner, "netns", ns]);
    await run("ip", ["addr", "add", `10.213.${n}.2/30`, "dev", host]);
    await run("ip", ["link", "set", host, "up"]);
    const inNs = (...a: string[]) => run("ip", ["netns", "exec", ns, ...a]);
    await inNs("ip", "addr", "add", `10.213.${n}.1/30`, "dev", inner);
    await inNs("ip", "link", "set", inner, "up");
    await inNs("ip", "link", "set", "lo", "up");
    listener = new Deno.Command("ip", {
      args: [
        "netns",
        "exec",
        ns,
        "python3",
        "-c",
        `import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", ${PORT}))
s.listen(64)
while True:
    c, a = s.accept()
    open(${JSON.stringify(log)}, "a").write(a[0] + "\\n")
    c.close()`,
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
  } catch (e) {
    await close();
    throw e;
  }
  return {
    address: `10.213.${n}.1`,
    n,
    accepted: async () => (await Deno.readTextFile(log)).split("\n").filter(Boolean),
    clear: () => Deno.writeTextFile(log, ""),
    close,
  };
}

/** The forms of 10.213.n.1 that some parser reads as that address. */
function forms(n: number): string[] {
  const oct = (x: number) => `0${x.toString(8)}`;
  const hx = (x: number) => `0x${x.toString(16)}`;
  const int = (10 << 24 | 213 << 16 | n << 8 | 1) >>> 0;
  return [
    `${oct(10)}.${oct(213)}.${oct(n)}.${oct(1)}`, // octal
    `${oct(10)}.213.${n}.1`, // one octal part (the issue's 012.0.0.1 shape)
    `${hx(10)}.${hx(213)}.${hx(n)}.${hx(1)}`, // hex
    `10.213.${(n << 8) | 1}`, // three parts
    `10.${(213 << 16) | (n << 8) | 1}`, // two parts
    `${int}`, // 32-bit integer
    `${hx(int)}`, // hex integer
    `0${int.toString(8)}`, // octal integer
    `10.213.${n}.01`, // a leading zero
    `[::ffff:10.213.${n}.1]`, // IPv4-mapped
  ];
}

Deno.test({
  name: "forward proxy: octal, hex, short and integer forms of a private address are refused",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET });
    const po = testName("iaddr");
    const created: string[] = [];
    const dir = await Deno.makeTempDir();
    // A proxy-only bridge of the test's own: the user's proxy may hold 3128 on isx's.
    const ownBridge = `iaddr${crypto.randomUUID().slice(0, 6)}`;
    let registry: ClientRegistry | undefined;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    const target = await privateNamespace();
    try {
      const { bridge, gateway: gw } = await ensureProxyOnlyBridge(incus, {
        bridge: "incusbr0",
        proxyOnlyBridge: ownBridge,
      });
      registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
      await registry.start();
      proxy = await startProxy({
        listen: {
          tls: { hostname: "127.0.0.1", port: 0 },
          forward: { hostname: "127.0.0.1", port: 0 },
          health: [{ hostname: "127.0.0.1", port: 0 }],
        },
        policy: new Policy(emptyCredentials()),
        ca: await loadCa(`${dir}/ca`),
        clients: registry,
      });
      const p = proxy;
      await until(
        "the gateway's port 3128",
        () => p.addListen({ hostname: gw, tls: 0, forward: 3128 }).then(() => true),
      );
      created.push(po);
      await incus.createInstance({
        name: po,
        source: { type: "image", alias: IMAGE },
        devices: { eth0: proxyOnlyNic(bridge) },
        start: true,
      }, { step: `launch ${po}` });
      await until(`an IPv4 address on ${po}`, async () => {
        const st = await incus.getInstanceState(po);
        return st.network?.eth0?.addresses.find((a) => a.family === "inet")?.address;
      });
      // Control: the host (where the proxy dials from) reaches the namespace's listener.
      // Every connection made here is logged (perhaps after a later probe has read the log):
      // the log is cleared only once it holds all of them, so a late line of the control's
      // cannot pass for a dial of the proxy's.
      let made = 0;
      await until("the namespace's listener", async () => {
        const c = await Deno.connect({ hostname: target.address, port: PORT });
        made++;
        c.close();
        return (await target.accepted()).length > 0 ? true : undefined;
      });
      await until(
        `the listener's log of the control's ${made} connection(s)`,
        async () => (await target.accepted()).length >= made ? true : undefined,
        10_000,
      );
      await target.clear();

      const want = dec.decode(unreachable());
      const body = want.slice(want.indexOf("\r\n\r\n") + 4);
      const proxyUrl = `http://${gw}:3128`;
      const seen: string[] = [];
      for (const host of [target.address, ...forms(target.n)]) {
        const a = `${host}:${PORT}`;
        const raw = async (request: string) => {
          const r = await sh(
            incus,
            po,
            `exec 3<>/dev/tcp/${gw}/3128; printf '${request}' >&3; timeout 10 cat <&3 | base64 -w0`,
          );
          return dec.decode(Uint8Array.from(atob(r.out.trim()), (ch) => ch.charCodeAt(0)));
        };
        seen.push(
          `${a} CONNECT: ${
            await raw(`CONNECT ${a} HTTP/1.1\\r\\nhost: ${a}\\r\\n\\r\\n`) === want ? "ok" : "NO"
          }`,
        );
        seen.push(
          `${a} absolute-form: ${
            await raw(`GET http://${a}/ HTTP/1.1\\r\\nhost: ${a}\\r\\n\\r\\n`) === want
              ? "ok"
              : "NO"
          }`,
        );
        for (const [flag, expect] of [["", `502:000\n${body}`], ["-p", `000:502\n${body}`]]) {
          // curl writes the form itself (absolute-form, or with -p a CONNECT it sends).
          const via = await sh(
            incus,
            po,
            `curl -s ${flag} -o /tmp/body -w '%{http_code}:%{http_connect}' --max-time 10 -x ${proxyUrl} http://${a}/; echo; cat /tmp/body`,
          );
          const okay = via.out === expect;
          seen.push(`${a} curl ${flag || "-x"}: ${okay ? "ok" : `NO ${JSON.stringify(via.out)}`}`);
        }
      }
      deepStrictEqual(seen.filter((s) => !s.endsWith(": ok")), [], seen.join("\n"));
      ok(seen.length >= 40, `${seen.length} probes`);
      const dialled = (await target.accepted()).join(",");
      equal(dialled, "", `the namespace's listener saw connections from ${dialled}`);
    } finally {
      for (const n of created) await removeInstance(incus, n);
      await proxy?.close();
      await registry?.close();
      await target.close();
      await incus.deleteNetwork(ownBridge, { step: "cleanup" }).catch(() => {});
      await incus.deleteNetworkAcl(`isx-proxy-only-${ownBridge}`, { step: "cleanup" })
        .catch(() => {});
      incus.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
