import { ensureTemplate } from "./helpers/_agents_template.ts";
await ensureTemplate();
console.log("built");
