/**
 * Delegation's host half: the pure reading of an agent task's events and the choices of a
 * delegation (report.ts), and the guest edge that readies an instance for the runners, reads
 * a task's record and runs `get_diff` there (guest.ts), and the Claude model check
 * (preflight.ts). The tools are in mcp/tools/ (delegate.ts, delegate_start.ts,
 * send_message.ts, get_diff.ts, agent_result.ts).
 *
 * @module
 */

export * from "./report.ts";
export * from "./guest.ts";
export * from "./preflight.ts";
