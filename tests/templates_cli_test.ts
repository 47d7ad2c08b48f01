/**
 * `isx init` and `isx build` as processes, where no Incus is needed: init's files and its
 * idempotence, and definitions refused before anything touches Incus.
 */

import assert from "node:assert/strict";
import { IsxHome } from "./templates_env.ts";

// No Incus here: builds are refused while validating, before the socket is used.
const NO_SOCKET = ["--socket", "/nonexistent/isx-test.socket"];

Deno.test("isx init creates the config, the 0600 credentials skeleton and the CA, and never overwrites", async () => {
  await using home = new IsxHome();
  const first = await home.isx(["init", "--yes", ...NO_SOCKET]);
  assert.equal(first.code, 1, "Incus does not answer at the fake socket");
  assert.match(
    first.stdout,
    /ERROR +incus: Incus does not answer at \/nonexistent\/isx-test\.socket/,
  );
  assert.match(first.stdout, /scripts\/host-setup\.sh/);
  const creds = `${home.configDir}/credentials.yaml`;
  assert.equal(Deno.statSync(creds).mode! & 0o777, 0o600);
  assert.match(
    Deno.readTextFileSync(`${home.configDir}/config.yaml`),
    /^mcp:\n {2}# The only templates agents may use/m,
  );
  assert.ok(Deno.statSync(`${home.stateDir}/ca/ca.crt`).isFile);
  assert.equal(Deno.statSync(`${home.stateDir}/ca/ca.key`).mode! & 0o777, 0o600);
  const ca = Deno.readTextFileSync(`${home.stateDir}/ca/ca.crt`);

  Deno.writeTextFileSync(`${home.configDir}/config.yaml`, "# mine\nmcp:\n  templates: [tpl-dev]\n");
  const second = await home.isx(["init", "--yes", ...NO_SOCKET]);
  assert.match(second.stdout, /kept +.*config\.yaml: exists; left as it is/);
  assert.equal(
    Deno.readTextFileSync(`${home.configDir}/config.yaml`),
    "# mine\nmcp:\n  templates: [tpl-dev]\n",
  );
  assert.equal(Deno.readTextFileSync(`${home.stateDir}/ca/ca.crt`), ca);
});

Deno.test("isx init warns about a credentials file other users can read", async () => {
  await using home = new IsxHome();
  Deno.mkdirSync(home.configDir, { recursive: true });
  Deno.writeTextFileSync(`${home.configDir}/credentials.yaml`, "{}\n", { mode: 0o644 });
  Deno.chmodSync(`${home.configDir}/credentials.yaml`, 0o644);
  const r = await home.isx(["init", "--yes", ...NO_SOCKET]);
  assert.match(r.stdout, /WARNING +.*credentials\.yaml: mode 0644 .*chmod 600/);
});

const REFUSALS: {
  name: string;
  files: Record<string, string>;
  tools?: Record<string, string>;
  want: RegExp;
}[] = [
  {
    name: "a cycle in its tools",
    files: { "t-cyc": "image: debian-base\ntools: [ta]\n" },
    tools: { ta: "requires: [tb]\n", tb: "requires: [ta]\n" },
    want: /tool file ".*\/tools\/tb\.yaml": field "requires\[0\]": cycle ta → tb → ta/,
  },
  {
    name: "an unknown field",
    files: { "t-unk": "image: debian-base\npackage: [git]\n" },
    want:
      /template file ".*\/templates\/t-unk\.yaml": unknown field "package" \(allowed: name, description, parent, image/,
  },
  {
    name: "a missing parent",
    files: { "t-orphan": "parent: tpl-nowhere\n" },
    want:
      /template file ".*\/templates\/t-orphan\.yaml": field "parent": no template named "tpl-nowhere"/,
  },
];

for (const c of REFUSALS) {
  Deno.test(`isx build refuses a template with ${c.name}, naming file and field`, async () => {
    await using home = new IsxHome();
    for (const [n, y] of Object.entries(c.files)) home.define("templates", n, y);
    for (const [n, y] of Object.entries(c.tools ?? {})) home.define("tools", n, y);
    const r = await home.isx(["build", ...NO_SOCKET, Object.keys(c.files)[0]!]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, c.want);
    assert.doesNotMatch(r.stderr, /socket/);
  });
}

Deno.test("isx build marks project-local definitions and reads them from .isx/", async () => {
  await using home = new IsxHome();
  const project = `${home.root}/project`;
  Deno.mkdirSync(`${project}/.isx/templates`, { recursive: true });
  Deno.writeTextFileSync(`${project}/.isx/templates/t-proj.yaml`, "parent: tpl-gone\n");
  const r = await home.isx(["build", ...NO_SOCKET, "t-proj"], { cwd: project });
  assert.match(r.stderr, /\.isx\/templates\/t-proj\.yaml": field "parent"/);
});

Deno.test("isx build --help and branch --help describe their options", async () => {
  await using home = new IsxHome();
  const b = await home.isx(["build", "--help"]);
  assert.match(b.stdout, /--out-of-sync/);
  const br = await home.isx(["branch", "--help"]);
  assert.match(br.stdout, /proxy-only/);
});
