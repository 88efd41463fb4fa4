// gRPC helpers for tests that talk to a real parityd.
#ifndef PARITY_TESTS_GRPC_TEST_UTIL_H_
#define PARITY_TESTS_GRPC_TEST_UTIL_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace parity::testing {

// A channel with its own connection (not one shared through gRPC's global subchannel pool), so
// that it opens a connection of its own and closes it when the last reference is dropped:
// parityd's graceful shutdown waits out its whole grace for a connection that stays open.
inline std::shared_ptr<grpc::Channel> PrivateChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace parity::testing

#endif  // PARITY_TESTS_GRPC_TEST_UTIL_H_
