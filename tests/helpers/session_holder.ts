/**
 * Test helper process (mcp/host/session_locks_test.ts, cli/mcp_test.ts): takes session `id`'s
 * lock under `dir`, says "locked", then waits to be killed (it never stops the session itself).
 *
 * @module
 */

import { SessionLocks } from "../../mcp/host/session_locks.ts";

const [dir, id] = Deno.args;
new SessionLocks(dir!).start(id!);
// deno-lint-ignore no-console
console.log("locked");
setInterval(() => {}, 1 << 30);
