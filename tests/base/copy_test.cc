#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/copy_internal.h"

namespace ckflow::internal {
namespace {

// Every size around the streaming threshold and the 64-byte loop, at every
// alignment of source and destination, copies exactly the source bytes and
// writes nothing outside the destination.
TEST(StreamingCopyTest, CopiesExactlyAtEveryAlignmentAndSize) {
  const std::vector<size_t> sizes = {0,
                                     1,
                                     15,
                                     63,
                                     64,
                                     65,
                                     4095,
                                     (64 << 10) - 1,
                                     64 << 10,
                                     (64 << 10) + 1,
                                     (64 << 10) + 63,
                                     (1 << 20) + 17};
  std::vector<uint8_t> src((1 << 20) + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t size : sizes) {
    for (size_t src_offset : {0, 1, 8, 15}) {
      for (size_t dst_offset : {0, 3, 16, 33}) {
        std::vector<uint8_t> dst(size + 128, 0xAB);
        StreamingCopy(dst.data() + dst_offset, src.data() + src_offset, size);
        for (size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(dst[i], 0xAB) << "before, size " << size;
        for (size_t i = 0; i < size; ++i) {
          ASSERT_EQ(dst[dst_offset + i], src[src_offset + i])
              << "size " << size << " src+" << src_offset << " dst+" << dst_offset << " byte " << i;
        }
        for (size_t i = dst_offset + size; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], 0xAB) << "after, size " << size;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ckflow::internal
