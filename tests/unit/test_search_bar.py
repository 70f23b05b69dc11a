"""search_efficiency's bar: each ratio read where it applies, the family parts as the median of
their members, a censored search never counted as having reached."""

from __future__ import annotations

from benchmarks import _search_bar


def runs(model: list, floor: list, tpe: list) -> dict:
    return {
        "model": [(1, h) if h is not None else None for h in model],
        "opening+clairvoyant": [(1, h) for h in floor],
        "tpe": [(1, h) for h in tpe],
    }


def test_a_named_landscape_reads_each_bar_where_its_arms_ran():
    single = _search_bar.landscape_ratios("box single", runs([3, 3, 3], [2, 2, 2], [9, 9, 9]))
    assert single["model / opening+clairvoyant"][0] == 1.5
    assert single["model / tpe"][0] == 3 / 9
    assert "model+priors / model" not in single  # the arm did not run
    multi = _search_bar.landscape_ratios("box multi", runs([3, 3, 3], [2, 2, 2], [9, 9, 9]))
    assert "model / tpe" not in multi  # the TPE bar is single-stream only


def test_a_family_part_reads_the_median_of_its_members_and_its_reach():
    members = [
        runs([h, h, h], [2, 2, 2], [8, 8, 8]) for h in (2.0, 2.2, 3.0)
    ]  # ratios 1.0, 1.1, 1.5 to the floor
    members.append(runs([None, None, 2.0], [2, 2, 2], [8, 8, 8]))  # censored on most seeds
    lands = [
        {
            "landscape": f"m{i} single",
            "bar": _search_bar.landscape_ratios(f"m{i} single", r),
            "arms": [
                {"arm": "model", "reached": sum(x is not None for x in r["model"]), "seeds": 3}
            ],
        }
        for i, r in enumerate(members)
    ]
    summary = {
        "arm_vs_best_other": {"model": {"worst_decile": 1.2}, "random": {"worst_decile": 1.5}}
    }
    cells = _search_bar.rows({"family-memory": {"landscapes": lands, "summary": summary}})
    by = {(c["where"], c["bar"]): c for c in cells}
    floor = by[("family-memory: median of 4", "model / opening+clairvoyant")]
    assert floor["value"].startswith("1.30 ")  # the median of 1.0, 1.1, 1.5 and never
    assert not floor["meets"]
    assert by[("family-memory: worst decile", "model vs random (x best other)")]["meets"]
    reach = by[("family-memory: every search", "model reaches 2% within the budget")]
    assert reach["value"] == "10/12" and not reach["meets"]


def test_a_bar_whose_floor_is_above_its_limit_is_blocked_for_every_proposer():
    both = {
        "model": [(1, 2.0)] * 3,
        "model+priors": [(1, 3.0)] * 3,
        "priors+clairvoyant": [(1, 2.8)] * 3,  # the priors alone cost 1.4x the model's search
    }
    ratios = _search_bar.landscape_ratios("box multi", both)
    assert ratios["model+priors / model"][0] == 1.5
    assert ratios["priors+clairvoyant / model"][0] == 1.4
    lands = [{"landscape": "box multi", "bar": ratios}]
    cells = {c["bar"]: c for c in _search_bar.rows({"profiles": {"landscapes": lands}})}
    assert not cells["model+priors / model"]["meets"]
    floor = cells["priors+clairvoyant / model (floor of model+priors)"]
    assert floor["status"] == "blocked"
    cheap = {**both, "priors+clairvoyant": [(1, 1.9)] * 3}
    lands = [{"landscape": "box multi", "bar": _search_bar.landscape_ratios("box multi", cheap)}]
    cells = {c["bar"]: c for c in _search_bar.rows({"profiles": {"landscapes": lands}})}
    assert cells["priors+clairvoyant / model (floor of model+priors)"]["status"] == "reachable"


def test_the_tpe_bar_reads_the_models_own_floor_beside_it():
    # the model's opening and the answer cost 2 where TPE spends 3: no search that opens as the
    # model does can be at 0.5x TPE there, however well it searches after the opening
    ratios = _search_bar.landscape_ratios("box single", runs([2.5] * 3, [2.0] * 3, [3.0] * 3))
    assert ratios["opening+clairvoyant / tpe"][0] == 2 / 3
    lands = [{"landscape": "box single", "bar": ratios}]
    cells = {c["bar"]: c for c in _search_bar.rows({"profiles": {"landscapes": lands}})}
    assert cells["opening+clairvoyant / tpe (floor of model)"]["status"] == "blocked"
    cheap = _search_bar.landscape_ratios("box single", runs([2.5] * 3, [2.0] * 3, [9.0] * 3))
    lands = [{"landscape": "box single", "bar": cheap}]
    cells = {c["bar"]: c for c in _search_bar.rows({"profiles": {"landscapes": lands}})}
    assert cells["opening+clairvoyant / tpe (floor of model)"]["status"] == "reachable"


def land(name: str, model: float, floor: float, screen: float | None) -> dict:
    arms = [
        {"arm": "model", "gpu_hours": model},
        {"arm": "opening+clairvoyant", "gpu_hours": floor},
    ]
    out = {"landscape": name, "arms": arms}
    return out if screen is None else {**out, "screen_gpu_hours": screen}


def test_the_room_the_floor_bar_leaves_is_counted_in_screens():
    # a floor of 2.0 GPU-h and a screen of 0.4: 1.25x leaves 0.5 GPU-h, 1.25 screens; the model
    # spends 3.2, 3 screens' worth beyond its floor
    named = {"profiles": {"landscapes": [land("box single", 3.2, 2.0, 0.4)]}}
    (row,) = _search_bar.room_rows(named)
    assert row["where"] == "box single"
    assert row["room"] == 1.25 and abs(row["spent"] - 3.0) < 1e-9
    # a family part: the median member of each column; a member not searched with the
    # reference arms (no screen price) is left out, a censored model search spends "never"
    members = [
        land("m0 single", 2.0, 2.0, 0.5),
        land("m1 single", 3.0, 2.0, 0.5),
        land("m2 single", float("inf"), 2.0, 0.5),
        land("m3 single", 9.0, 2.0, None),
    ]
    (row,) = _search_bar.room_rows({"family": {"landscapes": members}})
    assert row["where"] == "family: median of 3"
    assert row["room"] == 1.0 and row["spent"] == 2.0
    table = _search_bar.room_table("t", [row, {**row, "spent": float("inf")}])
    assert table.row_count == 2
    old = {"profiles": {"landscapes": [land("old", 3, 2, None)]}}  # a run without screen prices
    assert _search_bar.room_rows(old) == []
    assert _search_bar.report_room_table({"seeds": 2, "sets": old}) is None
    assert _search_bar.report_room_table({"seeds": 2, "sets": named}) is not None
