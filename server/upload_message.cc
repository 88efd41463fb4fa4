#include "server/upload_message.h"

#include <memory>
#include <string>
#include <utility>

#include "grpcpp/impl/codegen/proto_utils.h"

namespace parity {
namespace {

// Field tags (field number << 3 | wire type) of the hand-read path: UploadRequest.chunk = 3 and
// TensorChunk.data = 2, both length-delimited.
constexpr uint64_t kChunkTag = (3 << 3) | 2;
constexpr uint64_t kDataField = 2;
enum WireType : uint64_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads a message's bytes in order across its slices. Every read fails (false) past the end.
class SliceCursor {
 public:
  SliceCursor(const std::vector<grpc::Slice>& slices, uint64_t total) : slices_(slices), left_(total) {
    Settle();
  }
  uint64_t left() const { return left_; }

  // A base-128 varint of at most 10 bytes; its bytes are appended to `raw` when not null.
  bool Varint(uint64_t* v, std::string* raw) {
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (left_ == 0) return false;
      const uint8_t b = slices_[i_].begin()[off_];
      Advance(1);
      if (raw != nullptr) raw->push_back(static_cast<char>(b));
      if (shift < 64) *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // The next n bytes, as views into the slices (`pieces`) or appended to `raw`. Views are refused
  // (false) where a slice holds its bytes in itself (gRPC inlines a few bytes in the slice):
  // they would point into this copy of it.
  bool Take(uint64_t n, std::vector<absl::string_view>* pieces, std::string* raw) {
    if (n > left_) return false;
    while (n > 0) {
      const grpc::Slice& s = slices_[i_];
      // (Slice::c_slice() would tell, but it takes a reference of its own.)
      const auto* inside = reinterpret_cast<const uint8_t*>(&s);
      if (pieces != nullptr && s.begin() >= inside && s.begin() < inside + sizeof(s)) return false;
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, s.size() - off_));
      const char* p = reinterpret_cast<const char*>(s.begin()) + off_;
      if (pieces != nullptr) pieces->emplace_back(p, k);
      if (raw != nullptr) raw->append(p, k);
      Advance(k);
      n -= k;
    }
    return true;
  }

 private:
  void Advance(size_t k) {
    off_ += k;
    left_ -= k;
    Settle();
  }
  // Steps over exhausted (and empty) slices.
  void Settle() {
    while (i_ < slices_.size() && off_ == slices_[i_].size()) {
      ++i_;
      off_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t i_ = 0;
  size_t off_ = 0;
  uint64_t left_;
};

}  // namespace

void IncomingUpload::Reset() {
  request_.Clear();
  buffer_.reset();
  parsed_data_.reset();
  data_.clear();
  data_size_ = 0;
}

grpc::Status IncomingUpload::Parse(grpc::ByteBuffer* buffer) {
  Reset();
  wire_bytes_ = buffer->Length();
  {
    // References of their own to the slices, released here (on the thread gRPC calls this on);
    // buffer_ holds the message's.
    std::vector<grpc::Slice> slices;
    if (buffer->Dump(&slices).ok() && ParseChunk(slices)) {
      buffer_ = std::make_unique<grpc::ByteBuffer>();
      buffer_->Swap(buffer);
      return grpc::Status::OK;
    }
  }
  Reset();  // what the hand read left
  // Protobuf's own parse, as the generated service uses (it clears the buffer).
  grpc::Status s = grpc::SerializationTraits<v1::UploadRequest>::Deserialize(buffer, &request_);
  if (s.ok() && request_.has_chunk() && !request_.chunk().data().empty()) {
    // The bytes move to a string on the heap, which no move of this object relocates.
    parsed_data_ = std::make_unique<std::string>(std::move(*request_.mutable_chunk()->mutable_data()));
    request_.mutable_chunk()->clear_data();
    data_.emplace_back(*parsed_data_);
    data_size_ = parsed_data_->size();
  }
  return s;
}

void IncomingUpload::CopyData() {
  if (buffer_ == nullptr) return;
  parsed_data_ = std::make_unique<std::string>();
  parsed_data_->reserve(data_size_);
  for (absl::string_view p : data_) parsed_data_->append(p.data(), p.size());
  data_.clear();
  if (!parsed_data_->empty()) data_.emplace_back(*parsed_data_);
  buffer_.reset();
}

bool IncomingUpload::ParseChunk(const std::vector<grpc::Slice>& slices) {
  SliceCursor c(slices, wire_bytes_);
  uint64_t tag = 0, length = 0;
  // The message must be one chunk field, all of it.
  if (!c.Varint(&tag, nullptr) || tag != kChunkTag || !c.Varint(&length, nullptr) || length != c.left()) {
    return false;
  }
  std::string rest;  // the chunk's fields other than data, as they came
  bool seen_data = false;
  while (c.left() > 0) {
    const size_t field_start = rest.size();
    if (!c.Varint(&tag, &rest) || tag > UINT32_MAX || (tag >> 3) == 0) return false;
    const uint64_t wire = tag & 7;
    if ((tag >> 3) == kDataField && wire == kLengthDelimited) {
      rest.resize(field_start);
      // A repeated data field is protobuf's to resolve (the last wins).
      if (seen_data || !c.Varint(&length, nullptr) || !c.Take(length, &data_, nullptr)) return false;
      seen_data = true;
      data_size_ = length;
      continue;
    }
    uint64_t ignored = 0;
    switch (wire) {
      case kVarint:
        if (!c.Varint(&ignored, &rest)) return false;
        break;
      case kFixed64:
        if (!c.Take(8, nullptr, &rest)) return false;
        break;
      case kFixed32:
        if (!c.Take(4, nullptr, &rest)) return false;
        break;
      case kLengthDelimited:
        if (!c.Varint(&length, &rest) || !c.Take(length, nullptr, &rest)) return false;
        break;
      default:  // groups and invalid wire types
        return false;
    }
  }
  return request_.mutable_chunk()->ParseFromString(rest);
}

}  // namespace parity
