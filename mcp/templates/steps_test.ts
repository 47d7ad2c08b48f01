import assert from "node:assert/strict";
import { builtinDefinitions, parseYamlText } from "./load.ts";
import { resolveChain } from "./resolve.ts";
import { parseTemplate } from "./schema.ts";
import {
  environmentText,
  GUEST_CA_PATH,
  guestEnv,
  PLACEHOLDERS,
  planBuild,
  profileText,
  type Step,
  workdirOf,
} from "./steps.ts";

const FACTS = {
  caPem: "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n",
  gateway: "10.77.0.1",
  domains: ["api.anthropic.com", "*.example.org"],
};

function labels(steps: Step[]): string[] {
  return steps.map((s) => s.label);
}

Deno.test("guestEnv gives proxy settings, the CA and placeholders only", () => {
  const env = guestEnv(FACTS);
  assert.equal(env.HTTPS_PROXY, "http://10.77.0.1:3128");
  assert.equal(env.http_proxy, "http://10.77.0.1:3128");
  assert.equal(env.NODE_EXTRA_CA_CERTS, GUEST_CA_PATH);
  assert.equal(env.NO_PROXY, "localhost,127.0.0.1,::1,api.anthropic.com,.example.org");
  assert.equal(env.ANTHROPIC_API_KEY, "sk-ant-placeholder");
  assert.equal(env.OPENAI_API_KEY, "sk-placeholder");
  assert.equal(env.GH_TOKEN, "gho_placeholder");
  assert.equal(env.GITHUB_TOKEN, "gho_placeholder");
  assert.equal(guestEnv({ ...FACTS, proxyPort: 8888 }).HTTPS_PROXY, "http://10.77.0.1:8888");
});

Deno.test("profileText single-quotes every value", () => {
  assert.equal(
    profileText({ A: "x y", B: "it's $HOME" }).split("\n").slice(1, 3).join("\n"),
    "export A='x y'\nexport B='it'\\''s $HOME'",
  );
});

Deno.test("environmentText leaves out values pam_env cannot carry", () => {
  assert.equal(environmentText({ A: "plain", B: 'q"uote', C: "$x" }), 'A="plain"\n');
});

Deno.test("planBuild of a root template creates agentuser and trusts the CA", () => {
  const steps = planBuild(resolveChain(builtinDefinitions(), "tpl-minimal"), FACTS);
  const l = labels(steps);
  assert.match(l[0]!, /^apt packages: sudo ca-certificates curl/);
  assert.equal(l[1], "create agentuser");
  assert.ok(l.includes("proxy CA"));
  assert.ok(l.includes("isx: deliver isx"));
  assert.equal(l.at(-1), "finish");
  const ca = steps.find((s) => s.label === "proxy CA");
  assert.ok(ca?.kind === "file" && ca.file.path === GUEST_CA_PATH);
  const profile = steps.find((s) => s.kind === "file" && s.file.path === "/etc/profile.d/isx.sh");
  const text = profile?.kind === "file" ? new TextDecoder().decode(profile.file.data) : "";
  for (const [k, v] of Object.entries(PLACEHOLDERS)) assert.ok(text.includes(`export ${k}='${v}'`));
});

Deno.test("planBuild of tpl-agents fetches each agent from npm and passes parameters as env", () => {
  const d = builtinDefinitions();
  const file = "/u/templates/t.yaml";
  const def = parseTemplate(
    file,
    parseYamlText(file, "parent: tpl-agents\ntools: [{name: claude, model: opus}]"),
    "t",
  );
  d.templates.set("t", { def, file, layer: "user", trusted: true, files: [] });
  const agents = planBuild(resolveChain(d, "tpl-agents"), FACTS);
  const npm = agents.flatMap((s) => s.kind === "npm" ? [s.pkg] : []);
  assert.deepEqual(npm, [
    "@anthropic-ai/claude-code",
    "@openai/codex",
    "@mariozechner/pi-coding-agent",
    "opencode-ai",
  ]);
  assert.ok(!agents.some((s) => s.kind === "apt"), "tpl-agents adds no apt packages");
  // the claude tool is already in the parent chain: t installs nothing new but re-applies the contract
  const t = planBuild(resolveChain(d, "t"), FACTS);
  assert.ok(!t.some((s) => s.kind === "npm"));
});

Deno.test("planBuild keeps parameter values out of script text", () => {
  const d = builtinDefinitions();
  const file = "/u/templates/t.yaml";
  const def = parseTemplate(
    file,
    parseYamlText(file, "parent: tpl-dev\ntools: [{name: claude, model: my-model-1}]"),
    "t",
  );
  d.templates.set("t", { def, file, layer: "user", trusted: true, files: [] });
  const steps = planBuild(resolveChain(d, "t"), FACTS);
  const s = steps.find((x) => x.kind === "script" && x.label.startsWith("claude: run_as_user"));
  assert.ok(s?.kind === "script");
  assert.equal(s.env.ISX_PARAM_MODEL, "my-model-1");
  assert.ok(!s.script.includes("my-model-1"));
});

Deno.test("workdirOf prefers the nearest workdir, then the first repo, then home", () => {
  const d = builtinDefinitions();
  const add = (name: string, text: string) => {
    const file = `/u/templates/${name}.yaml`;
    d.templates.set(name, {
      def: parseTemplate(file, parseYamlText(file, text), name),
      file,
      layer: "user",
      trusted: true,
      files: [],
    });
  };
  add("r", "image: debian-base\nrepos: [{url: u, path: /home/agentuser/r}]");
  add("w", "parent: r\nworkdir: /srv/w");
  add("x", "parent: w");
  assert.equal(workdirOf(resolveChain(d, "r")), "/home/agentuser/r");
  assert.equal(workdirOf(resolveChain(d, "x")), "/srv/w");
  assert.equal(workdirOf(resolveChain(d, "tpl-minimal")), "/home/agentuser");
});
