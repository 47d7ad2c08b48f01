/**
 * Entry of the pre-built program (`scripts/prebuild.ts` bundles it with the modules the CLI
 * imports by a computed specifier; `bin/launcher.bash` runs it in place of main.ts while it
 * is fresh). It records where the bundle and the checkout are (`rpc/prebuilt.ts`), which
 * the bundle's own `import.meta.url` no longer says, then runs the CLI as main.ts does.
 * The bundle lives at `<root>/.prebuilt/<version>/`, this file at `cli/prebuilt_main.js`
 * under it.
 *
 * @module
 */

import { type Prebuilt, PREBUILT_KEY } from "../rpc/prebuilt.ts";
import { runCli } from "./mod.ts";

const out = new URL("../", import.meta.url).href;
const where: Prebuilt = { out, root: new URL("../../", out).href };
(globalThis as Record<symbol, Prebuilt>)[PREBUILT_KEY] = where;

if (import.meta.main) Deno.exit(await runCli(Deno.args));
