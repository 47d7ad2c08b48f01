import assert from "node:assert/strict";
import { diffSnapshots, digest, formatChanges, listenersOf, stableConfig } from "./snapshot.ts";
import {
  isLabName,
  labNames,
  labProxyYaml,
  ownerAlive,
  processStamp,
  removeLabLogs,
} from "../helpers/lab.ts";

Deno.test("diffSnapshots names what was added, removed and changed, nothing else", () => {
  const before = {
    "network incusbr0 raw.dnsmasq": "a",
    "proxy pid": "1:2",
    "nft table inet x": "p",
  };
  const after = {
    "network incusbr0 raw.dnsmasq": "b",
    "proxy pid": "1:2",
    "project default instance t": "R",
  };
  const d = diffSnapshots(before, after);
  assert.deepEqual(d, [
    { key: "network incusbr0 raw.dnsmasq", kind: "changed", before: "a", after: "b" },
    { key: "nft table inet x", kind: "removed", before: "p" },
    { key: "project default instance t", kind: "added", after: "R" },
  ]);
  assert.match(formatChanges(d), /changed {2}network incusbr0 raw\.dnsmasq: "a" -> "b"/);
  assert.deepEqual(diffSnapshots(before, { ...before }), []);
});

Deno.test("digest ignores key order; stableConfig drops volatile keys only", async () => {
  assert.equal(
    await digest({ a: 1, b: [{ c: 2, d: 3 }] }),
    await digest({ b: [{ d: 3, c: 2 }], a: 1 }),
  );
  assert.notEqual(await digest({ a: 1 }), await digest({ a: 2 }));
  assert.deepEqual(stableConfig({ "volatile.eth0.hwaddr": "x", "user.k": "v" }), { "user.k": "v" });
});

Deno.test("listenersOf reads one process's listeners from ss -Hltnp", () => {
  const ss = [
    'LISTEN 0 511 10.77.0.1:3128 0.0.0.0:* users:(("deno",pid=20964,fd=24))',
    'LISTEN 0 511 127.0.0.1:18080 0.0.0.0:* users:(("deno",pid=20964,fd=32))',
    'LISTEN 0 511 127.0.0.1:9999 0.0.0.0:* users:(("deno",pid=209640,fd=3))',
  ].join("\n");
  assert.deepEqual(listenersOf(ss, 20964), ["10.77.0.1:3128", "127.0.0.1:18080"]);
});

Deno.test("lab names carry the isxtest prefix; the user's names do not count as the suite's", () => {
  const lab = labNames("0a1b2c");
  assert.deepEqual(lab, {
    id: "0a1b2c",
    project: "isxtest-0a1b2c",
    bridge: "isxtest0a1b2c",
    proxyOnlyBridge: "isxtestp0a1b2c",
  });
  for (
    const n of [
      lab.project,
      lab.bridge,
      lab.proxyOnlyBridge,
      "isx_guard_isxtest0a1b2c",
      "isx-proxy-only-isxtestp0a1b2c",
    ]
  ) {
    assert.ok(isLabName(n), n);
  }
  for (
    const n of [
      "default",
      "incusbr0",
      "isxproxy0",
      "isx_guard",
      "isx_connlimit",
      "isx-proxy-only-isxproxy0",
    ]
  ) {
    assert.ok(!isLabName(n), n);
  }
  assert.ok(lab.bridge.length <= 15 && lab.proxyOnlyBridge.length <= 15, "Linux interface names");
  assert.throws(() => labNames("../x"), TypeError);
  assert.equal(
    labProxyYaml(lab),
    "proxy:\n  bridge: isxtest0a1b2c\n  proxy_only_bridge: isxtestp0a1b2c\n  ports: {health: 9}\n",
  );
});

Deno.test("a lab's owner is alive only while that very process runs (pid and start time)", () => {
  const me = processStamp(Deno.pid)!;
  assert.ok(ownerAlive(me));
  const [pid, start] = me.split(":");
  assert.ok(!ownerAlive(`${pid}:${Number(start) + 1}`), "a reused pid is not the owner");
  assert.ok(!ownerAlive(undefined));
  assert.ok(!ownerAlive("0:0"));
});

Deno.test("removeLabLogs takes a lab's instance and dnsmasq logs, nobody else's", () => {
  const dir = Deno.makeTempDirSync();
  const lab = labNames("0a1b2c");
  const names = [
    "isxtest-0a1b2c_t-x",
    "dnsmasq.isxtest0a1b2c.log",
    "dnsmasq.isxtestp0a1b2c.log",
    "isxtest-999999_t-x",
    "dnsmasq.incusbr0.log",
    "tpl-minimal",
  ];
  for (const n of names) Deno.mkdirSync(`${dir}/${n}`);
  removeLabLogs(lab, dir);
  const left = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  assert.deepEqual(left, ["dnsmasq.incusbr0.log", "isxtest-999999_t-x", "tpl-minimal"]);
  Deno.removeSync(dir, { recursive: true });
});
