"""What the book's pages use beyond the science: ``sp.course``.

The flat namespace keeps the exercise checkers (``sp.check_function``) and the figure style
(``sp.use_book_style``). The page helpers live here, one concept per module, and are re-exported below from
each module's ``__course__`` list (``tests/test_course.py`` keeps the two equal):

* ``_tables``: the book's one test level and how a page prints and decides a check -- ``LEVEL``, ``curve_test``,
  ``depth_test`` (a curve over depth, the input left out), ``verdict``, ``pm`` (mean ± SE), ``sci``, ``pvalue``,
  ``glue`` (numbers for the prose);
* ``_compare``: random transformers against their block map, block by block (``compare_depth``);
* ``_records``: readers of the committed records a page replays (finite-size ladders, training runs);
* ``_typeset``: plain-text formulas of code and records typeset for a page (``alpha_SA``, ``T -> inf``, ``+-``);
* ``_numbered``: a computed table numbered by chapter and captioned (``table``, ``Table``), no index column;
* ``_power``: the curve test's power against a stated offset, by simulation (``curve_power``);
* ``_replay``: Monte Carlo at more initialisations than a page can run, recorded once and replayed (``replayed``);
* ``_ledger``: the claims ledger's table, summary and provenance line, the same on every page;
* ``_plots``: figure helpers shared by pages (trainability diagrams, training curves);
* ``_layers``: small Monte Carlo helpers used only by the synthesis pages;
* ``_explorer``: the trainability explorer (synthesis).
* ``_one_layer``: one random attention layer drawn and measured as the Noci pages 1-2 do;
* ``_gram_depth``: token Gram sums and correlations through a random stack (Noci et al., Sec. 3.2);
* ``_reversal``: the sequence-reversal task and its training runs (Noci et al., App. C.1, Sec. 3.4);
* ``_propagation_mc``: Bao et al.'s signal propagation probability counted and predicted per Fig. 5 cell;
* ``_published``: a published model's block at its default initialisation (the blocks of 2026);

Pages write ``sp.course.pm(est)``; nothing here is imported by the science folders.
"""
from ._tables import (
    LEVEL as LEVEL, N_RESAMPLES as N_RESAMPLES, Z_POINT as Z_POINT, curve_test as curve_test, depth_test as depth_test,
    glue as glue, pm as pm, point_verdict as point_verdict, pvalue as pvalue, sci as sci, smallest_p as smallest_p,
    verdict as verdict, zscore as zscore,
)
from ._compare import DepthComparison as DepthComparison, compare_depth as compare_depth
from ._records import (
    first_step_below as first_step_below, record_maps as record_maps, record_rung as record_rung,
    training_summary as training_summary, yp_shift as yp_shift,
)
from ._typeset import typeset as typeset
from ._numbered import Table as Table, table as table
from ._power import (
    POWER_REPEATS as POWER_REPEATS, curve_power as curve_power, depth_power as depth_power,
    offset_alternative as offset_alternative, power_text as power_text,
    largest_power as largest_power,
)
from ._replay import CHECK_INITS as CHECK_INITS, replayed as replayed
from ._ledger import (
    ledger_provenance as ledger_provenance, ledger_summary as ledger_summary, ledger_table as ledger_table,
)
from ._plots import (
    PHASE_COLORS as PHASE_COLORS, PHASE_COLORS_PALE as PHASE_COLORS_PALE, overview_figure as overview_figure,
    plot_diagram as plot_diagram, plot_training as plot_training,
)
from ._layers import mc_layer_ipr as mc_layer_ipr, mc_overlap_ratio_vs_depth as mc_overlap_ratio_vs_depth
from ._explorer import Exploration as Exploration, explore as explore
from ._one_layer import (
    LayerWeights as LayerWeights, QueryValueRatio as QueryValueRatio, layer_weights as layer_weights,
    mc_query_value_ratio as mc_query_value_ratio, mc_uniform_deviation as mc_uniform_deviation,
)
from ._gram_depth import (
    Fig10Ladder as Fig10Ladder, GramDepth as GramDepth, correlation_panel as correlation_panel,
    equal_norm_tokens as equal_norm_tokens, fig10_ladder as fig10_ladder, mc_gram_depth as mc_gram_depth,
)
from ._reversal import (
    AdamRun as AdamRun, SGDRun as SGDRun, reversal_batch as reversal_batch, reversal_model as reversal_model,
    sgd_table as sgd_table, train_reversal_adam as train_reversal_adam, train_reversal_sgd as train_reversal_sgd,
)
from ._propagation_mc import PropagationCell as PropagationCell, mc_propagation_cell as mc_propagation_cell
from ._published import published_block as published_block
