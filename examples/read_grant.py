#!/usr/bin/python3
"""rdmad's Python SDK end to end (docs/sdk.md#python): register a file with rdmad, grant a range of it, read
the range through the grant over RDMA, check the bytes, revoke the grant and see the next read refused.
The same steps as examples/read_grant.cc.

    /usr/bin/python3 examples/read_grant.py [TARGET [FILE]]   # TARGET: unix:/run/rdmad/rdmad.sock (default) or host:port

FILE: when rdmad runs on another host, a file there (under its allowed_file_roots) that already holds the
example's 64 KiB pattern; by default the example writes its own file here, for an rdmad on this host.

Exit status 0 when every step did what it should; otherwise 1, with the step and its error on stderr.
"""

import os
import sys

import rdmad


def fail(step, error):
    print(f"read_grant.py: {step}: {error}", file=sys.stderr)
    sys.exit(1)


def main():
    c = rdmad.connect(sys.argv[1] if len(sys.argv) > 1 else rdmad.DEFAULT_TARGET)

    # 64 KiB of a known pattern in a file rdmad can map (tmpfs).
    own_file = len(sys.argv) < 3
    path = f"/dev/shm/rdmad-example-{os.getpid()}" if own_file else sys.argv[2]
    data = bytes((i * 7 + 3) & 0xFF for i in range(64 << 10))
    if own_file:
        with open(path, "wb") as f:
            f.write(data)

    step = "list_devices"
    try:
        devices = c.list_devices().devices
        if not devices:
            fail("list_devices", "rdmad serves no device")
        step = "create_pd"
        pd = c.create_pd(device=devices[0].name, label="sdk-example")
        step = "register_mr"
        mr = c.register_mr(pd=pd.name, source={"file": {"path": path, "length": len(data)}},
                           access=["LOCAL_WRITE", "REMOTE_READ", "MW_BIND"])

        # The grantee's principal: who rdmad takes this process to be (a grant may name another).
        step = "who_am_i"
        me = c.who_am_i().principal
        step = "issue_grant"
        grant = c.issue_grant(mr=mr.name, offset=4096, length=16384, ttl_ms=60000, principal=me)

        # The data plane: connect with the grant's token, then read with rdma_post_read; rdmad is not involved.
        step = "RemoteRegion.open"
        region = rdmad.RemoteRegion.open(grant)
        step = "read"
        got = region.read(0, 16384)
        if got != data[4096:4096 + 16384]:
            fail("read", "the bytes read differ from the file's")
        print(f"read {len(got)} bytes of {mr.name} through {grant.grant.name}: as written")

        # Revoke: once revoke_grant returns, the key is dead at the NIC and the next read is refused.
        step = "revoke_grant"
        c.revoke_grant(grant.grant.name)
        try:
            region.read(0, 16384)
            fail("read after revoke", "a read after the revocation succeeded")
        except rdmad.Error as e:
            after = e
        print(f"read after revoke: {after}")

        step = "clean-up"
        region.close()
        c.deregister_mr(name=mr.name, revoke_grants=True)
        c.delete_pd(name=pd.name)
    except rdmad.Error as e:
        fail(step, e)
    finally:
        if own_file:
            os.unlink(path)
    return 0 if after.code_name == "PERMISSION_DENIED" else 1


if __name__ == "__main__":
    sys.exit(main())
