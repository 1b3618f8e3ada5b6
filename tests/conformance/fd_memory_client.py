#!/usr/bin/python3
"""Memory passed as a file descriptor, on rxe between two guests (tests/conformance/run-two-host.sh).

In guest A, as a non-root user whose RLIMIT_MEMLOCK is 64 KiB, with the installed Python SDK:
    fd_memory_client.py share TARGET TOKEN_FILE
puts 64 MiB of a known pattern in a memfd, passes it to rdmad over its descriptor socket, registers it
(rdmad pins it: this process could pin only 64 KiB itself, and shares no path), grants the whole of it to
another machine's reader and writes the grant's token to TOKEN_FILE. Exit status 0 when every step did.

In guest B:
    fd_memory_client.py expected FILE
writes the same 64 MiB pattern to FILE, to compare with what the reader read through the grant.
"""

import os
import resource
import sys

SIZE = 64 << 20
PAGE = 4096


def pattern():
    """SIZE bytes: page p holds bytes (i * 7 + p) & 0xFF, so every page differs from its neighbours."""
    pages = [bytes((i * 7 + p) & 0xFF for i in range(PAGE)) for p in range(256)]
    return b"".join(pages[p % 256] for p in range(SIZE // PAGE))


def share(target, token_file):
    import rdmad

    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if os.geteuid() == 0 or soft > 65536:
        print(f"fd_memory_client: expected a non-root user with RLIMIT_MEMLOCK 64 KiB, got uid {os.geteuid()}, "
              f"memlock {soft}", file=sys.stderr)
        return 1
    print(f"fd_memory_client: uid {os.geteuid()}, RLIMIT_MEMLOCK {soft} bytes, registering {SIZE} bytes")
    c = rdmad.connect(target)
    fd = os.memfd_create("rdmad-fd-memory", os.MFD_CLOEXEC)
    try:
        os.write(fd, pattern())
        handle = c.share_fd(fd)
        pd = c.create_pd(device=c.list_devices().devices[0].name, label="fd-memory")
        mr = c.register_mr(pd=pd.name, source={"fd": {"handle": handle, "length": SIZE}},
                           access=["LOCAL_WRITE", "REMOTE_READ", "MW_BIND"])
        g = c.issue_grant(mr=mr.name, offset=0, length=SIZE, ttl_ms=1200000, principal="fd-memory-reader")
    except rdmad.Error as e:
        print(f"fd_memory_client: {e}", file=sys.stderr)
        return 1
    finally:
        os.close(fd)  # rdmad holds the memory now
    with open(token_file, "wb") as f:
        f.write(g.token)
    print(f"fd_memory_client: {mr.name} ({pd.name}) registered from a memfd, {g.grant.name} issued "
          f"(scope {rdmad.pb.GrantScope.Name(g.grant.scope)})")
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "share":
        return share(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == "expected":
        with open(sys.argv[2], "wb") as f:
            f.write(pattern())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
