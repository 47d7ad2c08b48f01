import assert from "node:assert/strict";
import { EMPTY_TREE, parseBases, parseNumstatZ, patchLimit } from "./core.ts";
import { diffRepos, findRepos, GitError, recordBases } from "./git.ts";
import { diffMain } from "./main.ts";

async function sh(cwd: string, script: string): Promise<string> {
  const out = await new Deno.Command("bash", {
    args: ["-ec", script],
    cwd,
    env: {
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@t",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@t",
    },
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return text;
}

const long = () => ({ signal: AbortSignal.timeout(60_000) });

/** A work tree: repo `w` (a commit), nested repo `w/sub/inner` (a commit), `w/a/b/c/d` too deep. */
async function workTree(): Promise<string> {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "isx-diff-test-" }));
  await sh(
    root,
    `mkdir w && cd w && git init -q && printf 'one\\ntwo\\n' > a.txt && git add . && git commit -qm 1
     mkdir -p sub/inner && cd sub/inner && git init -q && echo x > x.txt && git add . && git commit -qm 1
     cd ../.. && mkdir -p a/b/c/deep && cd a/b/c/deep && git init -q`,
  );
  return root;
}

Deno.test("core: base lines, NUL numstat and the patch limit", () => {
  const c = "a".repeat(40);
  assert.deepEqual(
    parseBases(`${c} /w\nbad line\n${c} rel\n${"g".repeat(40)} /x\n${c} /a/../b\n`),
    [
      { commit: c, repo: "/w" },
    ],
  );
  assert.deepEqual(parseNumstatZ("3\t1\tsrc/A.java\0-\t-\timg.png\0" + "1\t0\tname\twith tab\0"), [
    { path: "src/A.java", added: 3, deleted: 1 },
    { path: "img.png", added: null, deleted: null },
    { path: "name\twith tab", added: 1, deleted: 0 },
  ]);
  assert.equal(patchLimit(undefined), 256 * 1024);
  assert.equal(patchLimit(10), 1024);
  assert.equal(patchLimit(1e9), 1024 * 1024);
});

Deno.test("findRepos finds the repo at or above cwd and .git dirs up to 3 levels below", async () => {
  const root = await workTree();
  try {
    assert.deepEqual(await findRepos(`${root}/w`, long()), [`${root}/w`, `${root}/w/sub/inner`]);
    assert.deepEqual(await findRepos(`${root}/w/sub`, long()), [
      `${root}/w`,
      `${root}/w/sub/inner`,
    ]);
    const bases = await recordBases(root, long());
    assert.deepEqual(bases.map((b) => b.repo), [`${root}/w`, `${root}/w/sub/inner`]);
    await sh(root, "mkdir empty && cd empty && git init -q");
    const e = await recordBases(`${root}/empty`, long());
    assert.deepEqual(e, [{ commit: EMPTY_TREE, repo: `${root}/empty` }]);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("diffRepos shows committed, uncommitted and untracked changes; the index is untouched", async () => {
  const root = await workTree();
  try {
    const bases = await recordBases(`${root}/w`, long());
    await sh(
      `${root}/w`,
      `echo three >> a.txt && git commit -qam 2          # committed
       printf 'ONE\\ntwo\\nthree\\n' > a.txt               # uncommitted
       echo new > untracked.txt && printf '\\0\\1' > bin.dat  # untracked, binary
       echo staged > staged.txt && git add staged.txt     # in the real index
       echo y >> sub/inner/x.txt                          # the nested repo`,
    );
    const status = await sh(`${root}/w`, "git status --porcelain; git diff --cached --stat");
    const res = await diffRepos(bases, long());
    assert.equal(await sh(`${root}/w`, "git status --porcelain; git diff --cached --stat"), status);
    const w = res.repos.find((r) => r.repo === `${root}/w`)!;
    const byPath = Object.fromEntries(w.files.map((f) => [f.path, f]));
    assert.deepEqual(byPath["a.txt"], { path: "a.txt", added: 2, deleted: 1 });
    assert.deepEqual(byPath["untracked.txt"], { path: "untracked.txt", added: 1, deleted: 0 });
    assert.deepEqual(byPath["bin.dat"], { path: "bin.dat", added: null, deleted: null });
    assert.ok(byPath["staged.txt"]);
    const inner = res.repos.find((r) => r.repo === `${root}/w/sub/inner`)!;
    assert.deepEqual(inner.files, [{ path: "x.txt", added: 1, deleted: 0 }]);
    assert.equal(res.too_large, false);
    assert.match(res.patch!, /\+ONE/);
    assert.match(res.patch!, new RegExp(`a${root}/w/sub/inner/x.txt`), "repos told apart");
    assert.equal(res.patch_bytes, new TextEncoder().encode(res.patch!).length);

    const only = await diffRepos(bases, { ...long(), path: "untracked.txt" });
    assert.deepEqual(only.repos[0]!.files.map((f) => f.path), ["untracked.txt"]);
    const stat = await diffRepos(bases, { ...long(), stat: true });
    assert.equal(stat.patch, undefined);
    await sh(`${root}/w`, "head -c 5000 /dev/zero | tr '\\0' 'x' | fold -w 50 > big.txt");
    const big = await diffRepos(bases, { ...long(), maxBytes: 1024 });
    assert.equal(big.too_large, true);
    assert.equal(big.patch, undefined);
    assert.ok(big.patch_bytes > 5000, "the full size is still counted");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a pathspec from a client is one argument: no option, no shell", async () => {
  const root = await workTree();
  try {
    const bases = await recordBases(`${root}/w`, long());
    await sh(`${root}/w`, "echo z > 'odd $(touch pwned) name.txt'");
    const res = await diffRepos(bases, { ...long(), path: "--output=/tmp/isx-pwned" });
    assert.deepEqual(res.repos[0]!.files, []);
    assert.ok(!(await Deno.stat("/tmp/isx-pwned").catch(() => undefined)));
    const all = await diffRepos(bases, long());
    assert.ok(all.repos[0]!.files.some((f) => f.path === "odd $(touch pwned) name.txt"));
    assert.ok(!(await Deno.stat(`${root}/w/pwned`).catch(() => undefined)));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("diffRepos stops at the deadline with a timeout error", async () => {
  const root = await workTree();
  try {
    const bases = await recordBases(`${root}/w`, long());
    await assert.rejects(
      diffRepos(bases, { signal: AbortSignal.abort() }),
      (e) => e instanceof GitError && e.kind === "timeout",
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("diffMain records base.txt at run 1 and answers diff as JSON", async () => {
  const root = await workTree();
  try {
    const dir = `${root}/task`;
    await Deno.mkdir(dir);
    await Deno.writeTextFile(`${dir}/cwd`, `${root}/w\n`);
    let out = "";
    assert.equal(await diffMain(["record", "--dir", dir], (s) => out = s), 0);
    assert.match(await Deno.readTextFile(`${dir}/base.txt`), /^[0-9a-f]{40} \//);
    await sh(`${root}/w`, "echo more >> a.txt");
    assert.equal(await diffMain(["diff", "--dir", dir, "--stat"], (s) => out = s), 0);
    const res = JSON.parse(out);
    assert.deepEqual(res.repos[0].files, [{ path: "a.txt", added: 1, deleted: 0 }]);
    await assert.rejects(diffMain(["diff", "--dir", "rel"], () => {}), /usage/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
