import assert from "node:assert/strict";
import { askScript } from "./ask.ts";

Deno.test("askScript is valid bash holding only host-made values, the ask mode and a cleanup", async () => {
  const dir = "/home/agentuser/.isx-mcp/ask/0123456789abcdef";
  const s = askScript(dir, "pi");
  assert.match(s, /'--allow-run=pi'/);
  assert.match(s, /'--mode' 'ask'/);
  assert.match(s, /trap 'rm -rf -- "\$d"' EXIT/, "the scratch directory goes in every case");
  assert.match(s, /cat >"\$d\/prompt-1\.md"/, "question and data come on stdin");
  assert.throws(() => askScript("/home/agentuser/x y", "pi"), /invalid task directory/);
  const p = new Deno.Command("bash", { args: ["-n"], stdin: "piped" }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(s));
  await w.close();
  assert.equal((await p.status).code, 0);
});
