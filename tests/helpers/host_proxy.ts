/**
 * The real proxy, in the test process, for a {@link HostLab}: TLS interception and the
 * forward proxy on the lab bridge's gateway (random ports), the ops port on loopback, one
 * test-only model host (`api-<id>.anthropic.isx-test`) relayed to a mock Anthropic API on
 * loopback, and a registry of every project's instances (so a lab instance is known as
 * `<project>/<name>`). No DNS block and no nft table is written: guests name the gateway and
 * the test host themselves. `config(extra)` is the `proxy:` block an isx home uses to find it.
 *
 * @module
 */

import { ClientRegistry, incusSource } from "../../proxy/callers/clients.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import { Policy, startProxy } from "../../proxy/mod.ts";
import { startMockAnthropic } from "../fakes/mock_anthropic.ts";
import type { MockServer } from "../fakes/mock_model.ts";
import type { HostLab } from "./host_lab.ts";

/** The key the proxy holds for the test host (never seen by a guest). */
export const HOST_PROXY_KEY = "sk-ant-api03-IHOST-REAL-0123456789abcdef";

/** A started test proxy. */
export class HostProxy implements AsyncDisposable {
  readonly mock: MockServer;
  readonly domain: string;
  readonly #proxy: Awaited<ReturnType<typeof startProxy>>;
  readonly #registry: ClientRegistry;
  readonly #tmp: string;

  private constructor(o: {
    mock: MockServer;
    domain: string;
    proxy: Awaited<ReturnType<typeof startProxy>>;
    registry: ClientRegistry;
    tmp: string;
  }) {
    this.mock = o.mock;
    this.domain = o.domain;
    this.#proxy = o.proxy;
    this.#registry = o.registry;
    this.#tmp = o.tmp;
  }

  /** Starts the mock, the registry and the proxy on `lab`'s gateway. */
  static async start(lab: HostLab): Promise<HostProxy> {
    const mock = startMockAnthropic();
    const tmp = await Deno.makeTempDir({ prefix: "isx-host-proxy-" });
    const domain = `api-${lab.id}.anthropic.isx-test`;
    const registry = new ClientRegistry(incusSource(lab.incus), {
      now: Date.now,
      minRefreshMs: 200,
    });
    try {
      await registry.start();
      const proxy = await startProxy({
        listen: {
          tls: { hostname: lab.gateway, port: 0 },
          forward: { hostname: lab.gateway, port: 0 },
          health: [{ hostname: "127.0.0.1", port: 0 }],
        },
        policy: new Policy(
          parseCredentials(`anthropic: { accounts: { main: { api_key: ${HOST_PROXY_KEY} } } }\n`),
          { hosts: { anthropic: [domain] } },
        ),
        ca: await loadCa(`${tmp}/ca`),
        clients: registry,
        upstreamOverrides: { [domain]: mock.origin },
        allowLoopbackTargets: true,
        // the forward proxy looks up no name (counted, then refused): nothing leaves the host
        resolve: (host) => Promise.reject(new Error(`the test proxy resolves no name (${host})`)),
      });
      return new HostProxy({ mock, domain, proxy, registry, tmp });
    } catch (e) {
      await registry.close();
      await mock.close();
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      throw e;
    }
  }

  /** The TLS port on the gateway. */
  get tlsPort(): number {
    return this.#proxy.addrs.tls.port;
  }

  /** The ops port on loopback. */
  get healthPort(): number {
    return this.#proxy.addrs.health[0]!.port;
  }

  /** The forward proxy's port on the gateway. */
  get forwardPort(): number {
    return this.#proxy.addrs.forward.port;
  }

  /** The `/activity` entry of `<project>/<name>`, or undefined when it has none. */
  async activity(key: string): Promise<Record<string, unknown> | undefined> {
    const res = await fetch(`http://127.0.0.1:${this.healthPort}/activity`);
    const body = await res.json() as { instances?: Record<string, Record<string, unknown>> };
    return body.instances?.[key];
  }

  /** The `proxy:` block of an isx home whose `isx mcp` uses this proxy and `lab`. */
  config(lab: HostLab): string {
    return [
      "proxy:",
      `  bridge: ${lab.bridge}`,
      `  proxy_only_bridge: ${lab.proxyOnlyBridge}`,
      `  nft_prefix: ${lab.nftPrefix}`,
      `  ports: { tls: ${this.tlsPort}, forward: ${this.#proxy.addrs.forward.port}, ` +
      `health: ${this.healthPort} }`,
      "  dns: false",
      "",
    ].join("\n");
  }

  /**
   * A guest shell command making one Messages API call to the test host through the proxy
   * (openssl, which every Debian image has through ca-certificates; no DNS: the gateway is
   * named). Prints the HTTP response.
   */
  modelCallCommand(gateway: string, word = "hello"): string {
    const body = JSON.stringify({
      model: "claude-mock",
      max_tokens: 8,
      messages: [{ role: "user", content: word }],
    });
    return [
      `b='${body}'`,
      `printf 'POST /v1/messages HTTP/1.1\\r\\nHost: %s\\r\\ncontent-type: application/json\\r\\n` +
      `x-api-key: sk-ant-placeholder\\r\\nanthropic-version: 2023-06-01\\r\\n` +
      `content-length: %s\\r\\nconnection: close\\r\\n\\r\\n%s' '${this.domain}' "\${#b}" "$b" |`,
      `openssl s_client -connect ${gateway}:${this.tlsPort} -servername ${this.domain} -quiet ` +
      "2>/dev/null | head -c 4000",
    ].join(" ");
  }

  /** Stops the proxy, the registry and the mock. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#proxy.close();
    await this.#registry.close();
    await this.mock.close();
    await Deno.remove(this.#tmp, { recursive: true }).catch(() => {});
  }
}
