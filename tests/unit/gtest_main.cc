// The unit tests' main: GoogleTest's, except that a run in which a test
// skipped (and none failed) exits 77, which meson shows as SKIP: a test that
// cannot run here is seen in the summary, not only in its log.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0 && testing::UnitTest::GetInstance()->skipped_test_count() > 0) return 77;
  return rc;
}
