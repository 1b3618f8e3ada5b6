#!/usr/bin/env python3
"""Reads many rdmad grants over one connection, a session, with rdma-core's pyverbs alone (docs/PROTOCOL.md#sessions).
  read_session.py --endpoint 10.0.2.15:7471 --tokens-file app.tokens
The tokens file holds the grants' tokens, 32 raw bytes each, back to back. The first token opens the
connection (offering protocol version 2); each further one is sent as an ACTIVATE message on it, and rdmad
answers with that grant's key, bound on the same queue pair. Then every grant is read whole and its bytes'
SHA-256 printed, one line per grant in token order: INDEX grants/ID LENGTH SHA256.
With --wait-ended S it then waits up to S seconds for one grant to end (an ENDED message: revoked, say),
reads every other grant again (they must be unchanged), with --release-first releases the first grant (a
RELEASE message: rdmad ends it and answers ENDED), and, with --probe-ended, reads the ended one too:
rdmad's NIC must refuse its dead key (which ends the connection, as any refused read on RC does).
Exit status: 0 done, 1 usage or local error, 2 rejected, 3 refused / FAILED / ENDED, 4 completion error or timeout.
"""
import argparse, hashlib, os, signal, statistics, struct, sys, time

import pyverbs.cm_enums as ce, pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.cq import cqe_status_to_str
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QPCap, QPInitAttr

# Version 2 (proto/wire/grant_message.h), 64 bytes, big-endian: the 48 bytes of version 1 (magic, version,
# type, scope, reason, grant id, remote_addr, length, rkey, access, expiry), then the client's tag and the
# token id. An ACTIVATE is the magic, version 2, type 5, the token at byte 16 and the tag at byte 48; a
# RELEASE the magic, version 2, type 6, the grant id at byte 8 and the tag at byte 48.
MSG, REJ = struct.Struct('>4sBBBBQQQIIqQQ'), struct.Struct('>4sBBHQ')
OFFER = b'RDVR\x02\x00\x00\x00'  # after the token in the connect request: "I speak up to version 2"
ACTIVE, ENDED, FAILED, REFUSED = 1, 2, 3, 4
TYPES = {ACTIVE: 'ACTIVE', ENDED: 'ENDED', FAILED: 'FAILED', REFUSED: 'REFUSED'}
REASONS = [None, 'REVOKED', 'EXPIRED', 'DISCONNECTED', 'MR_DEREGISTERED', 'MR_REREGISTERED', 'PD_DELETED',
           'ACTIVATION_FAILED', 'SHUTDOWN', 'RESTARTED', 'RELEASED']
REJECTS = [None, 'TOKEN_MISSING', 'TOKEN_MALFORMED', 'TOKEN_WRONG_VERSION', 'TOKEN_UNKNOWN', 'TOKEN_EXPIRED',
           'TOKEN_REPLAYED', 'TOKEN_REVOKED', 'INTERNAL', 'OVER_QUOTA', 'SESSION_MISMATCH']
RECVS = 32  # receives kept posted: answers, and ENDED messages that may come at any time
name = lambda names, n: names[n] if 0 < n < len(names) else 'REASON_%d' % n  # noqa: E731


def die(code, text):
    print('read_session: ' + text, file=sys.stderr)
    sys.exit(code)


def event(channel, wanted):
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
    return data


class Session:
    def __init__(self, cmid):
        self.cmid, self.keys, self.ended = cmid, {}, {}  # keys and ends by tag (the token's index)
        self.recvs = [cmid.reg_msgs(64) for _ in range(RECVS)]  # post_recv uses its MR's start: one each
        self.next_recv = 0  # receives complete in the order they were posted
        for mr in self.recvs:
            cmid.post_recv(mr, MSG.size)
        self.send = cmid.reg_msgs(64)

    def message(self):
        """The next message rdmad sent: waits for it, then posts its receive again."""
        wc = self.cmid.get_recv_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            die(4, 'receiving: %s (the connection ended)' % cqe_status_to_str(wc.status))
        mr = self.recvs[self.next_recv % RECVS]
        self.next_recv += 1
        m = MSG.unpack(mr.read(MSG.size, 0))
        self.cmid.post_recv(mr, MSG.size)
        if m[0] != b'RDGM' or m[1] < 2:
            die(1, 'not a version 2 message: %s' % mr.read(MSG.size, 0).hex())
        kind, reason, gid, tag = m[2], m[4], m[5], m[11]
        if kind == ACTIVE:
            self.keys[tag] = (gid, m[6], m[7], m[8])  # grant id, remote_addr, length, rkey
        elif kind == ENDED:
            self.ended[tag] = (gid, name(REASONS, reason))
        elif kind == REFUSED:
            die(3, 'token %d refused: %s (tokens/%d)' % (tag, name(REJECTS, reason), m[12]))
        else:
            die(3, 'token %d: grants/%d %s: %s' % (tag, gid, TYPES.get(kind, kind), name(REASONS, reason)))
        return kind, tag

    def activate(self, token, tag):
        """Sends an ACTIVATE and waits for its answer; returns the seconds it took."""
        began = time.perf_counter()
        self.send.write(struct.pack('>4sBBBBQ32sQQ', b'RDGM', 2, 5, 0, 0, 0, token, tag, 0), 64)
        self.cmid.post_send(self.send, e.IBV_SEND_SIGNALED, 64)
        wc = self.cmid.get_send_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            die(4, 'sending ACTIVATE: %s' % cqe_status_to_str(wc.status))
        while tag not in self.keys:  # an ENDED of another grant may come first
            self.message()
        return time.perf_counter() - began

    def release(self, tag):
        """Releases the grant activated with `tag` and waits for its ENDED."""
        self.send.write(struct.pack('>4sBBBBQ32sQQ', b'RDGM', 2, 6, 0, 0, self.keys[tag][0], bytes(32), tag, 0), 64)
        self.cmid.post_send(self.send, e.IBV_SEND_SIGNALED, 64)
        wc = self.cmid.get_send_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            die(4, 'sending RELEASE: %s' % cqe_status_to_str(wc.status))
        while tag not in self.ended:
            self.message()
        return self.ended[tag]


def read(cmid, buf, key, want_ok=True):
    """Reads a grant whole into buf; its SHA-256, or the completion's status text if it failed."""
    gid, raddr, length, rkey = key
    cmid.post_read(buf, length, raddr, rkey, flags=e.IBV_SEND_SIGNALED)
    wc = cmid.get_send_comp()
    if wc.status != e.IBV_WC_SUCCESS:
        if want_ok:
            die(4, 'reading grants/%d: %s' % (gid, cqe_status_to_str(wc.status)))
        return None, cqe_status_to_str(wc.status)
    return hashlib.sha256(buf.read(length, 0)).hexdigest(), None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--endpoint', required=True, help="rdmad's data-plane listener, HOST:PORT or [V6]:PORT")
    p.add_argument('--tokens-file', required=True, help="the grants' tokens, 32 raw bytes each, back to back")
    p.add_argument('--timeout', type=int, default=300, help='seconds for the whole run (default 300)')
    p.add_argument('--wait-ended', type=int, default=0, metavar='S', help='then wait up to S s for a grant to end')
    p.add_argument('--release-first', action='store_true', help='then release the first grant (RELEASE)')
    p.add_argument('--probe-ended', action='store_true', help="then read the ended grant: the NIC must refuse it")
    a = p.parse_args()
    host, _, port = a.endpoint.rpartition(':')
    with open(a.tokens_file, 'rb') as f:
        blob = f.read()
    if not host or not port.isdigit() or not blob or len(blob) % 32:
        die(1, 'need --endpoint HOST:PORT and a tokens file of 32-byte tokens (it has %d bytes)' % len(blob))
    tokens = [blob[i:i + 32] for i in range(0, len(blob), 32)]
    signal.signal(signal.SIGALRM, lambda *_: (print('read_session: timed out', file=sys.stderr), os._exit(4)))
    signal.alarm(a.timeout)

    ch, cmid, session, buf = None, None, None, None
    try:
        ch = CMEventChannel()
        cmid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
        cmid.resolve_addr(AddrInfo(dst=host.strip('[]'), dst_service=port, port_space=ce.RDMA_PS_TCP))
        event(ch, ce.RDMA_CM_EVENT_ADDR_RESOLVED)
        cmid.resolve_route()
        event(ch, ce.RDMA_CM_EVENT_ROUTE_RESOLVED)
        cmid.create_qp(QPInitAttr(qp_type=e.IBV_QPT_RC, cap=QPCap(max_send_wr=4, max_recv_wr=RECVS)))
        session = Session(cmid)  # receives posted before connecting: the first key may come at once
        param = ConnParam(resources=1, depth=1, retry=6, rnr_retry=7, data_len=40)
        param.set_private_data(tokens[0] + OFFER)
        cmid.connect(param)
        accept = event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
        if accept[:4] != b'RDVR' or accept[4] < 2:
            die(1, 'rdmad answered with protocol version 1: it has no sessions (read each grant on its own connection)')
        while 0 not in session.keys:  # the first grant's key, tag 0
            session.message()
        times = [session.activate(t, i) for i, t in enumerate(tokens[1:], start=1)]
        if times:
            print('activated %d grants over the connection: %.2f ms each (median), %.2f ms at most'
                  % (len(times), statistics.median(times) * 1e3, max(times) * 1e3), file=sys.stderr)
        buf = cmid.reg_msgs(max(k[2] for k in session.keys.values()))
        digests = {}
        for i in range(len(tokens)):
            digests[i], _ = read(cmid, buf, session.keys[i])
            gid, _, length, _ = session.keys[i]
            print('%d grants/%d %d %s' % (i, gid, length, digests[i]), flush=True)
        print('read_session: all %d grants read over one connection' % len(tokens), file=sys.stderr, flush=True)
        if a.wait_ended:
            signal.alarm(a.wait_ended)
            while not session.ended:
                session.message()
            signal.alarm(a.timeout)
            (tag, (gid, reason)), = session.ended.items()
            print('ended %d grants/%d %s' % (tag, gid, reason), flush=True)
            for i in range(len(tokens)):
                if i != tag and read(cmid, buf, session.keys[i])[0] != digests[i]:
                    die(4, 'grants/%d reads differently after another grant ended' % session.keys[i][0])
            print('reread %d grants: unchanged' % (len(tokens) - 1), flush=True)
            if a.release_first and tag != 0:
                print('released 0 grants/%d %s' % session.release(0), flush=True)
            if a.probe_ended:
                _, status = read(cmid, buf, session.keys[tag], want_ok=False)
                print('probe %d grants/%d: %s' % (tag, gid, status or 'read succeeded'), flush=True)
                if status is None:
                    die(4, 'grants/%d ended, yet its key still reads' % gid)
                return
        cmid.disconnect()  # rdmad then ends every grant of the session (DISCONNECTED) and releases it
    except PyverbsError as err:
        die(1, str(err))
    finally:
        for mr in (session.recvs + [session.send] if session else []) + ([buf] if buf else []):
            mr.close()  # before the id: destroying the id may free the PD they are in
        for obj in (cmid, ch):
            obj is None or obj.close()


main()
