#include "comm/mpi.h"
#include "plane/plane.h"
#include "tree/tree.h"

namespace gpudiag {

std::unique_ptr<Plane> make_mpi_plane(MpiSession&) { return nullptr; }
std::unique_ptr<Plane> make_mpi_tree_plane(MpiSession&, int, int, std::unique_ptr<TreeReviewer>) {
  return nullptr;
}

}  // namespace gpudiag
