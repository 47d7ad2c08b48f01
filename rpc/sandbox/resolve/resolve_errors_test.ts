/** resolve's refusals (isb-rpc.md §8): one table of specs and the text each error says. */
import assert from "node:assert/strict";
import { invalidWith } from "../../../tests/helpers/host_facts.ts";
import { host, run } from "../../../tests/helpers/resolve_fixture.ts";

const ERRORS = [
  { name: "a missing name", spec: { container_name: undefined }, text: "sandbox name is required" },
  { name: "an empty image", spec: { image: "" }, text: "image is required" },
  { name: "a bad name", spec: { container_name: "1web" }, text: "invalid sandbox name" },
  { name: "a name ending in -", spec: { container_name: "web-" }, text: "invalid sandbox name" },
  {
    name: "an unknown image prefix",
    spec: { image: "foo:bar" },
    text: 'unknown image remote "foo"',
  },
  {
    name: "a loopback oci registry",
    spec: { image: "oci:localhost:5000/a" },
    text: "loopback registry",
  },
  {
    name: "a missing pool",
    spec: { storage: "fast" },
    text: 'storage pool "fast" does not exist (have: default)',
  },
  { name: "cpus and cpuset together", spec: { cpus: 2, cpuset: "0-1" }, text: "not both" },
  { name: "zero cpus", spec: { cpus: 0 }, text: "cpus is a whole number" },
  { name: "a decimal mem_limit", spec: { mem_limit: "1.5g" }, text: "not a whole size" },
  { name: "an unknown memory unit", spec: { mem_limit: "5x" }, text: "unknown unit" },
  {
    name: "a missing bind source",
    spec: { volumes: ["./x:/x"] },
    text: "bind source /work/app/x does not exist",
  },
  {
    name: "a target mounted twice",
    spec: { volumes: ["./src:/a", "v:/a/"] },
    text: "/a/ is mounted twice",
  },
  {
    name: "owner on a bind",
    spec: { volumes: ["./src:/a:owner=dev"] },
    text: "owner is only for named volumes",
  },
  {
    name: "pool on a bind",
    spec: { volumes: ["./src:/a:pool=default"] },
    text: "only for named volumes",
  },
  {
    name: "a core option on a mount",
    spec: { volumes: [{ source: "v", target: "/a", options: { path: "/b" } }] },
    text: "options.path would override a core property",
  },
  {
    name: "a core option on a port",
    spec: { ports: [{ listen: 1, connect: 2, options: { bind: "x" } }] },
    text: "port options.bind would override",
  },
  {
    name: "a duplicate device name",
    spec: {
      volumes: [{ source: "v", target: "/a", device: "d" }, {
        source: "w",
        target: "/b",
        device: "d",
      }],
    },
    text: 'device name "d" is used twice',
  },
  {
    name: "a raw device without type",
    spec: { raw_devices: { gpu: { id: 0 } } },
    text: 'raw device "gpu" needs a type',
  },
  {
    name: "entrypoint on a system image",
    spec: { entrypoint: ["x"] },
    text: "entrypoint is for OCI images",
  },
  { name: "a VM on an lxc-only server", spec: { type: "vm" }, text: "cannot run virtual machines" },
  {
    name: "an OCI user that is not numeric",
    spec: { image: "docker:nginx", user: "www" },
    text: "must be numeric",
  },
  { name: "a bad label key", spec: { labels: { "a b": "1" } }, text: "invalid label key" },
  { name: "a bad ready_timeout", spec: { ready_timeout: "soon" }, text: "invalid duration" },
  {
    name: "a registry image outside an org",
    spec: { image: "registry:app:1" },
    text: "belong to an org",
  },
];

for (const c of ERRORS) {
  Deno.test(`resolve refuses ${c.name}`, () => {
    invalidWith(() => run(c.spec), c.text);
  });
}

Deno.test("resolve refuses a VM with privileged, guest ports or host mounts on old incus", () => {
  const vmHost = host({ serverDriver: "lxc | qemu" });
  const vm = (spec: Record<string, unknown>) => run({ type: "vm", ...spec }, { host: vmHost });
  invalidWith(() => vm({ privileged: true }), "privileged is container-only");
  invalidWith(
    () => vm({ ports: [{ listen: 1, connect: 2, bind: "guest" }] }),
    "bind: host proxies",
  );
  invalidWith(() => vm({ volumes: ["./src:/src"] }), "need incus 7.5 or later");
  invalidWith(() => vm({ idmap: "always" }), "idmap is container-only");
  invalidWith(() => vm({ image: "docker:nginx" }), "OCI images run as containers");
  const d = vm({ ports: ["8080:80"] });
  assert.deepStrictEqual(d.ready, ["running", "agent"]);
  assert.equal(d.readyTimeoutMs, 300_000);
  assert.deepStrictEqual(d.devices["port-host-8080"]!.props, {
    type: "proxy",
    bind: "host",
    listen: "tcp:127.0.0.1:8080",
    connect: "tcp:0.0.0.0:80",
    nat: "true",
  });
});
