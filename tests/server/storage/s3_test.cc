// The S3 client against a real S3-compatible server (s3rver, started for the tests by
// tests/s3.sh; never a mock): objects of every size and byte round-trip, ranges, listings over
// several pages and under a prefix, deletes, and each failure with its status code.
#include "server/storage/s3.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <utility>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/test_s3.h"

namespace parity {
namespace {

// Keys of a test of their own, so that tests sharing the server do not see each other's.
std::string TestPrefix() {
  return absl::StrCat("t", ::getpid(), "-", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
}

std::unique_ptr<S3Client> Client(const std::string& prefix) {
  EXPECT_FALSE(testing::S3Endpoint().empty()) << "no test S3 server (tests/s3.sh start failed)";
  absl::StatusOr<std::unique_ptr<S3Client>> c = S3Client::Open(testing::TestS3Options(prefix));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(S3, ObjectsRoundTripWholeAndByRange) {
  std::unique_ptr<S3Client> s3 = Client(TestPrefix());
  ASSERT_NE(s3, nullptr);
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  std::string large(5 << 20, '\0');  // 5 MiB
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 2654435761u >> 13);
  const std::vector<std::pair<std::string, std::string>> objects = {
      {"empty", ""}, {"bytes", all_bytes}, {"ab/cdef0123", "x"}, {"large", large}, {"odd name+=&?", "q"}};
  for (const auto& [key, data] : objects) ASSERT_TRUE(s3->Put(key, data).ok()) << key;
  for (const auto& [key, data] : objects) {
    absl::StatusOr<std::string> got = s3->Get(key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status();
    EXPECT_EQ(*got, data) << key;
  }
  absl::StatusOr<std::string> part = s3->Get("large", 1000, 4096);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(*part, large.substr(1000, 4096));
  absl::StatusOr<std::string> tail = s3->Get("bytes", 250);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(*tail, all_bytes.substr(250));
  // A second put replaces the object.
  ASSERT_TRUE(s3->Put("bytes", "new").ok());
  EXPECT_EQ(*s3->Get("bytes"), "new");
}

TEST(S3, ListsEveryKeyUnderAPrefixAcrossPagesAndDeletes) {
  const std::string prefix = TestPrefix();
  std::unique_ptr<S3Client> s3 = Client(prefix);
  ASSERT_NE(s3, nullptr);
  std::vector<std::string> keys;
  for (int i = 0; i < 1010; ++i) keys.push_back(absl::StrCat("blobs/", 10000 + i));  // more than a page (1000)
  for (const std::string& k : keys) ASSERT_TRUE(s3->Put(k, k).ok()) << k;
  ASSERT_TRUE(s3->Put("other/x", "x").ok());
  absl::StatusOr<std::vector<std::string>> listed = s3->List("blobs/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, keys);  // the options' prefix left out, in order
  // Another prefix of the bucket does not see these keys.
  std::unique_ptr<S3Client> elsewhere = Client(prefix + "nothing-here/");
  ASSERT_NE(elsewhere, nullptr);
  EXPECT_TRUE(elsewhere->List("")->empty());
  for (int i = 0; i < 1010; i += 2) ASSERT_TRUE(s3->Delete(keys[static_cast<size_t>(i)]).ok());
  EXPECT_TRUE(s3->Delete("blobs/no-such-key").ok());  // deleting what is not there is no error
  listed = s3->List("blobs/");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 505u);
  EXPECT_EQ(listed->front(), keys[1]);
}

// A file of `n` bytes of a pattern in a scratch file, open for reading and writing.
int PatternFile(const std::string& path, size_t n, std::string* bytes) {
  bytes->resize(n);
  for (size_t i = 0; i < n; ++i) (*bytes)[i] = static_cast<char>((i * 2654435761u) >> 11);
  const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(::write(fd, bytes->data(), n), static_cast<ssize_t>(n));
  return fd;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(S3, FilesStreamUpAndDownWithTheirSizesAndTimesListed) {
  std::unique_ptr<S3Client> s3 = Client(TestPrefix());
  ASSERT_NE(s3, nullptr);
  const std::string dir = ::testing::TempDir();
  std::string bytes;
  const std::string src = dir + "/s3_src_" + std::to_string(::getpid());
  const int fd = PatternFile(src, (24 << 20) + 5, &bytes);  // 24 MiB and an odd tail
  const int64_t before_ms = absl::ToUnixMillis(absl::Now()) - 2000;
  ASSERT_TRUE(s3->PutFile("big", fd, bytes.size()).ok());
  ASSERT_TRUE(s3->PutFile("head", fd, 1000).ok());  // only the first bytes of the file
  ::close(fd);
  const std::string dst = dir + "/s3_dst_" + std::to_string(::getpid());
  for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{{"big", bytes}, {"head", bytes.substr(0, 1000)}}) {
    const int out = ::open(dst.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    absl::StatusOr<uint64_t> got = s3->GetToFile(key, out);
    ::close(out);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want.size());
    EXPECT_TRUE(ReadAll(dst) == want) << key;
  }
  // A missing object is NOT_FOUND and writes nothing to the file (the error's body stays out).
  const int out = ::open(dst.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  EXPECT_EQ(s3->GetToFile("missing", out).status().code(), absl::StatusCode::kNotFound);
  ::close(out);
  EXPECT_EQ(ReadAll(dst), "");
  // A file shorter than the size given is an error, not a short object.
  const int short_fd = ::open(src.c_str(), O_RDONLY);
  absl::Status s = s3->PutFile("short", short_fd, bytes.size() + 10);
  ::close(short_fd);
  EXPECT_FALSE(s.ok());
  absl::StatusOr<std::vector<S3Client::Object>> objects = s3->ListObjects("");
  ASSERT_TRUE(objects.ok()) << objects.status();
  std::vector<std::string> keys;
  for (const S3Client::Object& o : *objects) {
    keys.push_back(o.key);
    EXPECT_GE(o.modified_ms, before_ms) << o.key;
    EXPECT_LE(o.modified_ms, absl::ToUnixMillis(absl::Now()) + 2000) << o.key;
    EXPECT_EQ(o.size, o.key == "big" ? bytes.size() : 1000u) << o.key;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"big", "head"}));
  ::unlink(src.c_str());
  ::unlink(dst.c_str());
}

TEST(S3, FailuresCarryTheirStatusCode) {
  std::unique_ptr<S3Client> s3 = Client(TestPrefix());
  ASSERT_NE(s3, nullptr);
  EXPECT_EQ(s3->Get("missing").status().code(), absl::StatusCode::kNotFound);
  S3Options wrong_key = testing::TestS3Options(TestPrefix());
  wrong_key.access_key = "NOT-A-KEY";
  EXPECT_EQ((*S3Client::Open(wrong_key))->Put("k", "v").code(), absl::StatusCode::kPermissionDenied);
  S3Options no_bucket = testing::TestS3Options(TestPrefix());
  no_bucket.bucket = "no-such-bucket";
  EXPECT_EQ((*S3Client::Open(no_bucket))->Get("k").status().code(), absl::StatusCode::kNotFound);
  S3Options down = testing::TestS3Options(TestPrefix());
  down.endpoint = "http://127.0.0.1:1";  // nothing listens there
  absl::Status s = (*S3Client::Open(down))->Put("k", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("S3 put k"), std::string::npos) << s;
}

TEST(S3, UrlsGiveOptionsAndCredentialsComeFromTheEnvironment) {
  ::setenv("AWS_ACCESS_KEY_ID", "AK", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
  absl::StatusOr<S3Options> o = ParseS3Url("s3://blobs/team/a?endpoint=http://127.0.0.1:9000/&region=eu-west-1");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->bucket, "blobs");
  EXPECT_EQ(o->prefix, "team/a/");
  EXPECT_EQ(o->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(o->region, "eu-west-1");
  EXPECT_EQ(o->access_key, "AK");
  EXPECT_EQ(o->secret_key, "SK");
  EXPECT_EQ(ParseS3Url("s3://b").status().code(), absl::StatusCode::kInvalidArgument);  // no endpoint
  EXPECT_EQ(ParseS3Url("http://b?endpoint=http://x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ParseS3Url("s3://b?endpoint=http://x&secret=s").status().message().find("unknown parameter 'secret'"),
            std::string::npos);
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_NE(ParseS3Url("s3://b?endpoint=http://x").status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
  ::unsetenv("AWS_ACCESS_KEY_ID");
}

}  // namespace
}  // namespace parity
