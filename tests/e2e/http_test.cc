// parityd's HTTP listener end to end: the real binaries, the bundled sample uploaded with
// parity-agent, then every JSON route, its errors and paging, the event stream, tokens,
// /metrics (checked by Prometheus's own promtool) and the dashboard's files, over real HTTP.
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/file_util.h"
#include "common/base/json.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using testing::Daemon;
using testing::kSample;

// The value at a dotted path ("jobs.0.jobId"); null when absent.
Json At(const Json& j, const std::string& path) {
  const Json* cur = &j;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (cur->is_array()) {
      size_t i = 0;
      if (!absl::SimpleAtoi(part, &i) || i >= cur->as_array().size()) return Json();
      cur = &cur->as_array()[i];
    } else if (cur->is_object()) {
      cur = cur->Find(part);
      if (cur == nullptr) return Json();
    } else {
      return Json();
    }
  }
  return *cur;
}
std::string S(const Json& j, const std::string& path) { return At(j, path).as_string(); }
size_t N(const Json& j, const std::string& path) {
  const Json a = At(j, path);
  return a.is_array() ? a.as_array().size() : 0;
}
bool B(const Json& j, const std::string& path) { return At(j, path).as_bool(); }
double D(const Json& j, const std::string& path) { return At(j, path).as_double(); }
int64_t I(const Json& j, const std::string& path) { return At(j, path).as_int(); }

// A parityd with HTTP on, the sample's golden and target uploaded (one job), and a second job
// whose target is the golden dump itself (every pair passes): the base of a diff.
class HttpTest : public testing::ScratchTest {
 protected:
  void StartDaemon(std::vector<std::string> extra = {}) {
    extra.push_back("--http-listen=127.0.0.1:0");
    extra.push_back("--http-port-file=" + (dir_ / "http_port").string());
    daemon_ = std::make_unique<Daemon>(dir_, extra);
    daemon_->Start();
    http_port_ = std::stoi(testing::ReadFirstWord(dir_ / "http_port"));
  }

  void UploadSample(const std::string& token_flag = "") {
    testing::Output g = testing::RunAgent("upload " + kSample + "/golden --server " + daemon_->Address() +
                                          " --project demo --role golden --run-name golden-build " + token_flag +
                                          " --run-id-file " + (dir_ / "g").string());
    ASSERT_EQ(g.code, 0) << g.text << daemon_->Log();
    testing::Output clean = testing::RunAgent("upload " + kSample + "/golden --server " + daemon_->Address() +
                                              " --project demo --role target --run-name clean-build " + token_flag +
                                              " --against " + testing::ReadFirstWord(dir_ / "g"));
    ASSERT_EQ(clean.code, 0) << clean.text;
    testing::Output t = testing::RunAgent("upload " + kSample + "/target --server " + daemon_->Address() +
                                          " --project demo --role target --run-name bad-build " + token_flag +
                                          " --against " + testing::ReadFirstWord(dir_ / "g"));
    ASSERT_EQ(t.code, 1) << t.text;
    // Jobs are listed newest first.
    testing::Output jobs = testing::Run("client/parity", "jobs --server " + daemon_->Address() + " --project demo --json " + token_flag);
    ASSERT_EQ(jobs.code, 0) << jobs.text;
    absl::StatusOr<Json> list = ParseJson(jobs.text);
    ASSERT_TRUE(list.ok()) << jobs.text;
    job_ = S(*list, "0.job_id");
    clean_job_ = S(*list, "1.job_id");
    ASSERT_FALSE(job_.empty()) << jobs.text;
  }

  httplib::Result Get(const std::string& path, const std::string& token = "") {
    httplib::Client c("127.0.0.1", http_port_);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return c.Get(path.c_str(), h);
  }

  // The JSON body of a 200 answer.
  Json GetJson(const std::string& path) {
    httplib::Result r = Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return Json();
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    absl::StatusOr<Json> j = ParseJson(r->body);
    EXPECT_TRUE(j.ok()) << r->body;
    return j.ok() ? *j : Json();
  }

  std::unique_ptr<Daemon> daemon_;
  int http_port_ = 0;
  std::string job_, clean_job_;
};

TEST_F(HttpTest, EveryQueryRouteAnswersAsTheRpcDoes) {
  StartDaemon();
  UploadSample();
  Json status = GetJson("/api/v1/status");
  EXPECT_TRUE(absl::StartsWith(S(status, "version"), "parityd ")) << status.Dump();
  EXPECT_GT(N(status, "gauges"), 5u);

  Json runs = GetJson("/api/v1/projects/demo/runs");
  ASSERT_EQ(N(runs, "runs"), 3u);
  EXPECT_EQ(S(runs, "runs.0.metadata.name"), "bad-build");  // newest first
  EXPECT_EQ(N(GetJson("/api/v1/runs?project=demo&model=none"), "runs"), 0u);
  EXPECT_EQ(N(GetJson("/api/v1/runs?project=demo&labels.build=none"), "runs"), 0u);

  // Paging: one job a page, the token leads to the other.
  Json page1 = GetJson("/api/v1/projects/demo/jobs?page_size=1");
  ASSERT_EQ(N(page1, "jobs"), 1u);
  EXPECT_EQ(S(page1, "jobs.0.jobId"), job_);
  const std::string next = S(page1, "nextPageToken");
  ASSERT_FALSE(next.empty());
  Json page2 = GetJson("/api/v1/jobs?project=demo&page_size=1&page_token=" + next);
  ASSERT_EQ(N(page2, "jobs"), 1u);
  EXPECT_EQ(S(page2, "jobs.0.jobId"), clean_job_);
  EXPECT_EQ(S(page2, "nextPageToken"), "");

  Json job = GetJson("/api/v1/jobs/" + job_);
  EXPECT_EQ(S(job, "state"), "JOB_STATE_DONE");
  EXPECT_EQ(S(job, "targetRunName"), "bad-build");
  Json summary = GetJson("/api/v1/jobs/" + job_ + "/summary");
  EXPECT_EQ(S(summary, "firstCulprit"), "Functional.linear.1.forward");
  EXPECT_EQ(S(summary, "counts.fail"), "5");

  // Filters by enum name with or without its prefix, repeated values, sort, glob.
  Json fails = GetJson("/api/v1/jobs/" + job_ + "/results?verdicts=FAIL&sort_metric=Cosine");
  ASSERT_EQ(N(fails, "results"), 5u);
  EXPECT_EQ(S(fails, "total"), "5");
  EXPECT_EQ(S(GetJson("/api/v1/jobs/" + job_ + "/results?verdicts=VERDICT_FAIL&verdicts=PASS"), "total"), "17");
  EXPECT_EQ(S(GetJson("/api/v1/jobs/" + job_ + "/results?op_glob=*softmax*"), "total"), "3");
  Json propagated = GetJson("/api/v1/jobs/" + job_ + "/results?culprits=PROPAGATED&verdicts=FAIL");
  EXPECT_EQ(S(propagated, "total"), "4");
  Json one = GetJson("/api/v1/jobs/" + job_ + "/results/Functional.linear.1.forward.output.0");
  EXPECT_EQ(S(one, "verdict"), "VERDICT_FAIL");
  EXPECT_EQ(S(one, "culprit"), "CULPRIT_STATUS_CULPRIT");

  // The plot's series: every result in a bucket, the culprit's output marked, msprobe's line.
  Json series = GetJson("/api/v1/jobs/" + job_ + "/series?buckets=4");
  EXPECT_EQ(S(series, "metric"), "Cosine");
  EXPECT_EQ(S(series, "total"), "17");
  ASSERT_EQ(N(series, "buckets"), 4u);
  int64_t counted = 0;
  for (size_t i = 0; i < 4; ++i) counted += std::stoll(S(series, "buckets."+std::to_string(i)+".count"));
  EXPECT_EQ(counted, 17);
  ASSERT_EQ(N(series, "culprits"), 1u);
  EXPECT_EQ(S(series, "culprits.0.name"), "Functional.linear.1.forward.output.0");
  EXPECT_TRUE(B(series, "hasThreshold"));
  EXPECT_DOUBLE_EQ(D(series, "threshold"), 0.99);
  EXPECT_EQ(B(GetJson("/api/v1/jobs/" + job_ + "/series?metric=MaxAbsErr"), "higherIsBetter"), false);

  // The clean build against the bad one: the culprit's output and the propagated ones regress.
  Json diff = GetJson("/api/v1/jobs/" + clean_job_ + "/diff/" + job_);
  ASSERT_EQ(N(diff, "regressions"), 5u) << diff.Dump();
  EXPECT_TRUE(absl::StrContains(S(diff, "regressions.0.reason"), "PASS -> FAIL"));
  Json fixes = GetJson("/api/v1/jobs/" + job_ + "/diff/" + clean_job_ + "?improvements=true");
  ASSERT_EQ(N(fixes, "regressions"), 5u) << fixes.Dump();
  EXPECT_TRUE(absl::StrContains(S(fixes, "regressions.0.reason"), "FAIL -> PASS"));
  EXPECT_EQ(N(GetJson("/api/v1/jobs/" + clean_job_ + "/diff/" + job_ + "?improvements=true"), "regressions"), 0u);
}

TEST_F(HttpTest, ErrorsCarryTheRpcCodeAsGrpcGatewayMapsIt) {
  StartDaemon();
  UploadSample();
  struct Case {
    std::string path;
    int http, code;
    std::string message_part;
  };
  const Case cases[] = {
      {"/api/v1/jobs/job-nope", 404, 5, "job 'job-nope' not found"},
      {"/api/v1/jobs/" + job_ + "/results/no.such.item", 404, 5, "no.such.item"},
      {"/api/v1/jobs?page_token=x", 400, 3, "page_token 'x' is not valid"},
      {"/api/v1/jobs?page_size=many", 400, 3, "query parameter 'page_size': 'many' is not a 32-bit integer"},
      {"/api/v1/jobs?colour=red", 400, 3, "no field 'colour' in ListJobsRequest"},
      {"/api/v1/jobs/" + job_ + "/results?verdicts=GOOD", 400, 3, "is not one of UNSPECIFIED, PASS, WARN, FAIL"},
      {"/api/v1/jobs/" + job_ + "/results?sort_metric=Speed", 400, 3, "cannot sort by 'Speed'"},
      {"/api/v1/jobs/" + job_ + "/series?buckets=100000", 400, 3, "buckets must be between 1 and 10000"},
      {"/api/v1/jobs/" + job_ + "/series?metric=Speed", 400, 3, "no metric 'Speed'"},
      {"/api/v1/nothing", 404, 5, "no such API route: GET /api/v1/nothing"},
      {"/vendor/missing.js", 404, 5, "no such file"},
  };
  for (const Case& c : cases) {
    httplib::Result r = Get(c.path);
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, c.http) << c.path << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json; charset=utf-8") << c.path;
    absl::StatusOr<Json> j = ParseJson(r->body);
    ASSERT_TRUE(j.ok()) << r->body;
    EXPECT_EQ(I((*j), "code"), c.code) << c.path;
    EXPECT_TRUE(absl::StrContains(S((*j), "message"), c.message_part)) << c.path << ": " << r->body;
  }
  // A body that is not the request message in JSON; a job between runs that do not exist.
  httplib::Client c("127.0.0.1", http_port_);
  httplib::Result bad = c.Post("/api/v1/jobs", "{\"golden_run_id\": 7, \"nope\": 1}", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_TRUE(absl::StrContains(bad->body, "not a valid SubmitJobRequest in JSON")) << bad->body;
  httplib::Result missing = c.Post("/api/v1/jobs", "{\"goldenRunId\": \"run-a\", \"targetRunId\": \"run-b\"}", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404) << missing->body;
  // A request body over the limit is refused before it is read.
  httplib::Result big = c.Post("/api/v1/jobs", std::string(2 << 20, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
}

TEST_F(HttpTest, JobsAreSubmittedAndCancelledWithPost) {
  StartDaemon();
  UploadSample();
  Json job = GetJson("/api/v1/jobs/" + job_);
  httplib::Client c("127.0.0.1", http_port_);
  const std::string body = absl::StrCat("{\"goldenRunId\": \"", S(job, "goldenRunId"), "\", \"targetRunId\": \"",
                                        S(job, "targetRunId"), "\", \"config\": {\"policy\": \"POLICY_TORCH\"}}");
  httplib::Result r = c.Post("/api/v1/jobs", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  absl::StatusOr<Json> submitted = ParseJson(r->body);
  ASSERT_TRUE(submitted.ok());
  const std::string id = S((*submitted), "jobId");
  EXPECT_NE(id, job_);
  EXPECT_EQ(S((*submitted), "config.policy"), "POLICY_TORCH");
  // 17 pairs may all be compared before the cancel arrives: then it is refused, as the RPC
  // refuses it (FAILED_PRECONDITION, 400), and the job ends DONE; otherwise it is cancelled.
  // A refused cancel may find the job finishing (its final record being written): it is DONE
  // once that is stored.
  httplib::Result cancel = c.Post(("/api/v1/jobs/" + id + ":cancel").c_str(), "", "application/json");
  ASSERT_TRUE(cancel);
  std::string state = S(GetJson("/api/v1/jobs/" + id), "state");
  for (int i = 0; i < 500 && state == "JOB_STATE_RUNNING"; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    state = S(GetJson("/api/v1/jobs/" + id), "state");
  }
  if (cancel->status == 200) {
    EXPECT_EQ(state, "JOB_STATE_CANCELLED") << cancel->body;
  } else {
    EXPECT_EQ(cancel->status, 400) << cancel->body;
    EXPECT_TRUE(absl::StrContains(cancel->body, "\"code\":9,\"message\":\"job " + id)) << cancel->body;
    EXPECT_EQ(state, "JOB_STATE_DONE");
  }
}

TEST_F(HttpTest, EventsStreamAJobsProgressUntilItEnds) {
  StartDaemon();
  UploadSample();
  httplib::Client c("127.0.0.1", http_port_);
  std::string events;
  httplib::Result r = c.Get(("/api/v1/jobs/" + job_ + "/events").c_str(), [&](const char* data, size_t n) {
    events.append(data, n);
    return true;
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_TRUE(absl::StartsWith(events, "event: progress\ndata: {\"job\":{\"jobId\":\"" + job_)) << events;
  EXPECT_TRUE(absl::StrContains(events, "\"state\":\"JOB_STATE_DONE\"")) << events;
  EXPECT_TRUE(absl::EndsWith(events, "event: end\ndata: {\"code\":0,\"message\":\"\",\"details\":[]}\n\n")) << events;
  // An unknown job's stream ends at once with NOT_FOUND.
  std::string none;
  c.Get("/api/v1/jobs/job-nope/events", [&](const char* data, size_t n) {
    none.append(data, n);
    return true;
  });
  EXPECT_TRUE(absl::StrContains(none, "event: end\ndata: {\"code\":5")) << none;
}

TEST_F(HttpTest, TokensAuthoriseHttpAsTheyDoGrpc) {
  StartDaemon({"--auth=tokens", "--admin-token-file=" + (dir_ / "admin").string()});
  const std::string admin = testing::ReadFirstWord(dir_ / "admin");
  UploadSample("--token " + admin);
  auto token = [&](const std::string& project, const std::string& role) {
    testing::Output o = testing::Run("client/parity", "token create --server " + daemon_->Address() + " --token " + admin +
                                     " --project " + project + " --role " + role + " --json");
    EXPECT_EQ(o.code, 0) << o.text;
    absl::StatusOr<Json> j = ParseJson(o.text);
    return j.ok() ? S((*j), "token") : std::string();
  };
  const std::string viewer = token("demo", "viewer"), stranger = token("other", "viewer");
  httplib::Result none = Get("/api/v1/jobs/" + job_);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_TRUE(absl::StrContains(none->body, "no token")) << none->body;
  httplib::Result forged = Get("/api/v1/jobs/" + job_, "parity_nope_nope");
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 401);
  EXPECT_EQ(Get("/api/v1/jobs/" + job_, viewer)->status, 200);
  EXPECT_EQ(Get("/api/v1/jobs/" + job_ + "/series", viewer)->status, 200);
  // Another project's viewer does not learn that the job exists.
  httplib::Result other = Get("/api/v1/jobs/" + job_, stranger);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404) << other->body;
  // A viewer may not submit.
  httplib::Client c("127.0.0.1", http_port_);
  httplib::Result post = c.Post("/api/v1/jobs", {{"Authorization", "Bearer " + viewer}}, "{\"goldenRunId\":\"a\",\"targetRunId\":\"b\"}",
                                "application/json");
  ASSERT_TRUE(post);
  EXPECT_TRUE(post->status == 403 || post->status == 404) << post->status << " " << post->body;
  // Metrics and events need a token too; the dashboard's files do not (they hold no data).
  EXPECT_EQ(Get("/metrics")->status, 401);
  EXPECT_EQ(Get("/metrics", viewer)->status, 200);
  EXPECT_EQ(Get("/api/v1/jobs/" + job_ + "/events")->status, 200);  // the stream says why it ended
  EXPECT_EQ(Get("/")->status, 200);
}

TEST_F(HttpTest, MetricsCountTheUploadAndPassPromtool) {
  StartDaemon();
  UploadSample();
  httplib::Result r = Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::string& m = r->body;
  EXPECT_TRUE(absl::StartsWith(r->get_header_value("Content-Type"), "text/plain; version=0.0.4")) << r->get_header_value("Content-Type");
  // 17 pairs per job: the clean job passes all, the bad one fails 5.
  EXPECT_TRUE(absl::StrContains(m, "parity_pairs_compared_total{policy=\"msprobe\",verdict=\"FAIL\"} 5\n")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_pairs_compared_total{policy=\"msprobe\",verdict=\"PASS\"} 29\n")) << m;
  // The sample's 17 items a run: 14 tensors and 3 non-tensor arguments.
  EXPECT_TRUE(absl::StrContains(m, "parity_items_received_total{kind=\"tensor\"} 42\n")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_items_received_total{kind=\"value\"} 9\n")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_uploads_started_total 3\n")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_verdict_latency_seconds_count 34\n")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_rpcs_total{method=\"/parity.v1.Ingest/Upload\",code=\"0\"} 3\n")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_compare_queue_limit 64\n")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_disk_free_bytes ")) << m;
  EXPECT_TRUE(absl::StrContains(m, "parity_build_info{version=\"parityd ")) << m;
  // Prometheus's own linter reads it as valid exposition text.
  const fs::path file = dir_ / "metrics.txt";
  std::ofstream(file) << m;
  FILE* p = ::popen(("promtool check metrics < " + file.string() + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
}

TEST_F(HttpTest, TheDashboardsFilesAreServedWithAStrictPolicy) {
  StartDaemon();
  for (const std::string path : {"/", "/jobs/job-x?verdict=FAIL", "/projects/demo"}) {
    httplib::Result r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_TRUE(absl::StrContains(r->body, "<script src=\"/app.js\" defer></script>"));
    EXPECT_TRUE(absl::StrContains(r->get_header_value("Content-Security-Policy"), "script-src 'self'"));
    EXPECT_FALSE(absl::StrContains(r->get_header_value("Content-Security-Policy"), "unsafe-inline"));
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(r->get_header_value("X-Frame-Options"), "DENY");
  }
  httplib::Result js = Get("/vendor/chart.min.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "application/javascript; charset=utf-8");
  EXPECT_TRUE(absl::StrContains(js->body, "Chart.js v3")) << js->body.substr(0, 100);
  // The page never writes data as HTML.
  httplib::Result app = Get("/app.js");
  ASSERT_TRUE(app);
  EXPECT_FALSE(absl::StrContains(app->body, "innerHTML"));
  EXPECT_FALSE(absl::StrContains(app->body, "insertAdjacentHTML"));
}

TEST_F(HttpTest, TheOpenApiDescriptionIsTheOneInDocs) {
  StartDaemon();
  httplib::Result r = Get("/api/v1/openapi.json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  absl::StatusOr<std::string> docs = ReadFileToString(std::string(PARITY_SOURCE_DIR) + "/docs/openapi.json", 1 << 22);
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_TRUE(r->body == *docs)
      << "docs/openapi.json is stale: write a running parityd's /api/v1/openapi.json into it";
  absl::StatusOr<Json> doc = ParseJson(r->body);
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(S(*doc, "openapi"), "3.1.0");
  const Json* paths = doc->Find("paths");
  ASSERT_NE(paths, nullptr);
  EXPECT_NE(paths->Find("/api/v1/jobs/{base_job_id}/diff/{job_id}"), nullptr);
  EXPECT_NE(paths->Find("/api/v1/jobs/{job_id}:cancel"), nullptr);
}

// The gRPC listener's certificate and key give HTTPS, and its client CA requires a client
// certificate there too; plaintext and a client without a certificate get nothing.
TEST_F(HttpTest, TheTlsFilesGiveHttpsWithClientCertificates) {
  // The refused clients write to connections the server has closed; that must fail the call,
  // not kill the test (cpp-httplib's client does not ignore SIGPIPE; its server does).
  ::signal(SIGPIPE, SIG_IGN);
  const fs::path certs = dir_ / "certs";
  ASSERT_EQ(std::system((std::string(PARITY_SOURCE_DIR) + "/deploy/make-certs.sh " + certs.string() + " > /dev/null").c_str()), 0);
  const std::string c = certs.string();
  StartDaemon({"--tls-cert=" + c + "/server.pem", "--tls-key=" + c + "/server.key", "--tls-client-ca=" + c + "/ca.pem"});
  httplib::SSLClient good("127.0.0.1", http_port_, c + "/client.pem", c + "/client.key");
  good.set_ca_cert_path(c + "/ca.pem");
  good.enable_server_certificate_verification(true);
  httplib::Result r = good.Get("/api/v1/status");
  ASSERT_TRUE(r) << httplib::to_string(r.error()) << daemon_->Log();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(absl::StrContains(r->body, "\"version\":\"parityd ")) << r->body;
  httplib::SSLClient no_cert("127.0.0.1", http_port_);
  no_cert.set_ca_cert_path(c + "/ca.pem");
  no_cert.enable_server_certificate_verification(true);
  EXPECT_FALSE(no_cert.Get("/api/v1/status"));
  httplib::Client plain("127.0.0.1", http_port_);
  httplib::Result p = plain.Get("/api/v1/status");
  EXPECT_TRUE(!p || p->status != 200);
}

TEST_F(HttpTest, HttpBeyondLoopbackNeedsTlsAndTokens) {
  testing::Output o = testing::Run("server/parityd", "--data-dir " + (dir_ / "d").string() +
                                   " --listen 127.0.0.1:0 --http-listen 0.0.0.0:0");
  EXPECT_EQ(o.code, 2) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "refusing to listen on 0.0.0.0:0 without TLS")) << o.text;
  testing::Output threads = testing::Run("server/parityd", "--data-dir " + (dir_ / "d").string() +
                                         " --http-listen 127.0.0.1:0 --http-threads 2 --http-max-event-streams 2");
  EXPECT_EQ(threads.code, 2) << threads.text;
  EXPECT_TRUE(absl::StrContains(threads.text, "--http-max-event-streams (2) must be less than --http-threads (2)"));
}

}  // namespace
}  // namespace parity
