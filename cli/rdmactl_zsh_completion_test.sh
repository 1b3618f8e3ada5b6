#!/usr/bin/env bash
# `rdmactl completion zsh` run in zsh: zsh -f (no user rc files) starts the completion system (compinit),
# sources the script, and asks for completions the way zsh's bash emulation does when Tab is pressed:
# bashcompinit's _bash_complete sets COMP_WORDS (the words, 0-based as compgen's sh emulation reads them),
# COMP_CWORD, COMP_LINE and COMP_POINT, then runs `compgen -F _rdmactl -- CUR`, whose output zsh's compadd
# narrows to the candidates CUR prefixes. Checked: the script loads without an error and registers rdmactl, the verbs after `rdmactl `, the
# kinds after `rdmactl get `, a command's flags, -o's formats and a context name from a test config file.
# No server needed (the contexts come from the file, the NAMEs are not asked for).
#
# Under Bazel: bazel test //cli:rdmactl_zsh_completion_test. By hand: RDMACTL=... cli/rdmactl_zsh_completion_test.sh
set -u

runfiles="${TEST_SRCDIR:-}/${TEST_WORKSPACE:-rdmad}"
RDMACTL="${RDMACTL:-$runfiles/cli/rdmactl}"
[[ -x "$RDMACTL" ]] || { echo "FAIL: $RDMACTL is not an executable" >&2; exit 1; }
command -v zsh >/dev/null || { echo "FAIL: no zsh (Debian's zsh: deploy/install-deps.sh)" >&2; exit 1; }

dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/rdmactl-zsh.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/bin"
ln -s "$(cd "$(dirname "$RDMACTL")" && pwd)/$(basename "$RDMACTL")" "$dir/bin/rdmactl"
cat >"$dir/config" <<'EOF'
{"current-context": "lab",
 "contexts": [{"name": "lab", "server": "unix:/nonexistent/lab.sock"},
              {"name": "lab-backup", "server": "unix:/nonexistent/backup.sock"},
              {"name": "dev", "server": "unix:/nonexistent/dev.sock"}]}
EOF
"$RDMACTL" completion zsh >"$dir/rdmactl.zsh" || { echo "FAIL: rdmactl completion zsh: exit $?" >&2; exit 1; }

# complete WORD... : the candidates zsh would offer for the last WORD (the one being completed), one a line.
cat >"$dir/driver.zsh" <<'EOF'
autoload -U compinit && compinit -u -D
source "$SCRIPT" || { print -u2 "FAIL: sourcing the script: status $?"; exit 1; }
[[ "${_comps[rdmactl]-}" == "_bash_complete -F _rdmactl" ]] ||
  { print -u2 "FAIL: rdmactl is not registered with zsh's completion (_comps[rdmactl]='${_comps[rdmactl]-}')"; exit 1; }
complete() {
  # As bashcompinit's _bash_complete does for words=("$@") with the cursor at the end of the last one.
  local -a words=("$@")
  local CURRENT=$#
  local -x COMP_POINT COMP_CWORD
  local -a COMP_WORDS COMPREPLY
  local -x COMP_LINE="$words"
  (( COMP_POINT = 1 + ${#${(j. .)words[1,CURRENT-1]}} + ${#words[CURRENT]} ))
  (( COMP_CWORD = CURRENT - 1 ))
  COMP_WORDS=( "${words[@]}" )
  # compgen does not filter by the word; zsh's compadd then offers the candidates the word prefixes.
  local -a matches=( ${(f)"$(compgen -F _rdmactl -- ${words[CURRENT]})"} )
  print -l -r -- ${(M)matches:#${words[CURRENT]}*}
}
EOF

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# expect 'WORDS' WANT...: each WANT is among the candidates for WORDS (the last word is the one completed).
run() {
  PATH="$dir/bin:$PATH" RDMACTL_CONFIG="$dir/config" SCRIPT="$dir/rdmactl.zsh" \
    zsh -f -c "source ${dir}/driver.zsh && complete $1" 2>"$dir/err"
}
expect() {
  local words="$1" got
  shift
  got="$(run "$words")" || fail "complete $words: exit status $? ($(cat "$dir/err"))"
  [[ -s "$dir/err" ]] && fail "complete $words: stderr: $(cat "$dir/err")"
  for want in "$@"; do
    grep -qx -- "$want" <<<"$got" || fail "complete $words: '$want' not offered (got: $(echo $got))"
  done
}
# refuse 'WORDS' NOT...: none of NOT is offered.
refuse() {
  local words="$1" got
  shift
  got="$(run "$words")"
  for not in "$@"; do
    grep -qx -- "$not" <<<"$got" && fail "complete $words: '$not' offered (got: $(echo $got))"
  done
}

expect "rdmactl ''" get describe config completion version
refuse "rdmactl ''" pds mrs
expect "rdmactl g" get grant
refuse "rdmactl g" describe config
expect "rdmactl get ''" pds mrs grants devices
refuse "rdmactl get ''" get config
expect "rdmactl get m" mrs mws
refuse "rdmactl get m" pds
expect "rdmactl get pds --w" --watch --watch-interval
expect "rdmactl get pds -o ''" table wide json yaml name
expect "rdmactl --context ''" lab lab-backup dev
expect "rdmactl get pds --context la" lab lab-backup
refuse "rdmactl get pds --context la" dev
expect "rdmactl config ''" get-contexts use-context set-context delete-context
expect "rdmactl config set-context lab --tls" --tls-ca --tls-cert --tls-key --tls-server-name

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS: rdmactl completion zsh, in $(zsh --version)"
