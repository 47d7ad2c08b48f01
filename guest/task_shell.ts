/**
 * The guest half of the task engine, as bash scripts the host runs with one exec each
 * (`bash -c SCRIPT isx ARG...`, as root): launch a run, read facts for a cheap probe, read a
 * status with output tails, list task directories for adoption, cancel (foreground commands
 * are _foreground_shell.ts, over this file's prelude). Shell and not a Deno program because a poll every 2 s must cost a few
 * milliseconds (a shell read of the task files, ~4 ms) where a Deno process costs 120+ ms
 * (shared/reference/measured.md); the guest needs nothing but bash and coreutils.
 *
 * Every value from a client travels as an argv element or on stdin, never spliced into a
 * script: the run script (whose values the host single-quotes) arrives base64-encoded. The
 * guest's files under `~<user>/.isx-mcp/tasks/<id>/` are the source of truth (spec §3.2).
 * Reads open a file read-write and check the descriptor is a regular file (a FIFO planted
 * by the guest's root cannot hang a read); writes go to a temp file then `mv -fT`. The
 * scripts print facts, not decisions: the state rules are the host's pure
 * `mcp/tasks/state.ts`, fed facts gathered here in the order the rules need (exit, then
 * the supervisor, then exit again).
 *
 * @module
 */

import { JOIN_BODY, PRESENCE_FNS } from "./presence_shell.ts";

/** A bash script from a raw template: `$%{` stands for bash's `${` (JS would interpolate it). */
function sh(s: TemplateStringsArray): string {
  return s.raw.join("").replaceAll("$%{", "${");
}

/**
 * Shared functions: the user's task root, FIFO-safe reads, atomic writes, facts. The probe
 * path forks nothing but one `systemctl` (bash builtins only): on a loaded 2-core host each
 * process costs ~6 ms, and the probe runs every 2 s per instance.
 */
export const PRELUDE: string = sh`
u=$1; shift
h=
while IFS=: read -r n _ _ _ _ hh _; do [ "$n" = "$u" ] && { h=$hh; break; }; done </etc/passwd
[ -n "$h" ] || h=$(getent passwd -- "$u" | cut -d: -f6)
[ -n "$h" ] || { echo "isx: no user $u in the instance" >&2; exit 3; }
root=$h/.isx-mcp/tasks
# rdl VAR FILE: VAR=the first line (≤ 4096 chars) of a regular file; opened read-write, so a
# FIFO planted in its place never blocks
rdl() { local _rv=; [ -f "$2" ] || return 1
  { [ -f /dev/fd/3 ] && IFS= read -r -n 4096 _rv <&3; } 3<>"$2" 2>/dev/null
  printf -v "$1" '%s' "$_rv"; }
# num VAR FILE: VAR=the file's number (≤ 12 digits), or fails
num() { local _nw; rdl _nw "$2" || return 1; case $_nw in ''|*[!0-9]*) return 1;; esac
  [ $%{#_nw} -le 12 ] && printf -v "$1" '%s' "$_nw"; }
# wr FILE TEXT: written aside, then renamed over FILE
wr() { local t; t=$(mktemp "$1.XXXXXX") && printf '%s\n' "$2" >"$t" && mv -fT "$t" "$1"; }
sd() { [ -d /run/systemd/system ]; }
# markpids ID: processes whose environment carries ISX_MCP_TASK=ID
markpids() { grep -l -a -z -x -F "ISX_MCP_TASK=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
# factsv ID...: FACTS=one line per task: id run exit unit cancel_age exit_again
factsv() {
  FACTS=
  local id d r x c units=() ids=() runs=() xs=() i ans=() asked=()
  for id in "$@"; do
    d=$root/$id; r=-; x=-
    if [ -d "$d" ]; then num r "$d/current" || r=0; else r=missing; fi
    if [ "$r" != missing ] && [ "$r" != 0 ] && [ -f "$d/exit-$r" ]; then num x "$d/exit-$r" || x='?'; fi
    ids+=("$id"); runs+=("$r"); xs+=("$x")
    if [ "$x" = - ] && [ "$r" != missing ] && [ "$r" != 0 ]; then units+=("isx-task-$id-$r"); fi
  done
  if [ $%{#units[@]} -gt 0 ]; then
    if sd; then
      # a loaded transient unit has its file in /run (removed once collected): active
      # without a process; only the others ask systemctl (~30 ms on a loaded host)
      local ask=() at=() j
      for j in "$%{!units[@]}"; do
        if [ -f "/run/systemd/transient/$%{units[$j]}.service" ]; then ans[$j]=active
        else ans[$j]=; ask+=("$%{units[$j]}"); at+=("$j"); fi
      done
      if [ $%{#ask[@]} -gt 0 ]; then
        mapfile -t asked < <(systemctl is-active -- "$%{ask[@]}" 2>/dev/null)
        for j in "$%{!at[@]}"; do ans[$%{at[$j]}]=$%{asked[$j]:-}; done
      fi
    else
      local live; live=" $(grep -h -a -o -z -x -E 'ISX_MCP_TASK=[a-z0-9-]+' /proc/[0-9]*/environ 2>/dev/null | tr '\0' ' ') "
      for i in "$%{units[@]}"; do i=$%{i#isx-task-}; i=$%{i%-*}
        case $live in *" ISX_MCP_TASK=$i "*) ans+=(active);; *) ans+=(inactive);; esac; done
    fi
  fi
  local k=0 a ca xa
  for i in "$%{!ids[@]}"; do
    id=$%{ids[$i]}; r=$%{runs[$i]}; x=$%{xs[$i]}; a=-; ca=-; xa=-
    if [ "$x" = - ] && [ "$r" != missing ] && [ "$r" != 0 ]; then
      a=$%{ans[$k]:-}; k=$((k+1)); case $a in ''|*[!a-z]*) a=-;; esac
      num c "$root/$id/cancelling-$r" && ca=$((EPOCHSECONDS - c))
      if [ -f "$root/$id/exit-$r" ]; then num xa "$root/$id/exit-$r" || xa='?'; fi
    fi
    FACTS+="$id $r $x $a $ca $xa"$'\n'
  done
}
facts() { factsv "$@"; printf '%s' "$FACTS"; }
`;

/**
 * Launch one run: `isx USER ID RUN KIND KEY B64SCRIPT [NAME B64CONTENT]...` with the prompt on
 * stdin; each NAME/B64CONTENT pair is an extra file of the task (the host checks the names).
 * Exit 17: run 1 of a task that exists; exit 16: an agent run while another is unfinished.
 */
export const LAUNCH_SH: string = sh`set -euo pipefail
` + PRELUDE + sh`
id=$1 n=$2 kind=$3 key=$4 b64=$5
g=$(id -g -- "$u")
d=$root/$id
install -d -o "$u" -g "$g" -m 700 -- "$h/.isx-mcp" "$root"
if [ "$kind" = agent ]; then
  # one agent at a time per instance (§2.6), whichever session launches: under one lock (in
  # /run, out of the user's reach, held until current is written) a launch is refused, exit
  # 16 naming the task, while any agent run is unfinished (running, or its unit unanswered)
  exec 9<>/run/isx-mcp-agent-launch.lock
  flock -w 50 9 || { echo "isx: the agent launch lock is held" >&2; exit 1; }
  ags=()
  for p in "$root"/*; do a=$%{p##*/}; case $a in *[!a-z0-9-]*|'') continue;; esac
    k=; [ -d "$p" ] && rdl k "$p/kind" && [ "$k" = agent ] && ags+=("$a"); done
  if [ $%{#ags[@]} -gt 0 ]; then
    factsv "$%{ags[@]}"
    while read -r bid br bx ba _; do
      case $br in missing|0|'') continue;; esac
      [ "$bx" = - ] || continue
      case $ba in active|activating|-) echo "isx: agent task $bid is running" >&2; exit 16;; esac
    done <<<"$FACTS"
  fi
fi
if [ "$n" = 1 ]; then
  mkdir -m 700 -- "$d" 2>/dev/null || { echo "isx: task $id already exists" >&2; exit 17; }
  # a launch that fails before current is written leaves nothing behind
  trap 'rc=$?; if [ $rc -ne 0 ] && [ ! -e "$d/current" ]; then
    [ "$%{started:-}" = 1 ] && systemctl stop -- "isx-task-$id-$n" >/dev/null 2>&1
    rm -rf -- "$d"; fi' EXIT
else
  [ -d "$d" ] || { echo "isx: task $id has no directory" >&2; exit 4; }
fi
# every file is written aside and renamed in: a symlink planted in the directory is
# replaced, never followed, and a retried launch overwrites what a failed one left
t=$(mktemp "$d/.prompt.XXXXXX"); cat >"$t"; mv -fT "$t" "$d/prompt-$n.md"
t=$(mktemp "$d/.run.XXXXXX"); printf '%s' "$b64" | base64 -d >"$t"; mv -fT "$t" "$d/run-$n.sh"
wr "$d/kind" "$kind"
if [ -n "$key" ]; then wr "$d/key" "$key"; fi
shift 5
while [ $# -ge 2 ]; do t=$(mktemp "$d/.file.XXXXXX"); printf '%s' "$2" | base64 -d >"$t"; mv -fT "$t" "$d/$1"; shift 2; done
chown -R -- "$u:$g" "$d"
chmod 644 -- "$d/prompt-$n.md" "$d/run-$n.sh" "$d/kind"
q=$(printf %q "$d/run-$n.sh")
if sd; then
  systemd-run --quiet --collect --unit="isx-task-$id-$n" -p KillMode=control-group \
    -p TimeoutStopSec=2 -- su - "$u" -c "bash $q" 9>&-
  started=1
else
  setsid -f su - "$u" -c "bash $q" </dev/null >/dev/null 2>&1 9>&-
fi
wr "$d/current" "$n"
chown -h -- "$u:$g" "$d/current"
`;

/**
 * Cheap probe: `isx USER ID...`; prints {@link PRELUDE}'s fact line per task. With
 * `--presence` first (the watcher's slow rounds), then presence_shell.ts's lines for them.
 */
export const PROBE_SH: string = PRELUDE + PRESENCE_FNS + sh`
if [ "$%{1:-}" = --presence ]; then shift; facts "$@"; presence "$@"; else facts "$@"; fi
`;

/** The join (`isx shell --task`): `isx USER ID` on a terminal; see presence_shell.ts. */
export const JOIN_SH: string = PRELUDE + JOIN_BODY;

/**
 * Status of one task: `isx USER ID TAILBYTES ERRTAILBYTES`. Prints key=value lines (the
 * recorded fields raw, first line only, re-validated by the host), `---`, the output tail
 * base64-encoded, `---stderr`, the stderr tail base64-encoded.
 */
export const STATUS_SH: string = PRELUDE + PRESENCE_FNS + sh`
id=$1 tb=$2 eb=$3 d=$root/$1
factsv "$id"; read -r _ r x a ca xa <<<"$FACTS"
echo "facts=$r $x $a $ca $xa"
[ "$r" = missing ] && exit 0
kind=-; rdl kind "$d/kind"; case $kind in agent|command) ;; *) kind=-;; esac
echo "kind=$kind"
if [ "$kind" = agent ]; then o=$d/events-$r.jsonl e=$d/stderr-$r.log; else o=$d/stdout e=$d/stderr; fi
# one stat: mtime of current; size and mtime of each output file (0 0 when absent)
m=$(stat -L -c '%s %Y %n' -- "$d/current" "$o" "$e" 2>/dev/null)
cs=- os=0 om=- es=0 em=-
while read -r z t f; do case $f in "$d/current") cs=$t;; "$o") os=$z om=$t;; "$e") es=$z em=$t;; esac; done <<<"$m"
echo "started=$cs"; echo "stdout_bytes=$os"; echo "stderr_bytes=$es"
a=$om; if [ "$a" = - ] || { [ "$em" != - ] && [ "$em" -gt "$a" ]; }; then a=$em; fi
echo "activity=$a"
for f in cwd session_id model max-turns key; do v=; rdl v "$d/$f" && echo "$f=$v"; done
[ "$kind" != agent ] || presence "$id"
echo ---
# tailb FILE N: the last N bytes, base64 (opened read-write, regular files only)
tailb() { if [ -f "$1" ] && exec 3<>"$1" && [ -f /dev/fd/3 ]; then tail -c "$2" <&3 | base64 -w0; fi; exec 3<&-; echo; } 2>/dev/null
tailb "$o" "$tb"
echo ---stderr
tailb "$e" "$eb"
exit 0
`;

/**
 * Listing for adoption: `isx USER`; per task its facts line, then ` |kind|model|max-turns|key|`
 * and the cwd (the rest of the line), each the first line of its file, raw.
 */
export const LIST_SH: string = PRELUDE + sh`
[ -d "$root" ] || exit 0
ids=()
for p in "$root"/*; do n=$%{p##*/}; case $n in *[!a-z0-9-]*|'') continue;; esac; [ -d "$p" ] && ids+=("$n"); done
[ $%{#ids[@]} -gt 0 ] || exit 0
factsv "$%{ids[@]}"; mapfile -t lines <<<"$%{FACTS%$'\n'}"
for l in "$%{lines[@]}"; do
  id=$%{l%% *}; d=$root/$id; out=""
  for f in kind model max-turns key; do v=; rdl v "$d/$f"; case $v in *'|'*) v=;; esac; out="$out|$v"; done
  v=; rdl v "$d/cwd"; out="$out|$v" # last: may hold |
  printf '%s %s\n' "$l" "$out"
done
`;

/**
 * Dormancy probe (§4.4): `isx USER`; prints `present 1` when a person is present: a process
 * has a pseudo-terminal other than the console's (a person in a shell or joined), an agent
 * process runs without the `ISX_MCP_TASK` marker (a person's agent, terminal or not), or an
 * agent task's join lock is held; else `present 0`; then the age in seconds, by the guest's
 * clock, of the newest file write in any agent task's folder (nothing when there is no agent
 * task). Bash builtins over /proc, no procps needed.
 */
export const QUIET_SH: string = PRELUDE + PRESENCE_FNS + sh`
cons=; [ -e /dev/console ] && cons=$(stat -Lc '%t:%T' /dev/console 2>/dev/null)
present=0
for st in /proc/[0-9]*/stat; do
  l=; { read -r l <"$st"; } 2>/dev/null || continue
  read -ra f <<<"$%{l##*) }"; t=$%{f[4]:-0}; case $t in ''|*[!0-9]*) continue;; esac
  maj=$(( (t >> 8) & 0xfff )); min=$(( (t & 0xff) | ((t >> 12) & 0xfff00) ))
  [ "$maj" -ge 136 ] && [ "$maj" -le 143 ] || continue
  [ "$(printf '%x:%x' "$maj" "$min")" = "$cons" ] && continue
  present=1; break
done
agents=()
if [ -d "$root" ]; then
  for p in "$root"/*; do n=$%{p##*/}; case $n in *[!a-z0-9-]*|'') continue;; esac; [ -d "$p" ] || continue
    k=; rdl k "$p/kind"; [ "$k" = agent ] && agents+=("$n"); done
fi
if [ $present = 0 ] && presence "$%{agents[@]}" | grep -q -E '^presence (proc [0-9]+ - |lock )'; then present=1; fi
echo "present $present"
newest=
for n in "$%{agents[@]}"; do p=$root/$n
  t=$(find "$p" -xdev -type f -printf '%T@\n' 2>/dev/null | sort -n | tail -n 1); t=$%{t%%.*}
  case $t in ''|*[!0-9]*) continue;; esac
  if [ -z "$newest" ] || [ "$t" -gt "$newest" ]; then newest=$t; fi
done
[ -z "$newest" ] || echo "$((EPOCHSECONDS - newest))"
`;

/** Cancel tasks in parallel: `isx USER ID...`; TERM, 2 s, KILL, 143 if no exit; then facts. */
export const CANCEL_SH: string = PRELUDE + sh`
cancel1() {
  local id=$1 d=$root/$1 r p i
  num r "$d/current" || return 0
  if [ ! -f "$d/exit-$r" ]; then wr "$d/cancelling-$r" "$EPOCHSECONDS" || true; fi
  if sd; then systemctl stop -- "isx-task-$id-$r" >/dev/null 2>&1 || true; fi
  p=$(markpids "$id"); [ -z "$p" ] || kill -TERM $p 2>/dev/null || true
  for i in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(markpids "$id")" ] && break; sleep 0.2; done
  p=$(markpids "$id"); [ -z "$p" ] || kill -KILL $p 2>/dev/null || true
  if [ ! -f "$d/exit-$r" ]; then wr "$d/exit-$r" 143 || { echo "isx: cannot record the exit of $id" >&2; return 1; }; fi
  rm -f -- "$d/cancelling-$r"
}
pids=()
for id in "$@"; do cancel1 "$id" & pids+=($!); done
rc=0; for p in "$%{pids[@]}"; do wait "$p" || rc=1; done
facts "$@" # the final state, read in the same exec (for the notification path)
exit $rc
`;
