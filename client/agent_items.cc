#include "client/agent_items.h"


#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <cstdlib>
#include <thread>

#include "proto/enums.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/file_pieces.h"
#include "client/proto_util.h"
#include "client/report_format.h"
#include "client/terminal.h"
#include "client/upload_stream.h"
#include "common/checks/compare_config.h"
#include "common/base/crc32.h"
#include "common/formats/dump.h"
#include "common/base/file_util.h"
#include "common/checks/msprobe_policy.h"
#include "common/base/sha256.h"
#include "common/checks/stats.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "parity/v1/parity.grpc.pb.h"

namespace parity {
namespace agent {

std::string Utf8Prefix(absl::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

void Precompute(const DumpItem& it, v1::DataMode mode, Loaded* l) {
  if (!l->tensor) return;  // a range's are computed as its pieces are read
  if (mode != v1::DATA_MODE_STATS && !l->crc32) {
    l->crc32 = Crc32(0, l->tensor->data(), l->tensor->bytes().size());
  }
  if (!it.max.is_number() && !it.mean.is_number()) l->stats = ComputeStats(*l->tensor);
}

Loaded LoadForSend(const DumpItem& it) {
  Loaded l;
  if (!it.is_tensor || (it.data_path.empty() && it.raw_data_path.empty())) return l;
  absl::StatusOr<Tensor> t = LoadItemTensor(it);
  if (t.ok()) {
    l.tensor = std::move(*t);
  } else {
    l.status = t.status();
  }
  return l;
}

Loaded LoadOrStreamForSend(const DumpItem& it, uint64_t stream_min_bytes, size_t max_piece_bytes) {
  const size_t piece_bytes = max_piece_bytes / kStatsPieceBytes * kStatsPieceBytes;
  if (stream_min_bytes > 0 && piece_bytes > 0) {
    if (std::optional<TensorFileRange> r = FindTensorFileRange(it, stream_min_bytes)) {
      Loaded l;
      const bool stats = !it.max.is_number() && !it.mean.is_number();
      l.pieces = std::make_shared<FilePieces>(*r, piece_bytes, kStreamQueuedPieces, stats);
      l.range = std::move(r);
      return l;
    }
  }
  return LoadForSend(it);
}

Loaded LoadSummaryForSend(const DumpItem& it, v1::DataMode mode, uint64_t stream_min_bytes) {
  if (stream_min_bytes > 0) {
    if (std::optional<TensorFileRange> r = FindTensorFileRange(it, stream_min_bytes)) {
      Loaded l;
      const bool need_stats = !it.max.is_number() && !it.mean.is_number();
      uint32_t crc = 0;
      TensorStats stats;
      absl::Status s;
      if (mode == v1::DATA_MODE_CRC || need_stats) {  // else the header needs nothing of the data
        s = ScanTensorFileRange(*r, kStatsPieceBytes * 128, mode == v1::DATA_MODE_CRC ? &crc : nullptr, nullptr,
                                need_stats ? &stats : nullptr);
      }
      if (!s.ok()) {
        l.status = std::move(s);  // sent as a read error
        return l;
      }
      if (mode == v1::DATA_MODE_CRC) l.crc32 = crc;
      if (need_stats) l.stats = stats;
      l.range = std::move(r);
      return l;
    }
  }
  return LoadForSend(it);
}

void SetStatistics(const TensorStats& s, v1::Statistics* out) {
  if (s.max) out->set_max(*s.max);
  if (s.min) out->set_min(*s.min);
  if (s.mean) out->set_mean(*s.mean);
  if (s.norm) out->set_norm(*s.norm);
}

std::optional<double> StatOf(const Json& v) {
  if (v.is_number()) return v.as_double();
  return std::nullopt;
}

v1::TensorHeader MakeHeader(const DumpItem& it, int64_t index, const Tensor* tensor, v1::DataMode mode,
                            std::optional<uint32_t> crc32,
                            const std::optional<TensorStats>& stats,
                            const TensorFileRange* range) {
  v1::TensorHeader h;
  v1::ItemKey* k = h.mutable_key();
  k->set_name(it.name);
  k->set_api(it.api);
  k->set_op_type(it.op_type);
  k->set_phase(ToProto(it.phase));
  k->set_role(ToProto(it.role));
  h.set_dtype_text(Utf8Prefix(it.dtype_text, 1024));
  h.set_data_name(Utf8Prefix(it.data_name, 1024));
  h.set_shape_text(Utf8Prefix(it.shape_text, 1024));
  if (it.in_run_golden.size() <= 1024) h.set_in_run_golden(it.in_run_golden);
  k->set_index(index);
  if (it.requires_grad) h.set_requires_grad(*it.requires_grad);
  if (!it.is_tensor) {
    h.set_scalar_value(PyStr(it.value));
    h.set_scalar_type(it.type);
    h.set_data_mode(v1::DATA_MODE_STATS);
    return h;
  }
  auto set_stat = [](const Json& v, auto setter) {
    if (std::optional<double> d = StatOf(v)) setter(*d);
  };
  set_stat(it.max, [&](double d) { h.mutable_stats()->set_max(d); });
  set_stat(it.min, [&](double d) { h.mutable_stats()->set_min(d); });
  set_stat(it.mean, [&](double d) { h.mutable_stats()->set_mean(d); });
  set_stat(it.norm, [&](double d) { h.mutable_stats()->set_norm(d); });
  if (tensor == nullptr && range != nullptr) {
    if (!h.stats().has_max() && !h.stats().has_mean() && stats) SetStatistics(*stats, h.mutable_stats());
    h.set_dtype(static_cast<v1::DType>(static_cast<int>(range->dtype) + 1));
    for (int64_t d : range->shape) h.add_shape(d);
    h.set_data_mode(mode);
    if (mode == v1::DATA_MODE_DATA) h.set_byte_length(range->length);
    if (crc32 && mode != v1::DATA_MODE_STATS) h.set_crc32(*crc32);
    return h;
  }
  if (tensor != nullptr) {
    if (!h.stats().has_max() && !h.stats().has_mean()) {
      // The dump carries no statistics (plain .npy/.pt/.safetensors): compute them.
      SetStatistics(stats ? *stats : ComputeStats(*tensor), h.mutable_stats());
    }
    h.set_dtype(static_cast<v1::DType>(static_cast<int>(tensor->dtype()) + 1));
    for (int64_t d : tensor->shape()) h.add_shape(d);
    h.set_data_mode(mode);
    if (mode == v1::DATA_MODE_DATA) h.set_byte_length(tensor->bytes().size());
    if (mode != v1::DATA_MODE_STATS) {
      h.set_crc32(crc32 ? *crc32 : Crc32(0, tensor->data(), tensor->bytes().size()));
    }
    return h;
  }
  if (it.dtype) h.set_dtype(static_cast<v1::DType>(static_cast<int>(*it.dtype) + 1));
  for (int64_t d : it.shape) h.add_shape(d);
  uint32_t crc;
  if (!it.md5.empty() && absl::SimpleHexAtoi(it.md5, &crc)) {
    h.set_crc32(crc);
    h.set_data_mode(v1::DATA_MODE_CRC);
  } else {
    h.set_data_mode(v1::DATA_MODE_STATS);
  }
  return h;
}

}  // namespace agent
}  // namespace parity
