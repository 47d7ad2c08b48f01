/**
 * The dashboard on the ops port: `GET /dashboard/…` for the person at the host, read-only.
 *
 * Three fences, in order, before anything is read: the ops handler answers host callers only
 * (proxy/host/_health.ts: loopback or the proxy's own addresses; an instance gets 404); the
 * `Host` header must be `127.0.0.1:<port>` or `localhost:<port>` of a loopback ops listener,
 * so a page of some web site whose name was rebound to 127.0.0.1 (DNS rebinding) gets 421;
 * and the page token (proxy/dashboard/token.ts), from `?token=` on the first visit (answered
 * with a cookie and a redirect that drops it from the address bar) or the cookie after that,
 * else 401. Only `GET` is served (405 otherwise). Every response says `no-store` and carries
 * a Content-Security-Policy allowing only this origin, so the page runs only the program's
 * own bytes (`_assets.ts`: the page and uPlot, embedded).
 *
 * The live view is a server-sent event stream: while a page is open, the view document
 * (view.ts) is built once a second from what the proxy holds in memory, and at once after a
 * new Incus listing or task report, and sent only when it differs from the last one sent. Nobody looking means no stream and no timer: the
 * dashboard then costs nothing. `/health` parts that read files and Incus are cached for
 * {@link HEALTH_TTL_MS}. At most {@link MAX_STREAMS} streams at once (503 beyond).
 *
 * @module
 */

import { constantTimeEqual } from "../config/secret.ts";
import type { ActivityCounter } from "../activity/counter.ts";
import type { CallerLookup } from "../callers/clients.ts";
import { ASSETS } from "./_assets.ts";
import { buildView, type HealthInfo, type InstanceShelf } from "./view.ts";
import type { TaskBoard } from "./tasks.ts";

/** How often an open stream rebuilds the view. */
export const TICK_MS = 1000;
/** How long a `/health` reading is reused by the dashboard. */
export const HEALTH_TTL_MS = 5000;
/** Streams served at once. */
export const MAX_STREAMS = 8;
const HEARTBEAT_MS = 15_000;

/** What the dashboard reads. */
export interface DashboardDeps {
  /** The page token. */
  token: string;
  /** The proxy's counters. */
  counter: ActivityCounter;
  /** The registry of callers. */
  clients: CallerLookup;
  /** The last instance listing. */
  shelf: InstanceShelf;
  /** The tasks isx mcp reported. */
  tasks: TaskBoard;
  /** The proxy's `/health`, computed now. */
  health: () => Promise<HealthInfo>;
  /** The ports of the loopback ops listeners (the `Host` values allowed). */
  loopbackPorts: () => readonly number[];
  /** Ends every stream (the proxy is stopping). */
  signal: AbortSignal;
  /** The clock (test only). */
  now?: () => number;
}

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

function headers(type: string, extra: Record<string, string> = {}): Headers {
  return new Headers({
    "content-type": type,
    "cache-control": "no-store",
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cross-origin-resource-policy": "same-origin",
    ...extra,
  });
}

function text(status: number, body: string): Response {
  return new Response(body + "\n", { status, headers: headers("text/plain; charset=utf-8") });
}

/** The cookie's name: cookies ignore ports, so two proxies on one host need two names. */
export function cookieName(port: number): string {
  return `isx_dashboard_${port}`;
}

function cookieValue(req: Request, name: string): string | undefined {
  for (const part of (req.headers.get("cookie") ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The port of an allowed `Host`, or undefined (a foreign name, or another port). */
export function allowedHost(host: string | null, ports: readonly number[]): number | undefined {
  const m = /^(127\.0\.0\.1|localhost):(\d{1,5})$/i.exec(host ?? "");
  if (!m) return undefined;
  const port = Number(m[2]);
  return ports.includes(port) ? port : undefined;
}

/** The dashboard's handler: answers every path under `/dashboard`. */
export function dashboardHandler(deps: DashboardDeps): (req: Request) => Promise<Response> {
  const now = deps.now ?? Date.now;
  let healthAt = -Infinity;
  let healthCached: Promise<HealthInfo> | undefined;
  const health = () => {
    if (!healthCached || now() - healthAt >= HEALTH_TTL_MS) {
      healthAt = now();
      healthCached = deps.health();
      healthCached.catch(() => (healthAt = -Infinity));
    }
    return healthCached;
  };
  const view = async () => {
    const activity = deps.counter.snapshot(deps.clients.known());
    const at = now();
    return JSON.stringify(buildView({
      instances: deps.shelf.get(),
      activity,
      series: (name) => deps.counter.series.read(name, at),
      tasks: deps.tasks.list(),
      refusals: deps.counter.refusals.list(),
      health: await health(),
    }));
  };
  let streams = 0;

  const stream = (): Response => {
    if (streams >= MAX_STREAMS) return text(503, "too many dashboard streams open");
    streams++;
    const enc = new TextEncoder();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let last = "";
    let lastSent = now();
    let done = false;
    let running = false;
    let again = false;
    // a new listing or task report: build the view now, not at the next tick
    const poke = () => {
      if (done) return;
      if (running) {
        again = true;
        return;
      }
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(tick, 20);
    };
    const unwatch = [deps.shelf.watch(poke), deps.tasks.watch(poke)];
    const finish = () => {
      if (done) return;
      done = true;
      streams--;
      if (timer !== undefined) clearTimeout(timer);
      for (const u of unwatch) u();
      deps.signal.removeEventListener("abort", onAbort);
    };
    let ctl!: ReadableStreamDefaultController<Uint8Array>;
    const onAbort = () => {
      finish();
      try {
        ctl.close();
      } catch { /* already closed */ }
    };
    const tick = async () => {
      if (done) return;
      timer = undefined;
      running = true;
      try {
        const body = await view();
        if (done) return;
        if (body !== last) {
          last = body;
          lastSent = now();
          ctl.enqueue(enc.encode(`event: view\ndata: ${body}\n\n`));
        } else if (now() - lastSent >= HEARTBEAT_MS) {
          lastSent = now();
          ctl.enqueue(enc.encode(": still here\n\n"));
        }
      } catch {
        onAbort();
        return;
      } finally {
        running = false;
      }
      if (done) return;
      timer = setTimeout(tick, again ? 0 : TICK_MS);
      again = false;
    };
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        ctl = c;
        deps.signal.addEventListener("abort", onAbort, { once: true });
        ctl.enqueue(enc.encode(`retry: 2000\n\n`));
        void tick();
      },
      cancel: finish,
    });
    return new Response(body, { headers: headers("text/event-stream") });
  };

  return async (req) => {
    const port = allowedHost(req.headers.get("host"), deps.loopbackPorts());
    if (port === undefined) {
      return text(421, "the dashboard answers only at 127.0.0.1:<port> or localhost:<port>");
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      return text(405, "the dashboard is read-only");
    }
    const url = new URL(req.url);
    const cookie = cookieName(port);
    const given = url.searchParams.get("token");
    if (given !== null) {
      if (!constantTimeEqual(given, deps.token)) {
        return text(401, "this dashboard token is not the proxy's (run isx dashboard again)");
      }
      return new Response(null, {
        status: 303,
        headers: headers("text/plain", {
          location: "/dashboard/",
          "set-cookie": `${cookie}=${deps.token}; Path=/dashboard; HttpOnly; SameSite=Strict`,
        }),
      });
    }
    if (!constantTimeEqual(cookieValue(req, cookie) ?? "", deps.token)) {
      return text(401, "open the address isx dashboard prints");
    }
    const path = url.pathname;
    if (path === "/dashboard" || path === "/dashboard/") {
      return new Response(ASSETS["index.html"], { headers: headers("text/html; charset=utf-8") });
    }
    if (path === "/dashboard/events") return stream();
    if (path === "/dashboard/view.json") {
      return new Response(await view(), { headers: headers("application/json") });
    }
    const name = path.slice("/dashboard/".length);
    const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name as keyof typeof ASSETS] : undefined;
    if (asset === undefined) return text(404, "not found");
    const type = name.endsWith(".js")
      ? "text/javascript; charset=utf-8"
      : name.endsWith(".css")
      ? "text/css; charset=utf-8"
      : "text/html; charset=utf-8";
    return new Response(asset, { headers: headers(type) });
  };
}
