#include "bundle/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace ckflow::crc32c {
namespace {

TEST(Crc32c, CheckValueOfStandardInput) {
  EXPECT_EQ(Value(""), 0u);
  EXPECT_EQ(Value("123456789"), 0xE3069283u);
}

// Published CRC32C test vectors (RFC 3720, B.4).
TEST(Crc32c, MatchesIscsiTestVectors) {
  EXPECT_EQ(Value(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Value(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(Value(ascending), 0x46dd794eu);
}

TEST(Crc32c, ExtendContinuesAStream) {
  EXPECT_EQ(Extend(Value("1234"), "56789"), 0xE3069283u);
  EXPECT_EQ(Extend(Value("123456789"), ""), 0xE3069283u);
}

TEST(Crc32c, MaskMatchesTensorFlowDefinition) {
  // Rotate right by 15, add 0xa282ead8 (spec 2.2).
  EXPECT_EQ(Mask(0), 0xa282ead8u);
  EXPECT_EQ(Mask(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
  // The masked CRC of "" as TensorFlow stores it: bytes d8 ea 82 a2.
  EXPECT_EQ(Mask(Value("")), 0xa282ead8u);
}

TEST(Crc32c, UnmaskInvertsMask) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    uint32_t crc = rng();
    EXPECT_EQ(Unmask(Mask(crc)), crc);
    EXPECT_NE(Mask(crc), crc);
  }
}

TEST(Crc32c, CombineEqualsCrcOfConcatenation) {
  std::mt19937 rng(42);
  std::string data(100000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const uint32_t whole = Value(data);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{65537},
                       data.size() - 1, data.size()}) {
    std::string_view a = std::string_view(data).substr(0, split);
    std::string_view b = std::string_view(data).substr(split);
    EXPECT_EQ(Combine(Value(a), Value(b), b.size()), whole) << "split at " << split;
  }
}

TEST(Crc32c, CombineHandlesLengthsBeyond4GiB) {
  // Value(zeros(n)) for huge n is not computable here, but Combine must be
  // associative: (a ++ z) ++ b == a ++ (z ++ b) for any lengths.
  const uint32_t a = Value("abc"), z = 0x12345678u, b = Value("xyz");
  const uint64_t len_z = (uint64_t{1} << 40) + 3;
  EXPECT_EQ(Combine(Combine(a, z, len_z), b, 3), Combine(a, Combine(z, b, 3), len_z + 3));
}

}  // namespace
}  // namespace ckflow::crc32c
