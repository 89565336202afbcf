#include "checks/record.h"

#include "util/error.h"
#include "util/text.h"

namespace gpudiag {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RankRecord, rank, world_size, local_rank, host, host_cpus, pid,
                                                launcher, backend, backend_why, gpu_ordinal,
                                                gpu_name, gpu_bus_id, gpu_uuid, phase, seconds, ok,
                                                failed_phase, reason, timed_out, hardware, hw_findings, nccl_id, nccl_roots, endpoint,
                                                cuda_runtime, cuda_driver, nccl_version,
                                                mpi_version, nccl_path, nccl_hostid, nvlink_domain, nvlink_peers,
                                                allreduce_bytes,
                                                allreduce_seconds,
                                                links, link_bytes, link_schedule, compute, fingerprint)

namespace {

/// Every string of a record through clean_text (util/text.h): a rank's own
/// strings come from its host and environment, a peer's from the wire, and
/// either may hold bytes that would break a line, drive a terminal or make
/// the JSON writer throw. Clean text (the usual case) is left as it is.
RankRecord cleaned(RankRecord r) {
  for (std::string* f : {&r.host, &r.launcher, &r.backend, &r.backend_why, &r.gpu_name,
                         &r.gpu_bus_id, &r.gpu_uuid, &r.phase, &r.failed_phase, &r.reason,
                         &r.nccl_id, &r.endpoint, &r.cuda_runtime, &r.cuda_driver,
                         &r.nccl_version, &r.mpi_version, &r.nccl_path, &r.nccl_hostid, &r.nvlink_domain, &r.nvlink_peers,
                         &r.link_schedule, &r.hardware})
    if (!is_clean_text(*f)) *f = escape_text(*f);
  for (std::string* f : {&r.compute.model, &r.compute.device, &r.compute.driver, &r.compute.known,
                         &r.compute.judged, &r.compute.finding})
    if (!is_clean_text(*f)) *f = escape_text(*f);
  if (r.compute.parts.size() > 8) r.compute.parts.resize(8);
  // A peer's clocks (NVML's figures): in range, or unknown.
  auto& clk = r.compute.clocks;
  for (int* mhz : {&clk.sm_mhz, &clk.sm_max_mhz})
    if (*mhz < -1 || *mhz > 100000) *mhz = -1;
  if (clk.events < -1) clk.events = -1;
  if (clk.why.size() > 300) clk.why = clk.why.substr(0, 300) + "...";
  if (!is_clean_text(clk.why)) clk.why = escape_text(clk.why);
  for (auto& p : r.compute.parts)
    for (std::string* f : {&p.name, &p.checksum})
      if (!is_clean_text(*f)) *f = escape_text(*f);
  if (r.hardware.size() > kMaxHardwareText) r.hardware = clean_text(r.hardware.substr(0, kMaxHardwareText)) + "...";
  std::map<std::string, int> counts;
  for (auto& [k, v] : r.hw_findings)
    if (counts.size() < kMaxHwFindingKeys && k.size() <= 64 && v > 0) counts[clean_text(k)] = v;
  r.hw_findings = std::move(counts);
  std::map<std::string, double> seconds;
  for (auto& [k, v] : r.seconds) seconds[clean_text(k)] = v;
  r.seconds = std::move(seconds);
  std::map<std::string, std::string> fields;
  for (auto& [k, v] : r.fingerprint.fields) fields[clean_text(k)] = clean_text(v);
  r.fingerprint.fields = std::move(fields);
  return r;
}

}  // namespace

std::string encode(const RankRecord& r) {
  nlohmann::json j = cleaned(r);
  // A rank that ran no compute phase (bench, --no-compute, a failure before
  // it) sends no compute object: every record stays as small as it was.
  if (!r.compute.ran() && r.compute.judged.empty()) j.erase("compute");
  // Clocks are a GPU's (NVML): the host backend's records go without them.
  else if (r.compute.device != "gpu") j["compute"].erase("clocks");
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

RankRecord decode(const std::string& s) {
  try {
    return cleaned(nlohmann::json::parse(s).get<RankRecord>());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ExitCode::broken, std::string("a peer sent a malformed record: ") + e.what(),
                "all ranks must run the same gpudiag version");
  }
}

}  // namespace gpudiag
