#include "client/file_pieces.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/crc32.h"
#include "common/formats/npy.h"
#include "common/formats/pt_reader.h"
#include "common/formats/safetensors.h"
#include "common/base/sha256.h"
#include "common/base/tensor.h"

namespace parity {

namespace {

// `length` bytes at `offset` of `file`, when they lie inside it.
std::optional<TensorFileRange> RangeIn(RandomAccessFile file, uint64_t offset, uint64_t length, DType dtype,
                                       Shape shape) {
  if (offset > file.size() || length > file.size() - offset) return std::nullopt;
  TensorFileRange r;
  r.file = std::make_shared<const RandomAccessFile>(std::move(file));
  r.offset = offset;
  r.length = length;
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

std::optional<TensorFileRange> RangeIn(const std::string& path, uint64_t offset, uint64_t length, DType dtype,
                                       Shape shape) {
  absl::StatusOr<RandomAccessFile> file = RandomAccessFile::Open(path);
  if (!file.ok()) return std::nullopt;
  return RangeIn(std::move(*file), offset, length, dtype, std::move(shape));
}

// A .pt file's tensor (LoadItemTensor's: the file's single tensor, checked against the dump's
// shape, or the one under pt_key).
std::optional<TensorFileRange> FindPtTensorRange(const DumpItem& item, uint64_t min_bytes) {
  absl::StatusOr<std::optional<PtRange>> pt = FindPtRange(item.data_path, item.pt_key);
  if (!pt.ok() || !pt->has_value()) return std::nullopt;
  const PtRange& p = **pt;
  if (p.length < min_bytes || (item.pt_key.empty() && item.has_shape && p.shape != item.shape)) return std::nullopt;
  return RangeIn(item.data_path, p.offset, p.length, p.dtype, p.shape);
}

// A .safetensors entry (LoadItemTensor's: the one named safetensors_key).
std::optional<TensorFileRange> FindSafetensorsRange(const DumpItem& item, uint64_t min_bytes) {
  absl::StatusOr<SafetensorsFile> st = SafetensorsFile::Open(item.data_path);
  if (!st.ok()) return std::nullopt;
  for (const SafetensorsFile::Entry& e : st->entries()) {
    if (e.name != item.safetensors_key) continue;
    if (e.end - e.begin < min_bytes || e.end == e.begin) return std::nullopt;
    return RangeIn(item.data_path, st->data_offset() + e.begin, e.end - e.begin, e.dtype, e.shape);
  }
  return std::nullopt;
}

// A whole .npy file in native layout.
std::optional<TensorFileRange> FindNpyRange(const DumpItem& item, uint64_t min_bytes) {
  absl::StatusOr<RandomAccessFile> file = RandomAccessFile::Open(item.data_path);
  if (!file.ok()) return std::nullopt;
  absl::StatusOr<NpyLayout> layout = ReadNpyLayout(*file);
  if (!layout.ok() || !layout->native || (item.has_shape && layout->shape != item.shape)) return std::nullopt;
  absl::StatusOr<int64_t> numel = CheckedNumel(layout->shape);
  if (!numel.ok()) return std::nullopt;
  const uint64_t length = static_cast<uint64_t>(*numel) * DTypeSize(layout->dtype);
  if (length < min_bytes || layout->data_offset + length != file->size()) return std::nullopt;
  return RangeIn(std::move(*file), layout->data_offset, length, layout->dtype, layout->shape);
}

}  // namespace

std::optional<TensorFileRange> FindTensorFileRange(const DumpItem& item, uint64_t min_bytes) {
  if (!item.is_tensor || !item.read_error.ok() || item.data_path.empty() || !item.raw_data_path.empty() ||
      item.ge_index >= 0 || item.npy_file.owner || item.npy_deferred) {
    return std::nullopt;
  }
  // Small tensors are refused before any file is parsed: by the listing's dtype and shape when
  // it knows them, else by the file's size.
  if (item.dtype && item.has_shape) {
    absl::StatusOr<int64_t> numel = CheckedNumel(item.shape);
    if (!numel.ok() || static_cast<uint64_t>(*numel) * DTypeSize(*item.dtype) < min_bytes) return std::nullopt;
  }
  absl::StatusOr<uint64_t> size = FileSize(item.data_path);
  if (!size.ok() || *size < min_bytes) return std::nullopt;
  if (!item.safetensors_key.empty()) return FindSafetensorsRange(item, min_bytes);
  if (!item.pt_key.empty() || absl::EndsWith(item.data_path, ".pt") || absl::EndsWith(item.data_path, ".pth")) {
    return FindPtTensorRange(item, min_bytes);
  }
  return FindNpyRange(item, min_bytes);
}

absl::Status ScanTensorFileRange(const TensorFileRange& range, size_t piece_bytes, uint32_t* crc32,
                                 std::string* sha256, TensorStats* stats) {
  std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(std::max<size_t>(piece_bytes, 1), range.length)));
  uint32_t crc = 0;
  std::optional<Sha256> sha;
  if (sha256 != nullptr) sha.emplace();
  std::optional<StatsAccumulator> acc;
  if (stats != nullptr) acc.emplace(range.dtype);
  const size_t elem = DTypeSize(range.dtype);
  for (uint64_t off = 0; off < range.length; off += buf.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), range.length - off));
    if (absl::Status s = range.file->ReadExact(range.offset + off, n, buf.data()); !s.ok()) return s;
    if (crc32 != nullptr) crc = Crc32(crc, buf.data(), n);
    if (sha) sha->Update(buf.data(), n);
    if (acc) acc->Add(buf.data(), static_cast<int64_t>(n / elem));
  }
  if (crc32 != nullptr) *crc32 = crc;
  if (sha) *sha256 = sha->HexDigest();
  if (acc) *stats = acc->Finish();
  return absl::OkStatus();
}

FilePieces::FilePieces(TensorFileRange range, size_t piece_bytes, size_t max_queued, bool stats)
    : range_(std::move(range)), piece_bytes_(std::max<size_t>(piece_bytes, 1)),
      max_queued_(std::max<size_t>(max_queued, 1)), stats_(stats) {}

void FilePieces::Fill() {
  uint32_t crc = 0;
  std::optional<StatsAccumulator> stats;
  if (stats_) stats.emplace(range_.dtype);
  const size_t elem = DTypeSize(range_.dtype);
  for (uint64_t off = 0; off < range_.length; off += piece_bytes_) {
    {
      absl::MutexLock l(&mu_);
      mu_.Await(room_);
      if (cancelled_) {
        error_ = absl::CancelledError(absl::StrCat(range_.file->path(), ": reading cancelled"));
        break;
      }
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece_bytes_, range_.length - off));
    // A pooled buffer: its pages were faulted in by an earlier piece and are reused, where a
    // fresh allocation of a piece's size was fresh memory the kernel zeroed each time.
    std::shared_ptr<char> buf = TakePooledBuffer(n);
    if (buf == nullptr) buf.reset(new char[n], std::default_delete<char[]>());
    absl::Status s = range_.file->ReadExact(range_.offset + off, n, buf.get());
    if (!s.ok()) {
      absl::MutexLock l(&mu_);
      error_ = std::move(s);
      break;
    }
    // Outside mu_: the sender takes earlier pieces meanwhile.
    if (stats) stats->Add(buf.get(), static_cast<int64_t>(n / elem));
    crc = Crc32(crc, buf.get(), n);
    absl::MutexLock l(&mu_);
    Piece p;
    p.offset = off;
    p.bytes = absl::string_view(buf.get(), n);
    p.owner = std::move(buf);
    if (off + n == range_.length) {
      p.crc32 = crc;
      if (stats) p.stats = stats->Finish();
    }
    queue_.push_back(std::move(p));
  }
  absl::MutexLock l(&mu_);
  filled_ = true;
}

absl::Status FilePieces::Next(Piece* piece, bool* got) {
  absl::MutexLock l(&mu_);
  mu_.Await(ready_);
  *got = false;
  if (!queue_.empty()) {
    *piece = std::move(queue_.front());
    queue_.pop_front();
    *got = true;
    return absl::OkStatus();
  }
  return error_;
}

void FilePieces::Cancel() {
  absl::MutexLock l(&mu_);
  cancelled_ = true;
}

}  // namespace parity
