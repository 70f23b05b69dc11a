"""The `specsweep` command: one console entry point over every command the project has.

cli       `specsweep COMMAND [ARGS]`: the subcommands, each running the module its
          `python -m` form runs (`specsweep reproduce` = `python -m sweep.reproduce`)
__main__  `python -m specsweep`, the same without the installed script

The top layer of the import contracts: it may import every package, and nothing imports it.
"""
