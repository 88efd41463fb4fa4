// parityd: the comparator daemon. Flags are parsed here only, into ServerOptions.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>

#ifdef PARITY_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/cpus.h"
#include "common/base/file_util.h"
#include "common/base/logging.h"
#include "common/base/memory.h"
#include "common/checks/msprobe_kernel.h"
#include "common/base/mutex_mode.h"
#include "server/server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "Address to listen on (port 0: any free port).");
ABSL_FLAG(std::string, data_dir, "parity-data", "Directory for parity.db (SQLite) and spool/.");
ABSL_FLAG(int, compare_workers, 2, "Threads comparing tensor pairs.");
ABSL_FLAG(int, kernel_threads, 0,
          "Threads splitting one large tensor's metric pass (0: the CPUs this process may use, after "
          "its affinity and cgroup CPU quota; results do not depend on it).");
ABSL_FLAG(int, ingest_workers, 4, "Threads handling upload messages.");
ABSL_FLAG(int, max_streams, 64, "Concurrent uploads; more get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int32_t, stream_window_bytes, 1 << 20,
          "HTTP/2 receive window per stream, fixed (64 KiB to 1 GiB; gRPC's bandwidth-delay "
          "probing off): uploads then have at most --max_streams times this in flight. With "
          "probing off an upload pair moves about 0.6 MB per network round trip whatever this "
          "size (measured: 210 MB/s at 1 ms, 30 MB/s at 20 ms). 0: gRPC's automatic window, for "
          "distant agents (400-700 MB/s at 20 ms), bounded by --grpc_memory_bytes (without it: "
          "3.5 GB with 64 busy streams on loopback).");
ABSL_FLAG(uint64_t, grpc_memory_bytes, 128ull << 20,
          "gRPC's memory quota, at least 4 MiB (its HTTP/2 read buffers and received messages not "
          "yet taken): as it fills, gRPC grants smaller automatic windows; at the limit it cancels "
          "a stream (RESOURCE_EXHAUSTED, 'Received RST_STREAM with error code 11'), which "
          "parity-agent resumes (resending the tensor in flight). At the default fixed window 64 "
          "busy streams did not reach it; with --stream_window_bytes 0 and 64 busy streams it "
          "was, cancelling up to 31 streams in a run. 0: unbounded.");
ABSL_FLAG(uint64_t, max_tensor_bytes, 4ull << 30, "Largest tensor accepted, in bytes.");
ABSL_FLAG(uint64_t, max_chunk_bytes, 1u << 20, "Largest upload chunk, in bytes.");
ABSL_FLAG(int64_t, max_items_per_run, 2000000, "Items per run.");
ABSL_FLAG(uint64_t, spool_quota_bytes, 64ull << 30, "Disk quota of the tensor spool, in bytes.");
ABSL_FLAG(uint64_t, min_free_disk_bytes, 64ull << 20,
          "Refuse new uploads and tensor data while the data directory's disk has less free space.");
ABSL_FLAG(uint64_t, max_pending_writes, 4096, "Database writes queued before producers wait.");
ABSL_FLAG(int32_t, sort_cache_entries, 4,
          "Finished jobs' sorted result listings kept in memory (about 32 bytes per result each; 0: off).");
ABSL_FLAG(uint64_t, max_outgoing_messages, 65536, "Responses queued per upload stream.");
ABSL_FLAG(int64_t, upload_idle_timeout_seconds, 900,
          "An upload sending nothing this long while the server waits for it is ended "
          "(DEADLINE_EXCEEDED; its run can be resumed). 0: no limit. Keep it above the agents' "
          "--idle-timeout when they use --follow.");
ABSL_FLAG(uint64_t, max_stream_buffer_bytes, 4u << 20,
          "Received upload messages waiting to be handled, per stream, in bytes; reading pauses "
          "above it.");
ABSL_FLAG(uint64_t, max_buffered_bytes, 32u << 20,
          "The same over all streams together; streams pause reading above it.");
ABSL_FLAG(int, compare_queue, 64, "Comparisons queued for the compare workers.");
ABSL_FLAG(int64_t, spool_retention_hours, 168,
          "Drop tensor data of complete runs older than this that no running job needs.");
ABSL_FLAG(int64_t, gc_interval_seconds, 600, "How often retention runs (0: only at start-up).");
ABSL_FLAG(bool, fsync, true, "fsync tensor blobs before acknowledging them.");
ABSL_FLAG(bool, group_sync, true,
          "With --fsync: make the blobs of a store transaction durable together (one syncfs) "
          "instead of two fsyncs per blob; still before they are acknowledged.");
ABSL_FLAG(uint64_t, spool_direct_min_bytes, 64 << 10,
          "Tensor blobs of at least this many bytes are written with O_DIRECT, past the page "
          "cache (0: never): a fresh page-cache page costs more than the write itself.");
ABSL_FLAG(uint64_t, spool_unique_key_min_bytes, 64 << 10,
          "Tensor blobs of at least this many bytes are named by a unique key, not by their "
          "content's SHA-256 (0: never): no hash while receiving; the hash is taken from disk "
          "when a dedup probe first matches the blob (the agent probes tensors of 64 KiB or "
          "more). Smaller blobs are stored once per content.");
ABSL_FLAG(int, spool_io_threads, 2,
          "Threads writing O_DIRECT blob stages to disk (1 to 64); each blob keeps at most four "
          "1 MiB stages in flight.");
ABSL_FLAG(uint64_t, spool_stage_bytes, 32ull << 20,
          "O_DIRECT staging buffers (1 MiB each) in use over all blobs: a blob takes up to four "
          "within this budget; one that finds none left is written through the page cache. A "
          "blob held in memory for a comparison (--held_blob_bytes) takes none: it is written "
          "from its held copy. 0: every blob through the page cache.");
ABSL_FLAG(uint64_t, held_blob_bytes, 128ull << 20,
          "Blobs written with O_DIRECT for a run a running job compares are also kept in memory, "
          "up to this many bytes, until compared (not read back from disk); 0: never.");
ABSL_FLAG(uint64_t, inline_max_bytes, 4096,
          "Tensors of at most this many bytes (0 to 65536) keep their data in the database row "
          "of their item instead of a spool file; 0: every tensor's data goes to the spool.");
ABSL_FLAG(uint64_t, run_cache_items, 100000,
          "Items of complete runs kept in memory for the next job comparing them (about 0.6 KiB "
          "each); 0: every job reads its runs from the database.");
ABSL_FLAG(uint64_t, run_cache_data_bytes, 64ull << 20,
          "Inline tensor data (see --inline_max_bytes) the run cache may hold in all.");
ABSL_FLAG(int, shutdown_grace_seconds, 30, "On SIGINT/SIGTERM, time for calls in flight to finish.");
ABSL_FLAG(std::string, port_file, "", "If set, write the listening port here once serving.");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate (chain); enables TLS (with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS).");
ABSL_FLAG(std::string, auth, "none",
          "none: no tokens (loopback only unless --insecure_listen_any); tokens: every RPC needs a "
          "bearer token whose role and project allow it (parity token create).");
ABSL_FLAG(std::string, admin_token_file, "",
          "With --auth=tokens: when no admin token exists, create one and write it here (0600).");
ABSL_FLAG(bool, insecure_listen_any, false,
          "Allow listening on a non-loopback address without TLS and --auth=tokens (logged loudly).");

namespace {
using parity::LogLevel;
void Log(LogLevel level, const std::string& msg, const std::string& fields = "") {
  parity::LogLine(level, "parityd", msg, fields);
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
}  // namespace

int main(int argc, char** argv) {
  parity::UseReleaseMutexMode();
  absl::SetProgramUsageMessage("the Parity comparator daemon.\n  parityd --data_dir DIR [--listen ADDR]");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return std::string(parity::kParitydVersion) + "\n"; };
  // --help lists parityd's own flags (not Abseil's), under "parityd" rather than a build path.
  usage.normalize_filename = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc") ? std::string("parityd") : std::string(file);
  };
  usage.contains_help_flags = [](absl::string_view file) { return file == "parityd"; };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  parity::KeepFreedTensorMemory(64 << 20);  // glibc malloc only (jemalloc reuses freed pages for 10 s)

  // Block the shutdown signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  parity::ServerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.core.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.core.compare_workers = absl::GetFlag(FLAGS_compare_workers);
  {
    const int kt = absl::GetFlag(FLAGS_kernel_threads);
    parity::SetKernelThreads(kt > 0 ? kt : parity::UsableCpus());
  }
  o.core.compare_queue = static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_compare_queue)));
  o.core.max_tensor_bytes = absl::GetFlag(FLAGS_max_tensor_bytes);
  o.core.max_chunk_bytes = absl::GetFlag(FLAGS_max_chunk_bytes);
  o.core.max_items_per_run = absl::GetFlag(FLAGS_max_items_per_run);
  o.core.spool_quota_bytes = absl::GetFlag(FLAGS_spool_quota_bytes);
  o.core.min_free_disk_bytes = absl::GetFlag(FLAGS_min_free_disk_bytes);
  o.core.fsync = absl::GetFlag(FLAGS_fsync);
  o.core.group_sync = absl::GetFlag(FLAGS_group_sync);
  o.core.spool_direct_min_bytes = absl::GetFlag(FLAGS_spool_direct_min_bytes);
  o.core.spool_io_threads = absl::GetFlag(FLAGS_spool_io_threads);
  o.core.spool_stage_bytes = absl::GetFlag(FLAGS_spool_stage_bytes);
  o.core.spool_unique_key_min_bytes = absl::GetFlag(FLAGS_spool_unique_key_min_bytes);
  o.core.held_blob_bytes = absl::GetFlag(FLAGS_held_blob_bytes);
  // Held blobs (and golden blobs read back) live in the pooled buffers: kept mapped between
  // uploads up to what may be held, rather than unmapped and faulted in again by the next
  // upload; in use and idle together within what may be held and 64 MiB of reads.
  {
    const uint64_t keep = std::max<uint64_t>(128ull << 20, o.core.held_blob_bytes);
    parity::SetPooledBufferLimits(keep, keep + (64ull << 20));
  }
  o.core.inline_max_bytes = absl::GetFlag(FLAGS_inline_max_bytes);
  o.core.run_cache_items = static_cast<size_t>(absl::GetFlag(FLAGS_run_cache_items));
  o.core.run_cache_data_bytes = absl::GetFlag(FLAGS_run_cache_data_bytes);
  o.core.max_pending_writes = absl::GetFlag(FLAGS_max_pending_writes);
  o.core.sort_cache_entries = std::max(0, absl::GetFlag(FLAGS_sort_cache_entries));
  o.core.spool_retention_seconds = absl::GetFlag(FLAGS_spool_retention_hours) * 3600;
  o.core.gc_interval_seconds = absl::GetFlag(FLAGS_gc_interval_seconds);
  o.ingest.max_streams = absl::GetFlag(FLAGS_max_streams);
  o.ingest.max_outgoing_messages = absl::GetFlag(FLAGS_max_outgoing_messages);
  o.ingest.max_stream_buffer_bytes = absl::GetFlag(FLAGS_max_stream_buffer_bytes);
  o.ingest.max_buffered_bytes = absl::GetFlag(FLAGS_max_buffered_bytes);
  o.ingest.upload_idle_timeout_seconds = std::max<int64_t>(0, absl::GetFlag(FLAGS_upload_idle_timeout_seconds));
  o.ingest_workers = absl::GetFlag(FLAGS_ingest_workers);
  o.stream_window_bytes = absl::GetFlag(FLAGS_stream_window_bytes);
  if (o.stream_window_bytes != 0 && (o.stream_window_bytes < (64 << 10) || o.stream_window_bytes > (1 << 30))) {
    Log(LogLevel::kError, absl::StrCat("--stream_window_bytes must be 0 or between 65536 and 1073741824, got ",
                                       o.stream_window_bytes));
    return 2;
  }
  o.grpc_memory_bytes = absl::GetFlag(FLAGS_grpc_memory_bytes);
  if (o.grpc_memory_bytes != 0 && o.grpc_memory_bytes < (4u << 20)) {
    Log(LogLevel::kError, absl::StrCat("--grpc_memory_bytes must be 0 or at least 4194304, got ",
                                       o.grpc_memory_bytes));
    return 2;
  }

  // Limits whose 0 (or less) would refuse every upload, stall it for good or leave a queue
  // unbounded, and thread counts.
  {
    struct Range {
      const char* flag;
      int64_t value, min, max;
    };
    const int64_t kMax = std::numeric_limits<int64_t>::max();
    auto as_signed = [](uint64_t v) {
      return static_cast<int64_t>(std::min<uint64_t>(v, static_cast<uint64_t>(kMax)));
    };
    const Range ranges[] = {
        {"max_streams", o.ingest.max_streams, 1, 1 << 20},
        {"compare_workers", o.core.compare_workers, 1, 1024},
        {"ingest_workers", o.ingest_workers, 1, 1024},
        {"compare_queue", absl::GetFlag(FLAGS_compare_queue), 1, kMax},
        {"max_pending_writes", as_signed(o.core.max_pending_writes), 1, kMax},
        {"max_buffered_bytes", as_signed(o.ingest.max_buffered_bytes), 1, kMax},
        {"max_stream_buffer_bytes", as_signed(o.ingest.max_stream_buffer_bytes), 1, kMax},
        {"max_outgoing_messages", as_signed(o.ingest.max_outgoing_messages), 1, kMax},
        {"max_items_per_run", o.core.max_items_per_run, 1, kMax},
        {"max_tensor_bytes", as_signed(o.core.max_tensor_bytes), 1, kMax},
    };
    for (const Range& r : ranges) {
      if (r.value < r.min || r.value > r.max) {
        Log(LogLevel::kError, r.max == kMax ? absl::StrCat("--", r.flag, " must be at least ",
                                                           r.min, ", got ", r.value)
                                            : absl::StrCat("--", r.flag, " must be between ", r.min,
                                                           " and ", r.max, ", got ", r.value));
        return 2;
      }
    }
  }
  if (o.core.spool_io_threads < 1 || o.core.spool_io_threads > 64) {
    Log(LogLevel::kError, absl::StrCat("--spool_io_threads must be between 1 and 64, got ",
                                       o.core.spool_io_threads));
    return 2;
  }
  if (o.core.inline_max_bytes > 65536) {
    Log(LogLevel::kError, absl::StrCat("--inline_max_bytes must be between 0 and 65536, got ",
                                       o.core.inline_max_bytes));
    return 2;
  }
  if (o.core.max_chunk_bytes == 0 || o.core.max_chunk_bytes > (64u << 20)) {
    Log(LogLevel::kError, "--max_chunk_bytes must be between 1 and 64 MiB");
    return 2;
  }
  {
    const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key);
    const std::string ca = absl::GetFlag(FLAGS_tls_client_ca);
    if (cert.empty() != key.empty()) {
      Log(LogLevel::kError, "--tls_cert and --tls_key go together");
      return 2;
    }
    if (!ca.empty() && cert.empty()) {
      Log(LogLevel::kError, "--tls_client_ca needs --tls_cert and --tls_key");
      return 2;
    }
    for (const auto& [path, dst] : {std::pair<std::string, std::string*>{cert, &o.tls_cert_pem},
                                    {key, &o.tls_key_pem}, {ca, &o.tls_client_ca_pem}}) {
      if (path.empty()) continue;
      absl::StatusOr<std::string> pem = parity::ReadFileToString(path, 1 << 20);
      if (!pem.ok()) {
        Log(LogLevel::kError, absl::StrCat("cannot read TLS file: ", pem.status().message()));
        return 2;
      }
      *dst = *pem;
    }
  }
  const std::string auth = absl::GetFlag(FLAGS_auth);
  if (auth != "none" && auth != "tokens") {
    Log(LogLevel::kError, absl::StrCat("--auth must be none or tokens, got '", auth, "'"));
    return 2;
  }
  o.require_tokens = auth == "tokens";
  o.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  Log(LogLevel::kInfo, o.require_tokens ? "tokens required on every call"
                                         : "tokens off (--auth=none): every caller may do everything");
  const bool tls = !o.tls_cert_pem.empty();
  if (tls) {
    Log(LogLevel::kInfo, absl::StrCat("TLS on", o.tls_client_ca_pem.empty() ? "" : ", client certificates required"));
  } else {
    Log(LogLevel::kInfo, "TLS off (no --tls_cert): plaintext, loopback only unless --insecure_listen_any");
  }
  if ((!tls || !o.require_tokens) && !parity::IsLoopbackAddress(o.listen)) {
    if (!absl::GetFlag(FLAGS_insecure_listen_any)) {
      if (tls) {
        Log(LogLevel::kError, absl::StrCat("refusing to listen on ", o.listen,
                                           " without tokens; add --auth=tokens or use a loopback address"));
        return 2;
      }
      Log(LogLevel::kError, absl::StrCat("refusing to listen on ", o.listen,
                                         " without TLS; use a loopback address or --insecure_listen_any"));
      return 2;
    }
    Log(LogLevel::kWarning, absl::StrCat("LISTENING ON ", o.listen,
                                         tls ? " WITHOUT TOKENS: anyone with a certificate can upload and read"
                                             : " WITHOUT TLS: data (and tokens) travel in clear text"));
  }
  absl::StatusOr<std::unique_ptr<parity::ParityServer>> server = parity::ParityServer::Start(o);
  if (!server.ok()) {
    Log(LogLevel::kError, "cannot start", absl::StrCat("error=\"", server.status().ToString(), "\""));
    return 2;
  }
  Log(LogLevel::kInfo, "serving", absl::StrCat("listen=", o.listen, " port=", (*server)->port(),
                                               " data_dir=", o.core.data_dir,
                                               " allocator=", AllocatorName()));
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d\n", (*server)->port());
      std::fclose(f);
      std::rename(tmp.c_str(), port_file.c_str());
    }
  }
  int sig = 0;
  sigwait(&signals, &sig);
  Log(LogLevel::kInfo, "shutting down", absl::StrCat("signal=", sig));
  (*server)->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
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
