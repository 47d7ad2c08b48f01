/**
 * Per-SNI leaves on loopback: the proxy's TLS listeners present a leaf naming exactly the
 * server name the guest sent, refuse names it does not intercept (and no name) at the
 * handshake, and issue one leaf per name however many handshakes race for it. The peer
 * certificate is read with `openssl s_client` (Deno's client does not expose it).
 */

import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { deepStrictEqual as assertEquals, equal, ok, rejects } from "node:assert/strict";
import { CaSigner, loadCa } from "../proxy/tls/ca.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import { Policy, type ProxyHandle, startProxy } from "../proxy/mod.ts";
import { connectTlsAs } from "../proxy/tls/sni.ts";
import { PortCallers } from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

/** Counts leaves issued per first name. */
class CountingCa extends CaSigner {
  readonly issued = new Map<string, number>();

  override issueLeaf(
    names: readonly string[],
    opts?: { now?: number },
  ): Promise<{ certPem: string; keyPem: string }> {
    this.issued.set(names[0]!, (this.issued.get(names[0]!) ?? 0) + 1);
    return super.issueLeaf(names, opts);
  }
}

interface Env {
  proxy: ProxyHandle;
  ca: CountingCa;
  caFile: string;
  close(): Promise<void>;
}

async function setup(): Promise<Env> {
  const dir = await Deno.makeTempDir();
  const base = await loadCa(`${dir}/ca`);
  const key = await crypto.subtle.importKey(
    "pkcs8",
    x509.PemConverter.decodeFirst(await Deno.readTextFile(`${dir}/ca/ca.key`)),
    { name: "ECDSA", namedCurve: "P-256" },
    false,
    ["sign"],
  );
  const ca = new CountingCa(base.certPem, key, base.fingerprint);
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(parseCredentials("{}"), { domains: ["registry.npmjs.org"] }),
    ca,
    clients: new PortCallers(),
  });
  return {
    proxy,
    ca,
    caFile: `${dir}/ca/ca.crt`,
    async close() {
      await proxy.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** The leaf `openssl s_client` is shown for `serverName` (undefined: no SNI), and its verdict. */
async function peerLeaf(
  port: number,
  o: { serverName: string | undefined; caFile: string },
): Promise<{ sans: string[]; verified: boolean } | undefined> {
  const args = ["s_client", "-connect", `127.0.0.1:${port}`, "-CAfile", o.caFile];
  if (o.serverName) args.push("-servername", o.serverName, "-verify_hostname", o.serverName);
  else args.push("-noservername");
  const out = await new Deno.Command("openssl", {
    args,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  const pem = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/.exec(text)?.[0];
  if (!pem) return undefined;
  const san = new x509.X509Certificate(pem).getExtension(x509.SubjectAlternativeNameExtension);
  return {
    sans: (san?.names.items ?? []).map((n) => `${n.type}:${n.value}`),
    verified: /Verify return code: 0 \(ok\)/.test(text),
  };
}

Deno.test("startProxy presents a leaf naming exactly the server name the guest sent", async () => {
  const env = await setup();
  try {
    for (
      const name of ["api.anthropic.com", "github.com", "a.b.github.com", "registry.npmjs.org"]
    ) {
      for (const port of [env.proxy.addrs.tls.port, env.proxy.addrs.mitm.port]) {
        const got = await peerLeaf(port, { serverName: name, caFile: env.caFile });
        assertEquals(got, { sans: [`dns:${name}`], verified: true }, `${name} on ${port}`);
      }
    }
  } finally {
    await env.close();
  }
});

Deno.test("startProxy fails the handshake for a name it does not intercept, or none", async () => {
  const env = await setup();
  try {
    const at = { hostname: "127.0.0.1", port: env.proxy.addrs.tls.port };
    for (const serverName of ["example.com", "api.anthropic.com.evil.test", "anthropic.com"]) {
      await rejects(
        async () => {
          const conn = await connectTlsAs(at, { serverName, caCerts: [env.ca.certPem] });
          try {
            await conn.handshake();
          } finally {
            conn.close();
          }
        },
        Error,
        serverName,
      );
      equal(await peerLeaf(at.port, { serverName, caFile: env.caFile }), undefined, serverName);
    }
    // A client connecting by address sends no SNI.
    await rejects(async () => {
      const conn = await Deno.connectTls({ ...at, caCerts: [env.ca.certPem] });
      try {
        await conn.handshake();
      } finally {
        conn.close();
      }
    });
    equal(await peerLeaf(at.port, { serverName: undefined, caFile: env.caFile }), undefined);
    equal(env.ca.issued.get("example.com"), undefined);
  } finally {
    await env.close();
  }
});

Deno.test("startProxy issues one leaf for concurrent first handshakes of one name", async () => {
  const env = await setup();
  try {
    const name = "api.openai.com";
    const ports = [env.proxy.addrs.tls.port, env.proxy.addrs.mitm.port];
    const conns = await Promise.all(
      Array.from(
        { length: 8 },
        (_, i) =>
          connectTlsAs({ hostname: "127.0.0.1", port: ports[i % 2]! }, {
            serverName: name,
            caCerts: [env.ca.certPem],
          }),
      ),
    );
    try {
      await Promise.all(conns.map((c) => c.handshake()));
    } finally {
      for (const c of conns) c.close();
    }
    equal(env.ca.issued.get(name), 1);
    ok(!env.ca.issued.has("api.openai.com,*.openai.com"));
  } finally {
    await env.close();
  }
});
