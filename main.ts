/**
 * Entry point of the one program behind `isb` and `isx`. See cli/mod.ts.
 *
 * @module
 */

import { runCli } from "./cli/mod.ts";

if (import.meta.main) Deno.exit(await runCli(Deno.args));
