import assert from "node:assert/strict";
import { type IncusClient, type InstanceState, IsbError } from "../../rpc/base.ts";
import { leaseFile, MAX_LEASE_FILE, watchLease } from "./leases.ts";
import { waitForIpv4 } from "./waits.ts";

const LINE = (mac: string, ip: string, host: string) => `1796318765 ${mac} ${ip} ${host} ff:01`;

Deno.test("leaseFile: beside a local socket only, for a plain network name", () => {
  assert.equal(
    leaseFile("/var/lib/incus/unix.socket", "incusbr0"),
    "/var/lib/incus/networks/incusbr0/dnsmasq.leases",
  );
  assert.equal(
    leaseFile("/var/lib/incus/unix.socket.user", "br-1"),
    "/var/lib/incus/networks/br-1/dnsmasq.leases",
  );
  assert.equal(leaseFile("https://incus.example:8443", "incusbr0"), undefined);
  for (const bad of ["../x", "a/b", "", ".hidden"]) {
    assert.equal(leaseFile("/var/lib/incus/unix.socket", bad), undefined, bad);
  }
});

Deno.test("watchLease: a new line for the name or the address, never a line there before", () => {
  const dir = Deno.makeTempDirSync();
  const file = `${dir}/dnsmasq.leases`;
  // an older lease of the same name and of the same address: not this guest's
  Deno.writeTextFileSync(
    file,
    [LINE("10:66:6a:00:00:01", "10.0.0.9", "web"), LINE("10:66:6a:00:00:02", "10.0.0.7", "x")]
      .join("\n") + "\n",
  );
  const byName = watchLease(file, { name: "web", address: "10.0.0.50" })!;
  const byAddress = watchLease(file, { name: "other", address: "10.0.0.7" })!;
  assert.equal(byName.state(), "waiting");
  assert.equal(byAddress.state(), "waiting");
  // another guest's lease changes nothing
  Deno.writeTextFileSync(file, LINE("10:66:6a:00:00:03", "10.0.0.8", "web2") + "\n", {
    append: true,
  });
  assert.equal(byName.state(), "waiting");
  assert.equal(byAddress.state(), "waiting");
  // a half-written line whose address is a prefix of the pin is no lease of the pin
  Deno.writeTextFileSync(file, "1796318766 10:66:6a:00:00:04 10.0.0.5", { append: true });
  assert.equal(watchLease(file, { name: "n", address: "10.0.0.50" })!.state(), "waiting");
  // dnsmasq rewrites the file: the guest's lease, by its name; the pin, by its address
  Deno.writeTextFileSync(
    file,
    [LINE("10:66:6a:00:00:05", "10.0.0.50", "web"), LINE("10:66:6a:00:00:06", "10.0.0.7", "y")]
      .join("\n") + "\n",
  );
  assert.equal(byName.state(), "leased");
  assert.equal(byAddress.state(), "leased");
  // once seen, seen (dnsmasq may rewrite the line on a renewal)
  Deno.writeTextFileSync(file, "");
  assert.equal(byName.state(), "leased");
  Deno.removeSync(dir, { recursive: true });
});

Deno.test("watchLease: no watch where the file cannot be read, none past the size cap", () => {
  assert.equal(watchLease(undefined, { name: "a" }), undefined);
  assert.equal(watchLease("/nonexistent/networks/x/dnsmasq.leases", { name: "a" }), undefined);
  const dir = Deno.makeTempDirSync();
  const file = `${dir}/dnsmasq.leases`;
  Deno.writeTextFileSync(file, "");
  const w = watchLease(file, { name: "web" })!;
  // a flood of made-up leases from some container on the bridge: the watch gives up for good
  // (the wait then polls the state as without one), even if the file shrinks again
  const flood = Array.from(
    { length: 2000 },
    (_, i) =>
      LINE(
        `02:00:00:00:${(i >> 8).toString(16)}:${(i & 255).toString(16)}`,
        `10.1.${i >> 8}.${i & 255}`,
        `h${i}`,
      ),
  ).join("\n");
  assert.ok(flood.length > MAX_LEASE_FILE);
  Deno.writeTextFileSync(file, flood + "\n" + LINE("10:66:6a:00:00:05", "10.0.0.50", "web"));
  assert.equal(w.state(), "off");
  Deno.writeTextFileSync(file, LINE("10:66:6a:00:00:05", "10.0.0.50", "web"));
  assert.equal(w.state(), "off");
  Deno.writeTextFileSync(file, flood);
  assert.equal(watchLease(file, { name: "web" }), undefined);
  Deno.removeSync(dir, { recursive: true });
});

/**
 * A client whose guest holds `ip` from the `at`-th state read on; it records, per read,
 * whether `leased()` held then.
 */
function fakeState(at: number, ip = "10.0.0.50", status = "Running", leased = () => false) {
  const log: boolean[] = [];
  const client = {
    getInstanceState(_name: string): Promise<InstanceState> {
      log.push(leased());
      const addresses = log.length >= at
        ? [{ family: "inet", address: ip, netmask: "24", scope: "global" }]
        : [];
      return Promise.resolve(
        { status, network: { eth0: { addresses } } } as unknown as InstanceState,
      );
    },
  } as unknown as IncusClient;
  return { client, reads: () => log.length, log };
}

Deno.test("waitForIpv4 with a lease watch reads the state rarely before the lease, then soon", async () => {
  // the lease appears at the watch's 8th look (~40 ms of 5 ms reads; the slow step is 250 ms)
  let looks = 0;
  const leased = () => looks >= 8;
  const lease = { state: () => (++looks, leased() ? "leased" as const : "waiting" as const) };
  const g = fakeState(3, "10.0.0.50", "Running", leased);
  const ip = await waitForIpv4(g.client, "web", { lease });
  assert.equal(ip, "10.0.0.50");
  // one read at once, none more before the lease (the slow step is 250 ms), then reads every
  // 10 ms until the address. Without the watch (25 ms steps), all three reads come before it.
  assert.deepEqual(g.log, [false, true, true]);
});

Deno.test("waitForIpv4 with a lease never seen still finds the address, by the slow reads", async () => {
  const g = fakeState(2, "10.0.0.99"); // dnsmasq gave another address: no lease line matches
  const ip = await waitForIpv4(g.client, "web", { lease: { state: () => "waiting" as const } });
  assert.equal(ip, "10.0.0.99");
  assert.equal(g.reads(), 2);
});

Deno.test("waitForIpv4 without a watch (or one turned off) polls every step; a stopped guest fails it", async () => {
  const g = fakeState(4);
  assert.equal(await waitForIpv4(g.client, "web", { stepMs: 1 }), "10.0.0.50");
  assert.equal(g.reads(), 4);
  const off = fakeState(4);
  const lease = { state: () => "off" as const };
  assert.equal(await waitForIpv4(off.client, "web", { stepMs: 1, lease }), "10.0.0.50");
  assert.equal(off.reads(), 4);
  const stopped = fakeState(99, "", "Stopped");
  await assert.rejects(
    waitForIpv4(stopped.client, "web", { lease: { state: () => "waiting" as const } }),
    (e) => e instanceof IsbError && e.code === "not_ready" && /it is Stopped/.test(e.message),
  );
});

Deno.test("waitForIpv4: a guest leased but without its address is read every step after a second", async () => {
  const at: number[] = [];
  const client = {
    getInstanceState(): Promise<InstanceState> {
      at.push(performance.now());
      return Promise.resolve({ status: "Running", network: {} } as unknown as InstanceState);
    },
  } as unknown as IncusClient;
  const lease = { state: () => "leased" as const };
  const t0 = performance.now();
  await assert.rejects(
    waitForIpv4(client, "web", { lease, stepMs: 200, deadlineMs: 1_800 }),
    (e) => e instanceof IsbError && /none after 1800 ms/.test(e.message),
  );
  // fast (10 ms) reads in the first second; after it, no two reads closer than the step (a
  // timer never fires early, so this holds on a loaded host too)
  const late = at.filter((t) => t - t0 > 1_100);
  assert.ok(at.length > late.length + 10, `${at.length} reads, ${late.length} late`);
  assert.ok(late.length >= 2, `${late.length} late reads`);
  for (let i = 1; i < late.length; i++) {
    assert.ok(late[i]! - late[i - 1]! >= 190, `reads ${late[i]! - late[i - 1]!} ms apart`);
  }
});
