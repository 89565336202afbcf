// flight_recorder_findings() (flight_recorder_note.h): the dumps are read on a
// thread of their own with `gpudiag fr`'s limits, and waited for at most a
// deadline; a dump that cannot be read is one line saying why.
#include "launch/flight_recorder_note.h"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "flight_recorder/analysis.h"
#include "flight_recorder/files.h"
#include "flight_recorder/render.h"
#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

/// Lines of findings printed at most.
constexpr std::size_t kMaxLines = 40;

struct Reading {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::vector<std::string> lines;
};

std::vector<std::string> read_findings(const std::string& dir) {
  try {
    auto inputs = fr::read_inputs({dir}, fr::Limits{});
    if (inputs.dumps.empty() && !inputs.problems.empty()) {
      const auto& p = inputs.problems.front();
      return {"no dump could be read (" + std::to_string(inputs.problems.size()) + " file(s)): " +
              clean_text(std::filesystem::path(p.path).filename().string()) + ": " +
              clean_text(p.detail)};
    }
    if (inputs.dumps.empty()) return {};
    const auto report = fr::analyze(std::move(inputs), fr::Options{});
    std::vector<std::string> lines;
    for (const auto& line : split(fr::render_text(report), '\n'))
      if (!line.empty() && lines.size() < kMaxLines) lines.push_back(line);
    return lines;
  } catch (const std::exception& e) {
    return {"the dumps could not be read: " + clean_text(e.what())};
  }
}

}  // namespace

std::vector<std::string> flight_recorder_findings(const std::string& dir, double deadline_s) {
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec) ||
      std::filesystem::is_empty(dir, ec))
    return {};
  auto r = std::make_shared<Reading>();
  std::thread([r, dir] {
    auto lines = read_findings(dir);
    std::lock_guard lock(r->m);
    r->lines = std::move(lines);
    r->done = true;
    r->cv.notify_all();
  }).detach();  // past the deadline it finishes (bounded by fr's limits) or ends with us
  std::unique_lock lock(r->m);
  if (!r->cv.wait_for(lock, std::chrono::duration<double>(deadline_s), [&] { return r->done; }))
    return {"not read within " + human_seconds(deadline_s) + " (dumps this large take `gpudiag fr " +
            dir + "` to read)"};
  return r->lines;
}

}  // namespace gpudiag::launch
