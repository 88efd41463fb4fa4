// parityd: the comparator daemon. Flags are parsed here only, into ServerOptions.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

#ifdef PARITY_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/args.h"
#include "common/base/cpus.h"
#include "common/base/file_util.h"
#include "common/base/logging.h"
#include "common/base/memory.h"
#include "common/base/mutex_mode.h"
#include "common/checks/msprobe_kernel.h"
#include "common/formats/dump_structure.h"
#include "server/server.h"
#include "server/storage/s3.h"
#include "server/storage/store.h"

namespace {
using parity::LogLevel;

enum class FlagGroup { kServing, kStorage, kUploads, kComparison };

struct FlagDef {
  FlagGroup group;
  const char* name;   // without the leading "--"
  const char* value;  // the value's name in --help; "" for a boolean flag
  const char* default_value;
  const char* help;
};

constexpr FlagDef kFlags[] = {
    {FlagGroup::kServing, "listen", "ADDR", "127.0.0.1:50051",
     "Address to listen on (port 0: any free port)."},
    {FlagGroup::kServing, "port-file", "FILE", "",
     "If set, write the listening port here once serving."},
    {FlagGroup::kServing, "tls-cert", "FILE", "",
     "PEM server certificate (chain); enables TLS (with --tls-key)."},
    {FlagGroup::kServing, "tls-key", "FILE", "",
     "PEM private key of --tls-cert."},
    {FlagGroup::kServing, "tls-client-ca", "FILE", "",
     "PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS)."},
    {FlagGroup::kServing, "auth", "MODE", "none",
     "none: no tokens (loopback only unless --insecure-listen-any); tokens: every RPC needs a "
     "bearer token whose role and project allow it (parity token create)."},
    {FlagGroup::kServing, "admin-token-file", "FILE", "",
     "With --auth=tokens: when no admin token exists, create one and write it here (0600)."},
    {FlagGroup::kServing, "reflection", "", "true",
     "Serve gRPC server reflection (the public API's proto, without a token); false turns it off."},
    {FlagGroup::kServing, "insecure-listen-any", "", "false",
     "Allow listening on a non-loopback address without TLS and --auth=tokens (logged loudly)."},
    {FlagGroup::kServing, "max-watches", "N", "256",
     "Concurrent Jobs.Watch streams (parity watch); more get RESOURCE_EXHAUSTED. No thread waits "
     "for a watched job."},
    {FlagGroup::kServing, "max-watches-per-project", "N", "64",
     "Concurrent watches of one project's jobs. 0: no share."},
    {FlagGroup::kServing, "http-listen", "ADDR", "",
     "Also serve HTTP here (off when empty): the dashboard at /, the JSON API at /api/v1/, "
     "Prometheus metrics at /metrics. HTTPS with --tls-cert; tokens as for gRPC "
     "(Authorization: Bearer); the same loopback rule as --listen."},
    {FlagGroup::kServing, "http-port-file", "FILE", "",
     "If set, write the HTTP listening port here once serving."},
    {FlagGroup::kServing, "http-threads", "N", "8",
     "Threads answering HTTP requests (1 to 256); connections wait in the kernel's backlog "
     "while all are busy."},
    {FlagGroup::kServing, "http-max-event-streams", "N", "4",
     "Concurrent HTTP event streams (a job page following a running job), each holding an HTTP "
     "thread; more get 429. Less than --http-threads."},
    {FlagGroup::kServing, "shutdown-grace-seconds", "SECONDS", "30",
     "On SIGINT/SIGTERM, time for uploads in flight to finish (new ones are refused with "
     "UNAVAILABLE; watches end at once; other calls get at most 2 s of it)."},
    {FlagGroup::kStorage, "data-dir", "DIR", "parity-data",
     "Directory for parity.db (SQLite) and spool/."},
    {FlagGroup::kStorage, "store", "URI", "",
     "Keep runs, items, jobs and results in this PostgreSQL database "
     "(postgresql://USER@HOST:PORT/DB; its tables are created if it has none) instead of "
     "DIR/parity.db. A password goes in ~/.pgpass or PGPASSFILE, never in the URI. Tensor bytes "
     "stay in DIR/spool/ unless --blobs is set."},
    {FlagGroup::kStorage, "blobs", "URL", "",
     "Also keep every tensor blob in this S3-compatible bucket (s3://BUCKET[/PREFIX]"
     "?endpoint=URL[&region=R]; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), "
     "shared by the daemons of one --store; DIR/spool/ then holds local copies."},
    {FlagGroup::kStorage, "blob-cache-seconds", "SECONDS", "3600",
     "With --blobs: drop local copies older than this at each collection."},
    {FlagGroup::kStorage, "job-lease-seconds", "SECONDS", "10",
     "With a PostgreSQL --store: a daemon compares a job while it holds the job's lease, renewed "
     "every third of this; another daemon takes over a job whose lease expired (its daemon died) "
     "and resumes it from the stored results."},
    {FlagGroup::kStorage, "job-takeover-wait-seconds", "SECONDS", "60",
     "With a PostgreSQL --store: how long the other daemons leave an orphaned job whose target is "
     "still being uploaded to the daemon its agent reconnects to."},
    {FlagGroup::kStorage, "blob-gc-grace-seconds", "SECONDS", "86400",
     "With --blobs: delete a bucket's blob that no item references once it is older than this "
     "(longer than any upload takes between sending a tensor and its acknowledgement)."},
    {FlagGroup::kStorage, "fsync", "", "true",
     "fsync tensor blobs before acknowledging them."},
    {FlagGroup::kStorage, "group-sync", "", "true",
     "With --fsync: make the blobs of a store transaction durable together (one syncfs) instead "
     "of two fsyncs per blob; still before they are acknowledged."},
    {FlagGroup::kStorage, "spool-quota-bytes", "BYTES", "68719476736",
     "Disk quota of the tensor spool, in bytes."},
    {FlagGroup::kStorage, "database-quota-bytes", "BYTES", "34359738368",
     "Refuse new uploads and items while the store (parity.db and its write-ahead log, or the "
     "PostgreSQL database) holds this many bytes "
     "(metadata, statistics, non-tensor values, results). 0: no quota."},
    {FlagGroup::kStorage, "min-free-disk-bytes", "BYTES", "67108864",
     "Refuse new uploads and tensor data while the data directory's disk has less free space."},
    {FlagGroup::kStorage, "spool-retention-hours", "HOURS", "168",
     "Drop tensor data of complete runs older than this that no running job needs."},
    {FlagGroup::kStorage, "gc-interval-seconds", "SECONDS", "600",
     "How often retention runs (0: only at start-up)."},
    {FlagGroup::kStorage, "inline-max-bytes", "BYTES", "4096",
     "Tensors of at most this many bytes (0 to 65536) keep their data in the database row of "
     "their item instead of a spool file; 0: every tensor's data goes to the spool."},
    {FlagGroup::kStorage, "spool-direct-min-bytes", "BYTES", "65536",
     "Tensor blobs of at least this many bytes are written with O_DIRECT, past the page cache "
     "(0: never): a fresh page-cache page costs more than the write itself."},
    {FlagGroup::kStorage, "spool-unique-key-min-bytes", "BYTES", "65536",
     "Tensor blobs of at least this many bytes are named by a unique key, not by their "
     "content's SHA-256 (0: never): no hash while receiving; the hash is taken from disk when a "
     "dedup probe first matches the blob (the agent probes tensors of 64 KiB or more). Smaller "
     "blobs are stored once per content."},
    {FlagGroup::kStorage, "spool-io-threads", "N", "2",
     "Threads writing O_DIRECT blob stages to disk (1 to 64); each blob keeps at most four 1 "
     "MiB stages in flight."},
    {FlagGroup::kStorage, "spool-stage-bytes", "BYTES", "33554432",
     "O_DIRECT staging buffers (1 MiB each) in use over all blobs: a blob takes up to four "
     "within this budget; one that finds none left is written through the page cache. A blob "
     "held in memory for a comparison (--held-blob-bytes) takes none: it is written from its "
     "held copy. 0: every blob through the page cache."},
    {FlagGroup::kStorage, "held-blob-bytes", "BYTES", "134217728",
     "Blobs written with O_DIRECT for a run a running job compares are also kept in memory, up "
     "to this many bytes, until compared (not read back from disk); 0: never."},
    {FlagGroup::kStorage, "max-pending-writes", "N", "4096",
     "Database writes queued before producers wait."},
    {FlagGroup::kStorage, "max-pending-writes-per-project", "N", "1024",
     "Database writes of one project queued before its producers wait (the writer takes turns "
     "between projects, so one project's flood of items does not delay another's)."},
    {FlagGroup::kUploads, "max-streams", "N", "64",
     "Concurrent uploads; more get RESOURCE_EXHAUSTED."},
    {FlagGroup::kUploads, "max-streams-per-project", "N", "32",
     "Concurrent uploads of one project (counted from the stream's start with a project's token, "
     "from its UploadStart otherwise), so that one project cannot take every slot. 0: no share."},
    {FlagGroup::kUploads, "max-streams-per-token", "N", "16",
     "Concurrent uploads with one token. 0: no share."},
    {FlagGroup::kUploads, "max-tensor-bytes", "BYTES", "4294967296",
     "Largest tensor accepted, in bytes."},
    {FlagGroup::kUploads, "max-run-file-bytes", "BYTES", "268435456",
     "Largest stack.json or construct.json a run carries, in bytes (held in memory while it "
     "arrives)."},
    {FlagGroup::kUploads, "max-run-file-memory-bytes", "BYTES", "536870912",
     "Most bytes of run files (stack.json, construct.json) all uploads may hold while they "
     "arrive; a part beyond it is refused."},
    {FlagGroup::kUploads, "max-chunk-bytes", "BYTES", "1048576",
     "Largest upload chunk, in bytes."},
    {FlagGroup::kUploads, "max-items-per-run", "N", "2000000",
     "Items per run."},
    {FlagGroup::kUploads, "upload-idle-timeout-seconds", "SECONDS", "900",
     "An upload sending nothing this long while the server waits for it is ended "
     "(DEADLINE_EXCEEDED; its run can be resumed). 0: no limit. Keep it above the agents' "
     "--idle-timeout when they use --follow. Only progress resets the clock: a message that "
     "starts the upload, carries an item or ends it (a Flush does not)."},
    {FlagGroup::kUploads, "upload-start-timeout-seconds", "SECONDS", "30",
     "A stream that has not sent its UploadStart this long after opening is ended "
     "(DEADLINE_EXCEEDED). 0: no limit."},
    {FlagGroup::kUploads, "max-stream-buffer-bytes", "BYTES", "4194304",
     "Received upload messages waiting to be handled, per stream, in bytes; reading pauses "
     "above it."},
    {FlagGroup::kUploads, "max-buffered-bytes", "BYTES", "33554432",
     "The same over all streams together; streams pause reading above it."},
    {FlagGroup::kUploads, "max-outgoing-messages", "N", "65536",
     "Responses queued per upload stream."},
    {FlagGroup::kUploads, "stream-window-bytes", "BYTES", "1048576",
     "HTTP/2 receive window per stream, fixed (64 KiB to 1 GiB; gRPC's bandwidth-delay probing "
     "off): uploads then have at most --max-streams times this in flight. With probing off an "
     "upload pair moves about 0.6 MB per network round trip whatever this size (measured: 210 "
     "MB/s at 1 ms, 30 MB/s at 20 ms). 0: gRPC's automatic window, for distant agents (400-700 "
     "MB/s at 20 ms), bounded by --grpc-memory-bytes (without it: 3.5 GB with 64 busy streams "
     "on loopback)."},
    {FlagGroup::kUploads, "grpc-memory-bytes", "BYTES", "134217728",
     "gRPC's memory quota, at least 4 MiB (its HTTP/2 read buffers and received messages not "
     "yet taken): as it fills, gRPC grants smaller automatic windows; at the limit it cancels a "
     "stream (RESOURCE_EXHAUSTED, 'Received RST_STREAM with error code 11'), which parity-agent "
     "resumes (resending the tensor in flight). At the default fixed window 64 busy streams did "
     "not reach it; with --stream-window-bytes 0 and 64 busy streams it was, cancelling up to "
     "31 streams in a run. Received chunks waiting to be handled keep their data in gRPC's "
     "buffers (no copy) when this is at least twice --max-buffered-bytes, and are copied out "
     "at once otherwise. 0: unbounded."},
    {FlagGroup::kUploads, "ingest-workers", "N", "4",
     "Threads handling upload messages."},
    {FlagGroup::kComparison, "compare-workers", "N", "2",
     "Threads comparing tensor pairs."},
    {FlagGroup::kComparison, "kernel-threads", "N", "0",
     "Threads splitting one large tensor's metric pass (0: the CPUs this process may use, after "
     "its affinity and cgroup CPU quota; results do not depend on it)."},
    {FlagGroup::kComparison, "compare-queue", "N", "64",
     "Comparisons queued for the compare workers."},
    {FlagGroup::kComparison, "run-cache-items", "N", "100000",
     "Items of complete runs kept in memory for the next job comparing them (about 0.6 KiB "
     "each); 0: every job reads its runs from the database."},
    {FlagGroup::kComparison, "run-cache-data-bytes", "BYTES", "67108864",
     "Inline tensor data (see --inline-max-bytes) the run cache may hold in all."},
    {FlagGroup::kComparison, "sort-cache-entries", "N", "4",
     "Finished jobs' sorted result listings kept in memory (about 32 bytes per result each), and "
     "as many of their plotted metrics (9 bytes per result each); 0: off."},
};

const char* GroupTitle(FlagGroup g) {
  switch (g) {
    case FlagGroup::kServing: return "serving (address, TLS, tokens)";
    case FlagGroup::kStorage: return "storage (the data directory: its database and tensor spool)";
    case FlagGroup::kUploads: return "uploads (limits per stream and over all streams)";
    case FlagGroup::kComparison: return "comparison (threads, queues, caches)";
  }
  return "";
}

// Appends `text` to `out` in lines of at most 100 columns from column `indent`; the first line
// continues what `out` ends with (at column `column`), the others start with `indent` spaces.
void Wrap(const std::string& text, size_t column, size_t indent, std::string* out) {
  constexpr size_t kWidth = 100;
  std::istringstream words(text);
  std::string word;
  bool first_word = true;
  while (words >> word) {
    if (!first_word && column + 1 + word.size() > kWidth) {
      absl::StrAppend(out, "\n", std::string(indent, ' '));
      column = indent;
      first_word = true;
    }
    if (!first_word) {
      out->push_back(' ');
      ++column;
    }
    out->append(word);
    column += word.size();
    first_word = false;
  }
  out->push_back('\n');
}

std::string HelpText() {
  std::string out =
      "usage: parityd [--data-dir DIR] [--listen ADDR] [options]\n\n"
      "The Parity comparator daemon: receives dumps from parity-agent, pairs golden and target\n"
      "tensors, compares them, stores every result in DIR/parity.db (SQLite) and answers the\n"
      "parity CLI. A flag's value follows it (--flag VALUE or --flag=VALUE); a boolean flag is\n"
      "--flag or --flag=false. SIGINT or SIGTERM stops it, letting calls in flight finish.\n";
  constexpr size_t kHelpColumn = 36;
  for (FlagGroup g : {FlagGroup::kServing, FlagGroup::kStorage, FlagGroup::kUploads,
                      FlagGroup::kComparison}) {
    absl::StrAppend(&out, "\n", GroupTitle(g), ":\n");
    for (const FlagDef& f : kFlags) {
      if (f.group != g) continue;
      std::string line = absl::StrCat("  --", f.name, *f.value ? " " : "", f.value);
      if (line.size() + 2 > kHelpColumn) {
        absl::StrAppend(&out, line, "\n");
        line.clear();
      }
      line.resize(kHelpColumn, ' ');
      out += line;
      const std::string d = f.default_value;
      const bool show_default = !d.empty() && d != "false";
      // "(default X)" stays on one line: '\x01' holds it together through Wrap.
      Wrap(absl::StrCat(f.help, show_default ? absl::StrCat(" (default\x01", d, ")") : ""), kHelpColumn,
           kHelpColumn, &out);
      std::replace(out.begin(), out.end(), '\x01', ' ');
    }
  }
  return out + "\n  -h, --help                        show this help\n"
               "  --version                         print parityd's version\n";
}

// The flags' values as given (or their defaults), read as text, booleans and checked integers.
class FlagValues {
 public:
  FlagValues() {
    for (const FlagDef& f : kFlags) {
      if (*f.value == '\0') {
        bools_[f.name] = std::string(f.default_value) == "true";
      } else {
        text_[f.name] = f.default_value;
      }
    }
  }

  // Parses the command line. Returns -1 to go on, else the exit code (after --help, --version
  // or a usage error, which it prints).
  int Parse(int argc, char** argv) {
    parity::Args args;
    for (auto& [name, value] : text_) args.Value("--" + name, &value);
    for (auto& [name, value] : bools_) args.Bool("--" + name, &value);
    bool version = false;
    args.Bool("--version", &version);
    std::vector<std::string> positional;
    bool help = false;
    std::string error, unknown;
    if (!args.Parse(std::vector<std::string>(argv + 1, argv + argc), &positional, &help, &error,
                    &unknown)) {
      std::cerr << (unknown.empty() ? "parityd: " + error
                                    : parity::UnknownFlagMessage("parityd", unknown, HelpText()))
                << "\n";
      return 2;
    }
    if (help) {
      std::cout << HelpText();
      return 0;
    }
    if (version) {
      std::cout << parity::kParitydVersion << "\n";
      return 0;
    }
    if (!positional.empty()) {
      std::cerr << "parityd: unexpected argument '" << positional[0]
                << "' (parityd takes flags only; parityd --help lists them)\n";
      return 2;
    }
    return -1;
  }

  const std::string& Text(const std::string& name) const { return text_.at(name); }
  bool Bool(const std::string& name) const { return bools_.at(name); }

  // The integer flag `name` if it lies in [min, max], else an error naming the flag.
  absl::StatusOr<int64_t> Int(const std::string& name, int64_t min,
                              int64_t max = std::numeric_limits<int64_t>::max()) const {
    int64_t v = 0;
    if (!absl::SimpleAtoi(Text(name), &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " takes an integer, got '", Text(name), "'"));
    }
    if (v >= min && v <= max) return v;
    if (max == std::numeric_limits<int64_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be at least ", min, ", got ", v));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be between ", min, " and ", max, ", got ", v));
  }

 private:
  std::map<std::string, std::string> text_;
  std::map<std::string, bool> bools_;
};

// Reads the integer flag `name` (checked against [min, max]) into `*dst`; keeps the first error.
class IntReader {
 public:
  explicit IntReader(const FlagValues& flags) : flags_(flags) {}
  template <typename T>
  void operator()(const std::string& name, T* dst, int64_t min,
                  int64_t max = std::numeric_limits<int64_t>::max()) {
    absl::StatusOr<int64_t> v = flags_.Int(name, min, max);
    if (!v.ok()) {
      if (status_.ok()) status_ = v.status();
      return;
    }
    *dst = static_cast<T>(*v);
  }
  const absl::Status& status() const { return status_; }

 private:
  const FlagValues& flags_;
  absl::Status status_;
};

// Limits whose 0 (or less) would refuse every upload, stall it for good or leave a queue
// unbounded are refused, as are thread counts out of range.
absl::Status ReadLimits(const FlagValues& flags, parity::ServerOptions* o) {
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
  IntReader read(flags);
  parity::CoreOptions& c = o->core;
  parity::IngestOptions& i = o->ingest;
  read("compare-workers", &c.compare_workers, 1, 1024);
  read("ingest-workers", &o->ingest_workers, 1, 1024);
  read("max-streams", &i.max_streams, 1, 1 << 20);
  read("max-streams-per-project", &i.max_streams_per_project, 0, 1 << 20);
  read("max-streams-per-token", &i.max_streams_per_token, 0, 1 << 20);
  read("max-watches", &o->watch.max_watches, 1, 1 << 20);
  read("max-watches-per-project", &o->watch.max_watches_per_project, 0, 1 << 20);
  read("compare-queue", &c.compare_queue, 1);
  read("max-pending-writes", &c.max_pending_writes, 1);
  read("max-pending-writes-per-project", &c.max_pending_writes_per_project, 1);
  read("max-buffered-bytes", &i.max_buffered_bytes, 1);
  read("max-stream-buffer-bytes", &i.max_stream_buffer_bytes, 1);
  read("max-outgoing-messages", &i.max_outgoing_messages, 1);
  read("max-items-per-run", &c.max_items_per_run, 1);
  read("max-tensor-bytes", &c.max_tensor_bytes, 1);
  read("max-chunk-bytes", &c.max_chunk_bytes, 1, 64 << 20);
  read("max-run-file-bytes", &c.max_run_file_bytes, 1, static_cast<int64_t>(parity::kMaxStructureFileBytes));
  read("max-run-file-memory-bytes", &c.max_run_file_memory_bytes, 1);
  read("spool-quota-bytes", &c.spool_quota_bytes, 0);
  read("min-free-disk-bytes", &c.min_free_disk_bytes, 0);
  read("database-quota-bytes", &c.database_quota_bytes, 0);
  read("spool-direct-min-bytes", &c.spool_direct_min_bytes, 0);
  read("spool-io-threads", &c.spool_io_threads, 1, 64);
  read("spool-stage-bytes", &c.spool_stage_bytes, 0);
  read("spool-unique-key-min-bytes", &c.spool_unique_key_min_bytes, 0);
  read("held-blob-bytes", &c.held_blob_bytes, 0);
  read("inline-max-bytes", &c.inline_max_bytes, 0, 65536);
  read("run-cache-items", &c.run_cache_items, 0);
  read("run-cache-data-bytes", &c.run_cache_data_bytes, 0);
  read("sort-cache-entries", &c.sort_cache_entries, 0, kAny);
  read("gc-interval-seconds", &c.gc_interval_seconds, 0);
  read("blob-cache-seconds", &c.blob_cache_seconds, 0);
  read("blob-gc-grace-seconds", &c.blob_gc_grace_seconds, 600);
  read("job-lease-seconds", &c.job_lease_seconds, 1, 3600);
  read("job-takeover-wait-seconds", &c.job_takeover_wait_seconds, 0, 86400);
  read("upload-idle-timeout-seconds", &i.upload_idle_timeout_seconds, 0);
  read("upload-start-timeout-seconds", &i.upload_start_timeout_seconds, 0);
  int64_t hours = 0;
  read("spool-retention-hours", &hours, 0, kAny / 3600);
  c.spool_retention_seconds = hours * 3600;
  read("stream-window-bytes", &o->stream_window_bytes, 0, 1 << 30);
  read("grpc-memory-bytes", &o->grpc_memory_bytes, 0);
  read("http-threads", &o->http.threads, 1, 256);
  read("http-max-event-streams", &o->http.max_event_streams, 1, 255);
  if (!read.status().ok()) return read.status();
  if (o->http.max_event_streams >= o->http.threads) {
    return absl::InvalidArgumentError(absl::StrCat("--http-max-event-streams (", o->http.max_event_streams,
                                                   ") must be less than --http-threads (", o->http.threads,
                                                   "): event streams would take every thread"));
  }
  // A blob goes to a bucket in one request, which S3 caps at 5 GiB.
  if (!c.blobs.empty() && c.max_tensor_bytes > (5ull << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-tensor-bytes (", c.max_tensor_bytes,
                                                   ") must be at most 5368709120 with --blobs: a tensor goes to the "
                                                   "bucket in one request, which S3 limits to 5 GiB"));
  }
  if (o->stream_window_bytes != 0 && o->stream_window_bytes < (64 << 10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stream-window-bytes must be 0 or between 65536 and 1073741824, got ", o->stream_window_bytes));
  }
  if (o->grpc_memory_bytes != 0 && o->grpc_memory_bytes < (4u << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grpc-memory-bytes must be 0 or at least 4194304, got ", o->grpc_memory_bytes));
  }
  return absl::OkStatus();
}

// TLS files (read into PEM contents) and the token mode.
absl::Status ReadSecurity(const FlagValues& flags, parity::ServerOptions* o) {
  const std::string& cert = flags.Text("tls-cert");
  const std::string& key = flags.Text("tls-key");
  const std::string& ca = flags.Text("tls-client-ca");
  if (cert.empty() != key.empty()) return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  if (!ca.empty() && cert.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  o->http.tls_cert_file = cert;
  o->http.tls_key_file = key;
  o->http.tls_client_ca_file = ca;
  for (const auto& [path, dst] : {std::pair<std::string, std::string*>{cert, &o->tls_cert_pem},
                                  {key, &o->tls_key_pem}, {ca, &o->tls_client_ca_pem}}) {
    if (path.empty()) continue;
    absl::StatusOr<std::string> pem = parity::ReadFileToString(path, 1 << 20);
    if (!pem.ok()) return absl::InvalidArgumentError(absl::StrCat("cannot read TLS file: ", pem.status().message()));
    *dst = *pem;
  }
  const std::string& auth = flags.Text("auth");
  if (auth != "none" && auth != "tokens") {
    return absl::InvalidArgumentError(absl::StrCat("--auth must be none or tokens, got '", auth, "'"));
  }
  o->require_tokens = auth == "tokens";
  o->reflection = flags.Bool("reflection");
  o->admin_token_file = flags.Text("admin-token-file");
  return absl::OkStatus();
}

void Log(LogLevel level, const std::string& msg, const std::string& fields = "") {
  parity::LogLine(level, "parityd", msg, fields);
}

// An error when `listen` is beyond loopback unprotected without --insecure-listen-any (then a
// loud warning).
absl::Status CheckAddress(const parity::ServerOptions& o, const std::string& listen, bool insecure_listen_any) {
  const bool tls = !o.tls_cert_pem.empty();
  if ((tls && o.require_tokens) || parity::IsLoopbackAddress(listen)) return absl::OkStatus();
  if (!insecure_listen_any) {
    return absl::InvalidArgumentError(
        tls ? absl::StrCat("refusing to listen on ", listen,
                           " without tokens; add --auth=tokens or use a loopback address")
            : absl::StrCat("refusing to listen on ", listen,
                           " without TLS; use a loopback address or --insecure-listen-any"));
  }
  Log(LogLevel::kWarning, absl::StrCat("LISTENING ON ", listen,
                                       tls ? " WITHOUT TOKENS: anyone with a certificate can upload and read"
                                           : " WITHOUT TLS: data (and tokens) travel in clear text"));
  return absl::OkStatus();
}

// Logs how the daemon is protected; an error when it would listen beyond loopback unprotected
// without --insecure-listen-any (gRPC and HTTP alike).
absl::Status CheckExposure(const parity::ServerOptions& o, bool insecure_listen_any) {
  Log(LogLevel::kInfo, o.require_tokens ? "tokens required on every call"
                                         : "tokens off (--auth=none): every caller may do everything");
  const bool tls = !o.tls_cert_pem.empty();
  if (tls) {
    Log(LogLevel::kInfo, absl::StrCat("TLS on", o.tls_client_ca_pem.empty() ? "" : ", client certificates required"));
  } else {
    Log(LogLevel::kInfo, "TLS off (no --tls-cert): plaintext, loopback only unless --insecure-listen-any");
  }
  if (absl::Status s = CheckAddress(o, o.listen, insecure_listen_any); !s.ok()) return s;
  if (o.http.listen.empty()) return absl::OkStatus();
  return CheckAddress(o, o.http.listen, insecure_listen_any);
}

// The malloc this binary runs with: "jemalloc-<version>" when linked with it, else "glibc".
std::string AllocatorName() {
#ifdef PARITY_WITH_JEMALLOC
  const char* version = nullptr;
  size_t len = sizeof(version);
  if (mallctl("version", &version, &len, nullptr, 0) == 0 && version != nullptr) {
    // "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c": the release is enough.
    const std::string v(version);
    return "jemalloc-" + v.substr(0, v.find('-'));
  }
  return "jemalloc";
#else
  return "glibc";
#endif
}

// --store: "" or a PostgreSQL URI without a password (the command line is visible to every user
// of the machine).
absl::Status CheckStoreUri(const std::string& uri) {
  if (uri.empty()) return absl::OkStatus();
  if (!parity::IsPostgresStore(uri)) {
    return absl::InvalidArgumentError(
        "--store: not a PostgreSQL URI (postgresql://USER@HOST:PORT/DB); without it the store is DIR/parity.db");
  }
  const absl::string_view rest = absl::string_view(uri).substr(uri.find("://") + 3);
  const absl::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  const size_t at = authority.rfind('@');
  const bool password_in_user = at != absl::string_view::npos && authority.substr(0, at).find(':') != absl::string_view::npos;
  if (password_in_user || absl::StrContains(uri, "password=")) {
    return absl::InvalidArgumentError(
        "--store: the URI holds a password, which every user of this machine can read on the command line; "
        "put it in ~/.pgpass (or the file PGPASSFILE names) instead");
  }
  return absl::OkStatus();
}

// The options the flags give; an error names the flag at fault.
absl::Status ReadOptions(const FlagValues& flags, parity::ServerOptions* o) {
  o->listen = flags.Text("listen");
  o->http.listen = flags.Text("http-listen");
  o->core.data_dir = flags.Text("data-dir");
  o->core.store = flags.Text("store");
  if (absl::Status s = CheckStoreUri(o->core.store); !s.ok()) return s;
  o->core.blobs = flags.Text("blobs");
  if (!o->core.blobs.empty()) {
    // Checked here, so that a malformed URL names the flag before anything opens.
    if (absl::StatusOr<parity::S3Options> s3 = parity::ParseS3Url(o->core.blobs); !s3.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--blobs: ", s3.status().message()));
    }
  }
  o->core.fsync = flags.Bool("fsync");
  o->core.group_sync = flags.Bool("group-sync");
  if (absl::Status s = ReadLimits(flags, o); !s.ok()) return s;
  if (absl::Status s = ReadSecurity(flags, o); !s.ok()) return s;
  absl::StatusOr<int64_t> kt = flags.Int("kernel-threads", 0, 4096);
  if (!kt.ok()) return kt.status();
  parity::SetKernelThreads(*kt > 0 ? static_cast<int>(*kt) : parity::UsableCpus());
  // Held blobs (and golden blobs read back) live in the pooled buffers: kept mapped between
  // uploads up to what may be held, rather than unmapped and faulted in again by the next
  // upload; in use and idle together within what may be held and 128 MiB more (blobs being
  // received and golden blobs read back). With 64 MiB more, the small blobs of a dump's second
  // half pushed out the idle 16 MiB buffers of its first, and every upload mapped (and the
  // kernel zeroed) some 60 MiB afresh; the other 64 MiB can add as much to the resident peak
  // when many streams keep the pool busy (docs/performance.md).
  const uint64_t keep = std::max<uint64_t>(128ull << 20, o->core.held_blob_bytes);
  parity::SetPooledBufferLimits(keep, keep + (128ull << 20));
  return absl::OkStatus();
}

void WritePortFile(const std::string& port_file, int port) {
  if (port_file.empty()) return;
  const std::string tmp = port_file + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%d\n", port);
    std::fclose(f);
    std::rename(tmp.c_str(), port_file.c_str());
  }
}
}  // namespace

int main(int argc, char** argv) {
  parity::UseReleaseMutexMode();
  FlagValues flags;
  if (const int code = flags.Parse(argc, argv); code >= 0) return code;
  parity::KeepFreedTensorMemory(64 << 20);  // glibc malloc only (jemalloc reuses freed pages for 10 s)
  // Everything parityd creates — the data directory, parity.db and its journal, the spool, the
  // admin token file — is its user's alone (0700 directories, 0600 files).
  ::umask(077);

  // A write to a connection its peer closed (an HTTP client gone mid-answer) fails with EPIPE
  // instead of ending the daemon.
  ::signal(SIGPIPE, SIG_IGN);
  // Block the shutdown signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  parity::ServerOptions o;
  absl::StatusOr<int64_t> grace = flags.Int("shutdown-grace-seconds", 0);
  absl::Status s = grace.ok() ? ReadOptions(flags, &o) : grace.status();
  if (s.ok()) s = CheckExposure(o, flags.Bool("insecure-listen-any"));
  if (!s.ok()) {
    Log(LogLevel::kError, std::string(s.message()));
    return 2;
  }
  absl::StatusOr<std::unique_ptr<parity::ParityServer>> server = parity::ParityServer::Start(o);
  if (!server.ok()) {
    Log(LogLevel::kError, "cannot start", absl::StrCat("error=\"", server.status().ToString(), "\""));
    return 2;
  }
  if ((*server)->http_port() > 0) {
    Log(LogLevel::kInfo, "serving HTTP", absl::StrCat("http_listen=", o.http.listen, " http_port=", (*server)->http_port()));
  }
  Log(LogLevel::kInfo, "serving", absl::StrCat("listen=", o.listen, " port=", (*server)->port(),
                                               " data_dir=", o.core.data_dir,
                                               o.core.store.empty() ? "" : " store=", o.core.store,
                                               o.core.blobs.empty() ? "" : " blobs=", o.core.blobs,
                                               " allocator=", AllocatorName()));
  // The gRPC port file last: whoever waits for it finds the HTTP one already there.
  if ((*server)->http_port() > 0) WritePortFile(flags.Text("http-port-file"), (*server)->http_port());
  WritePortFile(flags.Text("port-file"), (*server)->port());
  int sig = 0;
  sigwait(&signals, &sig);
  Log(LogLevel::kInfo, "shutting down", absl::StrCat("signal=", sig));
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(*grace));
  {
    // The parts' peaks (not at the same moment), to compare with the flags bounding them.
    const parity::PooledBufferPeaks pool = parity::PooledBufferPeakBytes();
    Log(LogLevel::kInfo, "memory peaks",
        absl::StrCat("upload_buffered_mib=", (*server)->ingest().buffered_high_water() >> 20,
                     " pooled_in_use_mib=", pool.in_use_bytes >> 20,
                     " pooled_mapped_mib=", pool.mapped_bytes >> 20));
  }
  server->reset();
  Log(LogLevel::kInfo, "stopped");
  return 0;
}
