#include "agent/mpi_relay.h"

#include <spdlog/spdlog.h>

#include "lib/core/clock.h"
#include "lib/core/release_memory.h"

namespace hpcq::agent {

MpiRelay::MpiRelay(const Options& options, overlay::Overlay& overlay, Executor& executor,
                   const PartTable& parts)
    : options_(options),
      overlay_(overlay),
      executor_(executor),
      parts_(parts),
      fence_tree_(options.rank, options.fanout, options.max_kvs_bytes) {}

void MpiRelay::send(overlay::Envelope envelope, const char* what) {
  Status s = overlay_.send(std::move(envelope));
  if (!s.is_ok()) spdlog::debug("{}: {}", what, s.message());
}

void MpiRelay::send_events(std::vector<PmiEvent> events, TimeUs now) {
  for (PmiEvent& event : events) {
    overlay::Envelope envelope;
    envelope.set_dst(0);
    const Part* part = parts_.running(event.id);
    const std::uint32_t run = part ? part->attempt : 0;
    switch (event.kind) {
      case PmiEvent::Kind::kFailure: {
        overlay::PmiFailure& out = *envelope.mutable_pmi_failure();
        out.set_job_id(event.id);
        out.set_attempt(run);
        out.set_step(event.step);
        out.set_code(event.code);
        out.set_reason(std::move(event.data));
        out.set_seen_at_us(event.seen_at);
        break;
      }
      case PmiEvent::Kind::kFence: {
        overlay::PmiFence out;
        out.set_job_id(event.id);
        out.set_step(event.step);
        out.set_attempt(run);
        out.set_seq(event.seq);
        out.set_nodes(static_cast<std::uint32_t>(event.nodes));
        for (std::uint32_t r : event.world) out.add_world(r);
        overlay::PmiContribution& own = *out.add_parts();
        own.set_rank(options_.rank);
        fence_bytes_since_release_ += event.data.size();
        own.set_kvs(std::move(event.data));
        fences_[{event.id, event.step}] = {out, now};
        fence_up(std::move(out), now);
        continue;
      }
      case PmiEvent::Kind::kModexRequest: {
        envelope.set_dst(event.node);
        overlay::PmiModexRequest& out = *envelope.mutable_pmi_modex_request();
        out.set_job_id(event.id);
        out.set_attempt(run);
        out.set_step(event.step);
        out.set_rank(event.rank);
        out.set_id(event.tag);
        modex_requests_[{event.id, event.step, event.tag}] = {envelope, now};
        break;
      }
      case PmiEvent::Kind::kModexData: {
        // The tag this agent gave the request: who asked, and their id.
        envelope.set_dst(static_cast<Rank>(event.tag >> 32));
        overlay::PmiModexReply& out = *envelope.mutable_pmi_modex_reply();
        out.set_job_id(event.id);
        out.set_attempt(run);
        out.set_step(event.step);
        out.set_id(event.tag & 0xffffffffu);
        out.set_status(event.code);
        out.set_data(std::move(event.data));
        break;
      }
    }
    Status s = overlay_.send(std::move(envelope));
    if (!s.is_ok()) spdlog::warn("job {}: PMI: {}", event.id, s.message());
  }
}

void MpiRelay::on_modex_request(Rank from, const overlay::PmiModexRequest& request) {
  if (!parts_.runs(request.job_id(), request.attempt())) return;  // not yet, or stale
  ModexFrame frame;
  frame.kind = ModexFrame::Kind::kRequest;
  frame.tag = (static_cast<std::uint64_t>(from) << 32) | (request.id() & 0xffffffffu);
  frame.rank = request.rank();
  Status s = executor_.deliver_modex(request.job_id(), request.step(), frame);
  if (!s.is_ok()) spdlog::debug("job {}: PMIx modex request: {}", request.job_id(), s.message());
}

void MpiRelay::on_modex_reply(const overlay::PmiModexReply& reply) {
  auto asked = modex_requests_.find({reply.job_id(), reply.step(), reply.id()});
  if (asked == modex_requests_.end()) return;  // answered already (a copy), or stale
  if (asked->second.request.pmi_modex_request().attempt() != reply.attempt()) return;
  modex_requests_.erase(asked);
  for (const ModexFrame& frame : split_modex(reply.id(), reply.status(), reply.data())) {
    Status s = executor_.deliver_modex(reply.job_id(), reply.step(), frame);
    if (!s.is_ok()) {
      spdlog::info("job {}: PMIx modex reply: {}", reply.job_id(), s.message());
      return;
    }
  }
}

void MpiRelay::repeat_unanswered(TimeUs now) {
  const TimeUs after = options_.repeat_after;
  std::erase_if(fences_, [&](const auto& f) {
    const auto [id, step] = f.first;
    return !parts_.runs(id, f.second.fence.attempt(), step);
  });
  for (auto& [key, pending] : fences_) {
    if (now - pending.sent_at < after) continue;
    fence_up(pending.fence, now);
    pending.sent_at = now;
  }
  // Contributions of other nodes held here far longer than a fence waits.
  for (overlay::PmiFence& fence : fence_tree_.expire(now, 30 * kUsPerSecond)) {
    send_fence(std::move(fence));
  }
  // Direct modex requests, likewise; the node asked may not have started
  // the rank's part yet, or the way to it may have healed.
  std::erase_if(modex_requests_, [&](const auto& m) {
    const auto& [id, step, tag] = m.first;
    return !parts_.runs(id, m.second.request.pmi_modex_request().attempt(), step);
  });
  for (auto& [key, pending] : modex_requests_) {
    if (now - pending.sent_at < after) continue;
    send(pending.request, "PMIx modex request");
    pending.sent_at = now;
  }
  // Large fences leave tcmalloc's free lists large: back to the OS, so that
  // the agent's size comes down once they are through.
  constexpr std::size_t kReleaseAfterBytes = 1 << 20;
  if (fence_bytes_since_release_ >= kReleaseAfterBytes) {
    release_free_memory();
    fence_bytes_since_release_ = 0;
    release_at_part_end_ = true;
  }
}

void MpiRelay::on_part_ended() {
  if (std::exchange(release_at_part_end_, false)) release_free_memory();
}

bool MpiRelay::on_relay(overlay::Envelope& envelope, TimeUs now) {
  if (envelope.body_case() == overlay::Envelope::kPmiFence && envelope.dst() == 0) {
    fence_up(std::move(*envelope.mutable_pmi_fence()), now);
    return true;
  }
  if (envelope.body_case() == overlay::Envelope::kPmiFenceDone) {
    on_fence_done(envelope.dst(), envelope.pmi_fence_done());
    return true;
  }
  return false;
}

void MpiRelay::fence_up(overlay::PmiFence fence, TimeUs now) {
  for (overlay::PmiFence& out : fence_tree_.up(std::move(fence), now)) {
    send_fence(std::move(out));
  }
}

void MpiRelay::send_fence(overlay::PmiFence fence) {
  overlay::Envelope envelope;
  envelope.set_dst(0);
  *envelope.mutable_pmi_fence() = std::move(fence);
  send(std::move(envelope), "PMI fence");
}

void MpiRelay::on_fence_done(Rank dst, const overlay::PmiFenceDone& done) {
  FenceTree::Down d = fence_tree_.down(dst, done);
  for (auto& [to, copy] : d.onward) {
    overlay::Envelope envelope;
    envelope.set_dst(to);
    *envelope.mutable_pmi_fence_done() = std::move(copy);
    send(std::move(envelope), "PMI fence outcome");
  }
  if (d.here) deliver_fence_done(done);
}

void MpiRelay::deliver_fence_done(const overlay::PmiFenceDone& done) {
  fence_bytes_since_release_ += done.kvs().size();
  if (!parts_.runs(done.job_id(), done.attempt())) return;  // stale
  auto pending = fences_.find({done.job_id(), done.step()});
  if (pending != fences_.end() && pending->second.fence.seq() == done.seq()) fences_.erase(pending);
  Status s = done.error().empty()
                 ? executor_.fence_done(done.job_id(), done.step(), done.seq(), done.kvs())
                 : executor_.fence_failed(done.job_id(), done.step(), done.seq(), done.error());
  if (!s.is_ok()) spdlog::info("job {}: PMI fence {}: {}", done.job_id(), done.seq(), s.message());
}

}  // namespace hpcq::agent
