// rdmactl completion bash|zsh: a completion script made from rdmactl's own command tree (every verb, noun,
// alias and flag CLI11 knows), so it cannot drift from the commands. zsh runs the bash script through
// bashcompinit. Besides verbs, nouns and flags, it completes -o's formats, --context's contexts and a noun's
// NAME (from `rdmactl get KIND -o name`). The function's locals avoid zsh's special parameters (`path` is
// zsh's PATH array: a local of that name hides every command): cli/rdmactl_zsh_completion_test.sh runs it in zsh.
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_join.h"
#include "cli/command.h"

namespace rdmad::cli {
namespace {

struct Tree {
  std::map<std::string, std::string> subs, names, flags, kinds;  // by path: "rdmactl get mrs"
  std::set<std::string> valued;                                  // every option that takes a value
};

std::vector<std::string> OptionNames(CLI::App* app, Tree& tree) {
  std::vector<std::string> names;
  for (CLI::Option* o : app->get_options([](CLI::Option* o) { return o->nonpositional(); })) {
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    if (o->get_type_size_max() > 0) {
      for (const std::string& s : o->get_snames()) tree.valued.insert("-" + s);
      for (const std::string& l : o->get_lnames()) tree.valued.insert("--" + l);
    }
  }
  return names;
}

void Walk(CLI::App* app, const std::string& path, Tree& tree) {
  tree.flags[path] = absl::StrJoin(OptionNames(app, tree), " ");
  std::vector<std::string> subs;
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    const std::string child = path + " " + sub->get_name();
    subs.push_back(sub->get_name());
    tree.names[child] = child;
    for (const std::string& alias : sub->get_aliases()) tree.names[path + " " + alias] = child;
    if (std::optional<Kind> kind = KindFromNoun(sub->get_name()); kind && path != "rdmactl") {
      tree.kinds[child] = Info(*kind).plural;
    }
    Walk(sub, child, tree);
  }
  tree.subs[path] = absl::StrJoin(subs, " ");
}

std::string Array(const std::string& name, const std::map<std::string, std::string>& values) {
  std::string out = "declare -gA " + name + "=(\n";
  for (const auto& [k, v] : values) out += "  [\"" + k + "\"]=\"" + v + "\"\n";
  return out + ")\n";
}

constexpr char kFunction[] = R"sh(
_rdmactl() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="" node="rdmactl" w i next
  ((COMP_CWORD > 1)) && prev="${COMP_WORDS[COMP_CWORD-1]}"
  COMPREPLY=()
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "table wide json yaml name" -- "$cur")); return 0 ;;
    --context) COMPREPLY=($(compgen -W "$(rdmactl config get-contexts -o name 2>/dev/null)" -- "$cur")); return 0 ;;
  esac
  if [[ "$_rdmactl_valued" == *" $prev "* ]]; then return 0; fi
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    if [[ "$w" == -* ]]; then
      [[ "$w" != *=* && "$_rdmactl_valued" == *" $w "* ]] && ((i++))
      continue
    fi
    next="$node ${w%%/*}"
    [[ -n "${_rdmactl_names[$next]+x}" ]] || break
    node="${_rdmactl_names[$next]}"
  done
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "${_rdmactl_flags[$node]} ${_rdmactl_flags[rdmactl]}" -- "$cur"))
  elif [[ -n "${_rdmactl_subs[$node]}" ]]; then
    COMPREPLY=($(compgen -W "${_rdmactl_subs[$node]}" -- "$cur"))
  elif [[ -n "${_rdmactl_kinds[$node]+x}" ]]; then
    COMPREPLY=($(compgen -W "$(rdmactl get "${_rdmactl_kinds[$node]}" -o name --timeout 2s 2>/dev/null)" -- "$cur"))
  fi
  return 0
}
complete -F _rdmactl rdmactl
)sh";

std::string BashScript(CLI::App* root) {
  Tree tree;
  Walk(root, "rdmactl", tree);
  std::string out = "# rdmactl completion for bash, generated from rdmactl's command tree: source <(rdmactl completion bash)\n";
  out += Array("_rdmactl_subs", tree.subs) + Array("_rdmactl_names", tree.names) + Array("_rdmactl_flags", tree.flags) +
         Array("_rdmactl_kinds", tree.kinds);
  out += "_rdmactl_valued=\" " + absl::StrJoin(tree.valued, " ") + " \"\n";
  return out + kFunction;
}

}  // namespace

void RegisterCompletionCommands(Registry& r) {
  CLI::App* root = r.root();
  r.OnRun(r.Verb("completion")->add_subcommand("bash", "bash: source <(rdmactl completion bash), or save it in "
                                                       "/etc/bash_completion.d/rdmactl"),
          [root](Context& ctx) {
            ctx.out() << BashScript(root);
            return kExitOk;
          });
  r.OnRun(r.Verb("completion")->add_subcommand("zsh", "zsh: source <(rdmactl completion zsh) (the bash script "
                                                      "through bashcompinit)"),
          [root](Context& ctx) {
            ctx.out() << "# rdmactl completion for zsh: source <(rdmactl completion zsh)\n"
                         "autoload -U +X bashcompinit && bashcompinit\n"
                      << BashScript(root);
            return kExitOk;
          });
}

}  // namespace rdmad::cli
