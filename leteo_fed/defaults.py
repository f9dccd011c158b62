"""Defaults and limits shared by the services, the client and the CLI, defined once.

Why one module: a deadline or a cap that differs between the CLI's help text, the client and the
aggregator's validation is a bug waiting to happen. Everything here is public and documented.
"""

from __future__ import annotations

# ---------------------------------------------------------------- rounds
DEFAULT_DEADLINE_SECONDS = 120.0  # a round (or one k-means iteration) closes after this
MAX_DEADLINE_SECONDS = 24 * 3600.0
MIN_QUORUM = 2  # one encrypted share alone would reveal that owner's statistics
# the quorum when the analyst names none: the owners' default policy (min_other_owners = 2)
# hides each site among at least two others; fewer invited owners: all of them
DEFAULT_QUORUM = 3
MIN_QUORUM_LDP = 1  # every LDP report is private on its own
DEFAULT_MIN_ROWS = 10  # owners' policy.min_rows: a site takes part only with this many rows
DEFAULT_DP_DELTA = 1e-6
MAX_DP_DELTA = 1e-2
MAX_WAIT_SECONDS = 600.0  # GetRound blocks at most this long
# columns one request may name: a moments share holds d (d + 1) / 2 + ... values, and a
# projection-only round sends a d x d rotation in every spec (32 MB at 2000, the gRPC limit is 64)
MAX_FEATURES = 2000

# ---------------------------------------------------------------- RPC timeouts (seconds)
# an owner that is connected but silent this long after an invitation is counted out (its
# answers take well under a second: they are measured per round, `answer_p99_seconds`)
INVITE_TIMEOUT_SECONDS = 30.0
# an owner invited while not connected must connect within this long to take part
INVITE_RECONNECT_SECONDS = 10.0
PUBLISH_TIMEOUT_SECONDS = 5.0
CSP_OPEN_TIMEOUT_SECONDS = 10.0
CSP_TIMEOUT_SECONDS = 300.0  # decrypting or projecting one aggregate
PUBLIC_KEY_TIMEOUT_SECONDS = 10.0
REGISTER_TIMEOUT_SECONDS = 5.0
DECLINE_TIMEOUT_SECONDS = 10.0
SHARE_UPLOAD_TIMEOUT_SECONDS = 120.0
REPORT_UPLOAD_TIMEOUT_SECONDS = 300.0

# ---------------------------------------------------------------- owner agent
REGISTER_INTERVAL_SECONDS = 30.0  # inbound mode: how often an owner registers its address again
RECONNECT_MAX_SECONDS = 5.0  # outbound mode: longest wait between two connection attempts
# a stopping agent lets the shares it is computing finish (and be sent) for at most this long
STOP_GRACE_SECONDS = 5.0

# ---------------------------------------------------------------- CSP
# the CSP decrypts on a warm worker pool (one process per core) from this many ciphertexts per
# worker on: a warm pool pays off from ~64 ciphertexts on 2 cores
CSP_MIN_CIPHERTEXTS_PER_WORKER = 32

# ---------------------------------------------------------------- aggregator
# outbound owners each hold one stream (one serving thread) open: the aggregator's capacity
# ciphertexts in one round (shares x ciphertexts per share) from which the CSP sums on Spark:
# ~5 GB of 2048-bit ciphertexts; below it, every core of the CSP's host (csp/share_sum.py)
CSP_SPARK_CIPHERTEXTS = 10_000_000
MAX_CONNECTED_OWNERS = 10_000  # the aggregator's default admission limit (--max-owners)
# an owner not heard from for this long (a test site that went away) is no longer invited unless
# an analyst names it; `aggregator owners` lists it as idle, `aggregator owners remove` forgets it
IDLE_OWNER_DAYS = 7.0
# threshold keys: once t key holders' partial decryptions verified, the others get this long to
# answer too (a wrong one is then named) before they are cancelled; also how long round openings
# wait for the holders beyond the t-th
HOLDER_GRACE_SECONDS = 5.0

# ---------------------------------------------------------------- addresses and keys
DEFAULT_CSP_ADDRESS = "127.0.0.1:50051"
DEFAULT_AGGREGATOR_ADDRESS = "127.0.0.1:50052"
DEFAULT_KEYHOLDER_ADDRESS = "127.0.0.1:50061"  # holder i of a local deployment: 50060 + i
DEFAULT_KEY_BITS = 2048  # Paillier modulus of a new key; anything smaller needs an explicit opt-in
CERT_VALIDITY_DAYS = 825  # of the certificates `leteo-fed certs` issues

# ---------------------------------------------------------------- encodings (0 in a request = these)
DEFAULT_VALUE_BOUND = 1.0e6  # declared max |x| of a feature value
PCA_DEFAULT_SCALE_BITS = 32  # fixed-point fraction bits of moment rounds (PCA, DCA, LDA, MDR)
KMEANS_DEFAULT_SCALE_BITS = 48  # k-means shares have no x x^T term: room for more fraction bits
DP_DEFAULT_SCALE_BITS = 16  # DP rounds: coarser fixed point, the noise dominates anyway
KMEANS_DP_DEFAULT_SCALE_BITS = DP_DEFAULT_SCALE_BITS
KMEANS_DEFAULT_ITERATIONS = 10  # a k-means job's maximum number of Lloyd iterations

# ---------------------------------------------------------------- LDP collections
SPARK_REPORT_THRESHOLD = 5_000_000  # rounds expecting more reports are estimated with Spark

# ---------------------------------------------------------------- local demos
DEMO_OWNERS = 3
# a demo starts one process per owner (~130 MiB each): beyond this, `leteo-fed simulate`
DEMO_MAX_OWNERS = 200
DEMO_SEED = 7  # seeds the demos' row split (and k-means initial centers): reruns are identical
# owners: this long after a charged round's deadline + CSP timeout with no result, ask the CSP
# to close the round (and withdraw the charge if it never decrypted it)
WITHDRAW_GRACE_SECONDS = 60.0
