"""Unit tests of apiab_orders.py: the rows it reads and the ratio it derives from each order."""

import random
import unittest

from apiab_orders import median_interval, parse, summarise, verdict

# apiab's output with four libraries (the ratio rows, then the split, which has no ratios).
RUN = """apiab: 400 interleaved cycles per library, 65536 bytes, 0 MiB evicted before each call; A a, B b
call        A median   B median     A mean     B mean       B/A      B/B'  BB'/AA'
pin             6304       6500       6690       6464     1.026     1.002     1.024
map          2940810    2952216    2890338    2886899     1.003     1.000     0.999
get_info        1950       1804       2040       1955     0.925     1.001     0.912
unmap        2014739    2024109    2058951    2073681     1.004     1.007     1.004
unpin           4117       4150       4564       4794     1.008     1.012     1.021
split: ns before the ioctl, in it and after it (medians)
call      lib     before      ioctl      after
get_info  A          233       1635         75
"""


class ApiabOrders(unittest.TestCase):
    def test_parse_reads_each_call_and_skips_the_split(self):
        rows = parse(RUN)
        self.assertEqual(sorted(rows), ["get_info", "map", "pin", "unmap", "unpin"])
        self.assertEqual(rows["get_info"], (0.925, 1.001))

    def test_the_ratio_is_inverted_when_the_other_library_came_first(self):
        rows = parse(RUN)
        # Ours first: B/A is the other's time / ours as printed; other first, its inverse.
        s = summarise([(True, rows), (False, rows)])
        c = s["get_info"]
        self.assertAlmostEqual(c.low, 0.925)
        self.assertAlmostEqual(c.high, 1 / 0.925)
        self.assertAlmostEqual(c.median, (0.925 + 1 / 0.925) / 2)
        self.assertEqual((c.aa_low, c.aa_high), (1.001, 1.001))
        # One run each way: this library faster in the second only; two runs give no interval.
        self.assertEqual((c.faster, c.runs, c.interval), (1, 2, None))

    def test_a_call_missing_from_every_run_is_left_out(self):
        s = summarise([(True, {"pin": (1.1, 1.0)})])
        self.assertEqual(list(s), ["pin"])
        self.assertAlmostEqual(s["pin"].median, 1.1)


class MedianInterval(unittest.TestCase):
    def test_the_order_statistics_it_takes(self):
        # Five runs cannot hold the median with 95 %: the widest pair misses it with 1/16.
        self.assertIsNone(median_interval([1.0, 2.0, 3.0, 4.0, 5.0]))
        # Six: the extremes (1 - 2/64 = 96.9 %); twelve: the 3rd and the 10th (96.1 %).
        self.assertEqual(median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]), (1.0, 6.0))
        self.assertEqual(median_interval([float(x) for x in range(12, 0, -1)]), (3.0, 10.0))

    def test_it_holds_the_median_at_least_as_often_as_it_claims(self):
        # Ratios drawn around a true median of 1.0: over many samples of ten runs the interval
        # misses it in at most 5 % of them (2 * P(X <= 1) = 2.1 % for n = 10).
        rng = random.Random(7)
        misses = 0
        for _ in range(4000):
            low, high = median_interval([rng.lognormvariate(0.0, 0.03) for _ in range(10)])
            misses += not low <= 1.0 <= high
        self.assertLess(misses / 4000, 0.05)
        self.assertGreater(misses / 4000, 0.005)

    def test_the_verdicts(self):
        self.assertEqual(verdict(None), "too few runs")
        self.assertEqual(verdict((1.002, 1.030)), "ahead")
        self.assertEqual(verdict((0.960, 0.998)), "behind")
        self.assertEqual(verdict((0.990, 1.010)), "level")
        self.assertEqual(verdict((1.0, 1.010)), "level")

    def test_summarise_counts_the_runs_this_library_won(self):
        runs = [(True, {"unpin": (r, 1.0)}) for r in (0.99, 1.01, 1.02, 0.98, 1.03, 1.04)]
        c = summarise(runs)["unpin"]
        self.assertEqual((c.faster, c.runs), (4, 6))
        self.assertEqual(c.interval, (0.98, 1.04))
        self.assertEqual(verdict(c.interval), "level")


if __name__ == "__main__":
    unittest.main()
