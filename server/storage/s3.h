// A client of an S3-compatible object store (AWS S3, MinIO, Ceph RGW): the shared blob storage of
// several daemons (docs/scale-out.md). Requests go through libcurl, which signs them with
// Signature Version 4 (CURLOPT_AWS_SIGV4); each carries its payload's SHA-256
// (x-amz-content-sha256). Path-style URLs: ENDPOINT/BUCKET/KEY.
//
// Errors: NOT_FOUND for a missing key or bucket, PERMISSION_DENIED for refused credentials or
// signatures, UNAVAILABLE for a server that cannot be reached, answers 5xx or asks to slow down,
// DEADLINE_EXCEEDED for a request over its timeout, INTERNAL otherwise; each message names the
// request and, when the server sent one, its S3 error code and message.
//
// Thread-safe: each request takes a libcurl handle of its own from a pool, whose handles keep
// their connections open for the next request (at most 16 kept idle).
#ifndef PARITY_SERVER_STORAGE_S3_H_
#define PARITY_SERVER_STORAGE_S3_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace parity {

struct S3Options {
  std::string endpoint;        // "http://127.0.0.1:9000" or "https://s3.eu-west-1.amazonaws.com"
  std::string bucket;
  std::string prefix;          // prepended to every key ("parity/" or "")
  std::string region = "us-east-1";
  std::string access_key, secret_key;
  int timeout_seconds = 120;   // per request
};

// "s3://BUCKET[/PREFIX]?endpoint=URL[&region=REGION]": the options, with the credentials from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (never from the URL, which a command line shows).
// INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<S3Options> ParseS3Url(absl::string_view url);

class S3Client {
 public:
  static absl::StatusOr<std::unique_ptr<S3Client>> Open(S3Options options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Stores `data` under `key` (replacing what was there).
  absl::Status Put(absl::string_view key, absl::string_view data);
  // Stores the first `size` bytes of the open file `fd` (read with pread from offset 0) under
  // `key`, streamed: memory does not grow with the size. The payload is sent unsigned
  // (x-amz-content-sha256: UNSIGNED-PAYLOAD, as S3 allows), so the file is read once; TLS
  // protects it in transit. One request: objects up to S3's 5 GiB single-put limit. A put cut
  // short (the file ends early, the connection fails) deletes whatever the server kept of it.
  absl::Status PutFile(absl::string_view key, int fd, uint64_t size);
  // The object's bytes [offset, offset + length); length 0: to its end.
  absl::StatusOr<std::string> Get(absl::string_view key, uint64_t offset = 0, uint64_t length = 0);
  // Writes the whole object to the open file `fd` from its current offset, streamed; returns
  // the bytes written (DATA_LOSS when fewer than the answer declared).
  absl::StatusOr<uint64_t> GetToFile(absl::string_view key, int fd);
  // The object's size (a HEAD request).
  absl::StatusOr<uint64_t> SizeOf(absl::string_view key);
  // OK whether or not the key existed.
  absl::Status Delete(absl::string_view key);
  // Every key under `prefix` (the options' prefix left out), in the store's order (UTF-8 binary
  // order for S3), all pages (each page asked for after the previous page's last key).
  absl::StatusOr<std::vector<std::string>> List(absl::string_view prefix);
  struct Object {
    std::string key;  // the options' prefix left out
    uint64_t size = 0;
    int64_t modified_ms = 0;  // LastModified, milliseconds since the epoch
  };
  // As List, with each object's size and last modification.
  absl::StatusOr<std::vector<Object>> ListObjects(absl::string_view prefix);

 private:
  explicit S3Client(S3Options o) : options_(std::move(o)) {}
  // A handle from the pool (a new one when it is empty), and back into it.
  void* TakeHandle();
  void ReturnHandle(void* handle);
  // A request's body and where a successful answer's body goes.
  struct Body {
    absl::string_view payload;  // sent when in_fd < 0
    int in_fd = -1;             // else the first in_size bytes of this file, unsigned
    uint64_t in_size = 0;
    int out_fd = -1;            // a 2xx answer's body is written here (Response::received)
  };
  struct Response {
    long status = 0;
    std::string body;        // an answer's body, unless written to Body::out_fd
    uint64_t received = 0;   // bytes written to Body::out_fd
    int64_t declared = -1;   // Content-Length of the answer, -1 when absent
  };
  // One signed request: `method` on `path_and_query` (after ENDPOINT/BUCKET).
  absl::StatusOr<Response> Request(const char* method, const std::string& path_and_query, const Body& body,
                                   const std::string& range, absl::string_view what);
  std::string ObjectPath(absl::string_view key) const;

  // Constant after construction.
  const S3Options options_;

  absl::Mutex mu_;
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);  // CURL handles
};

}  // namespace parity

#endif  // PARITY_SERVER_STORAGE_S3_H_
