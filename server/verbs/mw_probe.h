// The window-bounds probe: does a device check an access through a memory window against the window's own
// range, or only against the bounds of the MR the window is bound to? rxe in Linux 6.1 does the latter
// (rxe_resp.c check_rkey calls mr_check_range(mw->mr, ...)), which is why the registry binds each window to
// a private "bounds region" over exactly its range (server/registry/entries.h, docs/api.md#memory-windows).
//
// Method: a throwaway PD; two pages registered with REMOTE_READ | MW_BIND (and a third page, the local
// buffer); a type 1 window bound to the first page only; an RC QP connected to itself (loopback through the
// port's first GID, or its LID); an RDMA read of the first page through the window (must succeed: the
// loopback works), then one of the second page. If the second read succeeds, the device does not enforce
// the window's bounds. Everything is released in reverse order of creation. Any step that fails (no type 1
// windows, no active port, no loopback, a timeout) gives the safe answer, enforced = false, and says why.
//
// Threads: runs on the caller's thread (Device::Open, at start-up), on objects nobody else sees; it polls
// its own CQ (no completion channel), for at most a few seconds.
#ifndef RDMAD_SERVER_VERBS_MW_PROBE_H_
#define RDMAD_SERVER_VERBS_MW_PROBE_H_

#include <infiniband/verbs.h>

#include <string>

#include "server/fabric/fabric.h"

namespace rdmad::verbs {

struct MwBoundsProbe {
  bool enforced = false;  // the safe answer unless the probe saw the device refuse the read past the window
  std::string what;       // what the probe saw, for logs and GetDevice
};

// `info`: the device's queried ports and caps (type 1 windows, GIDs, active MTU).
MwBoundsProbe ProbeMwBounds(ibv_context* context, const fabric::DeviceInfo& info);

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_MW_PROBE_H_
