// gpudiag fr's report as text (one line per finding, for a person) and as JSON (schema
// gpudiag-fr/1, docs/fr.md). Every string that came from a dump or a file name is passed
// through clean_text (util/text.h) where it is written, so a dump cannot drive the terminal.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "flight_recorder/analysis.h"

namespace gpudiag::fr {

inline constexpr const char* kSchema = "gpudiag-fr/1";

std::string render_text(const Report& report);
nlohmann::ordered_json render_json(const Report& report);

}  // namespace gpudiag::fr
