// `gpudiag scan --diff A B` (see scan_diff.h): resolve each side to one batch,
// scan both, align their entries and rank the growth of abs max.
#include "numerics/detector/scan_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include "numerics/detector/format.h"
#include "numerics/detector/frames.h"
#include "numerics/formats/inputs.h"
#include "numerics/formats/stats_dump.h"
#include "util/error.h"
#include "util/file_out.h"
#include "util/strings.h"

namespace gpudiag::numerics {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), ::isdigit);
}

/// One side of the comparison: its files (kept open: the batch points into
/// them), its batches and the chosen one.
struct Side {
  std::string name;  ///< "batch 3 of run1/"
  std::vector<InputFile> inputs;
  std::vector<Batch> batches;
  const Batch* batch = nullptr;
  std::vector<TensorStats> stats;
  /// A stats dump (*.stats.json, what ActivationDumper's default mode
  /// writes): its batches and statistics, read rather than scanned.
  std::unique_ptr<StatsDump> dump;
  bool scanned() const { return dump == nullptr; }
};

std::unique_ptr<Side> resolve(const ScanOptions& o, const std::string& spec) {
  auto side = std::make_unique<Side>();
  std::vector<std::string> paths;
  std::optional<std::uint64_t> number;
  const auto at = spec.rfind('@');
  if (all_digits(spec)) {
    if (o.paths.empty())
      throw UsageError("--diff " + spec + " names a batch of the dumps given as paths, and none is",
                       "give the dump as a path (gpudiag scan DUMP --diff 1 3), or name each "
                       "side as DUMP@N");
    paths = o.paths;
    number = std::stoull(spec);
  } else if (at != std::string::npos && at > 0 && all_digits(spec.substr(at + 1))) {
    paths = {spec.substr(0, at)};
    number = std::stoull(spec.substr(at + 1));
  } else {
    paths = {spec};
  }
  for (const auto& p : paths)
    if (!std::filesystem::exists(p))
      throw UsageError("--diff " + spec + ": " + p + " does not exist",
                       "name a batch number, a dump file or directory, or DUMP@N");
  const auto files = expand_paths(paths);
  const auto stats_files = std::count_if(files.begin(), files.end(), is_stats_path);
  if (stats_files > 0 && stats_files < static_cast<std::ptrdiff_t>(files.size()))
    throw UsageError("--diff " + spec + " holds both statistics files (*.stats.json) and tensor "
                         "files",
                     "name each side as one dump: a directory of one kind, or DUMP@N");
  if (stats_files > 0) {
    side->dump = std::make_unique<StatsDump>(read_stats_dump(files, o.rank));
    side->batches = side->dump->batches;
  } else {
    side->inputs.reserve(files.size());
    for (const auto& f : files) {
      side->inputs.push_back(open_input(f, o.npy_dtype));
      if (side->inputs.back().kind != InputKind::frames)
        throw UsageError("--diff compares frames dumps, and " + f + " holds loose tensors",
                         "scan loose tensor files without --diff");
    }
    side->batches = assemble_batches(side->inputs, o.rank >= 0 ? o.rank : kAnyRank);
  }
  const std::string where = paths.size() == 1 ? paths[0] : "the dumps given";
  std::string numbers;
  for (std::size_t i = 0; i < side->batches.size(); ++i) {
    const Batch& b = side->batches[i];
    numbers += (numbers.empty() ? "" : ", ") + std::to_string(b.number);
    if (number ? b.number == *number : side->batches.size() == 1) {
      side->batch = &b;
      if (side->dump) side->stats = side->dump->stats[i];
    }
  }
  if (!side->batch)
    throw UsageError(
        where + (number ? " holds no batch " + std::to_string(*number) : " holds several batches") +
            " (it holds " + (numbers.empty() ? "none" : numbers) + ")",
        "name one batch: --diff N M with the dump as a path, or DUMP@N");
  side->name = "batch " + std::to_string(side->batch->number) + " of " + where;
  return side;
}

struct Row {
  std::string entry;  ///< "lin Linear output"
  std::uint64_t frame_a = 0, frame_b = 0;
  double a = 0, b = 0;
  int rank = 0;        ///< 3: became nan, 2: became inf, 1: grew from 0, 0: finite growth
  double growth = 0;   ///< b / a when rank is 0
};

/// "module|class|k|label" for every tensor entry, k counting the module's calls in the batch.
std::map<std::string, std::pair<std::uint64_t, const TensorStats*>> entries(const Side& s) {
  std::map<std::string, std::pair<std::uint64_t, const TensorStats*>> out;
  std::map<std::string, int> calls;
  for (const Frame& f : s.batch->frames) {
    const int k = calls[f.module + "|" + f.class_name]++;
    for (const Entry& e : f.entries)
      if (e.kind == EntryKind::tensor && e.slot < s.stats.size())
        out[f.module + "|" + f.class_name + "|" + std::to_string(k) + "|" + e.label] = {
            f.index, &s.stats[e.slot]};
  }
  return out;
}

std::string growth_text(const Row& r) {
  if (r.rank == 3) return "to nan";
  if (r.rank == 2) return "to inf";
  if (r.rank == 1) return "from 0";
  return "x" + format_e2(r.growth);
}

}  // namespace

int run_diff(const ScanOptions& o, const std::string& a_spec, const std::string& b_spec,
             std::ostream& out) {
  auto a = resolve(o, a_spec);
  auto b = resolve(o, b_spec);
  // Tensor dumps are scanned; a stats dump's statistics are already there.
  std::vector<TensorView> views[2];
  Side* sides[2] = {a.get(), b.get()};
  for (int i = 0; i < 2; ++i)
    if (sides[i]->scanned())
      for (const auto* t : sides[i]->batch->tensors) views[i].push_back(view_of(*t));
  if (a->scanned() || b->scanned()) {
    // --device auto times both scanners on the first 256 MiB to be scanned.
    auto scanner = make_scanner(o.device, o.threads, o.gpu,
                                o.device == ScanDevice::automatic
                                    ? sample_of(views[a->scanned() ? 0 : 1], kAutoSampleBytes)
                                    : std::vector<TensorView>{});
    for (int i = 0; i < 2; ++i)
      if (sides[i]->scanned()) sides[i]->stats = scanner->scan(views[i]);
  }
  const auto in_a = entries(*a), in_b = entries(*b);
  std::vector<Row> rows;
  std::size_t aligned = 0;
  for (const auto& [key, where_b] : in_b) {
    auto it = in_a.find(key);
    if (it == in_a.end()) continue;
    ++aligned;
    const double va = it->second.second->abs_max, vb = where_b.second->abs_max;
    if (!std::isfinite(va)) continue;  // already inf or nan in A: nothing grew
    Row r;
    auto first = key.find('|'), second = key.find('|', first + 1), third = key.find('|', second + 1);
    const std::string module = key.substr(0, first);
    r.entry = (module.empty() ? "the model" : module) + " " +
              key.substr(first + 1, second - first - 1) + " " + key.substr(third + 1);
    r.frame_a = it->second.first, r.frame_b = where_b.first, r.a = va, r.b = vb;
    if (std::isnan(vb)) r.rank = 3;
    else if (std::isinf(vb)) r.rank = 2;
    else if (va == 0 && vb > 0) r.rank = 1;
    else if (va > 0 && vb > va) r.growth = vb / va;
    else continue;  // did not grow
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.growth > y.growth;
  });
  out << "gpudiag scan --diff: " << a->name << " -> " << b->name << ": " << aligned
      << " entries aligned (" << in_a.size() - aligned << " only in A, " << in_b.size() - aligned
      << " only in B), " << rows.size() << " grew\n";
  if (!rows.empty()) {
    char head[128];
    std::snprintf(head, sizeof head, "%-10s %-9s %-9s %-7s %s\n", "growth", "abs max A",
                  "abs max B", "frame B", "entry");
    out << head;
  }
  nlohmann::ordered_json listed = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < rows.size() && i < kDiffRows; ++i) {
    const Row& r = rows[i];
    char line[96];
    std::snprintf(line, sizeof line, "%-10s %-9s %-9s %-7llu ", growth_text(r).c_str(),
                  format_e2(r.a).c_str(), format_e2(r.b).c_str(), static_cast<unsigned long long>(r.frame_b));
    out << line << r.entry << "\n";
    listed.push_back({{"entry", r.entry},
                      {"frame_a", r.frame_a},
                      {"frame_b", r.frame_b},
                      {"abs_max_a", format_e2(r.a)},
                      {"abs_max_b", format_e2(r.b)},
                      {"growth", growth_text(r)}});
  }
  if (rows.size() > kDiffRows) out << "... and " << rows.size() - kDiffRows << " more grew\n";
  out.flush();
  if (!o.json_path.empty()) {
    nlohmann::ordered_json doc = {{"schema", "gpudiag-scan-diff/1"},
                                  {"a", a->name},
                                  {"b", b->name},
                                  {"aligned", aligned},
                                  {"only_in_a", in_a.size() - aligned},
                                  {"only_in_b", in_b.size() - aligned},
                                  {"grew", rows.size()},
                                  {"rows", listed}};
    if (o.json_path == "-") {  // stdout: indented on a terminal, else one line (docs/json.md)
      std::cout << doc.dump(::isatty(STDOUT_FILENO) == 1 ? 2 : -1, ' ', false,
                            nlohmann::ordered_json::error_handler_t::replace)
                << "\n";
      std::cout.flush();
      return 0;
    }
    if (write_file("--json", o.json_path,
                   doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
                   WriteMode::through) != 0)
      throw UsageError("--json " + o.json_path + ": not written (see the line above)");
  }
  return 0;
}

}  // namespace gpudiag::numerics
