#include "server/storage/s3.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "common/base/sha256.h"
#include "common/base/status_macros.h"

namespace parity {
namespace {

// libcurl's process-wide initialisation, once, before the first handle.
void InitCurl() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)done;
}

// RFC 3986 percent-encoding of `s`, keeping unreserved characters (and '/' when `keep_slash`).
std::string UriEncode(absl::string_view s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// The text of the first <tag>...</tag> in `xml` at or after `*from` (advanced past it), with
// XML's five entities decoded; false when there is none.
bool NextElement(absl::string_view xml, absl::string_view tag, size_t* from, std::string* out) {
  const std::string open = absl::StrCat("<", tag, ">"), close = absl::StrCat("</", tag, ">");
  const size_t a = xml.find(open, *from);
  if (a == absl::string_view::npos) return false;
  const size_t b = xml.find(close, a + open.size());
  if (b == absl::string_view::npos) return false;
  absl::string_view text = xml.substr(a + open.size(), b - a - open.size());
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out->push_back(text[i]);
      continue;
    }
    static const std::pair<const char*, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool decoded = false;
    for (const auto& [name, c] : kEntities) {
      if (absl::StartsWith(text.substr(i), name)) {
        out->push_back(c);
        i += std::string(name).size() - 1;
        decoded = true;
        break;
      }
    }
    if (!decoded) out->push_back('&');
  }
  *from = b + close.size();
  return true;
}

// Where libcurl hands an answer's body: memory, or a file once the answer is a success.
struct Sink {
  CURL* curl;
  std::string* body;
  int out_fd;          // -1: always `body`
  uint64_t* received;
  int error = 0;       // errno of a failed write to out_fd
};
size_t Collect(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t k = size * n;
  long http = 0;
  if (s->out_fd >= 0) curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &http);
  if (s->out_fd < 0 || http / 100 != 2) {
    s->body->append(data, k);
    return k;
  }
  for (size_t done = 0; done < k;) {
    const ssize_t w = ::write(s->out_fd, data + done, k - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      s->error = w < 0 ? errno : EIO;
      return 0;  // libcurl stops with CURLE_WRITE_ERROR
    }
    done += static_cast<size_t>(w);
  }
  *s->received += k;
  return k;
}

// A request's payload, handed to libcurl as it reads it: from memory or from a file.
struct Upload {
  absl::string_view data;
  int fd = -1;
  uint64_t size = 0;
  uint64_t at = 0;
  int error = 0;  // errno of a failed read
};
size_t Provide(char* buffer, size_t size, size_t n, void* user) {
  auto* u = static_cast<Upload*>(user);
  if (u->fd < 0) {
    const size_t k = std::min<size_t>(size * n, u->data.size() - u->at);
    std::memcpy(buffer, u->data.data() + u->at, k);
    u->at += k;
    return k;
  }
  const size_t want = static_cast<size_t>(std::min<uint64_t>(size * n, u->size - u->at));
  if (want == 0) return 0;
  ssize_t r;
  do r = ::pread(u->fd, buffer, want, static_cast<off_t>(u->at)); while (r < 0 && errno == EINTR);
  if (r <= 0) {
    u->error = r < 0 ? errno : EIO;  // a file shorter than declared
    return CURL_READFUNC_ABORT;
  }
  u->at += static_cast<uint64_t>(r);
  return static_cast<size_t>(r);
}

// The status of an answer that is not a success.
absl::Status AnswerStatus(long http, const std::string& body, absl::string_view what) {
  std::string code, message;
  size_t at = 0;
  NextElement(body, "Code", &at, &code);
  at = 0;
  NextElement(body, "Message", &at, &message);
  absl::StatusCode sc = absl::StatusCode::kInternal;
  if (http == 404 || code == "NoSuchKey" || code == "NoSuchBucket") {
    sc = absl::StatusCode::kNotFound;
  } else if (http == 403 || code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch") {
    sc = absl::StatusCode::kPermissionDenied;
  } else if (http >= 500 || code == "SlowDown") {
    sc = absl::StatusCode::kUnavailable;
  }
  return absl::Status(sc, absl::StrCat(what, ": HTTP ", http, code.empty() ? "" : " ", code,
                                       message.empty() ? "" : ": ", message.substr(0, 512)));
}

}  // namespace

absl::StatusOr<S3Options> ParseS3Url(absl::string_view url) {
  S3Options o;
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "s3://")) {
    return absl::InvalidArgumentError("not an S3 URL (s3://BUCKET[/PREFIX]?endpoint=URL)");
  }
  absl::string_view query;
  if (const size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const size_t slash = rest.find('/');
  o.bucket = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) {
    o.prefix = std::string(rest.substr(slash + 1));
    if (!o.prefix.empty() && o.prefix.back() != '/') o.prefix += '/';
  }
  if (o.bucket.empty()) return absl::InvalidArgumentError("the S3 URL names no bucket");
  for (absl::string_view kv : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    const absl::string_view k = kv.substr(0, eq), v = eq == absl::string_view::npos ? "" : kv.substr(eq + 1);
    if (k == "endpoint") {
      o.endpoint = std::string(absl::StripSuffix(v, "/"));
    } else if (k == "region") {
      o.region = std::string(v);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("the S3 URL has an unknown parameter '", k.substr(0, 64),
                                                     "' (endpoint and region are known; credentials come from "
                                                     "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"));
    }
  }
  if (!absl::StartsWith(o.endpoint, "http://") && !absl::StartsWith(o.endpoint, "https://")) {
    return absl::InvalidArgumentError("the S3 URL needs endpoint=http://HOST:PORT or https://HOST");
  }
  const char* key = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  if (key == nullptr || secret == nullptr || *key == '\0' || *secret == '\0') {
    return absl::InvalidArgumentError("S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
  o.access_key = key;
  o.secret_key = secret;
  return o;
}

absl::StatusOr<std::unique_ptr<S3Client>> S3Client::Open(S3Options options) {
  if (options.endpoint.empty() || options.bucket.empty()) {
    return absl::InvalidArgumentError("S3: an endpoint and a bucket are needed");
  }
  InitCurl();
  return std::unique_ptr<S3Client>(new S3Client(std::move(options)));
}

S3Client::~S3Client() {
  absl::MutexLock l(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* S3Client::TakeHandle() {
  {
    absl::MutexLock l(&mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      curl_easy_reset(static_cast<CURL*>(h));  // options cleared, connections kept
      return h;
    }
  }
  return curl_easy_init();
}

void S3Client::ReturnHandle(void* handle) {
  {
    absl::MutexLock l(&mu_);
    if (idle_.size() < 16) {
      idle_.push_back(handle);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

std::string S3Client::ObjectPath(absl::string_view key) const {
  return "/" + UriEncode(options_.prefix + std::string(key), true);
}

absl::StatusOr<S3Client::Response> S3Client::Request(const char* method, const std::string& path_and_query,
                                                     const Body& body, const std::string& range,
                                                     absl::string_view what) {
  auto give_back = [this](CURL* h) { ReturnHandle(h); };
  std::unique_ptr<CURL, decltype(give_back)> curl(static_cast<CURL*>(TakeHandle()), give_back);
  if (curl == nullptr) return absl::ResourceExhaustedError("S3: no libcurl handle");
  const std::string url = absl::StrCat(options_.endpoint, "/", UriEncode(options_.bucket, false), path_and_query);
  const std::string sigv4 = absl::StrCat("aws:amz:", options_.region, ":s3");
  const std::string user = absl::StrCat(options_.access_key, ":", options_.secret_key);
  curl_slist* headers = nullptr;
  const std::string content_sha = body.in_fd >= 0 ? "UNSIGNED-PAYLOAD" : Sha256Hex(body.payload);
  headers = curl_slist_append(headers, absl::StrCat("x-amz-content-sha256: ", content_sha).c_str());
  if (!range.empty()) headers = curl_slist_append(headers, absl::StrCat("Range: ", range).c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, &curl_slist_free_all);
  Response r;
  CURL* c = curl.get();
  Sink sink{c, &r.body, body.out_fd, &r.received};
  Upload upload{body.payload, body.in_fd, body.in_fd >= 0 ? body.in_size : body.payload.size()};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(c, CURLOPT_USERPWD, user.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(options_.timeout_seconds));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  // Large buffers: a blob streams in 1 MiB reads and sends, 512 KiB receives (libcurl's
  // defaults, 64 KiB and 16 KiB, cost a system call and a callback per small piece).
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10);
  if (absl::string_view(method) == "PUT") {
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20);
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, &Provide);
    curl_easy_setopt(c, CURLOPT_READDATA, &upload);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(upload.size));
  } else if (absl::string_view(method) == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  }
  const CURLcode rc = curl_easy_perform(c);
  if (upload.error != 0) {
    return absl::InternalError(absl::StrCat(what, ": cannot read the file being sent: ", std::strerror(upload.error)));
  }
  if (sink.error != 0) {
    return absl::InternalError(absl::StrCat(what, ": cannot write the object's bytes: ", std::strerror(sink.error)));
  }
  if (rc != CURLE_OK) {
    const absl::StatusCode sc = rc == CURLE_OPERATION_TIMEDOUT ? absl::StatusCode::kDeadlineExceeded
                                                                : absl::StatusCode::kUnavailable;
    return absl::Status(sc, absl::StrCat(what, ": ", curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_off_t declared = -1;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &declared) == CURLE_OK) r.declared = declared;
  return r;
}

absl::Status S3Client::Put(absl::string_view key, absl::string_view data) {
  const std::string what = absl::StrCat("S3 put ", key.substr(0, 256));
  Body body;
  body.payload = data;
  absl::StatusOr<Response> r = Request("PUT", ObjectPath(key), body, "", what);
  if (!r.ok()) return r.status();
  return r->status / 100 == 2 ? absl::OkStatus() : AnswerStatus(r->status, r->body, what);
}

absl::Status S3Client::PutFile(absl::string_view key, int fd, uint64_t size) {
  const std::string what = absl::StrCat("S3 put ", key.substr(0, 256));
  Body body;
  body.in_fd = fd;
  body.in_size = size;
  absl::StatusOr<Response> r = Request("PUT", ObjectPath(key), body, "", what);
  absl::Status s = !r.ok() ? r.status() : r->status / 100 == 2 ? absl::OkStatus() : AnswerStatus(r->status, r->body, what);
  // A server may keep what arrived of a put cut short (s3rver does): no partial object stays.
  if (!s.ok() && !r.ok()) Delete(key).IgnoreError();
  return s;
}

absl::StatusOr<uint64_t> S3Client::GetToFile(absl::string_view key, int fd) {
  const std::string what = absl::StrCat("S3 get ", key.substr(0, 256));
  Body body;
  body.out_fd = fd;
  absl::StatusOr<Response> r = Request("GET", ObjectPath(key), body, "", what);
  if (!r.ok()) return r.status();
  if (r->status / 100 != 2) return AnswerStatus(r->status, r->body, what);
  if (r->declared >= 0 && r->received != static_cast<uint64_t>(r->declared)) {
    return absl::DataLossError(absl::StrCat(what, ": received ", r->received, " of ", r->declared, " bytes"));
  }
  return r->received;
}

absl::StatusOr<std::string> S3Client::Get(absl::string_view key, uint64_t offset, uint64_t length) {
  const std::string what = absl::StrCat("S3 get ", key.substr(0, 256));
  std::string range;
  if (offset > 0 || length > 0) {
    range = length > 0 ? absl::StrCat("bytes=", offset, "-", offset + length - 1) : absl::StrCat("bytes=", offset, "-");
  }
  absl::StatusOr<Response> r = Request("GET", ObjectPath(key), Body(), range, what);
  if (!r.ok()) return r.status();
  if (r->status / 100 != 2) return AnswerStatus(r->status, r->body, what);
  // A server that ignored the range sent the whole object.
  if (r->status == 200 && !range.empty()) {
    if (offset >= r->body.size()) return std::string();
    return r->body.substr(offset, length > 0 ? length : std::string::npos);
  }
  return std::move(r->body);
}

absl::StatusOr<uint64_t> S3Client::SizeOf(absl::string_view key) {
  const std::string what = absl::StrCat("S3 head ", key.substr(0, 256));
  absl::StatusOr<Response> r = Request("HEAD", ObjectPath(key), Body(), "", what);
  if (!r.ok()) return r.status();
  if (r->status / 100 != 2) return AnswerStatus(r->status, r->body, what);
  if (r->declared < 0) return absl::InternalError(absl::StrCat(what, ": the answer has no Content-Length"));
  return static_cast<uint64_t>(r->declared);
}

absl::Status S3Client::Delete(absl::string_view key) {
  const std::string what = absl::StrCat("S3 delete ", key.substr(0, 256));
  absl::StatusOr<Response> r = Request("DELETE", ObjectPath(key), Body(), "", what);
  if (!r.ok()) return r.status();
  if (r->status / 100 == 2 || r->status == 404) return absl::OkStatus();
  return AnswerStatus(r->status, r->body, what);
}

absl::StatusOr<std::vector<std::string>> S3Client::List(absl::string_view prefix) {
  PARITY_ASSIGN_OR_RETURN(std::vector<Object> objects, ListObjects(prefix));
  std::vector<std::string> keys;
  keys.reserve(objects.size());
  for (Object& o : objects) keys.push_back(std::move(o.key));
  return keys;
}

absl::StatusOr<std::vector<S3Client::Object>> S3Client::ListObjects(absl::string_view prefix) {
  const std::string what = absl::StrCat("S3 list ", prefix.substr(0, 256));
  const std::string full = options_.prefix + std::string(prefix);
  std::vector<Object> objects;
  std::string last;  // the previous page's last key: the next page starts after it
  while (true) {
    std::string query = absl::StrCat("?list-type=2&prefix=", UriEncode(full, false));
    if (!last.empty()) absl::StrAppend(&query, "&start-after=", UriEncode(last, false));
    absl::StatusOr<Response> r = Request("GET", query, Body(), "", what);
    if (!r.ok()) return r.status();
    if (r->status / 100 != 2) return AnswerStatus(r->status, r->body, what);
    size_t at = 0;
    std::string contents;
    const size_t before = objects.size();
    while (NextElement(r->body, "Contents", &at, &contents)) {
      Object o;
      std::string size, modified;
      size_t in = 0;
      if (!NextElement(contents, "Key", &in, &last)) continue;
      in = 0;
      NextElement(contents, "Size", &in, &size);
      in = 0;
      NextElement(contents, "LastModified", &in, &modified);
      o.key = absl::StartsWith(last, options_.prefix) ? last.substr(options_.prefix.size()) : last;
      if (!absl::SimpleAtoi(size, &o.size)) o.size = 0;
      absl::Time t;
      std::string error;
      if (absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", modified, &t, &error)) o.modified_ms = absl::ToUnixMillis(t);
      objects.push_back(std::move(o));
    }
    std::string truncated;
    at = 0;
    NextElement(r->body, "IsTruncated", &at, &truncated);
    if (truncated != "true" || objects.size() == before) break;
  }
  return objects;
}

}  // namespace parity
