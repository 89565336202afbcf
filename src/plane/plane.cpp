#include "plane/plane.h"

namespace gpudiag {

void Gathered::find_missing() {
  missing.clear();
  for (std::size_t r = 0; r < records.size(); ++r)
    if (!records.at(r)) missing.push_back(static_cast<int>(r));
}

namespace {

class SinglePlane : public Plane {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Gathered gather_all(const std::string&, const std::string& mine, Deadline,
                      const std::vector<int>&, const std::vector<int>&,
                      const Review& review) override {
    Gathered g;
    g.records.resize(1);
    g.records[0] = mine;
    g.notes.resize(1);
    g.judged = true;
    if (review) g.review = review(g);
    return g;
  }
  std::string describe() const override { return "single process"; }
};

}  // namespace

std::unique_ptr<Plane> make_single_plane() { return std::make_unique<SinglePlane>(); }

}  // namespace gpudiag
