/**
 * `isx mcp`'s protocol layer: newline-delimited JSON-RPC 2.0 over the given streams,
 * answering both MCP eras on one channel (docs/mcp.md, docs/decisions.md "isx mcp: our own
 * protocol layer"):
 *
 * ```
 * → {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",
 *     "capabilities":{"experimental":{"isx/task_changed":{}}},"clientInfo":{"name":"me"}}}
 * ← {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{…},…}}
 * → {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_templates",
 *     "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28", …}}}
 * ← {"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[…],…}}
 * ```
 *
 * The reader never waits for a tool: each call runs on its own, so `ping` and cancellation
 * are answered while a slow call works. A cancelled call's answer is never sent. At end of
 * input (or {@link McpServer.shutdown}, which SIGTERM calls) in-flight calls are cancelled
 * and given a wind-down, then the session releases what it holds.
 *
 * The backend (the session and the tool table, with zod, the templates and the Incus client)
 * may arrive as a promise: the handshake, `ping`, `tools/list` (from the generated catalog)
 * and the prompt are answered without it, so `isx mcp` answers `initialize` while it loads
 * (issue 11, start-up); a request that needs it waits for it.
 *
 * This file is the dispatch and the session's life; the writer is `_outbox.ts`, a tool call
 * (plain or as a task) `_tool_call.ts`.
 *
 * @module
 */

import { lines } from "../../rpc/jsonl.ts";
import { after } from "../../rpc/timer.ts";
import type { TaskChange } from "../session/mod.ts";
import type { McpBackend, McpServer, ServeOptions } from "./types.ts";

export type { ClientSeen, McpBackend, McpServer, ServeOptions } from "./types.ts";
import { catalogTools } from "../tools/catalog.ts";
import { ProtocolFault } from "../tools/fault.ts";
import { outbox } from "./_outbox.ts";
import { toolCall } from "./_tool_call.ts";
import { COORDINATE_PROMPT, coordinateMessages, INSTRUCTIONS } from "./prompt.ts";
import { McpTasks } from "./tasks.ts";
import {
  capabilities,
  classify,
  filterPasses,
  HANDSHAKE_VERSIONS,
  type Id,
  META,
  metaOf,
  MODERN_VERSIONS,
  negotiate,
  requestVersion,
  RPC,
  SERVER_INFO,
  TASK_CHANGED,
  TASK_FILTER_KEY,
  type TaskFilter,
  taskFilter,
  wantsTaskChanges,
} from "./wire.ts";

/** Serves MCP until input ends. */
export function serveMcp(o: ServeOptions): McpServer {
  const out = outbox(o.output);
  // The backend: loaded on first need, or once the client pauses after the handshake
  // (loading blocks the event loop: started at once it would delay the handshake's answer)
  let b: McpBackend | undefined;
  let loading: Promise<McpBackend> | undefined;
  // rpc/timer.ts, not setTimeout: its first call loads Node's timers, in the client's pause
  let cancelIdle = () => {};
  let clientName: string | undefined;
  let mcpTasks: McpTasks | undefined;
  let unlisten = () => {};
  const afterLoad: (() => void)[] = [];
  const need = (): Promise<McpBackend> => {
    if (loading) return loading;
    cancelIdle();
    const from = o.backend;
    loading = (typeof from === "function" ? Promise.resolve().then(from) : Promise.resolve(from))
      .then((x) => {
        b = x;
        if (clientName !== undefined) x.session.clientName = clientName;
        mcpTasks = new McpTasks(x);
        unlisten = x.session.onChange(onChange);
        for (const f of afterLoad.splice(0)) f();
        return x;
      });
    loading.catch(() => {}); // each request that needs it answers the failure
    return loading;
  };
  /** Runs `f` once the backend is there, loading it when the client pauses. */
  const whenLoaded = (f: () => void) => {
    if (b) return f();
    afterLoad.push(f);
    soon();
  };
  const soon = () => {
    if (loading || ending) return;
    cancelIdle();
    cancelIdle = after(o.idleLoadMs ?? 20, need);
  };
  const setClientName = (name: string) => {
    clientName = name;
    if (b) b.session.clientName = name;
  };
  // which client connected and which era it speaks (issue 19), told once per client, era
  // and protocol version seen on this connection, at once (mcp.log; the backend may never load)
  const noted = new Set<string>();
  let discovered = false;
  const noteClient = (era: string, protocol: unknown, info: unknown) => {
    if (!o.onClient) return;
    const i = (typeof info === "object" && info) ? info as Record<string, unknown> : {};
    const c = {
      era,
      protocol: typeof protocol === "string" ? protocol : "none",
      name: typeof i.name === "string" ? i.name : "unknown",
      version: typeof i.version === "string" ? i.version : "unknown",
    };
    const key = JSON.stringify(c);
    if (noted.has(key)) return;
    noted.add(key);
    o.onClient(c);
  };
  const { send, reply, cacheable, fail } = out;

  const inflight = new Map<string, { ctrl: AbortController; done: Promise<void> }>();
  const keyOf = (id: Id) => JSON.stringify(id);
  const calls = { out, need, tasks: () => mcpTasks!, track };
  let handshakeWantsChanges = false;
  const subs = new Map<string, { id: Id; filter: TaskFilter }>();
  let stopWatcher: (() => void) | undefined;
  let started = false;
  const sessionStart = () => {
    if (started) return;
    started = true;
    whenLoaded(() => b!.onSessionStart?.());
  };

  const syncWatcher = () => {
    const want = handshakeWantsChanges || subs.size > 0;
    if (!b) {
      if (want) whenLoaded(syncWatcher); // decided again once it is there
      return;
    }
    if (want && !stopWatcher && b.startWatcher) stopWatcher = b.startWatcher();
    if (!want && stopWatcher) {
      stopWatcher();
      stopWatcher = undefined;
    }
  };
  function onChange(c: TaskChange): void {
    if (handshakeWantsChanges) send({ method: TASK_CHANGED, params: c });
    for (const sub of subs.values()) {
      if (filterPasses(sub.filter, c)) {
        send({ method: TASK_CHANGED, params: { ...c, _meta: { [META.subscriptionId]: sub.id } } });
      }
    }
  }

  function track(id: Id, run: (signal: AbortSignal) => Promise<void>): void {
    const ctrl = new AbortController();
    const k = keyOf(id);
    const done = run(ctrl.signal).finally(() => inflight.delete(k));
    inflight.set(k, { ctrl, done });
  }

  function request(id: Id, method: string, params: Record<string, unknown>): void {
    if (inflight.has(keyOf(id)) || subs.has(keyOf(id))) {
      fail(
        id,
        RPC.invalidRequest,
        `invalid request: id ${JSON.stringify(id)} is already in flight`,
      );
      return;
    }
    const version = requestVersion(params);
    const modern = version !== undefined &&
      !(HANDSHAKE_VERSIONS as readonly string[]).includes(version);
    if (modern && !(MODERN_VERSIONS as readonly string[]).includes(version!)) {
      fail(id, RPC.unsupportedVersion, `unsupported protocol version: ${version}`, {
        supported: [...MODERN_VERSIONS, ...HANDSHAKE_VERSIONS],
        requested: version,
      });
      return;
    }
    const info = metaOf(params)[META.clientInfo] as { name?: unknown } | undefined;
    if (modern && typeof info?.name === "string") setClientName(info.name);
    if (method === "server/discover") {
      discovered = true;
      noteClient("server/discover", version, info);
    } else if (modern && !discovered) noteClient("stateless", version, info);
    if (modern) sessionStart();
    switch (method) {
      case "initialize": {
        const p = params as {
          protocolVersion?: unknown;
          capabilities?: unknown;
          clientInfo?: { name?: unknown };
        };
        if (typeof p.clientInfo?.name === "string") setClientName(p.clientInfo.name);
        noteClient("initialize", p.protocolVersion, p.clientInfo);
        const caps = (typeof p.capabilities === "object" && p.capabilities) || {};
        reply(id, {
          protocolVersion: negotiate(p.protocolVersion),
          capabilities: capabilities(),
          serverInfo: SERVER_INFO,
          instructions: INSTRUCTIONS,
        }, false).then(() => {
          // started only after the answer is on its way (§9)
          handshakeWantsChanges = wantsTaskChanges(caps as Record<string, unknown>);
          syncWatcher();
          sessionStart();
        });
        return;
      }
      case "server/discover":
        cacheable(id, {
          supportedVersions: [...MODERN_VERSIONS, ...HANDSHAKE_VERSIONS],
          capabilities: capabilities(),
          serverInfo: SERVER_INFO,
          instructions: INSTRUCTIONS,
          _meta: { [META.serverInfo]: SERVER_INFO },
        }, true);
        return;
      case "ping":
        reply(id, {}, modern);
        return;
      case "tools/list":
        cacheable(id, { tools: catalogTools() }, modern);
        return;
      case "tools/call":
        toolCall(calls, id, params, modern);
        return;
      case "prompts/list":
        cacheable(id, { prompts: [COORDINATE_PROMPT] }, modern);
        return;
      case "prompts/get":
        if (params.name !== COORDINATE_PROMPT.name) {
          fail(id, RPC.invalidParams, `unknown prompt: ${JSON.stringify(params.name)}`);
        } else reply(id, coordinateMessages(), modern);
        return;
      case "subscriptions/listen": {
        const filter = taskFilter(params.notifications);
        const honoured = filter ? { [TASK_FILTER_KEY]: { ...filter } } : {};
        if (filter) subs.set(keyOf(id), { id, filter });
        send({
          method: "notifications/subscriptions/acknowledged",
          params: { notifications: honoured, _meta: { [META.subscriptionId]: id } },
        });
        if (!filter) reply(id, { _meta: { [META.subscriptionId]: id } }, true);
        syncWatcher();
        return;
      }
      case "tasks/get":
      case "tasks/result":
      case "tasks/list":
      case "tasks/cancel":
        track(id, async () => {
          try {
            await need();
            await reply(id, await mcpTasks!.handle(method, params, modern), modern);
          } catch (e) {
            if (e instanceof ProtocolFault) await fail(id, e.code, e.message);
            else await fail(id, RPC.internal, (e as Error).message);
          }
        });
        return;
      default:
        fail(id, RPC.methodNotFound, `method not found: ${method}`);
    }
  }

  function notification(method: string, params: Record<string, unknown>): void {
    if (method !== "notifications/cancelled") return;
    const rid = params.requestId;
    if (typeof rid !== "string" && typeof rid !== "number") return;
    inflight.get(keyOf(rid))?.ctrl.abort(new Error("cancelled by the client"));
    if (subs.delete(keyOf(rid))) syncWatcher();
  }

  let ending: Promise<void> | undefined;
  const end = (): Promise<void> => {
    ending ??= (async () => {
      for (const f of inflight.values()) f.ctrl.abort(new Error("the session is ending"));
      // a started session's backend is loaded (and awaited): it is released as any other
      cancelIdle();
      const x = started || loading ? await need().catch(() => undefined) : undefined;
      mcpTasks?.cancelAll();
      const all = Promise.all([...inflight.values()].map((f) => f.done.catch(() => {})));
      if (x) await Promise.race([all, x.session.deps.sleep(o.windDownMs ?? 10_000)]);
      for (const sub of subs.values()) {
        await reply(sub.id, { _meta: { [META.subscriptionId]: sub.id } }, true);
      }
      subs.clear();
      syncWatcher();
      unlisten();
      await x?.session.release();
      await out.close();
    })();
    return ending;
  };

  const finished = (async () => {
    try {
      for await (const line of lines(o.input)) {
        if (!line.trim()) continue;
        const m = classify(line);
        if (m.kind === "fault") fail(m.id, m.code, m.message);
        else if (m.kind === "request") request(m.id, m.method, m.params);
        else if (m.kind === "notification") notification(m.method, m.params);
        if (started) soon(); // the idle timer restarts with each message
      }
    } catch { /* input broke: same as its end */ }
    await end();
  })();
  return { finished, shutdown: end };
}
