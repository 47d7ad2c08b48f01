/**
 * Images: list local images, resolve an alias, fetch one by fingerprint. Read-only: the
 * project never imports or deletes images through the client.
 *
 * @module
 */

import { type IncusConn, seg } from "./conn.ts";
import type { Image } from "./types.ts";

/** An image alias. */
export interface ImageAlias {
  /** Name. */
  name: string;
  /** The fingerprint the alias points to. */
  target: string;
  /** Free-form description. */
  description: string;
  /** Type. */
  type?: string;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** Lists local images. */
export async function listImages(conn: IncusConn): Promise<Image[]> {
  return (await conn.sync<Image[]>("GET", "/1.0/images", { query: { recursion: 1 } }))
    .metadata ?? [];
}

/** Resolves an alias; a missing one is `not_found`. */
export async function getImageAlias(conn: IncusConn, name: string): Promise<ImageAlias> {
  return (await conn.sync<ImageAlias>("GET", `/1.0/images/aliases/${seg(name)}`)).metadata;
}

/** Fetches an image by fingerprint. */
export async function getImage(conn: IncusConn, fingerprint: string): Promise<Image> {
  return (await conn.sync<Image>("GET", `/1.0/images/${seg(fingerprint)}`)).metadata;
}
