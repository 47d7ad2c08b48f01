import { deepStrictEqual as assertEquals, ok } from "node:assert/strict";
import { applyHeaderOps, forwardableHeaders, responseHeaders, scrubText } from "./rewrite.ts";
import { Scrubber } from "./scrub.ts";
import { Secret } from "../config/secret.ts";

Deno.test("scrubText masks every occurrence", () => {
  const s = new Secret("gho_real");
  assertEquals(scrubText("a gho_real b gho_real", [s]), "a ******** b ********");
});

Deno.test("forwardableHeaders drops hop-by-hop, Connection-named and isx headers", () => {
  const h = new Headers({
    connection: "keep-alive, x-drop",
    "x-drop": "1",
    "keep-alive": "timeout=5",
    "x-isx-instance-secret": "abc",
    "x-keep": "2",
    "transfer-encoding": "chunked",
  });
  assertEquals([...forwardableHeaders(h)], [["x-keep", "2"]]);
});

Deno.test("applyHeaderOps sets, deletes, swaps a Basic password and substitutes placeholders", () => {
  const h = new Headers({
    "x-api-key": "sk-ant-placeholder",
    authorization: `Basic ${btoa("alice:gho_placeholder")}`,
    "x-custom": "token=PLACEHOLDER_1;",
  });
  applyHeaderOps(h, [
    { op: "delete", name: "x-api-key" },
    { op: "basic", value: new Secret("gho_real"), user: "x-access-token", keepGuestUser: true },
    { op: "substitute", placeholder: "PLACEHOLDER_1", value: new Secret("v4lue") },
    { op: "set", name: "x-other", value: new Secret("tok"), prefix: "Bearer " },
  ]);
  assertEquals(h.get("x-api-key"), null);
  assertEquals(atob(h.get("authorization")!.slice(6)), "alice:gho_real");
  assertEquals(h.get("x-custom"), "token=v4lue;");
  assertEquals(h.get("x-other"), "Bearer tok");
});

Deno.test("applyHeaderOps uses the default Basic user when the guest sent none", () => {
  const h = new Headers();
  applyHeaderOps(h, [{
    op: "basic",
    value: new Secret("t"),
    user: "x-access-token",
    keepGuestUser: true,
  }]);
  assertEquals(atob(h.get("authorization")!.slice(6)), "x-access-token:t");
});

Deno.test("responseHeaders scrubs real values out of header values", () => {
  const s = new Secret("sk-REAL");
  const h = responseHeaders(new Headers({ "x-echo": "key sk-REAL", connection: "close" }), [s]);
  assertEquals([...h], [["x-echo", "key *******"]]);
});

Deno.test("Secret never prints its value", () => {
  const s = new Secret("sk-ant-very-real");
  const shown = [
    Deno.inspect(s),
    JSON.stringify({ s }),
    String(s),
    `${s}`,
    Deno.inspect({ nested: [s] }),
  ];
  for (const text of shown) ok(!text.includes("very-real"), text);
  ok(Deno.inspect(Scrubber.of([s])).indexOf("very-real") < 0);
});
