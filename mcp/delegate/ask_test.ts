import assert from "node:assert/strict";
import { askScript } from "./ask.ts";

Deno.test("askScript is valid bash holding only host-made values, the ask mode and a cleanup", async () => {
  const s = askScript("0123456789abcdef", "pi");
  assert.match(s, /'--dir' '\/home\/agentuser\/\.isx-mcp\/ask\/0123456789abcdef'/);
  assert.match(s, /^export ISX_MCP_TASK=ask-0123456789abcdef$/m, "not a person's agent");
  assert.match(s, /'--allow-run=pi'/);
  assert.match(s, /'--mode' 'ask'/);
  assert.match(s, /trap 'rm -rf -- "\$d"' EXIT/, "the scratch directory goes in every case");
  assert.match(s, /cat >"\$d\/prompt-1\.md"/, "question and data come on stdin");
  assert.throws(() => askScript("../../etc", "pi"), /invalid ask id/);
  const p = new Deno.Command("bash", { args: ["-n"], stdin: "piped" }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(s));
  await w.close();
  assert.equal((await p.status).code, 0);
});
