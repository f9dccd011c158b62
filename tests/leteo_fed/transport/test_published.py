"""The slim status an owner is published, and the named-owner list checked against its root."""

from __future__ import annotations

import pytest

from leteo_fed.errors import DataError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.transport.published import is_included, owner_status
from leteo_fed.transport.rounds import check_named_owners, request_to_proto

SITES = ["a", "b", "c"]


def _strings(value) -> set[str]:
    """Every string anywhere in a message (or a value of one), map keys included."""
    if isinstance(value, str):
        return {value}
    if not hasattr(value, "ListFields"):
        return set()
    out: set[str] = set()
    for fd, field_value in value.ListFields():
        if hasattr(field_value, "items"):  # a map
            for k, v in field_value.items():
                out |= {k} | _strings(v)
        elif fd.is_repeated:
            for v in field_value:
                out |= _strings(v)
        else:
            out |= _strings(field_value)
    return out


def test_an_owner_gets_no_other_owner_name_but_its_own_flag_and_the_counts() -> None:
    full = pb.RoundStatus(
        round_id="pca-1",
        protocol="pca",
        state="COMPLETED",
        invited=SITES,
        submitted=["a", "b"],
        missing=["c"],
    )
    full.result.kmeans_job.owners.extend(["a", "b"])
    full.result.kmeans_job.invited.extend(SITES)
    it = full.result.kmeans_job.iterations.add()
    it.contributors.extend(["a", "b"])
    it.declined["c"] = "policy.min_rows"
    it.missing.append("c")
    full.result.kmeans_job.centers.add().values.extend([1.0, 2.0])
    for site in SITES:
        slim = owner_status(full, site)
        assert not _strings(slim) & set(SITES), _strings(slim)
        assert (slim.published, slim.n_invited, slim.n_submitted) == (True, 3, 2)
        assert is_included(slim, site) == (site != "c")
        assert list(slim.result.kmeans_job.centers[0].values) == [1.0, 2.0]
    assert is_included(pb.RoundStatus(state="FAILED"), "c")  # nothing summed: as before


def test_the_named_owners_beside_a_request_must_be_the_set_it_signs() -> None:
    request = request_to_proto("moments", MomentsRequest(features=("x",)), owners=["c", "a", "b"])
    assert request.n_owners == 3 and len(request.owners_root) == 32
    assert check_named_owners(request, ["b", "a", "c", "a"]) == SITES
    for wrong in ([], ["a", "b"], [*SITES, "d"], ["a", "b", "x"]):
        with pytest.raises(DataError, match="not the set its signature names"):
            check_named_owners(request, wrong)
    anyone = request_to_proto("moments", MomentsRequest(features=("x",)))
    assert check_named_owners(anyone, []) == []
    with pytest.raises(DataError, match="names no owners"):
        check_named_owners(anyone, ["a"])
