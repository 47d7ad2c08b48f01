/**
 * What all mutations share: the options type that requires a `step`, and waiting for an
 * answer that may be an operation. Private to `rpc/incus/`.
 *
 * @module
 */

import type { IncusConn } from "./conn.ts";
import type { Reply } from "./envelope.ts";
import { waitOperation } from "./operations.ts";

/** Options every mutation takes: the step name and an optional deadline. */
export interface MutationOptions {
  /** What this does, for messages: "create instance web". */
  step: string;
  /** Total wait for the operation; the client's default for the kind when absent. */
  deadlineMs?: number;
}

/** Waits for `r` when it is an operation; a sync reply is already done. */
export async function waitIfAsync(
  conn: IncusConn,
  r: Reply,
  opts: MutationOptions,
): Promise<void> {
  if (r.kind === "async") await waitOperation(conn, r, opts);
}

/** Headers for an update guarded by an ETag. */
export function ifMatch(etag: string | undefined): Record<string, string> {
  return etag ? { "if-match": etag } : {};
}
