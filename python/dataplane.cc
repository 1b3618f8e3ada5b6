// rdmad._rdmad_dataplane: client/remote_region.h's RemoteRegion for Python (docs/sdk.md#python). The package
// re-exports RemoteRegion and LocalBuffer as rdmad.RemoteRegion and rdmad.LocalBuffer.
//
// Errors: every failed absl::Status becomes rdmad.Error (rdmad/_errors.py) with the status's code as a
// grpc.StatusCode and its message, exactly the codes remote_region.h lists.
// Threads: every call that waits on the network (open, reconnect, read*, write, register) releases the GIL.
// RemoteRegion itself has no lock (one thread at a time); this binding adds one per region, taken with the
// GIL released, so Python threads sharing a region are serialized instead of racing.
// Buffers: read_into and read_batch fill any writable, C-contiguous buffer-protocol object (bytearray,
// memoryview, numpy array, mmap) in place; the buffer is held exported (a bytearray cannot be resized) while
// the read runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/remote_region.h"
#include "proto/wire/grant_message.h"
#include "rdmad/v1/rdmad.pb.h"

namespace py = pybind11;

namespace rdmad::client {
namespace {

// Raises rdmad.Error for a failed status (the GIL must be held).
[[noreturn]] void Raise(const absl::Status& status) {
  py::object error = py::module_::import("rdmad._errors").attr("Error");
  py::object instance = error.attr("_from_status")(static_cast<int>(status.code()), std::string(status.message()));
  PyErr_SetObject(error.ptr(), instance.ptr());
  throw py::error_already_set();
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

[[noreturn]] void InvalidArgument(const std::string& message) { Raise(absl::InvalidArgumentError(message)); }

uint64_t NonNegative(int64_t value, const char* what) {
  if (value < 0) InvalidArgument(absl::StrCat(what, ": ", value, " is negative"));
  return static_cast<uint64_t>(value);
}

// A buffer-protocol object's memory, exported (PyObject_GetBuffer) until this is destroyed, which must be with
// the GIL held. Only its address and length are used: any item format, C-contiguous.
class View {
 public:
  View() = default;
  View(const py::handle& object, bool writable, const char* what) {
    const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object.ptr(), &view_, flags) != 0) {
      PyErr_Clear();
      InvalidArgument(absl::StrCat(what, ": a ", std::string(py::str(py::type::of(object).attr("__name__"))),
                                   writable ? " is not a writable, C-contiguous buffer (bytearray, memoryview, "
                                              "numpy array)"
                                            : " is not a C-contiguous buffer (bytes, bytearray, memoryview, "
                                              "numpy array)"));
    }
    held_ = true;
  }
  View(View&& other) noexcept : view_(other.view_), held_(std::exchange(other.held_, false)) {}
  View& operator=(View&& other) noexcept {
    if (this != &other) {
      Release();
      view_ = other.view_;
      held_ = std::exchange(other.held_, false);
    }
    return *this;
  }
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  ~View() { Release(); }

  char* data() const { return static_cast<char*>(view_.buf); }
  uint64_t size() const { return static_cast<uint64_t>(view_.len); }

 private:
  void Release() {
    if (held_) PyBuffer_Release(&view_);
    held_ = false;
  }
  Py_buffer view_{};
  bool held_ = false;
};

py::dict KeyDict(const wire::GrantMessage& m) {
  py::dict d;
  d["type"] = GrantMessageTypeName(m.type);
  d["scope"] = static_cast<int>(m.scope);
  d["reason"] = static_cast<int>(m.reason);
  d["grant_id"] = m.grant_id;
  d["remote_addr"] = m.remote_addr;
  d["length"] = m.length;
  d["rkey"] = m.rkey;
  d["access"] = m.access;
  d["expiry_unix_nanos"] = m.expiry_unix_nanos;
  return d;
}

// An rdmad.v1.IssuedGrant from Python: the message itself (any object with SerializeToString) or its
// serialized bytes.
v1::IssuedGrant GrantFrom(const py::handle& object) {
  std::string bytes;
  if (py::hasattr(object, "SerializeToString")) {
    bytes = py::cast<std::string>(py::bytes(object.attr("SerializeToString")()));
  } else {
    InvalidArgument("grant: expected an rdmad.v1.IssuedGrant (IssueGrant's answer), a " +
                    std::string(py::str(py::type::of(object).attr("__name__"))));
  }
  v1::IssuedGrant grant;
  if (!grant.ParseFromString(bytes)) InvalidArgument("grant: not an rdmad.v1.IssuedGrant");
  if (grant.token().empty()) InvalidArgument("grant: it has no token (IssueGrant's answer carries it)");
  return grant;
}

class PyLocalBuffer {
 public:
  PyLocalBuffer(LocalBuffer buffer, View view, py::object owner)
      : buffer_(std::move(buffer)), view_(std::move(view)), owner_(std::move(owner)) {}
  const LocalBuffer& get() const { return buffer_; }
  size_t size() const { return buffer_.size(); }
  py::object owner() const { return owner_; }
  // Deregisters now (the exported buffer is released too); later reads with it are refused.
  void Release() {
    buffer_ = LocalBuffer();
    view_ = View();
    owner_ = py::none();
  }

 private:
  LocalBuffer buffer_;
  View view_;  // keeps the memory exported (and so in place) while registered
  py::object owner_;
};

class PyRemoteRegion {
 public:
  explicit PyRemoteRegion(std::unique_ptr<RemoteRegion> region) : region_(std::move(region)) {}

  static std::unique_ptr<PyRemoteRegion> Open(const py::object& grant, const py::object& endpoint,
                                              size_t queue_depth, size_t max_read_bytes, uint64_t max_message_bytes,
                                              double connect_timeout, bool check_bounds, double clock_tolerance,
                                              const std::string& wait) {
    RemoteRegion::Options options;
    options.queue_depth = queue_depth;
    options.max_read_bytes = max_read_bytes;
    options.max_message_bytes = max_message_bytes;
    if (!(connect_timeout > 0)) InvalidArgument("connect_timeout: must be > 0 seconds");
    options.connect_timeout = absl::Seconds(connect_timeout);
    options.check_bounds = check_bounds;
    if (!(clock_tolerance >= 0)) InvalidArgument("clock_tolerance: must be >= 0 seconds");
    options.clock_tolerance = absl::Seconds(clock_tolerance);
    if (wait == "poll") {
      options.wait = RemoteRegion::Options::Wait::kPoll;
    } else if (wait == "events") {
      options.wait = RemoteRegion::Options::Wait::kEvents;
    } else {
      InvalidArgument("wait: \"" + wait + "\" is neither \"poll\" nor \"events\"");
    }
    absl::StatusOr<std::unique_ptr<RemoteRegion>> region;
    if (py::isinstance<py::bytes>(grant)) {
      // A token from elsewhere (the grant's owner passed it on) and the endpoint to present it at.
      std::string token = py::cast<std::string>(grant);
      if (token.empty()) InvalidArgument("token: empty");
      if (endpoint.is_none()) InvalidArgument("endpoint: a token needs the endpoint, (host, port) or \"host:port\"");
      std::string host;
      int64_t port = 0;
      if (py::isinstance<py::str>(endpoint)) {
        std::string e = py::cast<std::string>(endpoint);
        size_t colon = e.rfind(':');
        if (colon == std::string::npos || colon == 0) InvalidArgument("endpoint: \"" + e + "\" is not host:port");
        host = e.substr(0, colon);
        try {
          port = std::stoll(e.substr(colon + 1));
        } catch (const std::exception&) {
          InvalidArgument("endpoint: \"" + e + "\" is not host:port");
        }
      } else if (py::isinstance<py::tuple>(endpoint) && py::len(endpoint) == 2 &&
                 py::isinstance<py::str>(endpoint[py::int_(0)]) && py::isinstance<py::int_>(endpoint[py::int_(1)])) {
        host = py::cast<std::string>(endpoint[py::int_(0)]);
        port = py::cast<int64_t>(endpoint[py::int_(1)]);
      } else {
        InvalidArgument("endpoint: expected (host: str, port: int) or \"host:port\"");
      }
      if (port <= 0 || port > 65535) InvalidArgument(absl::StrCat("endpoint: port ", port, " is not 1..65535"));
      py::gil_scoped_release release;
      region = RemoteRegion::Open(host, static_cast<uint16_t>(port), token, options);
    } else {
      if (!endpoint.is_none()) InvalidArgument("endpoint: only with a token (a grant names its own endpoints)");
      v1::IssuedGrant issued = GrantFrom(grant);
      py::gil_scoped_release release;
      region = RemoteRegion::Open(issued, options);
    }
    Check(region.status());
    return std::make_unique<PyRemoteRegion>(*std::move(region));
  }

  void Reconnect(const py::object& grant) {
    v1::IssuedGrant issued = GrantFrom(grant);
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->Reconnect(issued) : Closed();
    }
    Check(status);
  }

  py::bytes Read(int64_t offset, int64_t length) {
    const uint64_t off = NonNegative(offset, "offset");
    const uint64_t n = NonNegative(length, "length");
    // The bytes object is filled in place before anyone else can see it: no second copy.
    py::object out = py::reinterpret_steal<py::object>(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n)));
    if (!out) throw py::error_already_set();
    char* data = PyBytes_AS_STRING(out.ptr());
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->Read(off, n, data) : Closed();
    }
    Check(status);
    return py::reinterpret_borrow<py::bytes>(out);
  }

  // Into a buffer-protocol object (copied from the slots) or a LocalBuffer (zero-copy), at `at` bytes into it;
  // `length` defaults to the rest of the destination. Returns the number of bytes read.
  uint64_t ReadInto(int64_t offset, const py::object& destination, std::optional<int64_t> length, int64_t at) {
    const uint64_t off = NonNegative(offset, "offset");
    const uint64_t start = NonNegative(at, "destination_offset");
    absl::Status status;
    uint64_t n = 0;
    if (py::isinstance<PyLocalBuffer>(destination)) {
      const PyLocalBuffer& local = py::cast<const PyLocalBuffer&>(destination);
      if (start > local.size()) InvalidArgument("destination_offset: past the LocalBuffer's end");
      n = length ? NonNegative(*length, "length") : local.size() - start;
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->Read(off, n, local.get(), start) : Closed();
    } else {
      View view(destination, /*writable=*/true, "destination");
      const uint64_t size = view.size();
      if (start > size) InvalidArgument(absl::StrCat("destination_offset: ", start, " is past the buffer's ", size, " bytes"));
      n = length ? NonNegative(*length, "length") : size - start;
      if (n > size - start) {
        InvalidArgument(absl::StrCat("length: ", n, " bytes do not fit in the buffer's ", size - start, " from ", start));
      }
      char* data = view.data() + start;
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->Read(off, n, data) : Closed();
    }
    Check(status);
    return n;
  }

  // ops: (offset, length) -> a new bytes object, or (offset, buffer) -> the buffer filled whole. One work
  // request each (at most max_read_bytes), up to queue_depth outstanding. Raises the first error.
  py::list ReadBatch(const py::iterable& ops) {
    std::vector<RemoteRegion::ReadOp> reads;
    std::vector<py::object> results;
    std::vector<View> views;  // kept exported until the batch is done
    for (const py::handle& item : ops) {
      const std::string where = absl::StrCat("ops[", reads.size(), "]");
      if (!py::isinstance<py::tuple>(item) || py::len(item) != 2) {
        InvalidArgument(where + ": expected (offset, length) or (offset, buffer)");
      }
      py::tuple op = py::reinterpret_borrow<py::tuple>(item);
      RemoteRegion::ReadOp read;
      if (!py::isinstance<py::int_>(op[0])) InvalidArgument(where + ".offset: not an int");
      read.offset = NonNegative(py::cast<int64_t>(op[0]), (where + ".offset").c_str());
      if (py::isinstance<py::int_>(op[1])) {
        read.length = NonNegative(py::cast<int64_t>(op[1]), (where + ".length").c_str());
        py::object out = py::reinterpret_steal<py::object>(
            PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(read.length)));
        if (!out) throw py::error_already_set();
        read.destination = PyBytes_AS_STRING(out.ptr());
        results.push_back(out);
      } else {
        views.emplace_back(op[1], /*writable=*/true, (where + ".buffer").c_str());
        read.destination = views.back().data();
        read.length = views.back().size();
        results.push_back(py::reinterpret_borrow<py::object>(op[1]));
      }
      reads.push_back(read);
    }
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->ReadBatch(absl::MakeSpan(reads)) : Closed();
    }
    for (size_t i = 0; i < reads.size(); ++i) {
      if (!reads[i].status.ok()) {
        Raise(absl::Status(reads[i].status.code(), absl::StrCat("ops[", i, "]: ", reads[i].status.message())));
      }
    }
    Check(status);
    py::list out;
    for (py::object& r : results) out.append(r);
    return out;
  }

  // [(offset, buffer), ...]: one RDMA WRITE each from the buffer (any buffer-protocol object, copied into a
  // slot), queue_depth in flight. Returns the bytes written.
  uint64_t WriteBatch(const py::iterable& ops) {
    std::vector<RemoteRegion::ReadOp> writes;
    std::vector<View> views;
    for (const py::handle& item : ops) {
      const std::string where = absl::StrCat("ops[", writes.size(), "]");
      if (!py::isinstance<py::tuple>(item) || py::len(item) != 2) InvalidArgument(where + ": expected (offset, buffer)");
      py::tuple op = py::reinterpret_borrow<py::tuple>(item);
      if (!py::isinstance<py::int_>(op[0])) InvalidArgument(where + ".offset: not an int");
      RemoteRegion::ReadOp write;
      write.offset = NonNegative(py::cast<int64_t>(op[0]), (where + ".offset").c_str());
      views.emplace_back(op[1], /*writable=*/false, (where + ".buffer").c_str());
      write.destination = views.back().data();  // the source of a write (ReadOp::write)
      write.length = views.back().size();
      write.write = true;
      writes.push_back(write);
    }
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->ReadBatch(absl::MakeSpan(writes)) : Closed();
    }
    uint64_t total = 0;
    for (size_t i = 0; i < writes.size(); ++i) {
      if (!writes[i].status.ok()) {
        Raise(absl::Status(writes[i].status.code(), absl::StrCat("ops[", i, "]: ", writes[i].status.message())));
      }
      total += writes[i].length;
    }
    Check(status);
    return total;
  }

  // From any buffer-protocol object (copied into the slots) or a LocalBuffer (zero-copy).
  uint64_t Write(int64_t offset, const py::object& source, std::optional<int64_t> length, int64_t at) {
    const uint64_t off = NonNegative(offset, "offset");
    const uint64_t start = NonNegative(at, "source_offset");
    absl::Status status;
    uint64_t n = 0;
    if (py::isinstance<PyLocalBuffer>(source)) {
      const PyLocalBuffer& local = py::cast<const PyLocalBuffer&>(source);
      if (start > local.size()) InvalidArgument("source_offset: past the LocalBuffer's end");
      n = length ? NonNegative(*length, "length") : local.size() - start;
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->Write(off, n, local.get(), start) : Closed();
    } else {
      View view(source, /*writable=*/false, "source");
      const uint64_t size = view.size();
      if (start > size) InvalidArgument(absl::StrCat("source_offset: ", start, " is past the buffer's ", size, " bytes"));
      n = length ? NonNegative(*length, "length") : size - start;
      if (n > size - start) {
        InvalidArgument(absl::StrCat("length: ", n, " bytes are more than the buffer's ", size - start, " from ", start));
      }
      const char* data = view.data() + start;
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = region_ ? region_->Write(off, n, data) : Closed();
    }
    Check(status);
    return n;
  }

  std::unique_ptr<PyLocalBuffer> Register(const py::object& buffer) {
    View view(buffer, /*writable=*/true, "buffer");
    void* data = view.data();
    const size_t size = static_cast<size_t>(view.size());
    absl::StatusOr<LocalBuffer> local;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      local = region_ ? region_->RegisterDestination(data, size) : absl::StatusOr<LocalBuffer>(Closed());
    }
    Check(local.status());
    return std::make_unique<PyLocalBuffer>(*std::move(local), std::move(view), buffer);
  }

  // Disconnects (rdmad ends the grant: DISCONNECTED) and frees the connection; later calls fail.
  void Close() {
    std::unique_ptr<RemoteRegion> region;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      region = std::move(region_);
      region.reset();
    }
  }

  bool closed() {
    py::gil_scoped_release release;  // never wait for the lock holding the GIL (With holds it while taking the GIL)
    std::lock_guard<std::mutex> lock(mu_);
    return region_ == nullptr;
  }
  // The accessors below read fields the calls above may change (Reconnect): under the lock too.
  template <typename F>
  auto With(F f) {
    const RemoteRegion* r;
    {
      py::gil_scoped_release release;
      mu_.lock();
      r = region_.get();
    }
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    if (r == nullptr) {
      lock.unlock();
      Raise(Closed());
    }
    return f(*region_);
  }

 private:
  static absl::Status Closed() { return absl::FailedPreconditionError("the RemoteRegion is closed"); }

  std::mutex mu_;
  std::unique_ptr<RemoteRegion> region_;
};

}  // namespace
}  // namespace rdmad::client

PYBIND11_MODULE(_rdmad_dataplane, m) {
  using rdmad::client::PyLocalBuffer;
  using rdmad::client::PyRemoteRegion;
  using rdmad::client::RemoteRegion;
  m.doc() = "rdmad's data plane: RemoteRegion (client/remote_region.h) reads a grant over RDMA.";

  py::class_<PyLocalBuffer>(m, "LocalBuffer",
                            "Caller memory registered with a RemoteRegion's connection for zero-copy reads "
                            "(RemoteRegion.register). Holds the buffer exported until release().")
      .def_property_readonly("size", &PyLocalBuffer::size)
      .def_property_readonly("buffer", &PyLocalBuffer::owner, "the registered object")
      .def("release", &PyLocalBuffer::Release, "Deregisters now; later reads with it are refused.")
      .def("__len__", &PyLocalBuffer::size);

  py::class_<PyRemoteRegion>(m, "RemoteRegion",
                             "A grant opened on rdmad's data-plane listener; reads (and writes) its range over "
                             "RDMA. One thread at a time per region (calls from several threads are serialized).")
      .def_static("open", &PyRemoteRegion::Open, py::arg("grant"), py::arg("endpoint") = py::none(), py::kw_only(),
                  py::arg("queue_depth") = 16, py::arg("max_read_bytes") = 1 << 20, py::arg("max_message_bytes") = 0,
                  py::arg("connect_timeout") = 10.0, py::arg("check_bounds") = true,
                  py::arg("clock_tolerance") = 0.1, py::arg("wait") = "poll",
                  "grant: IssueGrant's answer (rdmad.v1.IssuedGrant): connects to its first endpoint that answers. "
                  "Or the token's bytes with endpoint=(host, port) or 'host:port'. Times in seconds; "
                  "wait: 'poll' (busy-poll) or 'events' (sleep on the completion channel).")
      .def("reconnect", &PyRemoteRegion::Reconnect, py::arg("grant"),
           "Moves to a new grant (IssuedGrant); on failure the region is unchanged.")
      .def("read", &PyRemoteRegion::Read, py::arg("offset"), py::arg("length"),
           "read(offset, length) -> bytes: [offset, offset + length) of the granted range.")
      .def("read_into", &PyRemoteRegion::ReadInto, py::arg("offset"), py::arg("destination"),
           py::arg("length") = py::none(), py::arg("destination_offset") = 0,
           "read_into(offset, destination, length=None, destination_offset=0) -> int: fills a writable buffer "
           "(bytearray, memoryview, numpy array) in place, or a LocalBuffer (zero-copy); length defaults to "
           "the rest of the destination. Returns the bytes read.")
      .def("read_batch", &PyRemoteRegion::ReadBatch, py::arg("ops"),
           "read_batch([(offset, length) or (offset, buffer), ...]) -> list: one work request each (at most "
           "max_read_bytes), queue_depth in flight; a new bytes per (offset, length), the buffer filled whole "
           "per (offset, buffer). Raises the first error (its message starts with ops[i]).")
      .def("write", &PyRemoteRegion::Write, py::arg("offset"), py::arg("source"), py::arg("length") = py::none(),
           py::arg("source_offset") = 0,
           "write(offset, source, length=None, source_offset=0) -> int: RDMA WRITE from any buffer (or a "
           "LocalBuffer); needs a grant with REMOTE_WRITE. Returns once rdmad's NIC acknowledged it.")
      .def("write_batch", &PyRemoteRegion::WriteBatch, py::arg("ops"),
           "write_batch([(offset, buffer), ...]) -> int: one RDMA WRITE each from the buffer (at most "
           "max_read_bytes), queue_depth in flight; needs a grant with REMOTE_WRITE. Returns the bytes written "
           "once rdmad's NIC acknowledged them all; raises the first error (its message starts with ops[i]).")
      .def("register", &PyRemoteRegion::Register, py::arg("buffer"),
           "register(buffer) -> LocalBuffer: registers a writable buffer for zero-copy read_into/write.")
      .def("close", &PyRemoteRegion::Close, "Disconnects (rdmad ends the grant: DISCONNECTED).")
      .def_property_readonly("closed", &PyRemoteRegion::closed)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyRemoteRegion& self, py::args) { self.Close(); })
      .def_property_readonly("grant_name", [](PyRemoteRegion& s) { return s.With([](RemoteRegion& r) { return r.grant_name(); }); })
      .def_property_readonly("length", [](PyRemoteRegion& s) { return s.With([](RemoteRegion& r) { return r.length(); }); })
      .def_property_readonly("key", [](PyRemoteRegion& s) { return s.With([](RemoteRegion& r) { return rdmad::client::KeyDict(r.key()); }); },
                             "the ACTIVE message: type, scope, grant_id, remote_addr, length, rkey, access, expiry_unix_nanos")
      .def_property_readonly("expiry", [](PyRemoteRegion& s) {
            return s.With([](RemoteRegion& r) { return absl::ToDoubleSeconds(r.expiry() - absl::UnixEpoch()); }); },
                             "the lease's end, Unix seconds")
      .def_property_readonly("max_message_bytes", [](PyRemoteRegion& s) { return s.With([](RemoteRegion& r) { return r.max_message_bytes(); }); })
      .def_property_readonly("completion_fd", [](PyRemoteRegion& s) { return s.With([](RemoteRegion& r) { return r.completion_fd(); }); })
      .def_property_readonly("counters", [](PyRemoteRegion& s) {
            return s.With([](RemoteRegion& r) {
              RemoteRegion::Counters c = r.counters();
              py::dict d;
              d["work_requests"] = c.work_requests;
              d["bytes_copied"] = c.bytes_copied;
              return d;
            }); })
      .def("ended", [](PyRemoteRegion& s) {
            return s.With([](RemoteRegion& r) -> py::object {
              std::optional<rdmad::wire::GrantMessage> m = r.ended();
              if (!m) return py::none();
              return rdmad::client::KeyDict(*m);
            }); },
           "The ENDED message (a dict like key, reason set) if rdmad sent one and it arrived, else None.");
}
