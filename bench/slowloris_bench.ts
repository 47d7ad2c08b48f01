// deno-lint-ignore-file no-console -- a benchmark prints its figures
/**
 * Does the proxy's memory come back after a slowloris wave (issue 18)? A proxy runs in a
 * process of its own (every loopback caller is one instance, `a`, at the default cap of 256
 * connections), with a short header timeout; the client opens waves of 300 connections to
 * the forward and TLS ports that send a partial head and stall. The proxy's RSS is read
 * before, at each wave's peak, and once the header timeout has closed them; a retained rise
 * that does not grow from wave to wave is memory the allocator kept for reuse, one that
 * grows is a leak. Prints RSS in MiB and the ratio to the baseline (the idle proxy).
 *
 * `deno run -A bench/slowloris_bench.ts [waves=3] [conns=300]`
 *
 * @module
 */

const HERE = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const enc = new TextEncoder();

async function proxyRole(): Promise<void> {
  const { Policy, startProxy } = await import(`file://${HERE}/proxy/mod.ts`);
  const { loadCa } = await import(`file://${HERE}/proxy/tls/ca.ts`);
  const { emptyCredentials } = await import(`file://${HERE}/proxy/config/credentials.ts`);
  const dir = await Deno.makeTempDir();
  const a = { name: "a", incarnation: "1", view: 1, address: "a", pins: {}, grant: "all" };
  const proxy = await startProxy({
    listen: {
      tls: { hostname: "127.0.0.1", port: 0 },
      forward: { hostname: "127.0.0.1", port: 0 },
      health: [],
    },
    policy: new Policy(emptyCredentials(), { domains: ["localhost"] }),
    ca: await loadCa(`${dir}/ca`),
    clients: { identify: () => Promise.resolve(a), known: () => [a] },
    limits: { headerTimeoutMs: 1500 },
  });
  console.log(JSON.stringify({ tls: proxy.addrs.tls.port, forward: proxy.addrs.forward.port }));
  const lines = Deno.stdin.readable.pipeThrough(new TextDecoderStream());
  for await (const chunk of lines) {
    for (const _ of chunk.split("\n").filter(Boolean)) {
      (globalThis as { gc?: () => void }).gc?.();
      const m = Deno.memoryUsage();
      console.log(JSON.stringify({ rss: m.rss, heap: m.heapUsed, ext: m.external }));
    }
  }
  await proxy.close();
}

async function client(waves: number, conns: number): Promise<void> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", import.meta.url, "proxy"],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const out = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  const next = async (): Promise<Record<string, number>> => {
    for (;;) {
      const i = pending.indexOf("\n");
      if (i >= 0) {
        const line = pending.slice(0, i);
        pending = pending.slice(i + 1);
        return JSON.parse(line);
      }
      const r = await out.read();
      if (r.done) throw new TypeError("the proxy exited");
      pending += r.value;
    }
  };
  const w = child.stdin.getWriter();
  let last: Record<string, number> = {};
  const rss = async () => {
    await w.write(enc.encode("?\n"));
    last = await next();
    return last.rss! / 1048576;
  };
  const ports = await next();
  const settle = () => new Promise((r) => setTimeout(r, 500));
  await settle();
  const base = await rss();
  const row = (what: string, mib: number) =>
    console.log(
      `${what.padEnd(34)} ${mib.toFixed(1).padStart(7)} MiB  x${(mib / base).toFixed(2)}  ` +
        `(JS heap ${(last.heap! / 1048576).toFixed(1)}, external ${
          (last.ext! / 1048576).toFixed(1)
        })`,
    );
  row("idle proxy (baseline)", base);
  for (let wave = 1; wave <= waves; wave++) {
    const open: Deno.Conn[] = [];
    for (let i = 0; i < conns; i++) {
      const port = i % 2 ? ports.tls! : ports.forward!;
      const c = await Deno.connect({ hostname: "127.0.0.1", port });
      // a head that never ends (the TLS port gets half a ClientHello's worth of bytes)
      await c.write(enc.encode("CONNECT example.com:443 HTTP/1.1\r\nx: ")).catch(() => 0);
      open.push(c);
    }
    await settle();
    row(`wave ${wave}: ${conns} stalled heads`, await rss());
    // the header timeout closes them; then the client side goes too
    await new Promise((r) => setTimeout(r, 2500));
    for (const c of open) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    await settle();
    row(`wave ${wave}: after the header timeout`, await rss());
  }
  await w.close();
  await child.status;
}

if (Deno.args[0] === "proxy") await proxyRole();
else await client(Number(Deno.args[0] ?? 3), Number(Deno.args[1] ?? 300));
