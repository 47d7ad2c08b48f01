import assert from "node:assert/strict";
import { changesCallers, incusSource } from "./clients.ts";

Deno.test("only lifecycle actions that can change an owner list the instances again", () => {
  for (
    const a of [
      "instance-created",
      "instance-started",
      "instance-stopped",
      "instance-shutdown",
      "instance-restarted",
      "instance-updated",
      "instance-renamed",
      "instance-deleted",
      "instance-restored",
      "instance-paused",
      "instance-resumed",
      "instance-metadata-updated",
      "instance-something-new", // an action Incus adds later: listed again
    ]
  ) assert.equal(changesCallers(a), true, a);
  for (
    const a of [
      "instance-file-pushed",
      "instance-file-retrieved",
      "instance-file-deleted",
      "instance-exec",
      "instance-console",
      "instance-console-reset",
      "instance-console-retrieved",
      "instance-log-retrieved",
      "instance-log-deleted",
      "instance-metadata-retrieved",
      "instance-backup-retrieved",
      "network-updated",
      "project-created",
      "",
    ]
  ) assert.equal(changesCallers(a), false, a);
});

Deno.test("the registry's event source passes on only the events that change owners", async () => {
  const actions = [
    "instance-created",
    "instance-file-pushed",
    "instance-file-retrieved",
    "instance-started",
    "instance-exec",
    "network-updated",
    "instance-updated",
  ];
  let closed = 0;
  const source = incusSource({
    call: () => Promise.resolve({ kind: "sync", metadata: [] }),
    events: () =>
      Promise.resolve({
        async *[Symbol.asyncIterator]() {
          for (const action of actions) yield { metadata: { action } };
        },
        close: () => void closed++,
      }),
  });
  const seen: unknown[] = [];
  for await (const ev of source.events!(new AbortController().signal)) {
    seen.push((ev as { metadata: { action: string } }).metadata.action);
  }
  assert.deepEqual(seen, ["instance-created", "instance-started", "instance-updated"]);
  assert.ok(closed >= 1);
});
