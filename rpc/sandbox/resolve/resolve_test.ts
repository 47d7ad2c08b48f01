import assert from "node:assert/strict";
import {
  type Desired,
  desiredToJson,
  type HostFacts,
  resolve,
  type ResolveOptions,
} from "./resolve.ts";
import { parseSpec } from "../spec/spec.ts";
import { invalidWith, testHost } from "../../../tests/helpers/host_facts.ts";

/** Paths that exist; `/link` is a symlink to `/real`. */
const FS: Record<string, string> = {
  "/work/app/src": "/work/app/src",
  "/work/app": "/work/app",
  "/home/dev/proj": "/home/dev/proj",
  "/link": "/real",
  "/real": "/real",
};

function host(over: Partial<HostFacts> = {}): HostFacts {
  return testHost({ serverVersion: "6.0.4", realPath: (p) => FS[p], ...over });
}

function run(spec: Record<string, unknown>, over: Partial<ResolveOptions> = {}): Desired {
  return resolve(parseSpec({ container_name: "web", image: "debian-base", ...spec }), {
    host: host(),
    baseDir: "/work/app",
    ...over,
  });
}

Deno.test("resolve gives the root disk, default profiles, ready and timeout for a container", () => {
  const d = run({});
  assert.deepStrictEqual(d.devices.root, { props: { type: "disk", path: "/", pool: "default" } });
  assert.deepStrictEqual(d.profiles, ["default"]);
  assert.deepStrictEqual(d.ready, ["running"]);
  assert.equal(d.readyTimeoutMs, 60_000);
  assert.deepStrictEqual(d.image, {
    spec: "debian-base",
    server: null,
    protocol: null,
    alias: "debian-base",
  });
});

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

Deno.test("resolve maps a VM's host mounts to the service user on incus 7.5", () => {
  const vmHost = host({ serverDriver: "lxc | qemu", serverVersion: "7.5", uid: 501, gid: 20 });
  const d = run({ type: "vm", volumes: ["./src:/src"], user: "dev" }, { host: vmHost });
  assert.equal(d.config["raw.idmap"], "uid 501 1000\ngid 20 1000");
  const root = run({ type: "vm", volumes: ["./src:/src"] }, { host: vmHost });
  assert.equal(root.config["raw.idmap"], "uid 501 0\ngid 20 0");
});

Deno.test("resolve canonicalises bind sources: relative, ~, symlinks, path map", () => {
  const d = run({ volumes: ["./src:/home/dev/src:ro", "~/proj:/p", "/link:/l"] });
  assert.deepStrictEqual(d.devices["home-dev-src"]!.props, {
    type: "disk",
    path: "/home/dev/src",
    source: "/work/app/src",
    readonly: "true",
  });
  assert.equal(d.devices.p!.props.source, "/home/dev/proj");
  assert.equal(d.devices.l!.props.source, "/real");
  const mapped = run({ volumes: ["./src:/s"] }, { host: host({ hostPathMap: "/work=/srv/w" }) });
  assert.equal(mapped.devices.s!.props.source, "/srv/w/app/src");
  const boundary = run({ volumes: ["./src:/s"] }, { host: host({ hostPathMap: "/wor=/x" }) });
  assert.equal(boundary.devices.s!.props.source, "/work/app/src");
  const guest = run({ volumes: ["~/proj:/s"] }, { host: host({ guestHome: "/box/home\n" }) });
  assert.equal(guest.devices.s!.props.source, "/box/home/proj");
});

Deno.test("resolve gives named volumes a pool, initial.copy, an ensure entry and owner fixups", () => {
  const h = host({
    pools: [{ name: "a", driver: "dir" }, { name: "default", driver: "btrfs" }, {
      name: "fast",
      driver: "zfs",
    }],
    apiExtensions: ["disk_initial_copy"],
  });
  const d = run({
    volumes: [
      "cache:/home/dev/.cache:owner=dev",
      "data:/data:ro,nocopy",
      "ext:/e:pool=fast,external",
    ],
  }, {
    host: h,
    volumeDefs: { cache: { name: "demo_cache", config: { size: "1GiB" } }, data: { pool: "fast" } },
  });
  assert.deepStrictEqual(d.devices["home-dev-cache"]!.props, {
    type: "disk",
    path: "/home/dev/.cache",
    pool: "default",
    source: "demo_cache",
    "initial.copy": "true",
  });
  assert.deepStrictEqual(d.devices.data!.props, {
    type: "disk",
    path: "/data",
    pool: "fast",
    source: "data",
    readonly: "true",
  });
  assert.deepStrictEqual(d.volumes, [
    { pool: "default", name: "demo_cache", config: { size: "1GiB" }, external: false },
    { pool: "fast", name: "data", config: {}, external: false },
    { pool: "fast", name: "ext", config: {}, external: true },
  ]);
  assert.deepStrictEqual(d.owners, [{
    device: "home-dev-cache",
    path: "/home/dev/.cache",
    owner: "dev",
  }]);
});

Deno.test("resolve names ports by bind, protocol and address", () => {
  const d = run({
    ports: ["8080:80", "5353:53/udp", "5173-5180:5173", {
      listen: "unix:/run/x.sock",
      connect: "tcp:9000",
      bind: "guest",
    }, { name: "api", listen: "0.0.0.0:9000", connect: 9000 }],
  });
  assert.deepStrictEqual(Object.keys(d.devices).sort(), [
    "api",
    "port-guest-unix-run-x-sock",
    "port-host-5173",
    "port-host-8080",
    "port-host-udp-5353",
    "root",
  ]);
  assert.deepStrictEqual(d.devices["port-host-5173"], {
    props: {
      type: "proxy",
      bind: "host",
      listen: "tcp:127.0.0.1:5173",
      connect: "tcp:127.0.0.1:5173",
    },
    search: 7,
  });
  assert.equal(d.devices.api!.props.listen, "tcp:0.0.0.0:9000");
  assert.equal(d.devices.api!.props.connect, "tcp:127.0.0.1:9000");
});

Deno.test("resolve sets the config keys of §8.1, raw_config last", () => {
  const d = run({
    cpus: "4",
    mem_limit: "512m",
    privileged: false,
    labels: { team: "a" },
    environment: { A: 1 },
    restart: "always",
    raw_config: { "limits.cpu": "8", "security.nesting": true },
  });
  assert.deepStrictEqual(d.config, {
    "limits.cpu": "8",
    "limits.memory": "512MiB",
    "security.privileged": "false",
    "user.team": "a",
    "environment.A": "1",
    "boot.autostart": "true",
    "boot.autorestart": "true",
    "security.nesting": "true",
  });
  assert.deepStrictEqual(run({ restart: "unless-stopped" }).config, { "boot.autorestart": "true" });
  assert.deepStrictEqual(run({ cpuset: "0,2" }).config, { "limits.cpu": "0,2" });
});

Deno.test("resolve quotes an OCI command line and sets oci ids and cwd", () => {
  const d = run({
    image: "docker:nginx",
    entrypoint: ["/bin/sh", "-c"],
    command: ["echo hi"],
    user: "101:102",
    working_dir: "/app",
  });
  assert.deepStrictEqual(d.image, {
    spec: "docker:nginx",
    server: "https://docker.io",
    protocol: "oci",
    alias: "library/nginx:latest",
  });
  assert.equal(d.config["oci.entrypoint"], '/bin/sh -c "echo hi"');
  assert.equal(d.config["oci.uid"], "101");
  assert.equal(d.config["oci.gid"], "102");
  assert.equal(d.config["oci.cwd"], "/app");
});

Deno.test("resolve keeps secret environment values out of desiredToJson", () => {
  const oci = run({ image: "docker:app", environment: { T: { secret: "tok" } } }, {
    secretValues: { tok: "s3cr3t" },
  });
  assert.equal(oci.config["environment.T"], "s3cr3t");
  const sys = run({ environment: { T: { secret: "tok" } } }, { secretValues: { tok: "s3cr3t" } });
  assert.equal(sys.config["environment.T"], undefined);
  assert.equal(sys.exec.env?.T, "s3cr3t");
  for (const d of [oci, sys]) assert.ok(!JSON.stringify(desiredToJson(d)).includes("s3cr3t"));
});

Deno.test("resolve adds the egress NIC and keys, named from the project", () => {
  const d = run({ egress: ["api.example.com"] }, { project: "" });
  assert.equal(d.egress!.project, "default");
  assert.deepStrictEqual(d.devices.eth0!.props, d.egress!.nic);
  assert.equal(d.config["user.isb.egress-for"], "default/web");
});

Deno.test("resolve merges raw_devices.root over the root disk and adds the rest", () => {
  const d = run({ raw_devices: { root: { size: "10GiB" }, gpu: { type: "gpu" } } });
  assert.deepStrictEqual(d.devices.root!.props, {
    type: "disk",
    path: "/",
    pool: "default",
    size: "10GiB",
  });
  assert.deepStrictEqual(d.devices.gpu!.props, { type: "gpu" });
});

Deno.test("desiredToJson has exactly the §6.6 keys", () => {
  const j = desiredToJson(run({ ports: ["5173-5180:5173"], exec: { login: true }, user: "dev" }));
  assert.deepStrictEqual(Object.keys(j).sort(), [
    "config",
    "devices",
    "exec",
    "image",
    "instance_type",
    "name",
    "owners",
    "pool",
    "profiles",
    "ready",
    "volumes",
  ]);
  assert.deepStrictEqual(j.exec, { user: "dev", login: true });
  assert.equal((j.devices as Record<string, { search?: number }>)["port-host-5173"]!.search, 7);
});
