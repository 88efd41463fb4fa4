// The packed form of the fields of an op result that are not columns of op_results: one blob
// per result, encoded on the caller's thread and stored as is, so that the store's writer binds
// eight values instead of forty-four. Columns (not in the blob): job, name, api, index, verdict,
// phase, role, culprit.
//
// Format, little-endian: u8 version (2); u16 metric count, then per metric: its name as u8 code
// (a position in result_codec.cc's kMetricNames, or 0xff followed by the name as a str), u8 kind
// (0 number, 1 integer, 2 text, 3 64-bit integer), f64 (kinds 0 and 1), i64 (kind 3) or str
// (kind 2); str op_type; u8 golden-name form (1: the row's name; 0: a str follows); str policy,
// peer_verdict, message; u8 golden dtype + 1 and u8 target dtype + 1 (0: unset); the golden and
// target shapes as u32 rank + i64 dims. str = u32 byte length + bytes. Metrics come first so
// that a sort value is read without decoding the rest. Version 1 (still read) wrote every metric
// name and the golden name as a str.
#ifndef PARITY_SERVER_STORAGE_RESULT_CODEC_H_
#define PARITY_SERVER_STORAGE_RESULT_CODEC_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/storage/records.h"

namespace parity {

std::string EncodeResultBlob(const OpResultRecord& r);

// Fills the blob's fields of *r (the others are left as they are); r->name must already hold the
// row's name (a version 2 blob may say the golden name is the same). DATA_LOSS, naming what is
// wrong, for a blob that is truncated, has trailing bytes, or holds an unknown kind, code or
// dtype.
absl::Status DecodeResultBlob(absl::string_view blob, OpResultRecord* r);

// The number held by the metric named `name`: nullopt when it is absent, a text, NaN, or the
// blob is malformed. Reads the metrics only.
std::optional<double> BlobSortValue(absl::string_view blob, absl::string_view name);

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_RESULT_CODEC_H_
