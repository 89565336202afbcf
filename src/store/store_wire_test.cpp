#include "store/store_wire.h"

#include <gtest/gtest.h>

namespace gpudiag::storewire {
namespace {

TEST(StoreWire, FrameRoundTripsLittleEndian) {
  auto bytes = Writer(Type::add, 0x01020304).str("key").i64(-2).finish();
  // u32 length, then type, then the id least significant byte first.
  ASSERT_GE(bytes.size(), 9u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), bytes.size() - 4);
  EXPECT_EQ(static_cast<unsigned char>(bytes[4]), static_cast<unsigned char>(Type::add));
  EXPECT_EQ(static_cast<unsigned char>(bytes[5]), 0x04);
  Frame f{};
  ASSERT_TRUE(next_frame(bytes, f));
  EXPECT_EQ(f.type, Type::add);
  EXPECT_EQ(f.id, 0x01020304u);
  EXPECT_EQ(f.total, bytes.size());
  Reader r(f.payload);
  EXPECT_EQ(r.str(), "key");
  EXPECT_EQ(r.i64(), -2);
  EXPECT_TRUE(r.done());
}

TEST(StoreWire, IncompleteFrameWaitsForMoreBytes) {
  auto bytes = Writer(Type::set, 1).str("k").str("v").finish();
  Frame f{};
  for (std::size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(next_frame(std::string_view(bytes).substr(0, n), f)) << n;
}

TEST(StoreWire, OversizedOrShortLengthIsAProtocolError) {
  std::string huge("\xff\xff\xff\x7f", 4);
  Frame f{};
  EXPECT_THROW(next_frame(huge, f), ProtocolError);
  std::string tiny("\x01\x00\x00\x00\x02", 5);
  EXPECT_THROW(next_frame(tiny, f), ProtocolError);
}

TEST(StoreWire, ReaderRefusesTruncatedAndLyingCounts) {
  EXPECT_THROW(Reader("\x05\x00\x00\x00ab").str(), ProtocolError);
  std::string many("\xff\xff\xff\xff", 4);  // 4 billion keys in a 4-byte body
  EXPECT_THROW(Reader(many).strs(), ProtocolError);
  EXPECT_THROW(Reader(std::string_view("\x01\x00\x00\x00x!", 6)).expect_done(), ProtocolError);
}

}  // namespace
}  // namespace gpudiag::storewire
