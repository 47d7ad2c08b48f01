/**
 * Delegation's host half: the pure reading of an agent task's events and the choices of a
 * delegation (report.ts), and the guest edge that readies an instance for the runners, reads
 * a task's record and runs `get_diff` there (guest.ts), the Claude model check
 * (preflight.ts), and `ask`: the fenced prompt and bounds (ask_prompt.ts, pure) and the
 * one-shot summary agent run in the guest (ask.ts). The tools are in mcp/tools/ (delegate.ts, delegate_start.ts,
 * send_message.ts, get_diff.ts, agent_result.ts).
 *
 * @module
 */

export * from "./report.ts";
export * from "./guest.ts";
export * from "./preflight.ts";
