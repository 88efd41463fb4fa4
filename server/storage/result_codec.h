// The packed form of the fields of an op result that are not columns of op_results: one blob
// per result, encoded on the caller's thread and stored as is, so that the store's writer binds
// eight values instead of forty-four. Columns (not in the blob): job, name, api, index, verdict,
// phase, role, culprit.
//
// Format (version 4), little-endian; varint = LEB128 without redundant bytes, zigzag = a signed
// value as a varint of (v << 1) ^ (v >> 63); vstr = varint byte length + bytes:
// u8 version (4); varint metric count (at most 65535), then per metric: its name as u8 code (a
// position in result_codec.cc's kMetricNames, or 0xff followed by the name as a vstr), u8 kind
// (0 number: f64; 1 integer: zigzag; 2 text: vstr); vstr op_type; u8 golden-name form (1: the
// row's name; 0: a vstr follows); vstr policy, peer_verdict, message; u8 golden dtype + 1 and u8
// target dtype + 1 (0: unset); the golden and target shapes as varint rank + zigzag dims; f64
// the item's error figure (OpResultRecord::error).
// Metrics come first so that a sort value is read without decoding the rest. A record has one
// encoding: decoding and encoding again gives the same bytes.
// Older versions still decode (with an unknown error figure): version 3 ends after the shapes;
// version 2 wrote lengths as u32, the count as u16, dims as i64 and
// integers as f64 (kind 1) or, beyond what a double holds, as i64 bits (kind 3); version 1 also
// wrote every metric name and the golden name as a str (u32 length + bytes).
#ifndef PARITY_SERVER_STORAGE_RESULT_CODEC_H_
#define PARITY_SERVER_STORAGE_RESULT_CODEC_H_

#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/storage/records.h"

namespace parity {

std::string EncodeResultBlob(const OpResultRecord& r);

// Fills the blob's fields of *r (the others are left as they are); r->name must already hold the
// row's name (a version 2 or 3 blob may say the golden name is the same). DATA_LOSS, naming what is
// wrong, for a blob that is truncated, has trailing bytes, or holds an unknown kind, code or
// dtype.
absl::Status DecodeResultBlob(absl::string_view blob, OpResultRecord* r);

// The number held by the metric named `name`: nullopt when it is absent, a text, NaN, or the
// blob is malformed. Reads the metrics only.
std::optional<double> BlobSortValue(absl::string_view blob, absl::string_view name);
// Calls visit(name, value) for each metric holding a number other than NaN, in the blob's
// order, until it returns false. Reads the metrics only; stops quietly at a malformed blob.
void ForEachBlobNumber(absl::string_view blob,
                       absl::FunctionRef<bool(absl::string_view name, double value)> visit);

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_RESULT_CODEC_H_
