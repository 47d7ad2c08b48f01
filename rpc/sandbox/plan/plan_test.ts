import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import type { Image, Instance } from "../../incus/types.ts";
import { deviceMatches, hasChanges, plan } from "./plan.ts";
import { type Desired, type HostFacts, resolve } from "../resolve/resolve.ts";
import { parseSpec } from "../spec/spec.ts";
import { testHost } from "../../../tests/helpers/host_facts.ts";

const HOST: HostFacts = testHost({ realPath: (p) => (p.startsWith("/work/") ? p : undefined) });

const IMAGES: Image[] = [
  {
    fingerprint: "0a20d81b790f" + "0".repeat(52),
    aliases: [{ name: "debian-base", description: "" }],
    properties: {},
    type: "container",
  },
];

function desired(spec: Record<string, unknown>): Desired {
  return resolve(parseSpec({ container_name: "web", image: "debian-base", ...spec }), {
    host: HOST,
    baseDir: "/work/app",
  });
}

function instance(over: Partial<Instance> = {}): Instance {
  return {
    name: "web",
    type: "container",
    status: "Running",
    status_code: 103,
    architecture: "x86_64",
    config: {},
    devices: { root: { type: "disk", path: "/", pool: "default" } },
    profiles: ["default"],
    ephemeral: false,
    stateful: false,
    description: "",
    created_at: "",
    ...over,
  };
}

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

Deno.test("plan adds missing devices, replaces wrong ones, adopts equal ones and replaces a disk at the same path", () => {
  const d = desired({
    volumes: ["/work/app/src:/src", "/work/app/data:/data", "/work/app/a:/a", "/work/app/b:/b"],
    ports: ["8080:80"],
  });
  const actual = instance({
    devices: {
      root: { type: "disk", path: "/", pool: "default" },
      src: { type: "disk", path: "/src", source: "/elsewhere" },
      mydata: { type: "disk", path: "/data", source: "/work/app/data" },
      olda: { type: "disk", path: "/a", source: "/old" },
      other: { type: "nic", network: "incusbr0" },
    },
  });
  const p = plan(d, { actual, pruneDevices: true });
  assert.deepStrictEqual(p.actions, [
    {
      action: "replace_device",
      device: "a",
      replaces: "olda",
      from: { type: "disk", path: "/a", source: "/old" },
      to: { type: "disk", path: "/a", source: "/work/app/a" },
    },
    {
      action: "add_device",
      device: "b",
      props: { type: "disk", path: "/b", source: "/work/app/b" },
    },
    { action: "note", message: "device data already present as mydata; left as is" },
    {
      action: "add_device",
      device: "port-host-8080",
      props: {
        type: "proxy",
        bind: "host",
        listen: "tcp:127.0.0.1:8080",
        connect: "tcp:127.0.0.1:80",
      },
    },
    {
      action: "replace_device",
      device: "src",
      replaces: "src",
      from: { type: "disk", path: "/src", source: "/elsewhere" },
      to: { type: "disk", path: "/src", source: "/work/app/src" },
    },
    { action: "remove_device", device: "other", props: { type: "nic", network: "incusbr0" } },
  ]);
  assert.equal(plan(d, { actual }).actions.some((a) => a.action === "remove_device"), false);
});

Deno.test("plan leaves a searched port anywhere in its range and re-searches one outside it", () => {
  const d = desired({ ports: ["5173-5180:5173"] });
  const dev = (listen: string) => ({
    type: "proxy",
    bind: "host",
    listen,
    connect: "tcp:127.0.0.1:5173",
  });
  const inRange = instance({ devices: { "port-host-5173": dev("tcp:127.0.0.1:5180") } });
  assert.deepStrictEqual(plan(d, { actual: inRange }).actions, []);
  const outside = instance({
    status: "Stopped",
    devices: { "port-host-5173": dev("tcp:127.0.0.1:5181") },
  });
  assert.deepStrictEqual(plan(d, { actual: outside }).actions, [
    { action: "remove_device", device: "port-host-5173", props: dev("tcp:127.0.0.1:5181") },
    { action: "start_instance" },
    { action: "add_port", device: "port-host-5173", props: dev("tcp:127.0.0.1:5173"), search: 7 },
  ]);
  const missing = instance();
  assert.deepStrictEqual(plan(d, { actual: missing }).actions, [
    { action: "add_port", device: "port-host-5173", props: dev("tcp:127.0.0.1:5173"), search: 7 },
  ]);
});

Deno.test("plan fixes owners only for mounts added or replaced in this plan", () => {
  const d = desired({ volumes: ["c:/c:owner=dev", "e:/e:owner=dev"] });
  const actual = instance({
    devices: {
      root: { type: "disk", path: "/", pool: "default" },
      c: { type: "disk", path: "/c", pool: "default", source: "c" },
    },
  });
  const p = plan(d, { actual, volumes: { default: ["c", "e"] } });
  assert.deepStrictEqual(p.actions, [
    {
      action: "add_device",
      device: "e",
      props: { type: "disk", path: "/e", pool: "default", source: "e" },
    },
    { action: "fix_owner", path: "/e", owner: "dev" },
  ]);
});

const MATCHES = [
  {
    name: "readonly false equals absent",
    want: { type: "disk", path: "/a" },
    have: { type: "disk", path: "/a", readonly: "false" },
    ok: true,
  },
  {
    name: "a trailing slash on a disk source is ignored",
    want: { type: "disk", path: "/a", source: "/s" },
    have: { type: "disk", path: "/a/", source: "/s/" },
    ok: true,
  },
  {
    name: "initial.copy on a disk is ignored",
    want: { type: "disk", path: "/a", "initial.copy": "true" },
    have: { type: "disk", path: "/a" },
    ok: true,
  },
  {
    name: "nat false equals absent",
    want: { type: "proxy", listen: "tcp:h:1" },
    have: { type: "proxy", listen: "tcp:h:1", nat: "false" },
    ok: true,
  },
  {
    name: "an extra prop differs",
    want: { type: "disk", path: "/a" },
    have: { type: "disk", path: "/a", shift: "true" },
    ok: false,
  },
];

for (const c of MATCHES) {
  Deno.test(`deviceMatches: ${c.name}`, () => {
    assert.equal(deviceMatches({ props: c.want }, c.have), c.ok);
  });
}

Deno.test("deviceMatches takes a searched port in range with the same protocol and host only", () => {
  const want = {
    props: { type: "proxy", listen: "tcp:127.0.0.1:5000", connect: "tcp:127.0.0.1:80" },
    search: 3,
  };
  const have = (listen: string) => ({ ...want.props, listen });
  assert.equal(deviceMatches(want, have("tcp:127.0.0.1:5003")), true);
  assert.equal(deviceMatches(want, have("tcp:127.0.0.1:5004")), false);
  assert.equal(deviceMatches(want, have("udp:127.0.0.1:5001")), false);
  assert.equal(deviceMatches(want, have("tcp:0.0.0.0:5001")), false);
});
