/**
 * Shared fixture of the template unit tests: a call that must be refused as `invalid`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { IsbError } from "../../rpc/base.ts";

/** Runs `fn`, asserts it throws `invalid`, and returns the message. */
export function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof IsbError, String(e));
    assert.equal(e.code, "invalid");
    return e.message;
  }
  throw new assert.AssertionError({ message: "expected a refusal" });
}
