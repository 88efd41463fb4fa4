#include "client/proto_util.h"

#include <cstdlib>

namespace parity {

Verdict VerdictFromProto(v1::Verdict v) { return static_cast<Verdict>(std::max(0, static_cast<int>(v) - 1)); }

CheckResult CheckResultFromProto(const v1::OpResult& r) {
  CheckResult c;
  c.verdict = VerdictFromProto(r.verdict());
  c.peer_verdict = r.peer_verdict();
  c.message = r.message();
  for (const v1::Metric& m : r.metrics()) {
    c.Add(m.name(), m.has_text()      ? MetricValue::Text(m.text())
                    : m.has_integer() ? MetricValue::Integer(m.integer())
                                      : MetricValue::Number(m.number()));
  }
  return c;
}

PolicyKind PolicyFromProto(v1::Policy p) {
  switch (p) {
    case v1::POLICY_FORGE: return PolicyKind::kForge;
    case v1::POLICY_TORCH: return PolicyKind::kTorch;
    default: return PolicyKind::kMsprobe;
  }
}

std::string ServerAddress(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("PARITY_SERVER");
  return env && *env ? env : "127.0.0.1:50051";
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace parity
