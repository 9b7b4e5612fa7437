"""Unit tests of compare.py's verdict on a row (run by make test-bench-upstream)."""

import unittest

import compare


def row(median, aa_min=None, ratio_max=None):
    r = {"tool": "copylat", "metric": "m", "size": 8, "ratio_median": median,
         "ratio_max": median if ratio_max is None else ratio_max}
    if aa_min is not None:
        r["aa_min"], r["aa_max"] = aa_min, 1.2
    return r


class Verdict(unittest.TestCase):
    def test_at_or_above_one_is_ahead_with_or_without_control(self):
        self.assertEqual(compare.verdict(row(1.0, 0.95)), "ahead")
        self.assertEqual(compare.verdict(row(1.3)), "ahead")

    def test_below_one_is_judged_against_the_lowest_aa_ratio(self):
        self.assertEqual(compare.verdict(row(0.96, 0.95)), "within A/A")
        self.assertEqual(compare.verdict(row(0.95, 0.95)), "within A/A")
        self.assertEqual(compare.verdict(row(0.94, 0.95)), "BELOW A/A")

    def test_below_one_without_control_has_no_verdict(self):
        self.assertIsNone(compare.verdict(row(0.5)))

    def test_behind_in_every_round_needs_every_ratio_below_every_aa_ratio(self):
        self.assertTrue(compare.below_every_round(row(0.90, 0.95, ratio_max=0.94)))
        self.assertFalse(compare.below_every_round(row(0.90, 0.95, ratio_max=0.95)))
        self.assertFalse(compare.below_every_round(row(0.90, 0.95, ratio_max=1.01)))
        self.assertFalse(compare.below_every_round(row(0.5)))

    def test_chance_of_every_round_for_identical_code(self):
        self.assertAlmostEqual(compare.chance_every_round(5), 1 / 252)
        self.assertAlmostEqual(compare.chance_every_round(1), 1 / 2)

    def test_tally_counts_each_verdict(self):
        rows = [row(1.1, 0.9), row(0.95, 0.9), row(0.8, 0.9), row(0.85, 0.9), row(0.7)]
        self.assertEqual(compare.tally(rows), (1, 1, 2))


if __name__ == "__main__":
    unittest.main()
