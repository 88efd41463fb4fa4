// The raw gRPC client-streaming rate on loopback: a sink server and a client in one process
// (over TCP on 127.0.0.1), SIZE_MB of 1 MiB messages, no processing on either side. Prints
// "ceiling_bytes_per_second N" (for tests/bench/e2e_rate.sh) and "cpu_seconds N" (the
// process's user + system time, both sides together).
//   grpc_ceiling [SIZE_MB=2048] [WINDOW_BYTES=0]
// WINDOW_BYTES > 0 fixes the sink's HTTP/2 receive window with BDP probing off, as parityd's
// --stream-window-bytes does; 0 leaves gRPC's automatic window.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <sys/resource.h>

#include "bench/sink.grpc.pb.h"

namespace {

class SinkImpl final : public parity::bench::Sink::Service {
  grpc::Status Push(grpc::ServerContext*, grpc::ServerReader<parity::bench::Blob>* reader,
                    parity::bench::Received* out) override {
    parity::bench::Blob b;
    uint64_t n = 0;
    while (reader->Read(&b)) n += b.data().size();
    out->set_bytes(n);
    return grpc::Status::OK;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t size_mb = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2048;
  const long window = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 0;
  SinkImpl sink;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(8 << 20);
  if (window > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, static_cast<int>(window));
  }
  builder.RegisterService(&sink);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "grpc_ceiling: cannot listen on 127.0.0.1\n");
    return 2;
  }
  auto stub = parity::bench::Sink::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  parity::bench::Blob blob;
  blob.mutable_data()->assign(1 << 20, 'x');
  grpc::ClientContext ctx;
  parity::bench::Received got;
  const auto start = std::chrono::steady_clock::now();
  auto writer = stub->Push(&ctx, &got);
  for (uint64_t i = 0; i < size_mb; ++i) {
    if (!writer->Write(blob)) break;
  }
  writer->WritesDone();
  const grpc::Status st = writer->Finish();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  server->Shutdown();
  if (!st.ok() || got.bytes() != size_mb << 20) {
    std::fprintf(stderr, "grpc_ceiling: stream failed: %s\n", st.error_message().c_str());
    return 2;
  }
  std::printf("ceiling_bytes_per_second %.0f\n", static_cast<double>(got.bytes()) / secs);
  rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  std::printf("cpu_seconds %.2f\n",
              static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                  static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6);
  return 0;
}
