/**
 * What the relay does with a response body the upstream compressed although it was asked
 * for `Accept-Encoding: identity` (proxy/http1/decode.ts has the codings). Real values can only be
 * masked in bytes that are not compressed, so:
 *
 * - nothing to scrub (no real value configured): the body goes to the guest exactly as sent,
 *   and usage is read from a decoded copy;
 * - real values to scrub and a coding the proxy can undo: the body is decoded, then scrubbed,
 *   read and counted like any other, and sent chunked without `Content-Encoding` (the guest
 *   gets the same content, uncompressed);
 * - real values to scrub and a coding it cannot undo (`zstd`…): 502, fail closed.
 *
 * A response without a body (HEAD, 204, 304) is relayed as it is. Both the relay and the
 * `Deno.serve` handler decide through {@link bodyPlan}. See docs/decisions.md.
 *
 * @module
 */

import { type Coding, contentCodings, decodeStream } from "../http1/decode.ts";
import { BODY_BUFFER, type BodyWriter, type PayloadSink } from "./_body.ts";
import { responseHeaders } from "./rewrite.ts";
import type { Secret } from "../config/secret.ts";

/** How one response body is relayed. */
export type BodyPlan =
  /** Not compressed (or no body): as usual. */
  | { kind: "plain" }
  /** Bytes as sent; usage from a decoded copy. */
  | { kind: "copy"; codings: Coding[] }
  /** Decoded, then scrubbed, read and sent chunked without `Content-Encoding`. */
  | { kind: "decode"; codings: Coding[] }
  /** A coding the proxy cannot undo, nothing to scrub: as sent, not read. */
  | { kind: "opaque" }
  /** A coding the proxy cannot undo with real values to scrub: refuse. */
  | { kind: "refuse"; reason: string };

/** The plan for a body with this `Content-Encoding`. */
export function bodyPlan(
  contentEncoding: string | null,
  o: { body: boolean; scrubbing: boolean },
): BodyPlan {
  if (!o.body) return { kind: "plain" };
  const codings = contentCodings(contentEncoding);
  if (codings === undefined) {
    return o.scrubbing
      ? {
        kind: "refuse",
        reason: `response compressed as "${contentEncoding}", which the proxy cannot scrub`,
      }
      : { kind: "opaque" };
  }
  if (codings.length === 0) return { kind: "plain" };
  return { kind: o.scrubbing ? "decode" : "copy", codings };
}

/**
 * The response headers the guest gets: scrubbed, without `Content-Encoding` for a body the
 * plan decodes, chunked where the relay re-frames the body (`rechunk`, or decoding), and
 * `Connection: close` when the guest asked for it.
 */
export function guestResponseHeaders(
  upstream: Headers,
  o: { secrets: readonly Secret[]; rechunk: boolean; plan: BodyPlan; close: boolean },
): { headers: Headers; chunked: boolean } {
  const headers = responseHeaders(upstream, o.secrets);
  if (o.plan.kind === "decode") headers.delete("content-encoding");
  const chunked = o.rechunk || o.plan.kind === "decode";
  if (chunked) {
    headers.delete("content-length");
    headers.set("transfer-encoding", "chunked");
  }
  if (o.close) headers.set("connection", "close");
  return { headers, chunked };
}

/**
 * Takes a compressed body's payload in the relay's pumps, decodes it and hands the decoded
 * bytes to `inner` (which scrubs, reads, counts and writes them). Each write waits for the
 * decoder, so a slow guest still slows the upstream read.
 */
export class DecodingSink implements PayloadSink {
  readonly #buf = new Uint8Array(BODY_BUFFER);
  #len = 0;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #pump: Promise<void>;

  /** Decodes `codings` into `inner` (begun already, chunked). */
  constructor(inner: BodyWriter, codings: readonly Coding[]) {
    const pipe = new TransformStream<Uint8Array, Uint8Array>();
    this.#writer = pipe.writable.getWriter();
    const decoded = decodeStream(pipe.readable, codings);
    this.#pump = (async () => {
      for await (const chunk of decoded) {
        await inner.append(chunk);
        await inner.flush(false);
      }
      await inner.flush(true);
    })();
    this.#pump.catch(() => {});
  }

  /** Free room for payload bytes. */
  space(): Uint8Array {
    return this.#buf.subarray(this.#len);
  }

  /** Takes `n` bytes just read into {@link DecodingSink.space}. */
  commit(n: number): void {
    this.#len += n;
  }

  /** Takes payload bytes (copied). */
  async append(bytes: Uint8Array): Promise<void> {
    if (this.#len > 0) await this.flush(false);
    await this.#send(bytes.slice());
  }

  /** Passes what is held to the decoder; `final` ends the body and waits for the guest write. */
  async flush(final: boolean): Promise<void> {
    if (this.#len > 0) {
      const chunk = this.#buf.slice(0, this.#len);
      this.#len = 0;
      await this.#send(chunk);
    }
    if (final) {
      await this.#writer.close();
      await this.#pump;
    }
  }

  async #send(chunk: Uint8Array): Promise<void> {
    await this.#writer.ready;
    this.#writer.write(chunk).catch(() => {});
  }
}
