// The agent's end of the resize protocol (agent/elastic_job.h) against the
// application's (lib/elastic/hpcq_elastic.h), over a real unix socket and a
// real event loop running on its own thread.
#include "agent/elastic_job.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "lib/elastic/hpcq_elastic.h"

namespace hpcq::agent {
namespace {

namespace fs = std::filesystem;
using Outcome = overlay::ResizeDone::Outcome;

ElasticJob::NodeAllocs nodes(std::initializer_list<const char*> names, int ntasks = 2) {
  ElasticJob::NodeAllocs out;
  for (const char* n : names) {
    overlay::NodeAlloc* a = out.Add();
    a->set_node(n);
    a->set_ntasks(ntasks);
  }
  return out;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Answered {
  Outcome outcome = overlay::ResizeDone::OUTCOME_UNSPECIFIED;
  std::string reason;
  double seconds = -1;
};

class ElasticJobTest : public ::testing::Test {
 protected:
  ElasticJobTest() {
    char tmpl[] = "/tmp/hpcq-elastic-XXXXXX";
    root_ = mkdtemp(tmpl);
    thread_ = std::thread([this] { loop_.run(); });
  }
  ~ElasticJobTest() override {
    on_loop([this] { job_.reset(); });
    loop_.stop();
    thread_.join();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Runs `f` on the loop thread and waits for it.
  template <typename F>
  void on_loop(F f) {
    std::promise<void> done;
    loop_.post([&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  void create(const ElasticJob::NodeAllocs& allocation) {
    on_loop([&] {
      auto job = ElasticJob::create(loop_, dir(), getuid(), getgid(), allocation);
      ASSERT_TRUE(job.is_ok()) << job.status().message();
      job_ = std::move(job).value();
    });
  }

  // Starts a notice; the future has its answer.
  std::future<Answered> notify(overlay::Resize::Kind kind, const ElasticJob::NodeAllocs& to,
                               int timeout_ms = 5000) {
    auto answer = std::make_shared<std::promise<Answered>>();
    auto future = answer->get_future();
    on_loop([&] {
      job_->notify(kind, to, std::chrono::milliseconds(timeout_ms),
                   [answer](Outcome o, const std::string& reason, double seconds) {
                     answer->set_value({o, reason, seconds});
                   });
    });
    return future;
  }

  std::string dir() const { return root_ + "/job-7"; }

  std::string root_;
  overlay::EventLoop loop_;
  std::thread thread_;
  std::unique_ptr<ElasticJob> job_;
};

TEST_F(ElasticJobTest, FilesAndSocketAtStart) {
  create(nodes({"n1", "n2"}));
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\nn2\n");
  EXPECT_EQ(read(dir() + "/hostfile"), "n1 slots=2\nn2 slots=2\n");
  EXPECT_EQ(read(dir() + "/hostfile.mpich"), "n1:2\nn2:2\n");
  struct stat st {};
  ASSERT_EQ(stat((dir() + "/resize.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, getuid());
  // The directory goes with the job.
  on_loop([this] { job_.reset(); });
  EXPECT_FALSE(fs::exists(dir()));
}

TEST_F(ElasticJobTest, AcknowledgedShrinkKeepsTheNewList) {
  create(nodes({"n1", "n2", "n3"}));
  elastic::Channel channel;
  std::string error;
  ASSERT_TRUE(channel.open(&error, dir() + "/resize.sock")) << error;
  auto answer = notify(overlay::Resize::SHRINK, nodes({"n1"}));
  elastic::Notice notice;
  ASSERT_TRUE(channel.wait(5000, &notice, &error)) << error;
  EXPECT_EQ(notice.kind, elastic::Notice::Kind::kShrink);
  EXPECT_EQ(notice.nodes, 1);
  EXPECT_EQ(notice.nodelist, dir() + "/nodelist");
  EXPECT_EQ(elastic::read_nodelist(notice.nodelist), std::vector<std::string>{"n1"});
  ASSERT_TRUE(channel.ack(&error)) << error;
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Answered a = answer.get();
  EXPECT_EQ(a.outcome, overlay::ResizeDone::ACKNOWLEDGED);
  EXPECT_GE(a.seconds, 0);
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\n");
  EXPECT_EQ(read(dir() + "/hostfile"), "n1 slots=2\n");
  EXPECT_EQ(read(dir() + "/hostfile.mpich"), "n1:2\n");
}

TEST_F(ElasticJobTest, DeclinedShrinkPutsTheFilesBack) {
  create(nodes({"n1", "n2"}));
  elastic::Channel channel;
  std::string error;
  ASSERT_TRUE(channel.open(&error, dir() + "/resize.sock")) << error;
  auto answer = notify(overlay::Resize::SHRINK, nodes({"n1"}));
  elastic::Notice notice;
  ASSERT_TRUE(channel.wait(5000, &notice, &error)) << error;
  ASSERT_TRUE(channel.decline(&error)) << error;
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(answer.get().outcome, overlay::ResizeDone::DECLINED);
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\nn2\n");
}

TEST_F(ElasticJobTest, NoticeWaitsForTheApplicationToConnect) {
  create(nodes({"n1"}));
  auto answer = notify(overlay::Resize::EXPAND, nodes({"n1", "n2"}));
  elastic::Channel channel;
  std::string error;
  ASSERT_TRUE(channel.open(&error, dir() + "/resize.sock")) << error;
  elastic::Notice notice;
  ASSERT_TRUE(channel.wait(5000, &notice, &error)) << error;
  EXPECT_EQ(notice.kind, elastic::Notice::Kind::kExpand);
  EXPECT_EQ(notice.nodes, 2);
  ASSERT_TRUE(channel.ack(&error)) << error;
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(answer.get().outcome, overlay::ResizeDone::ACKNOWLEDGED);
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\nn2\n");
}

TEST_F(ElasticJobTest, TimeoutUndoesAShrinkButKeepsAnExpansion) {
  create(nodes({"n1", "n2"}));
  auto shrink = notify(overlay::Resize::SHRINK, nodes({"n1"}), 50);
  ASSERT_EQ(shrink.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(shrink.get().outcome, overlay::ResizeDone::TIMED_OUT);
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\nn2\n");
  auto expand = notify(overlay::Resize::EXPAND, nodes({"n1", "n2", "n3"}), 50);
  ASSERT_EQ(expand.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(expand.get().outcome, overlay::ResizeDone::TIMED_OUT);
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\nn2\nn3\n");
}

TEST_F(ElasticJobTest, AForcedShrinkKeepsTheNewListWhateverTheAnswer) {
  create(nodes({"n1", "n2"}));
  auto answer = std::make_shared<std::promise<Answered>>();
  auto future = answer->get_future();
  on_loop([&] {
    job_->notify(
        overlay::Resize::SHRINK, nodes({"n1"}), std::chrono::milliseconds(5000),
        [answer](Outcome o, const std::string& reason, double seconds) {
          answer->set_value({o, reason, seconds});
        },
        /*forced=*/true);
  });
  elastic::Channel channel;
  std::string error;
  ASSERT_TRUE(channel.open(&error, dir() + "/resize.sock")) << error;
  elastic::Notice notice;
  ASSERT_TRUE(channel.wait(5000, &notice, &error)) << error;
  ASSERT_TRUE(channel.decline(&error));
  ASSERT_EQ(future.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(future.get().outcome, overlay::ResizeDone::DECLINED);
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\n");  // the node is gone: no going back
}

TEST_F(ElasticJobTest, ANewerNoticeAnswersTheOlderFailed) {
  create(nodes({"n1", "n2", "n3"}));
  auto first = notify(overlay::Resize::SHRINK, nodes({"n1", "n2"}));
  auto second = notify(overlay::Resize::SHRINK, nodes({"n1"}));
  ASSERT_EQ(first.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(first.get().outcome, overlay::ResizeDone::FAILED);
  elastic::Channel channel;
  std::string error;
  ASSERT_TRUE(channel.open(&error, dir() + "/resize.sock")) << error;
  elastic::Notice notice;
  ASSERT_TRUE(channel.wait(5000, &notice, &error)) << error;
  EXPECT_EQ(notice.nodes, 1);
  // Lines that are not answers are ignored; the answer still counts.
  ASSERT_EQ(write(channel.fd(), "hello\n", 6), 6);
  ASSERT_TRUE(channel.ack(&error));
  ASSERT_EQ(second.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(second.get().outcome, overlay::ResizeDone::ACKNOWLEDGED);
  EXPECT_EQ(read(dir() + "/nodelist"), "n1\n");
}

TEST_F(ElasticJobTest, CreateFailsOnAnExistingDirectory) {
  fs::create_directories(dir());
  on_loop([&] {
    auto job = ElasticJob::create(loop_, dir(), getuid(), getgid(), nodes({"n1"}));
    ASSERT_FALSE(job.is_ok());
    EXPECT_NE(job.status().message().find(dir()), std::string::npos);
  });
}

TEST(ElasticHeader, ParseNotice) {
  elastic::Notice n;
  ASSERT_TRUE(elastic::parse_notice("shrink 2 /x/nodelist", &n));
  EXPECT_EQ(n.kind, elastic::Notice::Kind::kShrink);
  EXPECT_EQ(n.nodes, 2);
  EXPECT_EQ(n.nodelist, "/x/nodelist");
  ASSERT_TRUE(elastic::parse_notice("expand 12 /a b/nodelist", &n));
  EXPECT_EQ(n.nodelist, "/a b/nodelist");
  for (const char* bad : {"", "ack", "grow 2 /x", "shrink /x", "shrink 0 /x", "shrink x /y",
                          "shrink 2 ", "shrink -1 /x"}) {
    EXPECT_FALSE(elastic::parse_notice(bad, &n)) << bad;
  }
}

TEST(ElasticHeader, OpenWithoutTheEnvironmentSaysWhy) {
  unsetenv("HPCQ_RESIZE_SOCKET");
  elastic::Channel channel;
  std::string error;
  EXPECT_FALSE(channel.open(&error));
  EXPECT_NE(error.find("HPCQ_RESIZE_SOCKET"), std::string::npos);
  EXPECT_FALSE(channel.open(&error, "/nonexistent/resize.sock"));
  EXPECT_NE(error.find("/nonexistent/resize.sock"), std::string::npos);
}

}  // namespace
}  // namespace hpcq::agent
