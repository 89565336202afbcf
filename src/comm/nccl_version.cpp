#include "comm/nccl.h"

namespace gpudiag {

std::string nccl_version_string(int code) {
  if (code <= 0) return "none";
  // Since 2.9 the code is major*10000 + minor*100 + patch; before, major*1000 + minor*100 + patch.
  bool modern = code >= 10000;
  int major = modern ? code / 10000 : code / 1000;
  int minor = modern ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace gpudiag
