import assert from "node:assert/strict";
import { holdRefusal, type Standing } from "./holding.ts";

const elsewhere: Standing = {
  kind: "held_elsewhere",
  session: "9-1",
  client: "other",
  pid: "9",
  cwd: "/w",
};

Deno.test("holdRefusal: held here and mine, or kept, may act", () => {
  assert.equal(holdRefusal("a", { kind: "mine" }, true), undefined);
  assert.equal(holdRefusal("a", { kind: "kept" }, true), undefined);
  // not in the registry but stamped for this session (or kept): still this session's
  assert.equal(holdRefusal("a", { kind: "mine" }, false), undefined);
  assert.equal(holdRefusal("a", { kind: "kept" }, false), undefined);
});

Deno.test("holdRefusal: held here but stamped for another is lost (adopted)", () => {
  for (const st of [elsewhere, { kind: "orphan", session: "9-1" } as Standing]) {
    const r = holdRefusal("a", st, true)!;
    assert.equal(r.lost, true);
    assert.equal(r.error.code, "not_held");
    assert.match(r.error.message, /adopted by another session/);
  }
});

Deno.test("holdRefusal: not held here refuses by standing, never lost", () => {
  const cases: [Standing, string, RegExp][] = [
    [elsewhere, "not_held", /pid 9, client other, in \/w.*force/],
    [{ kind: "orphan", session: "9-1" }, "not_found", /orphan: adopt_instance/],
    [{ kind: "not_mcp" }, "not_found", /holds no instance "a"/],
    [{ kind: "other_user" }, "not_found", /holds no instance "a"/],
  ];
  for (const [st, code, msg] of cases) {
    const r = holdRefusal("a", st, false)!;
    assert.equal(r.lost, false, st.kind);
    assert.equal(r.error.code, code, st.kind);
    assert.match(r.error.message, msg);
  }
});
