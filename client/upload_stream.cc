#include "client/upload_stream.h"

#include <string>
#include <utility>

#include "google/protobuf/io/coded_stream.h"

namespace parity {
namespace {

using google::protobuf::io::CodedOutputStream;

// Appends `v` as protobuf's base-128 varint.
void AppendVarint(uint64_t v, std::string* out) {
  uint8_t buf[10];
  const uint8_t* end = CodedOutputStream::WriteVarint64ToArray(v, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
}

// Wire tags (field number << 3 | wire type): UploadRequest.chunk = 3 (length-delimited),
// TensorChunk.offset = 1 (varint), TensorChunk.data = 2 (length-delimited), TensorChunk.crc32 =
// 3 (varint), TensorChunk.stats = 5 (length-delimited).
constexpr char kChunkTag = (3 << 3) | 2;
constexpr char kOffsetTag = (1 << 3) | 0;
constexpr char kDataTag = (2 << 3) | 2;
constexpr char kCrc32Tag = (3 << 3) | 0;
constexpr char kStatsTag = (5 << 3) | 2;

void ReleaseOwner(void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }

}  // namespace

OutgoingUpload OutgoingUpload::Chunk(uint64_t offset, absl::string_view data,
                                     std::shared_ptr<const void> owner, std::optional<uint32_t> crc32,
                                     const v1::Statistics* stats) {
  OutgoingUpload m;
  m.offset_ = offset;
  m.crc32_ = crc32;
  if (stats != nullptr) m.stats_ = *stats;
  if (owner == nullptr && !data.empty()) {
    // Nothing keeps the bytes alive past the Write call: send a copy.
    auto copy = std::make_shared<const std::string>(data);
    m.data_ = *copy;
    m.owner_ = std::move(copy);
  } else {
    m.data_ = data;
    m.owner_ = std::move(owner);
  }
  return m;
}

grpc::Status OutgoingUpload::Serialize(grpc::ByteBuffer* out) const {
  if (request_ != nullptr) {
    // gRPC's own protobuf serialization, as the generated stub uses.
    bool own = false;
    return grpc::SerializationTraits<v1::UploadRequest>::Serialize(*request_, out, &own);
  }
  // proto3 leaves out fields at their default: a zero offset, empty data.
  const size_t offset_bytes = offset_ == 0 ? 0 : 1 + CodedOutputStream::VarintSize64(offset_);
  const size_t data_bytes = data_.empty() ? 0 : 1 + CodedOutputStream::VarintSize64(data_.size()) + data_.size();
  // An optional field is written when set, even at zero.
  std::string tail;
  if (crc32_) {
    tail.push_back(kCrc32Tag);
    AppendVarint(*crc32_, &tail);
  }
  if (stats_) {
    const std::string body = stats_->SerializeAsString();
    tail.push_back(kStatsTag);
    AppendVarint(body.size(), &tail);
    tail += body;
  }
  std::string head;
  head.push_back(kChunkTag);
  AppendVarint(offset_bytes + data_bytes + tail.size(), &head);
  if (offset_ != 0) {
    head.push_back(kOffsetTag);
    AppendVarint(offset_, &head);
  }
  if (data_.empty()) {
    grpc::Slice s(head + tail);
    *out = grpc::ByteBuffer(&s, 1);
    return grpc::Status::OK;
  }
  head.push_back(kDataTag);
  AppendVarint(data_.size(), &head);
  grpc::Slice slices[3] = {
      grpc::Slice(head),
      // gRPC calls ReleaseOwner once the last reference to the slice is gone.
      grpc::Slice(const_cast<char*>(data_.data()), data_.size(), &ReleaseOwner,
                  new std::shared_ptr<const void>(owner_)),
      grpc::Slice(tail),
  };
  *out = grpc::ByteBuffer(slices, tail.empty() ? 2 : 3);
  return grpc::Status::OK;
}

std::unique_ptr<UploadStream> OpenUploadStream(const std::shared_ptr<grpc::ChannelInterface>& channel,
                                               grpc::ClientContext* ctx) {
  static const std::string* const name =
      new std::string(std::string("/") + v1::Ingest::service_full_name() + "/Upload");
  const grpc::internal::RpcMethod method(name->c_str(), grpc::internal::RpcMethod::BIDI_STREAMING,
                                         channel);
  return std::unique_ptr<UploadStream>(
      grpc::internal::ClientReaderWriterFactory<OutgoingUpload, v1::UploadResponse>::Create(
          channel.get(), method, ctx));
}

}  // namespace parity
