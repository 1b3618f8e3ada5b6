"""The control plane: every RPC of rdmad.v1 as a method of Client, by its snake_case name.

Client.create_pd(device="rxe0", label="x") calls ProtectionDomains.CreatePd with
CreatePdRequest(device="rxe0", label="x") and returns the ProtectionDomain. The methods are made from the
services in rdmad.proto (so a new RPC needs no change here); dir(client) and client.methods() list them.
"""

import re
import socket
import struct
import time
from dataclasses import dataclass
from typing import Optional

import grpc
from google.protobuf import descriptor, symbol_database

from rdmad._errors import Error, invalid_argument
from rdmad.v1 import rdmad_pb2, rdmad_pb2_grpc

DEFAULT_TARGET = "unix:/run/rdmad/rdmad.sock"

# The descriptor socket's DEPOSIT request and its reply header (docs/PROTOCOL.md#memory-shared-by-file-descriptor).
_FD_REQUEST = b"RDFD" + struct.pack("<HHII", 1, 1, 0, 0)
_FD_HEADER = struct.Struct("<4sHHII")
_FD_MAX_TEXT = 4096

# Reads retried on the channel's UNAVAILABLE (no ErrorDetail: rdmad not reachable yet, restarting, the
# connection lost), as the C++ client does: the wait before attempt n + 1 is 0.25 s * 2^(n - 1), at most 2 s,
# and an attempt is made only if it starts before the call's deadline.
_INITIAL_BACKOFF = 0.25
_MAX_BACKOFF = 2.0
_MULTIPLIER = 2.0


@dataclass(frozen=True)
class Tls:
    """Mutual TLS on a TCP target (docs/security.md): PEM files, all three required.

    server_name: check rdmad's certificate for this name instead of the target's host.
    Not used on a unix socket, where rdmad identifies the caller by its uid.
    """

    ca: str
    cert: str
    key: str
    server_name: Optional[str] = None


def _snake(name):
    """CreatePd -> create_pd, WhoAmI -> who_am_i, ListCmIds -> list_cm_ids."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _read_pem(path, field, what):
    if not path:
        raise invalid_argument(field, f"TLS needs {what} (a CA file, a client certificate and its key)")
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise invalid_argument(field, f"cannot read {what} {path}: {e.strerror}") from None
    if b"-----BEGIN " not in text:
        raise invalid_argument(field, f"{what} {path} is not a PEM file")
    return text


class _Rpc:
    """One RPC: the stub's callable and its message classes."""

    def __init__(self, service, method, stub):
        db = symbol_database.Default()
        self.full_name = f"{service.full_name}.{method.name}"
        self.name = method.name
        self.request = db.GetSymbol(method.input_type.full_name)
        self.response = db.GetSymbol(method.output_type.full_name)
        self.streaming = method.server_streaming
        self.call = getattr(stub, method.name)
        self.read = method.name.startswith(("Get", "List")) or method.name == "WhoAmI"
        # A List call that pages (page_token in, next_page_token out): followed to the end unless asked not to.
        self.pages = ("page_token" in self.request.DESCRIPTOR.fields_by_name and
                      "next_page_token" in self.response.DESCRIPTOR.fields_by_name)


class _Stream:
    """A server-streaming call (watch_*): iterate it for the messages; cancel() ends it. The call starts at
    once (not at the first next()). Its failure raises rdmad.Error; a cancel() ends the iteration quietly."""

    def __init__(self, call):
        self._call = call
        self._cancelled = False

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._call)
        except grpc.RpcError as e:
            if self._cancelled and e.code() == grpc.StatusCode.CANCELLED:
                raise StopIteration from None
            raise Error._from_rpc_error(e) from None

    def cancel(self):
        self._cancelled = True
        self._call.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()


class Client:
    """rdmad's control plane (make one with rdmad.connect).

    Every RPC of rdmad.v1 is a method named in snake_case: client.create_pd(...), client.register_mr(...),
    client.issue_grant(...), client.revoke_grant(...), client.who_am_i(), client.list_mrs(...), ... Each takes
    its request message either whole (positional) or as keyword arguments for its fields (nested messages as
    dicts or messages, enums by name or number), plus timeout= (seconds; default: the client's). It returns
    the response message; a server-streaming RPC (watch_events, watch_grants, watch_audit) returns an
    iterator of messages that starts the call at once (no deadline unless timeout= is given; cancel() ends it). A failure raises rdmad.Error.

    A convenience over the request: a method whose request has a single field `name` (get_*, delete_*,
    revoke_grant, ...) also takes it positionally: client.revoke_grant("grants/3").

    List calls page on the server (at most page_size items per answer, 1000 by default): list_* follows
    next_page_token and returns one response with every item. all_pages=False, or a page_token, asks for
    that one page only (its next_page_token names the rest).

    Thread-safety: a Client may be used from many threads at once.
    """

    def __init__(self, channel, timeout=30.0, max_attempts=4, descriptor_socket=None):
        self._channel = channel
        self._descriptor_socket = descriptor_socket
        self._timeout = timeout
        self._max_attempts = max_attempts
        self._rpcs = {}
        for service in rdmad_pb2.DESCRIPTOR.services_by_name.values():
            stub = getattr(rdmad_pb2_grpc, f"{service.name}Stub")(channel)
            for method in service.methods:
                self._rpcs[_snake(method.name)] = _Rpc(service, method, stub)

    # ---- memory passed as a file descriptor

    def share_fd(self, fd, timeout=None):
        """Passes `fd` (an int or an object with fileno(): a memfd from os.memfd_create, or another tmpfs or
        hugetlbfs file) to rdmad over its descriptor socket, which only a process on rdmad's host can reach.
        rdmad gets its own copy; the caller keeps `fd`. Returns the handle ("descriptors/...") that one
        register_mr names in source={"fd": {"handle": ..., "length": ...}}, as the same principal, within
        rdmad's descriptor_ttl_s (60 s by default). rdmad's refusals raise rdmad.Error with their code;
        a socket that cannot be reached is UNAVAILABLE; a client without a descriptor socket (a TCP target
        without connect(descriptor_socket=...)) is FAILED_PRECONDITION.
        """
        path = self._descriptor_socket
        if not path:
            raise Error(grpc.StatusCode.FAILED_PRECONDITION,
                        "descriptor_socket: descriptors go to a local rdmad's descriptor socket: connect on its unix "
                        "socket, or pass connect(descriptor_socket=...)")
        number = fd.fileno() if hasattr(fd, "fileno") else fd
        if not isinstance(number, int) or number < 0:
            raise invalid_argument("fd", f"{fd!r} is not a file descriptor")
        where = f"rdmad's descriptor socket {path}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(self._timeout if timeout is None else timeout)
            try:
                s.connect(path)
            except OSError as e:
                raise Error(grpc.StatusCode.UNAVAILABLE, f"{where}: connect: {e.strerror} (errno {e.errno})") from None
            try:
                socket.send_fds(s, [_FD_REQUEST], [number])
                reply = s.recv(_FD_HEADER.size + _FD_MAX_TEXT)
            except socket.timeout:
                raise Error(grpc.StatusCode.DEADLINE_EXCEEDED, f"{where}: no answer from rdmad in time") from None
            except OSError as e:
                if e.errno == 9:  # EBADF
                    raise invalid_argument("fd", f"{number} is not an open descriptor") from None
                raise Error(grpc.StatusCode.UNAVAILABLE, f"{where}: {e.strerror} (errno {e.errno})") from None
        if not reply:
            raise Error(grpc.StatusCode.UNAVAILABLE, f"{where}: rdmad closed the connection without an answer")
        if len(reply) < _FD_HEADER.size:
            raise Error(grpc.StatusCode.INTERNAL, f"{where}: a reply of {len(reply)} bytes")
        magic, version, code, length, _ = _FD_HEADER.unpack_from(reply)
        text = reply[_FD_HEADER.size:].decode("utf-8", "replace")
        if magic != b"RDFD" or version != 1 or length != len(reply) - _FD_HEADER.size:
            raise Error(grpc.StatusCode.INTERNAL, f"{where}: not a descriptor-socket reply")
        if code != 0:
            raise Error._from_status(code, text)
        return text

    # ---- the generic RPC methods

    def methods(self):
        """The snake_case names of every RPC, sorted."""
        return sorted(self._rpcs)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._rpcs))

    def __getattr__(self, attr):
        rpcs = self.__dict__.get("_rpcs")
        if rpcs is None or attr not in rpcs:
            raise AttributeError(f"rdmad.Client has no method {attr!r} (the RPCs: see Client.methods())")
        rpc = rpcs[attr]

        if rpc.pages:
            def method(*args, timeout=None, all_pages=True, **fields):
                if all_pages and "page_token" not in fields and not (args and getattr(args[0], "page_token", "")):
                    return self._all_pages(rpc, args, fields, timeout)
                return self._invoke(rpc, args, fields, timeout)
        else:
            def method(*args, timeout=None, **fields):
                return self._invoke(rpc, args, fields, timeout)

        method.__name__ = attr
        method.__doc__ = f"{rpc.full_name}({rpc.request.DESCRIPTOR.name}) -> {rpc.response.DESCRIPTOR.name}"
        return method

    def _request(self, rpc, args, fields):
        where = f"{rpc.name}: "
        if len(args) > 1:
            raise TypeError(f"{where}at most one positional argument (the request, or its name)")
        if args:
            arg = args[0]
            if isinstance(arg, rpc.request):
                if fields:
                    request = rpc.request()
                    request.CopyFrom(arg)
                    return self._merge(rpc, request, fields)
                return arg
            names = [f.name for f in rpc.request.DESCRIPTOR.fields]
            if isinstance(arg, str) and "name" in names and "name" not in fields:
                fields = dict(fields, name=arg)
            else:
                raise TypeError(f"{where}expected a {rpc.request.DESCRIPTOR.full_name}, not {type(arg).__name__}")
        return self._merge(rpc, rpc.request(), fields)

    @staticmethod
    def _merge(rpc, request, fields):
        # Field by field, so that an error names the field (as rdmad's own errors do).
        for key, value in fields.items():
            field = rpc.request.DESCRIPTOR.fields_by_name.get(key)
            if field is None:
                raise invalid_argument(key, f"{rpc.request.DESCRIPTOR.full_name} has no field {key!r}")
            try:
                part = rpc.request(**{key: value})
                request.ClearField(key)  # a keyword replaces the field of a request given whole
                request.MergeFrom(part)
            except (ValueError, TypeError, KeyError) as e:
                if field.label == descriptor.FieldDescriptor.LABEL_REPEATED and field.enum_type is not None:
                    # Repeated enums by name: ["LOCAL_WRITE", "REMOTE_READ"].
                    try:
                        getattr(request, key).extend(
                            field.enum_type.values_by_name[v].number if isinstance(v, str) else v for v in value)
                        continue
                    except (KeyError, TypeError, ValueError):
                        pass
                raise invalid_argument(key, f"{e}") from None
        return request

    def _invoke(self, rpc, args, fields, timeout):
        request = self._request(rpc, args, fields)
        if rpc.streaming:
            return self._stream(rpc, request, timeout)
        timeout = self._timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        backoff = _INITIAL_BACKOFF
        attempt = 1
        while True:
            try:
                return rpc.call(request, timeout=max(deadline - time.monotonic(), 0))
            except grpc.RpcError as e:
                error = Error._from_rpc_error(e)
            retry = (rpc.read and error.code == grpc.StatusCode.UNAVAILABLE and error.detail is None and
                     attempt < self._max_attempts and time.monotonic() + backoff < deadline)
            if not retry:
                raise error
            time.sleep(backoff)
            backoff = min(backoff * _MULTIPLIER, _MAX_BACKOFF)
            attempt += 1

    def _all_pages(self, rpc, args, fields, timeout):
        # A List call's every page (rdmad answers at most page_size items, 1000 by default, and a token for
        # the rest): one response holding all of them, its next_page_token empty. Each page gets the
        # client's whole timeout (a long list is many calls).
        request = self._request(rpc, args, fields)
        out = None
        while True:
            page = self._invoke(rpc, (request,), {}, timeout)
            if out is None:
                out = page
            else:
                for field in rpc.response.DESCRIPTOR.fields:
                    if field.label == descriptor.FieldDescriptor.LABEL_REPEATED:
                        getattr(out, field.name).extend(getattr(page, field.name))
            if not page.next_page_token:
                out.next_page_token = ""
                return out
            following = rpc.request()
            following.CopyFrom(request)
            following.page_token = page.next_page_token
            request = following

    @staticmethod
    def _stream(rpc, request, timeout):
        return _Stream(rpc.call(request, timeout=timeout))

    # ---- the channel

    def close(self):
        """Closes the channel; calls after it fail."""
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(target=DEFAULT_TARGET, tls=None, timeout=30.0, max_receive_message_bytes=64 << 20, max_attempts=4,
            descriptor_socket=None):
    """A Client of rdmad at `target`: "unix:/path" (the default: unix:/run/rdmad/rdmad.sock) or "host:port".

    tls: an rdmad.Tls for mutual TLS on TCP; its files are read here: rdmad.Error INVALID_ARGUMENT naming the
         one that is missing, unreadable or not PEM (field "tls.ca", "tls.cert" or "tls.key"). Not used on a
         unix socket (rdmad identifies the caller by its uid there).
    timeout: the deadline of each call in seconds, its retries included.
    max_receive_message_bytes: the largest answer accepted (-1: no limit); larger: RESOURCE_EXHAUSTED.
    max_attempts: attempts in all for a read (get_*, list_*, who_am_i) the channel fails with UNAVAILABLE;
         1: no retries. Calls that change state are never retried.
    descriptor_socket: rdmad's descriptor socket for share_fd; None: the unix target's path with ".fd"
         appended (rdmad's default), none for a TCP target.
    The connection itself is made on the first call.
    """
    if not isinstance(target, str) or not target:
        raise invalid_argument("target", "expected \"unix:/path\" or \"host:port\"")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise invalid_argument("timeout", f"{timeout!r} is not a positive number of seconds")
    if not (isinstance(max_attempts, int) and max_attempts >= 1):
        raise invalid_argument("max_attempts", f"{max_attempts!r} is not an integer >= 1")
    options = [("grpc.max_receive_message_length", max_receive_message_bytes)]
    if target.startswith("unix:") or tls is None:
        channel = grpc.insecure_channel(target, options=options)
    else:
        if not isinstance(tls, Tls):
            raise invalid_argument("tls", f"expected an rdmad.Tls, not {type(tls).__name__}")
        ca = _read_pem(tls.ca, "tls.ca", "the CA file")
        cert = _read_pem(tls.cert, "tls.cert", "the client certificate")
        key = _read_pem(tls.key, "tls.key", "the client key")
        credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        if tls.server_name:
            options.append(("grpc.ssl_target_name_override", tls.server_name))
        channel = grpc.secure_channel(target, credentials, options=options)
    if descriptor_socket is None and target.startswith("unix:"):
        path = target[len("unix://"):] if target.startswith("unix://") else target[len("unix:"):]
        descriptor_socket = path + ".fd"
    return Client(channel, timeout=timeout, max_attempts=max_attempts, descriptor_socket=descriptor_socket)
