/**
 * `isx mcp` under `INCUS_PROJECT` (issue 19): an instance it creates lands in that project
 * (one this test made, with its own bridge), every tool naming the instance finds it there,
 * and `instance_activity` counts the model call the instance made through the real proxy,
 * which keys instances outside `default` as `<project>/<name>`. Before the fix the answer
 * was all zeros, with no `counting_since`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { NO_INCUS } from "../helpers/live.ts";
import { call, connect, makeHome } from "../helpers/mcp.ts";
import { HostLab } from "../helpers/host_lab.ts";
import { HOST_PROXY_KEY, HostProxy } from "../helpers/host_proxy.ts";
import { isNotFound } from "../../rpc/mod.ts";

const TEMPLATE = "tpl-minimal";
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;
const text = (r: Record<string, unknown>) =>
  ((r.content as { text?: string }[] | undefined) ?? []).map((c) => c.text ?? "").join("\n");

Deno.test({
  name:
    "isx mcp under INCUS_PROJECT creates, execs and counts a model call in that project (instance_activity)",
  ignore: NO_INCUS,
  async fn() {
    await using lab = await HostLab.open({ template: TEMPLATE });
    await using proxy = await HostProxy.start(lab);
    const h = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
    Deno.writeTextFileSync(`${h.configDir}/config.yaml`, proxy.config(lab));
    h.env.INCUS_PROJECT = lab.project;
    // the preflight compares the proxy's CA with the template's: this proxy is the test's own
    const c = await connect(h, "legacy", { extra: ["--no-preflight"] });
    try {
      const made = await call(c, "create_instance", { template: TEMPLATE, name_hint: "proj" });
      assert.equal(made.isError ?? false, false, text(made));
      const name = String(sc(made).instance);
      // in the lab's project, not the user's
      assert.equal((await lab.scoped.getInstance(name)).value.name, name);
      await assert.rejects(lab.incus.getInstance(name), (e) => isNotFound(e));
      const listed = sc(await call(c, "list_instances", {}));
      assert.ok(JSON.stringify(listed).includes(name), JSON.stringify(listed));
      const before = sc(await call(c, "instance_activity", { instance: name }));
      assert.equal(before.requests, 0, JSON.stringify(before));
      const r = await call(c, "exec", {
        instance: name,
        command: proxy.modelCallCommand(lab.gateway),
        timeout_seconds: 60,
      });
      const out = String(sc(r).stdout ?? "");
      assert.match(out, /^HTTP\/1\.1 200/, `${text(r)}\n${out}`);
      assert.equal(proxy.mock.modelCalls().length, 1, "the mock got the call");
      assert.equal(
        proxy.mock.modelCalls()[0]!.headers["x-api-key"],
        HOST_PROXY_KEY,
        "the proxy injected its key for this instance",
      );
      const act = sc(await call(c, "instance_activity", { instance: name }));
      assert.equal(act.instance, name);
      assert.equal(act.requests, 1, JSON.stringify(act));
      assert.equal(typeof act.counting_since, "string", JSON.stringify(act));
      assert.ok(Number(act.input_tokens) > 0, JSON.stringify(act));
      const gone = sc(await call(c, "destroy_instance", { instance: name }));
      assert.equal(gone.already, false);
      await assert.rejects(lab.scoped.getInstance(name), (e) => isNotFound(e));
    } finally {
      await c.close();
    }
  },
});
