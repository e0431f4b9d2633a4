// check_bundle PATH: testing::CheckBundle on a checkpoint ckflow wrote, for
// tests outside a GoogleTest binary (the group saves under mpirun, in
// tests/distributed). Prints the listing; exits 1 if the check fails or the
// object graph names a key the bundle lacks.

#include <cstdio>

#include "tests/bundle/testdata_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_bundle PATH\n");
    return 2;
  }
  ckflow::StatusOr<std::string> listing = ckflow::testing::CheckBundle(argv[1]);
  if (!listing.ok()) {
    std::fprintf(stderr, "check_bundle: %s\n", listing.status().ToString().c_str());
    return 1;
  }
  std::fputs(listing->c_str(), stdout);
  if (listing->find("\nobject graph: ") != std::string::npos &&
      listing->find(", every key in the bundle\n") == std::string::npos) {
    std::fprintf(stderr, "check_bundle: the object graph names keys the bundle lacks\n");
    return 1;
  }
  return 0;
}
