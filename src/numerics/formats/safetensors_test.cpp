#include "numerics/formats/safetensors.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace gpudiag::numerics {
namespace {

std::vector<std::uint8_t> file_with(const std::string& header, std::size_t data_bytes,
                                    std::optional<std::uint64_t> length = std::nullopt) {
  const std::uint64_t n = length.value_or(header.size());
  std::vector<std::uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (std::size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<std::uint8_t>(i));
  return out;
}

/// The error message parsing `bytes` gives ("" when it parses).
std::string error_of(const std::vector<std::uint8_t>& bytes) {
  try {
    parse_safetensors(bytes, "f.safetensors");
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("f.safetensors: ", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsTensorsInDataOrderWithMetadata) {
  const auto bytes = file_with(
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"BF16","shape":[1,3],"data_offsets":[8,14]},"__metadata__":{"format":"pt"}}  )",
      14);
  const auto f = parse_safetensors(bytes, "f");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "b");
  EXPECT_EQ(f.tensors[0].count, 2u);
  EXPECT_EQ(f.tensors[1].name, "a");
  EXPECT_EQ(f.tensors[1].dtype, DType::BF16);
  EXPECT_EQ(f.tensors[1].shape, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(f.tensors[1].data.data(), bytes.data() + bytes.size() - 6);
  EXPECT_EQ(f.metadata.at("format"), "pt");
}

TEST(Safetensors, AcceptsScalarsEmptyTensorsAndEveryDType) {
  const auto bytes = file_with(
      R"({"s":{"dtype":"F8_E4M3","shape":[],"data_offsets":[0,1]},"e":{"dtype":"I64","shape":[0,5],"data_offsets":[1,1]},)"
      R"("q":{"dtype":"BOOL","shape":[2],"data_offsets":[1,3]}})",
      3);
  const auto f = parse_safetensors(bytes, "f");
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].count, 1u);
  EXPECT_EQ(f.tensors[1].count, 0u);
  for (DType t : kAllDTypes) EXPECT_EQ(dtype_from_safetensors(dtype_name(t)), t);
}

TEST(Safetensors, RejectsBadLengths) {
  EXPECT_NE(error_of({1, 2, 3}).find("too short"), std::string::npos);
  EXPECT_NE(error_of(file_with("{}", 0, 100'000'001)).find("larger than the 100000000-byte limit"),
            std::string::npos);
  EXPECT_NE(error_of(file_with("{}", 0, 50)).find("runs past the end"), std::string::npos);
  EXPECT_NE(error_of(file_with("{}", 0, ~0ull)).find("limit"), std::string::npos);
}

TEST(Safetensors, RejectsBadHeaderText) {
  EXPECT_NE(error_of(file_with("{\"a\xff\":1}", 0)).find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(error_of(file_with(" {}", 0)).find("does not start with '{'"), std::string::npos);
  EXPECT_NE(error_of(file_with("{\"a\":", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(file_with("{} x", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"a":[[[[[[[[[[1]]]]]]]]]]})", 0)).find("nested deeper"),
            std::string::npos);
  const std::string t = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_NE(error_of(file_with("{\"x\":" + t + ",\"x\":" + t + "}", 1)).find("\"x\" twice"),
            std::string::npos);
}

TEST(Safetensors, RejectsBadTensorEntries) {
  auto err = [](const std::string& entry, std::size_t data = 4) {
    return error_of(file_with("{\"t\":" + entry + "}", data));
  };
  EXPECT_NE(err(R"({"dtype":"F7","shape":[1],"data_offsets":[0,4]})").find("unknown dtype \"F7\""),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})").find("shape entry is not"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F32","shape":[1.0],"data_offsets":[0,4]})").find("shape entry is not"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})")
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]})")
                .find("byte size"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})").find("needs 8"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})").find("before begin"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F32","shape":[1]})").find("data_offsets"), std::string::npos);
  EXPECT_NE(err(R"({"shape":[1],"data_offsets":[0,4]})").find("dtype"), std::string::npos);
  EXPECT_NE(err(R"([1])").find("expected an object"), std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 3).find("past the end"),
            std::string::npos);
  EXPECT_NE(
      err(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 5).find("cover 4 bytes of the 5"),
      std::string::npos);
}

TEST(Safetensors, RejectsGapsAndOverlaps) {
  const auto overlap = file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 8);
  EXPECT_NE(error_of(overlap).find("(overlap)"), std::string::npos);
  const auto gap = file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                             12);
  EXPECT_NE(error_of(gap).find("(gap)"), std::string::npos);
}

TEST(Safetensors, RejectsBadMetadata) {
  EXPECT_NE(error_of(file_with(R"({"__metadata__":{"k":1}})", 0)).find("is not a string"),
            std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"__metadata__":[]})", 0)).find("not an object"),
            std::string::npos);
}

TEST(Safetensors, QuotesHostileNamesOnOneLine) {
  const auto msg =
      error_of(file_with(R"({"a\nb":{"dtype":"X","shape":[],"data_offsets":[0,0]}})", 0));
  EXPECT_NE(msg.find(R"("a\x0ab")"), std::string::npos) << msg;
}

}  // namespace
}  // namespace gpudiag::numerics
