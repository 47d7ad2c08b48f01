import { equal, ok, rejects } from "node:assert/strict";
import { ensureCa, loadCa } from "./ca.ts";
import { IsbError } from "../../rpc/mod.ts";

Deno.test("ensureCa creates the CA once with a 0600 key and a stable fingerprint", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const a = await ensureCa(`${dir}/ca`);
    const b = await ensureCa(`${dir}/ca`);
    equal(a.fingerprint, b.fingerprint);
    ok(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/.test(a.fingerprint));
    equal((await Deno.stat(`${dir}/ca/ca.key`)).mode! & 0o777, 0o600);
    equal((await Deno.stat(`${dir}/ca`)).mode! & 0o777, 0o700);
    await Deno.chmod(`${dir}/ca/ca.key`, 0o640);
    await rejects(
      loadCa(`${dir}/ca`),
      (e: unknown) => e instanceof IsbError && e.code === "forbidden",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("CaSigner.issueLeaf serves TLS that a client trusting only the CA verifies", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const ca = await loadCa(`${dir}/ca`);
    ok(!Deno.inspect(ca).includes("PRIVATE"));
    const leaf = await ca.issueLeaf(["api.example.test", "*.example.test"]);
    const ac = new AbortController();
    const server = Deno.serve(
      {
        hostname: "127.0.0.1",
        port: 0,
        cert: leaf.certPem,
        key: leaf.keyPem,
        signal: ac.signal,
        onListen() {},
      },
      () => new Response("tls ok"),
    );
    try {
      for (const name of ["api.example.test", "sub.example.test"]) {
        const tcp = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
        const tls = await Deno.startTls(tcp, { hostname: name, caCerts: [ca.certPem] });
        await tls.write(
          new TextEncoder().encode(`GET / HTTP/1.1\r\nhost: ${name}\r\nconnection: close\r\n\r\n`),
        );
        const text = await new Response(tls.readable).text();
        ok(text.endsWith("tls ok"), text);
      }
    } finally {
      ac.abort();
      await server.finished;
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
