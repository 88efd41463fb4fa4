// The shared blob tier against a real S3-compatible server (s3rver, tests/s3.sh): a blob one
// daemon's spool publishes is fetched byte for byte into another's; a fetch that cannot complete
// leaves no copy behind; collection deletes exactly the unreferenced blobs past the grace period.
#include "server/storage/shared_blobs.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/storage/sqlite.h"
#include "server/storage/store.h"
#include "tests/test_s3.h"
#include "tests/test_util.h"

namespace parity {
namespace {

namespace fs = std::filesystem;

class SharedBlobsTest : public testing::ScratchTest {
 protected:
  // A spool in `name` under the scratch directory, keying every blob uniquely as parityd does
  // with a shared tier.
  std::unique_ptr<Spool> NewSpool(const std::string& name) {
    SpoolOptions o;
    o.dir = (dir_ / name).string();
    o.fsync = false;
    o.unique_key_min_bytes = 1;
    absl::StatusOr<std::unique_ptr<Spool>> s = Spool::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<SharedBlobs> NewTier(Spool* spool) {
    EXPECT_FALSE(testing::S3Endpoint().empty()) << "no test S3 server (tests/s3.sh start failed)";
    absl::StatusOr<std::unique_ptr<SharedBlobs>> t = SharedBlobs::Open(testing::TestS3Options(prefix_), spool);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::move(*t) : nullptr;
  }
  static std::string Write(Spool* spool, const std::string& bytes) {
    absl::StatusOr<std::unique_ptr<Spool::Writer>> w = spool->Create(bytes.size());
    EXPECT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE((*w)->Append(bytes.data(), bytes.size()).ok());
    absl::StatusOr<std::string> key = (*w)->Commit();
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? *key : "";
  }
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  const std::string prefix_ = absl::StrCat(
      "t", ::getpid(), "-", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
};

TEST_F(SharedBlobsTest, ABlobPublishedByOneSpoolIsFetchedIntoAnother) {
  std::unique_ptr<Spool> a = NewSpool("a"), b = NewSpool("b");
  ASSERT_TRUE(a && b);
  std::unique_ptr<SharedBlobs> ta = NewTier(a.get()), tb = NewTier(b.get());
  ASSERT_TRUE(ta && tb);
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + (i >> 9));
  for (const std::string& bytes : {big, std::string("x"), std::string(5000, '\xff')}) {
    const std::string key = Write(a.get(), bytes);
    ASSERT_TRUE(ta->Publish(key, bytes.size()).ok());
    EXPECT_FALSE(b->Contains(key));
    ASSERT_TRUE(tb->Fetch(key, bytes.size()).ok());
    ASSERT_TRUE(b->Contains(key));
    EXPECT_TRUE(ReadAll(b->PathOf(key)) == bytes) << bytes.size();
    EXPECT_TRUE(tb->Fetch(key, bytes.size()).ok());  // held: nothing fetched again
  }
  EXPECT_EQ(ta->published(), 3u);
  EXPECT_EQ(tb->fetched(), 3u);
  EXPECT_EQ(b->used_bytes(), big.size() + 1 + 5000);
}

TEST_F(SharedBlobsTest, AFetchThatCannotCompleteLeavesNoCopy) {
  std::unique_ptr<Spool> a = NewSpool("a"), b = NewSpool("b");
  ASSERT_TRUE(a && b);
  std::unique_ptr<SharedBlobs> ta = NewTier(a.get()), tb = NewTier(b.get());
  ASSERT_TRUE(ta && tb);
  const std::string missing(64, 'a');
  EXPECT_EQ(tb->Fetch(missing, 10).code(), absl::StatusCode::kNotFound);
  const std::string key = Write(a.get(), "0123456789");
  ASSERT_TRUE(ta->Publish(key, 10).ok());
  absl::Status wrong = tb->Fetch(key, 11);  // the item says another size
  EXPECT_EQ(wrong.code(), absl::StatusCode::kDataLoss) << wrong;
  EXPECT_FALSE(b->Contains(key));
  EXPECT_EQ(b->used_bytes(), 0u);
  EXPECT_TRUE(fs::is_empty(dir_ / "b" / "tmp"));
  EXPECT_EQ(tb->Fetch("../etc/passwd", 1).code(), absl::StatusCode::kInvalidArgument);
  // A blob the spool cannot take (its quota) is refused before anything is fetched.
  SpoolOptions small;
  small.dir = (dir_ / "c").string();
  small.quota_bytes = 5;
  std::unique_ptr<Spool> c = *Spool::Open(small);
  std::unique_ptr<SharedBlobs> tc = NewTier(c.get());
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->Fetch(key, 10).code(), absl::StatusCode::kResourceExhausted);
}

// An item of run "r" whose data is blob `key` (taken by reference when `by_reference`).
ItemRecord ItemWithBlob(const std::string& name, int64_t index, const std::string& key, bool by_reference = false) {
  ItemRecord it;
  it.run_id = "r";
  it.name = name;
  it.api = name;
  it.index = index;
  it.dtype = DType::kFloat32;
  it.shape = {2};
  it.byte_length = 8;
  it.blob = key;
  if (by_reference) it.offered_blob = std::string(64, 'e');
  return it;
}

TEST_F(SharedBlobsTest, CollectionMarksUnreferencedBlobsAndDeletesThemInALaterPass) {
  std::unique_ptr<Spool> a = NewSpool("a");
  ASSERT_TRUE(a);
  std::unique_ptr<SharedBlobs> t = NewTier(a.get());
  ASSERT_TRUE(t);
  StoreOptions so;
  so.path = (dir_ / "parity.db").string();
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(so);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  RunRecord run;
  run.run_id = "r";
  run.project = "p";
  run.side = Side::kGolden;
  ASSERT_TRUE(store.WriteSync(Store::InsertRun(run)).ok());
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(Write(a.get(), absl::StrCat("blob ", i)));
    ASSERT_TRUE(t->Publish(keys.back(), 6).ok());
  }
  ASSERT_TRUE(store.WriteSync(Store::InsertItem(ItemWithBlob("x0", 0, keys[0]))).ok());
  ASSERT_TRUE(store.WriteSync(Store::InsertItem(ItemWithBlob("x2", 2, keys[2]))).ok());
  // Not a blob's name: never touched.
  ASSERT_TRUE((*S3Client::Open(testing::TestS3Options(prefix_)))->Put("notes.txt", "keep").ok());
  auto bucket = [&] {
    std::vector<std::string> left = *(*S3Client::Open(testing::TestS3Options(prefix_)))->List("");
    return std::set<std::string>(left.begin(), left.end());
  };
  // Within the grace period nothing is marked, referenced or not.
  absl::StatusOr<SharedBlobs::Collected> c = t->Collect(store, 3600, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listed, 5u);
  EXPECT_EQ(c->marked, 0u);
  ::usleep(20000);  // past the objects' modification times (milliseconds)
  // Past it: the three unreferenced blobs are marked, none deleted yet.
  c = t->Collect(store, 0, 3600);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->marked, 3u);
  EXPECT_EQ(c->deleted, 0u);
  EXPECT_TRUE(*store.IsTombstoned(keys[1]));
  EXPECT_FALSE(*store.IsTombstoned(keys[0]));
  // A marked blob takes no new reference: dedup's item is refused, asking for the data.
  absl::Status refused = store.WriteSync(Store::InsertItem(ItemWithBlob("x1", 1, keys[1], /*by_reference=*/true)));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  // An item that took blob 3 before its mark committed (the two raced): kept, and unmarked.
  {
    absl::StatusOr<Database> db = OpenSqlite(so.path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->Exec(absl::StrCat("INSERT INTO items(run_id, name, api, op_type, phase, role, idx, shape, "
                                      "data_mode, byte_length, scalar_type, blob) VALUES('r', 'x3', 'x3', '', 0, 0, "
                                      "3, '[2]', 0, 8, '', '", keys[3], "')")).ok());
  }
  // A later pass deletes what is still unreferenced.
  c = t->Collect(store, 0, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->deleted, 2u);
  EXPECT_EQ(c->bytes, 12u);
  EXPECT_EQ(c->marked, 0u);
  EXPECT_EQ(bucket(), (std::set<std::string>{keys[0], keys[2], keys[3], "notes.txt"}));
  EXPECT_TRUE(store.TombstonesBefore(INT64_MAX)->empty());
  // Referenced blobs are never marked.
  EXPECT_EQ(*store.MarkTombstones({keys[0], keys[3]}, 1), 0u);
}

}  // namespace
}  // namespace parity
