// The `gpudiag-frames/1` dump model: batches of frames of entries, assembled
// from one or more safetensors files (docs/formats.md has the contract).
//
// Each tensor is named "<frame>.<entry>|<module path>|<class name>|<label>";
// a non-tensor entry is a "__metadata__" key of that form whose value is
// "None" or "not a tensor". Files with the same batch_number are one batch,
// whatever their order on the command line; frames and entries are ordered
// by their indices, which must run 0, 1, 2, ... without gaps or repeats, and
// all entries of a frame must name the same module and class. A metadata key
// "time.<frame>" (the dumper writes one per frame) is when that frame was
// recorded, in seconds since the epoch; the files of several ranks are told
// apart by their "rank" metadata.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "numerics/formats/inputs.h"

namespace gpudiag::numerics {

/// A parsed entry name.
struct EntryName {
  std::uint64_t frame = 0;
  std::uint64_t entry = 0;
  std::string module;  ///< "" for the root model
  std::string class_name;
  std::string label;
};

/// Parses "<frame>.<entry>|<module path>|<class name>|<label>"; nullopt when
/// `name` does not have that form. The module path may itself contain '|'.
std::optional<EntryName> parse_entry_name(std::string_view name);

enum class EntryKind { tensor, none, not_a_tensor };

struct Entry {
  std::string label;
  EntryKind kind = EntryKind::tensor;
  std::size_t slot = 0;  ///< kind tensor: index into Batch::tensors
  const InputFile* file = nullptr;
};

struct Frame {
  std::uint64_t index = 0;
  std::string module;
  std::string class_name;
  std::vector<Entry> entries;
  double time = std::numeric_limits<double>::quiet_NaN();  ///< when recorded (epoch s); NaN unknown
};

/// The class of a frame ActivationDumper.watch() wrote: a tensor computed
/// outside the modules (the loss), recorded after its batch's root frame.
inline constexpr std::string_view kWatchClass = "watch";

struct Batch {
  std::uint64_t number = 0;
  std::vector<Frame> frames;
  std::vector<const TensorInfo*> tensors;  ///< every tensor entry, in frame/entry order
};

/// Groups the frames files among `inputs` into batches sorted by number,
/// only those of `rank` (InputFile::rank) unless it is kAnyRank.
/// Throws UsageError naming the file (and batch) on a malformed name, a
/// duplicate entry, a missing frame or entry, or a frame whose entries
/// disagree about the module.
inline constexpr int kAnyRank = -2;
std::vector<Batch> assemble_batches(const std::vector<InputFile>& inputs, int rank = kAnyRank);

}  // namespace gpudiag::numerics
