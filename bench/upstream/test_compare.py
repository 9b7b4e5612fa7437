"""Unit tests of compare.py's pure functions: the verdict on a row and the arms built from the
options (run by make test-bench-upstream)."""

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
