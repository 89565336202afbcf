// The textfile format (prometheus.h): families kept in first-added order,
// samples rendered as they are added; the atomic write goes through a
// descriptor so every failure (open, write, fsync, rename) is seen.
#include "report/prometheus.h"

#include "report/status_line.h"
#include "util/file_out.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "util/error.h"

namespace gpudiag {

namespace {

bool valid_name(const std::string& n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const unsigned char c = n[i];
    const bool ok = std::isalpha(c) || c == '_' || c == ':' || (i > 0 && std::isdigit(c));
    if (!ok) return false;
  }
  return true;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::string prom_escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void PromText::gauge(const std::string& name, const std::string& help, const PromLabels& labels,
                     double value) {
  if (!valid_name(name))
    throw Error(ExitCode::internal, "not a Prometheus metric name: " + name);
  if (!std::isfinite(value)) return;
  auto [it, fresh] = families_.try_emplace(name);
  if (fresh) {
    order_.push_back(name);
    it->second.help = help;
  }
  std::string s = name;
  if (!labels.empty()) {
    s += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (!valid_name(labels[i].first) || labels[i].first.find(':') != std::string::npos)
        throw Error(ExitCode::internal, "not a Prometheus label name: " + labels[i].first);
      s += (i ? "," : "") + labels[i].first + "=\"" + prom_escape(labels[i].second) + "\"";
    }
    s += '}';
  }
  it->second.samples.push_back(s + " " + number(value));
}

std::string PromText::text() const {
  std::string out;
  for (const auto& name : order_) {
    const Family& f = families_.at(name);
    std::string help;
    for (char c : f.help) help += c == '\n' ? ' ' : c;
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
    for (const auto& s : f.samples) out += s + "\n";
  }
  return out;
}

int write_prometheus_file(const std::string& path, const std::string& text) {
  return write_file("--prometheus", path, text, WriteMode::replace);
}

PromLabels prom_info_labels(const std::string& report, const std::string& nccl_version) {
  return {{"report", report},
          {"version", GPUDIAG_VERSION},
          {"nccl", nccl_version.empty() ? "none" : nccl_version}};
}

}  // namespace gpudiag
