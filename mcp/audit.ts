/**
 * The audit log (§4.6): one line per tool action in `<state>/mcp.log`,
 * `<local ISO second> session=<id> tool=<tool> [instance=<name>] outcome=<…> ms=<n> [detail=<…>]`.
 * Details are credential-scrubbed, flattened to one line and cut at 500 characters, so
 * nothing a command printed can forge a line or leak a token.
 *
 * At the top of `mcp/`, apart from the session: `isx mcp` writes a connection's `tool=connect`
 * line (which client, which era) the moment the client names itself, before the session and
 * its modules load (cli/mcp.ts; a client may kill the server right after `tools/list`).
 *
 * @module
 */

const SECRETS: RegExp[] = [
  /Bearer\s+[A-Za-z0-9._~+/=-]+/g, // before the header rule, which would keep the token
  /sk-ant-[A-Za-z0-9_-]+/g,
  /sk-(proj-)?[A-Za-z0-9_-]{16,}/g,
  /gh[pousr]_[A-Za-z0-9]{20,}/g,
  /github_pat_[A-Za-z0-9_]{20,}/g,
  /(authorization|x-api-key|api[_-]?key|token|password|secret)(["']?\s*[:=]\s*["']?)[^\s"',]+/gi,
];

/** Removes credential-looking values and control characters; at most 500 characters (pure). */
export function scrub(text: string): string {
  let s = text;
  for (const re of SECRETS) {
    s = s.replace(
      re,
      (m, k?: string, sep?: string) =>
        typeof k === "string" && typeof sep === "string" && !m.startsWith("Bearer")
          ? `${k}${sep}[redacted]`
          : "[redacted]",
    );
  }
  // deno-lint-ignore no-control-regex
  s = s.replace(/[\x00-\x1f\x7f]+/g, " ");
  return s.length > 500 ? s.slice(0, 497) + "..." : s;
}

/** One audit entry. */
export interface AuditEntry {
  /** The session id. */
  session: string;
  /** The tool (or `reap-orphans`, `release`). */
  tool: string;
  /** The instance named, if any. */
  instance?: string;
  /** What happened. */
  outcome: string;
  /** How long it took. */
  ms: number;
  /** More, scrubbed. */
  detail?: string;
}

function localIso(d: Date): string {
  const off = -d.getTimezoneOffset();
  const local = new Date(d.getTime() + off * 60_000).toISOString().slice(0, 19);
  const sign = off >= 0 ? "+" : "-";
  const a = Math.abs(off);
  return `${local}${sign}${String(Math.floor(a / 60)).padStart(2, "0")}:${
    String(a % 60).padStart(2, "0")
  }`;
}

/** The line of an entry (pure apart from the clock value passed in). */
export function auditLine(e: AuditEntry, at: Date): string {
  const parts = [localIso(at), `session=${e.session}`, `tool=${e.tool}`];
  if (e.instance) parts.push(`instance=${scrub(e.instance)}`);
  parts.push(`outcome=${scrub(e.outcome)}`, `ms=${Math.round(e.ms)}`);
  if (e.detail) parts.push(`detail=${scrub(e.detail)}`);
  return parts.join(" ");
}

/** Appends lines to the log file, creating its directory; failures never fail a tool. */
export function fileAuditor(path: string): (line: string) => void {
  let made = false;
  return (line) => {
    try {
      if (!made) {
        Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")), { recursive: true, mode: 0o700 });
        made = true;
      }
      Deno.writeTextFileSync(path, line + "\n", { append: true, create: true, mode: 0o600 });
    } catch { /* the audit log is best effort: a full disk must not stop a destroy */ }
  };
}
