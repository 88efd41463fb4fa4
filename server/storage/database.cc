#include "server/storage/database.h"

#include <utility>

namespace parity {

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> r = Step();
    if (!r.ok()) return r.status();
    if (!*r) return absl::OkStatus();
  }
}

Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    Close();
    d_ = std::move(o.d_);
    cache_ = std::move(o.cache_);
    memo_ = std::move(o.memo_);
  }
  return *this;
}

Database::~Database() { Close(); }

void Database::Close() {
  cache_.reset();  // the statements go before their connection
  d_.reset();
}

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  absl::StatusOr<std::unique_ptr<StatementDriver>> d = d_->Prepare(sql, /*keep=*/false);
  if (!d.ok()) return d.status();
  return Statement(*std::move(d));
}

absl::StatusOr<Statement*> Database::Cached(absl::string_view sql) {
  if (!cache_) cache_ = std::make_unique<std::map<std::string, Statement, std::less<>>>();
  auto it = cache_->find(sql);
  if (it == cache_->end()) {
    absl::StatusOr<std::unique_ptr<StatementDriver>> d = d_->Prepare(sql, /*keep=*/true);
    if (!d.ok()) return d.status();
    it = cache_->emplace(std::string(sql), Statement(*std::move(d))).first;
  } else {
    it->second.Reset();
  }
  return &it->second;
}

const int64_t* Database::MemoFind(absl::string_view key) const {
  auto it = memo_.find(key);
  return it == memo_.end() ? nullptr : &it->second;
}

void Database::MemoPut(std::string key, int64_t value) {
  if (memo_.size() >= 4096) memo_.clear();
  memo_[std::move(key)] = value;
}

Transaction::~Transaction() {
  if (!open_) return;
  db_->Exec("ROLLBACK").IgnoreError();
  db_->MemoClear();
}

absl::Status Transaction::Begin() {
  absl::Status s = db_->Exec(db_->BeginSql());
  open_ = s.ok();
  return s;
}

absl::Status Transaction::Commit() {
  absl::Status s = db_->Exec("COMMIT");
  if (s.ok()) open_ = false;
  return s;
}

}  // namespace parity
