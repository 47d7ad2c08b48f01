/**
 * The one canonical host-path check (rpc/host_paths.ts, _raw_rules.ts) as a table: every key a spec
 * can name a host path with, against every spelling of `~/.ssh`, `~` and `/` (a symlink into
 * `.ssh`, `~/.ssh/`, `/root/./.ssh`, `${HOME}`, relative, trailing slash, a missing path
 * below a link), each refused with `invalid` naming the key and the path; and the allowed
 * forms, which resolve to the canonical path Incus is given.
 */
import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { parseSpec } from "../spec/spec.ts";
import { testHost } from "../../../tests/helpers/host_facts.ts";
import type { HostFacts } from "./host.ts";
import { resolve } from "./resolve.ts";
import { canonicalHostPath, checkHostPath, protectedHostPaths } from "../../host_paths.ts";

const HOME = "/home/dev";
/** Existing paths → their real path (`keys`, `h`, `dotssh` are symlinks). */
const FS: Record<string, string> = {
  "/": "/",
  "/home": "/home",
  "/home/dev": "/home/dev",
  "/home/dev/.ssh": "/home/dev/.ssh",
  "/home/dev/.ssh/id_test": "/home/dev/.ssh/id_test",
  "/home/dev/proj": "/home/dev/proj",
  "/home/dev/proj/src": "/home/dev/proj/src",
  "/home/dev/proj/keys": "/home/dev/.ssh",
  "/home/dev/proj/h": "/home/dev",
  "/home/dev/proj/dotssh": "/home/dev/.ssh/id_test",
  "/root": "/root",
  "/root/.ssh": "/root/.ssh",
  "/tmp": "/tmp",
  "/dev": "/dev",
  "/dev/sda": "/dev/sda",
};

function realPath(p: string): string | undefined {
  if (FS[p] !== undefined) return FS[p];
  // below a symlinked directory
  for (const [from, to] of Object.entries(FS)) {
    if (from !== "/" && p.startsWith(`${from}/`) && to !== from) {
      return realPath(`${to}${p.slice(from.length)}`);
    }
  }
  return undefined;
}

const ROOTS = protectedHostPaths({ env: { HOME } });
const HOST: HostFacts = testHost({ home: HOME, realPath, protectedPaths: ROOTS });
const CTX = { home: HOME, baseDir: `${HOME}/proj`, realPath, roots: ROOTS };

/** Spellings of a protected path or one holding it, and the root the refusal names. */
const SPELLINGS: [string, RegExp][] = [
  ["~/.ssh", /is under \/home\/dev\/\.ssh/],
  ["~/.ssh/", /is under \/home\/dev\/\.ssh/],
  ["~/.ssh/id_test", /is under \/home\/dev\/\.ssh/],
  ["${HOME}/.ssh", /is under \/home\/dev\/\.ssh/],
  ["$HOME/.ssh/id_test", /is under \/home\/dev\/\.ssh/],
  ["/home/dev/.ssh/", /is under \/home\/dev\/\.ssh/],
  ["/home/dev/./.ssh", /is under \/home\/dev\/\.ssh/],
  ["//home//dev/.ssh//", /is under \/home\/dev\/\.ssh/],
  ["/home/dev/proj/../.ssh", /is under \/home\/dev\/\.ssh/],
  ["../.ssh", /is under \/home\/dev\/\.ssh/],
  ["./keys", /, a link to \/home\/dev\/\.ssh is under/],
  ["keys/", /, a link to \/home\/dev\/\.ssh is under/],
  ["./dotssh", /, a link to \/home\/dev\/\.ssh\/id_test is under/],
  ["./h/.ssh", /, a link to \/home\/dev\/\.ssh is under/],
  ["./keys/new/not-yet", /, a link to \/home\/dev\/\.ssh\/new\/not-yet is under/],
  ["/root/./.ssh", /is under \/root\/\.ssh/],
  ["/root/.ssh/", /is under \/root\/\.ssh/],
  ["~", /\(\/home\/dev\) holds \/home\/dev\/.*, which isb rpc never exposes/],
  ["~/", /\(\/home\/dev\) holds \/home\/dev\//],
  ["${HOME}", /\(\/home\/dev\) holds \/home\/dev\//],
  ["./h", /, a link to \/home\/dev holds/],
  ["..", /\(\/home\/dev\) holds \/home\/dev\//],
  ["/", /holds .*, which isb rpc never exposes/],
  ["/home/dev/proj/../../..", /holds/],
  ["/tmp/../", /holds/],
  ["~/.config/isx/credentials.yaml", /is under \/home\/dev\/\.config\/isx/],
  ["~/.local/state/isx/ca/ca.key", /is under \/home\/dev\/\.local\/state\/isx/],
  ["~/.local/state/isb/egress", /is under \/home\/dev\/\.local\/state\/isb/],
  ["/var/lib/incus/unix.socket", /is under \/var\/lib\/incus/],
  ["/etc/ssh", /is under \/etc\/ssh/],
  ["/dev/sda", /is under \/dev/],
  ["/proc/1/root", /is under \/proc/],
];

/** Each key a host path can be named with in a spec, as a spec holding `path`. */
const KEYS: [string, (path: string) => Record<string, unknown>, RegExp, boolean?][] = [
  ["volumes short form", (p) => ({ volumes: [`${p}:/mnt/k`] }), /web: volumes\[0\]\.source /],
  [
    "volumes long form",
    (p) => ({ volumes: [{ type: "bind", source: p, target: "/mnt/k" }] }),
    /web: volumes\[0\]\.source /,
  ],
  [
    "raw_devices disk source",
    (p) => ({ raw_devices: { keys: { type: "disk", source: p, path: "/mnt/k", shift: "true" } } }),
    /web: raw_devices\.keys\.source /,
  ],
  [
    "a guest port connecting to a host unix socket",
    (p) => ({ ports: [{ listen: "unix:/run/x.sock", connect: `unix:${p}`, bind: "guest" }] }),
    /web: port connect /,
    true,
  ],
  [
    "a host port listening on a host unix socket",
    (p) => ({ ports: [{ listen: `unix:${p}`, connect: "unix:/run/x.sock" }] }),
    /web: port listen /,
    true,
  ],
  [
    "a raw proxy device's host socket",
    (p) => ({
      raw_devices: {
        agent: { type: "proxy", bind: "guest", listen: "unix:/a", connect: `unix:${p}` },
      },
    }),
    /web: raw_devices\.agent\.connect /,
    true,
  ],
];

function spec(over: Record<string, unknown>) {
  return parseSpec({ container_name: "web", image: "debian-base", ...over });
}

function refused(over: Record<string, unknown>, key: RegExp, text: RegExp, label: string): void {
  assert.throws(() => resolve(spec(over), { host: HOST, baseDir: `${HOME}/proj` }), (e) => {
    assert.ok(e instanceof IsbError, `${label}: ${e}`);
    assert.equal(e.code, "invalid", label);
    assert.match(e.message, key, label);
    assert.match(e.message, text, label);
    return true;
  }, label);
}

for (const [what, make, key, file] of KEYS) {
  Deno.test(`resolve refuses every spelling of ~/.ssh, ~ and / in ${what}`, () => {
    for (const [path, text] of SPELLINGS) {
      // a socket is a file: it cannot expose what it does not hold
      if (file && /holds/.test(text.source)) continue;
      if (what === "volumes short form" && !/^[./~$]/.test(path)) {
        // written bare, a short form's source is a named volume: no host path at all
        refused(make(path), /web: volumes\[0\]\.source: "keys\/" is not a volume name/, /./, path);
        continue;
      }
      refused(make(path), key, text, `${what}: ${path}`);
    }
  });
}

Deno.test("checkHostPath returns the canonical path, which is what is mounted", () => {
  assert.equal(checkHostPath("k", "./src", CTX), "/home/dev/proj/src");
  assert.equal(checkHostPath("k", "src/", CTX), "/home/dev/proj/src");
  assert.equal(checkHostPath("k", "~/proj/src", CTX), "/home/dev/proj/src");
  assert.equal(checkHostPath("k", "${HOME}/proj/./src/", CTX), "/home/dev/proj/src");
  assert.equal(checkHostPath("k", "./new/dir", CTX), "/home/dev/proj/new/dir");
  assert.equal(checkHostPath("k", "/home/dev/.sshfoo", CTX), "/home/dev/.sshfoo");
  assert.equal(canonicalHostPath("./keys/x", CTX), "/home/dev/.ssh/x");
  const d = resolve(
    spec({
      volumes: ["./h/proj/src:/src"],
      raw_devices: { data: { type: "disk", source: "~/proj/src/", path: "/data" } },
    }),
    { host: HOST, baseDir: `${HOME}/proj` },
  );
  assert.equal(d.devices.src!.props.source, "/home/dev/proj/src");
  assert.equal(d.devices.data!.props.source, "/home/dev/proj/src");
});

Deno.test("checkHostPath refuses a path it cannot resolve (not permitted), naming key and path", () => {
  const denied = {
    ...CTX,
    realPath: (p: string) => {
      if (p.startsWith("/srv")) throw new Error("NotCapable");
      return realPath(p);
    },
  };
  assert.throws(() => checkHostPath("raw_devices.d.source", "/srv/data", denied), (e) => {
    assert.ok(e instanceof IsbError && e.code === "invalid");
    assert.match(e.message, /^raw_devices\.d\.source \/srv\/data: cannot resolve \/srv\/data/);
    assert.deepEqual(e.data, { key: "raw_devices.d.source", path: "/srv/data" });
    return true;
  });
});

Deno.test("protectedHostPaths covers the isx and isb state, the agent socket, the Incus socket", () => {
  const roots = protectedHostPaths({
    env: {
      HOME: "/home/u/",
      XDG_CONFIG_HOME: "/cfg",
      SSH_AUTH_SOCK: "/tmp/ssh-abc/agent.1",
      INCUS_DIR: "/srv/incus",
    },
    isbStateDir: "/st/isb",
    extra: ["/x/"],
  });
  for (
    const r of [
      "/cfg/isx",
      "/home/u/.local/state/isx",
      "/st/isb",
      "/home/u/.ssh",
      "/home/u/.aws",
      "/tmp/ssh-abc",
      "/srv/incus/unix.socket",
      "/srv/incus",
      "/root/.ssh",
      "/x",
    ]
  ) assert.ok(roots.includes(r), `${r} in ${roots.join(" ")}`);
  assert.ok(!roots.includes("/"), "/ is refused by exposure, never a root");
  const defs = protectedHostPaths({ env: { HOME: "/h" }, definitions: true });
  assert.ok(defs.includes("/h/.config/isx/credentials.yaml") && !defs.includes("/h/.config/isx"));
});

/** `raw_config` keys and device shapes refused whatever the path (_raw_rules.ts). */
const RAW: [string, Record<string, unknown>, RegExp][] = [
  [
    "a raw.lxc mount entry",
    { raw_config: { "raw.lxc": "lxc.mount.entry = /home/dev/.ssh mnt/keys none bind 0 0" } },
    /web: raw_config\.raw\.lxc: isb never passes raw\.lxc/,
  ],
  [
    "a raw.lxc hook",
    { raw_config: { "raw.lxc": "lxc.hook.pre-start = /bin/sh -c 'cp ~/.ssh/* /tmp'" } },
    /raw_config\.raw\.lxc/,
  ],
  [
    "a raw.lxc include",
    { raw_config: { "raw.lxc": "lxc.include = /home/dev/proj/evil.conf" } },
    /raw_config\.raw\.lxc/,
  ],
  ["raw.apparmor", { raw_config: { "raw.apparmor": "/home/** rw," } }, /raw_config\.raw\.apparmor/],
  ["raw.seccomp", { raw_config: { "raw.seccomp": "2\nallowlist\n" } }, /raw_config\.raw\.seccomp/],
  ["raw.qemu", { raw_config: { "raw.qemu": "-drive file=/dev/sda" } }, /raw_config\.raw\.qemu/],
  [
    "raw.qemu.conf",
    { raw_config: { "raw.qemu.conf": "[drive]\nfile = /home/dev/.ssh/id_test" } },
    /raw_config\.raw\.qemu\.conf/,
  ],
  ["an unknown raw key", { raw_config: { "raw.anything": "x" } }, /raw_config\.raw\.anything/],
  [
    "a raw.idmap that is not idmap lines",
    { raw_config: { "raw.idmap": "both 1000 1000\nlxc.mount.entry = /h mnt none bind" } },
    /web: raw_config\.raw\.idmap: "lxc\.mount\.entry = \/h mnt none bind" is not an idmap line/,
  ],
  [
    "an idmap.raw that is not idmap lines",
    { idmap: { raw: "both 1000 1000 /home" } },
    /web: idmap\.raw: "both 1000 1000 \/home" is not an idmap line/,
  ],
  [
    "a unix-block device",
    { raw_devices: { disk: { type: "unix-block", source: "/dev/sda", path: "/dev/sda" } } },
    /web: raw_devices\.disk\.type: "unix-block" is refused: a block device/,
  ],
  [
    "a unix-char device not on the list",
    { raw_devices: { mem: { type: "unix-char", source: "/dev/mem" } } },
    /web: raw_devices\.mem\.source: host device "\/dev\/mem" is not one isb passes/,
  ],
  [
    "a unix-char device through a link",
    { raw_devices: { f: { type: "unix-char", path: "/home/dev/proj/fuse" } } },
    /web: raw_devices\.f\.path: host device/,
  ],
  ["a pci device", { raw_devices: { p: { type: "pci", address: "0000:01:00.0" } } }, /"pci"/],
  ["an unknown device type", { raw_devices: { p: { type: "weird" } } }, /"weird" is refused/],
  [
    "a disk with a raw mount option",
    { raw_devices: { d: { type: "disk", source: "./src", path: "/d", "raw.mount.options": "x" } } },
    /web: raw_devices\.d\.raw\.mount\.options: isb never passes raw/,
  ],
  [
    "a ceph disk",
    { raw_devices: { d: { type: "disk", source: "ceph:pool/vol", path: "/d" } } },
    /ceph sources are refused/,
  ],
  [
    "a pool disk whose source is a path",
    { raw_devices: { d: { type: "disk", pool: "default", source: "/home/dev", path: "/d" } } },
    /raw_devices\.d\.source: "\/home\/dev" is not a volume name/,
  ],
  [
    "a source on the root disk",
    { raw_devices: { root: { source: "~/.ssh" } } },
    /web: raw_devices\.root\.source: the root disk takes no source/,
  ],
  [
    "a pool disk whose source climbs",
    { raw_devices: { d: { type: "disk", pool: "default", source: "v/../../x", path: "/d" } } },
    /is not a volume name/,
  ],
  [
    "a mount option under raw.",
    { volumes: [{ source: "./src", target: "/s", options: { "raw.mount.options": "x" } }] },
    /web: \/s: options\.raw\.mount\.options: isb never passes raw/,
  ],
  [
    "a port option under raw.",
    { ports: [{ listen: 1, connect: 2, options: { "raw.x": "y" } }] },
    /web: port options\.raw\.x/,
  ],
  [
    "an abstract socket on the host",
    { ports: [{ listen: "unix:/run/a", connect: "unix:@/tmp/.X11-unix/X0", bind: "guest" }] },
    /web: port connect: an abstract socket on the host/,
  ],
];

for (const [what, over, text] of RAW) {
  Deno.test(`resolve refuses ${what}`, () => {
    refused(over, text, /./, what);
  });
}

Deno.test("resolve keeps what cannot name a host path: raw.idmap lines, listed devices", () => {
  const d = resolve(
    spec({
      raw_config: {
        "raw.idmap": "both 1000 1000\nuid 2000-2010 3000-3010",
        "security.nesting": "1",
      },
      idmap: { raw: "gid 20 1000" },
      raw_devices: {
        fuse: { type: "unix-char", source: "/dev/fuse", path: "/dev/fuse" },
        tun: { type: "unix-char", path: "/dev/net/tun" },
        gpu: { type: "gpu" },
        vol: { type: "disk", pool: "default", source: "cache", path: "/cache" },
        agent: { type: "proxy", listen: "unix:/home/dev/proj/a.sock", connect: "tcp:127.0.0.1:1" },
      },
    }),
    { host: HOST, baseDir: `${HOME}/proj` },
  );
  assert.equal(d.config["raw.idmap"], "both 1000 1000\nuid 2000-2010 3000-3010");
  assert.equal(d.devices.fuse!.props.source, "/dev/fuse");
  assert.equal(d.devices.vol!.props.source, "cache");
  assert.equal(d.devices.agent!.props.listen, "unix:/home/dev/proj/a.sock");
});

Deno.test("resolve protects the default roots when the host facts name none", () => {
  const bare = testHost({ home: HOME, realPath });
  assert.throws(
    () =>
      resolve(spec({ raw_devices: { k: { type: "disk", source: "~/.ssh", path: "/k" } } }), {
        host: bare,
        baseDir: `${HOME}/proj`,
      }),
    /raw_devices\.k\.source ~\/\.ssh \(\/home\/dev\/\.ssh\) is under \/home\/dev\/\.ssh/,
  );
});
