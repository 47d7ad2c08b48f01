# Sourced by the launchers `bin/isb` and `bin/isx` (which set `prog` and `root`): starts
# main.ts under deno, once, with exactly the permission flags of the table in
# cli/permissions.ts for this user, directory and arguments.
#
# The flags are computed by cli/flags.ts (the table's own code, the one source) and kept in
# a per-user cache, ${XDG_CACHE_HOME:-~/.cache}/isx-launch (outside every grant of the
# table: no mode of the program can write its own flags), one file per program and working
# directory whose first line is the rest of the key: uid, deno, the program's directory, every
# variable flags.ts reads
# and, when they can change the flags (`rpc`, `--socket`, `--remote`), the arguments. A file older than
# any source of the table (LAUNCH_SOURCES), than deno or than the incus client's config.yml (its
# default-remote) is stale. A hit starts Deno once; a
# miss runs flags.ts first and refills the file. ISX_LAUNCH_PRINT=1 prints the flags instead
# of starting the program (tests compare them with the table's).

# The modules cli/flags.ts loads (tests/launcher_test.ts checks this list against its graph).
LAUNCH_SOURCES=(cli/flags.ts cli/args.ts cli/argv.ts cli/launch.ts cli/permissions.ts cli/perm_modes.ts
  cli/perm_context.ts cli/npm_env.ts)
# The variables cli/flags.ts reads (the test runs it with only these allowed).
LAUNCH_ENV=(HOME XDG_CONFIG_HOME XDG_STATE_HOME XDG_CACHE_HOME XDG_RUNTIME_DIR TMPDIR
  INCUS_SOCKET INCUS_DIR ISB_ORG INCUS_PROJECT ISX_PROG ISX_DENO INCUS_REMOTE INCUS_CONF)

# Nothing the launchers start reaches out: Deno's daily release check (a DNS lookup and an
# HTTPS request to its download host) is off, for main.ts and cli/flags.ts alike, and for
# every process they start (the background proxy inherits it). tests/launcher_test.ts runs
# a start under strace and finds no DNS lookup.
export DENO_NO_UPDATE_CHECK=1

# deno: ISX_DENO, else the first on PATH (looked up without a subshell), else npm's copy
deno="${ISX_DENO:-}"
if [[ -z "$deno" ]]; then
  IFS=: read -ra launch_path <<<"${PATH:-}"
  for d in "${launch_path[@]}"; do
    if [[ -n "$d" && -x "$d/deno" && ! -d "$d/deno" ]]; then
      deno="$d/deno"
      break
    fi
  done
  if [[ -z "$deno" ]]; then
    deno="${XDG_CACHE_HOME:-$HOME/.cache}/deno-npm/2.9.6/node_modules/@deno/linux-x64-glibc/deno"
  fi
fi
if [[ ! -x "$deno" ]]; then
  echo "$prog: deno not found (set ISX_DENO, put deno on PATH, or install it under $deno)" >&2
  exit 1
fi

# Deno.cwd() is the physical directory: so is the key (cd -P is a builtin, no process)
cd -P . 2>/dev/null || true

launch_key() {
  local k="v1" v a argkey=""
  for a in "$@"; do
    if [[ "$a" == rpc || "$a" == --socket* || "$a" == --remote* ]]; then
      printf -v argkey '%q ' "$@"
      break
    fi
  done
  k+=$'\x1f'"$UID"$'\x1f'"$deno"$'\x1f'"$root" # two checkouts run from one directory: each its own
  for v in "${LAUNCH_ENV[@]}"; do k+=$'\x1f'"$v=${!v-}"; done
  REPLY="$k"$'\x1f'"$argkey"
}

launch_file() {
  local dir="${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/isx-launch" name
  name="${PWD//%/%25}"
  name="${prog}_${name//\//%2F}"
  if ((${#name} > 200)); then
    name="${prog}_$(printf '%s' "$PWD" | sha256sum)"
    name="${name%% *}"
  fi
  REPLY="$dir/$name"
}

launch_flags=()
launch_key "$@"
key="$REPLY"
launch_file
cache="$REPLY"
if [[ "$key" != *$'\n'* && -f "$cache" && -O "$cache" ]]; then
  fresh=1
  # and the incus client's config.yml: its default-remote decides whether a remote is read
  for f in "${LAUNCH_SOURCES[@]/#/$root/}" "$deno" "${INCUS_CONF:-${HOME:-/nonexistent}/.config/incus}/config.yml"; do
    if [[ "$f" -nt "$cache" ]]; then fresh=0; fi
  done
  if ((fresh)); then
    mapfile -t lines <"$cache" || lines=()
    if [[ ${#lines[@]} -gt 1 && "${lines[0]}" == "$key" ]]; then launch_flags=("${lines[@]:1}"); fi
  fi
fi
if [[ ${#launch_flags[@]} -eq 0 ]]; then
  # flags are the lines starting with --; anything else is deno's error, said in one line
  mapfile -t got < <(ISX_PROG="$prog" "$deno" run --quiet --no-prompt --cached-only --allow-read \
    --allow-env --allow-sys=uid --config "$root/deno.json" "$root/cli/flags.ts" "$@" 2>&1 ||
    echo "exit status $?")
  launch_err=""
  for l in "${got[@]}"; do
    if [[ "$l" == --* ]]; then
      launch_flags+=("$l")
    elif [[ -z "$launch_err" && "$l" =~ [^[:space:]] ]]; then
      launch_err="${l#"${l%%[![:space:]]*}"}"
    fi
  done
  if [[ ${#launch_flags[@]} -eq 0 || -n "$launch_err" ]]; then
    [[ "$launch_err" == *"--cached-only"* || "$launch_err" == *"not found in cache"* ]] &&
      launch_err+=" (run bash scripts/install-deno.sh to cache the dependencies)"
    echo "$prog: cannot start: computing the permission flags failed: ${launch_err:-no output}" >&2
    exit 1
  fi
  if [[ "$key" != *$'\n'* ]] && mkdir -p "${cache%/*}" 2>/dev/null; then
    if { printf '%s\n' "$key" "${launch_flags[@]}" >"$cache.$$"; } 2>/dev/null; then
      mv -f "$cache.$$" "$cache" 2>/dev/null || rm -f "$cache.$$"
    fi
  fi
fi

# The checkout's commit (isx: the proxy reports it in /health and the CLI compares it with
# its own), read from .git without starting git; git itself when the layout is unusual.
git_sha() {
  local g="$root/.git" line ref common d sha name
  if [[ -f "$g" ]]; then
    read -r line <"$g" || return 1
    g="${line#gitdir: }"
    [[ "$g" == /* ]] || g="$root/$g"
  fi
  [[ -r "$g/HEAD" ]] && read -r line <"$g/HEAD" || return 1
  if [[ "$line" != "ref: "* ]]; then
    REPLY="$line"
    return 0
  fi
  ref="${line#ref: }"
  common="$g"
  if [[ -f "$g/commondir" ]]; then
    read -r common <"$g/commondir" || return 1
    [[ "$common" == /* ]] || common="$g/$common"
  fi
  for d in "$g" "$common"; do
    if [[ -f "$d/$ref" ]]; then
      read -r REPLY <"$d/$ref"
      return
    fi
  done
  [[ -f "$common/packed-refs" ]] || return 1
  while read -r sha name; do
    if [[ "$name" == "$ref" ]]; then
      REPLY="$sha"
      return 0
    fi
  done <"$common/packed-refs"
  return 1
}
if [[ "$prog" == isx ]]; then
  if git_sha && [[ "$REPLY" =~ ^[0-9a-f]{40}([0-9a-f]{24})?$ ]]; then
    ISX_GIT_SHA="$REPLY"
  else
    ISX_GIT_SHA="$(git -C "$root" rev-parse HEAD 2>/dev/null || true)"
  fi
  export ISX_GIT_SHA
fi

# `isx proxy run` (the proxy in the foreground) gets the V8 flags `isx proxy start` gives the
# background proxy, and `isx mcp` its own: PROXY_V8_FLAGS of cli/proxy_lifecycle.ts (tests/launcher_test.ts checks
# both the value and which argument lists get it). The command and its subcommand are the
# first two words that are neither flags nor the values of the global value flags
# (VALUE_FLAGS of cli/args.ts).
PROXY_V8_FLAGS="--max-semi-space-size=4"
# `isx mcp` starts with young semi-spaces of 8 MiB rather than V8's 1 that double as the
# start-up allocates: fewer scavenges of the freshly loaded program before the first tool call
# (list_templates 163 → 147 ms CPU, idle RSS 56.0 → 55.0 MiB; docs/decisions.md).
MCP_V8_FLAGS="--min-semi-space-size=8"
v8_flags=()
if [[ "$prog" == isx ]]; then
  words=()
  skip=0
  for a in "$@"; do
    if ((skip)); then
      skip=0
      continue
    fi
    case "$a" in
    --) break ;;
    --socket | --project | --remote | --target | --org | --create-timeout | --env-file | --file | -P)
      skip=1
      ;;
    -f) if ((${#words[@]} == 0)); then skip=1; fi ;;
    -*) ;;
    *)
      words+=("$a")
      if ((${#words[@]} == 2)); then break; fi
      ;;
    esac
  done
  if [[ "${words[0]:-}" == proxy && "${words[1]:-}" == run ]]; then
    v8_flags=("--v8-flags=$PROXY_V8_FLAGS")
  elif [[ "${words[0]:-}" == mcp ]]; then
    v8_flags=("--v8-flags=$MCP_V8_FLAGS")
  fi
fi

# The program: its pre-built form (scripts/prebuild.ts: a code-split bundle under
# $root/.prebuilt/<version>/, named by .prebuilt/current) while no file its `inputs` lists and
# not deno itself is newer than that list, else main.ts. Both files must be this user's. When
# it is missing or stale and the checkout is this user's, a build starts in the background
# (one at a time; it makes the next start fast, not this one). ISX_PREBUILT=0 runs the sources
# and builds nothing.
entry="$root/main.ts"
prebuilt_stale=0
if [[ "${ISX_PREBUILT:-1}" != 0 ]]; then
  pre="$root/.prebuilt"
  ver=""
  if [[ -f "$pre/current" && -O "$pre/current" ]]; then read -r ver <"$pre/current" || ver=""; fi
  prebuilt_stale=1
  if [[ "$ver" =~ ^v[0-9]+-[0-9]+$ && -f "$pre/$ver/inputs" && -O "$pre/$ver/inputs" &&
    -f "$pre/$ver/cli/prebuilt_main.js" && ! "$deno" -nt "$pre/$ver/inputs" ]]; then
    mapfile -t inputs <"$pre/$ver/inputs"
    prebuilt_stale=0
    for f in "${inputs[@]}"; do
      if [[ "$root/$f" -nt "$pre/$ver/inputs" ]]; then
        prebuilt_stale=1
        break
      fi
    done
    if ((!prebuilt_stale)); then entry="$pre/$ver/cli/prebuilt_main.js"; fi
  fi
fi
if [[ "${ISX_LAUNCH_PRINT:-}" == entry ]]; then
  printf '%s\n' "$entry"
  exit 0
fi

if [[ "${ISX_LAUNCH_PRINT:-}" == 1 ]]; then
  printf '%s\n' "${launch_flags[@]}"
  if [[ "$prog" == isx ]]; then printf '# ISX_GIT_SHA=%s\n' "$ISX_GIT_SHA"; fi
  if ((${#v8_flags[@]})); then printf '# %s\n' "${v8_flags[@]}"; fi
  exit 0
fi
if ((prebuilt_stale)) && [[ -O "$root" && -w "$root" ]]; then
  # detached, quiet, and with nothing of ours open: it outlives this start, never its output
  (ISX_PROG= setsid "$deno" run --quiet --no-prompt --cached-only --allow-read \
    --allow-write="$root/.prebuilt" --allow-run="$deno" --allow-env --config "$root/deno.json" \
    "$root/scripts/prebuild.ts" --if-stale --background --quiet </dev/null >/dev/null 2>&1 &)
fi
ISX_PROG="$prog" exec "$deno" run --quiet --cached-only --config "$root/deno.json" \
  "${v8_flags[@]}" "${launch_flags[@]}" "$entry" "$@"
