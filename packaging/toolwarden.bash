# bash completion for toolwarden(1)                              -*- shell-script -*-
# Installed as /usr/share/bash-completion/completions/toolwarden (loaded on demand by the
# bash-completion package); it needs none of that package's helpers, so `source` works too.
# tests/packaging/completion.test.mjs checks it offers exactly the options of each --help.

_toolwarden() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=""
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  local common="--runtime-dir --state-dir --config --help"
  # Options that take a value: the word after one is never a command.
  local valued=" --runtime-dir --state-dir --config --listen --log-level --worktree --access
    --allow --block --command --tool --ttl --mcp-config --job --limit --timeout --memory
    --output-bytes --client --token-file --file "
  local clients="claude-code vscode cursor json"

  # The command words typed so far ("job create", "audit verify", ...), and whether a `--`
  # (the start of `run`'s program) lies before the cursor.
  local cmd="" i word after_dashes=0 positionals=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word == -- ]]; then
      after_dashes=$((COMP_CWORD - i))
      break
    elif [[ $valued == *" $word "* ]]; then
      ((i++))
    elif [[ $word == -* ]]; then
      :
    elif [[ -z $cmd ]]; then
      cmd=$word
    elif [[ $cmd == job && $word =~ ^(create|revoke|renew|list|show)$ ]] ||
      [[ $cmd == tools && $word =~ ^(list|trust)$ ]] || [[ $cmd == audit && $word == verify ]] ||
      [[ $cmd == snapshot && $word == capture ]] || [[ $cmd == probe && $word =~ ^(plan|run|show)$ ]]; then
      cmd+=" $word"
    else
      positionals=$((positionals + 1))
    fi
  done

  if ((after_dashes > 0)); then
    if ((after_dashes == 1)); then
      mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
  fi

  case $prev in
    --runtime-dir | --state-dir | --worktree)
      mapfile -t COMPREPLY < <(compgen -d -- "$cur")
      return 0
      ;;
    --config | --token-file | --file)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0
      ;;
    --access)
      mapfile -t COMPREPLY < <(compgen -W "read write" -- "$cur")
      return 0
      ;;
    --log-level)
      mapfile -t COMPREPLY < <(compgen -W "debug info warn error" -- "$cur")
      return 0
      ;;
    --client | --mcp-config)
      mapfile -t COMPREPLY < <(compgen -W "$clients" -- "$cur")
      return 0
      ;;
    --tool)
      mapfile -t COMPREPLY < <(compgen -W "local_read local_list local_search local_edit \
        local_test probes probe_plan probe_run probe_show" -- "$cur")
      return 0
      ;;
    --job)
      mapfile -t COMPREPLY < <(compgen -W "$(_toolwarden_job_ids)" -- "$cur")
      return 0
      ;;
    --listen | --allow | --block | --command | --ttl | --limit | --timeout | --memory | \
      --output-bytes)
      return 0
      ;;
  esac

  local options="" words=""
  case $cmd in
    "") words="serve job tools snapshot probe audit run doctor mcp-config help version" options="--help --version" ;;
    serve) options="--listen --log-level" ;;
    job) words="create revoke renew list show" ;;
    "job create")
      options="--worktree --access --allow --block --command --tool --ttl --mcp-config"
      ;;
    "job revoke" | "job show")
      ((positionals == 0)) && words=$(_toolwarden_job_ids)
      ;;
    "job renew")
      options="--mcp-config"
      ((positionals == 0)) && words=$(_toolwarden_job_ids)
      ;;
    "job list") options="--json" ;;
    tools) words="list trust" ;;
    "tools list") options="--worktree --json" ;;
    "tools trust")
      # WORKTREE NAME: the worktree is a directory; NAME one of its .toolwarden/tools folders.
      if ((positionals == 0)); then
        [[ $cur != -* ]] && mapfile -t COMPREPLY < <(compgen -d -- "$cur") && return 0
      fi
      ;;
    snapshot) words="capture" ;;
    "snapshot capture") options="--worktree" ;;
    probe) words="plan run show" ;;
    "probe plan") options="--file" ;;
    "probe run" | "probe show") ;;
    audit)
      options="--job --limit --json"
      words="verify"
      ;;
    "audit verify") options="--json" ;;
    run) options="--worktree --writable --timeout --memory --output-bytes --" ;;
    doctor) options="--json" ;;
    mcp-config)
      options="--client --token-file"
      ((positionals == 0)) && words=$(_toolwarden_job_ids)
      ;;
    help) words="serve job tools snapshot probe audit run doctor mcp-config" ;;
    *) return 0 ;;
  esac
  [[ -n $cmd && $cmd != help && $cmd != version ]] && options+=" $common"
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  fi
  return 0
}

# Job ids of the running daemon, when one answers (quietly nothing otherwise).
_toolwarden_job_ids() {
  local json
  json=$(command toolwarden job list --json 2>/dev/null) || return 0
  grep -o '"job_id":"[^"]*"' <<<"$json" | cut -d'"' -f4
}

complete -F _toolwarden toolwarden
