#!/usr/bin/python3
"""The control plane's side of the two-guest session test (tests/conformance/run-two-host.sh), with the
installed Python SDK:
    session_grants.py issue TARGET MR COUNT EACH TOKENS_FILE NAMES_FILE
issues COUNT grants on MR, grant i over [i * EACH, (i + 1) * EACH), in batches of IssueGrants, and writes
their tokens (32 raw bytes each, in order) to TOKENS_FILE and their names (one per line) to NAMES_FILE:
what docs/examples/read_session.py reads over one connection.
    session_grants.py revoke TARGET GRANT
revokes one; it returns once the key is dead at rdmad's NIC.
    session_grants.py connections TARGET PD
prints how many data-plane connections rdmad holds on PD (ListCmIds).
Exit status 0 when the step did what it should; 1 otherwise, with the error on stderr.
"""

import sys

import rdmad

BATCH = 500  # well under rdmad's IssueGrants limit (1024)


def issue(target, mr, count, each, tokens_file, names_file):
    c = rdmad.connect(target)
    principal = c.who_am_i().principal
    tokens, names = [], []
    for start in range(0, count, BATCH):
        batch = [{"mr": mr, "offset": i * each, "length": each, "ttl_ms": 600000, "principal": principal}
                 for i in range(start, min(count, start + BATCH))]
        for g in c.issue_grants(grants=batch).grants:
            tokens.append(g.token)
            names.append(g.grant.name)
    with open(tokens_file, "wb") as f:
        f.write(b"".join(tokens))
    with open(names_file, "w") as f:
        f.write("".join(n + "\n" for n in names))
    print(f"session_grants: {len(names)} grants of {each} bytes on {mr}: {names[0]} .. {names[-1]}")
    return 0


def main():
    try:
        if len(sys.argv) == 8 and sys.argv[1] == "issue":
            return issue(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7])
        if len(sys.argv) == 4 and sys.argv[1] == "revoke":
            rdmad.connect(sys.argv[2]).revoke_grant(name=sys.argv[3])
            return 0
        if len(sys.argv) == 4 and sys.argv[1] == "connections":
            ids = rdmad.connect(sys.argv[2]).list_cm_ids().cm_ids
            print(sum(1 for i in ids if i.pd == sys.argv[3] and i.data_plane))
            return 0
    except rdmad.Error as e:
        print(f"session_grants: {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 1


sys.exit(main())
