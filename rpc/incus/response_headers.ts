/**
 * The response headers of an exchange with incusd over its unix socket (`http_unix.ts`): a
 * name → value table with the lookup the client needs (`get`, case-insensitive, repeated
 * fields joined with ", " as `Headers` joins them) and `Headers`' checks of what it takes (a
 * token for a name; no NUL, CR or LF in a value, surrounding blanks trimmed).
 *
 * Why not `Headers`: the first `new Headers()` of a process loads the fetch extension's headers
 * module, 4.9 ms of the CPU profile of `isx mcp`'s first `list_templates` (and of every
 * `isx list`'s, whose only header reads are `content-length`, `transfer-encoding` and `etag`);
 * this table costs nothing to load (docs/decisions.md, issue 24). The fetch-based transport
 * (`http.ts`, HTTPS remotes) keeps the `Headers` fetch gives it: both satisfy
 * {@link HeaderLookup}.
 *
 * Pure.
 *
 * @module
 */

/** What callers read of a response's headers: `Headers` and {@link ResponseHeaders} alike. */
export interface HeaderLookup {
  /** The field's value (repeated fields joined with ", "), or null when absent. */
  get(name: string): string | null;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[\0\r\n]/;

/** Response headers as read off the wire. */
export class ResponseHeaders implements HeaderLookup {
  #fields = new Map<string, string>();

  /** Adds one field; throws a TypeError for a name that is not a token or a value with NUL/CR/LF. */
  append(name: string, value: string): void {
    if (!TOKEN.test(name)) throw new TypeError("invalid header name");
    const v = value.replace(/^[\t ]+|[\t ]+$/g, "");
    if (BAD_VALUE.test(v)) throw new TypeError("invalid header value");
    const key = name.toLowerCase();
    const had = this.#fields.get(key);
    this.#fields.set(key, had === undefined ? v : `${had}, ${v}`);
  }

  /** The field's value, or null. */
  get(name: string): string | null {
    return this.#fields.get(name.toLowerCase()) ?? null;
  }
}
