/**
 * A delegated run's `traffic_*` counts only what the agent itself requested (issue 19). The
 * SDK client over stdio against the real `isx mcp`, an instance it created from `tpl-agents`,
 * the agents lab's real proxy (in this process) and model mocks; the guest's login profile
 * points `HTTPS_PROXY` at the lab proxy's forward port, as a user's instance has it at the
 * user's proxy, so every request the guest makes outside the intercepted model host is
 * counted there (the lab proxy resolves no name: counted, refused, nothing leaves the host).
 *
 * After a Claude Code delegation and a `get_diff` (the two guest `deno` starts: the runner
 * and the diff's guest half), the instance's `/activity` grew by exactly the requests the
 * mock answered, all of them model calls: no Deno release check to its download host (which
 * `GUEST_DENO_ENV`, guest/agents/argv.ts, turns off) and nothing else. A control at the end
 * shows that a guest request to Deno's host through the same route is counted, so the
 * equality above can fail. Needs the built template; without it the test is ignored.
 *
 * @module
 */

import assert from "node:assert/strict";
import { NO_INCUS } from "../helpers/live.ts";
import { call, connect, makeHome, refusal, settle } from "../helpers/mcp.ts";
import { AGENTS_TEMPLATE, AgentsLab, ensureTemplate, PROJECT } from "../helpers/agents_lab.ts";

const WANTED = Deno.env.get("ISX_TEST_AGENTS") !== "0";
const HAVE = !NO_INCUS && WANTED && await ensureTemplate().then(() => true);
if (!NO_INCUS && WANTED && !HAVE) {
  // deno-lint-ignore no-console
  console.error(`delegate traffic test skipped: no ${AGENTS_TEMPLATE} (isx build tpl-agents)`);
}
/** After isx.sh (the template's) and the lab's zz-isx-test.sh. */
const PROXY_PROFILE = "/etc/profile.d/zzz-isx-test-forward.sh";
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;
const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]!.text;

Deno.test({
  name: "a delegated run's traffic_* counts only the agent's model calls (no deno update check)",
  ignore: !HAVE,
  async fn() {
    const h = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\n` });
    const c = await connect(h, "legacy", { extra: ["--no-preflight"] });
    let lab: AgentsLab | undefined;
    let instance = "";
    try {
      const made = await call(c, "create_instance", {
        template: AGENTS_TEMPLATE,
        name_hint: "deltraffic",
        purpose: "delegate traffic live test",
      });
      assert.equal(refusal(made), undefined, text(made));
      instance = String(sc(made).instance);
      lab = await AgentsLab.open({ instance });
      await lab.pushLoginEnv();
      const fwd = lab.forwardProxy;
      const vars = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"];
      await lab.incus.pushFile(
        instance,
        PROXY_PROFILE,
        vars.map((v) => `export ${v}='${fwd}'\n`).join(""),
        { step: "push the lab's forward proxy", mode: 0o644 },
      );
      const seen = await lab.root(`su - agentuser -c 'echo "$HTTPS_PROXY $NO_PROXY"'`);
      assert.equal(seen.split(" ")[0], fwd, `a login sees the lab's forward proxy: ${seen}`);
      assert.ok(!seen.includes("deno"), `Deno's host is not exempt: ${seen}`);

      const mock = lab.anthropic;
      const before = await lab.activity();
      assert.ok(before, "the lab proxy knows the instance");
      const sent = mock.requests.length;
      const calls = mock.modelCalls().length;
      const out = `${PROJECT}/out-traffic.txt`;
      const r = await call(c, "delegate", {
        instance,
        agent: "claude",
        cwd: PROJECT,
        instruction: `Please do this. MOCK_WRITE_FILE ${out} hello-traffic`,
      });
      assert.equal(refusal(r), undefined, text(r));
      const task = String(sc(r).task_id);
      const st = await settle(c, task);
      assert.equal(st.state, "finished", JSON.stringify(st));
      assert.equal(st.exit_code, 0, JSON.stringify(st));
      const diff = await call(c, "get_diff", { task_id: task });
      assert.equal(refusal(diff), undefined, text(diff));
      assert.match(String(sc(diff).patch ?? ""), /\+hello-traffic/);

      const after = (await lab.activity())!;
      const d = (k: "requests" | "traffic_requests") => after[k] - before[k];
      const modelCalls = mock.modelCalls().length - calls;
      const shown = JSON.stringify({ before, after, mockRequests: mock.requests.length - sent });
      assert.ok(modelCalls >= 2, `the agent called the model: ${shown}`);
      assert.equal(d("requests"), modelCalls, `every model call counted once: ${shown}`);
      assert.equal(
        mock.requests.length - sent,
        modelCalls,
        "the agent asked the mock nothing else",
      );
      assert.equal(
        d("traffic_requests"),
        modelCalls,
        `traffic_requests grew by the model calls and nothing else: ${shown}`,
      );
      assert.equal(after.traffic_requests_in_flight, 0, shown);
      assert.equal(after.refused ?? 0, before.refused ?? 0, shown);
      assert.equal(lab.openai.requests.length, 0, "the other provider saw nothing");

      // the control: the same guest asking Deno's host through this route is counted
      await lab.root(
        `su - agentuser -c "/usr/local/bin/deno eval \\"await fetch('https://dl.deno.land/release-latest.txt').catch(() => {})\\""`,
      );
      const ctl = (await lab.activity())!;
      assert.equal(
        ctl.traffic_requests - after.traffic_requests,
        1,
        `a request to Deno's host is counted: ${JSON.stringify(ctl)}`,
      );
      assert.equal(ctl.requests, after.requests, "and not as a model call");
    } finally {
      if (instance) await call(c, "destroy_instance", { instance }).catch(() => {});
      await c.close();
      await lab?.[Symbol.asyncDispose]();
      await Deno.remove(h.dir, { recursive: true }).catch(() => {});
    }
  },
});
