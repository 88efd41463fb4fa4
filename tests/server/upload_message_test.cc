// IncomingUpload must read every byte string as protobuf's parse of UploadRequest does (the
// same message, the same success or failure), whatever slices the bytes arrive in; a chunk read
// by hand keeps its data in those slices.
#include "server/upload_message.h"

#include <random>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/ingest_service.h"

namespace parity {
namespace {

// `bytes` cut at the given offsets (sorted, within the string) into slices of their own.
grpc::ByteBuffer Buffer(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + from, cut - from);
    from = cut;
  }
  slices.emplace_back(bytes.data() + from, bytes.size() - from);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::vector<size_t> RandomCuts(size_t size, std::mt19937_64& rng) {
  std::vector<size_t> cuts;
  if (size == 0) return cuts;
  const int n = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < n; ++i) cuts.push_back(std::uniform_int_distribution<size_t>(0, size)(rng));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// Parses `bytes` both ways and expects the same outcome; returns how many pieces the data came in
// (0 when the parse failed).
size_t ExpectParsedAsProtobufDoes(const std::string& bytes, const std::vector<size_t>& cuts) {
  v1::UploadRequest expected;
  const bool expected_ok = expected.ParseFromString(bytes);
  grpc::ByteBuffer buffer = Buffer(bytes, cuts);
  IncomingUpload in;
  const grpc::Status s = in.Parse(&buffer);
  EXPECT_EQ(s.ok(), expected_ok) << s.error_message();
  if (!s.ok() || !expected_ok) return 0;
  EXPECT_EQ(in.wire_bytes(), bytes.size());
  v1::UploadRequest got = in.request();
  EXPECT_TRUE(got.chunk().data().empty());
  std::string data;
  for (absl::string_view p : in.data()) data.append(p.data(), p.size());
  EXPECT_EQ(in.data_size(), data.size());
  if (got.has_chunk() && !data.empty()) got.mutable_chunk()->set_data(data);
  google::protobuf::util::DefaultFieldComparator nan_equal;  // a NaN statistic equals itself
  nan_equal.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&nan_equal);
  EXPECT_TRUE(differencer.Compare(got, expected))
      << "got " << got.ShortDebugString().substr(0, 300) << "\nexpected "
      << expected.ShortDebugString().substr(0, 300);
  return in.data().size();
}

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::vector<v1::UploadRequest> Messages() {
  std::vector<v1::UploadRequest> out;
  for (size_t n : {size_t{0}, size_t{1}, size_t{20}, size_t{100}, size_t{70000}, size_t{1} << 20}) {
    v1::UploadRequest r;
    r.mutable_chunk()->set_offset(n * 3);
    r.mutable_chunk()->set_data(Bytes(n, n));
    out.push_back(r);
    r.mutable_chunk()->set_crc32(0);  // an optional field set at zero is written
    out.push_back(r);
    r.mutable_chunk()->set_crc32(0xdeadbeef);
    r.mutable_chunk()->mutable_stats()->set_max(1.5);
    r.mutable_chunk()->mutable_stats()->set_norm(-0.0);
    out.push_back(r);
  }
  v1::UploadRequest e;
  e.mutable_chunk()->set_read_error("the file changed");
  out.push_back(e);
  v1::UploadRequest h;
  h.mutable_header()->mutable_key()->set_name("conv1.weight");
  h.mutable_header()->set_byte_length(4096);
  out.push_back(h);
  v1::UploadRequest end;
  end.mutable_end();
  out.push_back(end);
  out.push_back(v1::UploadRequest());  // no field at all
  return out;
}

TEST(IncomingUpload, EveryMessageIsReadAsProtobufReadsIt) {
  std::mt19937_64 rng(1);
  for (const v1::UploadRequest& m : Messages()) {
    const std::string bytes = m.SerializeAsString();
    ExpectParsedAsProtobufDoes(bytes, {});
    for (int i = 0; i < 20; ++i) ExpectParsedAsProtobufDoes(bytes, RandomCuts(bytes.size(), rng));
  }
}

TEST(IncomingUpload, AChunksDataStaysInTheSlicesItCameIn) {
  v1::UploadRequest r;
  r.mutable_chunk()->set_offset(7);
  r.mutable_chunk()->set_data(Bytes(70000, 3));
  const std::string bytes = r.SerializeAsString();
  // Cut inside the data three times: read by hand, it is four views into the four slices
  // (protobuf's parse would give one string).
  EXPECT_EQ(ExpectParsedAsProtobufDoes(bytes, {1000, 30000, 50000}), 4u);
  EXPECT_EQ(ExpectParsedAsProtobufDoes(bytes, {}), 1u);
}

TEST(IncomingUpload, MessagesOutsideTheHandReadShapeGiveProtobufsResult) {
  v1::UploadRequest r;
  r.mutable_chunk()->set_offset(5);
  r.mutable_chunk()->set_data("abcdef");
  const std::string chunk = r.SerializeAsString();
  std::vector<std::string> cases;
  cases.push_back(chunk + chunk);                        // the chunk field twice (merged)
  cases.push_back(chunk.substr(0, chunk.size() - 1));    // truncated
  cases.push_back(std::string("\x1a\x02\x12\x05", 4));   // data's length runs past the end
  cases.push_back(std::string("\x1a\x01\x0b", 3));       // a group's wire type
  cases.push_back(std::string("\x1a\x01\x07", 3));       // wire type 7
  cases.push_back(std::string("\x1a\x01\x02", 3));       // field number 0
  cases.push_back(std::string("\x1a\x06\x12\x01x\x12\x01y", 8));  // data twice: the last wins
  cases.push_back(std::string("\x1a\x04\x10\x01x\x00", 6).substr(0, 5));  // data as a varint
  cases.push_back(std::string("\x1a\x05\x22\x03\xff\xfe\xfd", 7));  // read_error not UTF-8
  cases.push_back(std::string("\x1a\x0b\x98\x01\x01\x21\x01\x02\x03\x04\x05\x06\x07", 13));  // unknown fields
  cases.push_back(std::string("\x1a\x0b\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 13));  // 10-byte varint
  cases.push_back(std::string("\x1a\x0c\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 14));  // 11 bytes
  cases.push_back(std::string("\x1a\x00", 2));           // an empty chunk
  cases.push_back(std::string("\x1a\x80\x01", 3));       // a length longer than the message
  cases.push_back(std::string("\x1a\x01\x12", 3));       // data's length missing
  std::mt19937_64 rng(2);
  for (const std::string& bytes : cases) {
    SCOPED_TRACE(testing::PrintToString(bytes));
    ExpectParsedAsProtobufDoes(bytes, {});
    for (int i = 0; i < 10; ++i) ExpectParsedAsProtobufDoes(bytes, RandomCuts(bytes.size(), rng));
  }
}

TEST(IncomingUpload, MutatedChunksAreReadAsProtobufReadsThem) {
  std::mt19937_64 rng(3);
  const std::vector<v1::UploadRequest> messages = Messages();
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = messages[rng() % 12].SerializeAsString();  // the small chunks
    if (bytes.size() > 400) bytes.resize(400);
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[at] = static_cast<char>(rng()); break;
        case 1: bytes.erase(at, 1 + rng() % 3); break;
        default: bytes.insert(at, 1, static_cast<char>(rng())); break;
      }
    }
    ExpectParsedAsProtobufDoes(bytes, RandomCuts(bytes.size(), rng));
    if (HasFailure()) {
      ADD_FAILURE() << "input " << testing::PrintToString(bytes);
      return;
    }
  }
}

TEST(IncomingUpload, CopiedDataIsTheSameBytesInOnePiece) {
  v1::UploadRequest r;
  r.mutable_chunk()->set_data(Bytes(70000, 4));
  const std::string bytes = r.SerializeAsString();
  grpc::ByteBuffer buffer = Buffer(bytes, {5000, 40000});
  IncomingUpload in;
  ASSERT_TRUE(in.Parse(&buffer).ok());
  ASSERT_EQ(in.data().size(), 3u);
  in.CopyData();
  IncomingUpload moved = std::move(in);
  ASSERT_EQ(moved.data().size(), 1u);
  EXPECT_EQ(moved.data()[0], r.chunk().data());
  EXPECT_EQ(moved.data_size(), 70000u);
}

TEST(IncomingUpload, TheRegisteredMethodIsUpload) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("parity.v1.Ingest");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->method(IngestService::kUploadMethodIndex)->name(), "Upload");
}

}  // namespace
}  // namespace parity
