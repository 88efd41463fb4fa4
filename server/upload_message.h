// Ingest.Upload's request as parityd reads it: the UploadRequest protobuf would parse, except that
// a chunk's data stays in the slices gRPC received it in (referenced, not copied into a string),
// so that its bytes are copied once, into the blob's buffer, not twice.
#ifndef PARITY_SERVER_UPLOAD_MESSAGE_H_
#define PARITY_SERVER_UPLOAD_MESSAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "parity/v1/parity.pb.h"

namespace parity {

class IncomingUpload {
 public:
  // The message; for a chunk, chunk().data() is empty and data() holds its bytes.
  const v1::UploadRequest& request() const { return request_; }
  // The chunk's data in pieces, in order (none for other messages and for an empty chunk). The
  // views stay valid while this object lives, moves included.
  absl::Span<const absl::string_view> data() const { return data_; }
  uint64_t data_size() const { return data_size_; }
  // The message's size on the wire.
  uint64_t wire_bytes() const { return wire_bytes_; }

  // Reads `buffer` (consumed). A message that is one chunk field, whose fields are each of the
  // wire type protobuf expects and hold `data` at most once, is read by hand: the fields other
  // than `data` are copied out and parsed by protobuf, `data`'s slices referenced. Any other
  // message (and any a hand read finds malformed) is parsed whole by protobuf, so the result and
  // the error are always protobuf's.
  grpc::Status Parse(grpc::ByteBuffer* buffer);
  // Copies the data out of the slices into memory of its own and releases them (for callers
  // that must not hold gRPC's memory while the message waits).
  void CopyData();

 private:
  void Reset();
  bool ParseChunk(const std::vector<grpc::Slice>& slices);

  v1::UploadRequest request_;
  // What data_ points into: the message's slices (their gRPC references, released by the
  // buffer's destructor, which may run on any thread: a grpc::Slice released outside gRPC's own
  // threads crashed in gRPC's memory quota), or the bytes protobuf parsed.
  std::unique_ptr<grpc::ByteBuffer> buffer_;
  std::unique_ptr<std::string> parsed_data_;
  std::vector<absl::string_view> data_;
  uint64_t data_size_ = 0;
  uint64_t wire_bytes_ = 0;
};

}  // namespace parity

namespace grpc {
template <>
class SerializationTraits<parity::IncomingUpload> {
 public:
  static Status Serialize(const parity::IncomingUpload&, ByteBuffer*, bool*) {
    return Status(StatusCode::UNIMPLEMENTED, "IncomingUpload is only ever received");
  }
  static Status Deserialize(ByteBuffer* buffer, parity::IncomingUpload* m) { return m->Parse(buffer); }
};
}  // namespace grpc

#endif  // PARITY_SERVER_UPLOAD_MESSAGE_H_
