#include "aquifer/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace aquifer {
namespace {

TEST(StatusTest, OkCarriesNoMessageAndMapsToZero) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(ToErrno(s), 0);
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, EachCodeMapsToItsErrno) {
  struct Row {
    Code code;
    int err;
  };
  const Row rows[] = {
      {Code::kNotFound, ENOENT},         {Code::kAlreadyExists, EEXIST},
      {Code::kNotEmpty, ENOTEMPTY},      {Code::kNotDirectory, ENOTDIR},
      {Code::kIsDirectory, EISDIR},      {Code::kPermissionDenied, EACCES},
      {Code::kInvalidArgument, EINVAL},  {Code::kNameTooLong, ENAMETOOLONG},
      {Code::kNoSpace, ENOSPC},          {Code::kReadOnly, EROFS},
      {Code::kStale, ESTALE},            {Code::kUnavailable, EIO},
      {Code::kCorruption, EIO},          {Code::kInternal, EIO},
      {Code::kWouldBlock, EAGAIN},       {Code::kNotPermitted, EPERM},
      {Code::kCrossDevice, EXDEV},       {Code::kNoData, ENODATA},
      {Code::kRange, ERANGE},            {Code::kNotSupported, EOPNOTSUPP},
      {Code::kDeadlock, EDEADLK},        {Code::kTooManyLinks, EMLINK},
      {Code::kFileTooLarge, EFBIG},      {Code::kDataLoss, EIO},
  };
  for (const Row& row : rows) {
    Status s(row.code, "x");
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(ToErrno(s), row.err) << CodeName(row.code);
    EXPECT_EQ(CodeFromInt(static_cast<int>(row.code)), row.code);
  }
}

TEST(StatusTest, UnknownWireCodeBecomesInternal) {
  EXPECT_EQ(CodeFromInt(250), Code::kInternal);
  EXPECT_EQ(CodeFromInt(-1), Code::kInternal);
}

TEST(StatusTest, PrefixKeepsCode) {
  Status s = NotFound("no entry 'a'").WithPrefix("lookup");
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.ToString(), "not_found: lookup: no entry 'a'");
  EXPECT_TRUE(OkStatus().WithPrefix("x").ok());
}

Status FailsWhenNegative(int v) {
  if (v < 0) return InvalidArgument("negative");
  return OkStatus();
}
Status Chain(int v) {
  AQ_RETURN_IF_ERROR(FailsWhenNegative(v));
  return Status(Code::kAlreadyExists, "reached");
}

TEST(StatusTest, ReturnIfErrorStopsAtFirstFailure) {
  EXPECT_EQ(Chain(-1).code(), Code::kInvalidArgument);
  EXPECT_EQ(Chain(1).code(), Code::kAlreadyExists);
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  Result<int> bad = NotFound("x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace aquifer
