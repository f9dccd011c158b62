"""Federated k-means math without a network: assignment, per-cluster statistics, the exact center
update, empty clusters, encoding bounds, the job plan's refusals, and the DP noise against its
budget split.

Statistical checks use fixed seeds; each tolerance is a stated multiple of the standard error
that the theory gives for the number of draws (named at the assertion)."""

from __future__ import annotations

import dataclasses
import math

import kmeans_reference as ref
import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris

from leteo_fed.encoding.packing import pack, remove_masks, slot_totals, unpack
from leteo_fed.errors import DataError, EncodingError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.mechanisms import Gaussian, Sensitivity, Skellam
from leteo_fed.privacy.verify import verify_release
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import kmeans as km
from leteo_fed.protocols import kmeans_centers, kmeans_round
from leteo_fed.transport.messages import encoding_from_proto, encoding_to_proto
from leteo_fed.transport.rounds import common_from_proto, request_from_proto

IRIS_LOW = [4.3, 2.0, 1.0, 0.1]  # published ranges of the iris features (sklearn's DESCR)
IRIS_HIGH = [7.9, 4.4, 6.9, 2.5]


@pytest.fixture(scope="module")
def iris() -> np.ndarray:
    return load_iris().data


def _federated(parts: list[np.ndarray], init: np.ndarray, iterations: int, enc=None):
    """The protocol without transport: owners encode, the aggregator adds integer totals (what
    the Paillier sum and unblinding give it) and updates the centers."""
    enc = enc or km.encoding()
    k, d = init.shape
    centers, history = init.copy(), []
    for _ in range(iterations):
        totals = [0] * km.n_values(k, d)
        for x in parts:
            sums, counts = km.cluster_stats(x, km.assign(x, centers), k)
            values = km.encode_cluster_stats(sums, counts, enc)
            totals = [a + b for a, b in zip(totals, values, strict=True)]
        upd = km.update_centers(km.decode_totals(totals, k, d, enc), centers)
        history.append(upd)
        centers = upd.centers
        if upd.shift <= 0:
            break
    return centers, history


# ------------------------------------------------------------------ assignment and statistics


def test_assignment_is_nearest_center_with_ties_to_the_lowest_index():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 3))
    c = rng.normal(size=(4, 3))
    brute = np.array([np.argmin([np.sum((r - cj) ** 2) for cj in c]) for r in x])
    np.testing.assert_array_equal(km.assign(x, c), brute)
    # a row exactly between centers 1 and 2 goes to 1; duplicated centers: the first wins
    tie = np.array([[0.0, 0.0]])
    assert km.assign(tie, np.array([[5.0, 5.0], [-1.0, 0.0], [1.0, 0.0]]))[0] == 1
    assert km.assign(tie, np.array([[2.0, 0.0], [2.0, 0.0]]))[0] == 0


def test_cluster_stats_zero_fill_and_other_clusters_are_bit_identical():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 4)) * 1e3
    labels = rng.integers(0, 3, size=300)  # cluster 3 of 4 is empty
    sums, counts = km.cluster_stats(x, labels, 4)
    assert counts.tolist() == [int(np.sum(labels == j)) for j in range(4)]
    assert counts[3] == 0 and np.all(sums[3] == 0)
    for j in range(3):
        np.testing.assert_allclose(sums[j], x[labels == j].sum(axis=0), rtol=1e-13)
    # removing one row changes its own cluster only; the others stay bit for bit (the DP
    # sensitivity argument relies on it)
    i = 17
    sums2, counts2 = km.cluster_stats(np.delete(x, i, 0), np.delete(labels, i), 4)
    other = [j for j in range(4) if j != labels[i]]
    assert np.array_equal(sums[other], sums2[other])
    assert counts2[labels[i]] == counts[labels[i]] - 1


# ------------------------------------------------------------------ update and reference


def test_federated_iterations_equal_centralized_lloyd(iris):
    init = kmeans_centers.random_centers(3, IRIS_LOW, IRIS_HIGH, 4, seed=7)
    parts = np.array_split(iris[np.random.default_rng(3).permutation(len(iris))], 4)
    fed, history = _federated(parts, init, 30)
    ref = km.lloyd(iris, init, 30)
    assert ref.converged and len(history) == ref.iterations
    for upd, c in zip(history, ref.history, strict=True):
        # 2^-48 fixed point per owner sum; float64 sums: both far below 1e-12
        np.testing.assert_allclose(upd.centers, c, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fed, ref.centers, rtol=0, atol=1e-12)
    assert [u.counts for u in history] == ref.counts


def test_reference_lloyd_equals_scikit_learn(iris):
    """The centralized reference is itself checked against an independent implementation."""
    init = kmeans_centers.random_centers(3, IRIS_LOW, IRIS_HIGH, 4, seed=11)
    ref = km.lloyd(iris, init, 100)
    assert ref.converged and not any(0 in c for c in ref.counts)  # sklearn relocates empties
    sk = KMeans(3, init=init, n_init=1, max_iter=100, tol=0, algorithm="lloyd").fit(iris)
    np.testing.assert_allclose(ref.centers, sk.cluster_centers_, rtol=0, atol=1e-9)
    # sklearn counts the step that finds the assignment unchanged; so do we (its shift is 0)
    assert sk.n_iter_ == ref.iterations
    assert km.inertia(iris, ref.centers) == pytest.approx(sk.inertia_, rel=1e-9)


def test_empty_cluster_keeps_its_center(iris):
    init = np.array([[5.0, 3.4, 1.5, 0.2], [6.5, 3.0, 5.5, 2.0], [50.0, 50.0, 50.0, 50.0]])
    fed, history = _federated([iris[:70], iris[70:]], init, 5)
    assert all(u.empty == [2] and u.counts[2] == 0 for u in history)
    np.testing.assert_array_equal(fed[2], init[2])
    ref = km.lloyd(iris, init, 5)
    np.testing.assert_allclose(fed, ref.centers, atol=1e-12)
    np.testing.assert_array_equal(ref.centers[2], init[2])


def test_update_is_an_exact_rational_and_shift_is_the_largest_l2_move():
    enc = km.encoding(scale_bits=8)
    totals = km.ClusterTotals(sums=[[3 << 8, 1], [0, 0]], counts=[3, 0], scale_bits=8)
    prev = np.array([[0.0, 0.0], [7.0, -7.0]])
    upd = km.update_centers(totals, prev)
    assert upd.centers[0].tolist() == [1.0, 1 / (3 << 8)]
    assert upd.centers[1].tolist() == [7.0, -7.0] and upd.empty == [1]
    assert upd.shift == pytest.approx(math.hypot(1.0, 1 / 768), rel=1e-15)
    # decode: counts at a scale are rounded to whole rows; a negative count is corruption
    assert km.decode_totals([5, (2 << 4) + 7], 1, 1, km.encoding(count_scale_bits=4)).counts == [2]
    with pytest.raises(ProtocolError, match="negative count"):
        km.decode_totals([0, 0, 0, -1], 2, 1, enc)
    assert km.decode_totals([0, 0, 0, -1], 2, 1, enc, noisy=True).counts == [0, 0]


def test_noisy_update_keeps_thin_clusters_and_projects_to_the_clip_ball():
    totals = km.ClusterTotals(sums=[[1000, 0], [5, 5]], counts=[1, 0], scale_bits=0)
    prev = np.array([[0.0, 0.0], [0.5, 0.5]])
    upd = km.update_centers(totals, prev, clip_norm=2.0)
    np.testing.assert_allclose(upd.centers[0], [2.0, 0.0])  # 1000 projected onto radius 2
    np.testing.assert_array_equal(upd.centers[1], prev[1])  # noisy count 0: kept


# ------------------------------------------------------------------ encoding bounds


def test_per_owner_bound_is_value_bound_times_rows():
    enc = km.encoding(scale_bits=10, value_bound=2.5, max_rows_per_owner=1000)
    assert enc.per_owner_bound() == 1000 * 3 << 10  # ceil(B) * rows at scale 2^f
    dp = km.encoding(scale_bits=4, value_bound=1, max_rows_per_owner=8, count_scale_bits=9)
    assert dp.per_owner_bound() == 8 << 9  # counts dominate at their larger scale
    noisy = km.encoding(scale_bits=4, value_bound=1, max_rows_per_owner=8, noise_bound=77)
    assert noisy.per_owner_bound() == (8 << 4) + 77


def test_encoding_refuses_values_and_row_counts_beyond_the_bound():
    enc = km.encoding(scale_bits=4, value_bound=1.0, max_rows_per_owner=10)
    ok = km.encode_cluster_stats(np.array([[10.0, -10.0]]), np.array([10]), enc)
    assert ok == [160, -160, 10]
    with pytest.raises(EncodingError, match="exceeds the declared bound"):
        km.encode_cluster_stats(np.array([[10.5, 0.0]]), np.array([10]), enc)
    with pytest.raises(EncodingError, match="max_rows_per_owner"):
        km.encode_cluster_stats(np.array([[1.0, 0.0]]), np.array([11]), enc)
    with pytest.raises(DataError, match="non-finite"):
        km.encode_cluster_stats(np.array([[np.nan, 0.0]]), np.array([1]), enc)


def test_worst_case_aggregate_fits_its_slots_and_unmasks():
    """max_owners shares at the bound, each with the largest mask: summed as the homomorphic sum
    would sum the plaintexts, no slot carries, nothing reaches 2^(key bits - 1), all unmasks."""
    enc = km.encoding(scale_bits=8, value_bound=3.0, max_rows_per_owner=50, max_owners=7)
    layout = enc.layout(2048)
    b = enc.per_owner_bound()
    share = [b, -b, 50, b, -b, 0] * 3
    total = [sum(p) for p in zip(*([pack(share, layout)] * 7), strict=True)]
    mask_sums = [7 * ((1 << layout.mask_bits) - 1)] * len(total)
    blinded = [t + m for t, m in zip(total, mask_sums, strict=True)]
    assert all(v < 2 ** (2048 - 1) for v in blinded)
    slots = unpack(remove_masks(blinded, mask_sums, layout), len(share), layout)
    assert slot_totals(slots, 7, layout) == [7 * v for v in share]


def test_encoding_wire_form_round_trips_and_refuses_a_forged_layout():
    enc = km.encoding(scale_bits=16, value_bound=3.0, count_scale_bits=17, noise_bound=99)
    layout = enc.layout(2048)
    msg = encoding_to_proto(enc, layout)
    assert encoding_from_proto(msg, 2048) == (enc, layout)
    msg.slot_bits -= 1
    with pytest.raises(ProtocolError, match="does not follow"):
        encoding_from_proto(msg, 2048)
    msg = encoding_to_proto(enc, layout)
    msg.rotation_dimension = 3
    rotated, _ = encoding_from_proto(msg, 2048)
    spec = kmeans_round.KmeansIteration("job", 1, 1, 1, (0.0,), ("a",))
    with pytest.raises(ProtocolError, match="rotated"):
        kmeans_round.PROTOCOL.check(spec, rotated, None, _LocalFile())
    msg = encoding_to_proto(enc, layout)
    msg.slot_offset = (layout.offset - 1).to_bytes(64, "big")  # a consistent but forged bound
    forged, _ = encoding_from_proto(msg, 2048)
    with pytest.raises(ProtocolError, match="slot offset does not follow"):
        kmeans_round.PROTOCOL.check(spec, forged, None, _LocalFile())


class _LocalFile:
    """The site facts the owner-side check reads (a local file, numpy engine)."""

    is_local = True
    uses_spark = False


# ------------------------------------------------------------------ centers: validation, init


@pytest.mark.parametrize(
    ("values", "k", "match"),
    [
        ([1.0] * 6, 0, "k must be"),
        ([1.0] * 5, 2, "5 values; k x d = 2 x 3 = 6"),
        ([[1.0, 2.0], [3.0, 4.0]], 2, "shape 2x2; 2 x 3"),
        ([1.0, 2.0, float("nan"), 0.0, 0.0, 0.0], 2, "center 0 has a NaN"),
        ([0.0, 0.0, 0.0, 0.0, float("inf"), 0.0], 2, "center 1 has a NaN or infinite"),
        ([0.0, 0.0, 0.0, 0.0, 11.0, 0.0], 2, "above the job's value bound 10"),
    ],
)
def test_bad_centers_are_refused_by_name(values, k, match):
    with pytest.raises(DataError, match=match):
        kmeans_centers.validate_centers(values, k, 3, 10.0, field="kmeans.centers")


def test_centers_from_documents_and_seeded_uniform_init(tmp_path):
    assert kmeans_centers.centers_from_document({"centers": [[1, 2], [3, 4.5]]}).tolist() == [
        [1, 2],
        [3, 4.5],
    ]
    for bad in ({}, {"centers": []}, {"centers": [[1, 2], [3]]}, {"centers": [[1, "x"]]}):
        with pytest.raises(DataError):
            kmeans_centers.centers_from_document(bad)
    path = tmp_path / "init.json"
    path.write_text('{"centers": [[1, NaN]]}')
    with pytest.raises(DataError, match="NaN"):
        kmeans_centers.load_centers(path)
    path.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        kmeans_centers.load_centers(path)
    a = kmeans_centers.random_centers(5, IRIS_LOW, IRIS_HIGH, 4, seed=3)
    assert np.array_equal(a, kmeans_centers.random_centers(5, IRIS_LOW, IRIS_HIGH, 4, seed=3))
    assert np.all((a >= IRIS_LOW) & (a <= IRIS_HIGH)) and a.shape == (5, 4)
    with pytest.raises(DataError):
        kmeans_centers.random_centers(2, 1.0, 1.0, 3, seed=0)


# ------------------------------------------------------------------ the job plan (aggregator)


def _request(**kw) -> pb.RoundRequest:
    names = ("k", "centers", "iterations", "tolerance", "features")
    km_args = {k: kw.pop(k) for k in names if k in kw}
    return pb.RoundRequest(kmeans=pb.KmeansRequest(**km_args), **kw)


def plan_kmeans(msg: pb.RoundRequest, n_invited: int):
    """What the aggregator does with a request: decode the payload, plan with the protocol."""
    protocol, request = request_from_proto(msg)
    assert protocol is kmeans_round.PROTOCOL
    return protocol.plan(request, common_from_proto(msg, n_invited))


def test_plan_refuses_bad_jobs_naming_the_field():
    good = {"features": ["a", "b"], "k": 2, "centers": [0, 0, 1, 1]}
    plan = plan_kmeans(_request(**good), 3)
    assert plan.iterations == km.DEFAULT_ITERATIONS and plan.dp is None
    assert plan.min_owners == 3  # the default quorum, what the owners' default policy asks
    assert plan_kmeans(_request(**good), 2).min_owners == 2  # every invited owner if fewer
    assert plan.encoding.scale_bits == km.DEFAULT_SCALE_BITS
    cases = [
        ({"k": 0}, "kmeans.k"),
        ({"centers": [0, 0, 1]}, "kmeans.centers"),
        ({"centers": [0, 0, 1, float("nan")]}, "kmeans.centers"),
        ({"centers": [0, 0, 1, 2e6]}, "kmeans.centers"),
        ({"iterations": 5000}, "kmeans.iterations"),
        ({"tolerance": -1.0}, "kmeans.tolerance"),
        ({"features": ["a", "a"]}, "features"),
        ({"min_owners": 1}, "min_owners"),
        ({"dp_epsilon": 1.0}, "row_norm_bound"),
        ({"row_norm_bound": 1.0}, "dp_epsilon"),
        ({"dp_epsilon": 1.0, "row_norm_bound": 0.5}, "kmeans.centers"),  # DP: |c| <= C
    ]
    for change, field in cases:
        with pytest.raises(DataError) as err:
            plan_kmeans(_request(**{**good, **change}), 3)
        assert err.value.field == field, (change, err.value)


def test_dp_plan_composes_the_iterations_and_leaves_room_for_the_noise():
    req = _request(
        features=["a", "b", "c"],
        k=2,
        centers=[0.1] * 6,
        iterations=4,
        dp_epsilon=2.0,
        dp_delta=1e-6,
        row_norm_bound=4.0,
        min_owners=3,
    )
    plan = plan_kmeans(req, 3)
    assert plan.dp_total == (2.0, 1e-6)
    # the job's (epsilon, delta), met by its 4 iterations together (Renyi composition)
    assert (plan.dp.epsilon, plan.dp.delta, plan.dp.compositions) == (2.0, 1e-6, 4)
    enc = plan.encoding
    assert enc.value_bound == 4.0 and enc.count_scale_bits >= enc.scale_bits
    # what every owner checks before spending: the announced noise gives the announced epsilon
    spec = pb.DpSpec(
        epsilon=plan.dp.epsilon,
        delta=plan.dp.delta,
        row_norm_bound=4.0,
        mu=plan.dp.mu,
        quorum=3,
        mechanism="skellam",
        compositions=4,
    )

    def verify(dp, encoding) -> None:  # what the owner's check runs (verify_dp, no bounds)
        sens = ref.dp_sensitivity(dp, encoding, 3, 2)
        verify_release(dp, sens, km.n_values(2, 3), encoding.noise_bound)

    verify(spec, enc)
    with pytest.raises(ProtocolError, match="more than the announced"):
        verify(pb.DpSpec(**{**_fields(spec), "mu": plan.dp.mu / 2}), enc)
    # the same noise announced for more iterations than it was calibrated for is refused
    with pytest.raises(ProtocolError, match="over 5 rounds"):
        verify(pb.DpSpec(**{**_fields(spec), "compositions": 5}), enc)
    small = dataclasses.replace(enc, noise_bound=1)
    with pytest.raises(ProtocolError, match="no room"):
        verify(spec, small)


def _fields(msg) -> dict:
    return {f.name: getattr(msg, f.name) for f in msg.DESCRIPTOR.fields}


# ------------------------------------------------------------------ DP: sensitivity and noise


def test_sensitivity_bounds_every_add_remove_neighbour():
    """Brute force: one owner's encoded share with and without each row, rows on or inside the
    clip ball, random public centers; the integer difference never exceeds the stated L1/L2."""
    rng = np.random.default_rng(5)
    c, f, d, k = 3.0, 16, 4, 3
    cs = km.dp_count_scale_bits(c, f, d)
    enc = km.encoding(scale_bits=f, value_bound=c, count_scale_bits=cs)
    sens = km.sensitivity(c, f, d, k, cs)
    x = noise.clip_rows(rng.normal(scale=3.0, size=(200, d)), c)
    centers = rng.normal(size=(k, d))
    full = np.array(km.encode_cluster_stats(*km.cluster_stats(x, km.assign(x, centers), k), enc))
    worst_l1 = worst_l2 = 0.0
    for i in range(len(x)):
        y = np.delete(x, i, 0)
        part = np.array(
            km.encode_cluster_stats(*km.cluster_stats(y, km.assign(y, centers), k), enc)
        )
        diff = (full - part).astype(float)
        worst_l1, worst_l2 = max(worst_l1, np.abs(diff).sum()), max(worst_l2, np.linalg.norm(diff))
    assert worst_l1 <= sens.l1 and worst_l2 <= sens.l2
    assert worst_l2 > 0.9 * sens.l2  # rows on the ball's surface come close to the bound


@pytest.mark.parametrize("iterations", [1, 2, 5, 10, 20])
def test_the_iterations_together_meet_the_budget(iterations):
    eps, delta = 1.0, 1e-6
    it = ref.calibrate_iteration(eps, delta, iterations, 3.0, 16, 4, 3)
    assert (it.epsilon, it.delta, it.iterations) == (eps, delta, iterations)
    sens = Sensitivity(it.l1, it.l2)
    # T iterations composed by RDP: within budget, and tight (calibration to 1e-10)
    assert Skellam(it.mu).epsilon(sens, delta, compositions=iterations) <= eps
    assert Skellam(it.mu * (1 - 1e-6)).epsilon(sens, delta, compositions=iterations) > eps
    assert it.epsilon_after(iterations) <= eps and it.epsilon_after(0) == 0.0
    # the exact privacy curve of a Gaussian with variance 2 mu / T (T Gaussian releases of
    # variance 2 mu compose exactly to one of variance 2 mu / T) is the reference the RDP
    # bound approaches from above; the conversion may cost a little
    gauss = Gaussian(math.sqrt(2 * it.mu / iterations)).epsilon(it.l2, delta)
    assert 0.85 * eps <= gauss <= eps
    # leading order (Gaussian, zCDP): mu grows like T (not T^2 as with an even split)
    one = ref.calibrate_iteration(eps, delta, 1, 3.0, 16, 4, 3)
    assert 0.8 * iterations <= it.mu / one.mu <= 1.25 * iterations
    split = ref.calibrate_iteration(eps / iterations, delta / iterations, 1, 3.0, 16, 4, 3)
    if iterations == 20:  # the target: at least 10x less noise variance than the split
        assert split.mu / it.mu >= 10


def test_aggregate_noise_variance_matches_the_plan():
    """q owners each add Skellam(mu/q): the sum has variance 2 mu. n = 40,000 draws: the sample
    variance has relative standard error sqrt(2/n) = 0.71% (Skellam's excess kurtosis 1/(2 mu) is
    negligible); we allow 5 standard errors. The mean: 5 standard errors of sqrt(2 mu / n)."""
    it = ref.calibrate_iteration(2.0, 1e-6, 4, 3.0, 16, 4, 3)
    q, n = 3, 40_000
    rng = np.random.default_rng(123)
    total = sum(Skellam(it.mu).owner_share(q).sample(n, rng).astype(float) for _ in range(q))
    var = 2 * it.mu
    assert abs(total.mean()) < 5 * math.sqrt(var / n)
    assert abs(total.var(ddof=1) / var - 1) < 5 * math.sqrt(2 / n)


def test_center_noise_matches_the_delta_method_and_count_weighting_helps():
    """A cluster of N rows with mean m: the noisy center (S + e_S) / (N + e_N) has, to first
    order, standard deviation sqrt(s_S^2 + m_i^2 s_N^2) / N per coordinate (s_S, s_N the noise
    std of a sum and of a count, in real units). 4,000 seeded trials: the sample std has
    relative standard error 1/sqrt(2 * 4000) = 1.1%; second-order terms are (s_N / N)^2 < 0.1%;
    we allow 6%."""
    d, k, c, f = 4, 3, 8.0, 16
    it = ref.calibrate_iteration(1.0, 1e-6, 5, c, f, d, k)
    q, n_rows, trials = 3, 20_000, 4000
    mean = np.array([2.0, -1.0, 0.5, 3.0])
    enc = km.encoding(scale_bits=f, value_bound=c, count_scale_bits=it.count_scale_bits)
    exact = km.encode_cluster_stats(mean[None, :] * n_rows, np.array([n_rows]), enc)
    rng = np.random.default_rng(99)
    dp = pb.DpSpec(mu=it.mu, quorum=q)
    got = []
    for _ in range(trials):
        z = sum(Skellam(dp.mu).owner_share(q).sample(len(exact), rng) for _ in range(q))
        vals = [v + int(e) for v, e in zip(exact, z.tolist(), strict=True)]
        upd = km.update_centers(
            km.decode_totals(vals, 1, d, enc, noisy=True), np.zeros((1, d)), clip_norm=1e9
        )
        got.append(upd.centers[0])
    std = np.array(got).std(axis=0, ddof=1)
    s_sum = km.noise_std(it.mu, q, q, f)
    s_cnt = km.noise_std(it.mu, q, q, it.count_scale_bits)
    predicted = np.sqrt(s_sum**2 + mean**2 * s_cnt**2) / n_rows
    np.testing.assert_allclose(std, predicted, rtol=0.06)
    # the same budget with counts at the scale of sums (weight 1) is worse for these centers
    plain = ref.calibrate_iteration(1.0, 1e-6, 5, c, f, d, k, count_scale_bits=f)
    s_plain = km.noise_std(plain.mu, q, q, f)
    worse = np.sqrt(s_plain**2 + mean**2 * s_plain**2) / n_rows
    assert np.linalg.norm(worse) > 1.5 * np.linalg.norm(predicted)
