import assert from "node:assert/strict";
import { MCP_ENDPOINT_URL, OPENCODE_EDIT, REGISTRATION_SCRIPT } from "./mcp_client_reg.ts";

/**
 * The registration script under real bash and real Node, with a `claude` stand-in that
 * records its arguments and an `opencode` one that only has to exist.
 */
class Guest {
  readonly dir = Deno.makeTempDirSync({ prefix: "isx-mcpreg-" });
  readonly home = `${this.dir}/home`;
  readonly bin = `${this.dir}/bin`;
  readonly secret = `${this.dir}/instance-secret`;

  constructor(agents: string[]) {
    Deno.mkdirSync(this.home, { recursive: true });
    Deno.mkdirSync(this.bin);
    Deno.writeTextFileSync(this.secret, "s3cret-of-this-boot");
    for (const a of agents) {
      Deno.writeTextFileSync(
        `${this.bin}/${a}`,
        `#!/bin/sh\nprintf '%s\\n' "$*" >> "${this.dir}/${a}.calls"\n`,
      );
      Deno.chmodSync(`${this.bin}/${a}`, 0o755);
    }
    Deno.symlinkSync("/usr/bin/node", `${this.bin}/node`);
  }

  async run(mode: "add" | "remove"): Promise<string> {
    const out = await new Deno.Command("/usr/bin/bash", {
      args: ["-c", REGISTRATION_SCRIPT, "isx-mcp-client", mode],
      clearEnv: true,
      env: {
        HOME: this.home,
        PATH: `${this.bin}:/usr/bin:/bin`,
        ISX_MCP_URL: MCP_ENDPOINT_URL,
        ISX_SECRET_PATH: this.secret,
        ISX_CLAUDE_JSON: JSON.stringify({ type: "http", url: MCP_ENDPOINT_URL }),
        ISX_OPENCODE_EDIT: OPENCODE_EDIT,
      },
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return new TextDecoder().decode(out.stdout);
  }

  calls(agent: string): string {
    try {
      return Deno.readTextFileSync(`${this.dir}/${agent}.calls`);
    } catch {
      return "";
    }
  }

  get opencodeJson(): string {
    return `${this.home}/.config/opencode/opencode.json`;
  }

  get marker(): string {
    return `${this.home}/.config/isx/mcp-client`;
  }

  [Symbol.dispose](): void {
    Deno.removeSync(this.dir, { recursive: true });
  }
}

const exists = (p: string) => {
  try {
    Deno.lstatSync(p);
    return true;
  } catch {
    return false;
  }
};

Deno.test("registration: a coordinator's Claude Code and opencode learn the endpoint, the secret by its path", async () => {
  using g = new Guest(["claude", "opencode"]);
  Deno.mkdirSync(`${g.home}/.config/opencode`, { recursive: true });
  Deno.writeTextFileSync(
    g.opencodeJson,
    JSON.stringify({ model: "anthropic/x", mcp: { other: {} } }),
  );
  const out = await g.run("add");
  assert.match(out, /^claude=registered$/m);
  assert.match(out, /^opencode=registered$/m);
  const calls = g.calls("claude").trim().split("\n");
  assert.equal(calls[0], "mcp remove --scope user isx");
  assert.match(calls[1]!, /^mcp add-json --scope user isx \{"type":"http"/);
  // Claude Code's headersHelper reads the secret of the boot when it connects
  const text = Deno.readTextFileSync(`${g.home}/.config/isx/mcp-headers`);
  assert.match(text, /cat \/run\/isx\/instance-secret/);
  assert.ok(!text.includes("s3cret"), "the helper names the path, never the value");
  assert.equal(Deno.statSync(`${g.home}/.config/isx/mcp-headers`).mode! & 0o777, 0o700);
  const cfg = JSON.parse(Deno.readTextFileSync(g.opencodeJson));
  assert.equal(cfg.model, "anthropic/x");
  assert.deepEqual(cfg.mcp.other, {});
  assert.deepEqual(cfg.mcp.isx, {
    type: "remote",
    url: MCP_ENDPOINT_URL,
    enabled: true,
    oauth: false,
    headers: { "X-Isx-Instance-Secret": `{file:${g.secret}}` },
  });
  assert.ok(!Deno.readTextFileSync(g.opencodeJson).includes("s3cret"));
  assert.ok(exists(g.marker));
});

Deno.test("registration: an opencode.json that is not JSON is left alone; a symlinked one keeps its link", async () => {
  using g = new Guest(["opencode"]);
  Deno.mkdirSync(`${g.home}/.config/opencode`, { recursive: true });
  const commented = '// mine\n{ "model": "x" }\n';
  Deno.writeTextFileSync(g.opencodeJson, commented);
  assert.match(await g.run("add"), /^opencode=left: not JSON$/m);
  assert.equal(Deno.readTextFileSync(g.opencodeJson), commented);
  // fixed by the person: the next start registers
  Deno.removeSync(g.opencodeJson);
  Deno.writeTextFileSync(`${g.dir}/real.json`, '{"model":"y"}');
  Deno.symlinkSync(`${g.dir}/real.json`, g.opencodeJson);
  assert.match(await g.run("add"), /^opencode=registered$/m);
  assert.ok(Deno.lstatSync(g.opencodeJson).isSymlink, "the link stays");
  assert.equal(JSON.parse(Deno.readTextFileSync(`${g.dir}/real.json`)).mcp.isx.type, "remote");
});

Deno.test("registration: a copy's first start removes every registration and the marker; later starts do nothing", async () => {
  using g = new Guest(["claude", "opencode"]);
  Deno.mkdirSync(`${g.home}/.config/opencode`, { recursive: true });
  Deno.writeTextFileSync(g.opencodeJson, '{"model":"x"}');
  await g.run("add");
  const out = await g.run("remove");
  assert.match(out, /^claude=removed$/m);
  assert.match(out, /^opencode=removed$/m);
  assert.deepEqual(JSON.parse(Deno.readTextFileSync(g.opencodeJson)), {
    model: "x",
    $schema: "https://opencode.ai/config.json",
  });
  assert.ok(!exists(g.marker));
  assert.ok(!exists(`${g.home}/.config/isx/mcp-headers`));
  assert.match(g.calls("claude"), /mcp remove --scope user isx\n$/);
  const before = g.calls("claude");
  assert.equal(await g.run("remove"), "", "no marker: nothing runs");
  assert.equal(g.calls("claude"), before);
});

Deno.test("registration: a copy whose opencode.json cannot be edited keeps its marker to try again", async () => {
  using g = new Guest(["opencode"]);
  await g.run("add");
  Deno.writeTextFileSync(g.opencodeJson, "not json");
  assert.match(await g.run("remove"), /^opencode=left: not JSON$/m);
  assert.ok(exists(g.marker));
});
