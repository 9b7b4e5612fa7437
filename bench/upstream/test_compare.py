"""Unit tests of compare.py's pure functions: the verdict on a row, the direction check and the
arms built from the options (run by make test-bench-upstream)."""

import math
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

    def test_ahead_of_the_other_library_is_never_behind_in_every_round(self):
        # Every round faster than the other library, but slower than its A/A run.
        self.assertFalse(compare.below_every_round(row(1.14, 1.23, ratio_max=1.22)))
        self.assertFalse(compare.below_every_round(row(0.98, 1.01, ratio_max=1.0)))
        self.assertTrue(compare.below_every_round(row(0.98, 1.01, ratio_max=0.99)))

    def test_chance_of_every_round_for_identical_code(self):
        self.assertAlmostEqual(compare.chance_every_round(5), 1 / 252)
        self.assertAlmostEqual(compare.chance_every_round(1), 1 / 2)

    def test_tally_counts_each_verdict(self):
        rows = [row(1.1, 0.9), row(0.95, 0.9), row(0.8, 0.9), row(0.85, 0.9), row(0.7)]
        self.assertEqual(compare.tally(rows), (1, 1, 2))


def drow(tool, metric, size, median, aa_median=None):
    r = {"tool": tool, "metric": metric, "size": size, "ratio_median": median}
    if aa_median is not None:
        r["aa_median"] = aa_median
    return r


class Direction(unittest.TestCase):
    def test_binomial_tail(self):
        self.assertEqual(compare.binomial_tail(0, 13, 0.5), 1.0)
        self.assertEqual(compare.binomial_tail(14, 13, 0.5), 0.0)
        self.assertAlmostEqual(compare.binomial_tail(13, 13, 0.5), 0.5 ** 13)
        self.assertAlmostEqual(compare.binomial_tail(12, 13, 0.5), 14 / 2 ** 13)
        self.assertAlmostEqual(compare.binomial_tail(1, 1, 0.5), 0.5)
        self.assertAlmostEqual(compare.binomial_tail(2, 4, 0.3), 1 - 0.7 ** 4 - 4 * 0.3 * 0.7 ** 3)
        # the whole distribution sums to one; the tail falls as k rises
        self.assertAlmostEqual(sum(math.comb(20, i) * 0.25 ** i * 0.75 ** (20 - i)
                                   for i in range(21)), compare.binomial_tail(0, 20, 0.25))
        tails = [compare.binomial_tail(k, 20, 0.5) for k in range(22)]
        self.assertEqual(tails, sorted(tails, reverse=True))
        self.assertAlmostEqual(tails[10] + tails[11], 1.0)  # symmetric about n/2

    def test_labels_drop_the_tool_and_the_unit(self):
        self.assertEqual(compare.direction_label("copylat", "gdr_copy_to_mapping"),
                         "copylat gdr_copy_to_mapping")
        self.assertEqual(compare.direction_label("copybw", "copybw write MB/s"), "copybw write")
        self.assertEqual(compare.direction_label("apiperf", "apiperf get_info us"), "apiperf get_info")
        self.assertEqual(compare.direction_label("ucx", "ucp tag_lat gpu-gpu us"),
                         "ucx ucp tag_lat gpu-gpu")

    def test_rows_group_by_tool_and_direction_in_order(self):
        rows = [drow("copylat", "gdr_copy_from_mapping", s, 1.0) for s in (1, 2, 8192)]
        rows += [drow("copylat", "gdr_copy_to_mapping", s, 1.0) for s in (1, 2)]
        rows += [drow("apiperf", "apiperf pin us", 65536, 1.0), drow("apiperf", "apiperf map us", 65536, 1.0)]
        groups = compare.direction_groups(rows)
        self.assertEqual(list(groups), [("copylat", "gdr_copy_from_mapping"),
                                        ("copylat", "gdr_copy_to_mapping"),
                                        ("apiperf", "apiperf pin us"), ("apiperf", "apiperf map us")])
        self.assertEqual([r["size"] for r in groups[("copylat", "gdr_copy_from_mapping")]], [1, 2, 8192])
        small = compare.direction_groups(rows, 4096)
        self.assertEqual(list(small), [("copylat", "gdr_copy_from_mapping"), ("copylat", "gdr_copy_to_mapping")])
        self.assertEqual([r["size"] for r in small[("copylat", "gdr_copy_from_mapping")]], [1, 2])

    def test_a_deficit_in_every_row_is_consistent(self):
        rows = [drow("copylat", "gdr_copy_to_mapping", 1 << i, 0.97, 0.99 if i % 2 else 1.0)
                for i in range(13)]
        [c] = compare.direction_check(rows)
        self.assertEqual((c["rows"], c["below"], c["aa_below"]), (13, 13, 6))
        self.assertAlmostEqual(c["chance"], 0.5 ** 13)
        self.assertEqual(c["verdict"], "CONSISTENT DEFICIT")
        self.assertEqual(c["aa_verdict"], "no consistent deficit")
        self.assertEqual(compare.direction_line(c),
                         "direction: copylat gdr_copy_to_mapping: 13 of 13 rows below 1.0 (A/A: 6 of 13); "
                         "chance for identical code 0.00012: CONSISTENT DEFICIT")

    def test_half_the_rows_below_and_ties_are_no_deficit(self):
        rows = [drow("copybw", "copybw read MB/s", s, m) for s, m in
                ((1, 0.9), (2, 1.1), (4, 1.0), (8, 1.0), (16, 0.8), (32, 1.2))]
        [c] = compare.direction_check(rows)
        self.assertEqual((c["rows"], c["below"], c["aa_below"], c["aa_verdict"]), (6, 2, None, None))
        self.assertEqual(c["verdict"], "no consistent deficit")
        self.assertAlmostEqual(c["chance"], 57 / 64)
        self.assertEqual(compare.direction_line(c),
                         "direction: copybw read: 2 of 6 rows below 1.0; chance for identical code 0.89")

    def test_the_threshold_is_strict(self):
        # 7 of 7 below: 1/128 < 0.01; 6 of 6: 1/64 is not
        self.assertEqual(compare.direction_check(
            [drow("t", "m", s, 0.9) for s in range(7)])[0]["verdict"], "CONSISTENT DEFICIT")
        self.assertEqual(compare.direction_check(
            [drow("t", "m", s, 0.9) for s in range(6)])[0]["verdict"], "no consistent deficit")

    def test_the_size_limit_adds_a_check_only_where_it_leaves_out_some_rows(self):
        rows = [drow("copylat", "gdr_copy_to_mapping", 1 << i, 0.9 if i <= 12 else 1.2, 1.0)
                for i in range(21)]
        rows += [drow("copylat", "gdr_copy_from_mapping", 1 << i, 1.0, 1.0) for i in range(10)]
        rows += [drow("apiperf", "apiperf pin us", 65536, 1.0, 1.0)]
        checks = compare.direction_checks(rows, 4096)
        self.assertEqual([(c["label"], c["max_size"], c["below"], c["rows"]) for c in checks], [
            ("copylat gdr_copy_to_mapping", None, 13, 21),
            ("copylat gdr_copy_from_mapping", None, 0, 10),
            ("apiperf pin", None, 0, 1),
            ("copylat gdr_copy_to_mapping", 4096, 13, 13)])
        self.assertEqual([c["verdict"] for c in checks],
                         ["no consistent deficit"] * 3 + ["CONSISTENT DEFICIT"])
        self.assertIn("direction: copylat gdr_copy_to_mapping, sizes up to 4096: 13 of 13 rows",
                      compare.direction_line(checks[3]))
        self.assertEqual(len(compare.direction_checks(rows)), 3)


def arms(*options):
    return compare.make_arms(compare.parse_args(["--ours", "o", "--upstream", "u", *options]))


class Arms(unittest.TestCase):
    def test_without_per_arm_options_the_arms_differ_only_by_library(self):
        a = arms("--sim", "s", "--args", "copylat=-s 4096")
        self.assertEqual([x.name for x in a], ["ours", "upstream"])
        self.assertEqual([x.libdir for x in a], ["o", "u"])
        for x in a:
            self.assertEqual((x.env, x.overrides, x.sim), ({}, {"copylat": ["-s", "4096"]}, "s"))
        self.assertEqual([x.sim for x in arms()], [None, None])

    def test_control_repeats_the_second_arm_with_all_its_settings(self):
        a = arms("--control", "--sim", "s", "--sim-arms", "upstream", "--names", "vk,emu",
                 "--upstream-env", "GDRSIM_BACKING=vulkan", "--upstream-args", "copylat=-a cuMemAlloc")
        self.assertEqual([x.name for x in a], ["vk", "emu", "emu-again"])
        self.assertEqual((a[2].libdir, a[2].env, a[2].overrides, a[2].sim),
                         (a[1].libdir, a[1].env, a[1].overrides, a[1].sim))
        self.assertEqual(a[2].env, {"GDRSIM_BACKING": "vulkan"})

    def test_env_belongs_to_its_arm_and_a_value_may_hold_equals_signs(self):
        a = arms("--ours-env", "GDRAPI_USE_VULKAN=1", "--upstream-env", "A=x=y",
                 "--upstream-env", "B=", "--upstream-env", "A=z")
        self.assertEqual(a[0].env, {"GDRAPI_USE_VULKAN": "1"})
        self.assertEqual(a[1].env, {"A": "z", "B": ""})

    def test_per_arm_args_replace_the_common_args_of_that_tool_only(self):
        a = arms("--args", "copylat=-s 4096", "--args", "apiperf=-n 5",
                 "--ours-args", "copylat=-s 8192 -a cuMemCreateFd")
        self.assertEqual(a[0].overrides, {"copylat": ["-s", "8192", "-a", "cuMemCreateFd"],
                                          "apiperf": ["-n", "5"]})
        self.assertEqual(a[1].overrides, {"copylat": ["-s", "4096"], "apiperf": ["-n", "5"]})
        self.assertEqual(compare.tool_argv("copylat", False, a[0].overrides),
                         ["-s", "8192", "-a", "cuMemCreateFd"])
        self.assertEqual(compare.tool_argv("copybw", True, a[0].overrides)[:2], ["-s", "65536"])

    def test_sim_arms_chooses_which_arms_preload_the_emulator(self):
        self.assertEqual([x.sim for x in arms("--sim", "s")], ["s", "s"])
        self.assertEqual([x.sim for x in arms("--sim", "s", "--sim-arms", "ours")], ["s", None])
        self.assertEqual([x.sim for x in arms("--sim", "s", "--sim-arms", "upstream", "--control")],
                         [None, "s", "s"])

    def test_malformed_options_are_refused_with_the_option_named(self):
        for options, words in (
                (["--sim-arms", "ours"], "--sim-arms ours needs --sim"),
                (["--ours-env", "NOVALUE"], "--ours-env 'NOVALUE'"),
                (["--upstream-env", "=1"], "--upstream-env '=1'"),
                (["--ours-args", "bogus=-x"], "unknown tool 'bogus'"),
                (["--args", "nope=1"], "--args 'nope=1'"),
                (["--names", "one"], "two different labels"),
                (["--names", "a,a"], "two different labels"),
                (["--names", "b-again,b"], "A/A control arm")):
            with self.assertRaises(ValueError) as e:
                arms(*options)
            self.assertIn(words, str(e.exception))

    def test_the_header_names_each_arms_settings_only_where_they_differ(self):
        plain = arms("--sim", "s", "--control")
        self.assertEqual([compare.arm_settings(x, plain) for x in plain], ["", "", ""])
        a = arms("--sim", "s", "--sim-arms", "upstream", "--ours-env", "GDRAPI_USE_VULKAN=1")
        self.assertEqual(compare.arm_settings(a[0], a), "; no emulator; GDRAPI_USE_VULKAN=1")
        self.assertEqual(compare.arm_settings(a[1], a), "; emulator")
        self.assertEqual(compare.header_tool_lines("copylat", True, plain),
                         ["  gdrcopy_copylat -s 65536 -w 1000 -r 100"])
        b = arms("--names", "x,y", "--ours-args", "copylat=-a cuMemCreateFd")
        self.assertEqual(compare.header_tool_lines("copylat", True, b),
                         ["  gdrcopy_copylat -a cuMemCreateFd (x)",
                          "  gdrcopy_copylat -s 65536 -w 1000 -r 100 (y)"])

    def test_an_arms_environment_comes_last(self):
        class Args:
            ucx = None
        a = compare.Arm("emu", "lib", env={"LD_LIBRARY_PATH": "mine", "GDRSIM_BACKING": "vulkan"},
                        sim="sim")
        env = compare.tool_env(Args(), a)
        self.assertEqual((env["LD_LIBRARY_PATH"], env["GDRSIM_BACKING"]), ("mine", "vulkan"))
        self.assertEqual(env["LD_PRELOAD"], "sim/libcuda.so.1")
        env = compare.tool_env(Args(), compare.Arm("vk", "lib", env={"GDRAPI_USE_VULKAN": "1"}))
        self.assertEqual(env["GDRAPI_USE_VULKAN"], "1")
        self.assertTrue(env["LD_LIBRARY_PATH"].startswith("lib"))
        self.assertNotIn("sim", env["LD_LIBRARY_PATH"].split(":"))


if __name__ == "__main__":
    unittest.main()
