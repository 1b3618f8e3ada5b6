// GrantFilter (events.h). Threads: stateless.
#include "server/grants/events.h"

namespace rdmad::grants {

bool GrantFilter::Matches(const v1::GrantEvent& e) const {
  if (!mr.empty() && e.grant().mr() != mr) return false;
  if (!principal.empty() && e.grant().principal() != principal) return false;
  return !visible || visible(e);
}

}  // namespace rdmad::grants
