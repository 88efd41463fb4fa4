// OutgoingUpload: the agent's zero-copy chunk messages are byte for byte what protobuf writes
// for the same UploadRequest, and they hold the tensor's buffer exactly as long as gRPC does.
#include "client/upload_stream.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace parity {
namespace {

std::string Bytes(const OutgoingUpload& m) {
  grpc::ByteBuffer bb;
  bool own = false;
  EXPECT_TRUE((grpc::SerializationTraits<OutgoingUpload>::Serialize(m, &bb, &own).ok()));
  EXPECT_TRUE(own);
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bb.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(UploadStream, ChunksAreWhatProtobufWrites) {
  for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{300},
                          uint64_t{1} << 35, ~uint64_t{0}}) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{16384},
                        (size_t{1} << 20) + 3}) {
      SCOPED_TRACE(testing::Message() << "offset " << offset << " size " << size);
      auto buf = std::make_shared<std::string>(size, '\0');
      for (size_t i = 0; i < size; ++i) (*buf)[i] = static_cast<char>(i * 7 + 1);
      // The whole item's CRC-32 on a last chunk: absent, zero (still present) or any value.
      for (std::optional<uint32_t> crc : {std::optional<uint32_t>(), std::optional<uint32_t>(0),
                                          std::optional<uint32_t>(127), std::optional<uint32_t>(0xcbf43926u)}) {
        SCOPED_TRACE(testing::Message() << "crc32 " << (crc ? std::to_string(*crc) : "none"));
        v1::UploadRequest expected;
        expected.mutable_chunk()->set_offset(offset);
        expected.mutable_chunk()->set_data(*buf);
        if (crc) expected.mutable_chunk()->set_crc32(*crc);
        const std::string wire = Bytes(OutgoingUpload::Chunk(offset, *buf, buf, crc));
        EXPECT_EQ(wire, expected.SerializeAsString());
        v1::UploadRequest parsed;
        ASSERT_TRUE(parsed.ParseFromString(wire));
        EXPECT_TRUE(parsed.has_chunk());
        EXPECT_EQ(parsed.chunk().offset(), offset);
        EXPECT_EQ(parsed.chunk().data(), *buf);
        EXPECT_EQ(parsed.chunk().has_crc32(), crc.has_value());
        if (crc) {
          EXPECT_EQ(parsed.chunk().crc32(), *crc);
        }
      }
    }
  }
}

TEST(UploadStream, RequestsAreSerializedByProtobuf) {
  v1::UploadRequest header;
  header.mutable_header()->mutable_key()->set_api("Functional.linear.1.forward");
  header.mutable_header()->add_shape(1024);
  header.mutable_header()->set_byte_length(4096);
  EXPECT_EQ(Bytes(header), header.SerializeAsString());
  v1::UploadRequest end;
  end.mutable_end();
  EXPECT_EQ(Bytes(end), end.SerializeAsString());
}

// The buffer is referenced, not copied: the serialized message holds the owner until gRPC
// drops the last reference to it, and no longer.
TEST(UploadStream, AChunkHoldsItsBufferUntilGrpcIsDone) {
  auto buf = std::make_shared<std::string>(1 << 16, 'a');
  const std::weak_ptr<std::string> watch = buf;
  {
    grpc::ByteBuffer bb;
    bool own = false;
    ASSERT_TRUE((grpc::SerializationTraits<OutgoingUpload>::Serialize(
                     OutgoingUpload::Chunk(5, absl::string_view(*buf).substr(8, 1000), buf), &bb, &own)
                     .ok()));
    buf.reset();
    EXPECT_FALSE(watch.expired());  // only the message keeps it now
    (*watch.lock())[8] = 'z';       // a reference: the message sees the change
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(bb.Dump(&slices).ok());
    v1::UploadRequest parsed;
    std::string wire;
    for (const grpc::Slice& s : slices) wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
    ASSERT_TRUE(parsed.ParseFromString(wire));
    EXPECT_EQ(parsed.chunk().data(), "z" + std::string(999, 'a'));
    slices.clear();
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired());
}

// Without an owner nothing would keep the bytes alive after Write returns: they are copied.
TEST(UploadStream, AChunkWithoutOwnerSendsACopy) {
  std::string bytes(3000, 'q');
  grpc::ByteBuffer bb;
  bool own = false;
  ASSERT_TRUE((grpc::SerializationTraits<OutgoingUpload>::Serialize(
                   OutgoingUpload::Chunk(0, bytes, nullptr), &bb, &own)
                   .ok()));
  std::memset(bytes.data(), 'x', bytes.size());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bb.Dump(&slices).ok());
  std::string wire;
  for (const grpc::Slice& s : slices) wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  v1::UploadRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.chunk().data(), std::string(3000, 'q'));
}

}  // namespace
}  // namespace parity
