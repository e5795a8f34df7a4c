"""sigprop.course: what the pages use beyond the science (formatters, the book's test level, records, figures).

The namespace (``sp.course.*`` is exactly the modules' ``__course__`` lists), the formatting rules of *How to read
the checks* (book/checks.md), and the verdict words the pages print, which must be the verdicts the hidden checks
assert (one level, 0.001).
"""
from __future__ import annotations

import dataclasses
import math
import importlib
import pathlib
import re

import numpy as np
import pytest
import torch

import sigprop as sp
from sigprop.course import _tables

COURSE = pathlib.Path(sp.course.__file__).parent
MODULES = sorted(p.stem for p in COURSE.glob("_*.py") if p.stem != "__init__")
CHECKS = pathlib.Path(__file__).resolve().parents[1] / "book" / "checks.md"


def test_namespace_is_every_modules_course_list():
    declared = {}
    for m in MODULES:
        for name in getattr(importlib.import_module(f"sigprop.course.{m}"), "__course__", ()):
            assert name not in declared, f"{name} in both {declared[name]} and {m}"
            declared[name] = m
    exported = {n for n in vars(sp.course) if not n.startswith("_") and n not in MODULES}
    assert exported == set(declared), (sorted(exported - set(declared)), sorted(set(declared) - exported))
    for name, m in declared.items():
        assert getattr(sp.course, name) is getattr(importlib.import_module(f"sigprop.course.{m}"), name)


def test_the_level_is_the_one_book_checks_states():
    assert sp.course.LEVEL == 1e-3 and sp.course.Z_POINT == 4.0
    text = CHECKS.read_text()
    assert "One level for the book: 0.001" in text and "|z|" in text and "le 4" in text
    # at this level the curve test needs n >= 13 and more than 2999 resamples (book/checks.md, the curve test)
    assert sp.min_initialisations(sp.course.LEVEL) == 13 and sp.course.N_RESAMPLES > 3 / sp.course.LEVEL - 1


@pytest.mark.parametrize("mean, se, text", [
    (0.43471, 0.00953, "0.4347 ± 0.0095"),
    (-0.0066, 0.0020, "-0.0066 ± 0.0020"),
    (1.4e-4, 8.4e-4, "0.00014 ± 0.00084"),
    (12345.6, 78.9, "12346 ± 79"),
    (3.1e-6, 4.2e-8, "(3.100 ± 0.042) × 10⁻⁶"),
    (2.5e7, 3.1e5, "(2.500 ± 0.031) × 10⁷"),
    (0.25, 0.0, "0.25 ± 0"),
    # the SE rounds up into a new digit: two significant digits after rounding, not three (issue 37, item 6)
    (1.0, 0.0995, "1.00 ± 0.10"),
    (1.0, 0.09949, "1.000 ± 0.099"),
    (2.5e7, 9.99e5, "(2.50 ± 0.10) × 10⁷"),
    (3.0, 99.6, "3 ± 100"),
])
def test_pm_rounds_the_mean_to_the_se(mean, se, text):
    assert sp.course.pm(mean, se) == text


@pytest.mark.parametrize("se", np.geomspace(1e-7, 1e4, 601))
def test_pm_always_shows_the_se_to_two_significant_digits(se):
    shown = sp.course.pm(0.5, se).split(" ± ")[1].split(")")[0]
    assert len(shown.replace(".", "").lstrip("0")) == 2 or float(shown) >= 10, (se, shown)


def test_pm_of_an_estimate_and_refusals():
    est = sp.Estimate(torch.tensor(0.5), torch.tensor(0.0123), 10)
    assert sp.course.pm(est) == "0.500 ± 0.012"
    with pytest.raises(TypeError, match="standard error"):
        sp.course.pm(0.5)
    with pytest.raises(TypeError, match="takes no se"):
        sp.course.pm(est, 0.1)
    with pytest.raises(ValueError, match="single number"):
        sp.course.pm(np.ones(3), 0.1)
    with pytest.raises(ValueError, match="finite"):
        sp.course.pm(float("nan"), 0.1)


@pytest.mark.parametrize("x, text", [(100, "100"), (1e4, "10000"), (0.5, "0.5"), (3.2e-9, "3.2 × 10⁻⁹"),
                                     (10 ** -8.5, "3.2 × 10⁻⁹"), (9.996e-5, "1.0 × 10⁻⁴"), (-2e6, "-2.0 × 10⁶")])
def test_sci_never_prints_a_fractional_power(x, text):
    assert sp.course.sci(x) == text


def test_pvalue():
    assert sp.course.pvalue(0.4231) == "0.42"
    assert sp.course.pvalue(0.0015) == "0.0015"
    assert sp.course.pvalue(1e-4) == "1.0 × 10⁻⁴"
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        sp.course.pvalue(1.5)


def test_verdicts_are_the_tests_at_the_books_level():
    g = torch.Generator().manual_seed(0)
    good = torch.randn(20, 8, generator=g, dtype=torch.float64)
    ca = sp.course.curve_test(good, np.zeros(8))
    assert ca.level == sp.course.LEVEL and ca.n_resamples == sp.course.N_RESAMPLES
    assert ca.passed and sp.course.verdict(ca).startswith("agrees (p = ")
    bad = sp.course.curve_test(good + 3.0, np.zeros(8))
    # the smallest p the test can report is said to be that, not printed as a measurement
    assert sp.course.smallest_p(bad) == 1 / (sp.course.N_RESAMPLES + 1) == bad.p
    assert not bad.passed and sp.course.verdict(bad) == ("disagrees (p ≤ 10⁻⁴, the smallest p 9,999 resamples can "
                                                         "give)")
    assert sp.course.verdict(bad, short=True) == "✗ p ≤ 10⁻⁴"
    exact = sp.course.curve_test(good[:13] + 3.0, np.zeros(8))          # 2^12 = 4096 patterns, all of them used
    assert exact.exact and sp.course.verdict(exact) == ("disagrees (p ≤ 2.4 × 10⁻⁴, the smallest p all 4,096 sign "
                                                        "patterns give)")
    with pytest.raises(ValueError, match="the book tests at level 0.001"):
        sp.course.verdict(sp.curve_agreement(good, np.zeros(8), level=0.01))
    assert sp.course.verdict(3.99) == "agrees (z = +4.0)" and sp.course.verdict(-4.01) == "disagrees (z = -4.0)"
    assert sp.course.verdict(-2.6, short=True) == "✓ z = -2.6"
    assert sp.course.zscore(1.1, 0.05, 1.0) == pytest.approx(2.0)
    # no verdict without a number (issue 37, item 6: verdict(None) was "disagrees (z = +nan)")
    for missing in (None, "0.5", True):
        with pytest.raises(TypeError, match="CurveAgreement or a z-score"):
            sp.course.verdict(missing)
    with pytest.raises(ValueError, match="nan"):
        sp.course.verdict(float("nan"))
    with pytest.raises(TypeError, match="must be a number"):
        sp.course.point_verdict(None)
    assert sp.course.verdict(float("inf")) == "disagrees (z = +inf)"


def test_glue_is_a_no_op_without_myst_nb_and_checks_its_input(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_myst(name, *args, **kwargs):
        if name.startswith("myst_nb"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_myst)
    assert sp.course.glue("key", "0.42 ± 0.01") is None
    assert sp.course.glue("key", np.float64(0.5)) is None
    with pytest.raises(TypeError, match="string or a number"):
        sp.course.glue("key", [1, 2])
    with pytest.raises(ValueError, match="non-empty"):
        sp.course.glue("", 1.0)


def test_compare_depth_names_its_results_and_tests_both_maps():
    cfg = sp.BlockConfig.from_beta(0.1, T=8, d=16, norm="post", alpha_sa=1.5, **sp.presets.GG_APP_C1)
    c = sp.course.compare_depth(cfg, 3, T=8, inits=14, seqs=1, rho0=0.1, generator=0)
    assert c.depth == 3 and c.mc.samples.shape == (14, 4) and c.finite.shape == c.limit.shape == (4,)
    q, p = sp.theory.iterate_block_map(1.0, 0.1, 3, cfg, T=8)
    np.testing.assert_allclose(c.finite, p / q)
    assert c.test.level == c.test_limit.level == sp.course.LEVEL
    gap = (c.mc.samples[:, 1:].double() - torch.as_tensor(c.finite[1:])).mean(1)
    assert float(c.gap.mean) == pytest.approx(float(gap.mean()))
    row = c.row()
    assert row["finite-T map: curve test"] == sp.course.verdict(c.test, short=True)
    assert row["T -> inf map: curve test"] == sp.course.verdict(c.test_limit, short=True)
    assert float(c.last.mean) == pytest.approx(float(c.mc.mean[-1]))


def test_overlap_ratio_pseudo_values_have_the_ratio_as_mean():
    cfg = sp.BlockConfig.from_beta(0.5, T=8, d=16, norm="none", activation="linear", sigma_w2=1.0)
    est = sp.course.mc_overlap_ratio_vs_depth(cfg, 2, T=8, inits=6, seqs=2, generator=1)
    np.testing.assert_allclose(est.samples.mean(0).numpy(), est.mean.numpy(), rtol=1e-12)
    assert est.samples.shape == (6, 3) and float(est.mean[0]) == pytest.approx(float(est.mean[0]))


def test_layer_ipr_matches_the_rem_at_the_equivalent_beta():
    kw = dict(d=64, d_k=64, sigma_qk2=sp.theory.glorot_variance(64, 64), logit_scale=1 / 8, T=16)
    mc = sp.course.mc_layer_ipr(**kw, n=200, generator=0)
    rem = sp.mc_ipr_finite_width([sp.theory.beta_equivalent(**kw)], T=16, d=64, samples=128, generator=1)[0]
    assert abs(float(mc.mean - rem.mean)) <= 4 * float(np.hypot(float(mc.stderr), float(rem.stderr)))


class _Run:                      # the fields of a recorded training run the helpers read
    def __init__(self, loss):
        self.eval_loss = np.asarray(loss, dtype=float)
        self.steps = np.arange(len(loss)) * 100
        self.attention_entropy = np.full_like(self.eval_loss, 2.0)
        self.top_cosine = np.full_like(self.eval_loss, 0.5)

    def gap_closed(self):
        return 1 - self.eval_loss[-1] / 3


def test_first_step_below_and_the_training_summary():
    run = _Run([[3.0, 3.0, 3.0], [2.5, 1.9, 2.6], [1.5, 1.8, 2.4]])
    np.testing.assert_array_equal(sp.course.first_step_below(run, 2.0), [200, 100, np.nan])
    assert sp.course.first_step_below(run, 2.0, mean=True) == 200
    assert np.isnan(sp.course.first_step_below(run, 1.0, mean=True))
    table = sp.course.training_summary({"a": run})
    assert table.loc[0, "seeds"] == 3 and "±" in table.loc[0, "gap closed"]


def test_record_readers_on_a_committed_finite_size_record():
    from sigprop.experiments import load_finite_size

    record = load_finite_size("stack-beta3")[0]
    maps = sp.course.record_maps(record)
    assert set(maps) >= {"map_inf", "map_1/T", "map_rem"}
    assert sp.course.yp_shift(record) == pytest.approx(np.mean(maps["map_rem"][1:] - maps["map_1/T"][1:]))
    assert sp.course.record_rung(record, "d", d=256)["d"] == 256
    with pytest.raises(ValueError, match="expected one"):
        sp.course.record_rung(record, "d", d=3)
    with pytest.raises(ValueError, match="block maps at T"):
        sp.course.record_maps(record, T=3)


def test_depth_test_leaves_the_input_out():
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(16, 6, generator=g, dtype=torch.float64) * 0.01 + 0.5
    curve = np.full(6, 0.5)
    est = sp.estimate(rows)
    res = sp.course.depth_test(est, curve)
    assert res.p == sp.course.curve_test(rows[:, 1:], curve[1:]).p
    curve[0] = 9.0                                                     # the input is no prediction: ignored
    assert sp.course.depth_test(rows, curve).p == res.p
    assert sp.course.depth_test(rows.tolist(), curve).p == res.p                 # nested lists too
    curve[3] = 0.6                                                     # a wrong block is not
    assert not sp.course.depth_test(rows, curve).passed
    with pytest.raises(ValueError, match="depth"):
        sp.course.depth_test(rows, curve[:4])


def test_ledger_table_is_numbered_puts_status_first_and_keeps_sizes_in_the_claim():
    from sigprop.claims import load_record, quote

    record = load_record("giorlandino-goldt2025")
    table = sp.course.ledger_table(record, quote, name="tbl-gg-ledger")
    assert table == sp.course.ledger_table(list(record.values()), name="tbl-gg-ledger")   # a dict or its rows
    assert isinstance(table, sp.course.Table) and len(table.rows) == len(record)
    # five columns (the sizes inside the claim's cell: the table fits 1280 px and the printed page)
    assert table.header == ("status", "claim", "stated", "measured ± SE", "corrected")
    assert re.match(r"<span style='color:#[0-9a-f]{6}'><b>[a-z&;-]+</b></span>", table.rows[0][0])
    markdown = table._repr_markdown_()
    assert markdown.startswith("~~~{list-table} ") and ":name: tbl-gg-ledger" in markdown
    for r in record.values():                                          # every number as claims.quote prints it
        assert quote(r.id, record=record) in markdown
        if r.scale and r.scale.get("measured"):
            assert "sizes: " in dict(zip(record, table.rows))[r.id][1]


def test_ledger_table_typesets_notes_and_keeps_markup_literal():
    from sigprop.claims import load_record

    row = next(iter(load_record("noci2022").values()))
    fake = dataclasses.replace(row, claim="a < b and $\\alpha_1$ for gg2025-fig1e-*", note="sigma_v^2 = 1 +- 0.1, <script>",
                               corrected=None)
    cell = sp.course.ledger_table({row.id: fake}).rows[0][1]
    assert "a &lt; b and $\\alpha_1$ for gg2025-fig1e-\\*" in cell          # math kept, '*' and '<' literal
    assert "$\\sigma_{v}^{2}$ = 1 ± 0.1, &lt;script>" in cell and "<script>" not in cell
    assert "\\(\\alpha_1\\)" in sp.course.ledger_table({row.id: fake})._repr_html_()   # Jupyter: MathJax delimiters
    summary = sp.course.ledger_summary([fake])
    assert summary.startswith("<p class='mathjax_process'>1 claims checked: 1 ")


@pytest.mark.parametrize("text, tex", [
    ("alpha_SA", "$\\alpha_{SA}$"),
    ("T -> inf map", "$T\\to\\infty$ map"),
    ("d -> infinity, Y_p = 1/T", "$d\\to\\infty$, $Y_{p}$ = 1/T"),
    ("sigma_w2 = 2, sigma_v^2 = 1", "$\\sigma_{w}^{2}$ = 2, $\\sigma_{v}^{2}$ = 1"),
    ("a d^-gamma + b, p = 4e-05, 1e4", "a $d^{-\\gamma}$ + b, p = 4 × 10⁻⁵, 10⁴"),
    ("16 inits x 2 sequences, 0.5 +- 0.1", "16 inits × 2 sequences, 0.5 ± 0.1"),
    ("chi2/dof, u^T V_0, sqrt(d)", "$\\chi^2$/dof, $u^{\\top}$ $V_{0}$, √(d)"),
    # left alone: TeX, code, dotted names, identifiers, file names, claim ids, lone letters
    ("$\\beta$ and `alpha_SA` and sp.theory.ipr_finite and map_1/T", "$\\beta$ and `alpha_SA` and sp.theory.ipr_finite and map_1/T"),
    ("record_fig4-qgrad.json, gg2025-fig1e-beta18, --case fig4-qgrad, d = 128",
     "record_fig4-qgrad.json, gg2025-fig1e-beta18, --case fig4-qgrad, d = 128"),
])
def test_typeset_rewrites_only_what_is_unambiguous(text, tex):
    assert sp.course.typeset(text) == tex


def test_table_numbers_captions_and_drops_the_default_index():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame([{"alpha_SA": 1.0, "T -> inf map": 0.512345, "verdict": "- agrees", "n": 16, "x": float("nan")},
                       {"alpha_SA": 1.5, "T -> inf map": 1.2e-6, "verdict": "1. no", "n": 32, "x": True}])
    t = sp.course.table(df, caption="One line with $\\beta$.", name="tbl-test")
    assert t.header == ("$\\alpha_{SA}$", "$T\\to\\infty$ map", "verdict", "n", "x")          # no index column
    assert t.rows[0] == ("1", "0.5123", "- agrees", "16", "—") and t.rows[1][1:] == ("1.200 × 10⁻⁶", "1. no", "32", "yes")
    md = t._repr_markdown_()
    assert md.splitlines()[:4] == ["~~~{list-table} One line with $\\beta$.", ":header-rows: 1", ":name: tbl-test",
                                   ":class: sp-table"]
    # a caption that refers to a figure holds backticks: a backtick fence would end the directive's first line
    assert sp.course.table(df, caption="See {numref}`fig-x`.")._repr_markdown_().startswith("~~~{list-table} See {numref}`fig-x`.")
    assert "  - \\- agrees" in md and "  - 1\\. no" in md                       # not read as list items
    assert "<caption>One line with \\(\\beta\\).</caption>" in t._repr_html_()
    # a meaningful index is the first column, headed by its name; a transposed table by the columns' name
    named = sp.course.table(df.set_index("alpha_SA"), caption="c")
    assert named.header[0] == "$\\alpha_{SA}$" and named.rows[1][0] == "1.5"
    flipped = sp.course.table(df[["alpha_SA", "n"]].set_index("alpha_SA").T.rename_axis(columns="T x Y_p"), caption="c")
    assert flipped.header == ("T × $Y_{p}$", "1", "1.5") and flipped.rows == (("n", "16", "32"),)
    rows = sp.course.table([(1, "a")], columns=["k", "v"], caption="c")
    assert rows.rows == (("1", "a"),)
    with pytest.raises(ValueError, match="one-line caption"):
        sp.course.table(df, caption="two\nlines")
    with pytest.raises(ValueError, match="label"):
        sp.course.table(df, caption="c", name="has space")
    with pytest.raises(ValueError, match="columns"):
        sp.course.table([(1, 2)], caption="c")


def test_ledger_provenance_names_rows_recorded_later():
    from sigprop.claims import load_record

    rows = list(load_record("noci2022").values())[:3]
    later = dict(rows[2].provenance, date="2001-01-01")
    rows[2] = dataclasses.replace(rows[2], provenance=later)
    text = sp.course.ledger_provenance(rows)
    assert text.count("recorded ") == 2 and f"rows {rows[2].id}: recorded 2001-01-01" in text
    assert "`" not in text and "<code>python -m sigprop.claims" in text               # Markdown code as HTML
    dirty = dict(rows[0].provenance, git_dirty=True)
    text = sp.course.ledger_provenance([dataclasses.replace(rows[0], provenance=dirty)])
    assert "with uncommitted changes" in text and "make test</code> reruns the ledger" in text


def test_explore_gives_the_diagrams_verdict_and_both_tests():
    res = sp.course.explore(beta=1.8, alpha_sa=1.0, depth=2, T=8, d=16, inits=13, seed=0)
    assert res.phase == sp.ENTROPY_COLLAPSE and res.verdict == "entropy collapse"
    summary = res.summary()
    assert summary["verdict"] == "entropy collapse" and summary["T = 8 map vs MC"] == sp.course.verdict(res.curve.test)
    assert (res.log_ratio is None) == (not res.uniform)


def test_plots_draw_without_error():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    D = sp.theory.trainability_diagram(np.linspace(0.1, 3, 5), np.linspace(0.5, 3, 4), depth=4,
                                       **sp.presets.GG_APP_C1)
    fig, ax = plt.subplots()
    sp.course.plot_diagram(ax, D, title="t", log_beta=True)
    assert ax.get_xscale() == "log"
    run = _Run([[3.0, 3.0], [2.0, 2.2]])
    run.unigram_loss, run.bayes_loss, run.settings = 2.5, 0.7, {"T": 16}
    fig2 = sp.course.plot_training({"a": run}, {"a": "C0"})
    assert len(fig2.axes) == 4
    overview = sp.course.overview_figure(depth=8)             # the introduction's figure, drawn from the theory
    assert len(overview.axes) == 5                            # the diagram, two attention matrices, two notes
    from sigprop.course._plots import OVERVIEW
    assert (pathlib.Path(__file__).resolve().parents[1] / OVERVIEW).is_file(), f"{OVERVIEW}: regenerate it"
    plt.close("all")


def test_no_page_helper_is_a_private_name_of_another_module():
    """Pages call only names in sp.course; nothing there starts with an underscore."""
    assert not [n for m in MODULES for n in getattr(importlib.import_module(f"sigprop.course.{m}"), "__course__", ())
                if n.startswith("_")]
    assert _tables.LEVEL is sp.course.LEVEL


def test_curve_power_rejects_a_large_offset_and_keeps_the_level_without_one():
    g = torch.Generator().manual_seed(3)
    rows = torch.randn(24, 6, generator=g, dtype=torch.float64).cumsum(1) * 0.1      # correlated points
    theory = rows.mean(0).numpy()
    shift = sp.course.offset_alternative(rows, size=2.0, start=0.5)
    se = rows.std(0).numpy() / np.sqrt(24)
    np.testing.assert_allclose(shift, np.r_[np.zeros(3), 2 * se[3:]])              # 2 SE on the last half only
    big = sp.course.curve_power(rows, theory, size=30.0, repeats=10, generator=0)
    none = sp.course.curve_power(rows, theory, size=1e-9, repeats=20, generator=0)
    assert float(big.mean) == 1.0 and float(none.mean) <= 0.1 and big.n == 10
    more = sp.course.curve_power(rows, theory, size=3.0, n=60, repeats=10, generator=0)   # the same offset, more rows
    assert float(more.mean) >= float(sp.course.curve_power(rows, theory, size=3.0, repeats=10, generator=0).mean)
    depth = sp.course.depth_power(rows, theory, size=30.0, repeats=10, generator=0)     # block 0 left out
    assert float(depth.mean) == 1.0
    with pytest.raises(ValueError, match="depth"):
        sp.course.depth_power(rows, theory[:3])
    rejected = sp.course.curve_test(rows + 1.0, theory)
    assert not rejected.passed and sp.course.power_text(rejected, rows, theory) == "—"
    accepted = sp.course.curve_test(rows, theory)
    assert re.fullmatch(r"[01]\.\d\d \(\d+ of 10\)", sp.course.power_text(accepted, rows, theory, repeats=10))
    tab = sp.course.table([{"check": "a", "power (2 SE)": "0.05 (2 of 40)"}, {"check": "b", "power (2 SE)": "—"},
                           {"check": "c", "power (2 SE)": "0.12 (5 of 40)"}], caption="c")
    assert sp.course.largest_power(tab) == 0.12 and math.isnan(sp.course.largest_power())
    with pytest.raises(ValueError, match="at least 13"):
        sp.course.curve_power(rows, theory, n=12)
    with pytest.raises(ValueError, match="one value per point"):
        sp.course.curve_power(rows, theory[:3])


def test_an_offset_in_units_of_the_spread_is_the_same_at_every_n_and_more_initialisations_see_it():
    g = torch.Generator().manual_seed(5)
    rows = torch.randn(52, 8, generator=g, dtype=torch.float64).cumsum(1) * 0.1 + torch.randn(52, 1, generator=g)
    theory = rows.mean(0).numpy()
    sd = rows.std(0).numpy()
    np.testing.assert_allclose(sp.course.offset_alternative(rows, spread=0.5), np.r_[np.zeros(4), 0.5 * sd[4:]])
    np.testing.assert_allclose(sp.course.offset_alternative(rows[:13], spread=0.5)[4:] / rows[:13].std(0).numpy()[4:], 0.5)
    # half the spread over the last half of a curve that is almost one number: 13 initialisations rarely see it, 52 do
    few = sp.course.curve_power(rows[:13], theory, spread=0.5, repeats=20, generator=0)
    many = sp.course.curve_power(rows, theory, spread=0.5, repeats=20, generator=0)
    assert float(many.mean) >= float(few.mean) + 0.2, (float(few.mean), float(many.mean))
    with pytest.raises(ValueError, match="spread must be a positive number of standard deviations"):
        sp.course.offset_alternative(rows, spread=0.0)
