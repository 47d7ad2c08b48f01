/**
 * Relaying: the intercepting HTTP/1.1 relay, the proxy's hot path (`relay.ts`), one request and
 * its response (`_exchange.ts`), the body pumps (`_body.ts`) and compressed bodies
 * (`_decoded.ts`); the upstream side (`upstream.ts`: where a request goes; `upstream_pool.ts`:
 * kept-alive connections); what changes in the bytes (`rewrite.ts`: credentials into request
 * heads; `scrub.ts`: real values masked out of everything coming back); the `Deno.serve`
 * handler for what the relay does not speak (`server.ts`, with `_websocket.ts`), and the
 * explicit forward proxy on port 3128 (`forward.ts`).
 *
 * @module
 */

export type { HeaderOp } from "./rewrite.ts";
export { REPLAY_LIMIT } from "./_exchange.ts";
