import assert from "node:assert/strict";
import { IsbError } from "../../rpc/base.ts";
import { boolean, integer, list, mapping, optional, strictMapping, string } from "./shape.ts";

const refused = (f: () => unknown, msg: string) =>
  assert.throws(f, (e: unknown) => {
    assert.ok(e instanceof IsbError && e.code === "invalid", String(e));
    assert.equal(e.message, msg);
    return true;
  });

Deno.test("shape checks name the field and the expectation, never the value", () => {
  refused(() => mapping(["SECRET"], ["a"]), "a: expected a mapping, got a list");
  refused(() => mapping(null, []), "document: expected a mapping, got null");
  refused(
    () => strictMapping({ x: 1, secret: "SECRET" }, ["n"], ["x"]),
    "n.secret: unknown field (expected x)",
  );
  refused(() => string(3, ["s"]), "s: expected a string, got number");
  refused(() => string("", ["s"], { min: 1 }), "s: expected at least 1 characters");
  refused(
    () => string("SECRET", ["s"], { re: /^a/, what: "a name" }),
    "s: expected a name",
  );
  refused(() => integer(1.5, ["i"], 0, 9), "i: expected an integer from 0 to 9");
  refused(() => integer(10, ["i"], 0, 9), "i: expected an integer from 0 to 9");
  refused(() => boolean("true", ["b"]), "b: expected true or false, got string");
  refused(() => list({}, ["l"], string), "l: expected a list, got object");
  refused(() => list([], ["l"], string, 1), "l: expected at least 1 item");
  refused(
    () => list(["a", 2], ["l"], (x, p) => string(x, p)),
    "l.1: expected a string, got number",
  );
});

Deno.test("shape checks return what they were given when it fits", () => {
  assert.deepEqual(strictMapping({ x: 1 }, [], ["x", "y"]), { x: 1 });
  assert.equal(string("abc", [], { min: 1, re: /^a/ }), "abc");
  assert.equal(integer(9, [], 0, 9), 9);
  assert.equal(boolean(false, []), false);
  assert.deepEqual(list(["a"], [], (x, p) => string(x, p)), ["a"]);
  assert.equal(optional(undefined, (v) => string(v, [])), undefined);
  assert.throws(() => optional(null, (v) => string(v, ["o"])), IsbError);
});
