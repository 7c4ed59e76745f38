"""RangeSet: the byte ranges on disk that resume state is built from."""

from prefetch.engine.ranges import RangeSet


def test_add_merges_touching_and_overlapping_ranges():
    r = RangeSet()
    r.add(10, 20)
    r.add(0, 5)
    r.add(5, 10)  # touches both neighbours
    r.add(30, 40)
    r.add(35, 45)  # overlaps
    assert r.as_list() == [[0, 20], [30, 45]]
    assert r.total() == 35
    assert r.prefix_end() == 20


def test_missing_and_covers():
    r = RangeSet([[0, 10], [20, 30]])
    assert r.missing(40) == [(10, 20), (30, 40)]
    assert not r.covers(40)
    r.add(10, 20)
    r.add(30, 40)
    assert r.covers(40) and r.missing(40) == []


def test_remove_cuts_holes_and_drops_covered_ranges():
    r = RangeSet([[0, 10], [20, 30], [40, 50]])
    r.remove(5, 45)
    assert r.as_list() == [[0, 5], [45, 50]]
    r.remove(0, 5)
    assert r.prefix_end() == 0 and r.as_list() == [[45, 50]]
    r.remove(46, 47)
    assert r.as_list() == [[45, 46], [47, 50]]
