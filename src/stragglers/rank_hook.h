// The Python module a rank imports under `gpudiag launch --stragglers`
// (rank_hook.cpp says what it measures and how it stays out of the job's way).
#pragma once

#include <string>

namespace gpudiag::stragglers {

/// Writes DIR/_gpudiag_stragglers.py beside the launcher's startup file,
/// which imports it when GPUDIAG_STRAGGLERS is set. Throws UsageError when it cannot.
void write_rank_hook(const std::string& dir);

/// The module's flight-recorder reader (rank_hook_kernels.cpp): Python text
/// defining _fr_start(), which the module calls once torch.distributed is in.
const char* kernel_reader_source();

}  // namespace gpudiag::stragglers
