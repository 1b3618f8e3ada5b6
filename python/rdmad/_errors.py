"""rdmad.Error: the one exception the package raises for a failed call, control plane or data plane."""

import grpc

from rdmad.v1 import rdmad_pb2

_DETAIL_TYPE = "type.googleapis.com/rdmad.v1.ErrorDetail"
_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}


class Error(Exception):
    """A failed call: gRPC's status code, rdmad's message and the ErrorDetail rdmad attached.

    code         a grpc.StatusCode (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, ...)
    message      rdmad's message (it starts with the request field at fault, when there is one)
    field        ErrorDetail.field: the request field at fault, e.g. "source.file.length" ("" if none)
    errno        ErrorDetail.errno_value: the errno verbs or the OS reported (0 if none)
    errno_name   ErrorDetail.errno_name, e.g. "EBUSY" ("" if none)
    verbs_call   ErrorDetail.verbs_call, e.g. "ibv_reg_mr" ("" if none)
    detail       the rdmad.v1.ErrorDetail itself, or None: rdmad attaches one to every failure it reports,
                 so None means the channel failed the call (rdmad unreachable, the deadline passed before
                 it answered) or the data plane did (RemoteRegion). A bad argument this package refuses
                 before any call carries one with only the field set.
    """

    def __init__(self, code, message, detail=None):
        if not isinstance(code, grpc.StatusCode):
            raise TypeError(f"code must be a grpc.StatusCode, not {type(code).__name__}")
        self.code = code
        self.message = message
        self.detail = detail
        d = detail if detail is not None else rdmad_pb2.ErrorDetail()
        self.field = d.field
        self.errno = d.errno_value
        self.errno_name = d.errno_name
        self.verbs_call = d.verbs_call
        super().__init__(code, message)

    @property
    def code_name(self):
        """The code's name: "INVALID_ARGUMENT"."""
        return self.code.name

    def __str__(self):
        return f"{self.code.name}: {self.message}"

    def __repr__(self):
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in ("field", "errno") if getattr(self, k))
        return f"rdmad.Error({self.code.name}, {self.message!r}{extra})"

    @classmethod
    def _from_status(cls, code, message, detail=None):
        """From a numeric code (absl::StatusCode and gRPC share the numbering)."""
        return cls(_BY_VALUE.get(code, grpc.StatusCode.UNKNOWN), message, detail)

    @classmethod
    def _from_rpc_error(cls, error):
        """From grpc.RpcError: the ErrorDetail from the grpc-status-details-bin trailer, if rdmad sent one."""
        detail = None
        for key, value in error.trailing_metadata() or ():
            if key != "grpc-status-details-bin":
                continue
            status = rdmad_pb2.RpcStatus()
            try:
                status.ParseFromString(value)
            except Exception:  # not rdmad's: no detail
                continue
            for any_ in status.details:
                if any_.type_url == _DETAIL_TYPE:
                    detail = rdmad_pb2.ErrorDetail()
                    any_.Unpack(detail)
        return cls(error.code(), error.details() or "", detail)


def invalid_argument(field, message):
    """An rdmad.Error INVALID_ARGUMENT refused here, before any call, naming `field` as rdmad does."""
    detail = rdmad_pb2.ErrorDetail(field=field) if field else None
    return Error(grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {message}" if field else message, detail)
