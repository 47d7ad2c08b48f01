/**
 * Foreground commands' guest half (spec §2.5), apart from the task scripts because it runs a
 * different way: not a root `bash -c` wrapper per call but one argv straight to the user
 * (`setsid`, `setpriv`, the login shell), whose first lines record the session for the kill
 * script. The kill script shares the task scripts' prelude (user lookup, FIFO-safe reads).
 *
 * @module
 */

import { PRELUDE } from "./task_shell.ts";

/** A bash script from a raw template: `$%{` stands for bash's `${` (JS would interpolate it). */
function sh(s: TemplateStringsArray): string {
  return s.raw.join("").replaceAll("$%{", "${");
}

/**
 * A foreground command's argv (spec §2.5), one exec with no root shell in between: `setsid`
 * makes the session a cancel kills, `setpriv` drops straight to USER with its groups and a
 * reset environment (where `su -` ran a PAM stack and a wrapper forked `base64`, `id` and
 * `install`: ~20 ms per call on a loaded 2-core host), `timeout` when one is set, then
 * USER's login shell runs {@link FOREGROUND_LINE}: {@link FOREGROUND_SH} then SETUP (the
 * host's single-quoted exports), then COMMAND in that same login shell, as `su - USER -c`
 * runs it (no second bash). USER's primary group carries its name, as the templates make it
 * (`useradd -U`). The shell's `$0` is `bash`, as under `bash -c`.
 */
export function foregroundArgv(
  user: string,
  name: string,
  timeout: string,
  setup: string,
  command: string,
): string[] {
  return [
    "setsid",
    "-w",
    "setpriv",
    `--reuid=${user}`,
    `--regid=${user}`,
    "--init-groups",
    "--reset-env",
    ...(timeout ? ["timeout", "-k", "10s", `${timeout}s`] : []),
    "bash",
    "-l",
    "-c",
    FOREGROUND_LINE,
    "bash",
    name,
    FOREGROUND_SH + setup,
    command,
  ];
}

/**
 * The login shell's whole `-c` text, one line: `$2` (FOREGROUND_SH and the exports) runs,
 * then the command (`$3`) in the same shell with no positional parameters. Both are
 * arguments, never spliced into this line; the command's text is parsed by `eval` exactly
 * once, as `bash -c` would parse it, and being on line 1 its error messages carry the
 * command's own line numbers.
 */
export const FOREGROUND_LINE = 'eval "$2"; eval "set --; $3"';

/**
 * The login shell's first lines, as the user. First the gate: the working directory arrives
 * on stdin, ended by NUL (bash reads a pipe a byte at a time, so the command's stdin stays
 * whole behind it). The host starts this exec while it still checks that it holds the
 * instance, and sends the directory only once the check passed; end of input instead (a
 * refused call) ends the shell (125, as a failed `cd`) before anything is written or run. Then the session's id goes
 * to `~/.isx-mcp/run/$1.pid` (written with `set -C`, so never through a planted file or
 * link) for the kill script. The file outlives the run (removing it would cost a process per
 * call); once more than 64 pile up, one `rm` takes those whose session has no leader left.
 * Then `cd` (empty: home; relative: under home), 125 when it fails. Builtins only on the
 * common path; its variables (`_isx_*`) are gone before the exports and the command.
 */
export const FOREGROUND_SH: string =
  sh`IFS= read -r -d '' _isx_c || { echo "isx: no working directory came on stdin (refused by isx, or a login profile read stdin)" >&2; exit 125; }
_isx_d=$HOME/.isx-mcp/run
[ -d "$_isx_d" ] || ( umask 077 && exec mkdir -p -- "$_isx_d" ) || { echo "isx: cannot make $_isx_d" >&2; exit 1; }
read -r _isx_l </proc/$$/stat; read -r -a _isx_a <<<"$%{_isx_l##*) }"; _isx_p=$_isx_d/$1.pid
set -C; { printf '%s\n' "$%{_isx_a[3]}" >"$_isx_p"; } 2>/dev/null || { rm -f -- "$_isx_p"; printf '%s\n' "$%{_isx_a[3]}" >"$_isx_p"; }; set +C
_isx_f=("$_isx_d"/*.pid)
if [ $%{#_isx_f[@]} -gt 64 ]; then _isx_o=()
  for _isx_x in "$%{_isx_f[@]}"; do [ -f "$_isx_x" ] || continue; _isx_y=; { read -r _isx_y <"$_isx_x"; } 2>/dev/null
    case $_isx_y in ''|*[!0-9]*) _isx_o+=("$_isx_x");; *) [ -e "/proc/$_isx_y" ] || _isx_o+=("$_isx_x");; esac; done
  [ $%{#_isx_o[@]} -eq 0 ] || rm -f -- "$%{_isx_o[@]}"
fi
case $_isx_c in '') cd;; /*) cd -- "$_isx_c";; *) cd -- "$HOME/$_isx_c";; esac || exit 125
unset _isx_c _isx_d _isx_l _isx_a _isx_p _isx_f _isx_x _isx_y _isx_o
`;

/** Kill a foreground command's whole session: `isx USER NAME`; TERM, 3 s, KILL. */
export const FOREGROUND_KILL_SH: string = PRELUDE + sh`
pf=$h/.isx-mcp/run/$1.pid
num sid "$pf" || exit 0
sidpids() { local f s a p; for f in /proc/[0-9]*/stat; do { IFS= read -r s <"$f"; } 2>/dev/null || continue
  read -r -a a <<<"$%{s##*) }"; if [ "$%{a[3]:-}" = "$1" ]; then p=$%{f#/proc/}; echo "$%{p%/stat}"; fi; done; }
p=$(sidpids "$sid"); [ -z "$p" ] || kill -TERM $p 2>/dev/null
for i in $(seq 15); do [ -z "$(sidpids "$sid")" ] && exit 0; sleep 0.2; done
p=$(sidpids "$sid"); [ -z "$p" ] || kill -KILL $p 2>/dev/null
exit 0
`;
