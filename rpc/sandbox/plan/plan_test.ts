import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { hasChanges, plan } from "./plan.ts";
import { resolve } from "../resolve/resolve.ts";
import { parseSpec } from "../spec/spec.ts";
import { desired, HOST, IMAGES, instance } from "../../../tests/helpers/plan_fixture.ts";

Deno.test("plan for an absent instance creates, starts, searches ports and fixes owners", () => {
  const d = desired({
    volumes: ["cache:/home/dev/.cache:owner=dev", "/work/app/src:/src"],
    ports: ["5173-5180:5173", "8080:80"],
    labels: { a: "1" },
  });
  const p = plan(d, { images: IMAGES, volumes: { default: [] } });
  assert.equal(p.status, null);
  assert.deepStrictEqual(p.actions, [
    { action: "create_volume", pool: "default", volume: "cache", config: {} },
    {
      action: "create_instance",
      image: "debian-base",
      pool: "default",
      config: { "user.a": "1" },
      devices: {
        "home-dev-cache": {
          type: "disk",
          path: "/home/dev/.cache",
          pool: "default",
          source: "cache",
        },
        "port-host-8080": {
          type: "proxy",
          bind: "host",
          listen: "tcp:127.0.0.1:8080",
          connect: "tcp:127.0.0.1:80",
        },
        root: { type: "disk", path: "/", pool: "default" },
        src: { type: "disk", path: "/src", source: "/work/app/src" },
      },
      profiles: ["default"],
    },
    { action: "start_instance" },
    {
      action: "add_port",
      device: "port-host-5173",
      props: {
        type: "proxy",
        bind: "host",
        listen: "tcp:127.0.0.1:5173",
        connect: "tcp:127.0.0.1:5173",
      },
      search: 7,
    },
    { action: "fix_owner", path: "/home/dev/.cache", owner: "dev" },
  ]);
});

Deno.test("plan refuses a missing local image with the §5.2 text", () => {
  const want = 'image "nope" not found locally (local images: debian-base); name a remote image ' +
    "with its server instead, e.g. images:ubuntu/24.04";
  assert.throws(() => plan(desired({ image: "nope" }), { images: IMAGES }), (e: unknown) => {
    assert.ok(e instanceof IsbError && e.code === "invalid");
    assert.equal(e.message, want);
    return true;
  });
  assert.throws(
    () => plan(desired({ image: "nope" }), { images: [] }),
    /\(this host has no local images\)/,
  );
  assert.equal(
    plan(desired({ image: "0a20d81b790f" }), { images: IMAGES }).actions[0]!.action,
    "create_instance",
  );
  assert.equal(
    plan(desired({ image: "images:debian/12" }), { images: [] }).actions[0]!.action,
    "create_instance",
  );
});

Deno.test("plan refuses an external volume that does not exist", () => {
  assert.throws(
    () => plan(desired({ volumes: ["v:/v:external"] }), { volumes: {} }),
    /volume v is external but does not exist in pool default/,
  );
  assert.equal(
    plan(desired({ volumes: ["v:/v:external"] }), { volumes: { default: ["v"] } }).actions[0]!
      .action,
    "create_instance",
  );
});

Deno.test("plan for an up-to-date running instance has only no actions", () => {
  const d = desired({ volumes: ["/work/app/src:/src:ro"], labels: { a: "1" } });
  const actual = instance({
    config: { "user.a": "1", "volatile.base_image": IMAGES[0]!.fingerprint },
    devices: {
      root: { type: "disk", path: "/", pool: "default" },
      src: {
        type: "disk",
        path: "/src/",
        source: "/work/app/src/",
        readonly: "true",
        shift: "false",
      },
    },
  });
  const p = plan(d, { actual, images: IMAGES });
  assert.deepStrictEqual(p, { name: "web", status: "Running", actions: [] });
  assert.equal(hasChanges(p), false);
});

Deno.test("plan notes drift it will not change and sets differing config, restart-flagged", () => {
  const d = desired({
    labels: { a: "2" },
    raw_config: { "security.nesting": "true" },
    incus_profiles: ["default", "x"],
  });
  const actual = instance({
    type: "virtual-machine",
    status: "Stopped",
    config: { "user.a": "1", "raw.idmap": "both 1000 1000", "volatile.base_image": "ffff" },
    devices: { root: { type: "disk", path: "/", pool: "other" } },
  });
  const p = plan(d, { actual, images: IMAGES });
  assert.deepStrictEqual(p.actions, [
    { action: "note", message: "type is virtual-machine (spec: container); fixed at creation" },
    { action: "note", message: "root disk is on pool other (spec: default); fixed at creation" },
    { action: "note", message: "profiles are [default] (spec: [default, x]); fixed at creation" },
    {
      action: "note",
      message:
        "image debian-base now points to 0a20d81b790f; this sandbox was created from ffff and " +
        "keeps it (recreate it to use the new image)",
    },
    { action: "set_config", key: "security.nesting", to: "true", restart: true },
    { action: "set_config", key: "user.a", from: "1", to: "2", restart: false },
    { action: "start_instance" },
  ]);
});

Deno.test("plan notes a raw.idmap the spec's idmap mode does not want", () => {
  const actual = instance({ config: { "raw.idmap": "both 1000 1000" } });
  const p = plan(desired({ idmap: "none" }), { actual });
  assert.deepStrictEqual(p.actions, [{
    action: "note",
    message:
      "raw.idmap is set but the spec says idmap: none; isb never removes config keys, unset it by hand",
  }]);
  assert.deepStrictEqual(plan(desired({}), { actual }).actions, []);
});

Deno.test("plan redacts secret config values as (secret)", () => {
  const d = resolve(
    parseSpec({
      container_name: "web",
      image: "docker:app",
      environment: { T: { secret: "tok" } },
    }),
    { host: HOST, baseDir: "/work", secretValues: { tok: "s3cr3t" } },
  );
  const created = plan(d, {});
  assert.ok(!JSON.stringify(created).includes("s3cr3t"));
  const p = plan(d, { actual: instance({ config: { "environment.T": "old" } }) });
  assert.deepStrictEqual(p.actions, [
    {
      action: "set_config",
      key: "environment.T",
      from: "(secret)",
      to: "(secret)",
      restart: false,
      secret: true,
    },
  ]);
});
