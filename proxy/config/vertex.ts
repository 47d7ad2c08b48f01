/**
 * Anthropic's Messages API on Vertex AI (shared/spec/isx-mcp.md §7.C, §7.G): where a
 * region's calls go, which paths are model calls, and the translation of a guest's
 * `POST /v1/messages` into Vertex's `:rawPredict` / `:streamRawPredict`.
 *
 * Guests always speak the plain Anthropic API with a placeholder key; an account of kind
 * `vertex` makes the proxy send their model calls to Vertex instead. The body keeps only
 * the fields Vertex accepts (anything else, such as beta-only fields, would be refused as
 * "extra inputs"), loses `model` (Vertex takes it from the path) and gains
 * `anthropic_version`. The model id comes from the guest and goes into a URL path, so it
 * must match a strict pattern: no `/`, `?`, `#`, `%` or `..` can reach the upstream path.
 *
 * Pure.
 *
 * @module
 */

import type { VertexConfig } from "./credentials.ts";

/** The `anthropic_version` Vertex requires in the body. */
export const VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16";

/** Top-level Messages fields Vertex accepts (everything else is dropped). */
export const VERTEX_FIELDS: ReadonlySet<string> = new Set([
  "messages",
  "system",
  "max_tokens",
  "temperature",
  "top_p",
  "top_k",
  "stop_sequences",
  "stream",
  "metadata",
  "tools",
  "tool_choice",
  "thinking",
]);

/** A model id that may go into the Vertex path. */
const MODEL_RE = /^[a-z0-9][a-z0-9.-]{0,99}(@[a-z0-9.-]{1,40})?$/;

/** Largest `/v1/messages` body the proxy translates (bytes). */
export const MAX_TRANSLATED_BODY = 32 * 1024 * 1024;

/** The Vertex host of a region (`global` and the multi-regions have their own). */
export function vertexHost(region: string): string {
  switch (region) {
    case "global":
      return "aiplatform.googleapis.com";
    case "us":
      return "aiplatform.us.rep.googleapis.com";
    case "eu":
      return "aiplatform.eu.rep.googleapis.com";
    default:
      return `${region}-aiplatform.googleapis.com`;
  }
}

/** True for a Vertex model call: `/v1/projects/…:rawPredict|:streamRawPredict`, not count-tokens. */
export function isVertexModelPath(path: string): boolean {
  const p = path.split("?")[0]!;
  return p.startsWith("/v1/projects/") && !p.includes("count-tokens") &&
    (p.endsWith(":rawPredict") || p.endsWith(":streamRawPredict"));
}

/** Anthropic's model id to Vertex's: a trailing `-YYYYMMDD` becomes `@YYYYMMDD`. */
export function vertexModel(model: string): string {
  return model.includes("@") ? model : model.replace(/-(\d{8})$/, "@$1");
}

/** A translated request, or why it cannot be. */
export type Translation =
  | { path: string; body: string; stream: boolean; dropped: string[] }
  | { error: string };

/** Translates a `/v1/messages` body for `config`'s project and region. */
export function translateMessages(text: string, config: VertexConfig): Translation {
  let req: unknown;
  try {
    req = JSON.parse(text);
  } catch {
    return { error: "the request body is not JSON" };
  }
  if (!req || typeof req !== "object" || Array.isArray(req)) {
    return { error: "the request body is not a JSON object" };
  }
  const r = req as Record<string, unknown>;
  if (typeof r.model !== "string") return { error: 'the request has no "model"' };
  const model = vertexModel(r.model.toLowerCase());
  if (!MODEL_RE.test(model)) return { error: `model "${r.model.slice(0, 120)}" is not valid` };
  const out: Record<string, unknown> = { anthropic_version: VERTEX_ANTHROPIC_VERSION };
  const dropped: string[] = [];
  for (const [k, v] of Object.entries(r)) {
    if (VERTEX_FIELDS.has(k)) out[k] = v;
    else if (k !== "model" && k !== "anthropic_version") dropped.push(k);
  }
  const stream = r.stream === true;
  const path = `/v1/projects/${config.project}/locations/${config.region}` +
    `/publishers/anthropic/models/${model}:${stream ? "streamRawPredict" : "rawPredict"}`;
  return { path, body: JSON.stringify(out), stream, dropped };
}

/** Request headers that do not go to Vertex (Anthropic's own, and the placeholder). */
export const NOT_FOR_VERTEX: readonly string[] = [
  "x-api-key",
  "anthropic-version",
  "content-length",
  "host",
];
