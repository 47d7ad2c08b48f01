/**
 * The compile input is sound: `deno compile` (with DENORT_BIN pointing at the Deno binary,
 * since Deno's runtime download host is unreachable here) succeeds, embeds the guest
 * runners, and records exactly the permission flags of the table (cli/permissions.ts).
 */
import assert from "node:assert/strict";
import { compileFlags } from "../scripts/compile.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/** Extracts the JSON metadata object deno compile embeds, by brace matching. */
function embeddedMetadata(bytes: Uint8Array): Record<string, unknown> {
  const text = new TextDecoder("latin1").decode(bytes);
  const start = text.indexOf('{"argv":[');
  assert.ok(start >= 0, "no compile metadata in the binary");
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return JSON.parse(text.slice(start, i + 1));
  }
  throw new TypeError("unterminated compile metadata");
}

function flagsFromMetadata(perms: Record<string, unknown>, prompt: unknown): string[] {
  const out = prompt === false ? ["--no-prompt"] : [];
  for (const name of ["read", "write", "net", "env", "run", "sys"]) {
    const v = perms[`allow_${name}`];
    if (v === null || v === undefined) continue;
    const list = v as string[];
    out.push(list.length === 0 ? `--allow-${name}` : `--allow-${name}=${list.join(",")}`);
  }
  const deny = perms.deny_read as string[] | null | undefined;
  if (deny) out.push(`--deny-read=${deny.join(",")}`);
  return out;
}

Deno.test("deno task compile records the table's union for isx and rpc's flags for isb", async () => {
  const out = await Deno.makeTempDir({ prefix: "isx-compile-" });
  try {
    const res = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-prompt", `${ROOT}scripts/compile.ts`, "--out", out],
      cwd: ROOT,
      env: { DENORT_BIN: Deno.execPath(), NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(res.success, new TextDecoder().decode(res.stderr));
    const bin = await Deno.readFile(`${out}/isx`);
    const meta = embeddedMetadata(bin);
    const perms = meta.permissions as Record<string, unknown>;
    assert.deepEqual(flagsFromMetadata(perms, perms.prompt), compileFlags());
    assert.equal(perms.deny_read, null);
    // isb runs only rpc: its binary records rpc's denials of the user's keys
    const isb = embeddedMetadata(await Deno.readFile(`${out}/isb`));
    const isbPerms = isb.permissions as Record<string, unknown>;
    assert.deepEqual(flagsFromMetadata(isbPerms, isbPerms.prompt), compileFlags(undefined, "isb"));
    const home = Deno.env.get("HOME") ?? "/root";
    assert.ok(
      (isbPerms.deny_read as string[]).includes(`${home}/.ssh`),
      String(isbPerms.deny_read),
    );
    // The guest runners are embedded.
    assert.ok(new TextDecoder("latin1").decode(bin).includes("task_runner.ts"));
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});
