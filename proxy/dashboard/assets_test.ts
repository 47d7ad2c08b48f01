import { equal, ok } from "node:assert/strict";
import { ASSETS } from "./_assets.ts";

Deno.test("_assets.ts is what scripts/dashboard_assets.ts makes of the page and vendor/ now", async () => {
  const root = new URL("../..", import.meta.url).pathname;
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["run", `--allow-read=${root}`, `${root}scripts/dashboard_assets.ts`, "--check"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  equal(r.code, 0, new TextDecoder().decode(r.stderr));
});

Deno.test("the page loads only its own origin's files (no CDN, no inline script)", () => {
  const html = ASSETS["index.html"];
  const refs = [...html.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]!);
  ok(refs.length >= 4);
  for (const r of refs) ok(r.startsWith("/dashboard/"), r);
  ok(!/<script>(?!<)/.test(html), "no inline script (the CSP would block it)");
  for (const name of Object.keys(ASSETS)) {
    ok(!/https?:\/\/(?!github\.com\/leeoniya)/.test(ASSETS[name as keyof typeof ASSETS]), name);
  }
});
