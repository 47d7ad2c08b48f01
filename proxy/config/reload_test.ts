import { equal, ok } from "node:assert/strict";
import { LiveReload } from "./reload.ts";
import { loadCredentials, parseCredentials } from "./credentials.ts";
import { Policy } from "./policy.ts";
import { applyHeaderOps, type HeaderOp } from "../relay/rewrite.ts";

const key = (p: Policy) => {
  const r = p.route({ host: "api.anthropic.com", path: "/v1/messages" }, { grant: "all" });
  const h = new Headers();
  if (r.kind === "forward") applyHeaderOps(h, r.ops as HeaderOp[]);
  return h.get("x-api-key");
};

Deno.test("LiveReload applies a changed file, keeps the old credentials for a broken or 0644 one, and says why", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/credentials.yaml`;
  const write = async (text: string, mode = 0o600) => {
    await Deno.writeTextFile(path, text);
    await Deno.chmod(path, mode);
  };
  await write("anthropic: { accounts: { a: { api_key: sk-ant-OLD-1 } } }");
  const policy = new Policy(await loadCredentials(path));
  let now = 1000;
  const reload = await LiveReload.start({
    files: [path, `${dir}/config.yaml`],
    apply: async () => void policy.update(await loadCredentials(path)),
    now: () => now,
    intervalMs: 0,
  });
  try {
    equal(await reload.check(), false, "nothing changed");
    await write("anthropic: { accounts: { a: { api_key: sk-ant-NEW-2 } } }");
    now = 2000;
    equal(await reload.check(), true);
    equal(key(policy), "sk-ant-NEW-2");
    equal(reload.state().reloads, 1);
    equal(reload.state().appliedAt, 2000);
    ok(
      policy.secrets().some((s) => s.reveal() === "sk-ant-OLD-1"),
      "the old key is still scrubbed",
    );

    await write("anthropic: { accounts: { a: { api_key: sk-ant-BROKEN-3 } }");
    now = 3000;
    equal(await reload.check(), false);
    equal(key(policy), "sk-ant-NEW-2", "a file that does not parse keeps the credentials in force");
    const st = reload.state();
    ok(st.error?.startsWith("read credentials: invalid YAML"), String(st.error));
    equal(st.errorSince, 3000);
    ok(!st.error?.includes("sk-ant"), "the error never quotes a value");

    await write("anthropic: { accounts: { a: { api_key: sk-ant-WIDE-4 } } }", 0o644);
    now = 4000;
    equal(await reload.check(), false);
    equal(key(policy), "sk-ant-NEW-2", "a file readable by others keeps them too");
    ok(reload.state().error?.includes("wider than 0600"), String(reload.state().error));
    equal(reload.state().errorSince, 3000, "failing since the first failure");

    await Deno.chmod(path, 0o600);
    now = 5000;
    equal(await reload.check(), true, "fixing the mode applies the file");
    equal(key(policy), "sk-ant-WIDE-4");
    equal(reload.state().error, null);
    equal(reload.state().reloads, 2);
  } finally {
    await reload.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Policy.update swaps every decision at once and reports a change of DNS names", () => {
  const p = new Policy(
    parseCredentials(
      "custom: [{ domain: a.example.dev, bearer: tok-A }]",
    ),
  );
  equal(p.generation, 1);
  equal(p.update(parseCredentials("custom: [{ domain: a.example.dev, bearer: tok-B }]")), false);
  equal(p.update(parseCredentials("custom: [{ domain: b.example.dev, bearer: tok-C }]")), true);
  equal(p.generation, 3);
  ok(p.covers("b.example.dev") && !p.covers("a.example.dev"));
  const all = p.secrets().map((s) => s.reveal()).sort();
  equal(all.join(","), "tok-A,tok-B,tok-C");
});
