import assert from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import { CONFIG_TEMPLATE, parseHostConfig, proxyHealthUrl } from "./config.ts";

const WHERE = { configDir: "/home/me/.config/isx", home: "/home/me" };

Deno.test("parseHostConfig reads the written template with its defaults", () => {
  assert.deepEqual(parseHostConfig("c.yaml", CONFIG_TEMPLATE, WHERE), {
    searchPaths: [],
    bridge: "incusbr0",
    domains: [],
    healthPort: 18080,
  });
});

Deno.test("parseHostConfig takes a comments-only file as the defaults and reads the ops port", () => {
  assert.equal(parseHostConfig("c.yaml", "# nothing yet\n", WHERE).bridge, "incusbr0");
  const c = parseHostConfig("c.yaml", "proxy:\n  ports: { health: 19090 }\n", WHERE);
  assert.equal(proxyHealthUrl(c), "http://127.0.0.1:19090");
});

Deno.test("parseHostConfig expands search paths and ignores other blocks", () => {
  const text =
    "templates:\n  searchPaths: [~/defs, shared, /abs]\nmcp:\n  templates: [x]\nproxy:\n  bridge: br1\n";
  assert.deepEqual(parseHostConfig("c.yaml", text, WHERE).searchPaths, [
    "/home/me/defs",
    "/home/me/.config/isx/shared",
    "/abs",
  ]);
});

Deno.test("parseHostConfig refuses a search path list of the wrong type", () => {
  assert.throws(
    () => parseHostConfig("c.yaml", "templates:\n  searchPaths: 3\n", WHERE),
    (e) =>
      e instanceof IsbError &&
      /field "templates.searchPaths": expected a list of strings/.test(e.message),
  );
});
