/**
 * Warm pools on real Incus (issue 21), in a project of this test's own (tests/helpers/
 * pool_lab.ts) with the real proxy in this process: no keeper means the cold path; a member
 * made by `isx pool fill` has no secret and the proxy refuses it and counts nothing; a
 * claim through `isx mcp` (the SDK client) hands it over with its own secret, answering exec,
 * counted by the proxy under its name; two sessions racing for a pool of one (exactly one
 * gets the member); a rebuilt template's members are never handed out; the keeper refills,
 * refuses a second keeper, and a keeper killed mid-fill leaves nothing the next one does not
 * clean up.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { execRecorded, readStamps } from "../../mcp/mod.ts";
import { sha256Hex } from "../../rpc/base.ts";
import { NO_INCUS, until } from "../helpers/live.ts";
import { call, connect } from "../helpers/mcp.ts";
import { PoolLab, SOURCE_TEMPLATE } from "../helpers/pool_lab.ts";

const NP = ["--no-preflight"];
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;

async function create(
  c: Client,
  args: Record<string, unknown> = {},
): Promise<Record<string, unknown>> {
  return sc(await call(c, "create_instance", { template: SOURCE_TEMPLATE, ...args }));
}

async function secretFile(lab: PoolLab, name: string): Promise<string | undefined> {
  const r = await execRecorded(lab.incus, name, [
    "sh",
    "-c",
    "cat /run/isx/instance-secret 2>/dev/null || echo ABSENT",
  ], { step: "read the secret" });
  const t = r.stdout.trim();
  return t === "ABSENT" ? undefined : t;
}

/**
 * Claims the ready member (the first claim must get `first`), so the keeper fills again, and
 * freezes the keeper (SIGSTOP) the moment a member shows as filling, watching from before the
 * claim: the member is filling only for its copy and boot, which a fast host finishes before
 * the claim's client has closed. When the keeper had already marked it ready, it is thawed and
 * the next claim tries again. Answers the member a frozen keeper left filling.
 */
async function claimAndCatchFilling(
  lab: PoolLab,
  c: Client,
  keeper: number,
  first: string,
): Promise<string> {
  for (let attempt = 1;; attempt++) {
    let stop = false;
    const deadline = Date.now() + 60_000;
    const seen = (async () => {
      while (!stop) {
        const f = await lab.members("filling");
        if (f.length) {
          Deno.kill(keeper, "SIGSTOP");
          return f[0]!;
        }
        if (Date.now() > deadline) throw new Error("no member filling within 60 s of the claim");
        await new Promise((r) => setTimeout(r, 50));
      }
      return "";
    })();
    seen.catch(() => {}); // awaited below; a rejection during the claim is not unhandled
    try {
      const claimed = String((await create(c)).instance);
      if (attempt === 1) assert.equal(claimed, first);
      const filling = await seen;
      if ((await lab.members("filling")).includes(filling)) return filling;
      if (attempt === 3) throw new Error(`the keeper marked ${filling} ready each time first`);
      Deno.kill(keeper, "SIGCONT");
      await lab.ready(1);
    } finally {
      stop = true;
      await seen.catch(() => {});
    }
  }
}

Deno.test({
  name: "warm pool: cold without a keeper; fill; claim through isx mcp; race; rebuild; keeper",
  ignore: NO_INCUS,
  async fn(t) {
    await using lab = await PoolLab.open({ pool: 1 });

    await t.step("no keeper, no pool: create_instance goes the cold way, no error", async () => {
      const c = await connect(lab.home, "legacy", { extra: NP });
      try {
        const r = await create(c);
        assert.match(String(r.instance), /^mcp-minimal-/);
        assert.ok(r.ip, "a cold create has its address");
        await call(c, "destroy_instance", { instance: r.instance });
      } finally {
        await c.close();
      }
    });

    let member = "";
    await t.step(
      "isx pool fill: a member with no secret, unlisted, refused and uncounted",
      async () => {
        const f = await lab.isx(["pool", "fill"]);
        assert.equal(f.code, 0, f.err);
        member = (await lab.members("ready"))[0] ?? "";
        assert.ok(member, `a ready member: ${f.out}\n${f.err}`);
        assert.match(member, /^pool-minimal-/);
        const st = readStamps((await lab.incus.getInstance(member)).value.config);
        assert.equal(st["instance-secret-sha256"] ?? "", "", "no secret hash on a member");
        assert.equal(st["mcp-owner"] ?? "", "", "nobody's");
        assert.ok(st["static-ip"], "pinned to a static address");
        assert.equal(await secretFile(lab, member), undefined, "no secret file before the claim");
        const show = JSON.parse((await lab.isx(["pool", "--json"])).out);
        assert.deepEqual(show.pools[0].ready, [member]);
        assert.equal(show.keeper, false);
        const list = JSON.parse((await lab.isx(["list", "--json"])).out) as Record<
          string,
          unknown
        >[];
        assert.equal(list.find((r) => r.name === member)?.mcp_state, "pool");
        // the proxy knows its address and answers 403 before any tunnel; nothing is counted
        assert.equal(await lab.modelCall(member), "403 000");
        assert.equal(await lab.requestsOf(member), 0);
        const c = await connect(lab.home, "legacy", { extra: NP });
        try {
          const listed = sc(await call(c, "list_instances", {})).instances as {
            instance: string;
          }[];
          assert.ok(!listed.some((i) => i.instance === member), "list_instances does not show it");
        } finally {
          await c.close();
        }
      },
    );

    await t.step(
      "claim: the member, its own fresh secret, exec answers, counted by the proxy",
      async () => {
        const c = await connect(lab.home, "legacy", { extra: NP });
        try {
          const r = await create(c, { purpose: "pool claim", idempotency_key: `k-${lab.id}` });
          assert.equal(r.instance, member, "the ready member was claimed");
          assert.ok(r.ip && r.workdir);
          assert.equal(r.supports_delegate !== undefined, true);
          const ex = sc(
            await call(c, "exec", { instance: member, command: "echo claimed; id -un" }),
          );
          assert.equal(ex.exit_code, 0);
          assert.match(String(ex.stdout), /^claimed\nagentuser/);
          const st = readStamps((await lab.incus.getInstance(member)).value.config);
          const secret = await secretFile(lab, member);
          assert.ok(secret && secret.length === 64, "a secret was delivered at the claim");
          assert.equal(sha256Hex(secret), st["instance-secret-sha256"]);
          assert.equal(st["mcp-pool"] ?? "", "");
          assert.equal(st["mcp-purpose"], "pool claim");
          assert.equal(st["mcp-idempotency-key"], `k-${lab.id}`);
          assert.ok(st["mcp-session"]);
          // the proxy's registry follows the claim: the call is relayed and counted under its name
          await until("the proxy relays the claimed instance", async () => {
            const got = await lab.modelCall(member);
            return got === "200 200" ? got : undefined;
          }, 30_000);
          assert.ok(await lab.requestsOf(member) >= 1, "counted under its name");
          // a keyed repeat replays the claimed instance
          const again = await create(c, { purpose: "pool claim", idempotency_key: `k-${lab.id}` });
          assert.equal(again.instance, member);
          assert.equal(again.replayed, true);
          assert.deepEqual(await lab.members(), [], "a claimed member never goes back");
          await call(c, "destroy_instance", { instance: member });
        } finally {
          await c.close();
        }
      },
    );

    await t.step("two sessions racing for a pool of one: exactly one gets the member", async () => {
      assert.equal((await lab.isx(["pool", "fill"])).code, 0);
      const [one] = await lab.members("ready");
      assert.ok(one);
      const [a, b] = await Promise.all([
        connect(lab.home, "legacy", { extra: NP }),
        connect(lab.home, "legacy", { extra: NP }),
      ]);
      try {
        const got = await Promise.all([create(a), create(b)]);
        const names = got.map((g) => String(g.instance));
        assert.equal(names.filter((n) => n === one).length, 1, names.join(", "));
        assert.equal(names.filter((n) => /^mcp-minimal-/.test(n)).length, 1, names.join(", "));
        for (const [c, g] of [[a, got[0]], [b, got[1]]] as const) {
          const ex = sc(await call(c, "exec", { instance: g!.instance, command: "true" }));
          assert.equal(ex.exit_code, 0);
          await call(c, "destroy_instance", { instance: g!.instance });
        }
      } finally {
        await a.close();
        await b.close();
      }
    });

    await t.step(
      "the template rebuilt while a member is ready: the old one is never handed out",
      async () => {
        assert.equal((await lab.isx(["pool", "fill"])).code, 0);
        const [old] = await lab.members("ready");
        assert.ok(old);
        await lab.copyTemplate();
        const show = JSON.parse((await lab.isx(["pool", "--json"])).out);
        assert.equal(show.pools[0].stale[0]?.name, old);
        const c = await connect(lab.home, "legacy", { extra: NP });
        try {
          const r = await create(c);
          assert.notEqual(r.instance, old);
          assert.match(String(r.instance), /^mcp-minimal-/, "cold: the only member was stale");
          await until(
            "the stale member removed",
            async () => (await lab.members()).includes(old) ? undefined : true,
            60_000,
          );
          await call(c, "destroy_instance", { instance: r.instance });
        } finally {
          await c.close();
        }
      },
    );

    await t.step(
      "a server killed mid-claim: the keyed retry leaves one claimed, stamped instance",
      async () => {
        assert.equal((await lab.isx(["pool", "fill"])).code, 0);
        const [half] = await lab.members("ready");
        assert.ok(half);
        // hold the claim between its update and the secret's delivery: the member's /run/isx
        // and systemd's /run marker gone, the delivery waits for /run (up to 30 s)
        const sab = await execRecorded(lab.incus, half, [
          "sh",
          "-c",
          "rm -rf /run/isx && mv /run/systemd/system /run/systemd/system.held",
        ], { step: "hold the delivery" });
        assert.equal(sab.exitCode, 0, sab.stderr);
        const key = `crash-${lab.id}`;
        const c1 = await connect(lab.home, "legacy", { extra: NP });
        const pid = (c1.transport as unknown as { pid: number | null }).pid!;
        const pending = create(c1, { idempotency_key: key }).catch((e) => e);
        await until("the claim's update landed", async () => {
          const st = readStamps((await lab.incus.getInstance(half)).value.config);
          return st["mcp-session"] ? true : undefined;
        }, 60_000);
        Deno.kill(pid, "SIGKILL");
        await pending;
        await c1.close().catch(() => {});
        assert.equal(await secretFile(lab, half), undefined, "killed before the delivery");
        // the keeper's next member, then the keyed retry from a new session
        assert.equal((await lab.isx(["pool", "fill"])).code, 0);
        const [next] = await lab.members("ready");
        assert.ok(next && next !== half);
        const c = await connect(lab.home, "legacy", { extra: NP });
        try {
          const r = await create(c, { idempotency_key: key });
          assert.equal(r.instance, next, "not the half-made claim");
          assert.equal(r.replayed, undefined);
          await until(
            "the half-made claim removed",
            async () =>
              (await lab.incus.listInstances()).some((i) => i.name === half) ? undefined : true,
            60_000,
          );
          const keyed = (await lab.incus.listInstances()).filter((i) =>
            readStamps(i.config)["mcp-idempotency-key"] === key
          );
          assert.deepEqual(keyed.map((i) => i.name), [next], "exactly one carries the key");
          const st = readStamps(keyed[0]!.config);
          assert.equal(st["mcp-creating"] ?? "", "", "made: no longer marked creating");
          assert.equal(sha256Hex((await secretFile(lab, next!))!), st["instance-secret-sha256"]);
          const again = await create(c, { idempotency_key: key });
          assert.deepEqual([again.instance, again.replayed], [next, true]);
          await call(c, "destroy_instance", { instance: next });
        } finally {
          await c.close();
        }
      },
    );

    await t.step("isx branch without a name claims a member; --cold copies", async () => {
      assert.equal((await lab.isx(["pool", "fill"])).code, 0);
      const [one] = await lab.members("ready");
      assert.ok(one);
      const made: string[] = [];
      try {
        const flags = ["--from", SOURCE_TEMPLATE, "--no-preflight", "--json"];
        const cold = await lab.isx(["branch", ...flags, "--cold"]);
        assert.equal(cold.code, 0, cold.err);
        const c = JSON.parse(cold.out);
        made.push(c.name);
        assert.notEqual(c.name, one);
        assert.equal(c.pool, undefined);
        const hit = await lab.isx(["branch", ...flags]);
        assert.equal(hit.code, 0, hit.err);
        const h = JSON.parse(hit.out);
        made.push(h.name);
        assert.equal(h.name, one);
        assert.equal(h.pool, true);
        assert.ok(h.ip);
        const st = readStamps((await lab.incus.getInstance(one)).value.config);
        assert.equal(st["mcp-pool"] ?? "", "");
        assert.equal(sha256Hex((await secretFile(lab, one))!), st["instance-secret-sha256"]);
        assert.deepEqual(await lab.members(), []);
      } finally {
        for (const n of made) {
          await lab.incus.stopInstance(n, { step: "stop", force: true }).catch(() => {});
          await lab.incus.deleteInstance(n, { step: "delete" }).catch(() => {});
        }
      }
    });

    await t.step(
      "the keeper: fills, refuses a second, killed mid-fill leaves nothing behind",
      async () => {
        const k1 = lab.spawn(["pool", "keep", "--interval-ms", "300"]);
        try {
          const [m1] = await lab.ready(1);
          const second = await lab.isx(["pool", "keep"], 60_000);
          assert.notEqual(second.code, 0);
          assert.match(second.err, /a keeper already runs/);
          assert.equal(JSON.parse((await lab.isx(["pool", "--json"])).out).keeper, true);
          // a claim makes the keeper fill again; kill it while that member is still filling
          const c = await connect(lab.home, "legacy", { extra: NP });
          let filling = "";
          try {
            filling = await claimAndCatchFilling(lab, c, k1.child.pid, m1!);
          } finally {
            await c.close();
          }
          k1.child.kill("SIGKILL");
          await k1.wait(30_000);
          assert.deepEqual(
            await lab.members("filling"),
            [filling],
            "left filling by the dead keeper",
          );
          assert.equal(JSON.parse((await lab.isx(["pool", "--json"])).out).keeper, false);
          const k2 = lab.spawn(["pool", "keep", "--interval-ms", "300"]);
          try {
            await until(
              "the dead keeper's member removed",
              async () => (await lab.members()).includes(filling) ? undefined : true,
              60_000,
            );
            const [m2] = await lab.ready(1);
            assert.notEqual(m2, filling);
            // restarted cleanly: SIGTERM ends it with 0 and the ready member stays
            k2.child.kill("SIGTERM");
            assert.equal((await k2.wait(120_000)).code, 0);
            assert.deepEqual(await lab.members("ready"), [m2]);
          } finally {
            await k2[Symbol.asyncDispose]();
          }
        } finally {
          await k1[Symbol.asyncDispose]();
        }
        const d = await lab.isx(["pool", "drain"]);
        assert.equal(d.code, 0, d.err);
        assert.deepEqual(await lab.members(), []);
      },
    );
  },
});
