// UniqueFd: one owner of a file descriptor, closed when it goes (move-only). Used wherever rdmad holds a
// descriptor across calls: a file being mapped, a descriptor a client passed over the descriptor socket.
// Threads: a plain value; one owner at a time.
#ifndef RDMAD_SERVER_COMMON_FD_H_
#define RDMAD_SERVER_COMMON_FD_H_

#include <unistd.h>

namespace rdmad {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_COMMON_FD_H_
