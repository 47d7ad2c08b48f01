/**
 * Account pins and template `accounts:` against a real incusd: a root template built with
 * `accounts:` through `isx build`, branched with `isx branch --account`, re-pinned with
 * `isx proxy account set|unset|list` (the CLI, as a person would), and the proxy's own view
 * of the instance (its registry's listing through the Incus client) fed to the policy: the
 * pins and template accounts resolve as docs/proxy.md says and fail closed.
 */

import assert from "node:assert/strict";
import {
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { IsxHome } from "../templates_env.ts";
import { createIncusClient } from "../../rpc/mod.ts";
import { readStamps, SLOW_DAEMON_MS } from "../../mcp/mod.ts";
import {
  ensureCa,
  incusSource,
  loadCa,
  parseCredentials,
  Policy,
  startProxy,
} from "../../proxy/mod.ts";
import type { Secret } from "../../proxy/mod.ts";
import { loopbackListen } from "../helpers/proxy.ts";

const CREDS = `
anthropic:
  accounts:
    work: { api_key: sk-ant-api03-LIVE-work }
    other: { api_key: sk-ant-api03-LIVE-other }
    sub: { oauth_token: sk-ant-oat01-LIVE-sub }
github:
  accounts:
    me: { token: ghp_LIVEme }
`;

Deno.test({
  name:
    "isx build stamps accounts:, isx branch --account and isx proxy account pin, the proxy resolves them",
  ignore: NO_INCUS,
  async fn(t) {
    const p = testName("acc");
    const [tpl, inst] = [`${p}-tpl`, `${p}-i`];
    await using home = new IsxHome();
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    try {
      await ensureCa(`${home.stateDir}/ca`);
      home.define("templates", tpl, `image: ${LIVE_IMAGE}\naccounts: { anthropic: work }\n`);

      const built = await t.step("isx build stamps the template's accounts:", async () => {
        const r = await home.isx(["build", "-q", tpl]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const s = readStamps((await c.getInstance(tpl)).value.config);
        assert.equal(s["template-account.claude"], "work");
      });
      if (!built) return;

      const branched = await t.step(
        "isx branch --account pins and carries the template's accounts",
        async () => {
          const bad = await home.isx(["branch", inst, "--from", tpl, "--account", "aws=x"]);
          assert.equal(bad.code, 2, bad.stderr);
          assert.match(bad.stderr, /namespace must be one of/);
          const r = await home.isx([
            "branch",
            inst,
            "--from",
            tpl,
            "--account",
            "github=me",
            "--no-preflight",
          ]);
          assert.equal(r.code, 0, r.stderr);
          const s = readStamps((await c.getInstance(inst)).value.config);
          assert.equal(s["template-account.claude"], "work");
          assert.equal(s["account.github"], "me");
        },
      );
      if (!branched) return;

      await t.step("isx proxy account set|unset|list change and show the pins", async () => {
        let r = await home.isx(["proxy", "account", "set", inst, "anthropic=other"]);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /claude=other/);
        // No proxy at that address: nothing is resolved (the next step starts one).
        r = await home.isx(["proxy", "account", "list", "--json", "--url", "http://127.0.0.1:9"]);
        assert.equal(r.code, 0, r.stderr);
        const row = (JSON.parse(r.stdout) as { instance: string }[]).find((x) =>
          x.instance === inst
        );
        assert.deepEqual(row, {
          instance: inst,
          template: tpl,
          pins: { claude: "other", github: "me" },
          template_accounts: { claude: "work" },
          resolved: null,
        });
        r = await home.isx(["proxy", "account", "set", tpl, "claude=x"]);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /it is a template: set accounts: in its definition/);
        r = await home.isx(["proxy", "account", "set", `${p}-missing`, "claude=x"]);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /no such instance/);
      });

      await t.step("isx proxy account list shows what a running proxy resolves", async () => {
        const ca = await loadCa(`${home.root}/list-ca`);
        const proxy = await startProxy({
          listen: loopbackListen(),
          policy: new Policy(parseCredentials(CREDS)),
          ca,
          clients: { identify: () => Promise.resolve(undefined), known: () => [] },
        });
        try {
          const url = `http://127.0.0.1:${proxy.addrs.health[0]!.port}`;
          let r = await home.isx(["proxy", "account", "list", "--json", "--url", url]);
          assert.equal(r.code, 0, r.stderr);
          let row = (JSON.parse(r.stdout) as { instance: string; resolved: unknown }[])
            .find((x) => x.instance === inst)!;
          assert.deepEqual(row.resolved, {
            claude: { account: "other", kind: "api_key", source: "pin" },
            openai: null,
            github: { account: "me", kind: "token", source: "pin" },
          });
          r = await home.isx(["proxy", "account", "set", inst, "claude=sub"]);
          assert.equal(r.code, 0, r.stderr);
          r = await home.isx(["proxy", "account", "list", "--url", url]);
          assert.equal(r.code, 0, r.stderr);
          assert.match(
            r.stdout,
            new RegExp(`${inst}: claude: account "sub" for anthropic uses oauth`),
          );
          r = await home.isx(["proxy", "account", "set", inst, "claude=other"]);
          assert.equal(r.code, 0, r.stderr);
          r = await home.isx(["proxy", "account", "list", "--json", "--url", "http://127.0.0.1:9"]);
          row = (JSON.parse(r.stdout) as { instance: string; resolved: unknown }[])
            .find((x) => x.instance === inst)!;
          assert.equal(row.resolved, null, "no proxy: nothing resolved");
        } finally {
          await proxy.close();
        }
      });

      await t.step(
        "the proxy's listing of the instance resolves pins > template and fails closed",
        async () => {
          const policy = new Policy(parseCredentials(CREDS));
          // outside the default project the proxy's listing names it `<project>/<name>`
          const listed = `${LIVE_PROJECT}/${inst}`;
          const info = (await incusSource(c).listInstances()).find((i) => i.name === listed)!;
          assert.deepEqual(info.pins, { claude: "other", github: "me" });
          assert.deepEqual(info.templateAccounts, { claude: "work" });
          const req = { host: "api.anthropic.com", path: "/v1/messages" };
          const who = {
            grant: "all" as const,
            pins: info.pins,
            templateAccounts: info.templateAccounts!,
          };
          const ok = policy.route(req, who);
          assert.ok(
            ok.kind === "forward" &&
              ok.ops.some((o) =>
                o.op === "set" && (o.value as Secret).reveal() === "sk-ant-api03-LIVE-other"
              ),
          );
          let r = await home.isx(["proxy", "account", "set", inst, "claude=sub"]);
          assert.equal(r.code, 0, r.stderr);
          const pins = (await incusSource(c).listInstances()).find((i) => i.name === listed)!.pins;
          const mode = policy.route(req, { ...who, pins });
          assert.ok(
            mode.kind === "fail" &&
              /uses oauth but this instance was built for api_key/.test(mode.message),
          );
          r = await home.isx(["proxy", "account", "unset", inst, "claude"]);
          assert.equal(r.code, 0, r.stderr);
          const after = (await incusSource(c).listInstances()).find((i) => i.name === listed)!.pins;
          assert.deepEqual(after, { github: "me" });
          const tplOnly = policy.route(req, { ...who, pins: after });
          assert.ok(
            tplOnly.kind === "forward" &&
              tplOnly.ops.some((o) =>
                o.op === "set" && (o.value as Secret).reveal() === "sk-ant-api03-LIVE-work"
              ),
          );
        },
      );
    } finally {
      await removeInstance(c, inst).catch(() => {});
      await removeInstance(c, tpl).catch(() => {});
      c.close();
    }
  },
});
