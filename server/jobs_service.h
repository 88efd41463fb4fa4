// Jobs and Query: unary RPCs over the core and the store (synchronous API: none of them waits
// for anything but the store), and Jobs.Watch on the callback API (see watch_service.h).
#ifndef PARITY_SERVER_JOBS_SERVICE_H_
#define PARITY_SERVER_JOBS_SERVICE_H_

#include <chrono>
#include <functional>
#include <vector>

#include "parity/v1/parity.grpc.pb.h"
#include "server/core/auth.h"
#include "server/core/core.h"
#include "server/watch_service.h"

namespace parity {

// Page tokens are opaque to clients; here, the decimal offset of the next row.
absl::StatusOr<int64_t> ParsePageToken(const std::string& token);
int64_t PageSize(int32_t requested);  // 0 -> 50, capped at 1000

// Sets the job's golden_run_name, target_run_name and target_dump_format from the store (left
// empty when a run cannot be read).
void AddRunNames(Store& store, v1::Job* j);

class JobsService final : public v1::Jobs::WithCallbackMethod_Watch<v1::Jobs::Service> {
 public:
  // `auth` null: authentication off.
  JobsService(Core* core, const TokenAuth* auth, WatchOptions watch = {})
      : core_(core), auth_(auth), watches_(core, auth, watch) {}
  grpc::Status Submit(grpc::ServerContext*, const v1::SubmitJobRequest*, v1::Job*) override;
  grpc::Status Get(grpc::ServerContext*, const v1::GetJobRequest*, v1::Job*) override;
  grpc::Status List(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse*) override;
  grpc::Status Cancel(grpc::ServerContext*, const v1::CancelJobRequest*, v1::Job*) override;
  grpc::ServerWriteReactor<v1::JobProgress>* Watch(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override {
    return watches_.Start(context, request);
  }
  Watches& watches() { return watches_; }

 private:
  Core* const core_;
  const TokenAuth* const auth_;
  Watches watches_;
};

class QueryService final : public v1::Query::Service {
 public:
  // GetServerStatus lists the gauges `more_gauges` appends (may be null; the upload service's),
  // then the core's, then resident_bytes.
  QueryService(Core* core, const TokenAuth* auth,
               std::function<void(std::vector<Gauge>*)> more_gauges = nullptr);
  grpc::Status GetServerStatus(grpc::ServerContext*, const v1::GetServerStatusRequest*,
                               v1::ServerStatus*) override;
  grpc::Status ListRuns(grpc::ServerContext*, const v1::ListRunsRequest*, v1::ListRunsResponse*) override;
  grpc::Status GetJobSummary(grpc::ServerContext*, const v1::GetJobSummaryRequest*, v1::JobSummary*) override;
  grpc::Status ListOpResults(grpc::ServerContext*, const v1::ListOpResultsRequest*,
                             v1::ListOpResultsResponse*) override;
  grpc::Status GetOpResult(grpc::ServerContext*, const v1::GetOpResultRequest*, v1::OpResult*) override;
  grpc::Status DiffJobs(grpc::ServerContext*, const v1::DiffJobsRequest*, v1::DiffJobsResponse*) override;
  grpc::Status GetJobSeries(grpc::ServerContext*, const v1::GetJobSeriesRequest*, v1::JobSeries*) override;

 private:
  Core* const core_;
  const TokenAuth* const auth_;
  const std::function<void(std::vector<Gauge>*)> more_gauges_;
  const int64_t started_at_ms_;                          // wall clock
  const std::chrono::steady_clock::time_point started_;  // for the uptime
};

}  // namespace parity

#endif  // PARITY_SERVER_JOBS_SERVICE_H_
