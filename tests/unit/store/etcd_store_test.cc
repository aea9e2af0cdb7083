// EtcdStore against a real single-member etcd (tests/unit/etcd/etcd_server.h):
// the promises of store.h as the SQLite engine keeps them, plus the leader's
// guard. Each test keeps its keys under a prefix of its own.
#include "lib/store/etcd_store.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/etcd/etcd_server.h"
#include "tests/unit/store/sample_jobs.h"

namespace hpcq::store {
namespace {

using etcd::testing::EtcdServer;

class EtcdStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new EtcdServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    HPCQ_NEED_ETCD(*server_);
    prefix_ =
        std::string("/t/") + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  }

  std::unique_ptr<EtcdStore> open(EtcdStore::Options options = {}) {
    if (options.prefix == EtcdStore::Options().prefix) options.prefix = prefix_;
    auto store = EtcdStore::open(server_->client(), std::move(options));
    EXPECT_TRUE(store.is_ok()) << store.status().to_string();
    return store.is_ok() ? std::move(store).value() : nullptr;
  }

  static inline EtcdServer* server_ = nullptr;
  std::string prefix_;
};

TEST_F(EtcdStoreTest, JobRoundTripsThroughInsertUpdateAndReopen) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  job::Job job = sample_job(7);
  // Bytes that are not UTF-8 come back as they went in.
  job.reason = "exec '\xff\xfe': not found";
  WriteBatch insert;
  insert.insert_job(job);
  ASSERT_TRUE(store->write(insert).is_ok());
  job.state = job::JobState::kRunning;
  job.allocation = sample_allocation();
  job.start_time = job.submit_time + 5;
  job.held = true;
  job.cpu_time_us = 12345;
  job.max_memory_bytes = 1ull << 33;
  WriteBatch update;
  update.update_job(job);
  ASSERT_TRUE(store->write(update).is_ok());
  EXPECT_EQ(store->commits(), 2u);

  auto again = open();
  ASSERT_NE(again, nullptr);
  auto jobs = again->load_jobs();
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  ASSERT_EQ(jobs->size(), 1u);
  expect_same_job((*jobs)[0], job);
  auto high = again->max_job_id();
  ASSERT_TRUE(high.is_ok());
  EXPECT_EQ(*high, 7u);
}

TEST_F(EtcdStoreTest, JobsLoadInAscendingIdOrderPastOnePage) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  // More than a range page (500), ids that sort wrongly as text.
  WriteBatch batch;
  for (JobId id = 1; id <= 1200; ++id) batch.insert_job(sample_job(id * 9 % 1201));
  ASSERT_TRUE(store->write(batch).is_ok());
  auto jobs = open()->load_jobs();
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  ASSERT_EQ(jobs->size(), 1200u);
  for (std::size_t i = 1; i < jobs->size(); ++i) EXPECT_LT((*jobs)[i - 1].id, (*jobs)[i].id);
}

TEST_F(EtcdStoreTest, OneBatchMayInsertUpdateAndLogOneJob) {
  // etcd refuses two writes of a key in one Txn: the store keeps the last.
  auto store = open();
  ASSERT_NE(store, nullptr);
  job::Job job = sample_job(3);
  WriteBatch batch;
  batch.insert_job(job);
  batch.append_event(3, 10, "submitted", "{}");
  job.state = job::JobState::kRunning;
  batch.update_job(job);
  batch.append_event(3, 11, "started", R"({"nodes":"node1"})");
  job.state = job::JobState::kCompleted;
  batch.update_job(job);
  ASSERT_TRUE(store->write(batch).is_ok());
  WriteBatch later;
  later.append_event(3, 12, "cleaned", "{}");
  ASSERT_TRUE(store->write(later).is_ok());

  auto again = open();
  auto jobs = again->load_jobs();
  ASSERT_TRUE(jobs.is_ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state, job::JobState::kCompleted);
  auto events = again->load_events(3);
  ASSERT_TRUE(events.is_ok()) << events.status().to_string();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].seq, 1);
  EXPECT_EQ((*events)[0].name, "submitted");
  EXPECT_EQ((*events)[1].seq, 2);
  EXPECT_EQ((*events)[1].detail_json, R"({"nodes":"node1"})");
  EXPECT_EQ((*events)[2].seq, 3);
  EXPECT_EQ((*events)[2].time, 12);
  // A store opened later counts on from what etcd holds.
  WriteBatch more;
  more.append_event(3, 13, "noted", "{}");
  ASSERT_TRUE(again->write(more).is_ok());
  events = open()->load_events(3);
  ASSERT_TRUE(events.is_ok());
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ(events->back().seq, 4);
}

TEST_F(EtcdStoreTest, DuplicateInsertUpdateOfMissingJobAndOrphanEventFailAndChangeNothing) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  WriteBatch first;
  first.insert_job(sample_job(1));
  ASSERT_TRUE(store->write(first).is_ok());

  WriteBatch duplicate;
  duplicate.put_record("reservation", "r1", "{}");
  duplicate.insert_job(sample_job(1));
  Status s = store->write(duplicate);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.to_string();
  EXPECT_NE(s.message().find("insert job 1"), std::string::npos) << s.message();

  WriteBatch missing;
  missing.upsert_node(1, "node1", "up", "{}", 5);
  missing.update_job(sample_job(2));
  s = store->write(missing);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.to_string();
  EXPECT_NE(s.message().find("update job 2: no such job"), std::string::npos) << s.message();

  WriteBatch orphan;
  orphan.insert_job(sample_job(9));
  orphan.append_event(4, 1, "started", "{}");
  s = store->write(orphan);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.to_string();

  // Nothing of the three failed batches was applied.
  auto records = store->load_records("reservation");
  ASSERT_TRUE(records.is_ok());
  EXPECT_TRUE(records->empty());
  auto nodes = store->load_nodes();
  ASSERT_TRUE(nodes.is_ok());
  EXPECT_TRUE(nodes->empty());
  auto jobs = store->load_jobs();
  ASSERT_TRUE(jobs.is_ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(*store->max_job_id(), 1u);
  EXPECT_EQ(store->commits(), 1u);
}

TEST_F(EtcdStoreTest, NodesAndRecordsArePutReplacedAndDeleted) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.upsert_node(12, "node12", "up", R"({"cores":4})", 100);
  batch.upsert_node(3, "node3", "up", "{}", 100);
  batch.put_record("reservation", "maint", R"({"nodes":"node3"})");
  batch.put_record("reservation", "a/b", "{}");
  batch.put_record("usage", "ledger", "[]");
  ASSERT_TRUE(store->write(batch).is_ok());
  WriteBatch change;
  change.upsert_node(3, "node3", "down", "{}", 200);
  change.delete_record("reservation", "maint");
  ASSERT_TRUE(store->write(change).is_ok());

  auto again = open();
  auto nodes = again->load_nodes();
  ASSERT_TRUE(nodes.is_ok()) << nodes.status().to_string();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].rank, 3u);
  EXPECT_EQ((*nodes)[0].state, "down");
  EXPECT_EQ((*nodes)[0].updated_time, 200);
  EXPECT_EQ((*nodes)[1].rank, 12u);
  EXPECT_EQ((*nodes)[1].topology_json, R"({"cores":4})");
  auto reservations = again->load_records("reservation");
  ASSERT_TRUE(reservations.is_ok());
  ASSERT_EQ(reservations->size(), 1u);
  EXPECT_EQ((*reservations)[0].first, "a/b");
  auto usage = again->load_records("usage");
  ASSERT_TRUE(usage.is_ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ((*usage)[0].second, "[]");
}

TEST_F(EtcdStoreTest, AWriteOfADeposedLeaderFailsAsAWhole) {
  etcd::EtcdClient client = server_->client();
  const std::string election = prefix_ + "leader";
  auto won = client.put(election, "hpcqd-a");
  ASSERT_TRUE(won.is_ok());
  EtcdStore::Options options;
  options.guard_key = election;
  options.guard_revision = *won;
  std::string deposed;
  options.on_deposed = [&deposed](const std::string& why) { deposed = why; };
  auto store = open(options);
  ASSERT_NE(store, nullptr);
  WriteBatch first;
  first.insert_job(sample_job(1));
  ASSERT_TRUE(store->write(first).is_ok());

  // Another hpcqd wins the key (its lease ran out, ours was deleted).
  ASSERT_TRUE(client.erase(election).is_ok());
  ASSERT_TRUE(client.put(election, "hpcqd-b").is_ok());
  WriteBatch late;
  job::Job job = sample_job(1);
  job.state = job::JobState::kRunning;
  late.update_job(job);
  late.insert_job(sample_job(2));
  Status s = store->write(late);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.to_string();
  EXPECT_NE(s.message().find("no longer leads"), std::string::npos) << s.message();
  EXPECT_EQ(deposed, s.message());
  auto jobs = open()->load_jobs();
  ASSERT_TRUE(jobs.is_ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state, job::JobState::kPending);
}

TEST_F(EtcdStoreTest, UndecodableRowIsAnErrorNamingItsKey) {
  ASSERT_TRUE(server_->client().put(prefix_ + "jobs/00000000000000000005", "3:abc").is_ok());
  auto jobs = open()->load_jobs();
  ASSERT_FALSE(jobs.is_ok());
  EXPECT_EQ(jobs.status().code(), Code::kInvalidArgument);
  EXPECT_NE(jobs.status().message().find("jobs/00000000000000000005"), std::string::npos)
      << jobs.status().message();
}

// Issue 45: a store writer without hpcqd's secret (a user who reached etcd)
// cannot mint a job: a forged row, a row moved to another job's key and an
// unsealed row are all left out of what loads, and reported; hpcqd's own
// rows load.
TEST_F(EtcdStoreTest, RowsNotSealedByThisSecretAreRefusedAtLoad) {
  EtcdStore::Options options;
  options.sealer = Sealer(std::string(Sealer::kKeyBytes, 'k'));
  std::vector<std::string> refused;
  options.on_refused = [&](const std::string& key, const std::string&) { refused.push_back(key); };
  auto store = open(options);
  ASSERT_NE(store, nullptr);
  WriteBatch insert;
  insert.insert_job(sample_job(1));
  insert.insert_job(sample_job(2));
  insert.put_record("reservations", "r1", "{}");
  ASSERT_TRUE(store->write(insert).is_ok());

  // What hpcqd wrote is not plain: a reader of etcd sees a sealed value.
  auto row = server_->client().get(prefix_ + "jobs/00000000000000000001");
  ASSERT_TRUE(row.is_ok() && row->has_value());
  EXPECT_TRUE((*row)->value.starts_with("hpcq-seal1:")) << (*row)->value.substr(0, 40);

  // A forger: job 1's row copied to id 3 (a job of uid 0 would be minted the
  // same way), job 2's row with its owner changed, an unsealed record.
  ASSERT_TRUE(server_->client().put(prefix_ + "jobs/00000000000000000003", (*row)->value).is_ok());
  auto two = server_->client().get(prefix_ + "jobs/00000000000000000002");
  ASSERT_TRUE(two.is_ok() && two->has_value());
  std::string changed = (*two)->value;
  const std::size_t uid_at = changed.find("1002");
  ASSERT_NE(uid_at, std::string::npos);
  changed.replace(uid_at, 4, "0000");
  ASSERT_TRUE(server_->client().put(prefix_ + "jobs/00000000000000000002", changed).is_ok());
  ASSERT_TRUE(server_->client().put(prefix_ + "records/reservations/r2", "{}").is_ok());

  auto again = open(options);
  ASSERT_NE(again, nullptr);
  auto jobs = again->load_jobs();
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  ASSERT_EQ(jobs->size(), 1u);
  expect_same_job((*jobs)[0], sample_job(1));
  auto records = again->load_records("reservations");
  ASSERT_TRUE(records.is_ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].first, "r1");
  EXPECT_EQ(refused, (std::vector<std::string>{prefix_ + "jobs/00000000000000000002",
                                               prefix_ + "jobs/00000000000000000003",
                                               prefix_ + "records/reservations/r2"}));
}

TEST(Sealer, OpensWhatItSealedForThatKeyOnly) {
  const Sealer sealer(std::string(Sealer::kKeyBytes, 's'));
  const std::string sealed = sealer.seal("jobs/1", "value");
  auto opened = sealer.open("jobs/1", sealed);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  EXPECT_EQ(*opened, "value");
  EXPECT_EQ(sealer.open("jobs/2", sealed).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(sealer.open("jobs/1", "value").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(sealer.open("jobs/1", "").status().code(), Code::kPermissionDenied);
  const Sealer other(std::string(Sealer::kKeyBytes, 't'));
  EXPECT_EQ(other.open("jobs/1", sealed).status().code(), Code::kPermissionDenied);
  std::string tampered = sealed;
  tampered.back() = 'X';
  EXPECT_EQ(sealer.open("jobs/1", tampered).status().code(), Code::kPermissionDenied);
}

TEST(Sealer, KeyFileMustBeHexAndPrivate) {
  char dir_template[] = "/tmp/hpcq-seal-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/store.key";
  auto write = [&](const std::string& text, mode_t mode) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    chmod(path.c_str(), mode);
  };
  write(Sealer::generate_file_text(), 0600);
  EXPECT_TRUE(Sealer::from_file(path).is_ok());
  write(Sealer::generate_file_text(), 0644);
  EXPECT_EQ(Sealer::from_file(path).status().code(), Code::kPermissionDenied);
  write("not hex\n", 0600);
  EXPECT_EQ(Sealer::from_file(path).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Sealer::from_file(path + ".missing").status().code(), Code::kNotFound);
  std::filesystem::remove_all(dir_template);
}

TEST(EtcdStoreUnreachable, OpenFailsAtOnceWithUnavailable) {
  etcd::EtcdClient::Options options;
  options.deadline = std::chrono::milliseconds(200);
  auto client = etcd::EtcdClient::connect({etcd::testing::Socket().endpoint()}, options);
  ASSERT_TRUE(client.is_ok());
  auto store = EtcdStore::open(std::move(client).value(), {});
  ASSERT_FALSE(store.is_ok());
  EXPECT_EQ(store.status().code(), Code::kUnavailable) << store.status().to_string();
  EXPECT_EQ(store.status().message().rfind("store open: etcd ", 0), 0u) << store.status().message();
}

}  // namespace
}  // namespace hpcq::store
