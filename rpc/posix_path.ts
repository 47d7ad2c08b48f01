/**
 * The POSIX path operations the engine's start-up path uses (`normalize`, `join`, `resolve`,
 * `dirname`, `isAbsolute`), with `node:path`'s `posix` behaviour, ported from Node's
 * `lib/path.js` (MIT). Importing `node:path` starts part of Deno's Node layer (validators,
 * errors, `util.inspect`, assert: ~5 ms of every `isb rpc` start before its first answer, and
 * as much of `isx mcp`'s session), for string work a page of code does. `posix_path_test.ts`
 * compares every function with `node:path` on a table and on random paths of `/`, `.`, `..`
 * and names, the characters the algorithms branch on.
 *
 * @module
 */

const SLASH = 47; // "/"
const DOT = 46; // "."

/** Resolves `.` and `..` and collapses slashes in `path` (Node's `normalizeString`). */
function normalizeString(path: string, allowAboveRoot: boolean): string {
  let res = "";
  let lastSegmentLength = 0;
  let lastSlash = -1;
  let dots = 0;
  let code = 0;
  for (let i = 0; i <= path.length; ++i) {
    if (i < path.length) code = path.charCodeAt(i);
    else if (code === SLASH) break;
    else code = SLASH;
    if (code === SLASH) {
      if (lastSlash === i - 1 || dots === 1) {
        // an empty segment or `.`: nothing
      } else if (dots === 2) {
        if (
          res.length < 2 || lastSegmentLength !== 2 || res.charCodeAt(res.length - 1) !== DOT ||
          res.charCodeAt(res.length - 2) !== DOT
        ) {
          if (res.length > 2) {
            const at = res.lastIndexOf("/");
            if (at === -1) {
              res = "";
              lastSegmentLength = 0;
            } else {
              res = res.slice(0, at);
              lastSegmentLength = res.length - 1 - res.lastIndexOf("/");
            }
            lastSlash = i;
            dots = 0;
            continue;
          } else if (res.length !== 0) {
            res = "";
            lastSegmentLength = 0;
            lastSlash = i;
            dots = 0;
            continue;
          }
        }
        if (allowAboveRoot) {
          res += res.length > 0 ? "/.." : "..";
          lastSegmentLength = 2;
        }
      } else {
        if (res.length > 0) res += `/${path.slice(lastSlash + 1, i)}`;
        else res = path.slice(lastSlash + 1, i);
        lastSegmentLength = i - lastSlash - 1;
      }
      lastSlash = i;
      dots = 0;
    } else if (code === DOT && dots !== -1) {
      ++dots;
    } else {
      dots = -1;
    }
  }
  return res;
}

/** `node:path`'s `posix.isAbsolute`. */
export function isAbsolute(path: string): boolean {
  return path.length > 0 && path.charCodeAt(0) === SLASH;
}

/** `node:path`'s `posix.normalize`: `.`, `..` and repeated slashes resolved, a trailing one kept. */
export function normalize(path: string): string {
  if (path.length === 0) return ".";
  const absolute = isAbsolute(path);
  const trailing = path.charCodeAt(path.length - 1) === SLASH;
  let out = normalizeString(path, !absolute);
  if (out.length === 0) {
    if (absolute) return "/";
    return trailing ? "./" : ".";
  }
  if (trailing) out += "/";
  return absolute ? `/${out}` : out;
}

/** `node:path`'s `posix.join`: the non-empty parts joined with `/`, normalised. */
export function join(...parts: string[]): string {
  const kept = parts.filter((p) => p.length > 0);
  return kept.length === 0 ? "." : normalize(kept.join("/"));
}

/**
 * `node:path`'s `posix.resolve`: the parts from the last absolute one on, normalised, without a
 * trailing slash; relative to the working directory when none is absolute.
 */
export function resolve(...parts: string[]): string {
  let resolved = "";
  let absolute = false;
  for (let i = parts.length - 1; i >= -1 && !absolute; i--) {
    const path = i >= 0 ? parts[i]! : Deno.cwd();
    if (path.length === 0) continue;
    resolved = `${path}/${resolved}`;
    absolute = isAbsolute(path);
  }
  resolved = normalizeString(resolved, !absolute);
  if (absolute) return `/${resolved}`;
  return resolved.length > 0 ? resolved : ".";
}

/** `node:path`'s `posix.dirname`. */
export function dirname(path: string): string {
  if (path.length === 0) return ".";
  const hasRoot = isAbsolute(path);
  let end = -1;
  let matchedSlash = true;
  for (let i = path.length - 1; i >= 1; --i) {
    if (path.charCodeAt(i) === SLASH) {
      if (!matchedSlash) {
        end = i;
        break;
      }
    } else {
      matchedSlash = false;
    }
  }
  if (end === -1) return hasRoot ? "/" : ".";
  if (hasRoot && end === 1) return "//";
  return path.slice(0, end);
}
