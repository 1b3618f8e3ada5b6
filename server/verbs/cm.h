// The librdmacm backend of the rdma_cm seam (server/fabric/cm.h): event channels and RC communication ids
// (RDMA_PS_TCP) on the devices of a VerbsFabric.
//
// Ownership: VerbsCmFabric is owned by its VerbsFabric (VerbsFabric::cm()) and only creates channels. A
// VerbsCmChannel owns its rdma_event_channel (rdma_destroy_event_channel in the destructor; no id may
// remain on it). A VerbsCmId owns its rdma_cm_id and the QP created on it (verbs::Qp::CreateOnCmId); the
// destructor destroys the QP (rdma_destroy_qp), then the id (rdma_destroy_id). The ids of incoming
// connections are created by librdmacm and handed out, owned, in CmEvent::new_id by Drain.
// An id's key is its rdma_cm_id's `context`, which librdmacm copies into every event for it.
// Threads: as the seam says: every call on a channel and on the ids it carries is made on that channel's
// dispatcher thread (Migrate's destination only receives events). Drain acknowledges each event before it
// returns, so rdma_destroy_id and rdma_migrate_id never wait on that thread. Nothing here locks.
#ifndef RDMAD_SERVER_VERBS_CM_H_
#define RDMAD_SERVER_VERBS_CM_H_

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/fabric/cm.h"
#include "server/fabric/fabric.h"

namespace rdmad::verbs {

class Device;
class Qp;
class VerbsFabric;

class VerbsCmFabric final : public fabric::CmFabric {
 public:
  explicit VerbsCmFabric(VerbsFabric* fabric) : fabric_(fabric) {}
  absl::StatusOr<std::unique_ptr<fabric::CmChannel>> CreateChannel() override;

 private:
  VerbsFabric* const fabric_;
};

class VerbsCmChannel final : public fabric::CmChannel {
 public:
  // rdma_create_event_channel; its fd is made non-blocking.
  static absl::StatusOr<std::unique_ptr<VerbsCmChannel>> Create(VerbsFabric* fabric);
  ~VerbsCmChannel() override;
  VerbsCmChannel(const VerbsCmChannel&) = delete;
  VerbsCmChannel& operator=(const VerbsCmChannel&) = delete;

  int fd() const override { return channel_->fd; }
  std::vector<fabric::CmEvent> Drain() override;
  absl::StatusOr<std::unique_ptr<fabric::CmId>> CreateId(uint64_t key) override;

  rdma_event_channel* raw() const { return channel_; }

 private:
  VerbsCmChannel(VerbsFabric* fabric, rdma_event_channel* channel) : fabric_(fabric), channel_(channel) {}

  VerbsFabric* const fabric_;
  rdma_event_channel* const channel_;
};

class VerbsCmId final : public fabric::CmId {
 public:
  // Adopts `id` (from rdma_create_id or a CONNECT_REQUEST) and sets its context to `key`.
  VerbsCmId(VerbsFabric* fabric, rdma_cm_id* id, uint64_t key);
  ~VerbsCmId() override;
  VerbsCmId(const VerbsCmId&) = delete;
  VerbsCmId& operator=(const VerbsCmId&) = delete;

  uint64_t key() const override { return key_; }
  void set_key(uint64_t key) override;

  absl::Status Bind(const fabric::SockAddr& local) override;
  absl::Status Listen(int backlog) override;
  absl::Status ResolveAddr(const fabric::SockAddr& remote, int timeout_ms) override;
  absl::Status ResolveRoute(int timeout_ms) override;
  fabric::Device* device() const override;
  using fabric::CmId::CreateQp;
  absl::Status CreateQp(fabric::Pd& pd, const fabric::CmQpOptions& options) override;
  fabric::Qp* qp() const override;
  absl::Status Connect(const std::string& private_data) override;
  absl::Status Accept(const std::string& private_data) override;
  absl::Status Reject(const std::string& private_data) override;
  absl::Status Disconnect() override;
  absl::Status Migrate(fabric::CmChannel& to) override;
  fabric::SockAddr local() const override;
  fabric::SockAddr remote() const override;

  rdma_cm_id* raw() const { return id_; }

 private:
  Device* verbs_device() const;
  // Before rdma_connect/rdma_accept: kAckTimeout (cm.cc); a failure is logged, not fatal.
  void SetAckTimeout();
  rdma_conn_param ConnParam(const std::string& private_data) const;

  VerbsFabric* const fabric_;
  rdma_cm_id* const id_;
  uint64_t key_ = 0;
  std::unique_ptr<Qp> qp_;  // destroyed before id_
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_CM_H_
