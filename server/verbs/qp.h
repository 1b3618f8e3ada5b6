// verbs::Qp: one RC ibv_qp with its own ibv_cq (send and receive). Owns both: the destructor destroys the
// QP, then the CQ. Binds and invalidations are posted signaled and their completion is polled before the
// call returns (bounded by a deadline), so at most one work request is outstanding at a time.
// Thread-safety: none of its own; the registry serializes calls on a QP.
#ifndef RDMAD_SERVER_VERBS_QP_H_
#define RDMAD_SERVER_VERBS_QP_H_

#include <infiniband/verbs.h>

#include <memory>

#include "server/fabric/fabric.h"

namespace rdmad::verbs {

class Device;

class Qp final : public fabric::Qp {
 public:
  static absl::StatusOr<std::unique_ptr<Qp>> Create(Device* device, ibv_pd* pd,
                                                    const fabric::QpOptions& options);
  ~Qp() override;
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;

  fabric::QpEndpoint local() const override { return local_; }
  fabric::QpState state() const override;
  absl::Status Connect(const fabric::QpEndpoint& remote) override;
  absl::StatusOr<uint32_t> Bind(fabric::Mw& mw, const fabric::BindSpec& spec) override;
  absl::Status Invalidate(fabric::Mw& mw, fabric::Mr& bound_to) override;

 private:
  Qp(Device* device, const fabric::QpOptions& options) : device_(device), options_(options) {}
  absl::Status ToInit();
  // Polls the CQ until the completion of wr_id arrives (older ones are discarded) or the deadline passes.
  absl::Status AwaitCompletion(uint64_t wr_id, const char* what);

  Device* const device_;
  const fabric::QpOptions options_;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  fabric::QpEndpoint local_;
  uint64_t next_wr_id_ = 1;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_QP_H_
