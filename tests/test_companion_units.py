"""The AIS design's calibrated companion fitted per cell (``ais_design(companion_units="cell")``,
``check_units="cell"``; measured and not made the default: ``benchmarks/results/companion_units.md``).

The companion's class shares (``Design.shares``) feed the model-assisted variance and the CLT
check.  Fitted per stratum, a stratum that straddles the decision threshold lends its labeled
predicted positives' rate (all positive) to its unlabeled predicted negatives; per cell --
the units of the finite-pool posterior (``cells.posterior_units``) -- the predicted negatives'
rate comes from their own labels and the calibration curve."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval.ais import ais_design
from bayes_eval.designs import Observed
from test_posterior import MEASURE, _straddling_pool


def _hidden_positives(**units):
    pool, cells, lab = _straddling_pool()
    design, _ = ais_design(MEASURE.g, cells, 8, companion="calibrated", **units)

    @jax.jit
    def shares(lab):
        obs = Observed(lab, jnp.full(cells.loss.shape[-1], jnp.nan), lab.sum())
        state = design.update(design.init(cells), cells, obs)
        return design.shares(state, cells, lab)

    phi = np.asarray(shares(lab))
    size, labeled = np.asarray(cells.size), np.asarray(lab)
    # the straddling stratum's predicted negatives: stratum 7, the cell whose loss is zero for class 0
    pn = (np.asarray(cells.stratum) == 7) & np.all(np.asarray(cells.loss)[:, 0] == 0, axis=-1)
    assert pn.sum() == 1 and size[pn][0] == 20 and labeled[pn].sum() == 10
    return float(np.sum(size[pn] * phi[pn, 1] - labeled[pn, 1]))


def test_the_check_per_cell_does_not_lend_a_strata_positives_to_its_predicted_negatives():
    """Per stratum (the default, and the negative control here) the companion expects
    several positives among the 10 unlabeled predicted negatives of the straddling stratum,
    all of them negative; per cell -- whether only the check's fit is per cell (refitted on
    the cells) or the proposal's too -- under one."""
    per_stratum = _hidden_positives()
    assert per_stratum > 3.0, per_stratum
    for units in (dict(companion_units="stratum", check_units="cell"), dict(companion_units="cell")):
        per_cell = _hidden_positives(**units)
        assert per_cell < 1.0, (units, per_cell)


def test_companion_and_check_units_must_be_stratum_or_cell():
    _, cells, _ = _straddling_pool()
    with pytest.raises(ValueError, match="companion_units"):
        ais_design(MEASURE.g, cells, 8, companion="calibrated", companion_units="item")
    with pytest.raises(ValueError, match="check_units"):
        ais_design(MEASURE.g, cells, 8, companion="calibrated", check_units="item")
