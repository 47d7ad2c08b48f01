/**
 * Shared fixtures of the resolve/plan unit tests: the host facts of a plain btrfs host for
 * user `dev` (1000:1000), and the check that a call throws `invalid` saying something.
 *
 * @module
 */

import assert from "node:assert/strict";
import { IsbError } from "../../rpc/errors.ts";
import type { HostFacts } from "../../rpc/sandbox/resolve/host.ts";

/** Host facts of a plain btrfs host for user `dev`; `over` replaces fields. */
export function testHost(over: Partial<HostFacts> = {}): HostFacts {
  return {
    pools: [{ name: "default", driver: "btrfs" }],
    apiExtensions: [],
    serverDriver: "lxc",
    home: "/home/dev",
    uid: 1000,
    gid: 1000,
    subuid: undefined,
    subgid: undefined,
    hostPathMap: undefined,
    realPath: () => undefined,
    ...over,
  };
}

/** Asserts that `f` throws `invalid` with `text` in its message. */
export function invalidWith(f: () => unknown, text: string): void {
  assert.throws(f, (e: unknown) => {
    assert.ok(e instanceof IsbError, String(e));
    assert.equal(e.code, "invalid");
    assert.ok(e.message.includes(text), `${e.message} lacks ${text}`);
    return true;
  });
}
