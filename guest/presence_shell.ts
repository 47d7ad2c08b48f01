/**
 * The guest half of joining (spec §6.A.5, §12.4): the presence scan the status read and the
 * slow watcher rounds run, and the join script `isx shell --task` runs on a terminal. Both
 * are bash the host sends with each exec (no guest program to install), run as root.
 *
 * The scan prints facts, never decisions: per task its agent, session and cwd; per process
 * that looks like one of the four agents (by argv0, or a `node`/`bun` launcher's script) its
 * pid, its `ISX_MCP_TASK` and `ISX_JOIN` markers, its cwd and its whole argv; per task whose
 * join lock is held, the holder's recorded pid. Which process is a person in which task's
 * conversation is decided on the host by the pure `mcp/tasks/presence.ts`, where the four
 * agents' process shapes are table-tested. Guest-written values are base64 where they may
 * hold spaces or newlines and are re-validated on the host.
 *
 * @module
 */

/** A bash script from a raw template: `$%{` stands for bash's `${` (JS would interpolate it). */
function sh(s: TemplateStringsArray): string {
  return s.raw.join("").replaceAll("$%{", "${");
}

/**
 * Bash functions over {@link PRELUDE}'s `root`, `rdl`, `num`: `presence ID...` prints
 * `presence task ID AGENT SESSION B64CWD`, `presence proc PID MARK JOIN B64CWD B64ARGV` and
 * `presence lock ID PID` lines. A process is a candidate when its argv0 is an agent's name
 * (`claude`, `codex…`, `pi`, `opencode`, `.opencode`) or it is `node`/`bun` running a script
 * whose path names one; reads are builtins except for the few candidates' cwd and base64.
 */
export const PRESENCE_FNS: string = sh`
# b64 FILE: its bytes base64 on one line; - when unreadable
b64f() { local v; v=$(base64 -w0 <"$1" 2>/dev/null) && [ -n "$v" ] && printf '%s' "$v" || printf -; }
b64s() { if [ -n "$1" ]; then printf '%s' "$1" | base64 -w0; else printf -; fi; }
isagent() { case $1 in claude|claude.exe|codex|codex-*|codex.exe|pi|opencode|opencode.exe|.opencode) return 0;; esac; return 1; }
presence() {
  local id d ag sid cw c p a0 a1 b0 b1 e mk jn pid
  for id in "$@"; do
    d=$root/$id; ag=-; sid=-; cw=
    rdl ag "$d/agent" || ag=-; case $ag in ''|*[!a-z]*) ag=-;; esac
    rdl sid "$d/session_id" || sid=-; case $sid in ''|*[!A-Za-z0-9._:@-]*) sid=-;; esac
    rdl cw "$d/cwd" || cw=
    printf 'presence task %s %s %s %s\n' "$id" "$ag" "$sid" "$(b64s "$cw")"
  done
  for c in /proc/[0-9]*/cmdline; do
    p=$%{c#/proc/}; p=$%{p%/cmdline}; a0=; a1=
    { IFS= read -r -d '' a0; IFS= read -r -d '' a1; } <"$c" 2>/dev/null
    b0=$%{a0##*/}; b1=$%{a1##*/}; b0=$%{b0%% *}
    if ! isagent "$b0"; then
      case $b0 in node|nodejs|node[0-9]*|bun) ;; *) continue;; esac
      case $a1 in *claude-code*|*pi-coding-agent*|*opencode-ai*|*/@openai/codex*) ;;
        *) isagent "$b1" || isagent "$%{b1%.js}" || continue;; esac
    fi
    mk=-; jn=-
    while IFS= read -r -d '' e; do
      case $e in ISX_MCP_TASK=*) mk=$%{e#*=};; ISX_JOIN=*) jn=$%{e#*=};; esac
    done <"/proc/$p/environ" 2>/dev/null
    case $mk in ''|*[!a-z0-9-]*) mk=-;; esac; case $jn in ''|*[!a-z0-9-]*) jn=-;; esac
    printf 'presence proc %s %s %s %s %s\n' "$p" "$mk" "$jn" \
      "$(b64s "$(readlink "/proc/$p/cwd" 2>/dev/null)")" "$(b64f "$c")"
  done
  for id in "$@"; do
    d=$root/$id
    [ -f "$d/join.lock" ] || continue
    { if [ -f /dev/fd/4 ] && ! flock -n -x 4; then
        pid=-; num pid "$d/join.pid" || pid=-; echo "presence lock $id $pid"; fi
    } 4<>"$d/join.lock" 2>/dev/null
  done
}
`;

/**
 * The join's body (after task_shell.ts's prelude), on the person's terminal: `isx USER ID`,
 * as root. Refuses (exit 4 no task,
 * 5 a command task, 6 a run in progress, 7 nothing to resume, 75 someone else joined) with
 * one line on stderr; otherwise takes the task's join lock, records its pid, and runs the
 * agent's own interactive resume of the recorded session in the recorded cwd as USER in a
 * login environment, with `ISX_JOIN=ID` set (the presence scan's marker) and the lock's
 * descriptor closed for the agent. Every value goes into an argv array; none into a script.
 */
export const JOIN_BODY: string = sh`
id=$1 d=$root/$1
say() { echo "isx: $*" >&2; }
[ -d "$d" ] || { say "no task $id in this instance"; exit 4; }
k=; rdl k "$d/kind"; [ "$k" = agent ] || { say "task $id is a command task: there is no conversation to join"; exit 5; }
factsv "$id"; read -r _ r x a ca xa <<<"$FACTS"
if [ "$x" = - ] && { [ "$a" = active ] || [ "$a" = activating ] || [ "$ca" != - ]; }; then
  say "task $id is still running turn $r: wait until it finishes (wait_any), then join"; exit 6
fi
ag=; rdl ag "$d/agent"; sid=; rdl sid "$d/session_id"; cw=; rdl cw "$d/cwd"
case $sid in ''|-*|*[!A-Za-z0-9._:@-]*) say "task $id recorded no session to resume"; exit 7;; esac
[ -d "$cw" ] || { say "task $id: its directory is gone"; exit 7; }
case $ag in
  claude) cmd=(claude --resume "$sid");;
  codex) cmd=(codex resume "$sid");;
  pi) [ -f "$d/pi-session.jsonl" ] || { say "task $id: Pi has not saved its session"; exit 7; }
      cmd=(pi --session "$d/pi-session.jsonl");;
  opencode) cmd=(opencode --session "$sid");;
  *) say "task $id recorded no agent to resume"; exit 7;;
esac
exec 9<>"$d/join.lock" && [ -f /dev/fd/9 ] || { say "task $id: cannot open its join lock"; exit 1; }
if ! flock -w 3 -x 9; then
  p=-; num p "$d/join.pid" || p=-
  say "someone else has joined task $id (pid $p): wait until they leave"; exit 75
fi
wr "$d/join.pid" "$$"
# --session-command keeps the terminal (su -c would start a new session without it)
# (-- first: su's option parser would take an agent's own -c/-s for its own)
su -l --session-command 'export ISX_JOIN=$1; cd -- "$2" || exit 1; shift 2; exec "$@"' \
  -- "$u" isx-join "$id" "$cw" "$%{cmd[@]}" 9>&-
rc=$?
rm -f -- "$d/join.pid"
exit $rc
`;
