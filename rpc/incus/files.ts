/**
 * Files inside instances: push and pull bytes (binary-safe, with owner and mode headers),
 * create directories, delete. Used for guest scripts, task state and templates.
 *
 * @module
 */

import { type IncusConn, seg } from "./conn.ts";
import { apiError } from "./envelope.ts";

/** Owner and mode of a pushed file or directory, plus the step name. */
export interface PushOptions {
  /** What this does, for messages: "push runner script to web". */
  step: string;
  /** Owner uid. */
  uid?: number;
  /** Owner gid. */
  gid?: number;
  /** Permission bits, e.g. `0o644`. */
  mode?: number;
  /** Append instead of overwrite. */
  append?: boolean;
}

/** A pulled file: its bytes and the headers Incus reports. */
export interface FileContent {
  /** The file's bytes. */
  data: Uint8Array;
  /** Owner uid. */
  uid: number;
  /** Owner gid. */
  gid: number;
  /** Permission bits. */
  mode: number;
  /** `file`, `directory` or `symlink`. */
  type: string;
}

const filesPath = (name: string) => `/1.0/instances/${seg(name)}/files`;

/** Writes `data` to `path` inside the instance. */
export async function pushFile(
  conn: IncusConn,
  name: string,
  path: string,
  data: Uint8Array | string,
  opts: PushOptions,
): Promise<void> {
  const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const headers = ownerHeaders(opts, "file");
  if (opts.append) headers["x-incus-write"] = "append";
  await conn.sync("POST", filesPath(name), { query: { path }, body, headers });
}

/** Creates a directory at `path` (its parent must exist). */
export async function mkdir(
  conn: IncusConn,
  name: string,
  path: string,
  opts: PushOptions,
): Promise<void> {
  const headers = ownerHeaders(opts, "directory");
  await conn.sync("POST", filesPath(name), { query: { path }, headers });
}

/** Reads the file at `path`; a missing file is `not_found`. */
export async function pullFile(conn: IncusConn, name: string, path: string): Promise<FileContent> {
  const url = conn.url(filesPath(name), { query: { path } });
  const res = await conn.raw("GET", filesPath(name), { query: { path } });
  if (res.status >= 400) {
    const text = new TextDecoder().decode(res.body);
    let message = text.trim();
    try {
      message = JSON.parse(text).error || message;
    } catch { /* not an envelope */ }
    throw apiError({ method: "GET", path: url, status: res.status }, res.status, message);
  }
  const h = res.headers;
  return {
    /** The file's bytes. */
    data: res.body,
    uid: Number(h.get("x-incus-uid") ?? 0),
    gid: Number(h.get("x-incus-gid") ?? 0),
    mode: parseInt(h.get("x-incus-mode") ?? "0", 8),
    type: h.get("x-incus-type") ?? "file",
  };
}

/** Deletes the file or empty directory at `path`. */
export async function deleteFile(
  conn: IncusConn,
  name: string,
  path: string,
  _opts: { step: string },
): Promise<void> {
  await conn.sync("DELETE", filesPath(name), { query: { path } });
}

function ownerHeaders(opts: PushOptions, type: string): Record<string, string> {
  const h: Record<string, string> = { "x-incus-type": type };
  if (opts.uid !== undefined) h["x-incus-uid"] = String(opts.uid);
  if (opts.gid !== undefined) h["x-incus-gid"] = String(opts.gid);
  if (opts.mode !== undefined) h["x-incus-mode"] = "0" + opts.mode.toString(8);
  return h;
}
