/**
 * The shape of one tool: its zod input and output schemas, annotations (§1.5), whether it
 * runs as an MCP task, and `run`. Group modules (`instances.ts`, `exec.ts`, `tasks.ts`,
 * `activity.ts`) export tables of these; `mod.ts` serves them. The output schema is both the
 * advertised `outputSchema` (JSON Schema 2020-12 from zod) and the golden file's source.
 *
 * @module
 */

import * as z from "zod";
import type { Session } from "../session/mod.ts";

/** What a tool gets besides its arguments. */
export interface ToolContext {
  /** The session: holding, tasks, config, the Incus client. */
  session: Session;
  /** Aborted when the client cancels the call or the input ends. */
  signal: AbortSignal;
  /** Reports progress; a no-op unless the call carried a progress token; at most 1/s. */
  progress(message: string): void;
}

/** A tool's success: the structure, and the text for the model (default: the structure). */
export interface ToolOutput {
  /** Matches the tool's output schema. */
  structured: Record<string, unknown>;
  /** Prose for the model; the structure pretty-printed when absent. */
  text?: string;
  /** A note appended after a blank line (not part of the structure). */
  note?: string;
  /** The audit log's outcome word (default `ok`). */
  audit?: string;
}

/** §1.5 annotations. */
export interface Hints {
  /** Reads only. */
  readOnly: boolean;
  /** Destroys something (only meaningful when not read-only). */
  destructive?: boolean;
  /** Repeating it changes nothing more. */
  idempotent: boolean;
}

/** One tool. */
export interface ToolDef {
  /** The tool name. */
  name: string;
  /** What it does, for the model. */
  description: string;
  /** Arguments (a strict object: unknown arguments are refused). */
  input: z.ZodObject;
  /** The structured result (closed objects). */
  output: z.ZodObject;
  /** Annotations. */
  hints: Hints;
  /** MCP task support (`tools/call` with `task`); absent = forbidden. */
  taskSupport?: "optional";
  /** Runs the call; throws RefusalError (or IsbError) to refuse. */
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolOutput>;
}

/**
 * Declares a tool with typed arguments. Its schemas are given as functions that build them,
 * called the first time `input` or `output` is read (then kept): a session's first call builds
 * its own tool's, not the seventeen tools' (what loading the table cost before the first
 * `list_templates`; docs/decisions.md, "Tool schemas on first use").
 */
export function tool<I extends z.ZodObject, O extends z.ZodObject>(def: {
  name: string;
  description: string;
  input: () => I;
  output: () => O;
  hints: Hints;
  taskSupport?: "optional";
  run(args: z.infer<I>, ctx: ToolContext): Promise<ToolOutput>;
}): ToolDef {
  const { input, output, ...rest } = def;
  const schemas: { input?: I; output?: O } = {};
  return Object.defineProperties(rest, {
    input: { get: () => (schemas.input ??= input()), enumerable: true },
    output: { get: () => (schemas.output ??= output()), enumerable: true },
  }) as unknown as ToolDef;
}

/** A schema (or any value) shared by several tools, built on its first use, then the same. */
export function once<T>(make: () => T): () => T {
  let v: T | undefined;
  return () => (v ??= make());
}

/** The JSON Schema (2020-12) of a zod schema, without the `$schema` line. */
export function jsonSchema(s: z.ZodType, io: "input" | "output"): Record<string, unknown> {
  const out = z.toJSONSchema(s, { target: "draft-2020-12", io, unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
  delete out.$schema;
  return out;
}

/** The wire annotations of §1.5: `destructiveHint` only when not read-only. */
export function annotations(h: Hints): Record<string, boolean> {
  return {
    readOnlyHint: h.readOnly,
    ...(h.readOnly ? {} : { destructiveHint: h.destructive ?? false }),
    idempotentHint: h.idempotent,
    openWorldHint: false,
  };
}

// Shared field schemas: the same names mean the same thing in every tool (§1.3).

/** An instance name. */
export const InstanceName = z.string().min(1).max(63);
/** A task id. */
export const TaskId = z.string().regex(/^[a-z0-9-]{1,64}$/);
/** A task state. */
export const TaskState = z.enum(["running", "finished", "attached", "lost", "unknown"]);
/** A task kind. */
export const TaskKind = z.enum(["agent", "command"]);
/** An idempotency key (§5). */
export const IdempotencyKey = z.string().regex(
  /^[A-Za-z0-9._:-]{1,64}$/,
  "1 to 64 characters of A-Za-z0-9._:-",
);
/** An ISO-8601 time. */
export const IsoTime = z.string();
