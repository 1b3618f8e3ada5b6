"""The Python SDK against a real rdmad on a verbs device: the control plane, its errors, and the data plane.

Run by tests/sdk/run-example.sh in the Soft-RoCE guest (conftest.py says how to run it elsewhere).
"""

import os
import tempfile
import threading
import time

import grpc
import numpy as np
import pytest

import rdmad
from conftest import FILE_BYTES, pattern

ME = os.path.basename(__file__)


def expect_error(code, call, *args, **kwargs):
    with pytest.raises(rdmad.Error) as info:
        call(*args, **kwargs)
    assert info.value.code == code, f"{info.value!r}"
    return info.value


# ---- the package


def test_imports_the_installed_package():
    expected = os.environ.get("RDMAD_PYTHON_PACKAGE_DIR")
    if not expected:
        pytest.skip("RDMAD_PYTHON_PACKAGE_DIR not set: any rdmad package will do")
    import rdmad._rdmad_dataplane as dataplane
    assert os.path.dirname(rdmad.__file__) == expected
    assert os.path.dirname(dataplane.__file__) == expected


def test_every_rpc_is_a_method():
    c = rdmad.connect("unix:/nonexistent/rdmad.sock")
    names = c.methods()
    for rpc in ("create_pd", "register_mr", "issue_grant", "issue_grants", "revoke_grant", "who_am_i",
                "list_mrs", "list_cm_ids", "watch_grants", "issue_connect_token", "deregister_mr"):
        assert rpc in names
        assert rpc in dir(c)
    with pytest.raises(AttributeError, match="no method 'create_pdd'"):
        c.create_pdd
    c.close()


# ---- the control plane


def test_who_am_i_and_devices(client, device):
    assert client.who_am_i().principal
    names = [d.name for d in client.list_devices().devices]
    assert f"devices/{device}" in names
    assert client.get_device(f"devices/{device}").name == f"devices/{device}"  # `name` taken positionally


def test_kernel_ids_match_rdma_resource_show(client, device, mr):
    """The kernel's numbers of rdmad's objects, as iproute2's `rdma resource show` prints them."""
    import json
    import shutil
    import subprocess
    ids = client.list_kernel_ids(device=device)
    named = {k.name: k.number for k in ids.ids}
    assert all(n.split("/")[0] in ("pds", "mrs", "qps", "cmids") for n in named), named
    if ids.keyed:  # rdmad has CAP_NET_ADMIN: every region is matched by its key
        assert mr.name in named and mr.pd in named, ids
    if mr.name not in named:
        pytest.skip(f"{mr.name} not matched exactly without keys ({ids.unknown} unknown)")
    if shutil.which("rdma") is None:
        pytest.skip("no rdma tool (iproute2) here")
    shown = json.loads(subprocess.run(["rdma", "-j", "resource", "show", "mr"], check=True,
                                      capture_output=True, text=True).stdout)
    entry = [e for e in shown if e.get("ifname") == device and e.get("mrn") == named[mr.name]]
    assert len(entry) == 1, shown
    assert entry[0]["mrlen"] == mr.length
    if mr.pd in named:
        assert entry[0]["pdn"] == named[mr.pd]
    if "lkey" in entry[0]:
        assert int(entry[0]["lkey"], 16) == mr.lkey  # iproute2 prints keys as hex digits


def test_pd_life_cycle(client, device):
    pd = client.create_pd(device=device, label="pytest-life-cycle")
    assert pd.name.startswith("pds/") and pd.label == "pytest-life-cycle"
    assert client.get_pd(name=pd.name).label == "pytest-life-cycle"
    assert pd.name in [p.name for p in client.list_pds().pds]
    # The whole request message works too.
    client.delete_pd(rdmad.pb.DeletePdRequest(name=pd.name))
    e = expect_error(grpc.StatusCode.NOT_FOUND, client.get_pd, pd.name)
    assert e.detail is not None  # rdmad's own error: it carries an ErrorDetail


def test_list_calls_follow_every_page(client, device):
    made = [client.create_pd(device=device, label=f"pytest-page-{i}").name for i in range(3)]
    try:
        # One item per page: list_pds asks three times or more and returns them all in one response.
        whole = client.list_pds(page_size=1)
        names = [p.name for p in whole.pds]
        assert all(n in names for n in made) and whole.next_page_token == ""
        assert names == sorted(names, key=lambda n: int(n.split("/")[1]))  # in the order of their numbers
        # all_pages=False: the first page only, and a token for the rest.
        first = client.list_pds(page_size=1, all_pages=False)
        assert len(first.pds) == 1 and first.next_page_token
        second = client.list_pds(page_size=1, page_token=first.next_page_token)
        assert len(second.pds) == 1 and second.pds[0].name != first.pds[0].name
        # A token used with other filters is refused, naming it.
        e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.list_mrs, pd=made[0], page_token=first.next_page_token)
        assert e.field == "page_token"
        e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.list_pds, page_size=-1)
        assert e.field == "page_size"
    finally:
        for n in made:
            client.delete_pd(name=n)


def test_bad_field_names_the_field(client, device):
    e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.create_pd, device=device, label="x" * 129)
    assert e.field == "label"
    assert e.message.startswith("label")
    assert e.errno == 0 and e.detail is not None
    assert str(e).startswith("INVALID_ARGUMENT: label")


def test_grant_field_error(client, mr, principal):
    e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.issue_grant, mr=mr.name, offset=0, length=0,
                     principal=principal)
    assert e.field == "length"
    e = expect_error(grpc.StatusCode.OUT_OF_RANGE, client.issue_grant, mr=mr.name, offset=FILE_BYTES - 10,
                     length=4096, principal=principal)
    assert e.field == "length"


def test_errno_from_the_os(client, pd):
    # rdmad opens the file as the caller: one that is not there is the OS's ENOENT, in the ErrorDetail.
    e = expect_error(grpc.StatusCode.NOT_FOUND, client.register_mr, pd=pd.name,
                     source={"file": {"path": "/dev/shm/rdmad-python-no-such-file", "length": 4096}},
                     access=["LOCAL_WRITE"])
    assert e.field.startswith("source.file")
    assert e.errno_name == "ENOENT" and e.errno == 2


def test_a_field_the_request_does_not_have(client):
    e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.create_pd, devise="rxe0")
    assert e.field == "devise" and "CreatePdRequest" in e.message
    e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.register_mr, pd="pds/1", access=["NO_SUCH_ACCESS"])
    assert e.field == "access"


def test_channel_failure_has_no_detail():
    c = rdmad.connect("unix:/nonexistent/rdmad.sock", timeout=5.0, max_attempts=2)
    started = time.monotonic()
    e = expect_error(grpc.StatusCode.UNAVAILABLE, c.who_am_i)
    assert e.detail is None and e.field == ""
    assert time.monotonic() - started >= 0.25  # retried once, after the first backoff
    # A call that changes state is never retried (and fails the same way).
    expect_error(grpc.StatusCode.UNAVAILABLE, c.create_pd, device="rxe0")
    c.close()


def test_connect_refuses_bad_options():
    assert expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.connect, "unix:/x", timeout=0).field == "timeout"
    assert expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.connect, "").field == "target"


def test_tls_bad_files():
    with tempfile.TemporaryDirectory() as d:
        pem = os.path.join(d, "ok.pem")
        with open(pem, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
        junk = os.path.join(d, "junk.pem")
        with open(junk, "w") as f:
            f.write("not a certificate\n")
        missing = os.path.join(d, "missing.pem")
        e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.connect, "127.0.0.1:7470",
                         tls=rdmad.Tls(ca=missing, cert=pem, key=pem))
        assert e.field == "tls.ca" and "cannot read the CA file" in e.message and missing in e.message
        e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.connect, "127.0.0.1:7470",
                         tls=rdmad.Tls(ca=pem, cert=junk, key=pem))
        assert e.field == "tls.cert" and "is not a PEM file" in e.message
        e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.connect, "127.0.0.1:7470",
                         tls=rdmad.Tls(ca=pem, cert=pem, key=""))
        assert e.field == "tls.key"
        # On a unix socket TLS is not used (rdmad identifies the caller by its uid): not read at all.
        rdmad.connect("unix:/nonexistent.sock", tls=rdmad.Tls(ca=missing, cert=missing, key=missing)).close()


def test_watch_grants_streams_events(client, mr, issue):
    g = issue(0, 4096)
    events = client.watch_grants(mr=mr.name, from_oldest=True, timeout=20.0)
    for event in events:
        if event.grant.name == g.grant.name:
            break
    else:
        pytest.fail("the watch ended without the grant's event")
    events.cancel()


# ---- the data plane


def test_read_is_the_files_bytes(issue, shm_file):
    _, data = shm_file
    g = issue(4096, 1 << 20)
    with rdmad.RemoteRegion.open(g) as region:
        assert region.length == 1 << 20
        assert region.grant_name == g.grant.name
        assert region.key["type"] == "ACTIVE" and region.key["length"] == 1 << 20
        assert region.read(0, 1 << 20) == data[4096:4096 + (1 << 20)]
        assert region.read(12345, 100) == data[4096 + 12345:4096 + 12345 + 100]


def test_read_into_bytearray_memoryview_numpy(issue, shm_file):
    _, data = shm_file
    g = issue(8192, 3 << 20)
    want = data[8192:8192 + (3 << 20)]
    with rdmad.RemoteRegion.open(g) as region:
        buf = bytearray(3 << 20)
        assert region.read_into(0, buf) == 3 << 20
        assert buf == want
        # Into the middle of a buffer, through a memoryview: the rest untouched.
        buf = bytearray(b"\xee" * 10000)
        assert region.read_into(500, memoryview(buf), length=4000, destination_offset=3000) == 4000
        assert buf[3000:7000] == want[500:4500]
        assert buf[:3000] == b"\xee" * 3000 and buf[7000:] == b"\xee" * 3000
        # numpy, of bytes and of wider elements (the length is in bytes).
        a = np.zeros(2 << 20, dtype=np.uint8)
        region.read_into(1 << 20, a)
        assert a.tobytes() == want[1 << 20:3 << 20]
        w = np.zeros(1024, dtype=np.uint32)
        assert region.read_into(0, w) == 4096
        assert w.tobytes() == want[:4096]
        # Not writable, not contiguous, too long: refused before any read.
        e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, region.read_into, 0, b"immutable bytes")
        assert "destination" in e.message
        expect_error(grpc.StatusCode.INVALID_ARGUMENT, region.read_into, 0, np.zeros((64, 64), np.uint8)[:, ::2])
        expect_error(grpc.StatusCode.INVALID_ARGUMENT, region.read_into, 0, bytearray(10), length=11)


def test_zero_copy_read_into_a_registered_buffer(issue, shm_file):
    _, data = shm_file
    g = issue(0, 2 << 20)
    with rdmad.RemoteRegion.open(g) as region:
        a = np.zeros(2 << 20, dtype=np.uint8)
        local = region.register(a)
        assert local.size == 2 << 20
        copied = region.counters["bytes_copied"]
        assert region.read_into(0, local) == 2 << 20
        assert a.tobytes() == data[:2 << 20]
        assert region.counters["bytes_copied"] == copied  # nothing went through the slots
        local.release()
        expect_error(grpc.StatusCode.INVALID_ARGUMENT, region.read_into, 0, local)


def test_read_batch(issue, shm_file):
    _, data = shm_file
    g = issue(0, FILE_BYTES)
    with rdmad.RemoteRegion.open(g, queue_depth=4) as region:
        into = bytearray(5000)
        ops = [(i * 65536 + 17, 4096) for i in range(32)] + [(FILE_BYTES - 5000, into)]
        got = region.read_batch(ops)
        assert len(got) == 33
        for (offset, length), chunk in zip(ops[:32], got[:32]):
            assert chunk == data[offset:offset + length]
        assert got[32] is into and into == data[FILE_BYTES - 5000:]
        e = expect_error(grpc.StatusCode.OUT_OF_RANGE, region.read_batch, [(0, 10), (FILE_BYTES - 4, 8)])
        assert "ops[1]" in e.message
        expect_error(grpc.StatusCode.INVALID_ARGUMENT, region.read_batch, [(0,)])


def test_out_of_range_and_bad_arguments(issue):
    g = issue(0, 65536)
    with rdmad.RemoteRegion.open(g) as region:
        expect_error(grpc.StatusCode.OUT_OF_RANGE, region.read, 65000, 1000)
        expect_error(grpc.StatusCode.INVALID_ARGUMENT, region.read, -1, 10)
        expect_error(grpc.StatusCode.INVALID_ARGUMENT, region.read, 0, 0)
        assert len(region.read(65535, 1)) == 1  # the region still works


def test_open_with_token_and_endpoint(issue, shm_file):
    _, data = shm_file
    g = issue(65536, 65536)
    endpoint = g.endpoints[0]
    with rdmad.RemoteRegion.open(g.token, f"{endpoint.address}:{endpoint.port}") as region:
        assert region.read(0, 65536) == data[65536:131072]
    e = expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.RemoteRegion.open, g.token)
    assert "endpoint" in e.message
    expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.RemoteRegion.open, g.token, (endpoint.address, 0))
    expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.RemoteRegion.open, "not a grant")
    expect_error(grpc.StatusCode.INVALID_ARGUMENT, rdmad.RemoteRegion.open, g, wait="spin")


def test_read_after_revoke_is_refused(client, issue, shm_file):
    _, data = shm_file
    g = issue(0, 65536)
    with rdmad.RemoteRegion.open(g, wait="events") as region:
        assert region.completion_fd >= 0
        assert region.read(0, 4096) == data[:4096]
        client.revoke_grant(g.grant.name)
        e = expect_error(grpc.StatusCode.PERMISSION_DENIED, region.read, 0, 4096)
        assert g.grant.name in e.message and e.detail is None
        # Sticky: the next read fails with the first error.
        expect_error(grpc.StatusCode.PERMISSION_DENIED, region.read_into, 0, bytearray(16))
    assert region.closed
    expect_error(grpc.StatusCode.FAILED_PRECONDITION, region.read, 0, 16)


def test_write_needs_a_writable_grant(issue, shm_file):
    path, _ = shm_file
    g = issue(FILE_BYTES - 8192, 8192, access=["REMOTE_WRITE"])
    payload = bytes(range(256)) * 16
    with rdmad.RemoteRegion.open(g) as region:
        assert region.write(100, payload) == 4096
        assert region.read(100, 4096) == payload
    with open(path, "rb") as f:  # rdmad's file itself changed
        f.seek(FILE_BYTES - 8192 + 100)
        assert f.read(4096) == payload
    ro = issue(0, 8192)
    with rdmad.RemoteRegion.open(ro) as region:
        e = expect_error(grpc.StatusCode.PERMISSION_DENIED, region.write, 0, b"x" * 16)
        assert "no write access" in e.message
        e = expect_error(grpc.StatusCode.PERMISSION_DENIED, region.write_batch, [(0, b"x" * 16)])
        assert e.message.startswith("ops[0]")


def test_write_batch_lands_and_reads_back(issue, shm_file):
    path, _ = shm_file
    g = issue(FILE_BYTES - 65536, 65536, access=["REMOTE_WRITE"])
    chunks = [bytes([(i * 31 + k) & 0xFF for i in range(4096)]) for k in range(8)]
    with rdmad.RemoteRegion.open(g) as region:
        assert region.write_batch([(k * 8192, chunks[k]) for k in range(8)]) == 8 * 4096
        assert region.read_batch([(k * 8192, 4096) for k in range(8)]) == chunks
        expect_error(grpc.StatusCode.OUT_OF_RANGE, region.write_batch, [(65536 - 10, b"y" * 16)])


def test_reads_release_the_gil(issue):
    # One thread reads the whole file in one call; the main thread keeps running Python while it waits. If the
    # read held the GIL, the main thread's longest pause would be the read's whole duration.
    g = issue(0, FILE_BYTES)
    with rdmad.RemoteRegion.open(g) as region:
        durations = []

        def reader():
            for _ in range(3):
                t = time.monotonic()
                region.read(0, FILE_BYTES)
                durations.append(time.monotonic() - t)

        thread = threading.Thread(target=reader)
        longest_pause = 0.0
        thread.start()
        last = time.monotonic()
        while thread.is_alive():
            now = time.monotonic()
            longest_pause = max(longest_pause, now - last)
            last = now
        thread.join()
    longest_read = max(durations)
    assert longest_read > 0.005, f"reads too quick to tell ({longest_read:.4f} s)"
    assert longest_pause < longest_read / 2, f"paused {longest_pause:.3f} s during a {longest_read:.3f} s read"


def test_a_memfd_shared_registered_granted_and_read(client, pd, principal):
    """Memory passed as a file descriptor: no shared path, rdmad pins it (docs/sdk.md)."""
    size = 1 << 20
    data = pattern(size, seed=5)
    fd = os.memfd_create("rdmad-python-sdk", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        handle = client.share_fd(fd)
        assert handle.startswith("descriptors/")
        m = client.register_mr(pd=pd.name, source={"fd": {"handle": handle, "length": size}},
                               access=["LOCAL_WRITE", "REMOTE_READ", "MW_BIND"])
        assert m.length == size and m.source.HasField("fd")
        # The handle is spent.
        expect_error(grpc.StatusCode.NOT_FOUND, client.register_mr, pd=pd.name,
                     source={"fd": {"handle": handle, "length": size}}, access=["REMOTE_READ"])
        g = client.issue_grant(mr=m.name, offset=4096, length=65536, ttl_ms=60000, principal=principal)
        with rdmad.RemoteRegion.open(g) as region:
            assert region.read(0, 65536) == data[4096:4096 + 65536]
        client.revoke_grant(g.grant.name)
        client.deregister_mr(name=m.name)
    finally:
        os.close(fd)


def test_a_read_only_descriptor_gives_no_write_access(client, pd):
    fd = os.memfd_create("rdmad-python-sdk-ro", os.MFD_CLOEXEC)
    try:
        os.write(fd, bytes(8192))
        ro = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            e = expect_error(grpc.StatusCode.PERMISSION_DENIED, client.register_mr, pd=pd.name,
                             source={"fd": {"handle": client.share_fd(ro), "length": 8192}},
                             access=["LOCAL_WRITE", "REMOTE_READ"])
            assert e.field == "source.fd" and "read-only" in e.message
            # Read-only access only: registered where the kernel pins read-only memory (Linux 6.2 and later);
            # before that every region is pinned for writing, and rdmad says so.
            handle = client.share_fd(ro)
            if tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2]) >= (6, 2):
                m = client.register_mr(pd=pd.name, source={"fd": {"handle": handle, "length": 8192}},
                                       access=["REMOTE_READ"])
                client.deregister_mr(name=m.name)
            else:
                e = expect_error(grpc.StatusCode.FAILED_PRECONDITION, client.register_mr, pd=pd.name,
                                 source={"fd": {"handle": handle, "length": 8192}}, access=["REMOTE_READ"])
                assert e.field == "source.fd" and e.errno_name == "EFAULT" and "read-write" in e.message
        finally:
            os.close(ro)
        r, w = os.pipe()
        try:
            expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.share_fd, r)
        finally:
            os.close(r)
            os.close(w)
    finally:
        os.close(fd)


def test_share_fd_needs_a_local_rdmad():
    c = rdmad.connect("127.0.0.1:1")
    expect_error(grpc.StatusCode.FAILED_PRECONDITION, c.share_fd, 0)
    c.close()
