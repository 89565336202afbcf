// The job report's verdicts (rank_status) and what the summary, the table and
// the JSON make of them: every view gives the same count and the same words.
#include "report/job_report.h"

#include <gtest/gtest.h>

#include "report/rank_status.h"

namespace gpudiag {
namespace {

using Kind = RankStatus::Kind;

/// A job of `n` ranks on host "h" where everyone passed every checkpoint OK.
CheckResult all_ok(int n) {
  CheckResult res;
  res.table.resize(n);
  res.last_seen.assign(n, "barrier");
  res.missed_at.assign(n, "");
  res.missing_note.assign(n, "");
  for (int r = 0; r < n; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.world_size = n;
    rec.local_rank = r;
    rec.host = "h";
    rec.pid = 100 + r;
    rec.backend = "host/tcp";
    rec.phase = "barrier";
    for (const char* p : {"device", "exchange", "communicator", "all-reduce", "barrier"})
      rec.seconds[p] = 0.001;
    res.table[r] = rec;
    res.live.push_back(r);
  }
  res.me = *res.table[0];
  return res;
}

/// Rank `dead` said OK at the communicator checkpoint, entered the all-reduce
/// and was SIGKILLed there; the launcher announced it; the others failed on it.
CheckResult killed_in_all_reduce(int n, int dead) {
  CheckResult res = all_ok(n);
  auto& d = *res.table[dead];
  d.phase = "communicator";
  d.seconds.erase("all-reduce");
  d.seconds.erase("barrier");
  res.last_seen[dead] = "communicator";
  res.missed_at[dead] = "all-reduce";
  res.missing_note[dead] = "pid 102 on h (local rank 2), last phase: all-reduce";
  res.death = "rank 2 [h-2] (pid 102) was killed by SIGKILL (seen by gpudiag launch on h)";
  res.live.erase(std::find(res.live.begin(), res.live.end(), dead));
  for (int r = 0; r < n; ++r)
    if (r != dead) res.table[r]->fail("all-reduce", *res.death + "; here: lost the connection");
  res.me = *res.table[0];
  return res;
}

TEST(RankStatus, AllOk) {
  auto res = all_ok(4);
  auto s = rank_statuses(res);
  EXPECT_EQ(count_ok(s), 4);
  EXPECT_EQ(not_ok_phrase(s), "");
  EXPECT_TRUE(job_ok(res));
  EXPECT_EQ(summary_table(res).rfind("summary: 4/4 ranks OK on 1 host, backend host/tcp\n", 0), 0u);
  auto j = job_json(res);
  EXPECT_TRUE(j["ok"]);
  EXPECT_EQ(j["ranks_ok"], 4);
  for (auto& row : j["ranks"]) EXPECT_EQ(row["status"], "ok");
}

TEST(RankStatus, TheAllReducesFigureBlamesNoRankAcrossHosts) {
  // Six hosts of two, one link throttled: every rank's all-reduce takes the
  // slow link's time, and whichever rank measured the longest says nothing
  // of where the link is.
  auto res = all_ok(12);
  for (int r = 0; r < 12; ++r) {
    auto& rec = *res.table[r];
    rec.host = "node" + std::to_string(r / 2 + 1);
    rec.allreduce_bytes = 64 << 20;
    rec.allreduce_seconds = r == 8 ? 3.01 : 3.0;
  }
  const auto line = summary_table(res).substr(0, summary_table(res).find('\n'));
  EXPECT_EQ(line.find("rank 8"), std::string::npos) << line;
  EXPECT_NE(line.find("12/12 ranks OK on 6 hosts"), std::string::npos) << line;
  EXPECT_NE(line.find("cannot say which link; gpudiag bench --links names it"), std::string::npos)
      << line;
}

// At scale the output holds counts per state and the ranks that are not OK;
// the whole table goes where the last line says.
TEST(RankStatus, ALargeJobsTableIsCountsAndTheRanksThatAreNotOk) {
  auto res = killed_in_all_reduce(600, 2);
  const auto full = summary_table(res);
  const auto brief = summary_table(res, 256, "table.txt");
  EXPECT_NE(full.find("\n599   h "), std::string::npos);
  EXPECT_EQ(brief.find("\n599   h "), std::string::npos) << brief;
  EXPECT_NE(brief.find("\n2     "), std::string::npos) << brief;  // the dead rank's row
  EXPECT_NE(brief.find("ranks by state: dead 1, stopped 599\n"), std::string::npos) << brief;
  // The cause first, then those it stopped: rank 2's row before rank 0's.
  EXPECT_LT(brief.find("\n2     "), brief.find("\n0     ")) << brief;
  EXPECT_NE(brief.find("(536 more rows: 536 not OK, 0 OK; every rank's row in table.txt)"),
            std::string::npos)
      << brief;
  // The summary line is the same either way.
  EXPECT_EQ(full.substr(0, full.find('\n')), brief.substr(0, brief.find('\n')));
  EXPECT_LT(brief.size(), 64u * 200 + 1000);
  // Below the limit: every row.
  EXPECT_EQ(summary_table(res, 600, "x"), full);
}

TEST(RankStatus, KilledRankIsDeadAndTheOthersStoppedByIt) {
  auto res = killed_in_all_reduce(4, 2);
  auto s = rank_statuses(res);
  EXPECT_EQ(count_ok(s), 0);
  EXPECT_EQ(s[2].kind, Kind::dead);
  EXPECT_EQ(s[2].death, "killed by SIGKILL");
  EXPECT_EQ(s[2].last_phase, "all-reduce");
  EXPECT_EQ(s[2].missed_at, "all-reduce");
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(s[r].kind, Kind::stopped) << r;
    EXPECT_EQ(s[r].stopped_by, 2) << r;
  }
  const std::string where = "last phase: all-reduce, did not reach the all-reduce checkpoint";
  EXPECT_EQ(whereabouts(s[2]), where);
  EXPECT_EQ(not_ok_phrase(s),
            "rank 2 dead: killed by SIGKILL, " + where + "; ranks 0,1,3 stopped by rank 2");
  EXPECT_FALSE(job_ok(res));

  // The summary's count, the table and the JSON say the same.
  auto table = summary_table(res);
  EXPECT_EQ(table.rfind("summary: 0/4 ranks OK on 1 host", 0), 0u) << table;
  EXPECT_NE(table.find("DEAD (killed by SIGKILL; " + where + ")"), std::string::npos) << table;
  EXPECT_EQ(table.find("GONE"), std::string::npos) << table;
  EXPECT_EQ(table.find("communicator)"), std::string::npos) << table;  // no second phase
  std::size_t stopped = 0;
  for (auto at = table.find("STOPPED by rank 2 (in all-reduce)"); at != std::string::npos;
       at = table.find("STOPPED by rank 2", at + 1))
    ++stopped;
  EXPECT_EQ(stopped, 3u) << table;

  auto j = job_json(res);
  EXPECT_FALSE(j["ok"]);
  EXPECT_EQ(j["ranks_ok"], 0);
  EXPECT_EQ(j["not_ok"], not_ok_phrase(s));
  const auto& d = j["ranks"][2];
  EXPECT_FALSE(d["ok"]);  // its last record said ok; it died after
  EXPECT_EQ(d["status"], "dead");
  EXPECT_EQ(d["death"], "killed by SIGKILL");
  EXPECT_EQ(d["phase"], "all-reduce");
  EXPECT_EQ(d["last_phase"], "all-reduce");
  EXPECT_EQ(d["missed_checkpoint"], "all-reduce");
  EXPECT_EQ(d["last_seen"], "communicator");
  EXPECT_EQ(d["reason"], "killed by SIGKILL, " + where);
  for (int r : {0, 1, 3}) {
    EXPECT_FALSE(j["ranks"][r]["ok"]);
    EXPECT_EQ(j["ranks"][r]["status"], "stopped");
    EXPECT_EQ(j["ranks"][r]["stopped_by"], 2);
  }
}

TEST(RankStatus, StoppedProcessIsGoneWithTheSameWordsEverywhere) {
  auto res = killed_in_all_reduce(4, 2);
  res.death.reset();  // SIGSTOP: nobody saw it die
  auto s = rank_statuses(res);
  EXPECT_EQ(s[2].kind, Kind::gone);
  EXPECT_NE(summary_table(res).find("GONE (last phase: all-reduce, did not reach the all-reduce "
                                    "checkpoint)"),
            std::string::npos);
  EXPECT_EQ(job_json(res)["ranks"][2]["status"], "gone");
}

TEST(RankStatus, WithoutAPlaneNoteTheLastRecordGivesThePhase) {
  auto res = killed_in_all_reduce(3, 2);
  res.missing_note[2] = "";  // the MPI plane has no progress notes
  auto s = rank_statuses(res);
  EXPECT_EQ(s[2].last_phase, "communicator");
}

TEST(RankStatus, NeverReportedIsMissingAndNeverOk) {
  auto res = all_ok(4);
  res.table[3].reset();
  res.last_seen[3] = "";
  res.missed_at[3] = "exchange";
  res.live.pop_back();
  for (int r = 0; r < 3; ++r)
    res.table[r]->fail("exchange", "stopped at the exchange checkpoint: rank 3 did not reach the "
                                   "exchange checkpoint within 6.00 s (never joined the store)", true);
  auto s = rank_statuses(res);
  EXPECT_EQ(s[3].kind, Kind::missing);
  EXPECT_EQ(s[0].stopped_by, 3);
  EXPECT_EQ(not_ok_phrase(s),
            "rank 3 missing: never reported, did not reach the exchange checkpoint; "
            "ranks 0-2 stopped by rank 3");
  auto j = job_json(res);
  EXPECT_FALSE(j["ranks"][3]["ok"]);
  EXPECT_EQ(j["ranks"][3]["status"], "missing");
  EXPECT_NE(summary_table(res).find("3     MISSING (never reported"), std::string::npos);
}

TEST(RankStatus, JoinedButStoppedBeforeTheFirstCheckpointIsGone) {
  auto res = all_ok(4);
  res.table[3].reset();
  res.last_seen[3] = "";
  res.missed_at[3] = "exchange";
  res.missing_note[3] = "pid 103 on h (local rank 3), last phase: device";
  auto s = rank_statuses(res);
  EXPECT_EQ(s[3].kind, Kind::gone);
  EXPECT_EQ(whereabouts(s[3]), "last phase: device, did not reach the exchange checkpoint");
  EXPECT_NE(summary_table(res).find("3     GONE (last phase: device, did not reach the exchange"),
            std::string::npos);
}

TEST(RankStatus, OwnFailureIsBrokenAndItsVictimsStopped) {
  auto res = all_ok(3);
  res.table[1]->fail("device", "12 of 4096 words of GPU memory read back wrong");
  res.table[0]->fail("exchange", "stopped at the exchange checkpoint: rank 1 [h-1] failed in "
                                 "device: 12 of 4096 words of GPU memory read back wrong");
  res.table[2]->fail("all-reduce", "all-reduce timed out after 6 s waiting for rank 4", true);
  auto s = rank_statuses(res);
  EXPECT_EQ(s[1].kind, Kind::broken);
  EXPECT_EQ(s[0].kind, Kind::stopped);
  EXPECT_EQ(s[0].stopped_by, 1);
  EXPECT_EQ(s[2].kind, Kind::timeout);  // rank 4 is not in this job
  EXPECT_NE(summary_table(res).find("BROKEN in device"), std::string::npos);
  EXPECT_NE(summary_table(res).find("TIMEOUT in all-reduce"), std::string::npos);
}

TEST(RankStatus, TheSummaryNamesTheHardwareThatBrokeANode) {
  auto res = all_ok(4);
  const std::string xid = "Xid 79 (GPU fallen off the bus) on 0000:3b:00 at 12:03:44: reboot the node";
  for (int r : {0, 1}) {
    res.table[r]->host = "node7";
    res.table[r]->fail("device", xid);
    res.table[r]->hardware = xid;
  }
  res.table[2]->fail("exchange", "stopped at the exchange checkpoint: rank 0 [node7-0] failed in device: " + xid);
  res.table[3]->fail("exchange", "12 of 4096 words of GPU memory read back wrong");  // not hardware evidence
  res.me = *res.table[0];
  auto s = rank_statuses(res);
  EXPECT_EQ(s[0].hardware, "node7: " + xid);
  EXPECT_EQ(s[2].kind, Kind::stopped);
  EXPECT_EQ(not_ok_phrase(s), "ranks 0,1 broken in device (node node7: " + xid +
                                  "); rank 3 broken in exchange; rank 2 stopped by rank 0");
  EXPECT_NE(summary_table(res).find("; ranks 0,1 broken in device (node node7: Xid 79"), std::string::npos);
  EXPECT_EQ(job_json(res)["ranks"][1]["hardware"], xid);
}

TEST(RankStatus, NamingAnOkRankIsNotBeingStoppedByIt) {
  auto res = all_ok(4);
  res.table[0]->fail("all-reduce", "all-reduce of 1 MiB returned wrong values: the contribution "
                                   "of rank 3 is missing");
  auto s = rank_statuses(res);
  EXPECT_EQ(s[0].kind, Kind::broken);
  EXPECT_FALSE(s[0].stopped_by);
}

TEST(RankStatus, StoppedByFollowsTheChainToItsStart) {
  auto res = killed_in_all_reduce(4, 2);
  // Rank 3 timed out on its neighbour rank 1, which was waiting on rank 2.
  res.table[3]->reason = "rank 1 [h-1] stalled; here: timed out";
  res.table[1]->reason = "rank 2 [h-2] did not reach the all-reduce checkpoint";
  auto s = rank_statuses(res);
  EXPECT_EQ(s[3].stopped_by, 2);
}

TEST(RankStatus, RanksBlamingEachOtherAreNotStopped) {
  auto res = all_ok(2);
  res.table[0]->fail("all-reduce", "timed out waiting for rank 1", true);
  res.table[1]->fail("all-reduce", "timed out waiting for rank 0", true);
  auto s = rank_statuses(res);
  EXPECT_EQ(s[0].kind, Kind::timeout);
  EXPECT_EQ(s[1].kind, Kind::timeout);
  EXPECT_EQ(not_ok_phrase(s), "ranks 0,1 timeout in all-reduce");
}

TEST(RankStatus, RankTenIsNotRankOne) {
  auto res = all_ok(12);
  res.table[11]->fail("device", "broken GPU");
  res.table[0]->fail("exchange", "stopped at the exchange checkpoint: rank 11 [h-11] failed");
  auto s = rank_statuses(res);
  EXPECT_EQ(s[0].stopped_by, 11);
}

}  // namespace
}  // namespace gpudiag
