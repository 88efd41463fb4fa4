// The records the daemon persists: runs, items, jobs and per-operator results. Plain structs;
// the service layer converts them to and from the proto messages.
#ifndef PARITY_SERVER_STORAGE_RECORDS_H_
#define PARITY_SERVER_STORAGE_RECORDS_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/base/dtype.h"
#include "common/formats/dump.h"
#include "common/base/tensor.h"
#include "common/checks/verdict.h"

namespace parity {

enum class Side { kUnspecified = 0, kGolden = 1, kTarget = 2 };
enum class DataMode { kUnspecified = 0, kData = 1, kStats = 2, kCrc = 3 };
enum class JobState { kUnspecified = 0, kQueued = 1, kRunning = 2, kDone = 3, kFailed = 4, kCancelled = 5 };
enum class CulpritStatus { kNone = 0, kCulprit = 1, kPropagated = 2 };

inline bool IsFinal(JobState s) {
  return s == JobState::kDone || s == JobState::kFailed || s == JobState::kCancelled;
}

struct RunRecord {
  std::string run_id;
  std::string project;
  Side side = Side::kUnspecified;
  std::string name, model, framework, device;
  std::string dump_format;  // RunMetadata.dump_format ("" for runs stored before it was kept)
  std::optional<DumpMode> dump_mode;  // RunMetadata.dump_mode (unset: not said)
  int32_t rank = 0;
  int64_t step = 0;
  std::map<std::string, std::string> labels;
  int64_t created_at_ms = 0;
  bool complete = false;
  int64_t item_count = 0;
  std::string structure_hash, fingerprint;
  std::map<std::string, int64_t> op_type_counts;
};

struct ItemRecord {
  std::string run_id;
  std::string name, api, op_type;
  Phase phase = Phase::kUnknown;
  Role role = Role::kUnknown;
  int64_t index = 0;  // dump order
  std::optional<DType> dtype;  // unset for non-tensor arguments
  Shape shape;
  DataMode data_mode = DataMode::kData;
  uint64_t byte_length = 0;
  std::optional<double> max, min, mean, norm;
  std::optional<uint32_t> crc32;
  std::optional<bool> requires_grad;
  std::optional<std::string> scalar_value;  // non-tensor arguments: Python str(value)
  std::string scalar_type;
  std::string dtype_text;  // as the dump writes it; "" when not given
  std::string data_name;   // the dump's data file name; "" when none
  std::string shape_text;  // a non-tensor's shape as msprobe writes it; "" when not given
  // Another item of this run this item is compared with when the golden run can have none
  // (DumpItem::in_run_golden); "" for none.
  std::string in_run_golden;
  std::string blob;  // content key of the data (Spool::KeyOf; "" when no data)
  // The data itself when it is kept in the item's row rather than in the spool (small tensors,
  // CoreOptions::inline_max_bytes); `blob` is still its key. Null: in the spool, or no data.
  std::shared_ptr<const std::string> inline_data;
  // Non-empty: the agent could not read the data (why); no blob, compared as an ERROR.
  std::string read_error;
  // Upload only, not stored: the spool key a by-reference header names ("" otherwise).
  std::string offered_blob;
};

// An API token: only a salted SHA-256 of its secret is kept.
struct TokenRecord {
  std::string token_id;
  std::string project;  // "*": every project (admin tokens)
  std::string role;     // "viewer", "agent" or "admin"
  std::string salt, hash;  // raw bytes
  std::string note;
  int64_t created_at_ms = 0;
  int64_t revoked_at_ms = 0;  // 0: valid
};

struct JobRecord {
  std::string job_id;
  std::string project;
  std::string golden_run_id, target_run_id;
  int policy = 0;      // proto Policy value
  int match_mode = 0;  // proto MatchMode value
  std::string config_json;
  JobState state = JobState::kQueued;
  int64_t created_at_ms = 0, finished_at_ms = 0;
  std::string error;
  int64_t pairs_done = 0, pairs_total = 0;
  std::array<int64_t, 6> counts{};  // indexed by Verdict
  std::string first_culprit;
};

// OpResultRecord::index of a result whose target side is missing: this base plus the golden
// item's index, so that golden-only rows sort after every target row.
inline constexpr int64_t kGoldenOnlyIndexBase = 1000000000000;

struct OpResultRecord {
  std::string job_id;
  std::string name;  // target item name (golden name when the target side is missing)
  std::string api, op_type;
  Phase phase = Phase::kUnknown;
  Role role = Role::kUnknown;
  int64_t index = 0;  // target dump order; golden-only rows come after (1e12 + golden index)
  std::string golden_name;
  CheckResult result;
  CulpritStatus culprit = CulpritStatus::kNone;
  std::optional<DType> golden_dtype, target_dtype;
  Shape golden_shape, target_shape;
  // Parity's error figure of the pair (ItemError, common/compare/culprit.h), the culprit
  // analysis' input; NaN when unknown.
  double error = std::numeric_limits<double>::quiet_NaN();
};

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_RECORDS_H_
