// The hostile tenant of tests/soak/hostile_tenant.sh: against ADDRESS, as project "evil", it
// holds idle upload streams (UploadStart, then nothing), watches of a job that never ends, and
// floods metadata (non-tensor values of 60 KiB) and oversized requests, until SIGTERM. It prints
// what the daemon granted and refused, then exits.
//   hostile_client ADDRESS [IDLE_STREAMS=64] [WATCHES=300]
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "parity/v1/parity.grpc.pb.h"

namespace {

using parity::v1::UploadRequest;
using parity::v1::UploadResponse;
using Stream = grpc::ClientReaderWriter<UploadRequest, UploadResponse>;

std::atomic<bool> g_stop{false};

struct Upload {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream;
  UploadResponse first;
};

UploadRequest Start(parity::v1::Side side, const std::string& against = "") {
  UploadRequest r;
  r.mutable_start()->mutable_new_run()->set_project("evil");
  r.mutable_start()->mutable_new_run()->set_side(side);
  if (!against.empty()) r.mutable_start()->set_against_run_id(against);
  return r;
}

// Opens an upload and sends `start`; the stream when it was accepted, else null.
std::unique_ptr<Upload> Open(parity::v1::Ingest::Stub* stub, const UploadRequest& start) {
  auto u = std::make_unique<Upload>();
  u->stream = stub->Upload(&u->ctx);
  if (!u->stream->Write(start) || !u->stream->Read(&u->first) || !u->first.has_accepted()) return nullptr;
  return u;
}

UploadRequest Value(int64_t index, size_t bytes) {
  UploadRequest r;
  parity::v1::TensorHeader* h = r.mutable_header();
  h->mutable_key()->set_name("value." + std::to_string(index));
  h->mutable_key()->set_index(index);
  h->set_data_mode(parity::v1::DATA_MODE_STATS);
  h->set_scalar_type("str");
  h->set_scalar_value(std::string(bytes, 'v'));
  return r;
}

// Non-tensor values of 60 KiB, 1000 to a run, run after run; and oversized queries between.
void Flood(const std::shared_ptr<grpc::Channel>& channel, std::atomic<long>* sent, std::atomic<long>* refused) {
  auto ingest = parity::v1::Ingest::NewStub(channel);
  auto query = parity::v1::Query::NewStub(channel);
  while (!g_stop.load()) {
    std::unique_ptr<Upload> u = Open(ingest.get(), Start(parity::v1::SIDE_GOLDEN));
    if (!u) {
      ++*refused;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    for (int64_t i = 0; i < 1000 && !g_stop.load(); ++i) {
      if (!u->stream->Write(Value(i, 60 << 10))) break;
      ++*sent;
    }
    u->ctx.TryCancel();
    parity::v1::ListRunsRequest lr;
    for (int k = 0; k < 100; ++k) (*lr.mutable_labels())["k" + std::to_string(k)] = std::string(200, 'x');
    grpc::ClientContext c;
    parity::v1::ListRunsResponse out;
    if (!query->ListRuns(&c, lr, &out).ok()) ++*refused;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hostile_client ADDRESS [IDLE_STREAMS=64] [WATCHES=300]\n");
    return 2;
  }
  const std::string address = argv[1];
  const int idle_n = argc > 2 ? std::atoi(argv[2]) : 64;
  const int watch_n = argc > 3 ? std::atoi(argv[3]) : 300;
  signal(SIGTERM, [](int) { g_stop = true; });
  signal(SIGINT, [](int) { g_stop = true; });
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < 4; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channels.push_back(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  auto ingest = parity::v1::Ingest::NewStub(channels[0]);
  // A job that never ends: a golden run with one value, a target that never sends UploadEnd.
  std::unique_ptr<Upload> golden = Open(ingest.get(), Start(parity::v1::SIDE_GOLDEN));
  std::unique_ptr<Upload> target;
  if (golden) {
    golden->stream->Write(Value(0, 16));
    UploadRequest end;
    end.mutable_end();
    golden->stream->Write(end);
    golden->stream->WritesDone();
    UploadResponse r;
    while (golden->stream->Read(&r)) {
    }
    golden->stream->Finish();
    target = Open(ingest.get(), Start(parity::v1::SIDE_TARGET, golden->first.accepted().run_id()));
  }
  const std::string job = target ? target->first.accepted().job_id() : "";
  std::vector<std::unique_ptr<Upload>> idle;
  int idle_refused = 0;
  for (int i = 0; i < idle_n; ++i) {
    std::unique_ptr<Upload> u = Open(ingest.get(), Start(parity::v1::SIDE_GOLDEN));
    if (u) {
      idle.push_back(std::move(u));
    } else {
      ++idle_refused;
    }
  }
  struct Watch {
    grpc::ClientContext ctx;
    std::unique_ptr<parity::v1::Jobs::Stub> stub;
    std::unique_ptr<grpc::ClientReader<parity::v1::JobProgress>> reader;
  };
  std::vector<std::unique_ptr<Watch>> watches;
  int watching = 0;
  for (int i = 0; i < watch_n && !job.empty(); ++i) {
    auto w = std::make_unique<Watch>();
    w->stub = parity::v1::Jobs::NewStub(channels[i % channels.size()]);
    parity::v1::WatchJobRequest req;
    req.set_job_id(job);
    w->reader = w->stub->Watch(&w->ctx, req);
    parity::v1::JobProgress p;
    if (w->reader->Read(&p)) ++watching;
    watches.push_back(std::move(w));
  }
  std::printf("hostile: %zu idle uploads held, %d refused; %d of %d watches held\n", idle.size(), idle_refused,
              watching, watch_n);
  std::fflush(stdout);
  std::atomic<long> sent{0}, refused{0};
  std::thread flood([&] { Flood(channels[1], &sent, &refused); });
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  flood.join();
  for (auto& w : watches) w->ctx.TryCancel();
  for (auto& u : idle) u->ctx.TryCancel();
  if (target) target->ctx.TryCancel();
  std::printf("hostile: %ld values of 60 KiB sent, %ld uploads or queries refused\n", sent.load(), refused.load());
  return 0;
}
