#include "server/storage/postgres.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace parity {

absl::StatusCode PostgresStateToStatus(absl::string_view s) {
  if (s.size() != 5) return absl::StatusCode::kInternal;
  const absl::string_view cls = s.substr(0, 2);
  if (cls == "23") return absl::StatusCode::kAlreadyExists;
  if (s == "40001" || s == "40P01") return absl::StatusCode::kAborted;
  if (cls == "53") return absl::StatusCode::kResourceExhausted;
  if (cls == "08" || s == "57P01" || s == "57P02" || s == "57P03") return absl::StatusCode::kUnavailable;
  if (s == "57014") return absl::StatusCode::kCancelled;
  if (s == "25006" || cls == "28") return absl::StatusCode::kFailedPrecondition;
  if (cls == "22") return absl::StatusCode::kInvalidArgument;
  if (s == "XX001" || s == "XX002") return absl::StatusCode::kDataLoss;
  return absl::StatusCode::kInternal;
}

std::string NumberParameters(absl::string_view sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    // Copies through the end of a quoted string or identifier ('' and "" escape the quote), or of
    // a comment.
    auto copy_until = [&](absl::string_view end) {
      const size_t stop = sql.find(end, i + 1);
      const size_t last = stop == absl::string_view::npos ? sql.size() : stop + end.size();
      out.append(sql.data() + i, last - i);
      i = last - 1;
    };
    if (c == '\'') {
      copy_until("'");
    } else if (c == '"') {
      copy_until("\"");
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      copy_until("\n");
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      copy_until("*/");
    } else if (c == '?') {
      // ?NNN (SQLite's numbered parameter) keeps its number; a bare ? takes the next one.
      size_t digits = i + 1;
      while (digits < sql.size() && absl::ascii_isdigit(static_cast<unsigned char>(sql[digits]))) ++digits;
      if (digits > i + 1) {
        const absl::string_view number = sql.substr(i + 1, digits - i - 1);
        absl::StrAppend(&out, "$", number);
        n = std::max(n, std::atoi(std::string(number).c_str()));
        i = digits - 1;
      } else {
        absl::StrAppend(&out, "$", ++n);
      }
    } else {
      out.push_back(c);
    }
  }
  *count = n;
  return out;
}

namespace {

constexpr Oid kByteaOid = 17;
constexpr Oid kBoolOid = 16;

// The status of a failed result (or of the connection when there is none).
absl::Status ResultStatus(PGconn* conn, const PGresult* r, absl::string_view what) {
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = r != nullptr ? PQresultErrorMessage(r) : "";
  if (msg.empty()) msg = PQerrorMessage(conn);
  absl::StatusCode code = state != nullptr ? PostgresStateToStatus(state) : absl::StatusCode::kInternal;
  if (state == nullptr && PQstatus(conn) != CONNECTION_OK) code = absl::StatusCode::kUnavailable;
  return absl::Status(code, absl::StrCat(what, ": ", absl::StripTrailingAsciiWhitespace(msg)));
}

// The text form of a double that PostgreSQL reads back to the same value.
std::string DoubleText(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// A bytea column in text form ("\x0a1b..."): its bytes.
std::string DecodeBytea(absl::string_view hex) {
  std::string out;
  if (!absl::ConsumePrefix(&hex, "\\x")) return std::string(hex);  // not hex output: as it is
  out.reserve(hex.size() / 2);
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  }
  return out;
}

class PostgresStatement;

// A connection and the statement whose rows are being read from it, if any: libpq runs one
// query at a time on a connection, so before another is sent the rows still to come of that
// one are read into memory (its Step then takes them from there).
struct Connection {
  PGconn* pg = nullptr;
  PostgresStatement* active = nullptr;
  void Yield(PostgresStatement* next);
};

class PostgresStatement final : public StatementDriver {
 public:
  // `name` empty: the SQL is sent with each execution.
  PostgresStatement(Connection* conn, std::string sql, std::string name, int params)
      : conn_(conn), sql_(std::move(sql)), name_(std::move(name)), owned_(params), values_(params, nullptr),
        lengths_(params, 0), formats_(params, 0) {}
  ~PostgresStatement() override { Finish(); }

  void BindInt(int i, int64_t v) override { Text(i, std::to_string(v)); }
  void BindDouble(int i, double v) override { Text(i, DoubleText(v)); }
  void BindText(int i, absl::string_view v, bool /*copy*/) override {
    // Text parameters travel NUL-terminated: always copied.
    Text(i, std::string(v));
  }
  void BindBlob(int i, absl::string_view v, bool copy) override {
    if (!Valid(i)) return;
    const size_t k = static_cast<size_t>(i - 1);
    if (copy) {
      owned_[k].assign(v.data(), v.size());
      values_[k] = owned_[k].data();
    } else {
      values_[k] = v.data() != nullptr ? v.data() : "";
    }
    lengths_[k] = static_cast<int>(v.size());
    formats_[k] = 1;  // binary bytea
  }
  void BindNull(int i) override {
    if (Valid(i)) values_[static_cast<size_t>(i - 1)] = nullptr;
  }

  absl::StatusOr<bool> Step() override {
    Clear();
    if (!running_) {
      if (absl::Status s = Send(); !s.ok()) return s;
    }
    PGresult* r = Next();
    if (r == nullptr) {
      Finish();
      return false;
    }
    switch (PQresultStatus(r)) {
      case PGRES_SINGLE_TUPLE:
        row_ = r;
        return true;
      case PGRES_TUPLES_OK:
      case PGRES_COMMAND_OK:
        PQclear(r);
        Finish();
        return false;
      default: {
        absl::Status s = ResultStatus(conn_->pg, r, "postgres");
        PQclear(r);
        Finish();
        return s;
      }
    }
  }
  void Reset() override {
    Finish();
    for (size_t k = 0; k < values_.size(); ++k) {
      values_[k] = nullptr;
      formats_[k] = 0;
    }
  }

  int64_t ColumnInt(int i) const override {
    const char* v = Value(i);
    if (v == nullptr) return 0;
    if (PQftype(row_, i) == kBoolOid) return v[0] == 't' ? 1 : 0;
    return std::strtoll(v, nullptr, 10);
  }
  double ColumnDouble(int i) const override {
    const char* v = Value(i);
    return v == nullptr ? 0.0 : std::strtod(v, nullptr);
  }
  absl::string_view ColumnBlob(int i) const override {
    const char* v = Value(i);
    if (v == nullptr) return absl::string_view();
    const absl::string_view text(v, static_cast<size_t>(PQgetlength(row_, 0, i)));
    if (PQftype(row_, i) != kByteaOid) return text;
    if (decoded_.size() <= static_cast<size_t>(i)) decoded_.resize(static_cast<size_t>(i) + 1);
    decoded_[static_cast<size_t>(i)] = DecodeBytea(text);
    return decoded_[static_cast<size_t>(i)];
  }
  bool ColumnIsNull(int i) const override { return Value(i) == nullptr; }

  // Reads the rest of this statement's results into memory (another query is about to be sent).
  void Buffer() {
    while (PGresult* r = PQgetResult(conn_->pg)) buffered_.push_back(r);
    on_wire_ = false;
  }

 private:
  bool Valid(int i) const { return i >= 1 && static_cast<size_t>(i) <= values_.size(); }
  void Text(int i, std::string v) {
    if (!Valid(i)) return;
    const size_t k = static_cast<size_t>(i - 1);
    owned_[k] = std::move(v);
    values_[k] = owned_[k].c_str();
    formats_[k] = 0;
  }
  absl::Status Send() {
    conn_->Yield(this);
    const int n = static_cast<int>(values_.size());
    const int sent = name_.empty() ? PQsendQueryParams(conn_->pg, sql_.c_str(), n, nullptr, values_.data(),
                                                       lengths_.data(), formats_.data(), 0)
                                   : PQsendQueryPrepared(conn_->pg, name_.c_str(), n, values_.data(),
                                                         lengths_.data(), formats_.data(), 0);
    if (sent != 1) return ResultStatus(conn_->pg, nullptr, "postgres send");
    PQsetSingleRowMode(conn_->pg);
    running_ = on_wire_ = true;
    conn_->active = this;
    return absl::OkStatus();
  }
  // The next result of the execution: from the connection, or from those read ahead.
  PGresult* Next() {
    if (on_wire_) return PQgetResult(conn_->pg);
    if (buffered_.empty()) return nullptr;
    PGresult* r = buffered_.front();
    buffered_.pop_front();
    return r;
  }
  // Column i of the current row, nullptr for NULL (or no row, or no such column).
  const char* Value(int i) const {
    if (row_ == nullptr || i < 0 || i >= PQnfields(row_) || PQgetisnull(row_, 0, i)) return nullptr;
    return PQgetvalue(row_, 0, i);
  }
  void Clear() {
    if (row_ != nullptr) PQclear(row_);
    row_ = nullptr;
  }
  // Ends the execution in progress: its remaining rows are read and dropped.
  void Finish() {
    Clear();
    if (on_wire_) {
      while (PGresult* r = PQgetResult(conn_->pg)) PQclear(r);
    }
    for (PGresult* r : buffered_) PQclear(r);
    buffered_.clear();
    if (conn_->active == this) conn_->active = nullptr;
    running_ = on_wire_ = false;
  }

  // Constant after construction.
  Connection* const conn_;
  const std::string sql_;   // numbered parameters
  const std::string name_;  // the server-side prepared statement, or ""

  std::vector<std::string> owned_;  // copies of bound values
  std::vector<const char*> values_;
  std::vector<int> lengths_, formats_;
  bool running_ = false;  // executed and not finished
  bool on_wire_ = false;  // its results still come from the connection (else buffered_)
  std::deque<PGresult*> buffered_;
  PGresult* row_ = nullptr;
  mutable std::vector<std::string> decoded_;  // bytea columns of the current row
};

void Connection::Yield(PostgresStatement* next) {
  if (active != nullptr && active != next) active->Buffer();
  active = nullptr;
}

class PostgresDatabase final : public DatabaseDriver {
 public:
  explicit PostgresDatabase(PGconn* conn) { conn_.pg = conn; }
  ~PostgresDatabase() override { PQfinish(conn_.pg); }

  SqlDialect dialect() const override { return SqlDialect::kPostgres; }
  absl::Status Exec(absl::string_view sql) override {
    conn_.Yield(nullptr);
    PGresult* r = PQexec(conn_.pg, std::string(sql).c_str());
    const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    absl::Status s = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? absl::OkStatus()
                                                                     : ResultStatus(conn_.pg, r, "postgres");
    PQclear(r);
    return s;
  }
  absl::StatusOr<std::unique_ptr<StatementDriver>> Prepare(absl::string_view sql, bool keep) override {
    int params = 0;
    std::string numbered = NumberParameters(sql, &params);
    std::string name;
    if (keep) {
      conn_.Yield(nullptr);
      name = absl::StrCat("parity_", ++prepared_);
      PGresult* r = PQprepare(conn_.pg, name.c_str(), numbered.c_str(), params, nullptr);
      const bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
      absl::Status s =
          ok ? absl::OkStatus() : ResultStatus(conn_.pg, r, absl::StrCat("prepare '", sql.substr(0, 60), "'"));
      PQclear(r);
      if (!s.ok()) return s;
    }
    return std::make_unique<PostgresStatement>(&conn_, std::move(numbered), std::move(name), params);
  }
  absl::string_view BeginSql() const override { return "BEGIN"; }

 private:
  Connection conn_;
  int prepared_ = 0;  // statements prepared on the server so far (their names)
};

void IgnoreNotice(void*, const char*) {}

}  // namespace

absl::StatusOr<Database> OpenPostgres(const std::string& uri) {
  PGconn* conn = PQconnectdb(uri.c_str());
  if (conn == nullptr) return absl::ResourceExhaustedError("postgres: out of memory for a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg(absl::StripTrailingAsciiWhitespace(PQerrorMessage(conn)));
    PQfinish(conn);
    // The server answered and refused the login, or could not be reached at all.
    const bool refused = absl::StrContains(msg, "authentication") || absl::StrContains(msg, "does not exist") ||
                         absl::StrContains(msg, "no pg_hba.conf entry");
    return absl::Status(refused ? absl::StatusCode::kFailedPrecondition : absl::StatusCode::kUnavailable,
                        absl::StrCat("cannot connect to PostgreSQL: ", msg));
  }
  // Notices (an index that already exists, ...) are not errors: not printed on stderr.
  PQsetNoticeProcessor(conn, &IgnoreNotice, nullptr);
  return Database(std::make_unique<PostgresDatabase>(conn));
}

}  // namespace parity
