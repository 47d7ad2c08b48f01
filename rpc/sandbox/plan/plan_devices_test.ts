/** plan's device rules (isb-rpc.md §9.1): add, replace, adopt, searched ports, owners. */
import assert from "node:assert/strict";
import { deviceMatches, plan } from "./plan.ts";
import { desired, instance } from "../../../tests/helpers/plan_fixture.ts";

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
