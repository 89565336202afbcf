// flight_recorder_findings() (flight_recorder_note.h).
#include "launch/flight_recorder_note.h"

#include <filesystem>

#include "flight_recorder/analysis.h"
#include "flight_recorder/files.h"
#include "flight_recorder/render.h"
#include "util/strings.h"

namespace gpudiag::launch {

std::vector<std::string> flight_recorder_findings(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec) ||
      std::filesystem::is_empty(dir, ec))
    return {};
  try {
    auto inputs = fr::read_inputs({dir}, fr::Limits{});
    if (inputs.dumps.empty()) return {};
    const auto report = fr::analyze(std::move(inputs), fr::Options{});
    std::vector<std::string> lines;
    for (const auto& line : split(fr::render_text(report), '\n'))
      if (!line.empty() && lines.size() < 40) lines.push_back(line);
    return lines;
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace gpudiag::launch
