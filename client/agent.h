// parity-agent: uploads a dump to parityd and prints the verdicts as they arrive.
#ifndef PARITY_CLIENT_AGENT_H_
#define PARITY_CLIENT_AGENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/file_util.h"

namespace parity {

struct UploadOptions {
  std::string path;
  std::string server;
  std::string project;
  std::string role;  // "golden" or "target"
  std::string run_name;
  std::map<std::string, std::string> labels;
  std::string against_run_id;
  std::string against_label_key, against_label_value;
  std::map<std::string, std::string> against_extra_labels;  // e.g. the same step and rank
  int32_t rank = 0;
  int64_t step = 0;
  std::string policy;      // "", msprobe, forge, torch
  std::string config_path;
  std::string run_id_file;  // write the new run's id here
  // full: tensor data; stats: statistics only; crc: CRC-32 and statistics; auto: CRC-32 and
  // statistics first, then the data of the items the server asks for (their CRC or statistics
  // disagree with the golden side).
  std::string mode = "full";
  int64_t retry_seconds = 300;       // reconnect and resume for this long after a lost connection
  int64_t max_bytes_per_second = 0;  // 0: unlimited
  // --follow: keep watching `path` while a model writes it; upload each tensor once its file is
  // complete; stop when `end_marker` appears in `path` (and everything is sent) or after
  // `idle_timeout_seconds` without a new complete item.
  int64_t read_ahead = 4;  // tensors loaded ahead of the network (0: load each just before sending)
  bool follow = false;
  // Offer content hashes of tensors >= 64 KiB and send only what the server does not hold.
  bool dedup = true;
  std::string tls_ca, tls_cert, tls_key, token;  // see ConfigureClient
  std::string end_marker = "parity.done";
  int64_t idle_timeout_seconds = 600;
  bool json = false;
  bool color = false;
};

// Exit code: 0 all pass (or no job), 1 precision failures, 2 usage/system error or rejected items.
int RunUpload(const UploadOptions& o, std::ostream& out, std::ostream& err);

// One rank of an msprobe dump tree: step*/rank*/dump.json or rank*/dump.json.
struct RankDump {
  std::string path;
  std::string step, rank;  // the numbers in the folder names ("" when absent)
};
// The rank directories under `path`, sorted by step then rank number; {path} itself when it is
// not such a tree. When `listing` is set and `path` is a directory returned as itself after
// being listed, *listing receives that listing (ListDirectory's), for OpenDump; else it is reset.
std::vector<RankDump> FindRankDumps(const std::string& path,
                                    std::optional<std::vector<DirEntry>>* listing = nullptr);

// `parity-agent ARGS...` (argv without the program name).
int RunAgentCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace parity

#endif  // PARITY_CLIENT_AGENT_H_
