"""Registration shim: Hydra loads sweepers only from the `hydra_plugins` package.

Hydra executes this module without registering it in sys.modules, so no `from __future__`
import here: dataclasses could not resolve string annotations.

The implementation is `sweep.sweeper.SpecsweepSweeperImpl`; see DESIGN.md for why specsweep
has its own sweeper instead of hydra-optuna-sweeper.
"""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore

from sweep.sweeper import SpecsweepSweeperImpl


class SpecsweepSweeper(SpecsweepSweeperImpl):
    """Optuna ask-and-tell sweeper; settings live in the `search` config group."""


@dataclass
class SpecsweepSweeperConf:
    _target_: str = "hydra_plugins.specsweep_sweeper.specsweep_sweeper.SpecsweepSweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="specsweep", node=SpecsweepSweeperConf)
