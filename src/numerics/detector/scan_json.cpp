#include "numerics/detector/scan_json.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include "util/error.h"
#include "util/file_out.h"

namespace gpudiag::numerics {

namespace {

using ojson = nlohmann::ordered_json;

ojson number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

ojson tensor_json(const TensorInfo& t) {
  ojson j;
  j["name"] = t.name;
  j["dtype"] = dtype_name(t.dtype);
  j["shape"] = t.shape;
  return j;
}

const char* kind_name(EntryKind k) {
  switch (k) {
    case EntryKind::tensor:
      return "tensor";
    case EntryKind::none:
      return "None";
    default:
      return "not a tensor";
  }
}

const char* stop_name(StopReason r) {
  switch (r) {
    case StopReason::detected:
      return "detected";
    case StopReason::aborted:
      return "aborted";
    default:
      return "end";
  }
}

}  // namespace

ojson stats_json(const TensorStats& s) {
  ojson j;
  j["count"] = s.count;
  j["abs_min"] = s.empty() ? ojson(nullptr) : number(s.abs_min);
  j["abs_max"] = s.empty() ? ojson(nullptr) : number(s.abs_max);
  j["nan"] = s.nan;
  j["pos_inf"] = s.pos_inf;
  j["neg_inf"] = s.neg_inf;
  j["zero"] = s.zero;
  j["subnormal"] = s.subnormal;
  j["ge_1e2"] = s.ge_1e2;
  j["ge_1e3"] = s.ge_1e3;
  j["ge_1e4"] = s.ge_1e4;
  return j;
}

ScanJson::ScanJson(std::string mode, std::string scanner, const std::vector<std::string>& files,
                   bool enabled)
    : enabled_(enabled) {
  if (!enabled_) return;
  doc_["schema"] = "gpudiag-scan/1";
  doc_["mode"] = std::move(mode);
  doc_["scanner"] = std::move(scanner);
  doc_["files"] = files;
  doc_["options"] = nullptr;
  doc_["result"] = nullptr;
  if (doc_["mode"] == "frames")
    doc_["batches"] = ojson::array();
  else
    doc_["tensors"] = ojson::array();
}

void ScanJson::set_options(const DetectorOptions& o) {
  if (!enabled_) return;
  ojson j;
  j["max_frames"] = o.max_frames;
  j["trace_batches"] = o.trace_batches;
  j["abort_after_batch"] = o.abort_after_batch ? ojson(*o.abort_after_batch) : ojson(nullptr);
  doc_["options"] = j;
}

void ScanJson::add_batch(const Batch& batch, std::span<const TensorStats> stats, int rank) {
  if (!enabled_) return;
  ojson b;
  if (rank >= 0) b["rank"] = rank;
  b["batch_number"] = batch.number;
  ojson frames = ojson::array();
  for (const Frame& f : batch.frames) {
    ojson fj;
    fj["frame"] = f.index;
    fj["module"] = f.module;
    fj["class"] = f.class_name;
    if (!std::isnan(f.time)) fj["time"] = f.time;
    ojson entries = ojson::array();
    for (const Entry& e : f.entries) {
      ojson ej;
      ej["label"] = e.label;
      ej["kind"] = kind_name(e.kind);
      if (e.file) ej["file"] = e.file->path();  // none in a stats dump
      if (e.kind == EntryKind::tensor) {
        ej["tensor"] = tensor_json(*batch.tensors[e.slot]);
        ej["stats"] = stats_json(stats[e.slot]);
      }
      entries.push_back(std::move(ej));
    }
    fj["entries"] = std::move(entries);
    frames.push_back(std::move(fj));
  }
  b["frames"] = std::move(frames);
  doc_["batches"].push_back(std::move(b));
}

void ScanJson::add_loose_file(const std::string& path, std::span<const LooseTensor> tensors,
                              std::span<const TensorStats> stats) {
  if (!enabled_) return;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    ojson t;
    t["file"] = path;
    t["label"] = tensors[i].label;
    t["tensor"] = tensor_json(*tensors[i].tensor);
    t["stats"] = stats_json(stats[i]);
    doc_["tensors"].push_back(std::move(t));
  }
}

void ScanJson::set_insights(nlohmann::json insights) {
  if (enabled_) doc_["insights"] = std::move(insights);
}

void ScanJson::set_section(const std::string& key, ojson value) {
  if (enabled_) doc_[key] = std::move(value);
}

void ScanJson::set_result(bool found, const DetectorResult* r) {
  if (!enabled_) return;
  ojson j;
  j["inf_nan_found"] = found;
  if (r) {
    j["stop"] = stop_name(r->stop);
    j["batch_number"] = r->batch_number;
    j["batches_scanned"] = r->batches_fed;
    j["frames_replayed"] = r->frames_replayed;
    if (r->first) {
      ojson f;
      f["batch_number"] = r->first->batch;
      f["frame"] = r->first->frame;
      f["module"] = r->first->module;
      f["class"] = r->first->class_name;
      f["label"] = r->first->label;
      f["nan"] = r->first->nan;
      f["inf"] = r->first->inf;
      j["first"] = std::move(f);
    } else {
      j["first"] = nullptr;
    }
  }
  doc_["result"] = std::move(j);
}

void ScanJson::write(const std::string& path) const {
  if (!enabled_) return;
  if (path == "-") {  // stdout: indented on a terminal, else one line (docs/json.md)
    std::cout << doc_.dump(::isatty(STDOUT_FILENO) == 1 ? 2 : -1, ' ', false,
                           nlohmann::ordered_json::error_handler_t::replace)
              << '\n';
    std::cout.flush();
    return;
  }
  // Tensor names come from files and may hold invalid UTF-8: replace it
  // rather than fail after the scan. Written by the one writer (util/file_out.h).
  if (write_file("--json", path,
                 doc_.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n",
                 WriteMode::through) != 0)
    throw UsageError("--json " + path + ": not written (see the line above)");
}

}  // namespace gpudiag::numerics
