// kernel_note.h: one bounded scan of the kernel log; the records inside the
// window go through the classifier (so a link that came back up is noted on
// its going down), and the OOM killer's line for the dead rank's pid is kept
// as it reads.
#include "hw/kernel_note.h"

#include <algorithm>

#include "hw/evidence.h"
#include "hw/kmsg.h"
#include "hw/kmsg_findings.h"
#include "util/text.h"

namespace gpudiag::hw {

namespace {

constexpr std::size_t kNoteLines = 8;
constexpr std::size_t kNoteLineBytes = 300;

std::string note_cut(const std::string& s) {
  return s.size() <= kNoteLineBytes ? s : clean_text(s.substr(0, kNoteLineBytes)) + "...";
}

}  // namespace

KernelNote kernel_note(const KernelNoteWindow& w, const std::string& kmsg) {
  KernelNote note;
  const std::uint64_t span = static_cast<std::uint64_t>(std::max(0.0, w.before_s) * 1e6);
  const std::uint64_t from = std::max(w.job_start_usec, w.at_usec > span ? w.at_usec - span : 0);
  KmsgClassifier classifier;
  std::vector<std::string> oom;
  const std::string killed = "Killed process " + std::to_string(w.pid) + " ";
  KmsgLimits limits;
  limits.max_read_bytes = 16u << 20;
  const auto scan = scan_kernel_log(
      kmsg,
      [&](const KmsgRecord& r) {
        if (r.usec < from || r.usec > w.at_usec + 5'000'000) return;  // a few seconds' slack after it
        classifier.add(r);
        if (w.pid > 0 && r.facility == 0 && r.message.find(killed) != std::string::npos && oom.size() < 2)
          oom.push_back("OOM killer: " + note_cut(r.message));
      },
      limits);
  note.error = scan.error;
  const double boot = boot_epoch_seconds();
  std::size_t more = 0;
  auto keep = [&](std::string line) {
    if (note.lines.size() < kNoteLines) note.lines.push_back(std::move(line));
    else ++more;
  };
  for (auto& line : oom) keep(std::move(line));
  auto findings = classifier.findings();
  // The node's findings first: they are what the report is read for.
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return (a.cls == FindingClass::node) > (b.cls == FindingClass::node);
  });
  for (const auto& f : findings) {
    std::string tag = class_name(f.cls);
    if (f.cls == FindingClass::workload) tag += " (the application's fault)";
    keep(tag + ": " + note_cut(finding_line(f, boot)));
  }
  if (more) note.lines.push_back(std::to_string(more) + " more (gpudiag info lists the node's findings)");
  return note;
}

std::string kernel_note_text(const KernelNote& n, const std::string& host, bool quiet_ok) {
  const std::string who = "the kernel log of " + clean_text(host);
  if (n.lines.empty()) {
    if (quiet_ok) return "";
    if (!n.error.empty()) return n.error;
    return who + " shows no hardware error and no OOM kill within a minute before it";
  }
  std::string text = who + " within a minute before it:";
  for (const auto& l : n.lines) text += "\n  " + l;
  return text;
}

}  // namespace gpudiag::hw
