// The agent's side of Ingest.Upload with tensor chunks sent without copies: a chunk's bytes go
// to gRPC as a slice of the tensor's own buffer (kept alive until gRPC is done with it) behind a
// few bytes of protobuf framing, instead of being copied into an UploadRequest and copied again
// when gRPC serializes it. On the wire it is the same UploadRequest protobuf would write, so the
// server is unchanged.
#ifndef PARITY_CLIENT_UPLOAD_STREAM_H_
#define PARITY_CLIENT_UPLOAD_STREAM_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "parity/v1/parity.grpc.pb.h"

namespace parity {

// One message of the upload stream: an UploadRequest (serialized by protobuf), or a chunk whose
// data is referenced. Holds pointers: it lives only for the Write call it is passed to.
class OutgoingUpload {
 public:
  // Implicit, so that stream->Write(request) reads as it does with the generated stub.
  OutgoingUpload(const v1::UploadRequest& request) : request_(&request) {}  // NOLINT
  // UploadRequest{chunk{offset, data}}; `owner` keeps `data` alive and is held until gRPC has
  // sent the bytes (possibly after Write returns). A null `owner` sends a copy of `data`.
  // `crc32` and `stats`, when set, are TensorChunk.crc32 and .stats (the whole item's, on its
  // last chunk).
  static OutgoingUpload Chunk(uint64_t offset, absl::string_view data,
                              std::shared_ptr<const void> owner,
                              std::optional<uint32_t> crc32 = std::nullopt,
                              const v1::Statistics* stats = nullptr);

  // The message's bytes, as protobuf would serialize it.
  grpc::Status Serialize(grpc::ByteBuffer* out) const;

 private:
  OutgoingUpload() = default;
  const v1::UploadRequest* request_ = nullptr;
  uint64_t offset_ = 0;
  absl::string_view data_;
  std::shared_ptr<const void> owner_;
  std::optional<uint32_t> crc32_;
  std::optional<v1::Statistics> stats_;
};

using UploadStream = grpc::ClientReaderWriter<OutgoingUpload, v1::UploadResponse>;

// Starts Ingest.Upload on `channel` (what v1::Ingest::Stub::Upload does, with OutgoingUpload
// as the message type).
std::unique_ptr<UploadStream> OpenUploadStream(const std::shared_ptr<grpc::ChannelInterface>& channel,
                                               grpc::ClientContext* ctx);

}  // namespace parity

namespace grpc {
template <>
class SerializationTraits<parity::OutgoingUpload> {
 public:
  static Status Serialize(const parity::OutgoingUpload& m, ByteBuffer* out, bool* own_buffer) {
    *own_buffer = true;
    return m.Serialize(out);
  }
  static Status Deserialize(ByteBuffer*, parity::OutgoingUpload*) {
    return Status(StatusCode::UNIMPLEMENTED, "OutgoingUpload is only ever sent");
  }
};
}  // namespace grpc

#endif  // PARITY_CLIENT_UPLOAD_STREAM_H_
