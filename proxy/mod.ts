/**
 * The per-host proxy: credentials injected on the host, each instance's model calls and
 * traffic counted (shared/spec/isx-mcp.md §7).
 *
 * No credential ever enters an instance. Guests resolve the intercepted domains to the
 * bridge gateway (the bridge's dnsmasq) and reach {@link startProxy}'s TLS server on port
 * 443, which presents a leaf for the requested name signed by the host CA that templates
 * install; the proxy swaps
 * the guests' placeholders for real values on the way upstream and scrubs real values from
 * everything coming back. Anything else a guest sends through `HTTP(S)_PROXY` (port 3128)
 * is tunnelled and counted. The ops port (18080) answers `/health` and `/activity` to host
 * callers only.
 *
 * Each concern has its folder, whose `mod.ts` says what it holds and exports what the rest
 * of the program uses:
 * - `config/`: credentials.yaml, the `proxy:` block of config.yaml and the pure policy built
 *   from them (who gets which credential on which host, accounts, header rules, Vertex AI)
 * - `tls/`: the CA, leaf certificates per server name, SNI listeners, the intercepting server
 * - `http1/`: HTTP/1.1 heads, framing, the `chunked` coding, content codings
 * - `relay/`: the intercepting relay (the hot path), upstream connections, rewriting and
 *   scrubbing, the `Deno.serve` handler and WebSockets, the forward proxy
 * - `activity/`: counters, token usage, the `/activity` format and how it is shown
 * - `egress/`: isb egress secrets, their TLS servers and the public-address guard
 * - `callers/`: address → instance, identity and grants, the bridge guard, limits, the
 *   decision per request
 * - `host/`: the process: listeners, the ops port, DNS, the proxy-only bridge, run files
 * - `dashboard/`: the host-only live page on the ops port (`isx dashboard`), read-only
 * - `mcp_endpoint/`: `https://mcp.isx.internal/mcp`, isx mcp for coordinator instances over
 *   MCP's HTTP transport, relayed to one host `isx mcp --caller-instance` child each
 *
 * A module used only inside its folder has the `_` prefix (tests/import_graph_test.ts).
 *
 * @module
 */

export * from "./config/mod.ts";
export * from "./tls/mod.ts";
export * from "./http1/mod.ts";
export * from "./relay/mod.ts";
export * from "./activity/mod.ts";
export * from "./egress/mod.ts";
export * from "./callers/mod.ts";
export * from "./host/mod.ts";
export * from "./dashboard/mod.ts";
export * from "./mcp_endpoint/mod.ts";
