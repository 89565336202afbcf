// The secret-name rule (secret.h).
#include "util/secret.h"

#include <algorithm>
#include <cctype>

namespace gpudiag {

bool is_secret_name(std::string_view name) {
  std::string up(name);
  std::transform(up.begin(), up.end(), up.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (up == "GPUDIAG_SECRET_FILE") return false;
  for (const char* word : {"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE"})
    if (up.find(word) != std::string::npos) return true;
  return up.size() > 4 && up.ends_with("_KEY");
}

std::string hidden_value(std::string_view value) {
  return "(set, " + std::to_string(value.size()) + " bytes, not shown)";
}

}  // namespace gpudiag
