#!/usr/bin/env python3
"""Reads memory through an rdmad grant with rdma-core's pyverbs alone (docs/PROTOCOL.md#grants).
  read_grant.py --endpoint 10.0.2.15:7471 --token-file app-7.token --offset 0 --length 4096 -o out.bin
With --loop it reads the range again and again until a read fails (a revocation, the lease's end), and
prints when, by this host's clock, and with which completion status.
The token file holds the grant's 32 raw bytes, as `rdmactl grant ... --token-file FILE` writes them.
Exit status: 0 read, 1 usage or local error, 2 rejected, 3 FAILED / ENDED, 4 completion error or timeout.
"""
import argparse, hashlib, os, signal, struct, sys, time

import pyverbs.cm_enums as ce, pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.cq import cqe_status_to_str
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QPCap, QPInitAttr

# Grant message v1 (proto/wire/grant_message.h), 48 bytes, big-endian: magic, version, type, scope, reason,
# grant id, remote_addr, length, rkey, access, expiry (Unix ns). Reject v1: magic, version, -, reason, token.
MSG, REJ = struct.Struct('>4sBBBBQQQIIq'), struct.Struct('>4sBBHQ')
TYPES, SCOPES = {1: 'ACTIVE', 2: 'ENDED', 3: 'FAILED'}, {1: 'QP', 2: 'PD', 3: 'MR'}
REASONS = [None, 'REVOKED', 'EXPIRED', 'DISCONNECTED', 'MR_DEREGISTERED', 'MR_REREGISTERED', 'PD_DELETED',
           'ACTIVATION_FAILED', 'SHUTDOWN', 'RESTARTED']
REJECTS = [None, 'TOKEN_MISSING', 'TOKEN_MALFORMED', 'TOKEN_WRONG_VERSION', 'TOKEN_UNKNOWN', 'TOKEN_EXPIRED',
           'TOKEN_REPLAYED', 'TOKEN_REVOKED', 'INTERNAL', 'OVER_QUOTA']
CHUNK = 1 << 20
name = lambda names, n: names[n] if 0 < n < len(names) else 'REASON_%d' % n  # noqa: E731


def die(code, text):
    print('read_grant: ' + text, file=sys.stderr)
    sys.exit(code)


def expect(channel, wanted):
    ev = CMEvent(channel)
    kind, data, text = ev.event_type, ev.private_data, ev.event_str()
    ev.ack_cm_event()
    if kind == ce.RDMA_CM_EVENT_REJECTED:
        if data[:4] != b'RDRJ' or len(data) < REJ.size:
            die(2, 'rejected, not by rdmad: is its data-plane listener at that address?')
        _, _, _, reason, token_id = REJ.unpack_from(data)
        die(2, 'rdmad rejected the connection: %s (tokens/%d)' % (name(REJECTS, reason), token_id))
    if kind != wanted:
        die(1, 'unexpected rdma_cm event %s' % text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--endpoint', required=True, help="rdmad's data-plane listener, HOST:PORT or [V6]:PORT")
    p.add_argument('--token-file', required=True, help="the grant's token: its 32 raw bytes")
    p.add_argument('--offset', type=int, default=0, help='bytes from the start of the granted range')
    p.add_argument('--length', type=int, help='bytes to read (default: to the end of the grant)')
    p.add_argument('-o', '--output', help='write the bytes here (default: print their SHA-256)')
    p.add_argument('--timeout', type=int, default=30, help='seconds for the whole run (default 30)')
    p.add_argument('--no-bounds-check', action='store_true', help='post reads outside the grant (the NIC refuses)')
    p.add_argument('--loop', action='store_true',
                   help='read the range over and over until a read fails (as after a revocation); print when')
    a = p.parse_args()
    host, _, port = a.endpoint.rpartition(':')
    with open(a.token_file, 'rb') as f:
        token = f.read()
    if not host or not port.isdigit() or len(token) != 32:
        die(1, 'need --endpoint HOST:PORT and a token file of exactly 32 bytes (it has %d)' % len(token))
    signal.signal(signal.SIGALRM, lambda *_: (print('read_grant: timed out', file=sys.stderr), os._exit(4)))
    signal.alarm(a.timeout)

    ch, cmid, mrs = None, None, []
    try:
        ch = CMEventChannel()
        cmid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
        cmid.resolve_addr(AddrInfo(dst=host.strip('[]'), dst_service=port, port_space=ce.RDMA_PS_TCP))
        expect(ch, ce.RDMA_CM_EVENT_ADDR_RESOLVED)
        cmid.resolve_route()
        expect(ch, ce.RDMA_CM_EVENT_ROUTE_RESOLVED)
        cmid.create_qp(QPInitAttr(qp_type=e.IBV_QPT_RC, cap=QPCap(max_send_wr=4, max_recv_wr=2)))
        # rdmad sends ACTIVE (or FAILED), later ENDED: both receives are posted before connecting, one MR
        # each (post_recv always uses its MR's start); receive completions come in posting order.
        mrs = [cmid.reg_msgs(64) for _ in range(2)]
        for mr in mrs:
            cmid.post_recv(mr, MSG.size)
        # retry=6: rxe takes 7 as "for ever", and a read whose answer was lost would never complete.
        param = ConnParam(resources=1, depth=1, retry=6, rnr_retry=7, data_len=len(token))
        param.set_private_data(token)  # the token is the connect request's private data
        cmid.connect(param)
        expect(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
        wc = cmid.get_recv_comp()  # blocks until the first message (or a flush)
        if wc.status != e.IBV_WC_SUCCESS:
            die(4, 'receiving the grant message: %s' % cqe_status_to_str(wc.status))
        raw = mrs[0].read(MSG.size, 0)
        magic, version, kind, scope, reason, gid, raddr, glen, rkey, _, expiry = MSG.unpack(raw)
        if magic != b'RDGM' or version < 1:
            die(1, 'not a grant message: %s' % raw.hex())
        if kind != 1:
            die(3, 'grants/%d %s: %s' % (gid, TYPES.get(kind, kind), name(REASONS, reason)))
        print('grants/%d ACTIVE: scope %s, rkey 0x%x, remote_addr 0x%x, %d bytes, lease ends in %.0f s'
              % (gid, SCOPES.get(scope, scope), rkey, raddr, glen, expiry / 1e9 - time.time()), file=sys.stderr)
        length = glen - a.offset if a.length is None else a.length
        if length <= 0 or (not a.no_bounds_check and (a.offset < 0 or a.offset + length > glen)):
            die(1, '[%d, +%d) is not inside the grant (%d bytes)' % (a.offset, length, glen))
        buf = cmid.reg_msgs(min(length, CHUNK))  # LOCAL_WRITE: the reads land here
        mrs.append(buf)
        out, digest, done, passes = open(a.output, 'wb') if a.output else None, hashlib.sha256(), 0, 0
        while done < length:
            n = min(CHUNK, length - done)
            cmid.post_read(buf, n, (raddr + a.offset + done) % (1 << 64), rkey, flags=e.IBV_SEND_SIGNALED)
            wc = cmid.get_send_comp()
            if wc.status != e.IBV_WC_SUCCESS:  # the QP is now in the error state
                hint = ' (outside the grant, or the grant ended)' if wc.status == e.IBV_WC_REM_ACCESS_ERR else ''
                if a.loop:
                    print('read_grant: read failed at %d ns (Unix time) after %d passes: %s%s'
                          % (time.time_ns(), passes, cqe_status_to_str(wc.status), hint), file=sys.stderr)
                die(4, 'read at offset %d: %s%s' % (a.offset + done, cqe_status_to_str(wc.status), hint))
            if not a.loop or passes == 0:
                (out.write if out else digest.update)(buf.read(n, 0))
            done += n
            if a.loop and done == length:  # again, from the start
                passes, done = passes + 1, 0
                if passes == 1:
                    print('read_grant: pass 1 done, reading on until a read fails', file=sys.stderr, flush=True)
        out and out.close()
        print('%d bytes %s' % (done, 'written to ' + a.output if out else 'read, sha256 ' + digest.hexdigest()))
        cmid.disconnect()  # rdmad then ends the grant (DISCONNECTED) and releases the connection
    except PyverbsError as err:
        die(1, str(err))
    finally:
        for mr in mrs:  # before the id: destroying the id may free the PD they are in
            mr.close()
        for obj in (cmid, ch):
            obj is None or obj.close()


main()
