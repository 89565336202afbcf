// survey(), survey_text(), survey_json() (survey.h).
#include "nccl_ras/survey.h"

#include <algorithm>
#include <cstdio>
#include <future>

#include "util/text.h"

namespace gpudiag::ras {

namespace {
constexpr std::size_t kAtOnce = 32;
}

int Survey::exit_status() const {
  if (!findings.empty()) return 1;
  return answered == static_cast<int>(outcomes.size()) && answered > 0 ? 0 : 3;
}

Survey survey(const std::vector<Endpoint>& endpoints, const QueryOptions& options,
              const ProcessNamer& name) {
  Survey s;
  s.outcomes.resize(endpoints.size());
  for (std::size_t at = 0; at < endpoints.size(); at += kAtOnce) {
    std::vector<std::future<Outcome>> running;
    for (std::size_t i = at; i < std::min(endpoints.size(), at + kAtOnce); ++i)
      running.push_back(
          std::async(std::launch::async, [&, i] { return query(endpoints[i], options); }));
    for (std::size_t i = 0; i < running.size(); ++i) s.outcomes[at + i] = running[i].get();
  }
  std::vector<Report> reports;
  for (const auto& o : s.outcomes)
    if (o.answered) reports.push_back(o.report);
  s.answered = static_cast<int>(reports.size());
  if (!reports.empty()) {
    s.merged = merge(reports);
    s.findings = finding_lines(s.merged, name);
  }
  return s;
}

std::string survey_text(const Survey& s) {
  std::string out;
  for (const auto& o : s.outcomes) {
    out += "ras: " + clean_text(o.endpoint.text()) + ": ";
    if (!o.answered) {
      out += "no answer: " + clean_text(o.error) + "\n";
      continue;
    }
    out += summary_line(o.report);
    if (o.connections > 1)
      out += " (" + std::to_string(o.connections - 1) + " silent connection(s) first)";
    out += "\n";
    if (!o.format_note.empty()) out += "note: " + o.endpoint.text() + ": " + o.format_note + "\n";
  }
  for (const auto& f : s.findings) out += f + "\n";
  if (s.answered > 0)
    for (const auto& c : caveat_lines(s.merged)) out += "note: " + c + "\n";
  if (!s.findings.empty())
    out += "ras: " + std::to_string(s.findings.size()) + " finding(s)\n";
  else if (s.answered == 0)
    out += "ras: no RAS answered: nothing is known about the job from it\n";
  else
    out += "ras: RAS saw nothing wrong" +
           std::string(s.answered < static_cast<int>(s.outcomes.size())
                           ? " at the endpoints that answered"
                           : "") +
           (s.merged.timeouts > 0 ? " in what reached it" : "") + "\n";
  return out;
}

nlohmann::json survey_json(const Survey& s) {
  nlohmann::json j;
  j["endpoints"] = nlohmann::json::array();
  for (const auto& o : s.outcomes) {
    nlohmann::json e{{"endpoint", clean_text(o.endpoint.text())},
                     {"answered", o.answered},
                     {"error", o.answered ? nlohmann::json() : nlohmann::json(clean_text(o.error))},
                     {"format", o.format.empty() ? nlohmann::json() : nlohmann::json(o.format)},
                     {"format_note", o.format_note},
                     {"protocol", o.protocol},
                     {"connections", o.connections},
                     {"seconds", o.seconds}};
    e["report"] = o.answered ? report_json(o.report) : nlohmann::json();
    j["endpoints"].push_back(e);
  }
  j["merged"] = s.answered ? report_json(s.merged) : nlohmann::json();
  j["findings"] = s.findings;
  j["exit_status"] = s.exit_status();
  return j;
}

}  // namespace gpudiag::ras
