import assert from "node:assert/strict";
import {
  ComposeFileSchema,
  ExecDefaultsSchema,
  parseSpec,
  serializeComposeFile,
  serializeSpec,
  specJsonSchema,
} from "./spec.ts";

const SERIALISES = [
  {
    name: "a short bind mount with ro serialises in long form",
    in: { volumes: ["./src:/home/dev/src:ro"] },
    out: { volumes: [{ type: "bind", source: "./src", target: "/home/dev/src", read_only: true }] },
  },
  {
    name: "a short named mount serialises in long form without defaults",
    in: { volumes: ["cache:/home/dev/.cache"] },
    out: { volumes: [{ type: "volume", source: "cache", target: "/home/dev/.cache" }] },
  },
  {
    name: "short mount options map to fields and options",
    in: { volumes: ["v:/x:owner=dev,device=d,pool=p,external,nocopy,rslave,z"] },
    out: {
      volumes: [{
        type: "volume",
        source: "v",
        target: "/x",
        external: true,
        pool: "p",
        owner: "dev",
        device: "d",
        volume: { nocopy: true },
        options: { propagation: "rslave" },
      }],
    },
  },
  {
    name: "a long mount infers its type and drops false flags",
    in: { volumes: [{ source: "~/x", target: "/x", read_only: "no", owner: 1000 }] },
    out: { volumes: [{ type: "bind", source: "~/x", target: "/x", owner: "1000" }] },
  },
  {
    name: "a published range with one target serialises as a mapping with a string range",
    in: { ports: ["5173-5180:5173"] },
    out: { ports: [{ published: "5173-5180", target: 5173 }] },
  },
  {
    name: "a guest-bound proxy serialises in proxy form with strings",
    in: { ports: [{ listen: 8190, connect: 8080, bind: "guest" }] },
    out: { ports: [{ bind: "guest", listen: "8190", connect: "8080" }] },
  },
  {
    name: "an IPv6 udp port keeps host_ip unbracketed and protocol",
    in: { ports: ["[::1]:8080:80/udp"] },
    out: { ports: [{ published: 8080, target: 80, host_ip: "::1", protocol: "udp" }] },
  },
  {
    name: "two equal ranges map 1:1 and serialise in proxy form",
    in: { ports: ["8000-8002:9000-9002"] },
    out: { ports: [{ listen: "tcp:127.0.0.1:8000-8002", connect: "tcp:9000-9002" }] },
  },
  {
    name: "a long mapping keeps name, host_ip and options",
    in: {
      ports: [{
        target: 80,
        published: "8080",
        host_ip: "0.0.0.0",
        name: "web",
        options: { nat: true },
      }],
    },
    out: {
      ports: [{
        name: "web",
        published: 8080,
        target: 80,
        host_ip: "0.0.0.0",
        options: { nat: "true" },
      }],
    },
  },
  {
    name: "a host-bound proxy on a default connect host serialises as a mapping",
    in: { ports: [{ listen: "tcp:127.0.0.1:3000", connect: "tcp:127.0.0.1:3001" }] },
    out: { ports: [{ published: 3000, target: 3001 }] },
  },
  {
    name: "exec.login false is omitted and a list env becomes a map",
    in: { exec: { login: "false", env: ["A=1", "B=x=y"] } },
    out: { exec: { env: { A: "1", B: "x=y" } } },
  },
  {
    name: "exec.login true is kept",
    in: { exec: { login: "yes" } },
    out: { exec: { login: true } },
  },
  {
    name: "string maps stringify scalars with floats in shortest form",
    in: { raw_config: { a: 1, b: true, c: 1.0, d: 0.25, e: "x" } },
    out: { raw_config: { a: "1", b: "true", c: "1", d: "0.25", e: "x" } },
  },
  {
    name: "int-or-string fields are stored as strings",
    in: { cpus: 2, mem_limit: 512, ready_timeout: 90, user: 1000 },
    out: { cpus: "2", mem_limit: "512", ready_timeout: "90", user: "1000" },
  },
  {
    name: "label lists take bare keys as empty labels",
    in: { labels: ["a", "b=2"] },
    out: { labels: { a: "", b: "2" } },
  },
  {
    name: "lenient booleans accept yes/on/1 and off/0/empty",
    in: { privileged: "ON" },
    out: { privileged: true },
  },
  {
    name: "type vm is virtual-machine and container is the omitted default",
    in: { type: "vm" },
    out: { type: "virtual-machine" },
  },
  {
    name: "a plain container type is omitted",
    in: { type: "container" },
    out: {},
  },
  {
    name: "depends_on as a list becomes a map of service_started",
    in: { depends_on: ["db"] },
    out: { depends_on: { db: { condition: "service_started" } } },
  },
  {
    name: "restart false means no",
    in: { restart: false },
    out: { restart: "no" },
  },
  {
    name: "a string command is split like a shell line",
    in: { command: "sh -c 'bun install && exec bun run dev'" },
    out: { command: ["sh", "-c", "bun install && exec bun run dev"] },
  },
  {
    name: "ready checks keep names and stringify command items",
    in: { ready: ["running", { user_exists: "dev" }, { command: ["test", 1] }] },
    out: { ready: ["running", { user_exists: "dev" }, { command: ["test", "1"] }] },
  },
  {
    name: "idmap {} fills the map defaults",
    in: { idmap: {} },
    out: {
      idmap: { mode: "auto", host_uid: 1000, host_gid: 1000, guest_uid: 1000, guest_gid: 1000 },
    },
  },
  {
    name: "egress allow without secrets serialises as a list",
    in: { egress: { allow: ["api.example.com"] } },
    out: { egress: ["api.example.com"] },
  },
  {
    name: "egress short secrets parse into env, secret and hosts",
    in: { egress: { secrets: ["TOKEN=gh_token@api.github.com,github.com"] } },
    out: {
      egress: {
        allow: [],
        secrets: [{ env: "TOKEN", secret: "gh_token", hosts: ["api.github.com", "github.com"] }],
      },
    },
  },
  {
    name: "egress none is case-insensitive",
    in: { egress: "NONE" },
    out: { egress: "none" },
  },
  {
    name: "environment keeps secret references",
    in: { environment: { A: 1, T: { secret: "tok" } } },
    out: { environment: { A: "1", T: { secret: "tok" } } },
  },
  {
    name: "a healthcheck string test is a CMD-SHELL line",
    in: { healthcheck: { test: "curl -f localhost", retries: "3", disable: false } },
    out: { healthcheck: { test: ["CMD-SHELL", "curl -f localhost"], retries: 3 } },
  },
];

for (const c of SERIALISES) {
  Deno.test(`parseSpec: ${c.name}`, () => {
    assert.deepStrictEqual(serializeSpec(parseSpec(c.in)), { image: "", ...c.out });
  });
}

Deno.test("parseSpec accepts name as container_name (the rpc docs' example)", () => {
  const s = parseSpec({ name: "web", image: "dev-base", cpus: 2 });
  assert.deepStrictEqual(serializeSpec(s), { container_name: "web", image: "dev-base", cpus: "2" });
});

Deno.test("specJsonSchema is draft 2020-12 titled ComposeFile with SandboxSpec in $defs", () => {
  // deno-lint-ignore no-explicit-any
  const s = specJsonSchema() as Record<string, any>;
  assert.equal(s.$schema, "https://json-schema.org/draft/2020-12/schema");
  assert.equal(s.title, "ComposeFile");
  assert.ok(s.$defs.SandboxSpec);
  assert.ok(JSON.stringify(s).includes("services"));
  assert.equal(s.$defs.SandboxSpec.additionalProperties, false);
  assert.ok("volumes" in s.$defs.SandboxSpec.properties);
});

Deno.test("ComposeFileSchema fills services and serialises ports inside services", () => {
  const f = ComposeFileSchema.parse({
    volumes: { cache: null },
    services: { web: { ports: ["8080:80"] } },
  });
  assert.deepStrictEqual(serializeComposeFile(f), {
    volumes: { cache: {} },
    services: { web: { image: "", ports: [{ published: 8080, target: 80 }] } },
  });
  assert.deepStrictEqual(ComposeFileSchema.parse({}), { services: {} });
});

Deno.test("ExecDefaultsSchema is lenient and drops false login", () => {
  assert.deepStrictEqual(ExecDefaultsSchema.parse({ user: 1000, env: { A: 1 }, login: "false" }), {
    user: "1000",
    env: { A: "1" },
  });
});
