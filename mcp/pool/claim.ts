/**
 * Taking a ready member out of a pool (issue 21). One `PUT` guarded by the member's ETag
 * (`If-Match`) clears `mcp-pool` and writes the claimer's stamps and a fresh instance
 * secret's hash together: of two sessions racing for one member exactly one PUT succeeds, the
 * other gets 412 and tries the next member (or none is left: the cold path). Only then is the
 * secret delivered (files API, as at every start), so a member never held a secret before
 * its claim. A member found stale here is retired (destroyed), never handed out: freshness is
 * judged at claim time against the present, not only by the keeper.
 *
 * @module
 */

import {
  type IncusClient,
  type Instance,
  isNotFound,
  isPreconditionFailed,
  toPut,
} from "../../rpc/base.ts";
import { readStamps, STAMP, stampConfig } from "../host/stamps.ts";
import { deliverSecret, InstanceSecret, secretStamp } from "../instances/secret.ts";
import { memberState, POOL_STAMP, poolMembers, type Present, staleness } from "./members.ts";

/** What a claim took. */
export interface Claimed {
  /** The member's name (final). */
  name: string;
  /** Its static address. */
  ip: string | undefined;
  /** Its working directory. */
  workdir: string;
  /** Members found stale and retired on the way. */
  retired: string[];
}

/**
 * Retires a member: marks it `draining` under its ETag (a claim in flight then loses, and a
 * member claimed meanwhile is left alone), then removes it. False when it was claimed first.
 */
export async function retireMember(client: IncusClient, name: string): Promise<boolean> {
  let got;
  try {
    got = await client.getInstance(name);
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
  if (!memberState(got.value.config)) return false;
  try {
    await client.putInstance(name, withPoolState(got.value, "draining"), {
      step: `mark pool member ${name} draining`,
      etag: got.etag,
    });
  } catch (e) {
    if (isPreconditionFailed(e) || isNotFound(e)) return false;
    throw e;
  }
  if (got.value.status !== "Stopped") {
    await client.stopInstance(name, { step: `stop ${name}`, force: true }).catch((e) => {
      if (!isNotFound(e)) throw e;
    });
  }
  await client.deleteInstance(name, { step: `delete ${name}` }).catch((e) => {
    if (!isNotFound(e)) throw e;
  });
  return true;
}

function withPoolState(i: Instance, state: string) {
  return toPut({ ...i, config: { ...i.config, ...stampConfig({ [POOL_STAMP.state]: state }) } });
}

/**
 * Claims a ready, fresh member of `template` for the holder `stamps` (prefix-less); undefined
 * when none is left. `now` stamps the claim time; `listed` is a listing the caller made
 * already (each candidate is read again, with its ETag, before the claim).
 */
export async function claimMember(
  client: IncusClient,
  o: {
    template: string;
    present: Present;
    stamps: Record<string, string>;
    now: number;
    listed?: readonly Instance[];
  },
): Promise<Claimed | undefined> {
  const all = o.listed ?? await client.listInstances();
  const members = poolMembers(all, (t) => t === o.template ? o.present : undefined)
    .filter((m) => m.template === o.template && m.state === "ready" && m.status === "Running");
  const retired: string[] = [];
  const retire = (name: string) => {
    retired.push(name);
    // in the background: a stale member is out of the running once marked, whoever removes it
    retireMember(client, name).catch(() => {});
  };
  // a random start spreads racing claimers over the members (each still tries all)
  const start = members.length ? Math.floor(Math.random() * members.length) : 0;
  for (let k = 0; k < members.length; k++) {
    const m = members[(start + k) % members.length]!;
    if (m.stale) {
      retire(m.name);
      continue;
    }
    let got;
    try {
      got = await client.getInstance(m.name);
    } catch (e) {
      if (isNotFound(e)) continue;
      throw e;
    }
    const st = readStamps(got.value.config);
    if (memberState(got.value.config) !== "ready" || got.value.status !== "Running") continue;
    if (staleness(st, o.present)) {
      retire(m.name);
      continue;
    }
    const secret = InstanceSecret.generate();
    const config = {
      ...got.value.config,
      ...stampConfig({
        ...o.stamps,
        [POOL_STAMP.state]: "",
        [POOL_STAMP.claimed]: new Date(o.now).toISOString(),
      }),
      ...secretStamp(secret),
    };
    try {
      await client.putInstance(m.name, toPut({ ...got.value, config }), {
        step: `claim pool member ${m.name}`,
        etag: got.etag,
      });
    } catch (e) {
      // another claimer (or the keeper retiring it) was first: the next member
      if (isPreconditionFailed(e) || isNotFound(e)) continue;
      throw e;
    }
    try {
      const gid = Number(st[POOL_STAMP.gid] || NaN);
      // one write into the directory the keeper made; a member that lost it (restarted
      // behind the pool's back) gets the full delivery
      await deliverSecret(client, m.name, secret, Number.isInteger(gid) ? { gid } : {})
        .catch(() => deliverSecret(client, m.name, secret));
    } catch (e) {
      // claimed but unusable: it is ours to remove, and the caller goes cold
      await client.stopInstance(m.name, { step: `stop ${m.name}`, force: true }).catch(() => {});
      await client.deleteInstance(m.name, { step: `delete ${m.name}` }).catch(() => {});
      throw e;
    }
    return {
      name: m.name,
      ip: st[STAMP.staticIp] || undefined,
      workdir: st[STAMP.workdir] || "/home/agentuser",
      retired,
    };
  }
  return undefined;
}
