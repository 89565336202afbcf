#include "numerics/detector/frames.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace gpudiag::numerics {
namespace {

TEST(EntryName, ParsesTheFourFields) {
  auto n = parse_entry_name("12.3|encoder.block.2.layer.1.DenseReluDense.wi_0|Linear|output[1][0]");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->frame, 12u);
  EXPECT_EQ(n->entry, 3u);
  EXPECT_EQ(n->module, "encoder.block.2.layer.1.DenseReluDense.wi_0");
  EXPECT_EQ(n->class_name, "Linear");
  EXPECT_EQ(n->label, "output[1][0]");
  auto root = parse_entry_name("7.0||T5ForConditionalGeneration|input[0]");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->module, "");
  auto piped = parse_entry_name("0.0|a|b|Cls|weight");
  ASSERT_TRUE(piped);
  EXPECT_EQ(piped->module, "a|b");
}

TEST(EntryName, RejectsOtherForms) {
  for (const char* bad :
       {"weight", "0.0|Linear|weight", "0|m|C|l", "a.0|m|C|l", "0.b|m|C|l", "-1.0|m|C|l",
        "0.0|m||l", "0.0|m|C|", "99999999999999999999.0|m|C|l", "0.0.0|m|C|l"})
    EXPECT_FALSE(parse_entry_name(bad)) << bad;
}

/// Writes a frames file with the given tensor names (one F32 element each)
/// and metadata entries.
class FramesFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpudiag-frames-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& file, std::uint64_t batch,
                    const std::vector<std::string>& tensors,
                    const std::vector<std::pair<std::string, std::string>>& meta = {}) {
    std::string h = "{";
    for (std::size_t i = 0; i < tensors.size(); ++i)
      h += "\"" + tensors[i] + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" +
           std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]},";
    h += "\"__metadata__\":{\"format\":\"gpudiag-frames/1\",\"batch_number\":\"" +
         std::to_string(batch) + "\"";
    for (const auto& [k, v] : meta) h += ",\"" + k + "\":\"" + v + "\"";
    h += "}}";
    const auto path = (dir_ / file).string();
    std::ofstream f(path, std::ios::binary);
    const std::uint64_t n = h.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << h << std::string(4 * tensors.size(), '\0');
    return path;
  }

  std::vector<Batch> assemble(const std::vector<std::string>& paths) {
    inputs_.clear();
    for (const auto& p : paths) inputs_.push_back(open_input(p, std::nullopt));
    return assemble_batches(inputs_);
  }

  std::string error_of(const std::vector<std::string>& paths) {
    try {
      assemble(paths);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
  std::vector<InputFile> inputs_;
};

TEST_F(FramesFiles, OrdersFramesAcrossFilesAndBatches) {
  const auto a = write("a.safetensors", 1, {"1.0||Model|input[0]", "0.1|m|Linear|input[0]"});
  const auto b =
      write("b.safetensors", 1, {"0.0|m|Linear|weight"}, {{"1.1||Model|output", "not a tensor"}});
  const auto c = write("c.safetensors", 0, {"0.0||Model|output"}, {{"user", "x"}});
  const auto batches = assemble({a, b, c});
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].number, 0u);
  ASSERT_EQ(batches[1].frames.size(), 2u);
  const Frame& f0 = batches[1].frames[0];
  EXPECT_EQ(f0.module, "m");
  ASSERT_EQ(f0.entries.size(), 2u);
  EXPECT_EQ(f0.entries[0].label, "weight");
  EXPECT_EQ(batches[1].tensors[f0.entries[0].slot]->name, "0.0|m|Linear|weight");
  const Frame& f1 = batches[1].frames[1];
  EXPECT_EQ(f1.module, "");
  EXPECT_EQ(f1.class_name,
            "Model");  // the module of frame 1 comes from its entries, not file order
  EXPECT_EQ(f1.entries[1].kind, EntryKind::not_a_tensor);
}

TEST_F(FramesFiles, RejectsInconsistentDumps) {
  const auto dup1 = write("d1.safetensors", 0, {"0.0|m|L|input[0]"});
  const auto dup2 = write("d2.safetensors", 0, {"0.0|m|L|input[0]"});
  EXPECT_NE(error_of({dup1, dup2}).find("appears twice"), std::string::npos);
  const auto gap = write("g.safetensors", 0, {"0.0|m|L|input[0]", "2.0|m|L|input[0]"});
  EXPECT_NE(error_of({gap}).find("frame 1 is missing"), std::string::npos);
  const auto hole = write("h.safetensors", 0, {"0.0|m|L|input[0]", "0.2|m|L|output"});
  EXPECT_NE(error_of({hole}).find("entry 1 is missing"), std::string::npos);
  const auto mixed = write("x.safetensors", 0, {"0.0|m|L|input[0]", "0.1|n|L|output"});
  EXPECT_NE(error_of({mixed}).find("different modules"), std::string::npos);
  const auto badname = write("n.safetensors", 0, {"weight"});
  EXPECT_NE(error_of({badname}).find("is not named <frame>.<entry>"), std::string::npos);
  const auto badmeta = write("m.safetensors", 0, {}, {{"0.0|m|L|output", "nothing"}});
  EXPECT_NE(error_of({badmeta}).find("\"None\" or \"not a tensor\""), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::numerics
