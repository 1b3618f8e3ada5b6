"""rdmad's client SDK for Python (docs/sdk.md#python).

    import rdmad
    c = rdmad.connect()                      # unix:/run/rdmad/rdmad.sock; or "host:port", tls=rdmad.Tls(...)
    pd = c.create_pd(device="rxe0", label="app")
    grant = c.issue_grant(mr=mr.name, offset=0, length=4096, principal=c.who_am_i().principal)
    with rdmad.RemoteRegion.open(grant) as region:
        data = region.read(0, 4096)

connect() / Client   the control plane: every RPC of rdmad.v1 by its snake_case name (rdmad/_client.py)
Error                what every failed call raises: code (grpc.StatusCode), message, field, errno, detail
RemoteRegion         the data plane: reads (and writes) a grant over RDMA (client/remote_region.h)
v1                   the generated messages (rdmad.v1.rdmad_pb2) and stubs (rdmad.v1.rdmad_pb2_grpc)
"""

from rdmad._errors import Error
from rdmad._client import DEFAULT_TARGET, Client, Tls, connect
from rdmad.v1 import rdmad_pb2 as pb
from rdmad._rdmad_dataplane import LocalBuffer, RemoteRegion

__all__ = ["DEFAULT_TARGET", "Client", "Error", "LocalBuffer", "RemoteRegion", "Tls", "connect", "pb"]
