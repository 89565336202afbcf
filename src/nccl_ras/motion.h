// Telling collectives in flight from a rank that stopped: two samples of RAS's report.
//
// NCCL counts a collective when the host launches it (2.26+: the communicator's seqNumber;
// before, collOpCount), and RAS reads each process at its own moment while it gathers, so
// on a busy, healthy job the ranks' counts differ by a launch or two at any instant (NCCL
// itself files MISMATCH under Warnings, not Errors). One report cannot tell that from a
// rank that stopped before its next collective; a second, a couple of seconds later, can:
// counts only grow, so a rank behind whose count is the same later did not launch anything
// in between (it is where the job waits), and one whose count changed is moving.
//
// compare_samples() reads that from the groups RAS printed: by rank where the report names
// the ranks (JSON names every one; the text names outliers), else by value (the ranks at a
// count behind are still there later when a group at that count is). A communicator whose
// counts agree in the second sample has moved (the ranks behind caught up), unless the
// second sample misses ranks of it.
#pragma once

#include <string>

#include "nccl_ras/report.h"

namespace gpudiag::ras {

/// Whether `r` holds operation counts that differ (a second sample would tell more).
bool counts_differ(const Report& r);

/// Sets the motion of every count mismatch of `first` from `later`, taken `gap_s` seconds
/// after it; first.samples becomes 2.
void compare_samples(Report& first, const Report& later, double gap_s);

/// Records that counts differed and only one sample was taken, and why.
void one_sample(Report& r, std::string why);

}  // namespace gpudiag::ras
