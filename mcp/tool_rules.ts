/**
 * What the proxy process (`isx proxy run`) needs from this layer, without the layer: the
 * tools' `proxy:` rules and the search paths of config.yaml. `cli/proxy_run.ts` imports this
 * instead of `mod.ts`, whose graph (the MCP server, instances, the sandbox engine) would
 * stay resident in a long-running process that never uses it (issue 11: the proxy's
 * footprint), and imports it dynamically, only when a tool can exist: its tool schema and
 * YAML reader (zod, js-yaml) cost ~15 MiB resident. The modules behind it import only the
 * error class from `rpc/`.
 *
 * @module
 */

export { loadToolProxyRules, type ToolProxyRule } from "./templates/proxy_rules.ts";
export { readHostConfig } from "./host/config.ts";
