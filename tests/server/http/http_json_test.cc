// The HTTP/JSON mapping alone: parameters into request messages, codes into HTTP statuses, and
// error bodies.
#include "server/http/http_json.h"

#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"

namespace parity {
namespace {

TEST(HttpJson, ParametersSetFieldsByProtoOrJsonName) {
  v1::ListOpResultsRequest r;
  ASSERT_TRUE(SetFieldsFromParams({{"job_id", "job-1"}, {"pageSize", "20"}, {"verdicts", "FAIL"},
                                   {"verdicts", "VERDICT_ERROR"}, {"verdicts", "2"}, {"descending", "true"},
                                   {"culprits", "propagated"}, {"sort_metric", "Cosine"}},
                                  &r)
                  .ok());
  EXPECT_EQ(r.job_id(), "job-1");
  EXPECT_EQ(r.page_size(), 20);
  ASSERT_EQ(r.verdicts_size(), 3);
  EXPECT_EQ(r.verdicts(0), v1::VERDICT_FAIL);
  EXPECT_EQ(r.verdicts(1), v1::VERDICT_ERROR);
  EXPECT_EQ(r.verdicts(2), v1::VERDICT_WARN);
  EXPECT_TRUE(r.descending());
  ASSERT_EQ(r.culprits_size(), 1);
  EXPECT_EQ(r.culprits(0), v1::CULPRIT_STATUS_PROPAGATED);
  EXPECT_EQ(r.sort_metric(), "Cosine");
}

TEST(HttpJson, NestedFieldsAndMapEntries) {
  v1::SubmitJobRequest s;
  ASSERT_TRUE(SetFieldsFromParams({{"config.policy", "TORCH"}, {"config.config_json", "{}"}}, &s).ok());
  EXPECT_EQ(s.config().policy(), v1::POLICY_TORCH);
  EXPECT_EQ(s.config().config_json(), "{}");
  v1::ListRunsRequest l;
  ASSERT_TRUE(SetFieldsFromParams({{"labels.build", "41"}, {"labels.branch", "main"}, {"created_after_ms", "-5"}}, &l).ok());
  // Read as the server reads it, from the wire (reading a map set by reflection in place takes
  // a lock in libprotobuf that its inline code releases, which ThreadSanitizer reports).
  v1::ListRunsRequest sent;
  ASSERT_TRUE(sent.ParseFromString(l.SerializeAsString()));
  EXPECT_EQ(sent.labels().at("build"), "41");
  EXPECT_EQ(sent.labels().at("branch"), "main");
  EXPECT_EQ(sent.created_after_ms(), -5);
}

TEST(HttpJson, BadParametersAreNamed) {
  struct Case {
    std::string name, value, message;
  };
  const Case cases[] = {
      {"colour", "red", "query parameter 'colour': no field 'colour' in ListOpResultsRequest"},
      {"page_size", "1e3", "query parameter 'page_size': '1e3' is not a 32-bit integer"},
      {"page_size", "99999999999", "is not a 32-bit integer"},
      {"descending", "yes", "'yes' is not true or false"},
      {"verdicts", "GOOD", "'GOOD' is not one of UNSPECIFIED, PASS, WARN, FAIL, ERROR, UNMATCHED, SKIPPED"},
      {"verdicts", "99", "is not one of"},
      {"job_id.x", "1", "'job_id' is not a message field"},
  };
  for (const Case& c : cases) {
    v1::ListOpResultsRequest r;
    absl::Status s = SetFieldsFromParams({{c.name, c.value}}, &r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(std::string(s.message()).find(c.message), std::string::npos) << s.message();
  }
  v1::SubmitJobRequest whole;
  EXPECT_NE(std::string(SetFieldsFromParams({{"config", "x"}}, &whole).message()).find("names a message"),
            std::string::npos);
  v1::ListRunsRequest l;
  EXPECT_FALSE(SetFieldsFromParams({{"labels", "x"}}, &l).ok());
}

TEST(HttpJson, StatusesMapAsGrpcGatewayMapsThem) {
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::OK), 200);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::INVALID_ARGUMENT), 400);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::FAILED_PRECONDITION), 400);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::OUT_OF_RANGE), 400);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::UNAUTHENTICATED), 401);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::PERMISSION_DENIED), 403);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::NOT_FOUND), 404);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::ALREADY_EXISTS), 409);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::ABORTED), 409);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::RESOURCE_EXHAUSTED), 429);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::CANCELLED), 499);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::UNKNOWN), 500);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::INTERNAL), 500);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::DATA_LOSS), 500);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::UNIMPLEMENTED), 501);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::UNAVAILABLE), 503);
  EXPECT_EQ(HttpStatusFromGrpc(grpc::StatusCode::DEADLINE_EXCEEDED), 504);
}

TEST(HttpJson, ErrorBodiesEscapeWhatTheyQuote) {
  // Markup and control characters escaped, UTF-8 kept, a stray byte replaced.
  EXPECT_EQ(ErrorJson(grpc::Status(grpc::StatusCode::NOT_FOUND, "run '<img src=x>' \"q\" \\ \n\x01\xc3\xa9 \xff&")),
            "{\"code\":5,\"message\":\"run '\\u003cimg src=x\\u003e' \\\"q\\\" \\\\ \\u000a\\u0001\xc3\xa9 \\ufffd\\u0026\","
            "\"details\":[]}");
}

TEST(HttpJson, BodiesParseAsTheRequestMessage) {
  v1::SubmitJobRequest s;
  ASSERT_TRUE(MessageFromJsonBody("{\"goldenRunId\": \"a\", \"target_run_id\": \"b\"}", &s).ok());
  EXPECT_EQ(s.golden_run_id(), "a");
  EXPECT_EQ(s.target_run_id(), "b");
  absl::Status bad = MessageFromJsonBody("{\"nope\": 1}", &s);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.message()).find("not a valid SubmitJobRequest in JSON"), std::string::npos);
  EXPECT_FALSE(MessageFromJsonBody("[", &s).ok());
  EXPECT_TRUE(MessageFromJsonBody("", &s).ok());
}

}  // namespace
}  // namespace parity
