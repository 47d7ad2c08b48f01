/**
 * A small YAML reader for the config files the long-running processes read (`config.yaml`,
 * `credentials.yaml`, the incus client's `config.yml`), so the proxy and `isb rpc` do not
 * keep js-yaml and the Node compatibility layer it brings resident (issue 11: footprint and
 * start-up; docs/decisions.md). It reads what those files are written in and gives what
 * js-yaml 5 gives for it (yaml_test.ts compares the two on every YAML example of the docs): block mappings and sequences (also a sequence at its key's
 * indentation and `- key: value` items), flow mappings and sequences (also over several
 * lines), plain, single- and double-quoted scalars, block scalars (`|`, `>`, chomping and
 * indentation indicators), plain scalars folded over lines, comments, one `---` document,
 * and the core schema (null, booleans, integers, floats; everything else a string).
 * Anchors, aliases, tags, `?` keys and several documents are refused with a clear error,
 * never misread. Errors name the line and never quote the text (it may be a credential).
 * Pure. This file reads the block structure (lines and indentation); scalars are
 * `_yaml_scalar.ts`, flow collections `_yaml_flow.ts`.
 *
 * @module
 */

import { Flow } from "./_yaml_flow.ts";
import { fail, folded, keyOf, NOT_SUPPORTED, quoted, resolvePlain } from "./_yaml_scalar.ts";

export { resolvePlain } from "./_yaml_scalar.ts";

interface Line {
  /** 1-based line number. */
  n: number;
  /** Leading spaces. */
  indent: number;
  /** The line after its indentation, comments included. */
  text: string;
}

/** Parses one YAML document of the supported subset; empty or comments only gives null. */
export function parseYaml(text: string): unknown {
  const raw = text.replace(/^\uFEFF/, "").split("\n");
  if (raw.length > 1 && raw[raw.length - 1] === "") raw.pop(); // the final newline ends a line
  const lines: Line[] = raw.map((raw, i) => {
    const l = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    const body = l.replace(/^ */, "");
    return { n: i + 1, indent: l.length - body.length, text: body };
  });
  return new Reader(lines).document();
}

const isMarker = (l: Line) => l.indent === 0 && /^(---|\.\.\.)(\s|$)/.test(l.text);
const isBlank = (l: Line) => /^\s*(#.*)?$/.test(l.text);
class Reader {
  #lines: Line[];
  #at = 0;

  constructor(lines: Line[]) {
    this.#lines = lines;
  }

  document(): unknown {
    let first = this.#next();
    if (first && first.indent === 0 && /^---(\s|$)/.test(first.text)) {
      const rest = first.text.slice(3).trim();
      if (rest !== "" && !rest.startsWith("#")) fail(first.n, "content after --- is not supported");
      this.#at++;
      first = this.#next();
    }
    if (!first) return null;
    const value = this.#block(first.indent, -1);
    const after = this.#next();
    if (after) {
      if (after.indent === 0 && /^\.\.\.(\s|$)/.test(after.text)) {
        this.#at++;
        if (this.#next()) fail(after.n, "only one document is supported");
      } else if (after.indent === 0 && /^---(\s|$)/.test(after.text)) {
        fail(after.n, "only one document is supported");
      } else fail(after.n, "unexpected indentation");
    }
    return value;
  }

  /** The next line with content (skipping blanks and comments), not consumed. */
  #next(): Line | undefined {
    while (this.#at < this.#lines.length) {
      const l = this.#lines[this.#at]!;
      if (l.text.startsWith("\t") && !isBlank(l)) fail(l.n, "tabs cannot indent");
      if (!isBlank(l)) return l;
      this.#at++;
    }
    return undefined;
  }

  /** A block node whose first line is the current one, at `indent` (> `parent`). */
  #block(indent: number, parent: number): unknown {
    const l = this.#next()!;
    if (/^-(\s|$)/.test(l.text)) return this.#sequence(indent);
    if (keyEnd(l.text, l.n) !== undefined) return this.#mapping(indent);
    this.#at++;
    return this.#inline(l, l.text, parent);
  }

  #mapping(indent: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (let l = this.#next(); l && l.indent === indent; l = this.#next()) {
      if (/^-(\s|$)/.test(l.text) || isMarker(l)) break;
      const end = keyEnd(l.text, l.n);
      if (end === undefined) fail(l.n, "expected a key: value entry");
      const key = keyOf(l.text.slice(0, end.key).trim(), l.n);
      if (Object.hasOwn(out, key)) fail(l.n, "a key appears twice in one mapping");
      const rest = l.text.slice(end.value);
      this.#at++;
      let value: unknown = null;
      if (!/^\s*(#.*)?$/.test(rest)) value = this.#inline(l, rest.trimStart(), indent);
      else {
        const nx = this.#next();
        if (nx && nx.indent > indent) value = this.#block(nx.indent, indent);
        else if (nx && nx.indent === indent && /^-(\s|$)/.test(nx.text)) {
          value = this.#sequence(indent);
        }
      }
      Object.defineProperty(out, key, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    const l = this.#next();
    if (l && l.indent > indent) fail(l.n, "unexpected indentation");
    return out;
  }

  #sequence(indent: number): unknown[] {
    const out: unknown[] = [];
    for (
      let l = this.#next();
      l && l.indent === indent && /^-(\s|$)/.test(l.text);
      l = this.#next()
    ) {
      const rest = l.text.slice(1);
      const pad = rest.length - rest.trimStart().length;
      if (/^\s*(#.*)?$/.test(rest)) {
        this.#at++;
        const nx = this.#next();
        out.push(nx && nx.indent > indent ? this.#block(nx.indent, indent) : null);
        continue;
      }
      // the item's content as a line of its own, at its column (`- a: 1` opens a mapping)
      const item = { n: l.n, indent: indent + 1 + pad, text: rest.trimStart() };
      this.#lines[this.#at] = item;
      out.push(this.#block(item.indent, indent));
    }
    const l = this.#next();
    if (l && l.indent > indent) fail(l.n, "unexpected indentation");
    return out;
  }

  /** A value that starts inside line `l` (already consumed) at `text`; `parent` indents it. */
  #inline(l: Line, text: string, parent: number): unknown {
    const c = text[0]!;
    if (c === "&" || c === "*" || c === "!" || c === "?") fail(l.n, NOT_SUPPORTED);
    if (c === "|" || c === ">") return this.#blockScalar(l, text, parent);
    if (c === "[" || c === "{") return this.#flow(l, text);
    if (c === '"' || c === "'") {
      const q = quoted(text, 0, l.n);
      if (!/^\s*(#.*)?$/.test(text.slice(q.end))) fail(l.n, "unexpected text after a quoted value");
      return q.value;
    }
    if (c === "-" && /^-(\s|$)/.test(text)) fail(l.n, "a sequence cannot start on a key's line");
    if (c === "%" || c === "@" || c === "`") fail(l.n, "a value cannot start with this character");
    let plain = stripComment(text);
    if (/:(\s|$)/.test(plain)) fail(l.n, "a mapping cannot start on a key's line");
    // a plain value may go on over more-indented lines: folded with spaces
    for (
      let nx = this.#peekRaw();
      nx && (nx.indent > parent || isBlank(nx));
      nx = this.#peekRaw()
    ) {
      if (isBlank(nx)) {
        if (!this.#continuesAfterBlanks(parent)) break;
        plain += "\n";
      } else {
        if (/^#/.test(nx.text)) break;
        const more = stripComment(nx.text);
        if (/:(\s|$)/.test(more) || /^-(\s|$)/.test(more)) fail(nx.n, "unexpected indentation");
        plain += plain.endsWith("\n") ? more : ` ${more}`;
      }
      this.#at++;
    }
    return resolvePlain(plain.replace(/ ?\n ?/g, "\n"));
  }

  #peekRaw(): Line | undefined {
    return this.#lines[this.#at];
  }

  #continuesAfterBlanks(parent: number): boolean {
    for (let i = this.#at; i < this.#lines.length; i++) {
      const l = this.#lines[i]!;
      if (!isBlank(l)) return l.indent > parent && !l.text.startsWith("#");
      if (/^\s*#/.test(l.text)) return false;
    }
    return false;
  }

  #blockScalar(l: Line, text: string, parent: number): string {
    const m = /^([|>])([+-]?)([1-9]?)([+-]?)(\s+#.*)?\s*$/.exec(text);
    if (!m || (m[2] && m[4])) fail(l.n, "a block scalar header is | or > with + or - and a digit");
    const fold = m[1] === ">";
    const chomp = m[2] || m[4];
    let indent = m[3] ? Math.max(parent, 0) + Number(m[3]) : -1;
    const body: string[] = [];
    while (this.#at < this.#lines.length) {
      const x = this.#lines[this.#at]!;
      const raw = " ".repeat(x.indent) + x.text;
      if (raw.trim() === "") {
        body.push(raw.length > indent && indent >= 0 ? raw.slice(indent) : "");
        this.#at++;
        continue;
      }
      if (indent < 0) indent = x.indent;
      if (x.indent < indent || x.indent <= parent) break;
      body.push(raw.slice(indent));
      this.#at++;
    }
    // trailing blank lines belong to the chomping, not the content
    let trail = 0;
    while (body.length && body[body.length - 1]!.trim() === "") body.pop(), trail++;
    const out = fold ? folded(body) : body.join("\n");
    if (body.length === 0) return chomp === "+" ? "\n".repeat(trail) : "";
    if (chomp === "-") return out;
    if (chomp === "+") return out + "\n" + "\n".repeat(trail);
    return out + "\n";
  }

  #flow(l: Line, text: string): unknown {
    // gather lines until the brackets close (quotes and comments taken into account)
    let src = text;
    let p = new Flow(src, l.n);
    for (;;) {
      const done = p.balanced();
      if (done) break;
      const nx = this.#lines[this.#at];
      if (!nx) fail(l.n, "a [ or { is not closed");
      src += "\n" + nx.text;
      this.#at++;
      p = new Flow(src, l.n);
    }
    const value = p.node();
    p.ws();
    if (!p.atEnd()) fail(l.n, "unexpected text after a flow collection");
    return value;
  }
}

/** Where a `key:` ends on a line: the key's end and the value's start; none if no key. */
function keyEnd(text: string, n: number): { key: number; value: number } | undefined {
  if (/^[\[{|>]/.test(text) || /^-(\s|$)/.test(text)) return undefined;
  let i = 0;
  if (text[0] === '"' || text[0] === "'") i = quoted(text, 0, n).end;
  for (; i < text.length; i++) {
    if (text[i] === "#" && (i === 0 || /\s/.test(text[i - 1]!))) return undefined;
    if (text[i] === ":" && (i + 1 === text.length || /\s/.test(text[i + 1]!))) {
      return { key: i, value: i + 1 };
    }
  }
  return undefined;
}

function stripComment(text: string): string {
  const m = /(^|\s)#/.exec(text);
  return (m ? text.slice(0, m.index) : text).trimEnd();
}
