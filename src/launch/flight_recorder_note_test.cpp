// The launcher's reading of its ranks' flight-recorder dumps: the generated
// job whose rank 2 never scheduled a collective (tests/fixtures/fr) gives
// gpudiag fr's findings; a folder with none, or none readable, gives nothing.
#include "launch/flight_recorder_note.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpudiag::launch {
namespace {

TEST(FlightRecorderNote, FindingsOfAJobsDumps) {
  const auto lines = flight_recorder_findings(std::string(GPUDIAG_FR_FIXTURES) + "/a_missing");
  ASSERT_FALSE(lines.empty());
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("2"), std::string::npos) << all;
  EXPECT_NE(all.find("missing"), std::string::npos) << all;
}

TEST(FlightRecorderNote, NothingWithoutDumps) {
  EXPECT_TRUE(flight_recorder_findings("").empty());
  EXPECT_TRUE(flight_recorder_findings("/nonexistent/fr").empty());
  const auto d = std::filesystem::temp_directory_path() / "gpudiag-fr-empty-note";
  std::filesystem::create_directories(d);
  EXPECT_TRUE(flight_recorder_findings(d.string()).empty());
  std::filesystem::remove_all(d);
}

// A rank's dump is its output, not ours: one that does not parse is one line
// saying which and why, not silence and not an exception.
TEST(FlightRecorderNote, AnUnreadableDumpIsOneLine) {
  const auto d = std::filesystem::temp_directory_path() / "gpudiag-fr-bad-note";
  std::filesystem::create_directories(d);
  {
    std::ofstream f(d / "nccl_trace_rank_0", std::ios::binary);
    f << std::string("\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00(((((", 16);
  }
  const auto lines = flight_recorder_findings(d.string());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("no dump could be read (1 file(s)): nccl_trace_rank_0: the file ends at byte 16"),
            std::string::npos)
      << lines[0];
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace gpudiag::launch
