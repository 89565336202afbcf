#include "numerics/formats/npy.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace gpudiag::numerics {
namespace npy_test {  // named: the unity build puts this folder's tests in one unit

std::vector<std::uint8_t> npy(const std::string& dict, std::size_t data_bytes, int major = 1) {
  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major),
                                   0};
  const std::size_t n = dict.size();
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), dict.begin(), dict.end());
  for (std::size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<std::uint8_t>(i + 1));
  return out;
}

std::string dict(const std::string& descr, const std::string& shape,
                 const std::string& order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape +
         ", }          \n";
}

std::string error_of(const std::vector<std::uint8_t>& bytes,
                     std::optional<DType> over = std::nullopt) {
  try {
    parse_npy(bytes, "a.npy", over);
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("a.npy: ", 0), 0u) << e.what();
    return e.what();
  }
  return "";
}

TEST(Npy, ReadsEveryVersionAndByteOrder) {
  for (int v : {1, 2, 3}) {
    const auto bytes = npy(dict("<f4", "(2, 3)"), 24, v);
    const auto a = parse_npy(bytes, "a.npy", std::nullopt);
    EXPECT_EQ(a.tensor.dtype, DType::F32);
    EXPECT_EQ(a.tensor.count, 6u);
    EXPECT_EQ(a.tensor.order, ByteOrder::little);
    EXPECT_EQ(a.tensor.data.data(), bytes.data() + bytes.size() - 24);
  }
  const auto big = parse_npy(npy(dict(">i8", "(3,)", "True"), 24), "b", std::nullopt);
  EXPECT_EQ(big.tensor.dtype, DType::I64);
  EXPECT_EQ(big.tensor.order, ByteOrder::big);
  EXPECT_TRUE(big.fortran_order);
  const auto scalar = parse_npy(npy(dict("|b1", "()"), 1), "s", std::nullopt);
  EXPECT_EQ(scalar.tensor.count, 1u);
  EXPECT_EQ(scalar.tensor.dtype, DType::BOOL);
}

TEST(Npy, RawVoidElementsNeedTheirDType) {
  const auto bytes = npy(dict("|V2", "(4,)"), 8);
  const auto msg = error_of(bytes);
  EXPECT_NE(msg.find("raw 2-byte elements"), std::string::npos) << msg;
  const auto a = parse_npy(bytes, "a.npy", DType::BF16);
  EXPECT_EQ(a.tensor.dtype, DType::BF16);
  EXPECT_TRUE(a.override_applied);
  EXPECT_NE(error_of(bytes, DType::F8_E4M3).find("1-byte elements but the file stores 2-byte"),
            std::string::npos);
  // An integer view of bf16 bits is reinterpreted too; real floats are not.
  EXPECT_EQ(parse_npy(npy(dict("<u2", "(4,)"), 8), "u", DType::BF16).tensor.dtype, DType::BF16);
  const auto f = parse_npy(npy(dict("<f2", "(4,)"), 8), "f", DType::BF16);
  EXPECT_EQ(f.tensor.dtype, DType::F16);
  EXPECT_FALSE(f.override_applied);
}

TEST(Npy, RejectsUnsupportedTypes) {
  EXPECT_NE(error_of(npy(dict("|O", "(2,)"), 16)).find("object arrays"), std::string::npos);
  EXPECT_NE(error_of(npy(dict("<c8", "(2,)"), 16)).find("unsupported element type"),
            std::string::npos);
  EXPECT_NE(error_of(npy(dict("<U4", "(2,)"), 32)).find("unsupported element type"),
            std::string::npos);
  EXPECT_NE(error_of(npy(dict("<f16", "(2,)"), 32)).find("unsupported element type"),
            std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4))
                .find("structured"),
            std::string::npos);
}

TEST(Npy, RejectsBadFraming) {
  EXPECT_NE(error_of({'x', 'y'}).find("not a .npy file"), std::string::npos);
  auto v4 = npy(dict("<f4", "(1,)"), 4);
  v4[6] = 4;
  EXPECT_NE(error_of(v4).find("version 4.0"), std::string::npos);
  auto long_header = npy(dict("<f4", "(1,)"), 4, 2);
  long_header[10] = 0x20;  // length 2 MiB + ...
  EXPECT_NE(error_of(long_header).find("limit"), std::string::npos);
  auto past_end = npy(dict("<f4", "(1,)"), 0);
  past_end[8] = 0xff;
  EXPECT_NE(error_of(past_end).find("runs past the end"), std::string::npos);
  EXPECT_NE(error_of(npy(dict("<f4", "(2,)"), 7)).find("(truncated?)"), std::string::npos);
  EXPECT_NE(error_of(npy(dict("<f4", "(2,)"), 9)).find("(trailing bytes)"), std::string::npos);
  EXPECT_NE(error_of({}).find("not a .npy"), std::string::npos);
}

TEST(Npy, RejectsBadDictionaries) {
  auto err = [](const std::string& d) { return error_of(npy(d, 4)); };
  EXPECT_NE(err("{'descr': '<f4', 'shape': (1,), }").find("lacks"), std::string::npos);
  EXPECT_NE(
      err("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}").find("unexpected key"),
      std::string::npos);
  EXPECT_NE(
      err("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}").find("twice"),
      std::string::npos);
  EXPECT_NE(err("{descr: '<f4'}").find("quoted string"), std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}").find("True nor False"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}").find("non-negative"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}")
                .find("64 bits"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}")
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(
      err("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} extra").find("after the header"),
      std::string::npos);
  std::string many = "(";
  for (int i = 0; i < 70; ++i) many += "1,";
  EXPECT_NE(
      err("{'descr': '<f4', 'fortran_order': False, 'shape': " + many + ")}").find("dimensions"),
      std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)").find("expected"),
            std::string::npos);
}

TEST(Npy, Version3HeaderMustBeUtf8) {
  EXPECT_NE(error_of(npy("{'descr': '<f4\xff', 'fortran_order': False, 'shape': (1,)}", 4, 3))
                .find("UTF-8"),
            std::string::npos);
}

}  // namespace
}  // namespace gpudiag::numerics
