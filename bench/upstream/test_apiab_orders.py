"""Unit tests of apiab_orders.py: the rows it reads and the ratio it derives from each order."""

import unittest

from apiab_orders import parse, summarise

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
        med, lo, hi, aa_lo, aa_hi = s["get_info"]
        self.assertAlmostEqual(lo, 0.925)
        self.assertAlmostEqual(hi, 1 / 0.925)
        self.assertAlmostEqual(med, (0.925 + 1 / 0.925) / 2)
        self.assertEqual((aa_lo, aa_hi), (1.001, 1.001))

    def test_a_call_missing_from_every_run_is_left_out(self):
        s = summarise([(True, {"pin": (1.1, 1.0)})])
        self.assertEqual(list(s), ["pin"])
        self.assertAlmostEqual(s["pin"][0], 1.1)


if __name__ == "__main__":
    unittest.main()
