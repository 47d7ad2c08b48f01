/**
 * The protocol layer's one writer: every answer and notification of a session goes through
 * it as one JSON line, in order. Apart from the dispatch (mod.ts) because the ordering and
 * the broken-pipe rule are one concern: writes chain on one promise so lines never
 * interleave, and once a write fails (the client went away) the rest are dropped rather
 * than thrown into each call that answers.
 *
 * @module
 */

import { type ByteWriter, lineOutput } from "../../rpc/jsonl.ts";
import type { Id } from "./wire.ts";

/** What the dispatch and the calls send with. */
export interface Outbox {
  /** Sends one JSON-RPC message (the `jsonrpc` member added); resolves once written. */
  send(msg: Record<string, unknown>): Promise<void>;
  /** Answers `id`; a stateless-revision (`modern`) answer carries `resultType: "complete"`. */
  reply(id: Id, result: unknown, modern: boolean): Promise<void>;
  /** Answers with a result that never changes in a run (a cache hint when modern). */
  cacheable(id: Id, result: Record<string, unknown>, modern: boolean): Promise<void>;
  /** Answers `id` with a JSON-RPC error. */
  fail(id: Id | null, code: number, message: string, data?: unknown): Promise<void>;
  /** Waits for what is queued, then closes the output. */
  close(): Promise<void>;
}

/** An {@link Outbox} over `output`. */
export function outbox(output: WritableStream<Uint8Array> | ByteWriter): Outbox {
  const writer = lineOutput(output);
  const enc = new TextEncoder();
  let writing: Promise<void> = Promise.resolve();
  let outputBroken = false;
  const send = (msg: Record<string, unknown>): Promise<void> => {
    const line = enc.encode(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
    writing = writing.then(() => outputBroken ? undefined : writer.write(line)).catch(() => {
      outputBroken = true;
    });
    return writing;
  };
  const reply = (id: Id, result: unknown, modern: boolean) =>
    send({ id, result: modern ? { resultType: "complete", ...result as object } : result });
  return {
    send,
    reply,
    // the stateless revision's cacheable results carry a cache hint; ours never change in a run
    cacheable: (id, result, modern) =>
      reply(id, modern ? { ...result, ttlMs: 3_600_000, cacheScope: "public" } : result, modern),
    fail: (id, code, message, data) =>
      send({ id, error: { code, message, ...(data === undefined ? {} : { data }) } }),
    async close() {
      await writing;
      await writer.close().catch(() => {});
    },
  };
}
