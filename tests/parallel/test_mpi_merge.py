"""merge_rows, which sums the lookup rows that the ranks gathered (dyn.parallel._sync),
gives np.add.at's bits: the same sums, added in the same (rank) order."""

import numpy as np
import pytest

from dyn.parallel._sync import merge_rows


@pytest.mark.parametrize("ranks", [1, 2, 4, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_merge_rows_equals_add_at(ranks, dtype):
    rng = np.random.RandomState(ranks)
    # each rank sends distinct indices (its touched rows), some shared with other ranks, some sending none
    idx = np.concatenate([rng.choice(30, size=rng.randint(0, 20), replace=False) for _ in range(ranks)])
    rows = rng.randn(len(idx), 5).astype(dtype)
    uniq, merged = merge_rows(idx.astype(np.int64), rows)
    want = np.zeros((len(np.unique(idx)), 5), dtype)
    np.add.at(want, np.unique(idx, return_inverse=True)[1], rows)
    np.testing.assert_array_equal(uniq, np.unique(idx))
    assert merged.dtype == dtype
    np.testing.assert_array_equal(merged, want)


def test_merge_rows_of_nothing():
    uniq, merged = merge_rows(np.zeros(0, np.int64), np.zeros((0, 3), np.float32))
    assert uniq.shape == (0,) and merged.shape == (0, 3) and merged.dtype == np.float32
