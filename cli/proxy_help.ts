/**
 * The `--help` text of `isx proxy account`, kept apart so `cli/proxy.ts` can show it
 * without importing the account command (and the MCP layer behind it).
 *
 * @module
 */

/** The `--help` of `isx proxy account`. */
export const ACCOUNT_HELP = `Usage: isx proxy account list [--json]
       isx proxy account set <instance> NS=NAME [NS=NAME ...]
       isx proxy account unset <instance> NS [NS ...]

Which credentials.yaml account an instance's requests use, per namespace: claude (or
anthropic), openai (or codex), github. The proxy resolves: the instance's pin, else its
template's accounts:, else the namespace default (default:, else Vertex > OAuth > API key
for claude, else the first account). A pin naming a missing account, or a claude account
of another auth mode than the instance was built for, makes the proxy answer 502: it
never falls back to another account. Pins can also be set with isx branch --account.

  list    every instance's pins, template accounts and, when the proxy answers, the
          account it resolves to or why it refuses (--json: an array of objects;
          --url URL: the proxy's ops address)
  set     pin accounts (replaces the namespace's pin)
  unset   remove pins (the template's or default account applies again)`;
