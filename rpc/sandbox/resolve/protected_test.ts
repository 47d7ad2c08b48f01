import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { gatherSecretValues } from "../compose/extras.ts";
import { protectedRoot } from "../../host_paths.ts";
import { protectFs } from "../compose/fs.ts";
import { canonicalBindSource } from "./devices.ts";
import { invalidWith, testHost } from "../../../tests/helpers/host_facts.ts";
import type { ComposeFile } from "../spec/spec.ts";

const ROOTS = ["/home/dev/.config/isx", "/home/dev/.local/state/isx", "/home/dev/.ssh"];

Deno.test("protectedRoot matches a root and what lies under it, at path boundaries only", () => {
  const cases: [string, string | undefined][] = [
    ["/home/dev/.ssh", "/home/dev/.ssh"],
    ["/home/dev/.ssh/id_ed25519", "/home/dev/.ssh"],
    ["/home/dev/.ssh/", "/home/dev/.ssh"],
    ["/home/dev/./.ssh/x", "/home/dev/.ssh"],
    ["/home/dev/proj/../.config/isx/credentials.yaml", "/home/dev/.config/isx"],
    ["/home/dev/.local/state/isx/ca/ca.key", "/home/dev/.local/state/isx"],
    ["/home/dev/.sshfoo", undefined],
    ["/home/dev/.config/isxy/a", undefined],
    ["/home/dev/.local/state/isb/egress", undefined],
    ["/home/dev/proj/secret.txt", undefined],
  ];
  for (const [path, want] of cases) assert.equal(protectedRoot(path, ROOTS), want, path);
});

Deno.test("canonicalBindSource refuses a source in, through a link to, or holding a protected path", () => {
  const links: Record<string, string> = {
    "/home/dev/proj/keys": "/home/dev/.ssh",
    "/home/dev/proj/src": "/home/dev/proj/src",
  };
  const host = testHost({ realPath: (p) => links[p] ?? p, protectedPaths: ROOTS });
  const opts = { baseDir: "/home/dev/proj", host };
  for (const src of ["~/.ssh", "/home/dev/.config/isx", "../.local/state/isx/ca", "./keys"]) {
    invalidWith(() => canonicalBindSource(src, opts), "which isb rpc never reads");
  }
  assert.equal(canonicalBindSource("./src", opts), "/home/dev/proj/src");
  for (const src of ["~", "/", "/home", "~/.config", "~/.local/state", "..", "~/"]) {
    invalidWith(() => canonicalBindSource(src, opts), "which isb rpc never exposes");
  }
  assert.equal(canonicalBindSource("~/.cache", opts), "/home/dev/.cache");
  assert.equal(canonicalBindSource("~/.local/state/isb", opts), "/home/dev/.local/state/isb");
});

Deno.test("gatherSecretValues refuses a secret file under a protected path, even through a symlink", async () => {
  const files: Record<string, string> = {
    "/home/dev/proj/ok.txt": "fine",
    "/home/dev/.ssh/id_ed25519": "PRIVATE KEY",
  };
  const links: Record<string, string> = { "/home/dev/proj/link": "/home/dev/.ssh/id_ed25519" };
  const read: string[] = [];
  for (const file of ["../.ssh/id_ed25519", "/home/dev/.config/isx/credentials.yaml", "./link"]) {
    const compose = {
      secrets: { k: { file } },
      services: { web: { image: "x", secrets: [{ source: "k" }] } },
    } as unknown as ComposeFile;
    await assert.rejects(
      gatherSecretValues(compose, ["web"], {
        baseDir: "/home/dev/proj",
        lookup: () => undefined,
        readTextFile: (p) => {
          read.push(p);
          return Promise.resolve(files[links[p] ?? p] ?? "");
        },
        realPath: (p) => Promise.resolve(links[p] ?? p),
        protectedPaths: ROOTS,
      }),
      (e: unknown) => {
        assert.ok(e instanceof IsbError && e.code === "invalid", String(e));
        assert.match(e.message, /^secret "k": file \/home\/dev\/.+ is under \/home\/dev\//);
        assert.match(e.message, /never reads/);
        assert.ok(!e.message.includes("PRIVATE KEY"));
        return true;
      },
    );
  }
  assert.deepEqual(read, [], "nothing protected was read");
  const ok = await gatherSecretValues(
    {
      secrets: { k: { file: "./ok.txt" } },
      services: { web: { image: "x", secrets: [{ source: "k" }] } },
    } as unknown as ComposeFile,
    ["web"],
    {
      baseDir: "/home/dev/proj",
      lookup: () => undefined,
      readTextFile: (p) => Promise.resolve(files[p] ?? ""),
      realPath: (p) => Promise.resolve(p),
      protectedPaths: ROOTS,
    },
  );
  assert.deepEqual(ok, { k: "fine" });
});

Deno.test("protectFs refuses a file whose canonical path is protected, before reading it", async () => {
  const read: string[] = [];
  const links: Record<string, string> = { "/home/dev/proj/.env": "/home/dev/.ssh/id_ed25519" };
  const fs = protectFs({
    readTextFile: (p) => (read.push(p), Promise.resolve("x")),
    isFile: () => Promise.resolve(true),
    realPath: (p) => Promise.resolve(links[p] ?? p),
  }, ROOTS);
  for (const p of ["/home/dev/proj/.env", "/home/dev/.config/isx/credentials.yaml"]) {
    await assert.rejects(fs.readTextFile(p), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === "invalid", String(e));
      assert.match(e.message, /which isb rpc never reads/);
      return true;
    });
    await assert.rejects(fs.isFile(p), IsbError);
  }
  assert.deepEqual(read, []);
  assert.equal(await fs.readTextFile("/home/dev/proj/isb.yaml"), "x");
});
