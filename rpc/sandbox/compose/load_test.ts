import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { composeLoadResult, loadCompose, projectServices, projectServicesExact } from "./load.ts";
import { load, parseFails } from "./_load_fixture.ts";

Deno.test("loadCompose names the project from the base directory and fills sandbox names", async () => {
  const p = await load({ "f0.yaml": "services:\n  web: {image: dev-base}\n" });
  assert.equal(p.name, "my-project");
  assert.equal(p.baseDir, "/tmp/My Project");
  assert.equal(p.file.services.web!.container_name, "my-project-web");
  assert.equal(p.file.name, "my-project");
});

Deno.test("loadCompose sanitises the file's name and service names", async () => {
  const p = await load({ "f0.yaml": "name: Demo App\nservices:\n  Worker_1: {image: x}\n" });
  assert.equal(p.name, "demo-app");
  assert.equal(p.file.services.Worker_1!.container_name, "demo-app-worker-1");
  const q = await load({ "f0.yaml": "name: x\nservices:\n  web: {image: x}\n" }, {
    projectName: "Given",
  });
  assert.equal(q.file.services.web!.container_name, "given-web");
});

Deno.test("loadCompose names volumes <project>_<key>, the key when external, or name", async () => {
  const p = await load({
    "f0.yaml":
      "name: app\nvolumes:\n  cache: {}\n  shared: {external: true}\n  pinned: {name: exactly-this}\n  bare:\n" +
      "services:\n  web:\n    image: x\n    volumes: [cache:/c, shared:/s, pinned:/p]\n",
  });
  const v = p.file.volumes!;
  assert.equal(v.cache!.name, "app_cache");
  assert.equal(v.shared!.name, "shared");
  assert.equal(v.pinned!.name, "exactly-this");
  assert.equal(v.bare!.name, "app_bare");
  assert.equal(p.file.services.web!.volumes![0]!.source, "cache");
});

Deno.test("composeLoadResult serialises mounts in long form and ports as mappings", async () => {
  const p = await load({
    "/abs/isb.yaml": "name: demo\nvolumes: {cache: {}}\nservices:\n  web:\n    image: dev-base\n" +
      "    volumes: ['./src:/home/dev/src:ro', 'cache:/home/dev/.cache']\n    ports: ['5173-5180:5173']\n" +
      "    exec: {login: false}\n",
  });
  assert.deepStrictEqual(composeLoadResult(p), {
    name: "demo",
    base_dir: "/abs",
    files: ["/abs/isb.yaml"],
    file: {
      name: "demo",
      volumes: { cache: { name: "demo_cache" } },
      services: {
        web: {
          container_name: "demo-web",
          image: "dev-base",
          volumes: [
            { type: "bind", source: "./src", target: "/home/dev/src", read_only: true },
            { type: "volume", source: "cache", target: "/home/dev/.cache" },
          ],
          ports: [{ published: "5173-5180", target: 5173 }],
        },
      },
    },
  });
});

Deno.test("loadCompose interpolates before typing and looks vars up before env before .env", async () => {
  const p = await load(
    {
      "f0.yaml":
        'services:\n  web:\n    container_name: "${NAME}"\n    image: dev-base\n    cpus: ${CPUS:-8}\n' +
        '    labels: {wt: "${WT}", from: "${FROM}"}\n',
      ".env": "WT=/dotenv\nFROM=dotenv\n",
    },
    { vars: { NAME: "dev-x" }, env: { NAME: "env-name", FROM: "env" } },
  );
  const w = p.file.services.web!;
  assert.equal(w.container_name, "dev-x");
  assert.equal(w.cpus, "8");
  assert.deepStrictEqual(w.labels, { wt: "/dotenv", from: "env" });
});

Deno.test("loadCompose takes bare environment keys from the variables and drops unset ones", async () => {
  const p = await load(
    {
      "f0.yaml":
        "services:\n  web:\n    image: x\n    environment: [SET, UNSET, A=1]\n    exec: {env: [SET]}\n    labels: [l]\n",
    },
    { env: { SET: "yes" } },
  );
  const w = p.file.services.web!;
  assert.deepStrictEqual(w.environment, { SET: "yes", A: "1" });
  assert.deepStrictEqual(w.exec, { env: { SET: "yes" } });
  assert.deepStrictEqual(w.labels, { l: "" });
});

Deno.test("loadCompose reports an unset variable as parse naming the file and the variable", async () => {
  await parseFails(
    load({ "f0.yaml": 'services:\n  web: {image: "${IMG}"}\n' }),
    "f0.yaml",
    "IMG",
    "is not set",
  );
});

Deno.test("loadCompose merges later files over earlier ones", async () => {
  const p = await load({
    "a.yaml":
      "services:\n  web:\n    image: dev-base\n    cpus: 8\n    labels: [a=1]\n    environment: [X=1]\n" +
      "    ports: ['8080:80']\n    volumes: ['./a:/a', './b:/b']\n    command: [one]\n",
    "b.yaml": "services:\n  web:\n    cpus: 4\n    labels: {b: '2'}\n    environment: [Y=2]\n" +
      "    ports: ['8080:80', '9090:90']\n    volumes: ['./c:/a/:ro']\n    command: two three\n",
  });
  const w = p.file.services.web!;
  assert.equal(w.image, "dev-base");
  assert.equal(w.cpus, "4");
  assert.deepStrictEqual(w.labels, { a: "1", b: "2" });
  assert.deepStrictEqual(w.environment, { X: "1", Y: "2" });
  assert.equal(w.ports!.length, 2);
  assert.deepStrictEqual(w.volumes!.map((v) => [v.source, v.read_only ?? false]), [["./c", true], [
    "./b",
    false,
  ]]);
  assert.deepStrictEqual(w.command, ["two", "three"]);
});

Deno.test("loadCompose applies anchors and merge keys and drops x-* and version", async () => {
  const p = await load({
    "f0.yaml":
      "version: '3.8'\nx-common: &common\n  image: dev-base\n  cpus: 2\nservices:\n  a:\n    <<: *common\n" +
      "    x-note: hi\n  b:\n    <<: *common\n    cpus: 3\n",
  });
  assert.equal(p.file.services.a!.cpus, "2");
  assert.equal(p.file.services.b!.cpus, "3");
  assert.equal(p.file.services.b!.image, "dev-base");
});

Deno.test("loadCompose skips an empty document", async () => {
  const p = await load({ "a.yaml": "services:\n  web: {image: x}\n", "b.yaml": "# nothing\n" });
  assert.deepStrictEqual(Object.keys(p.file.services), ["web"]);
});

const FILE_ERRORS = [
  { name: "an unknown service field", doc: "services:\n  web: {image: x, mem: 1}\n", has: ["mem"] },
  { name: "an unknown top-level field", doc: "service:\n  web: {image: x}\n", has: ["service"] },
  {
    name: "build, with a hint",
    doc: "services:\n  web: {image: x, build: .}\n",
    has: ["`build` is not an isb key", "image"],
  },
  {
    name: "env_file, with a hint",
    doc: "services:\n  web: {image: x, env_file: a.env}\n",
    has: ["environment"],
  },
  {
    name: "profiles, with a hint",
    doc: "services:\n  web: {image: x, profiles: [dev]}\n",
    has: ["incus_profiles"],
  },
  {
    name: "a service name, with a hint",
    doc: "services:\n  web: {image: x, name: y}\n",
    has: ["container_name"],
  },
  {
    name: "top-level networks, with a hint",
    doc: "networks: {}\nservices: {}\n",
    has: ["`networks`"],
  },
  { name: "sandboxes, with a hint", doc: "sandboxes:\n  web: {image: x}\n", has: ["services"] },
  {
    name: "exec.user, with a hint",
    doc: "services:\n  web: {image: x, exec: {user: dev}}\n",
    has: ["user on the service"],
  },
  { name: "bad YAML", doc: "services: [\n", has: [] },
  { name: "duplicate keys", doc: "services: {}\nservices: {}\n", has: ["duplicated mapping key"] },
  { name: "a list at the top", doc: "- a\n", has: ["mapping"] },
  {
    name: "a port with search",
    doc: "services:\n  web: {image: x, ports: [{target: 1, published: 2, search: 3}]}\n",
    has: ["search is not an isb key"],
  },
];

for (const c of FILE_ERRORS) {
  Deno.test(`loadCompose refuses ${c.name} naming the file`, async () => {
    await parseFails(load({ "f0.yaml": c.doc }), "f0.yaml", ...c.has);
  });
}

Deno.test("loadCompose finds isb.yaml (else isb.yml) plus an override, and .env beside it", async () => {
  const p = await loadCompose({
    cwd: "/w",
    readTextFile: (f) =>
      Promise.resolve(
        ({
          "/w/isb.yml": 'services:\n  web: {image: "${IMG}"}\n',
          "/w/isb.override.yaml": "services:\n  web: {cpus: 2}\n",
          "/w/.env": "IMG=from-dotenv\n",
        } as Record<string, string>)[f]!,
      ),
    isFile: (f) => Promise.resolve(["/w/isb.yml", "/w/isb.override.yaml", "/w/.env"].includes(f)),
    env: () => undefined,
  });
  assert.deepStrictEqual(p.files, ["./isb.yml", "./isb.override.yaml"]);
  assert.equal(p.file.services.web!.image, "from-dotenv");
  assert.equal(p.file.services.web!.cpus, "2");
  assert.equal(p.name, "w");
});

Deno.test("loadCompose with no compose file is invalid naming the directory", async () => {
  await assert.rejects(
    loadCompose({
      cwd: "/empty",
      readTextFile: () => Promise.reject(new Error("x")),
      isFile: () => Promise.resolve(false),
      env: () => undefined,
    }),
    (e: unknown) =>
      e instanceof IsbError && e.code === "invalid" &&
      e.message.startsWith("no compose file in /empty"),
  );
});

Deno.test("loadCompose reports an unreadable file and a bad env file as parse naming them", async () => {
  await parseFails(load({}, { files: ["missing.yaml"] }), "missing.yaml", "No such file");
  await parseFails(
    load({ "f0.yaml": "services: {}\n", ".env": "oops\n" }),
    "/tmp/My Project/.env",
    "line 1",
  );
});

Deno.test("projectServices adds dependencies in dependency order; unknown names are invalid", async () => {
  const p = await load({
    "f0.yaml":
      "services:\n  web: {image: x, depends_on: [api]}\n  api: {image: x, depends_on: {db: {condition: service_healthy}}}\n  db: {image: x}\n  z: {image: x}\n",
  });
  assert.deepStrictEqual(projectServices(p), ["db", "z", "api", "web"]);
  assert.deepStrictEqual(projectServices(p, ["web"]), ["db", "api", "web"]);
  assert.deepStrictEqual(projectServicesExact(p, ["web", "db"]), ["db", "web"]);
  assert.throws(() => projectServices(p, ["c"]), (e: unknown) => {
    assert.ok(e instanceof IsbError && e.code === "invalid");
    assert.equal(e.message, 'no service "c" in f0.yaml (have: api, db, web, z)');
    return true;
  });
});
