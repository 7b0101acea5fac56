# bash completion for slotd and slotctl.
#
# Installed as /usr/share/bash-completion/completions/slotd (and a link named
# slotctl). Subcommands and flags are read from the command's own --help
# (`slotctl run --help`), so they follow the installed version; the choices
# CLI11 prints ({text,json}) complete an option's value or a positional.
# For a slotctl subcommand that takes a kernel id (rm, restart, exec, logs,
# stats), the ids come from `slotctl kernels --json` of the agent the line
# names (--agent, --socket, --config, --token-file); when no agent answers
# within 2 seconds, nothing is offered.

# _slotd_help_section HELP SECTION: the lines of SECTION ("Options:",
# "Subcommands:", "Positionals:") of a CLI11 --help text.
_slotd_help_section() {
  printf '%s\n' "$1" | sed -n "/^$2\$/,/^\$/p" | sed '1d;/^$/d'
}

# _slotd_options HELP: every flag name of HELP's Options section.
_slotd_options() {
  _slotd_help_section "$1" 'Options:' | sed -n 's/^  \(-[^ ]*\).*/\1/p' | tr ',' '\n'
}

# _slotd_choices HELP NAME: the {a,b} choices CLI11 lists for option or
# positional NAME, one a line.
_slotd_choices() {
  local line
  line=$(printf '%s\n' "$1" | grep -E -m1 "^  ([^ ]*,)?$2 ")
  [[ $line =~ \{([^}]*)\} ]] && printf '%s\n' "${BASH_REMATCH[1]}" | tr ',' '\n'
}

# _slotd_complete PROGRAM GLOBAL_VALUE_FLAGS: fills COMPREPLY for the words
# of the line. GLOBAL_VALUE_FLAGS are flags that take a value (their value
# is not a subcommand), separated by '|'.
_slotd_complete() {
  local program=$1 takes_value=$2 name=${1##*/}
  local cur=${COMP_WORDS[COMP_CWORD]} prev=
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  local -a path=() agent_flags=()
  local help word i positionals=0 after_dashes=no
  help=$("$program" --help 2>/dev/null) || return 0
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word == -- ]]; then
      after_dashes=yes
      break
    fi
    if [[ $word == -* ]]; then
      if [[ $word =~ ^($takes_value)$ && $((i + 1)) -lt $COMP_CWORD ]]; then
        ((${#path[@]} == 0)) && agent_flags+=("$word" "${COMP_WORDS[i + 1]}")
        ((i++))
      fi
      continue
    fi
    if _slotd_help_section "$help" 'Subcommands:' | grep -q -E "^  $word( |\$)"; then
      path+=("$word")
      help=$("$program" "${path[@]}" --help 2>/dev/null) || return 0
      positionals=0
    else
      ((positionals++))
    fi
  done
  [[ $after_dashes == yes ]] && return 0  # the kernel's command: nothing to offer

  local -a candidates=()
  local choices
  if [[ $prev == -* ]]; then
    choices=$(_slotd_choices "$help" "$prev")
    if [[ -n $choices ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$choices" -- "$cur")
      return 0
    fi
    if _slotd_help_section "$help" 'Options:' | grep -q -E "^  ([^ ]*,)?$prev [A-Z]"; then
      case $prev in
        --config | -c | --token-file | --socket | --base-config | --etcd-password-file | --out | -o | --sysfs-root)
          mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
        --dir | --ca-dir | --out-dir)
          mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
      esac
      return 0
    fi
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_slotd_options "$help")" -- "$cur")
    return 0
  fi
  mapfile -t candidates < <(_slotd_help_section "$help" 'Subcommands:' | sed -n 's/^  \([^ ]*\).*/\1/p')
  local first
  first=$(_slotd_help_section "$help" 'Positionals:' | sed -n "$((positionals + 1))p" | sed -n 's/^  \([^ ]*\).*/\1/p')
  if [[ -n $first ]]; then
    choices=$(_slotd_choices "$help" "$first")
    [[ -n $choices ]] && mapfile -t -O "${#candidates[@]}" candidates < <(printf '%s\n' "$choices")
    if [[ $name == slotctl && $first == kernel ]]; then
      mapfile -t -O "${#candidates[@]}" candidates < <(
        timeout 2 "$program" "${agent_flags[@]}" --json kernels 2>/dev/null |
          grep -o '"kernel_id": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/')
    fi
    if [[ ($name == slotd && ${path[0]:-} == check) || ($name == slotctl && ${path[*]} == "tls fingerprint") ]]; then
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
    fi
  fi
  mapfile -t COMPREPLY < <(compgen -W "${candidates[*]}" -- "$cur")
}

_slotd() { _slotd_complete "${COMP_WORDS[0]}" '--config|-c|--log-format|--log-level'; }
_slotctl() { _slotd_complete "${COMP_WORDS[0]}" '--agent|--socket|--config|--token-file'; }

complete -F _slotd slotd
complete -F _slotctl slotctl
