import assert from "node:assert/strict";
import { decideDormancy, type DormancyInput, formatCpuSample, parseCpuSample } from "./dormancy.ts";

const H = 3_600_000;
const T = 1_800_000_000_000; // host now
const base: DormancyInput = {
  now: T,
  afterMs: 24 * H,
  stamp: `${T - 2 * H} 5000000000 ${T - 30 * H}`,
  cpuNanos: 5_000_000_000 + 10 * 1e9, // 10 s over 2 h: 0.14% of one CPU
  taskWriteAgeMs: 48 * H,
};

Deno.test("decideDormancy follows §4.4 row by row", () => {
  const rows: [string, Partial<DormancyInput>, unknown][] = [
    ["quiet long enough: stop", {}, { action: "stop", quietSince: T - 30 * H }],
    ["no stamp: first sample starts the window", { stamp: undefined }, {
      action: "record",
      sample: { at: T, cpuNanos: base.cpuNanos, quietSince: T },
    }],
    ["malformed stamp restarts", { stamp: "yesterday 5 x" }, {
      action: "record",
      sample: { at: T, cpuNanos: base.cpuNanos, quietSince: T },
    }],
    ["CPU unknown: nothing recorded", { cpuNanos: undefined }, { action: "none" }],
    ["task-file age unknown restarts", { taskWriteAgeMs: undefined }, {
      action: "record",
      sample: { at: T, cpuNanos: base.cpuNanos, quietSince: T },
    }],
    ["sample under an hour old: neither compares nor records", {
      stamp: `${T - H + 1} 0 ${T - 30 * H}`,
    }, { action: "none" }],
    ["counter went down (restart) restarts", { cpuNanos: 1_000 }, {
      action: "record",
      sample: { at: T, cpuNanos: 1_000, quietSince: T },
    }],
    ["≥ 1% of one CPU is busy", { cpuNanos: 5e9 + 2 * 36e9 }, {
      action: "record",
      sample: { at: T, cpuNanos: 5e9 + 72e9, quietSince: T },
    }],
    ["just under 1% is quiet", { cpuNanos: 5e9 + 72e9 - 1 }, {
      action: "stop",
      quietSince: T - 30 * H,
    }],
    ["recent task-file write moves quiet forward", { taskWriteAgeMs: 3 * H }, {
      action: "record",
      sample: { at: T, cpuNanos: base.cpuNanos, quietSince: T - 3 * H },
    }],
    ["quiet but not yet long enough", { afterMs: 31 * H }, {
      action: "record",
      sample: { at: T, cpuNanos: base.cpuNanos, quietSince: T - 30 * H },
    }],
    ["host clock went back restarts", { stamp: `${T + H} 0 ${T - 30 * H}` }, {
      action: "record",
      sample: { at: T, cpuNanos: base.cpuNanos, quietSince: T },
    }],
    ["afterMs 0 still needs two samples", { afterMs: 0, stamp: undefined }, {
      action: "record",
      sample: { at: T, cpuNanos: base.cpuNanos, quietSince: T },
    }],
  ];
  for (const [name, patch, want] of rows) {
    assert.deepEqual(decideDormancy({ ...base, ...patch }), want, name);
  }
});

Deno.test("cpu sample stamp round-trips and rejects nonsense", () => {
  const s = { at: T, cpuNanos: 123456789012, quietSince: T - H };
  assert.deepEqual(parseCpuSample(formatCpuSample(s)), s);
  for (const bad of [undefined, "", "1 2", "1 2 3 4", "-1 2 0", `${T} 1 ${T + 1}`, "1 2 3\n"]) {
    assert.equal(parseCpuSample(bad), undefined, String(bad));
  }
});
