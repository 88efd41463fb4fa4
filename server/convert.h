// Proto <-> record conversion, and the single absl::Status -> grpc::Status conversion.
#ifndef PARITY_SERVER_CONVERT_H_
#define PARITY_SERVER_CONVERT_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "parity/v1/parity.pb.h"
#include "proto/enums.h"
#include "server/core/upload_session.h"
#include "server/storage/records.h"

namespace parity {

// The one conversion at the RPC edge. INTERNAL and UNKNOWN keep their code but not their text
// (a database message, a path): the caller gets an incident id, the log the detail.
grpc::Status ToGrpcStatus(const absl::Status& s);

void ToProto(const RunRecord& r, v1::Run* out);
RunRecord FromProto(const v1::RunMetadata& m);
void ToProto(const JobRecord& j, v1::Job* out);
void ToProto(const OpResultRecord& r, v1::OpResult* out);
// Adds the golden and target items' statistics and requires_grad (either may be null).
// A job's stored culprit analysis (CulpritAnalysisJson's document) into the summary's ranked
// culprits, noise floor and threshold; DATA_LOSS when the document is malformed.
absl::Status AnalysisToProto(absl::string_view doc, v1::JobSummary* out);

void AddItemInfo(const ItemRecord* golden, const ItemRecord* target, v1::OpResult* out);
// The item fields of a header (run_id and blob are left empty).
ItemRecord FromProto(const v1::TensorHeader& h);
UploadStartRequest FromProto(const v1::UploadStart& s);
void ToProto(const UploadEvent& e, v1::UploadResponse* out);

// Hands one Ingest.Upload request to `session` (headers with an unknown or unspecified dtype are
// rejected as items here). OK, or the status that ends the stream.
absl::Status ApplyUploadRequest(UploadSession& session, const v1::UploadRequest& msg);
// The same for a chunk whose data is `chunk_data` in pieces (msg.chunk().data() is ignored).
absl::Status ApplyUploadRequest(UploadSession& session, const v1::UploadRequest& msg,
                                absl::Span<const absl::string_view> chunk_data);

}  // namespace parity

#endif  // PARITY_SERVER_CONVERT_H_
