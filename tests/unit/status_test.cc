#include "tiermem/status.hpp"

#include <cerrno>

#include <gtest/gtest.h>

namespace tiermem {
namespace {

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = InvalidArgument("bad size");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "invalid_argument: bad size");
  EXPECT_EQ(s.WithContext("Allocate").ToString(), "invalid_argument: Allocate: bad size");
  EXPECT_EQ(s.ToErrno(), -EINVAL);
}

TEST(Status, ErrnoConversionIsTheOnePlace) {
  EXPECT_EQ(ErrnoToStatus(ENOMEM, "mmap").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToStatus(-ENOENT, "open").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoToStatus(EPERM, "mbind").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(ECONNREFUSED, "connect").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(ErrnoToStatus(0, "x").ok());
  Status s = ErrnoToStatus(EINVAL, "mbind(node 3)");
  EXPECT_NE(s.message().find("mbind(node 3)"), std::string::npos);
  EXPECT_NE(s.message().find("errno 22"), std::string::npos);
}

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  TIERMEM_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(StatusOr, ValueOrStatus) {
  auto a = Half(4);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 2);
  auto b = Half(3);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  int out = 0;
  EXPECT_TRUE(UseHalf(10, &out).ok());
  EXPECT_EQ(out, 5);
  EXPECT_FALSE(UseHalf(11, &out).ok());
  EXPECT_EQ(out, 5);
}

}  // namespace
}  // namespace tiermem
