// gRPC helpers for tests that talk to a real parityd.
#ifndef PARITY_TESTS_GRPC_TEST_UTIL_H_
#define PARITY_TESTS_GRPC_TEST_UTIL_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "parity/v1/parity.grpc.pb.h"

namespace parity::testing {

// A channel with its own connection (not one shared through gRPC's global subchannel pool), so
// that it opens a connection of its own and closes it when the last reference is dropped:
// parityd's graceful shutdown waits out its whole grace for a connection that stays open.
inline std::shared_ptr<grpc::Channel> PrivateChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// An UploadStart of a new run of `project` on `side`, compared with `against` if given.
inline v1::UploadRequest StartOf(const std::string& project, v1::Side side, const std::string& against = "") {
  v1::UploadRequest r;
  r.mutable_start()->mutable_new_run()->set_project(project);
  r.mutable_start()->mutable_new_run()->set_side(side);
  if (!against.empty()) r.mutable_start()->set_against_run_id(against);
  return r;
}

// Item `i` of an upload: a non-tensor value named value.<i> (statistics mode: no data follows).
inline v1::UploadRequest ValueItem(int i, const std::string& value) {
  v1::UploadRequest r;
  v1::TensorHeader* h = r.mutable_header();
  h->mutable_key()->set_name(absl::StrCat("value.", i));
  h->mutable_key()->set_index(i);
  h->set_data_mode(v1::DATA_MODE_STATS);
  h->set_scalar_type("str");
  h->set_scalar_value(value);
  return r;
}

// An upload stream opened by hand; `token` (if any) as the bearer.
struct RawStream {
  RawStream(v1::Ingest::Stub* stub, const std::string& token) {
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    stream = stub->Upload(&ctx);
  }
  // Sends `start` and reads the first response: true when it is UploadAccepted; otherwise the
  // stream's status is in `status`.
  bool Start(const v1::UploadRequest& start) {
    stream->Write(start);
    v1::UploadResponse r;
    if (stream->Read(&r) && r.has_accepted()) {
      accepted = r.accepted();
      return true;
    }
    stream->WritesDone();
    while (stream->Read(&r)) {
    }
    status = stream->Finish();
    return false;
  }
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UploadRequest, v1::UploadResponse>> stream;
  v1::UploadAccepted accepted;
  grpc::Status status;
};

}  // namespace parity::testing

#endif  // PARITY_TESTS_GRPC_TEST_UTIL_H_
