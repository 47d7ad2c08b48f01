import { deepStrictEqual as assertEquals, throws } from "node:assert/strict";
import { parseMcpConfig } from "./config.ts";
import { RefusalError } from "../errors.ts";

const SRC = "/x/mcp.yaml";
const T = ["tpl-minimal", "tpl-agents"];

Deno.test("warm-pool: default none; a mapping of approved templates to counts", () => {
  assertEquals(parseMcpConfig(SRC, { templates: T }).warmPool, {});
  assertEquals(
    parseMcpConfig(SRC, { templates: T, "warm-pool": { "tpl-minimal": 2, "tpl-agents": 0 } })
      .warmPool,
    { "tpl-minimal": 2 },
  );
  assertEquals(parseMcpConfig(SRC, { templates: T, "warm-pool": null }).warmPool, {});
});

Deno.test("warm-pool: every bad value is refused with the key and the file named", () => {
  const bad = (pool: unknown, re: RegExp) =>
    throws(() => parseMcpConfig(SRC, { templates: T, "warm-pool": pool }), (e: unknown) => {
      if (!(e instanceof RefusalError) || e.code !== "refused") return false;
      return re.test(e.message) && e.message.includes(SRC);
    });
  bad(["tpl-minimal"], /"warm-pool" must be a mapping/);
  bad("tpl-minimal: 2", /"warm-pool" must be a mapping/);
  bad({ "tpl-other": 1 }, /template "tpl-other" is not in "templates"/);
  bad({ "tpl-minimal": -1 }, /"tpl-minimal" must be a whole number from 0 to 16/);
  bad({ "tpl-minimal": 1.5 }, /whole number/);
  bad({ "tpl-minimal": 17 }, /whole number/);
  bad({ "tpl-minimal": "2" }, /whole number/);
});
