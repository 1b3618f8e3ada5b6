"""Fixtures of the Python SDK's suite: a real rdmad on a verbs device (rxe0 in the Soft-RoCE guest).

    RDMAD_TARGET=unix:/path/rdmad.sock RDMAD_DEVICE=rxe0 python3 -m pytest tests/python

tests/sdk/run-example.sh runs it that way, with PYTHONPATH empty: `import rdmad` is the installed package.
"""

import os

import pytest

import rdmad

FILE_BYTES = 4 << 20  # a granted file spanning several copying slots (1 MiB each by default)


def pattern(n, seed=0):
    """n bytes of a pattern that differs at every offset of a page and from page to page."""
    return bytes((i * 7 + (i >> 12) * 13 + seed) & 0xFF for i in range(n))


@pytest.fixture(scope="session")
def target():
    t = os.environ.get("RDMAD_TARGET")
    if not t:
        pytest.fail("RDMAD_TARGET is not set (unix:/path/to/rdmad.sock of an rdmad serving a verbs device)")
    return t


@pytest.fixture(scope="session")
def device():
    return os.environ.get("RDMAD_DEVICE", "rxe0")


@pytest.fixture(scope="session")
def client(target):
    with rdmad.connect(target) as c:
        yield c


@pytest.fixture(scope="session")
def principal(client):
    return client.who_am_i().principal


@pytest.fixture(scope="session")
def pd(client, device):
    p = client.create_pd(device=device, label="python-sdk-test")
    yield p
    client.delete_pd(name=p.name, cascade=True, revoke_grants=True)


@pytest.fixture(scope="session")
def shm_file():
    path = f"/dev/shm/rdmad-python-sdk-{os.getpid()}"
    data = pattern(FILE_BYTES)
    with open(path, "wb") as f:
        f.write(data)
    yield path, data
    os.unlink(path)


@pytest.fixture(scope="session")
def mr(client, pd, shm_file):
    path, data = shm_file
    m = client.register_mr(pd=pd.name, source={"file": {"path": path, "length": len(data)}},
                           access=["LOCAL_WRITE", "REMOTE_READ", "MW_BIND"])
    yield m
    # Deleted with the PD (cascade).


@pytest.fixture
def issue(client, mr, principal):
    """issue(offset, length, **more) -> IssuedGrant of the test MR to this process; revoked after the test."""
    issued = []

    def make(offset, length, **more):
        g = client.issue_grant(mr=mr.name, offset=offset, length=length, ttl_ms=120000, principal=principal,
                               **more)
        issued.append(g.grant.name)
        return g

    yield make
    for name in issued:
        try:
            client.revoke_grant(name)
        except rdmad.Error:
            pass  # already ended (the test revoked it, or its connection went)
