/**
 * What the proxy changes in the bytes it relays: credentials go into request heads on the
 * way upstream, and real values are scrubbed out of everything coming back.
 *
 * Request side: hop-by-hop and isx-internal headers are dropped, then the policy's
 * {@link HeaderOp}s run (set, delete, swap a Basic password, replace a placeholder inside a
 * value). Response side: header values and texts are scrubbed of real values here (each
 * becomes `*` of the same length); bodies are scrubbed in place by `scrub.ts`. Pure: no I/O.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { Secret } from "../config/secret.ts";

const enc = new TextEncoder();

/** Scrubs real values out of one string (header values, error texts). */
export function scrubText(text: string, secrets: readonly Secret[]): string {
  let out = text;
  for (const s of secrets) {
    const v = s.reveal();
    if (v.length > 0 && out.includes(v)) out = out.split(v).join("*".repeat(enc.encode(v).length));
  }
  return out;
}

/** Headers that describe one hop, never forwarded (RFC 9110 §7.6.1). */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The header a guest presents its per-start instance secret in; never forwarded. */
export const INSTANCE_SECRET_HEADER = "x-isx-instance-secret";

/** One change the policy makes to a request head (`V`: what a value is before resolving). */
export type HeaderOp<V = Secret> =
  | { op: "set"; name: string; value: V; prefix?: string }
  | { op: "delete"; name: string }
  /** `Authorization: Basic user:value`; with `keepGuestUser`, the guest's user name wins. */
  | { op: "basic"; value: V; user: string; keepGuestUser?: boolean }
  /** Replace `placeholder` inside any header value by the real value. */
  | { op: "substitute"; placeholder: string; value: V };

/** A copy of `src` without hop-by-hop headers, those `Connection` names, and isx headers. */
export function forwardableHeaders(src: Headers): Headers {
  const named = new Set(
    (src.get("connection") ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean),
  );
  const out = new Headers();
  for (const [k, v] of src) {
    if (HOP_BY_HOP.has(k) || named.has(k) || k === INSTANCE_SECRET_HEADER) continue;
    out.append(k, v);
  }
  return out;
}

function basicUser(current: string | null, fallback: string): string {
  const m = /^basic\s+(\S+)\s*$/i.exec(current ?? "");
  if (!m) return fallback;
  try {
    const decoded = atob(m[1]!);
    const colon = decoded.indexOf(":");
    const user = colon < 0 ? decoded : decoded.slice(0, colon);
    return user || fallback;
  } catch {
    return fallback;
  }
}

/** Base64 of a string's UTF-8 bytes (what a Basic header carries). */
export function utf8Base64(s: string): string {
  return Buffer.from(s, "utf8").toString("base64");
}

/** Applies the policy's operations to a request head, in order. */
export function applyHeaderOps(headers: Headers, ops: readonly HeaderOp[]): void {
  for (const op of ops) {
    switch (op.op) {
      case "set":
        headers.set(op.name, (op.prefix ?? "") + op.value.reveal());
        break;
      case "delete":
        headers.delete(op.name);
        break;
      case "basic": {
        const user = op.keepGuestUser ? basicUser(headers.get("authorization"), op.user) : op.user;
        headers.set("authorization", `Basic ${utf8Base64(`${user}:${op.value.reveal()}`)}`);
        break;
      }
      case "substitute":
        for (const [k, v] of [...headers]) {
          if (v.includes(op.placeholder)) {
            headers.set(k, v.split(op.placeholder).join(op.value.reveal()));
          }
        }
        break;
    }
  }
}

/** Response headers for the guest: hop-by-hop dropped, real values scrubbed. */
export function responseHeaders(src: Headers, secrets: readonly Secret[]): Headers {
  const out = forwardableHeaders(src);
  for (const [k, v] of [...out]) {
    const clean = scrubText(v, secrets);
    if (clean !== v) out.set(k, clean);
  }
  return out;
}
