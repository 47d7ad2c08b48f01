/**
 * Reads token usage out of a model-call response as it streams past, without holding the
 * response (shared/spec/isx-mcp.md §7.C).
 *
 * SSE bodies (`text/event-stream`) are split into lines; each `data:` line that mentions
 * `"usage"` is parsed (a line longer than 256 KiB is skipped, never buffered whole). A JSON
 * body is kept up to 4 MiB and parsed at the end. Anthropic reports usage in `usage` and
 * `message.usage`; OpenAI Chat in `usage` (`prompt_tokens`…), OpenAI Responses in `usage` or
 * `response.usage` (`input_tokens`…). Stream usage is cumulative, so within one response
 * each field keeps its **max**; the counter sums responses. OpenAI's input counts include
 * cached tokens; they are split so every provider means what Anthropic means: `input_tokens`
 * excludes cache reads. Pure: bytes in, numbers out.
 *
 * @module
 */

import type { ModelProvider } from "./activity.ts";
import { latin1 } from "../relay/scrub.ts";

/** The four token counters. */
export interface Usage {
  /** Input tokens (cache reads excluded). */
  input_tokens: number;
  /** Output tokens. */
  output_tokens: number;
  /** Input tokens read from the prompt cache. */
  cache_read_input_tokens: number;
  /** Input tokens written to the prompt cache. */
  cache_creation_input_tokens: number;
}

/** A zero usage. */
export function zeroUsage(): Usage {
  return {
    input_tokens: 0,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  };
}

/** Longest SSE line that is parsed. */
export const SSE_LINE_CAP = 256 * 1024;
/** Largest JSON body that is parsed. */
export const JSON_BODY_CAP = 4 * 1024 * 1024;

const EMPTY = new Uint8Array(0);
const DATA = "data:";
const USAGE_TAIL = 'usage"';
const QUOTE = 0x22;

function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
}

function rec(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? v as Record<string, unknown>
    : undefined;
}

function fromAnthropic(u: Record<string, unknown>): Usage {
  return {
    input_tokens: num(u.input_tokens),
    output_tokens: num(u.output_tokens),
    cache_read_input_tokens: num(u.cache_read_input_tokens),
    cache_creation_input_tokens: num(u.cache_creation_input_tokens),
  };
}

function fromOpenAi(u: Record<string, unknown>): Usage {
  const chat = "prompt_tokens" in u || "completion_tokens" in u;
  const input = num(chat ? u.prompt_tokens : u.input_tokens);
  const details = rec(chat ? u.prompt_tokens_details : u.input_tokens_details);
  const cached = Math.min(input, num(details?.cached_tokens));
  return {
    input_tokens: input - cached,
    output_tokens: num(chat ? u.completion_tokens : u.output_tokens),
    cache_read_input_tokens: cached,
    cache_creation_input_tokens: 0,
  };
}

/** The usage objects one parsed event or body carries, normalised. */
export function usageOf(provider: ModelProvider, value: unknown): Usage[] {
  const v = rec(value);
  if (!v) return [];
  const found: Record<string, unknown>[] = [];
  const direct = rec(v.usage);
  if (direct) found.push(direct);
  const nested = rec(rec(provider === "anthropic" ? v.message : v.response)?.usage);
  if (nested) found.push(nested);
  return found.map(provider === "anthropic" ? fromAnthropic : fromOpenAi);
}

/** Field-wise max (within one response). */
export function maxUsage(a: Usage, b: Usage): Usage {
  return {
    input_tokens: Math.max(a.input_tokens, b.input_tokens),
    output_tokens: Math.max(a.output_tokens, b.output_tokens),
    cache_read_input_tokens: Math.max(a.cache_read_input_tokens, b.cache_read_input_tokens),
    cache_creation_input_tokens: Math.max(
      a.cache_creation_input_tokens,
      b.cache_creation_input_tokens,
    ),
  };
}

/** Field-wise sum (across responses). */
export function addUsage(a: Usage, b: Usage): Usage {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    cache_read_input_tokens: a.cache_read_input_tokens + b.cache_read_input_tokens,
    cache_creation_input_tokens: a.cache_creation_input_tokens + b.cache_creation_input_tokens,
  };
}

/** How the body is framed: an event stream or one JSON document. */
export type BodyKind = "sse" | "json";

/** The body kind for a response content type; `undefined` = not read. */
export function bodyKind(contentType: string | null): BodyKind | undefined {
  const t = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (t === "text/event-stream") return "sse";
  if (t === "application/json" || t.endsWith("+json")) return "json";
  return undefined;
}

/** Feeds on response bytes in any chunking; {@link UsageReader.finish} gives the max usage. */
export class UsageReader {
  readonly #provider: ModelProvider;
  readonly #kind: BodyKind;
  #usage: Usage = zeroUsage();
  /** JSON: the body so far. */
  #parts: Uint8Array[] = [];
  #size = 0;
  #overflow = false;
  /** SSE: the bytes after the last newline (in `#tailBuf`), unless that line is over the cap. */
  #tail: Uint8Array = EMPTY;
  #tailBuf: Uint8Array = EMPTY;
  #tailOverflow = false;
  #decoder = new TextDecoder();

  constructor(provider: ModelProvider, kind: BodyKind) {
    this.#provider = provider;
    this.#kind = kind;
  }

  /** Takes the next bytes of the body; `text`, if given, is `latin1(chunk)` already made. */
  push(chunk: Uint8Array, text?: string): void {
    if (this.#kind === "json") {
      if (this.#overflow) return;
      this.#size += chunk.length;
      if (this.#size > JSON_BODY_CAP) {
        this.#overflow = true;
        this.#parts = [];
      } else this.#parts.push(chunk.slice());
      return;
    }
    if (chunk.length === 0) return;
    // One character per byte (see scrub.ts): native string search, byte offsets.
    text ??= latin1(chunk, 0, chunk.length);
    const firstNl = text.indexOf("\n");
    if (firstNl < 0) return this.#grow(chunk);
    let from = 0;
    if (this.#tailOverflow) {
      // The rest of an over-long line: skip it up to its end.
      this.#tailOverflow = false;
      from = firstNl + 1;
    } else if (this.#tail.length) {
      this.#grow(chunk.subarray(0, firstNl));
      const line = this.#tail;
      if (!this.#tailOverflow) this.#scan(line, latin1(line, 0, line.length), 0, line.length);
      this.#tailOverflow = false;
      from = firstNl + 1;
    }
    this.#tail = EMPTY;
    const lastNl = text.lastIndexOf("\n");
    this.#scan(chunk, text, from, lastNl + 1);
    this.#grow(chunk.subarray(lastNl + 1));
  }

  #grow(bytes: Uint8Array): void {
    if (bytes.length === 0 || this.#tailOverflow) return;
    if (this.#tail.length + bytes.length > SSE_LINE_CAP) {
      this.#tailOverflow = true;
      this.#tail = EMPTY;
      return;
    }
    const n = this.#tail.length + bytes.length;
    if (this.#tailBuf.length < n) {
      const size = Math.min(SSE_LINE_CAP, Math.max(n, 2 * this.#tailBuf.length, 1024));
      const bigger = new Uint8Array(size);
      bigger.set(this.#tail);
      this.#tailBuf = bigger;
    }
    this.#tailBuf.set(bytes, this.#tail.length);
    this.#tail = this.#tailBuf.subarray(0, n);
  }

  /** Parses the `data:` lines mentioning `"usage"` among the whole lines of `bytes[from, to)`. */
  #scan(bytes: Uint8Array, text: string, from: number, to: number): void {
    // `usage"` then a look back: a rare first character keeps V8's search fast.
    for (let at = text.indexOf(USAGE_TAIL, from); at >= 0 && at < to;) {
      const start = text.lastIndexOf("\n", at) + 1;
      let end = text.indexOf("\n", at);
      if (end < 0 || end > to) end = to;
      if (
        at > start && text.charCodeAt(at - 1) === QUOTE && end - start <= SSE_LINE_CAP &&
        text.startsWith(DATA, start)
      ) {
        this.#take(this.#decoder.decode(bytes.subarray(start + DATA.length, end)).trim());
        at = text.indexOf(USAGE_TAIL, end + 1);
      } else at = text.indexOf(USAGE_TAIL, at + 1);
    }
  }

  #take(text: string): void {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return;
    }
    for (const u of usageOf(this.#provider, value)) this.#usage = maxUsage(this.#usage, u);
  }

  /** Ends the body and returns the usage seen (max per field). */
  finish(): Usage {
    if (this.#kind === "json") {
      if (!this.#overflow && this.#parts.length > 0) {
        this.#take(this.#decoder.decode(concat(this.#parts)));
      }
      this.#parts = [];
    } else {
      const t = this.#tail;
      if (!this.#tailOverflow && t.length) this.#scan(t, latin1(t, 0, t.length), 0, t.length);
      this.#tail = EMPTY;
    }
    return { ...this.#usage };
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
