/**
 * The YAML reader's flow collections (`[…]`, `{…}`, also over several lines), for
 * rpc/yaml.ts's block reader, which hands over the collection's whole text once its brackets
 * balance. Apart from the block reader because flow text is scanned by character, not by
 * line and indentation. Pure.
 *
 * @module
 */

import { define, fail, NOT_SUPPORTED, quoted, resolvePlain } from "./_yaml_scalar.ts";

/** A flow collection (`[…]`, `{…}`) over one string that may span lines. */
export class Flow {
  #s: string;
  #i = 0;
  #n: number;
  constructor(s: string, n: number) {
    this.#s = s;
    this.#n = n;
  }

  /** Whether the brackets close within the text so far (quotes and comments skipped). */
  balanced(): boolean {
    let depth = 0;
    const s = this.#s;
    for (let i = 0; i < s.length; i++) {
      const c = s[i]!;
      if (c === '"' || c === "'") {
        const close = q(s, i);
        if (close < 0) return false;
        i = close;
      } else if (c === "#" && (i === 0 || /\s/.test(s[i - 1]!))) {
        const eol = s.indexOf("\n", i);
        if (eol < 0) return depth === 0;
        i = eol;
      } else if (c === "[" || c === "{") depth++;
      else if (c === "]" || c === "}") {
        if (--depth === 0) return true;
      }
    }
    return depth === 0;
    function q(s: string, i: number): number {
      for (let j = i + 1; j < s.length; j++) {
        if (s[i] === '"' && s[j] === "\\") j++;
        else if (s[j] === s[i]) {
          if (s[i] === "'" && s[j + 1] === "'") j++;
          else return j;
        }
      }
      return -1;
    }
  }

  atEnd(): boolean {
    return this.#i >= this.#s.length;
  }

  ws(): void {
    const s = this.#s;
    while (this.#i < s.length) {
      const c = s[this.#i]!;
      if (c === " " || c === "\t" || c === "\n" || c === "\r") this.#i++;
      else if (c === "#" && (this.#i === 0 || /\s/.test(s[this.#i - 1]!))) {
        const eol = s.indexOf("\n", this.#i);
        this.#i = eol < 0 ? s.length : eol;
      } else break;
    }
  }

  node(): unknown {
    this.ws();
    const c = this.#s[this.#i];
    if (c === "[") return this.#seq();
    if (c === "{") return this.#map();
    if (c === '"' || c === "'") {
      const r = quoted(this.#s, this.#i, this.#n);
      this.#i = r.end;
      return r.value;
    }
    if (c === "&" || c === "*" || c === "!" || c === "?") fail(this.#n, NOT_SUPPORTED);
    return resolvePlain(this.#plain());
  }

  #plain(): string {
    const s = this.#s;
    const start = this.#i;
    while (this.#i < s.length) {
      const c = s[this.#i]!;
      if (c === "," || c === "]" || c === "}" || c === "[" || c === "{") break;
      if (c === ":" && /[\s,\]}]/.test(s[this.#i + 1] ?? " ")) break;
      if (c === "#" && /\s/.test(s[this.#i - 1] ?? " ")) break;
      this.#i++;
    }
    return s.slice(start, this.#i).trim().replace(/\s*\n\s*/g, " ");
  }

  #seq(): unknown[] {
    this.#i++;
    const out: unknown[] = [];
    for (;;) {
      this.ws();
      if (this.#s[this.#i] === "]") {
        this.#i++;
        return out;
      }
      const v = this.node();
      this.ws();
      if (this.#s[this.#i] === ":") {
        // `[k: v]` is a sequence of one-entry mappings
        this.#i++;
        if (typeof v === "object" && v !== null) fail(this.#n, "a collection cannot be a key");
        const one: Record<string, unknown> = {};
        define(one, String(v), this.#valueAfterColon());
        out.push(one);
      } else out.push(v);
      this.#sep("]");
    }
  }

  #map(): Record<string, unknown> {
    this.#i++;
    const out: Record<string, unknown> = {};
    for (;;) {
      this.ws();
      if (this.#s[this.#i] === "}") {
        this.#i++;
        return out;
      }
      const c = this.#s[this.#i];
      let key: string;
      if (c === '"' || c === "'") {
        const r = quoted(this.#s, this.#i, this.#n);
        this.#i = r.end;
        key = r.value;
      } else if (c === "[" || c === "{") fail(this.#n, "a collection cannot be a key");
      else if (c === "&" || c === "*" || c === "!" || c === "?") fail(this.#n, NOT_SUPPORTED);
      else key = String(resolvePlain(this.#plain()));
      this.ws();
      let value: unknown = null;
      if (this.#s[this.#i] === ":") {
        this.#i++;
        value = this.#valueAfterColon();
      }
      if (Object.hasOwn(out, key)) fail(this.#n, "a key appears twice in one mapping");
      define(out, key, value);
      this.#sep("}");
    }
  }

  #valueAfterColon(): unknown {
    this.ws();
    const c = this.#s[this.#i];
    return c === "," || c === "}" || c === "]" ? null : this.node();
  }

  #sep(close: string): void {
    this.ws();
    const c = this.#s[this.#i];
    if (c === ",") this.#i++;
    else if (c !== close) fail(this.#n, `expected , or ${close} in a flow collection`);
  }
}
