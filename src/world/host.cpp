#include "world/host.h"

#include <unistd.h>

#include "util/text.h"

namespace gpudiag {

std::string short_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  std::string h(buf);
  auto dot = h.find('.');
  // A host name is whatever sethostname() was given: escaped (util/text.h).
  return clean_text(dot == std::string::npos ? h : h.substr(0, dot));
}

}  // namespace gpudiag
