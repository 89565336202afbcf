// Asking several RAS sockets at once (one per node, say) and what their answers add up to:
// the outcomes, one merged report, its findings, and the exit status of `gpudiag ras`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nccl_ras/client.h"
#include "nccl_ras/findings.h"

namespace gpudiag::ras {

struct Survey {
  std::vector<Outcome> outcomes;  ///< in the order the endpoints were given
  /// The second sample, taken when the first showed counts that differ (motion.h): the
  /// endpoints that answered the first, asked again `gap_s` later; empty when not taken.
  std::vector<Outcome> second;
  Report merged;  ///< of the answers, with the motion the samples showed
  std::vector<std::string> findings;
  std::vector<std::string> moving;  ///< motion_lines(): counts in flight, or unconfirmed
  int answered = 0;
  /// 0 every endpoint answered and RAS saw nothing wrong (counts that moved are nothing
  /// wrong); 1 it saw something wrong; 3 no finding, and an endpoint gave no usable answer,
  /// or counts differ and no second sample could tell whether they moved.
  int exit_status() const;
};

/// Queries every endpoint, up to 32 at a time, each bounded by `options`; when counts
/// differ, asks again `gap_s` seconds later (0: at once) and compares.
Survey survey(const std::vector<Endpoint>& endpoints, const QueryOptions& options, double gap_s = 2,
              const ProcessNamer& name = {});

/// The text `gpudiag ras` prints: a line per endpoint, the findings, notes, a last line.
std::string survey_text(const Survey& s);

/// The gpudiag-ras/1 document without its schema (docs/ras.md).
nlohmann::json survey_json(const Survey& s);

}  // namespace gpudiag::ras
