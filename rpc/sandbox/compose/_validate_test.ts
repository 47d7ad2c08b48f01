import assert from "node:assert/strict";
import { load, parseFails } from "./_load_fixture.ts";

const MERGED_ERRORS = [
  {
    name: "an undeclared named volume",
    doc: "services:\n  web: {image: x, volumes: ['cache:/c']}\n",
    has: ['"cache"', "not declared"],
  },
  {
    name: "an unknown dependency",
    doc: "services:\n  web: {image: x, depends_on: [db]}\n",
    has: ['depends on "db", which is not a service here'],
  },
  {
    name: "a self dependency",
    doc: "services:\n  web: {image: x, depends_on: [web]}\n",
    has: ["depends on itself"],
  },
  {
    name: "a dependency cycle",
    doc: "services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [a]}\n",
    has: ["cycle among: a, b"],
  },
  {
    name: "a secret with two sources",
    doc: "secrets: {k: {file: ./k, environment: K}}\nservices: {}\n",
    has: ["exactly one"],
  },
  {
    name: "a secret with no source",
    doc: "secrets: {k: {}}\nservices: {}\n",
    has: ["exactly one"],
  },
  {
    name: "a driver without name",
    doc: "secrets: {k: {driver: op}}\nservices: {}\n",
    has: ["driver needs name"],
  },
  {
    name: "name without external or driver",
    doc: "secrets: {k: {environment: K, name: x}}\nservices: {}\n",
    has: ["name goes with"],
  },
  { name: "an empty age", doc: "secrets: {k: {age: '  '}}\nservices: {}\n", has: ["age is empty"] },
  {
    name: "a short refresh",
    doc: "secrets: {k: {driver: d, name: r, refresh: 1s}}\nservices: {}\n",
    has: ["at least 10s"],
  },
  {
    name: "refresh without driver",
    doc: "secrets: {k: {external: true, refresh: 1h}}\nservices: {}\n",
    has: ["refresh goes with driver"],
  },
  {
    name: "an external secret with a bad key",
    doc: "secrets: {'k/x': {external: true}}\nservices: {}\n",
    has: ["external secret"],
  },
  {
    name: "an undeclared secret",
    doc: "services:\n  web: {image: x, secrets: [k]}\n",
    has: ['uses secret "k", which is not declared'],
  },
  {
    name: "a bad secret mode",
    doc:
      "secrets: {k: {file: ./k}}\nservices:\n  web: {image: x, secrets: [{source: k, mode: '0999'}]}\n",
    has: ["not an octal mode"],
  },
  {
    name: "an undeclared env secret",
    doc: "services:\n  web: {image: docker:busybox, environment: {T: {secret: nope}}}\n",
    has: ["not declared"],
  },
  {
    name: "env secrets on a system image without command",
    doc:
      "secrets: {k: {environment: K}}\nservices:\n  web: {image: dev-base, environment: {T: {secret: k}}}\n",
    has: ["need a command"],
  },
  {
    name: "a healthcheck with a bad test",
    doc: "services:\n  web: {image: x, healthcheck: {test: [RUN, x]}}\n",
    has: ["must start with CMD"],
  },
  {
    name: "a healthcheck without a test",
    doc: "services:\n  web: {image: x, healthcheck: {interval: 5s}}\n",
    has: ["needs a test"],
  },
  {
    name: "a global deploy mode",
    doc: "services:\n  web: {image: x, deploy: {mode: global}}\n",
    has: ["only replicated"],
  },
  {
    name: "cpus twice",
    doc: "services:\n  web: {image: x, cpus: 2, deploy: {resources: {limits: {cpus: 1}}}}\n",
    has: ["not both"],
  },
  {
    name: "an unquotable OCI command",
    doc: 'services:\n  web: {image: docker:x, command: ["it\'s \\"x\\""]}\n',
    has: ["both ' and"],
  },
  {
    name: "a secret target that climbs out of /run/secrets",
    doc:
      "secrets: {k: {file: ./k}}\nservices:\n  web: {image: x, secrets: [{source: k, target: ../../etc/cron.d/x}]}\n",
    has: ['service "web": secrets[0].target "../../etc/cron.d/x" has a . or .. segment'],
  },
  {
    name: "an absolute secret target outside /run/secrets",
    doc:
      "secrets: {k: {file: ./k}}\nservices:\n  web: {image: x, secrets: [{source: k, target: /root/.ssh/authorized_keys}]}\n",
    has: ["secrets[0].target", "is absolute outside /run/secrets"],
  },
  {
    name: "a user with a newline (a unit line of its own)",
    doc: 'services:\n  web: {image: x, command: [app], user: "dev\\nExecStartPre=/bin/sh"}\n',
    has: ['service "web": user', "has a control character"],
  },
  {
    name: "a relative working_dir",
    doc: "services:\n  web: {image: x, command: [app], working_dir: srv}\n",
    has: ['service "web": working_dir "srv" is not an absolute path'],
  },
  {
    name: "a working_dir with a control character",
    doc: 'services:\n  web: {image: x, command: [app], working_dir: "/srv\\u0007"}\n',
    has: ["working_dir", "has a control character"],
  },
];

for (const c of MERGED_ERRORS) {
  Deno.test(`loadCompose refuses ${c.name} naming the merged files`, async () => {
    await parseFails(load({ "a.yaml": c.doc, "b.yaml": "" }), "a.yaml + b.yaml", ...c.has);
  });
}

Deno.test("loadCompose accepts each single secret source and env secrets where they can go", async () => {
  for (
    const ok of [
      "{file: ./k}",
      "{environment: K}",
      "{external: true}",
      "{external: true, name: db.password}",
      "{age: YWdl}",
      "{driver: op, name: 'op://v/i/f', refresh: 30m}",
    ]
  ) {
    await load({ "f0.yaml": `secrets:\n  k: ${ok}\nservices:\n  web: {image: x, secrets: [k]}\n` });
  }
  await load({
    "f0.yaml":
      "secrets: {k: {environment: K}}\nservices:\n  web: {image: dev-base, command: [app], environment: {T: {secret: k}}}\n",
  });
  await load({
    "f0.yaml":
      "secrets: {k: {environment: K}}\nservices:\n  web: {image: docker:busybox, environment: {T: {secret: k}}}\n",
  });
});

Deno.test("loadCompose folds deploy.resources.limits into cpus and mem_limit", async () => {
  const p = await load({
    "f0.yaml":
      "services:\n  web: {image: x, deploy: {mode: replicated, resources: {limits: {cpus: '2.0', memory: 512m}}}}\n",
  });
  assert.equal(p.file.services.web!.cpus, "2");
  assert.equal(p.file.services.web!.mem_limit, "512m");
});
