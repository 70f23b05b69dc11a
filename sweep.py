"""specsweep entry point: `python sweep.py -m` runs the Optuna sweep (see README.md)."""

from sweep.launch.app import main

if __name__ == "__main__":
    main()
