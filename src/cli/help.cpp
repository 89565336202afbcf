// The help formatter and the subcommands' help footers (help.h). The value
// word is read from CLI11's own type string, "BASE:VALIDATOR:VALIDATOR",
// whose parts are the base type (UINT, TEXT, or a name given with
// type_name()) and each validator's description (SIZE [...], {a,b}, FILE,
// SECONDS, "UINT in [lo - hi]").
#include "cli/help.h"

#include <sstream>
#include <vector>

#include "util/strings.h"

namespace gpudiag::cli {

namespace {

std::vector<std::string> parts_of(const std::string& type) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  int depth = 0;  // a ':' inside [..] or {..} is not a separator
  for (std::size_t i = 0; i <= type.size(); ++i) {
    if (i == type.size() || (type[i] == ':' && depth == 0)) {
      parts.push_back(type.substr(start, i - start));
      start = i + 1;
    } else if (type[i] == '[' || type[i] == '{' || type[i] == '(') {
      ++depth;
    } else if (type[i] == ']' || type[i] == '}' || type[i] == ')') {
      --depth;
    }
  }
  return parts;
}

std::string choices(std::string set) {  // "{auto,nccl,host}" -> "auto|nccl|host"
  set = set.substr(1, set.size() - 2);
  for (auto& c : set)
    if (c == ',') c = '|';
  return set;
}

std::string base_word(const std::string& base) {
  if (base == "UINT" || base == "INT" || base == "NONNEGATIVE" || base == "POSITIVE") return "N";
  if (base == "FLOAT") return "NUMBER";
  return base;
}

struct Footer {
  const char* name;
  const char* examples;
  const char* exit_status;
};

const Footer kFooters[] = {
    {"check",
     "  gpudiag launch --nproc-per-node 8 -- check              # one rank per GPU\n"
     "  gpudiag launch --nproc-per-node 2 -- check --backend host\n"
     "  mpirun -np 16 gpudiag check --json report.json\n"
     "  gpudiag launch --nproc-per-node 8 -- check --nccl-debug  # and explain NCCL's logs\n"
     "  gpudiag launch --nproc-per-node 8 -- check --size 1GiB --expect-busbw 360\n",
     "  0 every rank OK; 1 this rank saw a failure it can name; 2 bad command line, environment\n"
     "  or --json file; 3 a peer did not answer within --timeout; 4 internal error; rank 0 also\n"
     "  exits 1 when the bus bandwidth is below half of what the hardware should reach\n"
     "  (--expect-busbw, else the table of GPU families)\n"},
    {"bench",
     "  gpudiag launch --nproc-per-node 8 -- bench --min 1MiB --max 1GiB\n"
     "  mpirun -np 16 gpudiag bench --links --json links.json\n",
     "  as check's, and 1 when --links found a slow link, or the bandwidth is below half of\n"
     "  what the hardware should reach (--expect-busbw, else the table of GPU families)\n"},
    {"launch",
     "  gpudiag launch --nproc-per-node 8 -- check\n"
     "  gpudiag launch --nproc-per-node 8 --nnodes 2 --node-rank 0 --master-addr node0 -- check\n"
     "  gpudiag launch --nproc-per-node 4 --json job.json -- info --json -\n",
     "  from how every rank ended (README, Exit status): 128 + a signal that interrupted the\n"
     "  launcher, else 4, 2, 128 + a rank's own fatal signal, 1, 3, another code, 0\n"},
    {"scan",
     "  gpudiag scan dumps/\n"
     "  gpudiag scan dumps/ --trace-batches 1,3 --abort-after-batch 3\n"
     "  gpudiag scan weights.safetensors act.npy --json - | python3 -m json.tool\n",
     "  0 clean; 1 inf/nan found, or data-parallel replicas diverged; 2 bad input;\n"
     "  3 the GPU hung; 5 the GPU failed while scanning (no verdict on the data)\n"},
    {"sweep",
     "  srun --ntasks-per-node 8 gpudiag sweep --exclude-file bad.txt\n"
     "  mpirun -np 64 --map-by ppr:8:node gpudiag sweep --good-hostfile good.txt\n"
     "  gpudiag launch --nproc-per-node 8 --nnodes 16 --rdzv-endpoint n001:29400 -- sweep\n",
     "  0 no node to exclude; 1 nodes to exclude; 2 bad usage; 3 the sweep could not finish\n"},
    {"nccl-log",
     "  gpudiag nccl-log run.log\n"
     "  gpudiag nccl-log gpudiag-nccl-1234/ --json report.json\n"
     "  NCCL_DEBUG=INFO torchrun ... 2>&1 | gpudiag nccl-log -\n"
     "  eval \"$(gpudiag nccl-log --print-env /shared/nccl-run)\"\n",
     "  0 no problem found; 1 problems found; 2 bad input (unreadable path, no NCCL lines, ...)\n"},
    {"fr",
     "  gpudiag fr /shared/fr/        # TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/shared/fr/rank_ in the job\n"
     "  gpudiag fr /tmp/nccl_trace_rank_* --json report.json\n",
     "  0 no rank is suspect; 1 suspect ranks (suspect_ranks); 2 bad usage, or no readable dump\n"},
    {"ras",
     "  gpudiag ras                          # NCCL_RAS_ADDR, else localhost:28028\n"
     "  gpudiag ras node0 node1:30000 --json ras.json\n",
     "  0 every endpoint answered and RAS saw nothing wrong; 1 RAS saw something wrong; 2 bad\n"
     "  usage; 3 no finding, and an endpoint gave no usable answer\n"},
    {"history",
     "  gpudiag history /shared/gpudiag-history\n"
     "  gpudiag history /shared/gpudiag-history --days 30 --json -\n",
     "  0 the folder was read (whatever it holds); 2 the folder cannot be read, or bad usage\n"},
    {"info",
     "  gpudiag info\n"
     "  gpudiag launch --nproc-per-node 4 -- info --json -   # JSON Lines, one per rank\n",
     "  0 fine; 2 the environment does not make sense (a half-set rank, a bad --device)\n"},
};

}  // namespace

HelpFormatter::HelpFormatter() { column_width(36); }

std::string value_word(const CLI::Option* opt) {
  if (opt->get_type_size() == 0) return {};
  auto parts = parts_of(opt->get_type_name());
  if (parts.size() == 1 && parts.front().empty()) return {};  // --help, --version
  std::string word = base_word(parts.front());
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto& p = parts[i];
    if (p.starts_with("SIZE")) word = "SIZE";
    else if (p.starts_with("{")) word = choices(p);
    else if (p == "SECONDS" || p == "FILE" || p == "DIR") word = p;
    else if (p.starts_with("PATH")) word = "PATH";
    // Ranges ("UINT in [0 - 1000]") and NONNEGATIVE say nothing a user needs here.
  }
  if (opt->get_delimiter() != '\0') word += "[,...]";
  else if (opt->get_expected_max() > 1) word += " ...";
  if (opt->get_expected_min() == 0) word = "[" + word + "]";
  return word;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  std::string out;
  if (auto word = value_word(opt); !word.empty()) out = " " + word;
  if (opt->get_required() && !opt->get_positional()) out += " (required)";
  return out;
}

std::string wrap_text(const std::string& text, std::size_t width, std::size_t hang) {
  std::string out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = text.find('\n', start);
    const std::string line =
        text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (line.size() <= width) {
      out += line;  // as written: an example's aligned comment keeps its spaces
    } else {
      // Broken at spaces; the pieces after the first keep the line's indent
      // and `hang` spaces more.
      const std::size_t lead = line.find_first_not_of(' ');
      const std::string indent(lead == std::string::npos ? 0 : lead, ' ');
      std::string piece = indent;
      std::size_t i = indent.size();
      bool first_word = true;
      while (i < line.size()) {
        std::size_t sp = line.find(' ', i);
        if (sp == std::string::npos) sp = line.size();
        const std::string word = line.substr(i, sp - i);
        if (!first_word && piece.size() + 1 + word.size() > width) {
          out += piece + "\n";
          piece = indent + std::string(hang, ' ') + word;
        } else {
          piece += (first_word ? "" : " ") + word;
        }
        first_word = false;
        i = sp + 1;
      }
      out += piece;
    }
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return out;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  std::string desc = opt->get_description();
  const std::string& def = opt->get_default_str();
  // An optional value's default_str is what the bare option means: its
  // description says so, and it is no default. Flags have none to show.
  if (!(opt->get_type_size() == 0 || opt->get_expected_min() == 0 || def.empty()) &&
      desc.find("default") == std::string::npos)
    desc += " (default: " + def + ")";
  // The description column ends at kHelpWidth, as every help line does.
  return wrap_text(desc, kHelpWidth - get_column_width(), 0);
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
  std::stringstream out;
  CLI::detail::format_help(out, sub->get_display_name(true),
                           wrap_text(sub->get_description(), kHelpWidth - get_column_width(), 0),
                           get_column_width());
  return out.str();
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
  return wrap_text(CLI::Formatter::make_description(app), kHelpWidth, 0);
}

std::string HelpFormatter::make_footer(const CLI::App* app) const {
  return wrap_text(CLI::Formatter::make_footer(app), kHelpWidth, 2);
}

void add_help_footer(CLI::App* sub) {
  for (const auto& f : kFooters) {
    if (sub->get_name() != f.name) continue;
    bool sizes = false;
    for (const auto* opt : sub->get_options()) sizes = sizes || value_word(opt) == "SIZE";
    sub->footer(std::string("Examples:\n") + f.examples + "\nExit status:\n" + f.exit_status +
                (sizes ? "\nSIZE: bytes with an optional unit, e.g. 256MiB (4096, 64KiB, 1GiB; "
                         "KB = KiB = 1024)."
                       : ""));
  }
}

std::string suggest_option(const CLI::App* sub, const std::string& word) {
  std::string best;
  std::size_t best_d = 3;
  std::vector<std::string> names{"--help"};
  for (const auto* opt : sub->get_options())
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
  for (const auto& name : names) {
    auto d = edit_distance(word, name);
    if (d < best_d) best_d = d, best = name;
  }
  // A prefix of one option (--nproc) is as good a hint as a typo.
  if (best.empty())
    for (const auto& name : names)
      if (word.size() > 3 && name.starts_with(word)) return name;
  return best;
}

}  // namespace gpudiag::cli
