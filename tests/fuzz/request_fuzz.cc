// The daemon's request validator: a sequence of Ingest.Upload requests handed to a real
// UploadSession over a real Core (SQLite file and spool in a temporary directory), the way the
// service does, with every event converted to its proto. Each input is one upload stream.
//
// Input: records of [2-byte little-endian length][serialized parity.v1.UploadRequest]; a record
// that does not parse is skipped (gRPC would end the stream; nothing to validate). A status
// from the session ends the stream, as it does in the service. Each record is read as parityd
// reads it (IncomingUpload, from three slices), which must give protobuf's message.
//
// PARITY_FUZZ_WRITE_SEEDS=DIR writes the seed corpus (a golden upload of every data mode, a
// target upload compared against it by label, malformed items) to DIR and exits.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "parity/v1/parity.pb.h"
#include "server/convert.h"
#include "server/core/core.h"
#include "server/core/upload_session.h"
#include "server/upload_message.h"

namespace parity {
namespace {

Core* g_core = nullptr;

grpc::ByteBuffer ThreeSlices(const char* bytes, size_t n) {
  grpc::Slice slices[3] = {grpc::Slice(bytes, n / 3), grpc::Slice(bytes + n / 3, n / 3),
                           grpc::Slice(bytes + 2 * (n / 3), n - 2 * (n / 3))};
  return grpc::ByteBuffer(slices, 3);
}

// IncomingUpload's message (its data put back) must be protobuf's. A NaN (a statistic, say)
// equals itself here: MessageDifferencer's default calls two NaNs different.
void ExpectTheSameMessage(const IncomingUpload& in, const v1::UploadRequest& parsed) {
  v1::UploadRequest got = in.request();
  std::string data;
  for (absl::string_view piece : in.data()) data.append(piece.data(), piece.size());
  if (got.has_chunk() && !data.empty()) got.mutable_chunk()->set_data(data);
  google::protobuf::util::DefaultFieldComparator nan_equal;
  nan_equal.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&nan_equal);
  if (!differencer.Compare(got, parsed)) std::abort();
}

std::string Frame(const std::vector<v1::UploadRequest>& msgs) {
  std::string out;
  for (const v1::UploadRequest& m : msgs) {
    const std::string b = m.SerializeAsString();
    if (b.size() > 0xffff) std::abort();
    out.push_back(static_cast<char>(b.size() & 0xff));
    out.push_back(static_cast<char>(b.size() >> 8));
    out += b;
  }
  return out;
}

v1::UploadRequest Start(v1::Side side, bool against_label) {
  v1::UploadRequest r;
  v1::UploadStart* s = r.mutable_start();
  s->mutable_new_run()->set_project("fuzz");
  s->mutable_new_run()->set_side(side);
  (*s->mutable_new_run()->mutable_labels())["model"] = "m";
  if (against_label) {
    s->mutable_against_label()->set_key("model");
    s->mutable_against_label()->set_value("m");
    s->mutable_job_config()->set_policy(v1::POLICY_MSPROBE);
  }
  return r;
}

v1::UploadRequest Header(const std::string& name, int64_t index, v1::DataMode mode, int n,
                         uint32_t crc) {
  v1::UploadRequest r;
  v1::TensorHeader* h = r.mutable_header();
  h->mutable_key()->set_name(name);
  h->mutable_key()->set_api("Functional.add.0.forward");
  h->mutable_key()->set_op_type("add");
  h->mutable_key()->set_phase(v1::PHASE_FORWARD);
  h->mutable_key()->set_role(v1::ROLE_OUTPUT);
  h->mutable_key()->set_index(index);
  h->set_dtype(v1::DTYPE_FLOAT32);
  h->add_shape(n);
  h->set_data_mode(mode);
  h->set_byte_length(mode == v1::DATA_MODE_DATA ? 4u * n : 0);
  h->mutable_stats()->set_max(1);
  h->mutable_stats()->set_min(0);
  h->mutable_stats()->set_mean(0.5);
  h->mutable_stats()->set_norm(1);
  if (mode != v1::DATA_MODE_STATS) h->set_crc32(crc);
  return r;
}

v1::UploadRequest Chunk(uint64_t offset, const std::string& data) {
  v1::UploadRequest r;
  r.mutable_chunk()->set_offset(offset);
  r.mutable_chunk()->set_data(data);
  return r;
}

v1::UploadRequest End() {
  v1::UploadRequest r;
  r.mutable_end();
  return r;
}

void WriteSeeds(const std::string& dir) {
  const std::string data(16, '\0');  // four float32 zeros; CRC-32 0x2144df1c
  const uint32_t crc = 0x2144df1cu;
  auto write = [&](const char* name, const std::vector<v1::UploadRequest>& msgs) {
    const std::string bytes = Frame(msgs);
    FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
    std::fclose(f);
  };
  write("golden", {Start(v1::SIDE_GOLDEN, false), Header("a.output.0", 0, v1::DATA_MODE_DATA, 4, crc),
                   Chunk(0, data.substr(0, 8)), Chunk(8, data.substr(8)),
                   Header("b.output.0", 1, v1::DATA_MODE_STATS, 4, 0),
                   Header("c.output.0", 2, v1::DATA_MODE_CRC, 4, crc), End()});
  v1::UploadRequest flush;
  flush.mutable_flush();
  write("target", {Start(v1::SIDE_TARGET, true), Header("a.output.0", 0, v1::DATA_MODE_CRC, 4, 1),
                   flush, Header("a.output.0", 0, v1::DATA_MODE_DATA, 4, crc), Chunk(0, data),
                   Header("b.output.0", 1, v1::DATA_MODE_STATS, 4, 0), End()});
  v1::UploadRequest unknown_dtype = Header("d.output.0", 3, v1::DATA_MODE_STATS, 4, 0);
  unknown_dtype.mutable_header()->set_dtype(static_cast<v1::DType>(999));
  v1::UploadRequest scalar = Header("e.input.1", 4, v1::DATA_MODE_STATS, 4, 0);
  scalar.mutable_header()->clear_shape();
  scalar.mutable_header()->set_scalar_value("3");
  scalar.mutable_header()->set_scalar_type("int");
  v1::UploadRequest by_ref = Header("f.output.0", 5, v1::DATA_MODE_DATA, 4, crc);
  by_ref.mutable_header()->set_by_reference(true);
  by_ref.mutable_header()->set_content_sha256(std::string(64, 'a'));
  write("malformed", {Start(v1::SIDE_GOLDEN, false), Header("a/../x", 0, v1::DATA_MODE_DATA, 4, crc),
                      Chunk(4, data), Header("a.output.0", -1, v1::DATA_MODE_DATA, 1 << 30, crc),
                      Header("a.output.0", 1, v1::DATA_MODE_DATA, 4, crc), Chunk(0, data + data),
                      unknown_dtype, scalar, by_ref, End(), End()});
}

}  // namespace
}  // namespace parity

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace parity;
  if (const char* seeds = std::getenv("PARITY_FUZZ_WRITE_SEEDS")) {
    WriteSeeds(seeds);
    std::exit(0);
  }
  parity::SetMinLogLevel(parity::LogLevel::kError);  // one info line per upload slows it down
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/parity-request-fuzz-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) std::abort();
  CoreOptions options;
  options.data_dir = dir;
  options.fsync = false;
  options.compare_workers = 1;
  options.max_tensor_bytes = 1u << 20;
  options.max_chunk_bytes = 64u << 10;
  options.max_items_per_run = 64;
  options.min_free_disk_bytes = 0;
  auto core = Core::Open(options);
  if (!core.ok()) {
    std::fprintf(stderr, "request_fuzz: %s\n", core.status().ToString().c_str());
    std::abort();
  }
  g_core = core->release();  // lives for the process; the fuzzer exits without destroying it
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parity;
  UploadSession session(g_core, [](UploadEvent e) {
    v1::UploadResponse out;
    ToProto(e, &out);
  });
  size_t p = 0;
  while (p + 2 <= size) {
    const size_t n = data[p] | (static_cast<size_t>(data[p + 1]) << 8);
    p += 2;
    if (n > size - p) break;
    v1::UploadRequest msg;
    const bool parsed = msg.ParseFromArray(data + p, static_cast<int>(n));
    // As parityd reads it: from gRPC's slices (here three), a chunk's data left in them.
    IncomingUpload in;
    grpc::ByteBuffer buffer = ThreeSlices(reinterpret_cast<const char*>(data + p), n);
    const bool read = in.Parse(&buffer).ok();
    p += n;
    if (read != parsed) std::abort();
    if (!parsed) continue;
    ExpectTheSameMessage(in, msg);
    if (!ApplyUploadRequest(session, in.request(), in.data()).ok()) break;
  }
  return 0;
}
