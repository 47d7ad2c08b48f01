/**
 * Following an Incus event stream for as long as the proxy runs: every event calls
 * `onEvent`; a stream that ends or fails is opened again after a pause (incusd restarts,
 * connections drop). Shared by the caller map (`clients.ts`) and the proxy-only bridge
 * watcher (`proxy_only.ts`), which both also poll on a timer as a safety net.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";

/** Follows `events` until `signal` aborts; `what` names the stream in debug logs. */
export async function followEvents(
  events: (s: AbortSignal) => AsyncIterable<unknown>,
  opts: { signal: AbortSignal; onEvent: () => Promise<void>; what: string; retryMs?: number },
): Promise<void> {
  const { signal } = opts;
  while (!signal.aborted) {
    try {
      for await (const _ of events(signal)) {
        if (signal.aborted) return;
        await opts.onEvent();
      }
    } catch (e) {
      if (signal.aborted) return;
      log.debug(`proxy: ${opts.what} ended`, { error: String((e as Error)?.message ?? e) });
    }
    if (signal.aborted) return;
    await pause(opts.retryMs ?? 5000, signal);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}
