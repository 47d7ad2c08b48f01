import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { pushSecretFiles, unitText } from "./extras.ts";
import type { IncusClient } from "../../incus/mod.ts";
import type { SandboxSpec } from "../spec/spec.ts";
import {
  checkUnitValues,
  secretPath,
  secretTargetProblem,
  unitUserProblem,
  workingDirProblem,
} from "./_unit_values.ts";

const TARGETS: [string, string | undefined][] = [
  ["db_password", undefined],
  ["app/key.pem", undefined],
  ["/run/secrets/db_password", undefined],
  ["/run/secrets/app/key", undefined],
  ["../../etc/shadow", "has a . or .. segment"],
  ["a/../../x", "has a . or .. segment"],
  ["/run/secrets/../../etc/cron.d/x", "has a . or .. segment"],
  ["./x", "has a . or .. segment"],
  ["/etc/cron.d/evil", "is absolute outside /run/secrets"],
  ["/run/secretsX/y", "is absolute outside /run/secrets"],
  ["/run/secrets", "is absolute outside /run/secrets"],
  ["/run/secrets/", "has an empty path segment"],
  ["a//b", "has an empty path segment"],
  ["", "has an empty path segment"],
  ["key\nx", "has a control character"],
  ["key\u0000", "has a control character"],
  ["key\u2028", "has a control character"],
];

Deno.test("secretTargetProblem accepts names under /run/secrets and refuses the rest", () => {
  for (const [t, want] of TARGETS) assert.equal(secretTargetProblem(t), want, JSON.stringify(t));
  assert.equal(secretPath("db"), "/run/secrets/db");
  assert.equal(secretPath("/run/secrets/db"), "/run/secrets/db");
});

const USERS: [string, boolean][] = [
  ["dev", true],
  ["1000", true],
  ["1000:1000", true],
  ["dev:staff", true],
  ["svc-app_1", true],
  ["machine$", true],
  ["dev\nExecStartPre=/bin/sh -c evil", false],
  ["dev\r", false],
  ["../root", false],
  ["a..b", false],
  ["dev:staff:x", false],
  ["", false],
  [":staff", false],
  ["dev user", false],
  ["%h", false],
  ["-dev", false],
];

Deno.test("unitUserProblem takes NAME, UID, UID:GID, NAME:GROUP only", () => {
  for (const [u, ok] of USERS) {
    assert.equal(unitUserProblem(u) === undefined, ok, JSON.stringify(u));
  }
});

const DIRS: [string, string | undefined][] = [
  ["/srv/app", undefined],
  ["/home/dev/my project", undefined],
  ["/srv/100%", undefined],
  ["srv/app", "is not an absolute path"],
  ["~", "is not an absolute path"],
  ["/srv/../etc", "has a . or .. segment"],
  ["/srv/./app", "has a . or .. segment"],
  ["/srv\nExecStartPre=/bin/evil", "has a control character"],
  ["/srv\u007f", "has a control character"],
];

Deno.test("workingDirProblem takes absolute paths without . or .. or control characters", () => {
  for (const [d, want] of DIRS) assert.equal(workingDirProblem(d), want, JSON.stringify(d));
});

const REFUSED: { spec: Partial<SandboxSpec>; field: string }[] = [
  { spec: { secrets: [{ source: "k", target: "../../etc/shadow" }] }, field: "secrets[0].target" },
  { spec: { secrets: [{ source: "k" }, { source: "../x" }] }, field: "secrets[1].target" },
  { spec: { user: "dev\nExecStartPre=/bin/evil" }, field: "user" },
  { spec: { working_dir: "/srv\nExecStartPre=/bin/evil" }, field: "working_dir" },
  { spec: { working_dir: "/srv/../etc" }, field: "working_dir" },
];

Deno.test("checkUnitValues and unitText refuse each bad value with invalid naming the field", () => {
  for (const c of REFUSED) {
    const spec = { image: "x", command: ["app"], ...c.spec } as SandboxSpec;
    for (const f of [() => checkUnitValues("web", spec), () => unitText("web", spec)]) {
      assert.throws(f, (e: unknown) => {
        assert.ok(e instanceof IsbError && e.code === "invalid", String(e));
        assert.ok(e.message.startsWith(`service "web": ${c.field} `), e.message);
        return true;
      });
    }
  }
});

Deno.test("unitText escapes % in WorkingDirectory (a systemd specifier)", () => {
  const text = unitText("web", {
    image: "x",
    command: ["app"],
    user: "1000:1000",
    working_dir: "/srv/100%h",
  } as SandboxSpec);
  assert.ok(text.includes("\nWorkingDirectory=/srv/100%%h\n"), text);
  assert.ok(text.includes("\nUser=1000\nGroup=1000\n"), text);
});

Deno.test("pushSecretFiles refuses a climbing target before it touches the instance", async () => {
  const calls: string[] = [];
  const incus = new Proxy({}, {
    get: (_, k) => (...a: unknown[]) => {
      calls.push(`${String(k)} ${JSON.stringify(a).slice(0, 80)}`);
      return Promise.resolve({ kind: "sync", metadata: {} });
    },
  }) as IncusClient;
  const spec = {
    image: "x",
    secrets: [{ source: "ok" }, { source: "k", target: "../../etc/cron.d/x" }],
  } as SandboxSpec;
  await assert.rejects(pushSecretFiles(incus, "web", spec, { ok: "1", k: "2" }), (e: unknown) => {
    assert.ok(e instanceof IsbError && e.code === "invalid", String(e));
    assert.equal(e.message, 'web: secrets[1].target "../../etc/cron.d/x" has a . or .. segment');
    return true;
  });
  assert.deepEqual(calls, []);
});
