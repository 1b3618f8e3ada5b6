#!/usr/bin/env python3
"""A plain rdma-core reader (pyverbs only, as docs/PROTOCOL.md describes it) that reads a grant in a loop
until a read fails, and says when and how: how soon after RevokeGrant a reader that never looks at rdmad's
ENDED message sees its key refused.
  revoke_timing.py --endpoint 10.0.2.15:7471 --token-file t.token --ready FILE
FILE is created after the first 100 good reads; the caller then revokes the grant. One line on stdout:
  reads N first_failure UNIX_SECONDS status STATUS_NAME
(the second receive, kept for ENDED, is never looked at). Exit status: 0 a read failed, 1 error, 4 timeout.
"""
import argparse, os, signal, struct, sys, time

import pyverbs.cm_enums as ce, pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.cq import cqe_status_to_str
from pyverbs.qp import QPCap, QPInitAttr

MSG = struct.Struct('>4sBBBBQQQIIq')  # the grant message, v1 (docs/PROTOCOL.md#grant-messages)


def expect(channel, wanted):
    ev = CMEvent(channel)
    kind, text = ev.event_type, ev.event_str()
    ev.ack_cm_event()
    if kind != wanted:
        sys.exit('revoke_timing: unexpected rdma_cm event %s' % text)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--endpoint', required=True)
    p.add_argument('--token-file', required=True)
    p.add_argument('--ready', required=True)
    p.add_argument('--timeout', type=int, default=60)
    a = p.parse_args()
    host, _, port = a.endpoint.rpartition(':')
    token = open(a.token_file, 'rb').read()
    signal.signal(signal.SIGALRM, lambda *_: (print('revoke_timing: timed out', file=sys.stderr), os._exit(4)))
    signal.alarm(a.timeout)
    ch = CMEventChannel()
    cmid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
    cmid.resolve_addr(AddrInfo(dst=host, dst_service=port, port_space=ce.RDMA_PS_TCP))
    expect(ch, ce.RDMA_CM_EVENT_ADDR_RESOLVED)
    cmid.resolve_route()
    expect(ch, ce.RDMA_CM_EVENT_ROUTE_RESOLVED)
    cmid.create_qp(QPInitAttr(qp_type=e.IBV_QPT_RC, cap=QPCap(max_send_wr=4, max_recv_wr=2)))
    msgs = [cmid.reg_msgs(64) for _ in range(2)]
    for mr in msgs:
        cmid.post_recv(mr, MSG.size)
    param = ConnParam(resources=1, depth=1, retry=7, rnr_retry=7, data_len=len(token))
    param.set_private_data(token)
    cmid.connect(param)
    expect(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    wc = cmid.get_recv_comp()
    if wc.status != e.IBV_WC_SUCCESS:
        sys.exit('revoke_timing: no key: %s' % cqe_status_to_str(wc.status))
    _, _, kind, _, _, _, raddr, glen, rkey, _, _ = MSG.unpack(msgs[0].read(MSG.size, 0))
    if kind != 1:
        sys.exit('revoke_timing: no key: message type %d' % kind)
    buf = cmid.reg_msgs(4096)
    reads = 0
    while True:
        cmid.post_read(buf, 4096, raddr + (reads * 4096) % max(glen - 4096, 1), rkey, flags=e.IBV_SEND_SIGNALED)
        wc = cmid.get_send_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            print('reads %d first_failure %.6f status %s' % (reads, time.time(), cqe_status_to_str(wc.status)))
            return
        reads += 1
        if reads == 100:
            open(a.ready, 'w').close()


main()
