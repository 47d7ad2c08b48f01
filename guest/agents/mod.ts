/**
 * The guest runners of delegated agents: per agent, the headless command line
 * (launch.ts's request → argv, environment, prompt head) and the translator of its native
 * stream into the one event subset the host reads (events.ts). run.ts is the I/O edge that
 * spawns an agent and writes its task files. Guest scripts: nothing here imports anything
 * outside `guest/`.
 *
 * @module
 */

export type {
  AgentEvent,
  AgentName,
  AssistantEvent,
  Block,
  ErrorEvent,
  ExitInfo,
  InitEvent,
  ResultEvent,
  Translator,
  Usage,
} from "./events.ts";
export { LineBuffer } from "./events.ts";
export type { Launch, LaunchRequest } from "./launch.ts";
export {
  AGENT_RUNNER_FILES,
  agentRunnerArgv,
  type AgentRunnerFile,
  agentRunScript,
  type DiffCommand,
  diffRunnerArgv,
  GUEST_DENO_ENV,
  type RunnerPlace,
} from "./argv.ts";
export { opencodeModel } from "./opencode.ts";
export { piSessionFile, runAgent, type RunAgentOptions, type RunAgentOutcome } from "./run.ts";
export { AGENT_NAMES, agentLaunch, agentTranslator, type TranslatorContext } from "./table.ts";
