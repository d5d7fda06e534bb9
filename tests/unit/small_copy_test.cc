// copy_small (common/small_copy.h): every size it takes, at every alignment
// of source and destination, copies exactly those bytes and nothing around
// them. The expected bytes are the source's own, compared one by one.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "common/small_copy.h"

namespace omniccl {
namespace {

TEST(SmallCopy, EverySizeAndAlignment) {
  constexpr size_t kPad = 16;
  for (size_t n = 1; n <= kSmallCopyMax; ++n) {
    for (size_t src_off = 0; src_off < 8; ++src_off) {
      for (size_t dst_off = 0; dst_off < 8; ++dst_off) {
        std::vector<uint8_t> src(kPad + kSmallCopyMax + kPad);
        for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
        std::vector<uint8_t> dst(kPad + kSmallCopyMax + kPad, 0xee);
        copy_small(dst.data() + kPad + dst_off, src.data() + kPad + src_off, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const size_t at = i - kPad - dst_off;  // wraps below the copy
          const uint8_t want = at < n ? src[kPad + src_off + at] : uint8_t{0xee};
          ASSERT_EQ(dst[i], want) << "n=" << n << " src_off=" << src_off << " dst_off=" << dst_off << " byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace omniccl
