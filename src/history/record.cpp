// See record.h. The reader is strict in shape and lenient in nothing: a
// record with one field of the wrong type or size is skipped whole, so that
// a tally never counts half of a foreign or torn file.
#include "history/record.h"

#include <cctype>

#include "util/text.h"

namespace gpudiag::history {

namespace {

using json = nlohmann::json;

std::string cut(const std::string& s, std::size_t max) {
  std::string c = clean_text(s);
  if (c.size() <= max) return c;
  c.resize(max);
  // Not in the middle of a UTF-8 sequence: drop continuation bytes at the cut.
  while (!c.empty() && (static_cast<unsigned char>(c.back()) & 0xC0) == 0x80) c.pop_back();
  if (!c.empty() && static_cast<unsigned char>(c.back()) >= 0xC0) c.pop_back();
  return c;
}

/// "YYYY-MM-DDTHH:MM:SSZ", digits where digits go.
bool is_utc_time(const std::string& t) {
  static const char kShape[] = "dddd-dd-ddTdd:dd:ddZ";
  if (t.size() != sizeof(kShape) - 1) return false;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (kShape[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(t[i])) : t[i] != kShape[i])
      return false;
  return true;
}

/// Thrown inside parse_record() for the first field that is not as it must be.
struct Bad {
  std::string why;
};

std::string text_field(const json& obj, const char* key, std::size_t min, std::size_t max) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string())
    throw Bad{std::string("'") + key + "' is missing or not a string"};
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() < min || s.size() > max)
    throw Bad{std::string("'") + key + "' is not " + std::to_string(min) + "-" +
              std::to_string(max) + " bytes long"};
  return clean_text(s);
}

std::optional<Verdict> verdict_of(const std::string& s) {
  if (s == "ok") return Verdict::ok;
  if (s == "fault") return Verdict::fault;
  if (s == "other") return Verdict::other;
  return std::nullopt;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::ok:
      return "ok";
    case Verdict::fault:
      return "fault";
    case Verdict::other:
      return "other";
  }
  return "other";
}

std::string utc_time(std::time_t t) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::ordered_json to_json(const Record& r) {
  nlohmann::ordered_json j;
  j["schema"] = kSchema;
  j["time"] = r.time;
  j["command"] = r.command;
  j["host"] = cut(r.host, kMaxNameBytes);
  j["job"] = {{"id", cut(r.job_id, kMaxNameBytes)}, {"source", cut(r.job_source, kMaxTextBytes)}};
  j["verdict"] = verdict_name(r.verdict);
  j["reason"] = cut(r.reason, kMaxTextBytes);
  auto gpus = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < r.gpus.size() && i < kMaxGpus; ++i) {
    const auto& g = r.gpus[i];
    gpus.push_back({{"uuid", cut(g.uuid, kMaxNameBytes)},
                    {"serial", cut(g.serial, kMaxNameBytes)},
                    {"bus_id", cut(g.bus_id, kMaxNameBytes)},
                    {"at_fault", g.at_fault}});
  }
  j["gpus"] = gpus;
  auto nics = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < r.nics.size() && i < kMaxNics; ++i)
    nics.push_back(cut(r.nics[i], kMaxNameBytes));
  j["nics"] = nics;
  return j;
}

std::optional<Record> parse_record(const std::string& text, std::string& why) {
  if (text.size() > kMaxRecordBytes) {
    why = "larger than " + std::to_string(kMaxRecordBytes) + " bytes";
    return std::nullopt;
  }
  // No exceptions from the parser (depth and syntax): a bad file is one line.
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    why = "not a JSON object";
    return std::nullopt;
  }
  try {
    Record r;
    if (!j.contains("schema") || j["schema"] != kSchema)
      throw Bad{std::string("'schema' is not ") + kSchema};
    r.time = text_field(j, "time", 20, 20);
    if (!is_utc_time(r.time)) throw Bad{"'time' is not YYYY-MM-DDTHH:MM:SSZ"};
    r.command = text_field(j, "command", 1, 16);
    if (r.command != "launch" && r.command != "check" && r.command != "sweep")
      throw Bad{"'command' is not launch, check or sweep"};
    r.host = text_field(j, "host", 1, kMaxNameBytes);
    auto job = j.find("job");
    if (job == j.end() || !job->is_object()) throw Bad{"'job' is missing or not an object"};
    r.job_id = text_field(*job, "id", 0, kMaxNameBytes);
    r.job_source = text_field(*job, "source", 0, kMaxTextBytes);
    auto v = verdict_of(text_field(j, "verdict", 1, 16));
    if (!v) throw Bad{"'verdict' is not ok, fault or other"};
    r.verdict = *v;
    r.reason = text_field(j, "reason", 0, kMaxTextBytes);
    auto gpus = j.find("gpus");
    if (gpus == j.end() || !gpus->is_array() || gpus->size() > kMaxGpus)
      throw Bad{"'gpus' is not a list of at most " + std::to_string(kMaxGpus)};
    for (const auto& g : *gpus) {
      if (!g.is_object()) throw Bad{"a GPU is not an object"};
      GpuId id;
      id.uuid = text_field(g, "uuid", 0, kMaxNameBytes);
      id.serial = text_field(g, "serial", 0, kMaxNameBytes);
      id.bus_id = text_field(g, "bus_id", 0, kMaxNameBytes);
      auto f = g.find("at_fault");
      if (f == g.end() || !f->is_boolean()) throw Bad{"a GPU's 'at_fault' is not true or false"};
      id.at_fault = f->get<bool>();
      r.gpus.push_back(std::move(id));
    }
    auto nics = j.find("nics");
    if (nics == j.end() || !nics->is_array() || nics->size() > kMaxNics)
      throw Bad{"'nics' is not a list of at most " + std::to_string(kMaxNics)};
    for (const auto& n : *nics) {
      if (!n.is_string() || n.get_ref<const std::string&>().size() > kMaxNameBytes)
        throw Bad{"a NIC is not a name"};
      r.nics.push_back(clean_text(n.get_ref<const std::string&>()));
    }
    return r;
  } catch (const Bad& b) {
    why = b.why;
  } catch (const json::exception& e) {  // a comparison of odd types; never expected
    why = "malformed";
  }
  return std::nullopt;
}

}  // namespace gpudiag::history
