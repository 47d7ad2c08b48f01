/**
 * Exec: running a command in a sandbox (isb-rpc.md §11) over the Incus exec websockets,
 * with stdin flow control, output windows, buffering limits, signals and resize, and the
 * registry that addresses a running exec by id.
 *
 * - `exec.ts`: one exec from request to outcome; `_stdin.ts`: the windowed stdin pump
 * - `registry.ts`: running execs by key, for `exec.signal|resize|stdin`
 * - `user.ts`: the exec user (uid, gid, home, shell) from the guest's passwd and group
 *
 * @module
 */

export * from "./exec.ts";
export * from "./user.ts";
export { type ExecControl } from "./registry.ts";
