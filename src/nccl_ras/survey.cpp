// survey(), survey_text(), survey_json() (survey.h): every endpoint asked at once, the
// answers merged, and when counts differ a second sample (motion.h) before the verdict.
#include "nccl_ras/survey.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "nccl_ras/motion.h"
#include "util/text.h"

namespace gpudiag::ras {

namespace {
constexpr std::size_t kAtOnce = 32;
}

int Survey::exit_status() const {
  if (!findings.empty()) return 1;
  const bool unconfirmed = std::any_of(moving.begin(), moving.end(), [](const std::string& l) {
    return l.starts_with("unconfirmed:");
  });
  return answered == static_cast<int>(outcomes.size()) && answered > 0 && !unconfirmed ? 0 : 3;
}

namespace {

std::vector<Outcome> ask_all(const std::vector<Endpoint>& endpoints, const QueryOptions& options) {
  std::vector<Outcome> out(endpoints.size());
  for (std::size_t at = 0; at < endpoints.size(); at += kAtOnce) {
    std::vector<std::future<Outcome>> running;
    for (std::size_t i = at; i < std::min(endpoints.size(), at + kAtOnce); ++i)
      running.push_back(
          std::async(std::launch::async, [&, i] { return query(endpoints[i], options); }));
    for (std::size_t i = 0; i < running.size(); ++i) out[at + i] = running[i].get();
  }
  return out;
}

std::vector<Report> reports_of(const std::vector<Outcome>& outcomes) {
  std::vector<Report> reports;
  for (const auto& o : outcomes)
    if (o.answered) reports.push_back(o.report);
  return reports;
}

}  // namespace

Survey survey(const std::vector<Endpoint>& endpoints, const QueryOptions& options, double gap_s,
              const ProcessNamer& name) {
  Survey s;
  s.outcomes = ask_all(endpoints, options);
  auto reports = reports_of(s.outcomes);
  s.answered = static_cast<int>(reports.size());
  if (reports.empty()) return s;
  s.merged = merge(reports);
  if (counts_differ(s.merged)) {
    // RAS answers for the whole job at every endpoint: ask those that answered once more.
    std::vector<Endpoint> again;
    for (const auto& o : s.outcomes)
      if (o.answered) again.push_back(o.endpoint);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, gap_s)));
    s.second = ask_all(again, options);
    auto later = reports_of(s.second);
    if (later.empty())
      one_sample(s.merged, "the second sample got no answer: " + clean_text(s.second[0].error));
    else
      compare_samples(s.merged, merge(later), gap_s);
  }
  s.findings = finding_lines(s.merged, name);
  s.moving = motion_lines(s.merged, name);
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
  for (const auto& f : s.moving) out += f + "\n";
  if (s.answered > 0)
    for (const auto& c : caveat_lines(s.merged)) out += "note: " + c + "\n";
  if (!s.findings.empty())
    out += "ras: " + std::to_string(s.findings.size()) + " finding(s)\n";
  else if (s.answered == 0)
    out += "ras: no RAS answered: nothing is known about the job from it\n";
  else if (s.exit_status() == 3 && s.answered == static_cast<int>(s.outcomes.size()))
    out += "ras: counts differ and whether they move is not known: no fault is claimed\n";
  else
    out += "ras: RAS saw nothing wrong" +
           std::string(s.answered < static_cast<int>(s.outcomes.size())
                           ? " at the endpoints that answered"
                           : "") +
           (s.merged.timeouts > 0 ? " in what reached it" : "") +
           (s.moving.empty() ? "" : ": the counts that differed were in flight") + "\n";
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
  j["second_sample"] = nlohmann::json::array();
  for (const auto& o : s.second)
    j["second_sample"].push_back(
        {{"endpoint", clean_text(o.endpoint.text())},
         {"answered", o.answered},
         {"error", o.answered ? nlohmann::json() : nlohmann::json(clean_text(o.error))},
         {"seconds", o.seconds}});
  j["findings"] = s.findings;
  j["motion"] = s.moving;
  j["exit_status"] = s.exit_status();
  return j;
}

}  // namespace gpudiag::ras
