/**
 * `https://mcp.isx.internal/mcp`: `isx mcp` for an agent inside a coordinator instance,
 * over MCP's HTTP transport, through the proxy (shared/spec/isx-mcp.md §10, seed 002,
 * issue 20). The relay hands every request for {@link MCP_HOST} to the `Deno.serve`
 * handler, which asks {@link McpEndpoint.handle}. No credential is involved: the instance
 * presents its per-start secret, which the proxy checks and never passes on.
 *
 * - `_auth.ts`: who may (address, secret and grant naming one running instance), else 403
 * - `_bridge.ts`: the HTTP↔stdio framing for one coordinator (both MCP eras)
 * - `_child.ts`: the host `isx mcp --caller-instance <name>` per coordinator
 *
 * One child per coordinator: a new `initialize` ends the previous one (TERM, KILL after
 * 10 s); a child whose coordinator left the listing (destroyed), or whose grant changed,
 * is ended too. Ending a child releases nothing: the session is the instance.
 *
 * @module
 */

import type { Caller, CallerLookup } from "../callers/clients.ts";
import { admitCoordinator, MCP_HOST, MCP_PATH } from "./_auth.ts";
import { Bridge, type BridgeOptions } from "./_bridge.ts";
import type { ChildSpec, McpChild } from "./_child.ts";

export { MCP_HOST, MCP_PATH };
export type { BridgeOptions, ChildSpec, McpChild };
export { spawnChild } from "./_child.ts";

function plain(status: number, text: string): Response {
  return new Response(`isx-proxy: ${text}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", "x-isx-proxy": "1" },
  });
}

/** Options of the endpoint. */
export interface McpEndpointOptions extends Omit<BridgeOptions, "spec"> {
  /** How to start a coordinator's `isx mcp`. */
  spec: ChildSpec;
  /** The callers, for ending the children of coordinators that are gone. */
  clients?: Pick<CallerLookup, "known">;
  /** How often to look for them (default 30 s). */
  reapMs?: number;
}

/** The endpoint: one {@link Bridge} per coordinator. */
export class McpEndpoint {
  readonly #o: McpEndpointOptions;
  readonly #bridges = new Map<string, Bridge>();
  readonly #timer: ReturnType<typeof setInterval> | undefined;

  /** Serves with `o`; with `o.clients`, reaps the children of coordinators that are gone. */
  constructor(o: McpEndpointOptions) {
    this.#o = o;
    if (o.clients) this.#timer = setInterval(() => this.#reap(), o.reapMs ?? 30_000);
  }

  /** Answers one request for {@link MCP_HOST} from `caller`. */
  async handle(req: Request, caller: Caller | undefined): Promise<Response> {
    const a = admitCoordinator(caller, req.headers);
    if (!a.ok) return plain(a.status, a.reason);
    const path = new URL(req.url).pathname;
    if (path !== MCP_PATH) return plain(404, `isx mcp is served at ${MCP_PATH}`);
    const { name, grant } = a.coordinator;
    let b = this.#bridges.get(name);
    if (b && b.grant !== grant) {
      // destroyed and branched again under the name: another session
      this.#bridges.delete(name);
      void b.close();
      b = undefined;
    }
    if (!b) {
      b = new Bridge(name, grant, this.#o);
      this.#bridges.set(name, b);
    }
    return await b.handle(req);
  }

  /** The pid of a coordinator's child, if one runs (tests, `isx proxy dump`). */
  childPid(name: string): number | undefined {
    return this.#bridges.get(name)?.pid;
  }

  #reap(): void {
    const known = this.#o.clients?.known();
    if (!known) return;
    const names = new Set(known.map((k) => k.name));
    for (const [name, b] of this.#bridges) {
      if (names.has(name)) continue;
      this.#bridges.delete(name);
      void b.close();
    }
  }

  /** Ends every child. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    const all = [...this.#bridges.values()];
    this.#bridges.clear();
    await Promise.all(all.map((b) => b.close()));
  }
}
