// GrantFilter (events.h). Threads: stateless.
#include "server/grants/events.h"

namespace rdmad::grants {

bool GrantFilter::Matches(const v1::GrantEvent& e) const {
  if (!mr.empty() && e.grant().mr() != mr) return false;
  return principal.empty() || e.grant().principal() == principal;
}

}  // namespace rdmad::grants
