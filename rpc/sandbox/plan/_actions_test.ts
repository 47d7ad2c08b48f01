import assert from "node:assert/strict";
import { type Action, buildReport, renderAction, restartLine } from "./_actions.ts";

const RENDER: [Action, string][] = [
  [{ action: "create_volume", pool: "p", volume: "v", config: {} }, "+ volume v (pool p)"],
  [{
    action: "create_instance",
    image: "debian-base",
    pool: "p",
    config: {},
    devices: { root: {}, a: {} },
    profiles: [],
  }, "+ create from debian-base on pool p with 2 device(s)"],
  [
    { action: "set_config", key: "user.a", to: "2", restart: false },
    "~ config user.a: (unset) -> 2",
  ],
  [
    { action: "set_config", key: "raw.idmap", from: "x", to: "y", restart: true },
    "~ config raw.idmap: x -> y (takes effect on restart)",
  ],
  [{
    action: "set_config",
    key: "environment.T",
    from: "(secret)",
    to: "(secret)",
    restart: false,
    secret: true,
  }, "~ config environment.T: (secret) -> (secret)"],
  [
    { action: "add_device", device: "src", props: { type: "disk", source: "/s", path: "/src" } },
    "+ device src: path=/src source=/s",
  ],
  [{
    action: "replace_device",
    device: "a",
    replaces: "a",
    from: { type: "disk", path: "/a" },
    to: { type: "disk", path: "/b" },
  }, "~ device a: path=/a -> path=/b"],
  [{
    action: "replace_device",
    device: "a",
    replaces: "old",
    from: { path: "/a" },
    to: { path: "/a", source: "/s" },
  }, "~ device old -> a: path=/a -> path=/a source=/s"],
  [{ action: "remove_device", device: "x", props: {} }, "- device x"],
  [{ action: "start_instance" }, "> start"],
  [{
    action: "add_port",
    device: "p",
    props: { type: "proxy", listen: "tcp:127.0.0.1:5000" },
    search: 3,
  }, "+ port p: listen=tcp:127.0.0.1:5000 (search 3)"],
  [{ action: "fix_owner", path: "/c", owner: "dev" }, "~ chown dev /c"],
  [{ action: "note", message: "hi" }, "  note: hi"],
];

for (const [a, want] of RENDER) {
  Deno.test(`renderAction renders ${a.action} as ${JSON.stringify(want)}`, () => {
    assert.equal(renderAction(a), want);
  });
}

Deno.test("buildReport collects restart_needed from applied restart-flagged set_config", () => {
  const applied: Action[] = [
    { action: "set_config", key: "raw.idmap", to: "x", restart: true },
    { action: "set_config", key: "user.a", to: "1", restart: false },
    { action: "note", message: "n" },
  ];
  assert.deepStrictEqual(
    buildReport("web", { created: false, applied, ports: { p: "tcp:127.0.0.1:5001" } }),
    {
      name: "web",
      created: false,
      applied,
      ports: { p: "tcp:127.0.0.1:5001" },
      restart_needed: ["raw.idmap"],
    },
  );
  assert.deepStrictEqual(buildReport("web", { created: true, applied: [] }).ports, {});
  assert.equal(
    restartLine("web", ["raw.idmap", "security.nesting"]),
    "web: raw.idmap, security.nesting changed; takes effect after `isb restart web`",
  );
});
