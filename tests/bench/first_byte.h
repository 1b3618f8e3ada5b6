// IssueGrant -> first byte read, beside a direct baseline (control_bench). Prints figures; judges nothing.
//   - through rdmad: the IssueGrant RPC, client::RemoteRegion::Open (rdma_cm connect to rdmad's data-plane
//     listener, token check, a type 2 window bound on the accepted QP, the key's SEND) and one 64-byte read;
//   - baseline: what an application does without rdmad to read a peer's registered memory for the first
//     time: a plain librdmacm client (address and route resolution, PD, CQ, QP, a registered 64-byte buffer,
//     connect) to a plain librdmacm server in this process (a thread: it accepts with the address and rkey of
//     an ordinary MR in the accept's private data), then one 64-byte rdma read;
//   - the no-op RPC beside both, as in the other rows.
// Threads: MeasureFirstByte runs on the caller's thread plus the baseline server's thread, which owns its
// rdma_cm ids and verbs objects; they share nothing but the listening address.
#ifndef RDMAD_TESTS_BENCH_FIRST_BYTE_H_
#define RDMAD_TESTS_BENCH_FIRST_BYTE_H_

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "client/client.h"

namespace rdmad::bench {

struct FirstByteFigures {
  std::vector<double> issue, open, read, total;  // through rdmad, per sample (us)
  std::vector<double> baseline, noop;            // the plain librdmacm connection + read; the no-op RPC
  std::string noop_name;
  std::string error;                             // set if the measurement could not run
};

// `pd`: rdmad's PD in which a 64 KiB region is registered for the grants; `baseline_addr`: this machine's
// IPv4 address on the RDMA device, where the baseline server listens (port 7472).
// `noop`: one no-op RPC, its time in us (named `noop_name` in the output).
FirstByteFigures MeasureFirstByte(client::Client* rdmad, const std::function<double()>& noop,
                                  const std::string& noop_name, const std::string& pd,
                                  const std::string& baseline_addr, int iters);
// The table, in markdown, to `out` (stdout, or control_bench --markdown's file).
void PrintFirstByte(const FirstByteFigures& f, std::FILE* out = stdout);

}  // namespace rdmad::bench

#endif  // RDMAD_TESTS_BENCH_FIRST_BYTE_H_
