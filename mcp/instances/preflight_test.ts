import { deepStrictEqual as assertEquals, equal, throws } from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import type { HealthRead, ProxyHealth } from "../host/proxy_check.ts";
import { loadDefinitions } from "../templates/load.ts";
import { credentialNeeds, judgePreflight, type PreflightReason } from "./preflight.ts";

const OWN = { version: "0.1.0", gitSha: "a".repeat(40), programDir: "/opt/isx" };
const H: ProxyHealth = {
  version: "0.1.0",
  gitSha: "a".repeat(40),
  pid: 42,
  caFingerprint: "AB:CD",
  configDrifted: false,
  missingCredentials: ["openai", "github"],
  programDir: "/opt/isx",
};
const OPTS = {
  healthUrl: "http://127.0.0.1:18080",
  own: OWN,
  action: 'branch "x" from "tpl-agents"',
  needs: [{ tool: "claude", namespace: "anthropic" }],
};

function refusedWith(read: HealthRead, reason: PreflightReason, fix: string, opts = OPTS) {
  throws(() => judgePreflight(read, opts), (e: unknown) => {
    equal(e instanceof IsbError && e.code, "not_ready");
    const err = e as IsbError;
    equal(err.data?.preflight, reason);
    equal(err.message.includes(fix), true, err.message);
    equal(err.message.includes("--no-preflight"), true, err.message);
    return true;
  });
}

Deno.test("judgePreflight refuses each problem with its reason and the fixing command", () => {
  refusedWith({ kind: "down" }, "proxy_not_running", "isx proxy start");
  refusedWith({ kind: "foreign", detail: "HTTP 404" }, "proxy_unknown", "isx proxy status");
  refusedWith(
    {
      kind: "ok",
      health: { ...H, configDrifted: true, configDriftedFiles: ["/c/credentials.yaml"] },
    },
    "proxy_config_drift",
    "isx proxy restart",
  );
  refusedWith(
    { kind: "ok", health: { ...H, gitSha: "b".repeat(40) } },
    "proxy_version_drift",
    "isx proxy restart",
  );
  refusedWith({ kind: "ok", health: H }, "missing_credential", '"openai:"', {
    ...OPTS,
    needs: [{ tool: "codex", namespace: "openai" }],
  });
});

Deno.test("judgePreflight passes a healthy proxy and only warns of futile drift", () => {
  assertEquals(judgePreflight({ kind: "ok", health: H }, OPTS).warnings, []);
  const futile = { ...H, version: "0.0.1", programDir: "/elsewhere" };
  equal(judgePreflight({ kind: "ok", health: futile }, OPTS).warnings.length, 1);
});

Deno.test("credentialNeeds maps the agents of tpl-agents to their namespaces", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const defs = loadDefinitions({ configDir: dir, searchPaths: [], cwd: dir });
    assertEquals(
      credentialNeeds(defs, "tpl-agents").map((n) => `${n.tool}:${n.namespace}`).sort(),
      ["claude:anthropic", "codex:openai", "pi:anthropic"],
    );
    assertEquals(credentialNeeds(defs, "tpl-minimal"), []);
    assertEquals(credentialNeeds(defs, "not-defined"), []);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("judgePreflight lets a live-reloading proxy's credentials change pass, still refusing version drift", () => {
  const live = { ...H, credentials: { reloads: 1, error: null, sources: [] } };
  const changed = { ...live, configDrifted: true, configDriftedFiles: ["/c/credentials.yaml"] };
  assertEquals(judgePreflight({ kind: "ok", health: changed }, OPTS).warnings, []);
  const broken = { ...live, credentials: { ...live.credentials, error: "mode 0644" } };
  const w = judgePreflight({ kind: "ok", health: broken }, OPTS).warnings;
  equal(w.length, 1);
  equal(w[0]!.includes("previous credentials"), true, w[0]);
  refusedWith(
    { kind: "ok", health: { ...changed, configDriftedFiles: ["/c/config.yaml"] } },
    "proxy_config_drift",
    "isx proxy restart",
  );
  refusedWith(
    { kind: "ok", health: { ...live, gitSha: "b".repeat(40) } },
    "proxy_version_drift",
    "isx proxy restart",
  );
});
