// Opening scan inputs (inputs.h). Files a directory lists are taken by name; whether each is
// a regular file is checked when it is opened (MappedFile), so a FIFO or socket named
// *.safetensors gets its own line like any other bad file and is never read.
#include "numerics/formats/inputs.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "numerics/formats/quote.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::numerics {

namespace fs = std::filesystem;

std::vector<std::string> expand_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto status = fs::status(p, ec);
    if (ec || !fs::exists(status)) throw UsageError(p + ": no such file or directory");
    if (!fs::is_directory(status)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      const auto ext = e.path().extension();
      const auto name = e.path().filename().string();
      const bool stats = name.ends_with(".stats.json") || name.ends_with("replica.jsonl");
      // A link loop or a dangling link is taken by name too: opening it says
      // what it is, on its own line (is_directory() would throw here).
      std::error_code kind;
      if ((ext == ".safetensors" || ext == ".npy" || stats) && !e.is_directory(kind))
        found.push_back(e.path().string());
    }
    if (ec) throw UsageError(p + ": cannot list the directory: " + ec.message());
    if (found.empty())
      throw UsageError(p + ": the directory has no .safetensors, .npy, .stats.json or replica.jsonl files",
                       "point gpudiag scan at the directory the dumper wrote");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

namespace {

void classify_safetensors(InputFile& in) {
  const auto& meta = in.safetensors.metadata;
  auto format = meta.find("format");
  if (format == meta.end() || format->second != kFramesFormat) {
    if (format != meta.end() && format->second.starts_with("gpudiag-frames/"))
      throw UsageError(in.path() + ": unsupported dump format " + quote(format->second) +
                           " (this gpudiag reads " + std::string(kFramesFormat) + ")",
                       "scan it with the gpudiag version that matches the dumper");
    in.kind = InputKind::loose_safetensors;
    return;
  }
  in.kind = InputKind::frames;
  auto batch = meta.find("batch_number");
  if (batch == meta.end())
    throw UsageError(in.path() + ": a " + std::string(kFramesFormat) +
                     " file without \"batch_number\" metadata");
  auto n = parse_int(batch->second);
  if (!n || *n < 0)
    throw UsageError(in.path() + ": \"batch_number\" metadata " + quote(batch->second) +
                     " is not a non-negative decimal integer");
  in.batch_number = static_cast<std::uint64_t>(*n);
  if (auto rank = meta.find("rank"); rank != meta.end()) {
    auto r = parse_int(rank->second);
    if (!r || *r < 0 || *r >= (1 << 20))
      throw UsageError(in.path() + ": \"rank\" metadata " + quote(rank->second) +
                       " is not a rank (0 to 2^20 - 1)");
    in.rank = static_cast<int>(*r);
  }
}

/// Test-only (GPUDIAG_TEST_STOP_AFTER_OPEN=1): the process stops itself after a file is
/// mapped and its header parsed, before any tensor data is read, so a test can change the
/// file at exactly that point and then resume it (SIGCONT).
void test_stop_after_open() {
  static const bool enabled = [] {
    const char* v = std::getenv("GPUDIAG_TEST_STOP_AFTER_OPEN");
    return v && std::string_view(v) == "1";
  }();
  if (enabled) ::raise(SIGSTOP);
}

InputFile parse_input(const std::string& path, std::optional<DType> npy_dtype) {
  InputFile in(MappedFile{path});
  const Bytes bytes = in.mapping.bytes();
  if (looks_like_npy(bytes) || std::filesystem::path(path).extension() == ".npy") {
    in.kind = InputKind::npy;
    in.npy = parse_npy(bytes, path, npy_dtype);
    if (npy_dtype && !in.npy.override_applied)
      spdlog::warn("{}: --dtype not applied: the file stores {} ({}), not raw elements", path,
                   dtype_name(in.npy.tensor.dtype), in.npy.descr);
    return in;
  }
  in.safetensors = parse_safetensors(bytes, path);
  classify_safetensors(in);
  return in;
}

}  // namespace

InputFile open_input(const std::string& path, std::optional<DType> npy_dtype) {
  InputFile in = parse_input(path, npy_dtype);
  test_stop_after_open();
  return in;
}

InputKind inspect_input(const std::string& path, std::optional<DType> npy_dtype) {
  return parse_input(path, npy_dtype).kind;  // unmapped again on return
}

}  // namespace gpudiag::numerics
