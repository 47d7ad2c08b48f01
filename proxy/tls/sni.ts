/**
 * TLS listeners that choose their certificate per server name (SNI), through an unofficial
 * hook of Deno's: `Deno.listenTls` accepts, instead of `cert`/`key`, a function under
 * `Symbol.for("unstableSniResolver")` that gets the name the client sent (`""` when it sent
 * none, e.g. a client connecting by IP address) and resolves to `{ cert, key }` in PEM; a
 * throw fails that handshake, with the thrown message, before any certificate is shown. It is
 * not in Deno's types or docs (ext/net/02_tls.js, Deno 2.9.6), so it may change or vanish in
 * any release. Deno also keeps each name's answer, a refusal included, for the listener's
 * lifetime; a new listener asks again.
 *
 * Hence {@link sniSupported}: once per process, before the proxy relies on it, a loopback
 * handshake checks that the hook is still called and its certificate used. If not, the proxy
 * falls back to what it did before per-name leaves: one leaf naming every intercepted domain
 * and its one-level wildcard, with one warning in the log. Everything about the symbol stays
 * in this module.
 *
 * @module
 */

import { IsbError, log } from "../../rpc/base.ts";
import type { Leaf } from "./leaf_cache.ts";

/** Deno's unofficial listener option: a per-SNI certificate resolver. */
const SNI_RESOLVER = Symbol.for("unstableSniResolver");
/** Deno's unofficial `connectTls` option: the server name to send and verify. */
const SERVER_NAME = Symbol.for("unstableServerName");
const PROBE_NAME = "sni-probe.isx.invalid";
const PROBE_MS = 5_000;

/** Gives the certificate for a server name; rejecting fails the handshake. */
export type SniResolver = (serverName: string) => Promise<Leaf>;

/** A TLS listener on `at` whose certificate `resolve` picks per handshake. */
export function listenTlsSni(
  at: { hostname: string; port: number },
  o: { resolve: SniResolver; alpnProtocols?: string[] },
): Deno.TlsListener {
  const options = {
    hostname: at.hostname,
    port: at.port,
    ...(o.alpnProtocols ? { alpnProtocols: o.alpnProtocols } : {}),
    [SNI_RESOLVER]: async (serverName: string) => {
      const leaf = await o.resolve(serverName);
      return { cert: leaf.certPem, key: leaf.keyPem };
    },
  };
  return Deno.listenTls(options as unknown as Deno.ListenTlsOptions & Deno.TlsCertifiedKeyPem);
}

/** A `Deno.connectTls` to `at` that sends (and verifies) `serverName` as the SNI. */
export function connectTlsAs(
  at: { hostname: string; port: number },
  o: { serverName: string; caCerts: string[]; unsafelyDisableHostnameVerification?: boolean },
): Promise<Deno.TlsConn> {
  const options = {
    hostname: at.hostname,
    port: at.port,
    caCerts: o.caCerts,
    ...(o.unsafelyDisableHostnameVerification ? { unsafelyDisableHostnameVerification: true } : {}),
    [SERVER_NAME]: o.serverName,
  };
  return Deno.connectTls(options as unknown as Deno.ConnectTlsOptions);
}

let probed: Promise<boolean> | undefined;

/**
 * True when the SNI hook works in this runtime (probed once per process with a leaf of
 * `ca`); false after logging one warning.
 */
export function sniSupported(
  ca: { certPem: string; issueLeaf(names: readonly string[]): Promise<Leaf> },
): Promise<boolean> {
  probed ??= probe(ca).then((ok) => {
    if (!ok) {
      log.warn(
        "proxy: per-name TLS certificates unavailable in this Deno; presenting one certificate for every intercepted domain",
        { deno: Deno.version.deno },
      );
    }
    return ok;
  });
  return probed;
}

async function probe(
  ca: { certPem: string; issueLeaf(names: readonly string[]): Promise<Leaf> },
): Promise<boolean> {
  const leaf = await ca.issueLeaf([PROBE_NAME]);
  let asked = false;
  let listener: Deno.TlsListener;
  try {
    listener = listenTlsSni({ hostname: "127.0.0.1", port: 0 }, {
      resolve: () => {
        asked = true;
        return Promise.resolve(leaf);
      },
    });
  } catch (e) {
    log.debug("proxy: SNI probe listener refused", { error: String((e as Error)?.message ?? e) });
    return false;
  }
  const timer = setTimeout(() => listener.close(), PROBE_MS);
  const server = listener.accept().then(async (c) => {
    try {
      await c.handshake();
    } finally {
      c.close();
    }
  }).catch(() => {});
  try {
    const conn = await connectTlsAs(listener.addr as Deno.NetAddr, {
      serverName: PROBE_NAME,
      caCerts: [ca.certPem],
      // Only the server side is probed: a client that ignores the name still verifies the chain.
      unsafelyDisableHostnameVerification: true,
    });
    try {
      await conn.handshake();
    } finally {
      conn.close();
    }
    return asked;
  } catch (e) {
    log.debug("proxy: SNI probe failed", { error: String((e as Error)?.message ?? e) });
    return false;
  } finally {
    clearTimeout(timer);
    try {
      listener.close();
    } catch { /* closed by the deadline */ }
    await server;
  }
}

/** Wraps a leaf source for {@link listenTlsSni}, logging refusals at debug level. */
export function resolverOf(forName: (serverName: string) => Promise<Leaf>): SniResolver {
  return async (serverName) => {
    try {
      return await forName(serverName);
    } catch (e) {
      const why = e instanceof IsbError ? e.message : String((e as Error)?.message ?? e);
      log.debug("proxy: TLS handshake refused", { error: why });
      throw e;
    }
  };
}
