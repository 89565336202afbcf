#include "numerics/detector/frames.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "numerics/formats/quote.h"
#include "util/error.h"

namespace gpudiag::numerics {

namespace {

constexpr const char* kNameForm = "<frame>.<entry>|<module path>|<class name>|<label>";

bool parse_u64(std::string_view s, std::uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

/// One entry found in a file, before the batch is put in order.
struct Found {
  EntryName name;
  EntryKind kind;
  const TensorInfo* tensor = nullptr;
  const InputFile* file = nullptr;
  /// "same as F.E": the tensor of that earlier entry of the batch (one
  /// object recorded twice, e.g. a module's output that is its parent's).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> same_as;
};

std::string where(const Found& f) {
  return f.file->path() + ": batch " + std::to_string(f.file->batch_number) + ", frame " +
         std::to_string(f.name.frame);
}

/// "time.<frame>" metadata: when the dumper recorded that frame.
void collect_times(const InputFile& in, std::map<std::uint64_t, double>& times) {
  for (const auto& [key, value] : in.safetensors.metadata) {
    std::uint64_t frame = 0;
    if (!key.starts_with("time.") || !parse_u64(std::string_view(key).substr(5), &frame)) continue;
    char* end = nullptr;
    const double t = std::strtod(value.c_str(), &end);
    if (end && *end == 0 && std::isfinite(t) && t >= 0) times[frame] = t;
  }
}

void collect(const InputFile& in, std::vector<Found>& out) {
  for (const auto& t : in.safetensors.tensors) {
    auto name = parse_entry_name(t.name);
    if (!name)
      throw UsageError(
          in.path() + ": tensor " + quote(t.name) + " is not named " + kNameForm,
          "write dumps with scripts/dump_activations.py, or drop the \"format\" metadata to "
          "scan the file as loose tensors");
    out.push_back({std::move(*name), EntryKind::tensor, &t, &in, std::nullopt});
  }
  for (const auto& [key, value] : in.safetensors.metadata) {
    if (key.find('|') == std::string::npos) continue;  // user metadata, not an entry
    auto name = parse_entry_name(key);
    if (!name)
      throw UsageError(in.path() + ": metadata key " + quote(key) + " is not named " + kNameForm);
    EntryKind kind;
    std::optional<std::pair<std::uint64_t, std::uint64_t>> same_as;
    const std::string_view v = value;
    const auto dot = v.find('.');
    std::uint64_t ref_frame = 0, ref_entry = 0;
    if (value == "None") {
      kind = EntryKind::none;
    } else if (value == "not a tensor") {
      kind = EntryKind::not_a_tensor;
    } else if (v.starts_with("same as ") && dot != std::string_view::npos &&
               parse_u64(v.substr(8, dot - 8), &ref_frame) &&
               parse_u64(v.substr(dot + 1), &ref_entry)) {
      kind = EntryKind::tensor;
      same_as = std::make_pair(ref_frame, ref_entry);
    } else {
      throw UsageError(in.path() + ": metadata entry " + quote(key) + " has the value " +
                       quote(value) +
                       "; a non-tensor entry is \"None\" or \"not a tensor\", a repeated one "
                       "\"same as FRAME.ENTRY\"");
    }
    out.push_back({std::move(*name), kind, nullptr, &in, same_as});
  }
}

Batch build_batch(std::uint64_t number, std::vector<Found>& found,
                  const std::map<std::uint64_t, double>& times) {
  // frame index -> entry index -> the entry
  std::map<std::uint64_t, std::map<std::uint64_t, const Found*>> frames;
  for (const auto& f : found) {
    auto [it, fresh] = frames[f.name.frame].emplace(f.name.entry, &f);
    if (!fresh)
      throw UsageError(where(f) + ": entry " + std::to_string(f.name.entry) +
                           " appears twice (also in " + it->second->file->path() + ")",
                       "pass each dump file once");
  }
  Batch b;
  b.number = number;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> slot_of;  // tensor entries so far
  std::uint64_t expected_frame = 0;
  for (const auto& [index, entries] : frames) {
    if (index != expected_frame)
      throw UsageError(entries.begin()->second->file->path() + ": batch " + std::to_string(number) +
                           ": frame " + std::to_string(expected_frame) +
                           " is missing (the next one present is " + std::to_string(index) + ")",
                       "pass every file of the batch");
    ++expected_frame;
    const Found& first = *entries.begin()->second;
    Frame frame{index, first.name.module, first.name.class_name, {}};
    if (auto t = times.find(index); t != times.end()) frame.time = t->second;
    std::uint64_t expected_entry = 0;
    for (const auto& [e, f] : entries) {
      if (e != expected_entry)
        throw UsageError(where(*f) + ": entry " + std::to_string(expected_entry) + " is missing",
                         "pass every file of the batch");
      ++expected_entry;
      if (f->name.module != frame.module || f->name.class_name != frame.class_name)
        throw UsageError(where(*f) + ": entries name different modules (" + quote(frame.module) +
                         " " + quote(frame.class_name) + " and " + quote(f->name.module) + " " +
                         quote(f->name.class_name) + ")");
      Entry entry{f->name.label, f->kind, 0, f->file};
      if (f->same_as) {
        auto it = slot_of.find(*f->same_as);
        if (it == slot_of.end())
          throw UsageError(where(*f) + ": entry " + std::to_string(e) + " is the same as " +
                               std::to_string(f->same_as->first) + "." +
                               std::to_string(f->same_as->second) +
                               ", which is not an earlier tensor entry of the batch",
                           "write dumps with scripts/dump_activations.py and do not edit them");
        entry.slot = it->second;
      } else if (f->kind == EntryKind::tensor) {
        entry.slot = b.tensors.size();
        b.tensors.push_back(f->tensor);
      }
      if (f->kind == EntryKind::tensor) slot_of[{index, e}] = entry.slot;
      frame.entries.push_back(std::move(entry));
    }
    b.frames.push_back(std::move(frame));
  }
  return b;
}

}  // namespace

std::optional<EntryName> parse_entry_name(std::string_view name) {
  const auto first = name.find('|');
  const auto last = name.rfind('|');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  const auto before_last = name.rfind('|', last - 1);
  if (before_last == first) return std::nullopt;  // fewer than three '|'
  const std::string_view index = name.substr(0, first);
  const auto dot = index.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  EntryName out;
  if (!parse_u64(index.substr(0, dot), &out.frame) || !parse_u64(index.substr(dot + 1), &out.entry))
    return std::nullopt;
  out.module = std::string(name.substr(first + 1, before_last - first - 1));
  out.class_name = std::string(name.substr(before_last + 1, last - before_last - 1));
  out.label = std::string(name.substr(last + 1));
  if (out.class_name.empty() || out.label.empty()) return std::nullopt;
  return out;
}

std::vector<Batch> assemble_batches(const std::vector<InputFile>& inputs, int rank) {
  std::map<std::uint64_t, std::vector<Found>> by_batch;
  std::map<std::uint64_t, std::map<std::uint64_t, double>> times;
  for (const auto& in : inputs)
    if (in.kind == InputKind::frames && (rank == kAnyRank || in.rank == rank)) {
      collect(in, by_batch[in.batch_number]);
      collect_times(in, times[in.batch_number]);
    }
  std::vector<Batch> out;
  for (auto& [number, found] : by_batch) out.push_back(build_batch(number, found, times[number]));
  return out;
}

}  // namespace gpudiag::numerics
