import assert from "node:assert/strict";
import {
  coordinatorSession,
  GRANT_RE,
  grantOf,
  MCP_CALLER_STAMP,
  newGrant,
  parseCoordinatorSession,
} from "./caller_grant.ts";
import { copyConfig, stampConfig } from "../host/stamps.ts";

Deno.test("newGrant gives 32 lower-case hex characters, a new one each time", () => {
  const a = newGrant();
  assert.match(a, GRANT_RE);
  assert.notEqual(a, newGrant());
});

Deno.test("grantOf takes only a well-formed grant", () => {
  const g = newGrant();
  assert.equal(grantOf({ [MCP_CALLER_STAMP]: g }), g);
  for (const bad of ["", "x", g.toUpperCase(), g + "0", g.slice(1)]) {
    assert.equal(grantOf({ [MCP_CALLER_STAMP]: bad }), undefined, bad);
  }
  assert.equal(grantOf({}), undefined);
});

Deno.test("a coordinator session id round-trips, and nothing else parses as one", () => {
  const g = newGrant();
  const id = coordinatorSession("coord-1", g);
  assert.equal(id, `instance:coord-1:${g}`);
  assert.deepEqual(parseCoordinatorSession(id), { instance: "coord-1", grant: g });
  for (const bad of ["123-456", `instance:coord-1:${g}x`, `instance::${g}`, "instance:a:b"]) {
    assert.equal(parseCoordinatorSession(bad), undefined, bad);
  }
});

Deno.test("copyConfig unsets a source's grant, so a copy of a coordinator is none", () => {
  const source = stampConfig({ type: "instance", [MCP_CALLER_STAMP]: newGrant() });
  const copy = copyConfig(source, { type: "instance" });
  assert.equal(copy[`user.incus-spawn.${MCP_CALLER_STAMP}`], "");
});
