/** parseSpec's refusals (isb-rpc.md §7): `invalid`, `params: `, and the texts each names. */
import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { parseSpec } from "./spec.ts";

const REJECTS = [
  { name: "an unknown key names the field", in: { cpu: 2 }, has: ["cpu", "params: "] },
  {
    name: "a port object with search says search is not an isb key",
    in: { ports: [{ listen: 1, connect: 2, search: 5 }] },
    has: ["search is not an isb key"],
  },
  {
    name: "a mapping port with search also says so",
    in: { ports: [{ target: 1, published: 2, search: 5 }] },
    has: ["search is not an isb key"],
  },
  { name: "an unknown type is invalid", in: { type: "bogus" }, has: ["type"] },
  {
    name: "a bare target port needs a host side",
    in: { ports: ["80"] },
    has: ["isb needs the host port too"],
  },
  {
    name: "a bare number port needs a host side",
    in: { ports: [80] },
    has: ["isb needs the host port too"],
  },
  { name: "sctp is not a protocol", in: { ports: ["1:2/sctp"] }, has: ["protocol is tcp or udp"] },
  {
    name: "uneven ranges are refused",
    in: { ports: ["8000-8001:9000-9002"] },
    has: ["same length"],
  },
  {
    name: "an unknown proxy key names the field",
    in: { ports: [{ listen: 1, connect: 2, serach: 5 }] },
    has: ["serach"],
  },
  {
    name: "a bare mount target is refused",
    in: { volumes: ["/data"] },
    has: ["no anonymous volumes"],
  },
  {
    name: "a relative mount target is refused",
    in: { volumes: ["a:rel"] },
    has: ["absolute target"],
  },
  {
    name: "an unknown mount option is refused",
    in: { volumes: ["a:/b:bogus"] },
    has: ["unknown option", "bogus"],
  },
  {
    name: "an unknown long mount key names it",
    in: { volumes: [{ source: "a", target: "/b", mode2: 1 }] },
    has: ["mode2"],
  },
  {
    name: "a bad boolean names the value",
    in: { privileged: "maybe" },
    has: ["privileged", "maybe"],
  },
  { name: "a float cpus is refused", in: { cpus: 1.5 }, has: ["cpus"] },
  {
    name: "a bare environment key in a bare spec has no value",
    in: { environment: ["A"] },
    has: ['environment entry "A" has no value'],
  },
  {
    name: "exec.user points to user",
    in: { exec: { user: "dev" } },
    has: ["use user on the service"],
  },
  {
    name: "exec.cwd points to working_dir",
    in: { exec: { cwd: "/" } },
    has: ["use working_dir on the service"],
  },
  {
    name: "an unknown readiness check is listed",
    in: { ready: ["healthy"] },
    has: ["unknown readiness check"],
  },
  { name: "an unknown restart is listed", in: { restart: "sometimes" }, has: ["unknown restart"] },
  { name: "an empty command is refused", in: { command: "  " }, has: ["command is empty"] },
  { name: "an egress IP is refused", in: { egress: ["10.0.0.1"] }, has: ["IP address"] },
  ...["127.1", "2130706433", "0x7f.1", "012.0.0.1", "10.0.0.1.", "a.0x10"].map((ip) => ({
    name: `an egress IP in another form (${ip}) is refused`,
    in: { egress: [ip] },
    has: ["IP address"],
  })),
  {
    name: "an egress keyword other than none is refused",
    in: { egress: "all" },
    has: ["is not `none`"],
  },
  {
    name: "an egress secret without hosts is refused",
    in: { egress: { secrets: ["TOKEN"] } },
    has: ["NAME@host1,host2"],
  },
  {
    name: "an egress mid-name wildcard is refused",
    in: { egress: ["a.*.com"] },
    has: ["leading `*.`"],
  },
  {
    name: "a one-label egress wildcard is refused",
    in: { egress: ["*.com"] },
    has: ["at least two labels"],
  },
  { name: "an egress port 0 is refused", in: { egress: ["a.com:0"] }, has: ["bad port"] },
  {
    name: "a bad egress env name is refused",
    in: { egress: { secrets: ["1X@a.com"] } },
    has: ["environment variable name"],
  },
  {
    name: "a duplicated egress secret is refused",
    in: { egress: { secrets: ["X@a.com", "X@b.com"] } },
    has: ["listed twice"],
  },
  {
    name: "a bad egress store name is refused",
    in: { egress: { secrets: ["X=.hidden@a.com"] } },
    has: ["secret name"],
  },
  {
    name: "name and container_name together are refused",
    in: { name: "a", container_name: "b" },
    has: ["same field"],
  },
];

for (const c of REJECTS) {
  Deno.test(`parseSpec: ${c.name}`, () => {
    assert.throws(() => parseSpec(c.in), (e: unknown) => {
      assert.ok(e instanceof IsbError);
      assert.equal(e.code, "invalid");
      assert.ok(e.message.startsWith("params: "), e.message);
      for (const h of c.has) assert.ok(e.message.includes(h), `${e.message} lacks ${h}`);
      return true;
    });
  });
}
