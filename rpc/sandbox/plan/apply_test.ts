import assert from "node:assert/strict";
import { createIncusClient } from "../../incus/mod.ts";
import { IsbError } from "../../errors.ts";
import { startFakeIncusd } from "../../../tests/fakes/incusd.ts";
import { applyPlan, CREATE_TOKEN_KEY } from "./apply.ts";
import { SYSTEM_CLOCK } from "../../clock.ts";
import type { SandboxPlan } from "./plan.ts";
import type { Desired } from "../resolve/resolve.ts";

const INSTANCE = {
  name: "web",
  type: "container",
  status: "Running",
  status_code: 103,
  architecture: "x86_64",
  config: { "user.a": "1" },
  devices: {
    root: { type: "disk", path: "/", pool: "default" },
    old: { type: "disk", path: "/o", source: "/s" },
  },
  profiles: ["default"],
  ephemeral: false,
  stateful: false,
  description: "",
  created_at: "2026-11-30T00:00:00Z",
};

function desired(over: Partial<Desired> = {}): Desired {
  return {
    name: "web",
    instance_type: "container",
    image: { spec: "debian-base", server: null, protocol: null, alias: "debian-base" },
    pool: "default",
    profiles: ["default"],
    config: { "environment.TOKEN": "real-value" },
    devices: { root: { props: { type: "disk", path: "/", pool: "default" } } },
    volumes: [],
    owners: [],
    ready: ["running"],
    exec: {},
    readyTimeoutMs: 60_000,
    sensitive: ["environment.TOKEN"],
    sensitiveExec: [],
    ...over,
  };
}

function ctx(socket: string) {
  const incus = createIncusClient({ socket });
  return {
    incus,
    clock: SYSTEM_CLOCK,
    createTimeoutMs: 5000,
    egress: { stateDir: "/nonexistent", env: {}, wallNow: () => 0 },
  };
}

Deno.test("applyPlan batches config and device changes into one If-Match update", async () => {
  await using fake = await startFakeIncusd([
    { route: "GET /1.0/instances/web", metadata: INSTANCE, etag: "etag-1" },
    { route: "PUT /1.0/instances/web", operation: {} },
  ]);
  const c = ctx(fake.socket);
  const lines: string[] = [];
  try {
    const plan: SandboxPlan = {
      name: "web",
      status: "Running",
      actions: [
        { action: "set_config", key: "security.nesting", to: "true", restart: true },
        {
          action: "set_config",
          key: "environment.TOKEN",
          to: "(secret)",
          restart: false,
          secret: true,
        },
        { action: "add_device", device: "data", props: { type: "disk", path: "/d", source: "/h" } },
        { action: "remove_device", device: "old", props: {} },
        { action: "note", message: "hello" },
      ],
    };
    const report = await applyPlan({ ...c, progress: (l) => lines.push(l) }, desired(), plan);
    assert.deepEqual(report.restart_needed, ["security.nesting"]);
    assert.equal(report.applied.length, 5);
    const puts = fake.requests.filter((r) => r.method === "PUT");
    assert.equal(puts.length, 1, "one read-modify-write for the whole batch");
    assert.equal(puts[0]!.headers.get("if-match"), "etag-1");
    const body = JSON.parse(new TextDecoder().decode(puts[0]!.body));
    assert.deepEqual(body.config, {
      "user.a": "1",
      "security.nesting": "true",
      "environment.TOKEN": "real-value",
    });
    assert.deepEqual(Object.keys(body.devices).sort(), ["data", "root"]);
    assert.deepEqual(lines, [
      "web: ~ config security.nesting: (unset) -> true (takes effect on restart)",
      "web: ~ config environment.TOKEN: (unset) -> (secret)",
      "web: + device data: path=/d source=/h",
      "web: - device old",
      "web: note: hello",
    ]);
    assert.ok(!lines.join("\n").includes("real-value"));
  } finally {
    c.incus.close();
  }
});

Deno.test("applyPlan leaves an instance it did not create alone when create fails", async () => {
  await using fake = await startFakeIncusd([
    {
      route: "GET /1.0/images",
      metadata: [{
        fingerprint: "f".repeat(64),
        aliases: [{ name: "debian-base", description: "" }],
        properties: {},
        type: "container",
      }],
    },
    { route: "POST /1.0/instances", operation: { status: "Failure", err: "disk full" } },
    {
      route: "GET /1.0/instances/web",
      metadata: { ...INSTANCE, config: { [CREATE_TOKEN_KEY]: "someone-else" } },
    },
  ]);
  const c = ctx(fake.socket);
  const lines: string[] = [];
  try {
    const plan: SandboxPlan = {
      name: "web",
      status: null,
      actions: [{
        action: "create_instance",
        image: "debian-base",
        pool: "default",
        config: {},
        devices: {},
        profiles: ["default"],
      }],
    };
    const err = await applyPlan({ ...c, progress: (l) => lines.push(l) }, desired(), plan).catch((
      e,
    ) => e);
    assert.ok(err instanceof IsbError);
    assert.equal(err.code, "operation_failed");
    assert.equal(fake.requests.filter((r) => r.method === "DELETE").length, 0);
    assert.ok(lines.includes("web: exists but was not created by this call; leaving it alone"));
    const post = fake.requests.find((r) => r.method === "POST")!;
    const body = JSON.parse(new TextDecoder().decode(post.body));
    assert.deepEqual(body.source, { type: "image", fingerprint: "f".repeat(64) });
    assert.match(body.config[CREATE_TOKEN_KEY], /^[0-9a-f]{24,}$/);
    assert.equal(body.config["environment.TOKEN"], "real-value");
  } finally {
    c.incus.close();
  }
});

Deno.test("applyPlan refuses a missing local image before creating anything", async () => {
  await using fake = await startFakeIncusd([{ route: "GET /1.0/images", metadata: [] }]);
  const c = ctx(fake.socket);
  try {
    const plan: SandboxPlan = {
      name: "web",
      status: null,
      actions: [{
        action: "create_instance",
        image: "x",
        pool: "default",
        config: {},
        devices: {},
        profiles: [],
      }],
    };
    const err = await applyPlan(c, desired(), plan).catch((e) => e);
    assert.ok(err instanceof IsbError && err.code === "invalid");
    assert.match(err.message, /this host has no local images/);
    assert.equal(fake.requests.filter((r) => r.method === "POST").length, 0);
  } finally {
    c.incus.close();
  }
});
