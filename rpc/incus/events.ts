/**
 * The `/1.0/events` websocket as an async iterable: lifecycle, operation and logging
 * events as incusd emits them, scoped to the client's project (or all projects). Events
 * are queued up to 256; past that the socket is paused until the reader catches up.
 *
 * @module
 */

import type { WsClient } from "./websocket.ts";
import { IsbError } from "../errors.ts";
import type { IncusConn } from "./conn.ts";
import type { IncusEvent } from "./types.ts";

/** Which events to receive. */
export interface EventOptions {
  /** Event types: `lifecycle`, `operation`, `logging` (all when absent). */
  types?: string[];
  /** Events of every project instead of the client's. */
  allProjects?: boolean;
}

/** A live event subscription; iterate it, and `close()` it when done. */
export interface EventStream extends AsyncIterable<IncusEvent> {
  /** Ends the subscription; a pending iteration finishes. */
  close(): void;
}

/** Subscribes to events; resolves once the websocket is connected. */
export async function subscribeEvents(
  conn: IncusConn,
  opts: EventOptions = {},
): Promise<EventStream> {
  const query = {
    type: opts.types?.join(","),
    "all-projects": opts.allProjects ? "true" : undefined,
  };
  let stream: ReadableStream<IncusEvent> | undefined;
  const ws = await conn.transport.openWebSocket(
    conn.url("/1.0/events", { query }),
    conn.timeouts.requestMs,
    (ws) => void (stream = eventStream(ws)), // attached before open: no event is missed
  );
  if (!stream) throw new TypeError("subscribeEvents: websocket opened without its reader");
  const events = stream;
  return {
    close: () => ws.close(1000),
    [Symbol.asyncIterator]: () => events[Symbol.asyncIterator](),
  };
}

function eventStream(ws: WsClient): ReadableStream<IncusEvent> {
  let done = false;
  return new ReadableStream<IncusEvent>({
    start(ctl) {
      ws.on("message", (data: Uint8Array) => {
        if (done) return;
        try {
          ctl.enqueue(JSON.parse(new TextDecoder().decode(data)) as IncusEvent);
        } catch (e) {
          done = true;
          ctl.error(new IsbError("protocol", `events: bad event from incusd: ${e}`));
          return void ws.terminate();
        }
        if ((ctl.desiredSize ?? 1) <= 0 && !ws.isPaused) ws.pause();
      });
      ws.on("close", () => {
        if (!done) ctl.close();
        done = true;
      });
      ws.on("error", (e: Error) => {
        if (!done) ctl.error(new IsbError("websocket", `events: ${e.message}`, { cause: e }));
        done = true;
      });
    },
    pull() {
      if (ws.isPaused) ws.resume();
    },
    cancel() {
      done = true;
      ws.close(1000);
    },
  }, { highWaterMark: 256 });
}
