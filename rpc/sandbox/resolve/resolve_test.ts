import assert from "node:assert/strict";
import { host, run } from "../../../tests/helpers/resolve_fixture.ts";

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
