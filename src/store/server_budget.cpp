// ServerCore's bounds (store_limits.h), apart from the protocol in
// server_conn.cpp: what each connection holds is accounted (input and output
// buffer capacity, parked requests), the connection holding the most is shed
// while the server's total is over its cap, and requests past a limit (a key
// or value too large, the store full, a reply too large) are answered with
// ERROR over_limit. Warnings about misbehaving clients are limited to ten a
// second, so a flood of clients cannot flood the job's log too.
#include <spdlog/spdlog.h>

#include "store/server_conn.h"
#include "util/strings.h"

namespace gpudiag {

namespace sw = storewire;

void ServerCore::account(Conn& c) {
  // A condemned connection is closed at the end of the batch; what it still
  // holds (at most a frame of input and its parked requests) no longer counts,
  // so shedding one is enough to get back under the cap.
  std::size_t now = c.doomed ? 0 : c.in.capacity() + c.out.capacity() + c.parked_bytes;
  buffered_total_ = buffered_total_ - c.accounted + now;
  c.accounted = now;
}

Conn* ServerCore::largest() {
  Conn* worst = nullptr;
  for (auto& [id, c] : conns_)
    if (!c->doomed && (!worst || c->accounted > worst->accounted)) worst = c.get();
  return worst;
}

std::string ServerCore::over_budget_why(const Conn& c) const {
  return "the store buffers " + human_bytes(buffered_total_) + " for its clients (limit " +
         human_bytes(opts_.max_buffered_total) + "), this one holds the most (" +
         human_bytes(c.accounted) + ")";
}

void ServerCore::shed_over_budget() {
  while (buffered_total_ > opts_.max_buffered_total) {
    Conn* worst = largest();
    if (!worst || worst->accounted == 0) return;
    condemn(*worst, over_budget_why(*worst));  // no longer counted; closed after the batch
  }
}

bool ServerCore::log_budget() {
  constexpr std::size_t kLinesPerSecond = 10;
  auto now = std::chrono::steady_clock::now();
  if (now >= log_window_end_) {
    if (suppressed_)
      spdlog::warn("store: {} more warnings about misbehaving clients were left out", suppressed_);
    suppressed_ = logged_in_window_ = 0;
    log_window_end_ = now + std::chrono::seconds(1);
  }
  if (logged_in_window_ < kLinesPerSecond) {
    ++logged_in_window_;
    return true;
  }
  ++suppressed_;
  return false;
}

void ServerCore::refuse(Conn& c, std::uint32_t id, const std::string& why) {
  ++refused_;
  if (log_budget()) spdlog::warn("store: refusing a request of client {}: {}", c.peer, why);
  reply(c, sw::Writer(sw::Type::error, id)
               .u8(static_cast<std::uint8_t>(sw::ErrorCode::over_limit))
               .str(why)
               .finish());
}

bool ServerCore::fits(Conn& c, std::uint32_t id, const std::string& key, std::size_t value_bytes) {
  std::string why;
  if (key.size() > storelimits::kMaxKeyBytes)
    why = "a key of " + std::to_string(key.size()) + " bytes (limit " +
          std::to_string(storelimits::kMaxKeyBytes) + ")";
  else if (value_bytes > storelimits::kMaxValueBytes)
    why = "a value of " + std::to_string(value_bytes) + " bytes (limit " +
          std::to_string(storelimits::kMaxValueBytes) + ")";
  else if (state_.bytes() + key.size() + value_bytes > opts_.max_stored_bytes)
    why = "the store is full (" + human_bytes(state_.bytes()) + " stored, limit " +
          human_bytes(opts_.max_stored_bytes) + ")";
  if (why.empty()) return true;
  refuse(c, id, why);
  return false;
}

void ServerCore::multi_get(Conn& c, std::uint32_t id, const std::vector<std::string>& keys) {
  // Sized first, so a request naming big values many times cannot build a
  // reply past what a client accepts.
  std::size_t size = 16;
  for (const auto& k : keys)
    if (auto* v = state_.find(k))
      size += 5 + v->size();
    else
      size += 5;
  if (size > storelimits::kMaxReplyFrame)
    return refuse(c, id,
                  "a reply of " + human_bytes(size) + " (limit " +
                      human_bytes(storelimits::kMaxReplyFrame) + ")");
  sw::Writer w(sw::Type::values, id);
  w.u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& k : keys) {
    auto* v = state_.find(k);
    w.u8(v ? 1 : 0).str(v ? *v : std::string());
  }
  reply(c, std::move(w).finish());
}

}  // namespace gpudiag
