/**
 * {@link Secret}: the one wrapper every real credential value lives in, from the moment the
 * credentials file is parsed until the proxy writes it into an upstream request head.
 *
 * It prints as its length only: `JSON.stringify`, `Deno.inspect`, `String()` and template
 * literals all see `[secret: N chars]`, so a value that slips into a log line, an error or
 * a test failure message stays unreadable. Reading it takes an explicit {@link Secret.reveal}.
 *
 * @module
 */

/** A credential value that never prints. */
export class Secret {
  readonly #value: string;

  /** Wraps a value. */
  constructor(value: string) {
    if (typeof value !== "string") throw new TypeError("Secret: value must be a string");
    this.#value = value;
  }

  /** The real value; call only where it goes upstream. */
  reveal(): string {
    return this.#value;
  }

  /** Length in UTF-16 units (safe to show). */
  get length(): number {
    return this.#value.length;
  }

  /** True when both hold the same value (constant time in the value's length). */
  equals(other: Secret): boolean {
    return constantTimeEqual(this.#value, other.#value);
  }

  /** What printing shows. */
  toString(): string {
    return `[secret: ${this.#value.length} chars]`;
  }

  /** What JSON shows. */
  toJSON(): string {
    return this.toString();
  }

  /** What `Deno.inspect` and `console.log` show. */
  [Symbol.for("Deno.customInspect")](): string {
    return this.toString();
  }

  /** What Node's `util.inspect` shows. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
}

/** Compares two strings without an early exit (time depends on length only). */
export function constantTimeEqual(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  const n = Math.max(x.length, y.length);
  for (let i = 0; i < n; i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}
